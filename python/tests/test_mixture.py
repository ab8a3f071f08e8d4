"""guideloom.Mixture: datasets mixed by weight or per-epoch counts, its order checked against
the reference implementation in docs/loader.md (run here, up to position 10**12), its reads,
its errors, and the torch datasets over it (DataLoader workers, resume across world sizes)."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import guideloom as gl
from conftest import HttpRoot

DOCS = Path(__file__).resolve().parents[2] / "docs" / "loader.md"


def reference() -> dict[str, Any]:
    """The Python blocks of docs/loader.md (the single-source order, then the mixture's),
    executed: their functions."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    names: dict[str, Any] = {}
    for block in blocks:
        exec(block, names)  # our own documentation
    assert "mixture_record" in names and "permutation" in names
    return names


def publish(root: Path, tag: str, n: int, shard: int = 40) -> gl.Dataset:
    refs = [
        gl.write_shard(
            ({"src": tag, "i": i} for i in range(a, min(a + shard, n))),
            root,
            work_id="w",
            shard=k,
        )
        for k, a in enumerate(range(0, n, shard))
    ]
    gl.publish(root, refs, dataset_id=tag, snapshot_id="s")
    return gl.open(root)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> list[gl.Dataset]:
    base = tmp_path_factory.mktemp("mix")
    return [
        publish(base / "a", "a", 200),
        publish(base / "b", "b", 90),
        publish(base / "c", "c", 7),
    ]


def test_the_order_is_the_documented_one(roots: list[gl.Dataset]) -> None:
    ref = reference()
    weights = [0.5, 0.3, 0.2]
    mix = gl.Mixture(roots, weights=weights, epoch_size=400)
    lengths = [len(d) for d in roots]
    units = ref["units"](weights)
    for seed, epoch in [(0, 0), (7, 3)]:
        plan = gl.EpochPlan(mix, batch_size=16, seed=seed, epoch=epoch, shuffle="full")
        got = [mix.locate(i) for i in plan.records()]
        want = [
            ref["mixture_record"](seed, lengths, [(0, units)], epoch * 400 + p) for p in range(400)
        ]
        assert got == want


def test_far_positions_and_schedules_match_the_reference(roots: list[gl.Dataset]) -> None:
    ref = reference()
    lengths = [len(d) for d in roots]
    # Counts: units are the counts, one phase; position 10**12 and on.
    e = 2 * 10**12
    mix = gl.Mixture(roots, choose=[e // 2, e // 4, None], repeat=[None, None, e // 4 / 7])
    plan = gl.EpochPlan(mix, batch_size=64, seed=3, shuffle="full", start=10**12)
    units = [e // 2, e // 4, e // 4]
    first = [mix.locate(i) for i in plan.batch(0)]
    assert first == [ref["mixture_record"](3, lengths, [(0, units)], 10**12 + p) for p in range(64)]
    # A linear schedule: phases every 2 steps of 8 positions, checked at every position.
    mix = gl.Mixture(
        roots,
        weights=[1.0, 1.0, 1.0],
        schedule=[(1, [1.0, 0.0, 0.0]), (7, [0.0, 1.0, 1.0])],
        every=2,
        epoch_size=80,
    )
    phases = [(0, ref["units"]([1.0, 1.0, 1.0]))]
    for t in (1, 3, 5):
        f = (t - 1) / 6
        phases.append((t * 8, ref["units"]([1.0 + (0.0 - 1.0) * f, f, f])))
    phases.append((7 * 8, ref["units"]([0.0, 1.0, 1.0])))
    plan = gl.EpochPlan(mix, batch_size=8, seed=1, epoch=1, shuffle="full")
    got = [mix.locate(i) for i in plan.records()]
    assert got == [ref["mixture_record"](1, lengths, phases, 80 + p) for p in range(80)]


def test_reads_decode_each_source_and_ids_locate(roots: list[gl.Dataset]) -> None:
    mix = gl.Mixture(roots, repeat=[1.0, 2.0, None], ranges=[None, (10, 40), None])
    assert len(mix) == 200 + 30 + 7
    assert mix.locate(0) == (0, 0)
    assert mix.locate(200) == (1, 10)
    assert mix.locate(236) == (2, 6)
    assert mix[201] == {"src": "b", "i": 11}
    got = mix.get_many([236, 0, 205, 205])
    assert got == [{"src": "c", "i": 6}, {"src": "a", "i": 0}, {"src": "b", "i": 15}] * 1 + [
        {"src": "b", "i": 15}
    ]
    assert len(mix.get_many_raw([1, 2])) == 2
    with pytest.raises(gl.IndexOutOfRangeError):
        mix.locate(237)
    plan = gl.EpochPlan(mix, batch_size=10, seed=2)
    counts = Counter(mix.locate(i)[0] for i in plan.records())
    assert counts == {0: 200, 1: 60, 2: 7}
    assert all(10 <= mix.locate(i)[1] < 40 for i in plan.records() if mix.locate(i)[0] == 1)


def test_bad_mixtures_are_refused_by_name(roots: list[gl.Dataset]) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"weights": [1.0, 1.0]}, "2 entries for 3 sources"),
        ({"weights": [1.0, 1.0, 1.0], "choose": [1, 2, 3]}, "not both"),
        ({"weights": [1.0, float("nan"), 1.0]}, "finite"),
        ({"choose": [1, None, None], "repeat": [1.0, 1.0, 1.0]}, "both choose and repeat"),
        ({"ranges": [None, (5, 100), None]}, "not within its 90 records"),
        ({"schedule": [(3, [1.0])]}, "1 weights for 3 sources"),
        ({"every": 2}, "pass schedule="),
    ]
    for kwargs, says in cases:
        with pytest.raises(gl.InvalidArgumentError, match=re.escape(says)):
            gl.Mixture(roots, **kwargs)
    with pytest.raises(gl.InvalidArgumentError, match="at least one source"):
        gl.Mixture([])


def test_a_mixture_reads_its_remote_shares_ahead(
    roots: list[gl.Dataset], http_root: HttpRoot
) -> None:
    publish(http_root.directory, "h", 150)
    far = gl.open(http_root.url)
    mix = gl.Mixture([far, roots[1]], weights=[0.7, 0.3], epoch_size=200)
    plan = gl.EpochPlan(mix, batch_size=12, seed=5)
    direct = [mix.get_many(plan.batch(k)) for k in range(len(plan))]
    ahead = mix.read_ahead(plan, batches_ahead=4)
    assert list(ahead) == direct
    assert ahead.held_bytes == 0
    # Every other batch, from the second: a worker's share.
    odd = list(mix.read_ahead(plan, start=1, step=2, raw=True))
    assert [[bytes(r) for r in b] for b in odd] == [
        [bytes(r) for r in mix.get_many_raw(plan.batch(k))] for k in range(1, len(plan), 2)
    ]
    assert {r["src"] for b in direct for r in b} == {"h", "b"}
    with pytest.raises(ValueError, match="at least 1"):
        mix.read_ahead(plan, batches_ahead=0)


try:
    import torch  # noqa: F401
    from torch.utils.data import DataLoader

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
    if os.environ.get("GUIDELOOM_CI") == "1" and os.environ.get("GUIDELOOM_XTASK_TORCH") != "0":
        raise

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")


@needs_torch
def test_torch_datasets_read_a_mixture_with_workers(roots: list[gl.Dataset]) -> None:
    from guideloom.torch import Dataset, IterableDataset

    mix = gl.Mixture(roots, weights=[0.6, 0.3, 0.1], epoch_size=300)
    ds = IterableDataset(mix, batch_size=10, seed=4)
    seen = [
        (src, int(i))
        for b in DataLoader(ds, batch_size=10, num_workers=2, multiprocessing_context="fork")
        for src, i in zip(b["src"], b["i"], strict=True)
    ]
    plan = gl.EpochPlan(mix, batch_size=10, seed=4)
    names = "abc"
    assert seen == [(names[s], i) for s, i in (mix.locate(x) for x in plan.records())]
    assert Counter(s for s, _ in seen) == {"a": 180, "b": 90, "c": 30}
    # Map-style, through the batch sampler.
    mds = Dataset(mix, seed=4)
    loader = DataLoader(mds, batch_sampler=mds.batch_sampler(10), num_workers=2)
    again = [(src, int(i)) for b in loader for src, i in zip(b["src"], b["i"], strict=True)]
    assert again == seen


@needs_torch
def test_torch_reads_a_far_mixture_ahead(roots: list[gl.Dataset], http_root: HttpRoot) -> None:
    from guideloom.torch import Dataset, IterableDataset

    publish(http_root.directory, "h", 150)
    mix = gl.Mixture([gl.open(http_root.url), roots[0]], weights=[0.5, 0.5], epoch_size=160)

    def run(ds: Any, **kwargs: Any) -> list[tuple[str, int]]:
        return [
            (src, int(i))
            for b in DataLoader(ds, num_workers=2, multiprocessing_context="fork", **kwargs)
            for src, i in zip(b["src"], b["i"], strict=True)
        ]

    ahead = run(IterableDataset(mix, batch_size=8, seed=2, read_ahead=4), batch_size=8)
    direct = run(IterableDataset(mix, batch_size=8, seed=2, read_ahead=0), batch_size=8)
    assert ahead == direct and len(ahead) == 160
    mapped = Dataset(mix, seed=2, read_ahead=4)
    assert run(mapped, batch_sampler=mapped.batch_sampler(8)) == ahead


def _build_mixture() -> gl.Mixture:
    roots = [gl.open(p) for p in os.environ["GL_MIX_ROOTS"].split(os.pathsep)]
    return gl.Mixture(roots, weights=[0.5, 0.3, 0.2], epoch_size=200)


@needs_torch
def test_a_spawned_worker_builds_the_mixture_again(roots: list[gl.Dataset]) -> None:
    from guideloom.torch import IterableDataset

    os.environ["GL_MIX_ROOTS"] = os.pathsep.join(d.uri for d in roots)
    ds = IterableDataset(_build_mixture, batch_size=8, seed=1)
    got = [
        int(i)
        for b in DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context="spawn")
        for i in b["i"]
    ]
    assert len(got) == 200
    with pytest.raises(TypeError, match="builds the mixture"):
        import pickle

        pickle.dumps(IterableDataset(_build_mixture(), batch_size=8))


