"""LLM pre-training windows from Python: publish tokenised documents as a token stream, pack
whole documents best-fit into windows (`gl.Packing`), and read them as tensors through
`guideloom.torch.PackedTokens` (when torch is installed), resuming mid-epoch, and mixing two
corpora by their share of the tokens."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

import guideloom as gl


def main(directory: Path) -> None:
    rng = np.random.default_rng(0)
    # 2 000 documents of 1 to 3 000 tokens (a vocabulary of 50 000: uint32), EOS = 0 at the end.
    docs = [
        np.append(rng.integers(1, 50_000, size=int(n)), 0)
        for n in rng.lognormal(5, 1.2, size=2_000).clip(1, 3_000)
    ]
    root = gl.Root(str(directory / "corpus"))
    shards = [
        root.write_stream_shard(docs[i : i + 500], work_id="tok", shard=i // 500, dtype=np.uint32)
        for i in range(0, len(docs), 500)
    ]
    root.publish(shards, dataset_id="corpus", snapshot_id="v1")
    ds = root.open()

    packing = gl.Packing(ds, seq_len=1024, seed=7, epoch=0)  # windows of 1024 + 1 tokens
    assert packing.padding < 0.02
    print(f"{len(packing)} windows, {packing.num_pieces} pieces, padding {packing.padding:.3%}")
    batch = packing.batch([0, 1, 2, 3])  # numpy int64 arrays of shape (4, 1024)
    assert batch["input_ids"].shape == batch["labels"].shape == (4, 1024)
    (a, b), *_ = packing.pieces(0)  # window 0 starts with stream tokens a..b
    np.testing.assert_array_equal(batch["input_ids"][0, : b - a], ds.tokens(a, min(b, a + 1024)))
    assert batch["position_ids"][0, 0] == 0

    try:
        import torch
        from torch.utils.data import DataLoader
    except ImportError:
        return
    from guideloom.torch import PackedTokens

    data = PackedTokens(ds, seq_len=1024, batch_size=8, seed=7, rank=0, world_size=1)
    steps = 0
    for step, batch_t in enumerate(DataLoader(data, batch_size=None, num_workers=2)):
        assert batch_t["input_ids"].shape == (8, 1024) and batch_t["input_ids"].dtype == torch.int64
        if step == 9:
            steps = step + 1
            break
    state = data.state_dict(batches=steps)  # {"seed": 7, "epoch": 0, "consumed": 80}
    resumed = PackedTokens(ds, seq_len=1024, batch_size=8, seed=7, rank=0, world_size=1)
    resumed.load_state_dict(state)
    rest = sum(len(b["input_ids"]) for b in DataLoader(resumed, batch_size=None))
    assert 80 + rest == len(packing)

    # A second corpus of short documents (tokens from 50 000 up), mixed 3 : 1 by tokens.
    short = gl.Root(str(directory / "short"))
    chats = [
        np.append(rng.integers(50_000, 60_000, size=int(n)), 0) for n in rng.integers(5, 60, 3_000)
    ]
    short.publish(
        [short.write_stream_shard(chats, work_id="tok", dtype=np.uint32)],
        dataset_id="chats",
        snapshot_id="v1",
    )
    mixed = PackedTokens(
        [(ds, 0.75), (short.open(), 0.25)], seq_len=1024, batch_size=8, seed=7, rank=0, world_size=1
    )
    tokens = [0, 0]  # long corpus, short corpus (padding left out)
    for b in DataLoader(mixed, batch_size=None, num_workers=2):
        real = b["labels"] != -100
        tokens[1] += int(((b["input_ids"] >= 50_000) & real).sum())
        tokens[0] += int(((b["input_ids"] < 50_000) & real).sum())
    share = tokens[1] / sum(tokens)
    print(f"short corpus: {share:.3f} of the tokens (asked 0.25)")
    assert abs(share - 0.25) < 0.02


if __name__ == "__main__":
    with TemporaryDirectory() as tmp:
        main(Path(tmp))
