"""Packing a real corpus for LLM pre-training: the CPython standard library's own source files,
tokenised with a byte-level BPE trained here with `tokenizers` (offline: no vocabulary is
downloaded), published as a token stream, packed best-fit into windows (`gl.Packing`) and read
through `guideloom.torch.PackedTokens` — padding at most 2 %, every next-token pair of every
document in exactly one window, labels and position ids as specified, exact resume."""

from __future__ import annotations

import os
import sysconfig
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import guideloom as gl
from guideloom.torch import PackedTokens

try:
    import torch

    TORCH_MISSING = ""
except ImportError:  # as test_torch.py: CI fails without torch unless it was left out on purpose
    if os.environ.get("GUIDELOOM_CI") == "1" and os.environ.get("GUIDELOOM_XTASK_TORCH") != "0":
        raise
    TORCH_MISSING = "skipped: torch is not installed"

needs_torch = pytest.mark.skipif(bool(TORCH_MISSING), reason=TORCH_MISSING)

SEQ_LEN = 1024
FILES = 400


def stdlib_texts() -> list[str]:
    """The first ``FILES`` modules of the standard library (packages included, installed
    third-party packages not), by path."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)[:FILES]
    assert len(paths) == FILES
    return [p.read_text(encoding="utf-8", errors="replace") for p in paths]


def tokenise(texts: list[str]) -> list[np.ndarray[Any, np.dtype[np.uint16]]]:
    """Byte-level BPE of 4 096 tokens trained on ``texts``; each document ends with EOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4096,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    eos = tok.token_to_id("<|endoftext|>")
    encoded = tok.encode_batch(texts)
    assert tok.decode(encoded[0].ids) == texts[0]  # the tokenizer round-trips the source
    return [np.array([*e.ids, eos], dtype=np.uint16) for e in encoded]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[gl.Dataset, list[Any]]:
    docs = tokenise(stdlib_texts())
    root = gl.Root(str(tmp_path_factory.mktemp("stdlib") / "root"))
    per_shard = -(-len(docs) // 4)
    shards = [
        root.write_stream_shard(docs[i : i + per_shard], work_id="tok", shard=n, dtype=np.uint16)
        for n, i in enumerate(range(0, len(docs), per_shard))
    ]
    root.publish(shards, dataset_id="stdlib", snapshot_id="v1")
    return root.open(), docs


def test_the_stdlib_packs_with_at_most_two_percent_padding(
    corpus: tuple[gl.Dataset, list[Any]],
) -> None:
    ds, docs = corpus
    lengths = np.array([len(d) for d in docs])
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    total = int(bounds[-1])
    assert ds.num_tokens() == total
    for epoch in range(2):
        packing = gl.Packing(ds, seq_len=SEQ_LEN, seed=3, epoch=epoch)
        print(
            f"\nstdlib: {len(docs)} documents, {total} tokens (median {int(np.median(lengths))}, "
            f"max {lengths.max()}), epoch {epoch}: {len(packing)} windows of {packing.capacity}, "
            f"{packing.num_pieces} pieces, padding {packing.padding * 100:.3f} %"
        )
        assert packing.padding <= 0.02
        assert packing.padding_tokens == len(packing) * packing.capacity - packing.num_tokens
        # Every next-token pair (t, t + 1) of every document is inside exactly one piece.
        pairs = np.zeros(total, dtype=np.int64)
        held = 0
        for k in range(len(packing)):
            pieces = packing.pieces(k)
            size = sum(b - a for a, b in pieces)
            assert 0 < size <= SEQ_LEN + 1
            held += size
            for a, b in pieces:
                d = int(np.searchsorted(bounds, a, side="right")) - 1
                assert b <= bounds[d + 1]  # a piece stays in its document
                pairs[a : b - 1] += 1
        assert held == packing.num_tokens
        last = bounds[1:] - 1  # a document's last token starts no pair
        inside = np.ones(total, dtype=bool)
        inside[last] = False
        assert (pairs[inside] == 1).all() and (pairs[~inside] == 0).all()


# A reference implementation of docs/loader.md §8 from its text (and §1's permutation, copied
# from its reference): the Rust packing must equal it window for window.
M64 = (1 << 64) - 1
SALT_PACK = 0x7061636B65642121


def mix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def derive_key(seed: int, epoch: int, salt: int, extra: int) -> int:
    return mix64(mix64(mix64(mix64(seed) ^ epoch) ^ salt) ^ extra)


def permutation(n: int, key: int) -> Callable[[int], int]:
    bits = 2 if n <= 4 else (n - 1).bit_length()
    h = (bits + 1) // 2
    mask = (1 << h) - 1
    rk = [mix64(key ^ r) for r in range(6)]

    def feistel(x: int) -> int:
        left, right = x >> h, x & mask
        for k in rk:
            left, right = right, left ^ (mix64(right ^ k) & mask)
        return (left << h) | right

    def apply(i: int) -> int:
        y = feistel(i)
        while y >= n:
            y = feistel(y)
        return y

    return apply


def reference_packing(
    lengths: list[int], *, seq_len: int, labels: bool, seed: int, epoch: int, buffer: int
) -> list[list[tuple[int, int]]]:
    bounds = [0]
    for length in lengths:
        bounds.append(bounds[-1] + length)
    cap = seq_len + int(labels)
    stride = cap - int(labels)
    order = permutation(len(lengths), derive_key(seed, epoch, SALT_PACK, 0))
    pieces = []
    for p in range(len(lengths)):
        d = order(p)
        s, e = bounds[d], bounds[d + 1]
        while e - s > cap:
            pieces.append((s, cap))
            s += stride
        if e > s:
            pieces.append((s, e - s))
    windows: list[list[tuple[int, int]]] = []
    free: dict[int, list[int]] = {}  # room -> windows with that room, the latest last
    for g in range(0, len(pieces), buffer):
        for s, length in sorted(pieces[g : g + buffer], key=lambda piece: -piece[1]):
            fits = [room for room in free if room >= length]
            if fits:
                room = min(fits)
                w = free[room].pop()
                if not free[room]:
                    del free[room]
                left = room - length
            else:
                w = len(windows)
                windows.append([])
                left = cap - length
            windows[w].append((s, s + length))
            if left:
                free.setdefault(left, []).append(w)
    return windows


@pytest.mark.parametrize(("labels", "buffer"), [(True, 4096), (True, 37), (False, 1)])
def test_the_packing_is_the_specified_one(
    corpus: tuple[gl.Dataset, list[Any]], labels: bool, buffer: int
) -> None:
    ds, docs = corpus
    packing = gl.Packing(ds, seq_len=SEQ_LEN, labels=labels, seed=9, epoch=2, buffer=buffer)
    expected = reference_packing(
        [len(d) for d in docs], seq_len=SEQ_LEN, labels=labels, seed=9, epoch=2, buffer=buffer
    )
    assert [packing.pieces(k) for k in range(len(packing))] == expected


def test_batches_hold_the_documents_with_labels_and_positions(
    corpus: tuple[gl.Dataset, list[Any]],
) -> None:
    ds, _ = corpus
    packing = gl.Packing(ds, seq_len=SEQ_LEN, seed=1)
    ks = [0, len(packing) // 2, len(packing) - 1]
    got = packing.batch(ks, pad_id=7, ignore_index=-1)
    assert {name: a.shape for name, a in got.items()} == {
        name: (3, SEQ_LEN) for name in ("input_ids", "labels", "position_ids")
    }
    stacked = packing.batch_array(ks, pad_id=7, ignore_index=-1)
    assert stacked.shape == (3, 3, SEQ_LEN)
    for i, name in enumerate(("input_ids", "labels", "position_ids")):
        np.testing.assert_array_equal(stacked[i], got[name])
    for row, k in enumerate(ks):
        tokens: list[int] = []
        labels: list[int] = []
        positions: list[int] = []
        for a, b in packing.pieces(k):
            piece = [int(t) for t in ds.tokens(a, b)]
            tokens.extend(piece)
            labels.extend([*piece[1:], -1])  # a piece's last token predicts nothing
            positions.extend(range(b - a))
        pad = SEQ_LEN + 1 - len(tokens)
        tokens += [7] * pad
        labels += [-1] * pad
        positions += list(range(pad))
        np.testing.assert_array_equal(got["input_ids"][row], tokens[:SEQ_LEN])
        np.testing.assert_array_equal(got["labels"][row], labels[:SEQ_LEN])
        np.testing.assert_array_equal(got["position_ids"][row], positions[:SEQ_LEN])


def test_without_label_packing_the_labels_are_the_inputs_but_each_pieces_first(
    corpus: tuple[gl.Dataset, list[Any]],
) -> None:
    ds, _ = corpus
    packing = gl.Packing(ds, seq_len=SEQ_LEN, labels=False, seed=4)
    assert packing.capacity == SEQ_LEN and not packing.labels
    ks = [len(packing) - 1, 0]
    got = packing.batch(ks)
    for row, k in enumerate(ks):
        tokens: list[int] = []
        labels: list[int] = []
        for a, b in packing.pieces(k):
            piece = [int(t) for t in ds.tokens(a, b)]
            tokens.extend(piece)
            labels.extend([-100, *piece[1:]])  # models that shift inside: no label across
        pad = SEQ_LEN - len(tokens)
        np.testing.assert_array_equal(got["input_ids"][row], tokens + [0] * pad)
        np.testing.assert_array_equal(got["labels"][row], labels + [-100] * pad)


def rows(batches: Iterator[dict[str, Any]]) -> list[bytes]:
    """Each window's ``input_ids``, labels and positions as bytes, in order."""
    out = []
    for b in batches:
        ids, labels, pos = b["input_ids"], b["labels"], b["position_ids"]
        assert ids.dtype == labels.dtype == pos.dtype == torch.int64
        assert ids.shape == labels.shape == pos.shape and ids.shape[1] == SEQ_LEN
        for i in range(len(ids)):
            out.append(
                ids[i].numpy().tobytes() + labels[i].numpy().tobytes() + pos[i].numpy().tobytes()
            )
    return out


def two_ranks_then_three(make: Callable[[int, int], PackedTokens], batches: int) -> list[bytes]:
    """Epoch 1's windows when two ranks stop after ``batches`` batches each (their states
    agree) and three ranks resume from that state and finish."""
    head, states = [], []
    for rank in range(2):
        d = make(rank, 2)
        d.set_epoch(1)
        head += rows(b for _, b in zip(range(batches), iter(d), strict=False))
        states.append(d.state_dict(batches=batches))
    assert states[0] == states[1]
    rest = []
    for rank in range(3):
        d = make(rank, 3)
        d.load_state_dict(states[0])
        rest += rows(iter(d))
    return head + rest


@needs_torch
def test_packed_tokens_resume_exactly_across_workers_and_world_sizes(
    corpus: tuple[gl.Dataset, list[Any]],
) -> None:
    ds, _ = corpus

    def make(rank: int = 0, world: int = 1) -> PackedTokens:
        return PackedTokens(ds, seq_len=SEQ_LEN, batch_size=8, seed=5, rank=rank, world_size=world)

    full_ds = make()
    full_ds.set_epoch(1)
    full = rows(iter(full_ds))
    assert len(full) == full_ds.windows() == len(full_ds.packing())
    assert len(full_ds) == -(-len(full) // 8)
    # Every window once (identical files make identical windows: compare multisets).
    packing = full_ds.packing()
    every = range(len(packing))
    everything = packing.batch(list(every))
    assert Counter(full) == Counter(
        rows(iter([{k: torch.from_numpy(a) for k, a in everything.items()}]))
    )

    # Through a DataLoader with two workers: the same windows in the same order.
    two = make()
    two.set_epoch(1)
    assert rows(iter(torch.utils.data.DataLoader(two, batch_size=None, num_workers=2))) == full

    # Stop after k batches, save, resume: the rest of the epoch exactly.
    for k in (0, 3, 17):
        first = make()
        first.set_epoch(1)
        head = rows(b for _, b in zip(range(k), iter(first), strict=False))
        state = first.state_dict(batches=k)
        assert state == {"seed": 5, "epoch": 1, "consumed": min(8 * k, len(full))}
        second = make()
        second.load_state_dict(state)
        assert head + rows(iter(second)) == full, k

    # Two ranks stop after 4 batches each; three ranks finish the epoch: every window once.
    assert Counter(two_ranks_then_three(make, 4)) == Counter(full)

    # Another epoch packs differently.
    other = make()
    other.set_epoch(2)
    assert rows(iter(other)) != full


@needs_torch
def test_spawned_workers_pack_again_to_the_same_windows(
    corpus: tuple[gl.Dataset, list[Any]],
) -> None:
    ds, _ = corpus
    data = PackedTokens(ds, seq_len=SEQ_LEN, batch_size=8, seed=2, epoch=3, rank=0, world_size=1)
    spawned = torch.utils.data.DataLoader(
        data, batch_size=None, num_workers=2, multiprocessing_context="spawn"
    )
    assert rows(iter(spawned)) == rows(iter(data))


@needs_torch
def test_throughput_beside_raw_token_reads(corpus: tuple[gl.Dataset, list[Any]]) -> None:
    """Measured, not asserted: windows/s of PackedTokens beside a raw ``Dataset.tokens`` loop
    over the same pieces (the ceiling: the same bytes read, nothing built)."""
    ds, _ = corpus
    packed = PackedTokens(ds, seq_len=SEQ_LEN, batch_size=16, seed=0)
    packing = packed.packing()
    started = time.perf_counter()
    n = sum(len(b["input_ids"]) for b in packed)
    packed_s = time.perf_counter() - started
    started = time.perf_counter()
    for k in range(len(packing)):
        for a, b in packing.pieces(k):
            ds.tokens(a, b)
    raw_s = time.perf_counter() - started
    started = time.perf_counter()
    for k in range(0, len(packing), 16):
        packing.batch(list(range(k, min(k + 16, len(packing)))))
    batch_s = time.perf_counter() - started
    print(
        f"\n{n} windows of {SEQ_LEN}: PackedTokens {n / packed_s:,.0f} windows/s, "
        f"Packing.batch of 16 {n / batch_s:,.0f} windows/s, "
        f"raw Dataset.tokens per piece {n / raw_s:,.0f} windows/s"
    )
    assert n == len(packing)


def test_bad_arguments_are_typed(corpus: tuple[gl.Dataset, list[Any]], tmp_path: Path) -> None:
    ds, _ = corpus
    with pytest.raises(gl.InvalidArgumentError):
        gl.Packing(ds, seq_len=0)
    packing = gl.Packing(ds, seq_len=SEQ_LEN)
    with pytest.raises(IndexError):
        packing.pieces(len(packing))
    with pytest.raises(IndexError):
        packing.batch([len(packing)])
    root = gl.Root(str(tmp_path / "records"))
    root.publish([root.write_shard([b"a", b"b"], work_id="w")], dataset_id="r", snapshot_id="v1")
    with pytest.raises(gl.UnsupportedError):
        gl.Packing(root.open(), seq_len=8)


VOCAB = 4096  # the corpus's BPE vocabulary: the second corpus's tokens are shifted past it


@pytest.fixture(scope="module")
def two_corpora(
    corpus: tuple[gl.Dataset, list[Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[gl.Dataset, gl.Dataset]:
    """The stdlib corpus cut in two roots: its first 250 files as they are ("text"), the
    other 150 with every token shifted by ``VOCAB`` ("code"), so a window's corpus shows."""
    _, docs = corpus
    made = []
    for name, part in (("text", docs[:250]), ("code", [d + VOCAB for d in docs[250:]])):
        root = gl.Root(str(tmp_path_factory.mktemp(name) / "root"))
        shard = root.write_stream_shard(part, work_id="tok", dtype=np.uint16)
        root.publish([shard], dataset_id=name, snapshot_id="v1")
        made.append(root.open())
    return made[0], made[1]


def corpus_tokens(batches: Iterator[dict[str, Any]]) -> list[int]:
    """Input tokens of each corpus (padding left out: labels of -100 beyond a window's
    documents are padding or last tokens; positions say which), over ``batches``."""
    counts = [0, 0]
    for b in batches:
        ids = b["input_ids"].numpy()
        real = b["labels"].numpy() != -100
        counts[0] += int(((ids < VOCAB) & real).sum())
        counts[1] += int(((ids >= VOCAB) & real).sum())
    return counts


@needs_torch
def test_corpora_mix_by_token_share_and_resume(two_corpora: tuple[gl.Dataset, gl.Dataset]) -> None:
    text, code = two_corpora

    def make(rank: int = 0, world: int = 1) -> PackedTokens:
        return PackedTokens(
            [(text, 0.7), (code, 0.3)], seq_len=SEQ_LEN, batch_size=8, seed=3, rank=rank,
            world_size=world,
        )  # fmt: skip

    full_ds = make()
    full_ds.set_epoch(1)
    packings = full_ds.packings()
    mixture = full_ds.mixture()
    assert mixture is not None and len(packings) == 2
    assert len(mixture) == sum(len(p) for p in packings)
    full_batches = list(iter(full_ds))
    full = rows(iter(full_batches))
    assert len(full) == full_ds.windows() == len(mixture)

    # Each corpus's share of the tokens, over the epoch and over its first half: 0.7 / 0.3
    # within the padding's spread (the corpora's own sizes would give about 0.62 / 0.38).
    for part in (full_batches, full_batches[: len(full_batches) // 2]):
        counts = corpus_tokens(iter(part))
        share = counts[1] / sum(counts)
        assert abs(share - 0.3) < 0.02, (share, counts)
    natural = packings[1].num_tokens / (packings[0].num_tokens + packings[1].num_tokens)
    assert abs(natural - 0.3) > 0.05, natural  # the shares did something

    # The windows are the corpora's: each row equals its window of its corpus's packing.
    ids = full_ds.plan().batch(0)
    first = full_batches[0]["input_ids"].numpy()
    for row, i in enumerate(ids):
        s, k = mixture.locate(i)
        assert (first[row] == packings[s].batch_array([k])[0][0]).all()

    # Through two DataLoader workers, and resumed after k batches: the same windows.
    two = make()
    two.set_epoch(1)
    assert rows(iter(torch.utils.data.DataLoader(two, batch_size=None, num_workers=2))) == full
    for k in (0, 5):
        head_ds = make()
        head_ds.set_epoch(1)
        head = rows(b for _, b in zip(range(k), iter(head_ds), strict=False))
        rest_ds = make()
        rest_ds.load_state_dict(head_ds.state_dict(batches=k))
        assert head + rows(iter(rest_ds)) == full, k

    # Two ranks stop after 3 batches each, three finish: every window once.
    assert Counter(two_ranks_then_three(make, 3)) == Counter(full)

    # Another epoch repacks every corpus.
    other = make()
    other.set_epoch(2)
    assert rows(iter(other)) != full
    with pytest.raises(ValueError, match="packings"):
        full_ds.packing()


def test_token_shares_are_checked(two_corpora: tuple[gl.Dataset, gl.Dataset]) -> None:
    text, code = two_corpora
    packings = [gl.Packing(text, seq_len=64), gl.Packing(code, seq_len=64)]
    mixed = gl.Mixture(packings, token_shares=[0.5, 0.5])
    assert mixed.sources[0] is packings[0]
    s, k = mixed.locate(len(packings[0]))
    assert (s, k) == (1, 0)
    # A packing's records in a mixture are its windows' tokens, unpadded, back to back.
    want = b"".join(code.tokens(a, b).tobytes() for a, b in packings[1].pieces(0))
    assert bytes(mixed.get_many_raw([len(packings[0])])[0]) == want
    with pytest.raises(gl.InvalidArgumentError, match="Packing"):
        gl.Mixture([text, packings[1]], token_shares=[0.5, 0.5])
    with pytest.raises(gl.InvalidArgumentError, match="alone"):
        gl.Mixture(packings, token_shares=[0.5, 0.5], weights=[1, 1])
    with pytest.raises(gl.InvalidArgumentError, match="finite"):
        gl.Mixture(packings, token_shares=[float("nan"), 0.5])
    with pytest.raises(TypeError, match=r"Dataset or guideloom\.Packing"):
        gl.Mixture([text, "code"])  # type: ignore[list-item]
    if not TORCH_MISSING:
        with pytest.raises(ValueError, match="pairs"):
            PackedTokens([], seq_len=64, batch_size=2)
