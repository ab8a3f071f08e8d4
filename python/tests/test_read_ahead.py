"""`Dataset.read_ahead`: batches in order and exact on a local root (read when taken) and on
an `http://` root served by nginx (fetched ahead), raw buffers, bad arguments, and an
iterator that refuses to cross a fork."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

import guideloom as gl
from conftest import HttpRoot

RECORDS = 120


def publish(directory: Path) -> list[dict[str, int]]:
    records = [{"i": i, "pad": i * 7} for i in range(RECORDS)]
    shards = [
        gl.write_shard(records[n * 40 : n * 40 + 40], directory, work_id="w", shard=n)
        for n in range(3)
    ]
    gl.publish(directory, shards, dataset_id="d", snapshot_id="s")
    return records


BATCHES = [[5, 90, 41], [0], [119, 118, 1, 1], list(range(40, 80))]


def check(ds: gl.Dataset, records: list[dict[str, int]]) -> None:
    got = list(ds.read_ahead(BATCHES, batches_ahead=2))
    assert got == [[records[i] for i in b] for b in BATCHES]
    raw = list(ds.read_ahead(iter(BATCHES), raw=True))
    assert [[bytes(r) for r in b] for b in raw] == [
        [bytes(r) for r in ds.get_many_raw(b)] for b in BATCHES
    ]
    assert list(ds.read_ahead([])) == []


def test_a_local_root_reads_each_batch_when_taken(tmp_path: Path) -> None:
    records = publish(tmp_path / "root")
    ds = gl.open(tmp_path / "root")
    check(ds, records)
    reader = ds.read_ahead(BATCHES)
    assert reader.held_bytes == 0
    assert next(reader) == [records[i] for i in BATCHES[0]]
    reader.close()
    assert list(reader) == []


def test_an_http_root_reads_ahead(http_root: HttpRoot) -> None:
    records = publish(http_root.directory)
    ds = gl.open(http_root.url)
    check(ds, records)
    reader = ds.read_ahead([[i] for i in range(RECORDS)], batches_ahead=8)
    assert next(reader) == [records[0]]
    assert isinstance(reader.held_bytes, int)
    assert [b[0]["i"] for b in reader] == list(range(1, RECORDS))


def test_bad_arguments(tmp_path: Path) -> None:
    publish(tmp_path / "root")
    ds = gl.open(tmp_path / "root")
    with pytest.raises(ValueError, match="batches_ahead"):
        ds.read_ahead(BATCHES, batches_ahead=0)
    with pytest.raises(IndexError):
        ds.read_ahead([[0], [RECORDS]])
    with pytest.raises(TypeError):
        ds.read_ahead([["a"]])  # type: ignore[list-item]


def _next_in_child(reader: gl.ReadAheadIter, out: multiprocessing.Queue[str]) -> None:
    try:
        next(reader)
        out.put("read")
    except gl.GuideloomError as e:
        out.put(str(e))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_an_iterator_does_not_cross_a_fork(http_root: HttpRoot) -> None:
    publish(http_root.directory)
    ds = gl.open(http_root.url)
    reader = ds.read_ahead(BATCHES)
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[str] = ctx.Queue()
    child = ctx.Process(target=_next_in_child, args=(reader, out))
    child.start()
    child.join(60)
    assert "cannot cross a fork" in out.get(timeout=5)
    assert next(reader) == ds.get_many(BATCHES[0])


def test_a_plan_reads_its_batches_as_they_are_fetched(tmp_path: Path, http_root: HttpRoot) -> None:
    for root, records in [
        (str(tmp_path / "root"), publish(tmp_path / "root")),
        (http_root.url, publish(http_root.directory)),
    ]:
        ds = gl.open(root)
        plan = gl.EpochPlan(ds, batch_size=7, seed=2)
        got = list(ds.read_ahead(plan, start=1, step=3, batches_ahead=4))
        assert got == [[records[i] for i in plan.batch(k)] for k in range(1, len(plan), 3)]
        assert list(ds.read_ahead(plan, start=len(plan))) == []
    with pytest.raises(ValueError, match="EpochPlan"):
        ds.read_ahead(BATCHES, start=1)
    with pytest.raises(ValueError, match="step"):
        ds.read_ahead(plan, step=0)