@needs_torch
def test_torch_resume_across_8_3_16_ranks(roots: list[gl.Dataset]) -> None:
    from guideloom.torch import IterableDataset

    mix = gl.Mixture(roots, weights=[0.5, 0.3, 0.2], epoch_size=480)

    def run(world: int, state: Any, batches: int | None) -> tuple[dict[int, list[Any]], Any]:
        got: dict[int, list[Any]] = {}
        states = []
        for rank in range(world):
            ds = IterableDataset(mix, batch_size=6, seed=9, rank=rank, world_size=world)
            if state is not None:
                ds.load_state_dict(state)
            plan = ds.plan()
            records = iter(ds)
            n = len(plan) if batches is None else batches
            for k in range(n):
                got[plan.global_batch(k)] = [next(records) for _ in plan.batch(k)]
            states.append(ds.state_dict(n))
        if batches is not None:  # ranks in lockstep agree; at the end they may differ by one
            assert all(s == states[0] for s in states)
        return got, max(states, key=lambda s: s["consumed"])

    single, _ = run(1, None, None)
    a, s1 = run(8, None, 4)
    b, s2 = run(3, s1, 7)
    c, s3 = run(16, s2, None)
    assert s3["consumed"] == 480
    joined = [a[k] for k in sorted(a)] + [b[k] for k in sorted(b)] + [c[k] for k in sorted(c)]
    assert joined == [single[k] for k in sorted(single)]
