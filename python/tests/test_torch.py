"""guideloom.torch with the real torch.utils.data.DataLoader (2 workers, fork and spawn).

The order is checked against the Rust `Loader` itself: the `python_interop` example's `order`
command runs it over the same root and prints its batches. torch comes from the venv
`cargo xtask ci` builds; without it these tests fail under GUIDELOOM_CI=1 unless torch was
left out on purpose (GUIDELOOM_XTASK_TORCH=0).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import guideloom as gl
from conftest import CloudRoot, S3Root

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError:
    if os.environ.get("GUIDELOOM_XTASK_TORCH") == "0":
        pytest.skip("skipped: torch left out (GUIDELOOM_XTASK_TORCH=0)", allow_module_level=True)
    if os.environ.get("GUIDELOOM_CI") == "1":
        raise
    pytest.skip("skipped: torch is not installed", allow_module_level=True)

from guideloom.torch import Dataset, IterableDataset, LoaderState
from test_interop import example

# Uneven shards: no count divides by the batch size, the world size or the worker count.
SHARDS = (37, 50, 16)
N = sum(SHARDS)
BATCH = 8


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torch") / "root"
    refs, start = [], 0
    for n, count in enumerate(SHARDS):
        refs.append(
            gl.write_shard(
                ({"i": i} for i in range(start, start + count)), root, work_id="w", shard=n
            )
        )
        start += count
    gl.publish(root, refs, dataset_id="torch", snapshot_id="s")
    return root


def indices(batches: Iterable[dict[str, Any]]) -> list[list[int]]:
    """The record indices of each collated batch (records are ``{"i": index}``)."""
    out = []
    for b in batches:
        assert isinstance(b["i"], torch.Tensor)
        out.append([int(x) for x in b["i"].tolist()])
    return out


def rust_batches(
    root: Path,
    *,
    seed: int,
    epoch: int,
    rank: int,
    world: int,
    shuffle: str = "auto",
    equalize: str = "none",
    drop_last: bool = False,
    start: int = 0,
) -> list[list[int]]:
    """The batches the Rust Loader delivers to `rank`."""
    args = [
        str(a) for a in (seed, epoch, BATCH, rank, world, shuffle, equalize, int(drop_last), start)
    ]
    out = subprocess.run(
        [example(), "order", root, *args], capture_output=True, text=True, check=True
    ).stdout
    return [[int(x) for x in line.split(",")] for line in out.splitlines()]


def load(ds: IterableDataset | Dataset, context: str | None, **kw: Any) -> list[list[int]]:
    if isinstance(ds, Dataset):
        loader = DataLoader(
            ds,
            batch_sampler=ds.batch_sampler(BATCH, epoch=kw.pop("epoch", 0)),
            num_workers=2 if context else 0,
            multiprocessing_context=context,
            **kw,
        )
    else:
        loader = DataLoader(
            ds,
            batch_size=BATCH,
            num_workers=2 if context else 0,
            multiprocessing_context=context,
            **kw,
        )
    return indices(loader)


def test_epoch_plan_is_the_documented_order() -> None:
    # The vector of the Rust `guideloom::order` docs: the same on every machine.
    plan = gl.EpochPlan(10, batch_size=10, shuffle="full")
    assert plan.batch(0) == [2, 9, 7, 8, 3, 0, 4, 5, 1, 6]


@pytest.mark.parametrize(
    ("seed", "epoch", "rank", "world", "shuffle", "equalize", "drop_last"),
    [
        (0, 0, 0, 1, "auto", "none", False),
        (7, 3, 1, 3, "auto", "none", False),
        (7, 3, 2, 3, "full", "pad", False),
        (1, 2, 0, 2, "window2", "none", True),
        (5, 1, 1, 4, "window1", "drop", False),
        (3, 0, 1, 2, "sequential", "pad", True),
    ],
)
def test_python_order_is_the_rust_loaders(
    root: Path,
    seed: int,
    epoch: int,
    rank: int,
    world: int,
    shuffle: str,
    equalize: Any,
    drop_last: bool,
) -> None:
    expected = rust_batches(
        root,
        seed=seed,
        epoch=epoch,
        rank=rank,
        world=world,
        shuffle=shuffle,
        equalize=equalize,
        drop_last=drop_last,
    )
    window = int(shuffle[6:]) if shuffle.startswith("window") else 4
    mode: Any = "window" if shuffle.startswith("window") else shuffle
    common: dict[str, Any] = dict(
        seed=seed,
        shuffle=mode,
        window=window,
        rank=rank,
        world_size=world,
        equalize=equalize,
        drop_last=drop_last,
    )
    it = IterableDataset(str(root), batch_size=BATCH, epoch=epoch, **common)
    assert load(it, None) == expected
    assert len(it) == sum(len(b) for b in expected)
    mapped = Dataset(root, **common)
    assert [mapped.plan(BATCH, epoch=epoch).batch(k) for k in range(len(expected))] == expected
    assert load(mapped, None, epoch=epoch) == expected


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("style", ["iterable", "map"])
def test_every_record_once_per_epoch_across_ranks_and_workers(
    root: Path, context: str, style: str
) -> None:
    world = 3
    seen: list[int] = []
    for rank in range(world):
        if style == "iterable":
            ds: IterableDataset | Dataset = IterableDataset(
                root, batch_size=BATCH, seed=11, epoch=2, rank=rank, world_size=world
            )
            got = load(ds, context)
        else:
            ds = Dataset(root, seed=11, rank=rank, world_size=world)
            got = load(ds, context, epoch=2)
        # Two workers, still the Rust loader's batches in its order.
        assert got == rust_batches(root, seed=11, epoch=2, rank=rank, world=world)
        seen.extend(i for b in got for i in b)
    assert sorted(seen) == list(range(N))
    assert seen != sorted(seen)  # shuffled


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_same_order_on_a_rerun_and_a_new_order_per_epoch(root: Path, context: str) -> None:
    ds = IterableDataset(root, batch_size=BATCH, seed=3, rank=1, world_size=2)
    first = load(ds, context)
    assert (
        load(IterableDataset(root, batch_size=BATCH, seed=3, rank=1, world_size=2), context)
        == first
    )
    ds.set_epoch(1)
    assert load(ds, context) != first


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_resume_continues_exactly(root: Path, context: str) -> None:
    options: dict[str, Any] = dict(batch_size=BATCH, seed=9, rank=0, world_size=2)
    ds = IterableDataset(root, **options)
    ds.set_epoch(4)
    whole = load(ds, context)
    taken = []
    for batch in DataLoader(ds, batch_size=BATCH, num_workers=2, multiprocessing_context=context):
        taken.append(batch)
        if len(taken) == 3:
            break  # the job stops here
    state = ds.state_dict(batches=3)
    assert state == {"seed": 9, "epoch": 4, "consumed": 3 * 2 * BATCH}
    resumed = IterableDataset(root, **options)
    resumed.load_state_dict(state)
    rest = load(resumed, context)
    assert indices(taken) + rest == whole
    # The state of a resumed run counts from where it started.
    assert resumed.state_dict(batches=1)["consumed"] == state["consumed"] + 2 * BATCH


def test_resume_in_process_counts_itself_and_across_world_sizes(root: Path) -> None:
    ds = IterableDataset(root, batch_size=BATCH, seed=2, rank=0, world_size=1)
    loader = iter(DataLoader(ds, batch_size=BATCH))
    first = [next(loader) for _ in range(5)]
    state: LoaderState = ds.state_dict()  # no workers: the dataset counted the batches itself
    assert state["consumed"] == 5 * BATCH
    # Two ranks continue what one rank started: together they read exactly the rest.
    rest: list[int] = []
    for rank in range(2):
        part = IterableDataset(root, batch_size=BATCH, seed=2, rank=rank, world_size=2)
        part.load_state_dict(state)
        rest.extend(i for b in load(part, "fork") for i in b)
    assert sorted([i for b in indices(first) for i in b] + rest) == list(range(N))


def test_equal_batch_counts_on_request(root: Path) -> None:
    world = 4  # 103 records = 13 batches of 8: not a multiple of 4
    cases: list[tuple[Any, int]] = [("pad", 4), ("drop", 3)]
    for equalize, expected in cases:
        counts = {
            len(
                load(
                    IterableDataset(
                        root, batch_size=BATCH, rank=r, world_size=world, equalize=equalize
                    ),
                    None,
                )
            )
            for r in range(world)
        }
        assert counts == {expected}
    uneven = [
        len(load(IterableDataset(root, batch_size=BATCH, rank=r, world_size=world), None))
        for r in range(world)
    ]
    assert uneven == [4, 3, 3, 3]


def test_getitems_reads_a_batch(root: Path) -> None:
    ds = Dataset(root)
    assert len(ds) == N
    assert ds[5] == {"i": 5}
    assert ds.__getitems__([40, 3, 102, 3]) == [{"i": 40}, {"i": 3}, {"i": 102}, {"i": 3}]
    batch = next(iter(DataLoader(ds, batch_size=4, num_workers=0)))
    assert batch["i"].tolist() == [0, 1, 2, 3]


def test_sources_an_opened_dataset_and_a_storage(root: Path, tmp_path: Path) -> None:
    opened = gl.open(root)
    assert load(IterableDataset(opened, batch_size=BATCH, seed=4), "spawn") == load(
        IterableDataset(root, batch_size=BATCH, seed=4), None
    )
    storage = gl.DocumentStorage(tmp_path / "docs", "cbor", max_shard_records=10)
    with storage.sync_writer() as w:
        for i in range(25):
            w.append(i, {"i": i})
    ds = IterableDataset(storage, batch_size=BATCH, seed=4)
    got = load(ds, "fork")
    assert sorted(i for b in got for i in b) == list(range(25))
    with pytest.raises(TypeError, match="DocumentStorage"):
        load(ds, "spawn")


def test_an_s3_root_in_spawned_workers(s3_root: S3Root) -> None:
    shard = gl.write_shard(
        ({"i": i} for i in range(30)), s3_root.uri, work_id="w", s3=s3_root.options
    )
    gl.publish(s3_root.uri, [shard], dataset_id="d", snapshot_id="s", s3=s3_root.options)
    ds = IterableDataset(s3_root.uri, batch_size=BATCH, s3=s3_root.options, seed=1)
    got = load(ds, "spawn")
    assert sorted(i for b in got for i in b) == list(range(30))
    assert got == load(
        IterableDataset(
            gl.open(s3_root.uri, s3=s3_root.options), batch_size=BATCH, s3=s3_root.options, seed=1
        ),
        "spawn",
    )


def test_a_gs_or_az_root_in_spawned_workers(cloud_root: CloudRoot) -> None:
    # GcsOptions and AzureOptions travel to the spawned workers by pickle.
    shard = gl.write_shard(
        ({"i": i} for i in range(30)), cloud_root.uri, work_id="w", **cloud_root.call
    )
    gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **cloud_root.call)
    ds = IterableDataset(cloud_root.uri, batch_size=BATCH, seed=1, **cloud_root.call)
    got = load(ds, "spawn")
    assert sorted(i for b in got for i in b) == list(range(30))
    opened = gl.open(cloud_root.uri, **cloud_root.call)
    assert got == load(
        IterableDataset(opened, batch_size=BATCH, seed=1, **cloud_root.call), "spawn"
    )


def test_bad_options_are_typed_errors(root: Path) -> None:
    with pytest.raises(gl.InvalidArgumentError, match="rank 3"):
        IterableDataset(root, batch_size=BATCH, rank=3, world_size=3)
    with pytest.raises(gl.InvalidArgumentError, match="shuffle"):
        IterableDataset(root, batch_size=BATCH, shuffle="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        IterableDataset(root, batch_size=0)
    with pytest.raises(ValueError, match="both"):
        Dataset(root, rank=1)
    ds = IterableDataset(root, batch_size=BATCH, seed=1)
    with pytest.raises(ValueError, match="seed"):
        ds.load_state_dict({"seed": 2, "epoch": 0, "consumed": 0})
    with pytest.raises(gl.InvalidArgumentError, match="multiple of the batch size"):
        ds.load_state_dict({"seed": 1, "epoch": 0, "consumed": 3})
    with pytest.raises(ValueError, match="batches="):
        ds.state_dict()  # nothing iterated here: the count would be a guess
    with pytest.raises(TypeError, match="source"):
        Dataset(42)  # type: ignore[arg-type]


def test_the_map_style_sampler_resumes_too(root: Path) -> None:
    ds = Dataset(root, seed=6, rank=1, world_size=2)
    sampler = ds.batch_sampler(BATCH)
    sampler.set_epoch(5)
    whole = indices(
        DataLoader(ds, batch_sampler=sampler, num_workers=2, multiprocessing_context="fork")
    )
    assert whole == rust_batches(root, seed=6, epoch=5, rank=1, world=2)
    state = sampler.state_dict(batches=2)
    again = ds.batch_sampler(BATCH)
    again.load_state_dict(state)
    assert len(again) == len(whole) - 2
    rest = indices(
        DataLoader(ds, batch_sampler=again, num_workers=2, multiprocessing_context="fork")
    )
    assert whole[:2] + rest == whole


def publish_120(directory: Path) -> None:
    """Records ``{"i": 0..120}`` in three shards of 40."""
    shards = []
    for n in range(3):
        records = ({"i": i} for i in range(n * 40, n * 40 + 40))
        shards.append(gl.write_shard(records, directory, work_id="w", shard=n))
    gl.publish(directory, shards, dataset_id="d", snapshot_id="s")


def test_an_http_root_read_ahead_in_forked_workers(http_root: Any) -> None:
    publish_120(http_root.directory)
    ahead = IterableDataset(http_root.url, batch_size=BATCH, seed=3, read_ahead=4)
    one_at_a_time = IterableDataset(http_root.url, batch_size=BATCH, seed=3, read_ahead=0)
    got = load(ahead, "fork")
    assert sorted(i for b in got for i in b) == list(range(120))
    assert got == load(one_at_a_time, "fork")
    assert load(ahead, None) == load(one_at_a_time, None)
    with pytest.raises(ValueError, match="negative"):
        IterableDataset(http_root.url, batch_size=BATCH, read_ahead=-1)


def test_an_http_root_map_style_reads_ahead(http_root: Any) -> None:
    publish_120(http_root.directory)
    ahead = Dataset(http_root.url, seed=3, read_ahead=4)
    plain = Dataset(http_root.url, seed=3, read_ahead=0)
    got = load(ahead, "fork")
    assert sorted(i for b in got for i in b) == list(range(120))
    assert got == load(plain, "fork")
    assert load(ahead, None, epoch=1) == load(plain, None, epoch=1)
    assert ahead._ahead is not None, "in-process, the sampler's plan was read ahead"
    assert plain._ahead is None
    # Without the sampler there is no plan to follow: each batch is read when asked.
    other = Dataset(http_root.url, seed=3)
    loaded = indices(DataLoader(other, batch_size=BATCH))
    assert loaded == [list(range(i, min(i + BATCH, 120))) for i in range(0, 120, BATCH)]
    assert other._ahead is None


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_raw_records_collate_and_travel(tmp_path: Path, context: str) -> None:
    from guideloom.torch import RawBatch

    root = tmp_path / "raw"
    records = [bytes([i % 251]) * (i % 17) for i in range(50)]
    shard = gl.write_shard(records, root, work_id="w", format="raw")
    gl.publish(root, [shard], dataset_id="raw", snapshot_id="s")

    ds = IterableDataset(root, batch_size=BATCH, shuffle=False)
    batches = list(DataLoader(ds, batch_size=BATCH, num_workers=2, multiprocessing_context=context))
    assert all(isinstance(b, RawBatch) for b in batches)
    assert [r for b in batches for r in b.tolist()] == records
    assert bytes(batches[0][3]) == records[3]
    assert len(batches[-1]) == 50 % BATCH

    # Without a collate the records themselves travel: as bytes.
    singles = list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context))
    # (Workers take turns by record here, not by batch.)
    assert sorted(singles) == sorted(records)
    assert all(type(r) is bytes for r in singles)

    mapped = Dataset(root, shuffle=False)
    loader = DataLoader(mapped, batch_sampler=mapped.batch_sampler(BATCH), num_workers=0)
    assert [r for b in loader for r in b.tolist()] == records


def test_raw_batch_views_and_stack() -> None:
    from torch.utils.data import default_collate

    from guideloom.torch import RawBatch, collate_raw

    same = default_collate([gl.Bytes(b"ab"), gl.Bytes(b"cd")])
    assert isinstance(same, RawBatch)
    assert same.stack().tolist() == [[97, 98], [99, 100]]
    assert same.tensor().tolist() == [97, 98, 99, 100]
    mixed = collate_raw([b"abc", gl.Bytes(b""), bytearray(b"z")])
    assert (len(mixed), mixed.tolist()) == (3, [b"abc", b"", b"z"])
    assert bytes(mixed[-1]) == b"z"
    assert collate_raw([]).tensor().numel() == 0
    with pytest.raises(ValueError, match="one length"):
        mixed.stack()
    with pytest.raises(IndexError):
        mixed[3]
