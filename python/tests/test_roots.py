"""Dataset roots from Python: write, publish, open, read, on a local disk, S3 and HTTP."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import guideloom as gl
from conftest import HttpRoot, S3Root


def captions(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"caption {i}", "score": i / 4} for i in range(start, start + n)]


def test_write_publish_open_read_local(local_root: Path) -> None:
    records = captions(100)
    shards = [
        gl.write_shard(iter(records[i : i + 30]), local_root, work_id="worker-000", shard=i // 30)
        for i in range(0, 100, 30)
    ]
    assert [s.record_count for s in shards] == [30, 30, 30, 10]
    assert shards[0].key == "shards/worker-000/00000000.glm"
    snapshot = gl.publish(local_root, shards, dataset_id="captures", snapshot_id="run-001")
    assert (snapshot.id, snapshot.total_records, len(snapshot.shards)) == ("run-001", 100, 4)

    ds = gl.open(local_root)
    assert len(ds) == 100
    assert ds.format == "cbor"
    assert ds.snapshot_id == "run-001"
    assert ds[42] == records[42]
    assert ds[-1] == records[99]
    assert ds.get(7) == records[7]
    assert ds[25:35] == records[25:35]
    assert ds[::-7] == records[::-7]
    assert ds[95:200] == records[95:]
    assert ds[50:40] == []
    assert ds.get_many([99, 0, 31, 31, -2]) == [records[i] for i in (99, 0, 31, 31, 98)]
    assert ds.get_many(np.array([5, 61])) == [records[5], records[61]]
    assert list(ds) == records
    assert [r["id"] for r in ds] == list(range(100))


def test_a_repeated_identical_publish_reports_that_it_was_already_published(
    local_root: Path,
) -> None:
    # Every rank of a job calling publish, or a retried job: the identical request succeeds
    # again, writes nothing, and says so; a different request under the same id collides.
    shard = gl.write_shard(iter(captions(5)), local_root, work_id="w", shard=0)
    first = gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    again = gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    assert (first.outcome, again.outcome) == ("committed", "already_published")
    assert (again.id, again.seq) == (first.id, first.seq)
    assert len(list((local_root / "log").glob("*.json"))) == 1
    other = gl.write_shard(iter(captions(3)), local_root, work_id="w2", shard=0)
    with pytest.raises(gl.PublicationCollisionError):
        gl.publish(local_root, [other], dataset_id="d", snapshot_id="s")


def test_a_root_given_as_str_and_as_path_is_the_same(local_root: Path) -> None:
    shard = gl.write_shard(captions(3), str(local_root), work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    assert gl.open(str(local_root))[2] == gl.open(local_root)[2]


def test_snapshots_append_and_selection(local_root: Path) -> None:
    first = gl.write_shard(captions(10), local_root, work_id="w", shard=0)
    gl.publish(local_root, [first], dataset_id="d", snapshot_id="v1")
    second = gl.write_shard(captions(5, start=10), local_root, work_id="w", shard=1)
    appended = gl.publish(local_root, [second], dataset_id="d", snapshot_id="v2", mode="append")
    assert appended.total_records == 15
    assert [s.key for s in appended.shards] == [first.key, second.key]
    assert len(gl.open(local_root)) == 15
    old = gl.open(local_root, snapshot="v1")
    assert (len(old), old.snapshot_id) == (10, "v1")
    assert gl.open(local_root)[14] == captions(1, start=14)[0]


def test_publication_options_verify_record_counts(local_root: Path) -> None:
    options = gl.PublicationOptions(verify_record_counts=True)
    assert options.verify_record_counts
    shard = gl.write_shard(captions(4), local_root, work_id="w")
    snapshot = gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s", options=options)
    assert snapshot.total_records == 4


def test_annotations(local_root: Path) -> None:
    shard = gl.write_shard(captions(5), local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    quality = [0.0, 0.25, 0.5, 0.75, 1.0]
    gl.publish_annotations(local_root, "quality", "v1", quality)
    gl.publish_annotations(local_root, "labels", "v1", [["a"], ["b"], [], None, {"k": 1}])
    ds = gl.open(local_root)
    assert ds.annotation("quality", 2) == 0.5
    assert ds.annotations("quality") == quality
    assert ds.annotation("labels", -1) == {"k": 1}
    with pytest.raises(gl.NotFoundError):
        ds.annotations("missing")
    with pytest.raises(gl.CountMismatchError):
        gl.publish_annotations(local_root, "short", "v1", [1, 2])


def test_pickle_records(local_root: Path) -> None:
    records: list[Any] = [{1, 2}, (3, "x"), complex(1, 2), None, np.arange(4)]
    shard = gl.write_shard(records, local_root, work_id="w", format=gl.DocumentPickleFormat())
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    ds = gl.open(local_root)
    assert ds.format == "pickle"
    assert ds[0] == {1, 2} and ds[1] == (3, "x") and ds[2] == complex(1, 2) and ds[3] is None
    assert np.array_equal(ds[4], np.arange(4))
    raw = ds.get_raw(0)
    assert pickle.loads(raw) == {1, 2}


def test_raw_records_are_zero_copy_buffers(local_root: Path) -> None:
    payloads = [b"abc", bytearray(b"defg"), memoryview(b"hi"), np.arange(3, dtype=np.uint8)]
    shard = gl.write_shard(payloads, local_root, work_id="w", format="raw")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    ds = gl.open(local_root)
    assert ds.format == "raw"
    record = ds[1]
    view = memoryview(record)
    assert view.readonly and bytes(view) == b"defg"
    array = np.frombuffer(record, dtype=np.uint8)
    assert array.tolist() == list(b"defg")
    # The same memory, not a copy: numpy's view starts where the buffer does.
    assert array.ctypes.data == np.frombuffer(memoryview(record), dtype=np.uint8).ctypes.data
    assert [bytes(r) for r in ds] == [b"abc", b"defg", b"hi", b"\x00\x01\x02"]
    assert [bytes(r) for r in ds.get_many_raw([3, 0])] == [b"\x00\x01\x02", b"abc"]


def test_a_format_can_be_forced_when_opening(local_root: Path) -> None:
    shard = gl.write_shard(captions(2), local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    raw = gl.open(local_root, format=gl.RawFormat())
    assert gl.CborFormat().decode(raw[1]) == captions(2)[1]
    assert bytes(gl.CborFormat().encode(captions(2)[1])) == bytes(raw[1])


def test_cbor_values_round_trip(local_root: Path) -> None:
    values: list[Any] = [
        None,
        True,
        False,
        0,
        -1,
        2**64 - 1,
        -(2**64),
        1.5,
        float("inf"),
        "",
        "héllo",
        b"\x00\xff",
        [],
        [1, [2, [3]]],
        {},
        {"a": {"b": [None]}},
        {1: "int key"},
    ]
    shard = gl.write_shard(values, local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    assert list(gl.open(local_root)) == values
    # Tuples are arrays in CBOR: they come back as lists.
    assert gl.CborFormat().decode(gl.CborFormat().encode((1, 2))) == [1, 2]


def test_empty_dataset(local_root: Path) -> None:
    shard = gl.write_shard([], local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    ds = gl.open(local_root)
    assert len(ds) == 0 and list(ds) == [] and ds[:] == []
    with pytest.raises(IndexError):
        ds[0]


def test_s3_root(s3_root: S3Root) -> None:
    records = captions(50)
    shards = [
        gl.write_shard(records[:30], s3_root.uri, work_id="w", shard=0, s3=s3_root.options),
        gl.write_shard(records[30:], s3_root.uri, work_id="w", shard=1, s3=s3_root.options),
    ]
    gl.publish(s3_root.uri, shards, dataset_id="d", snapshot_id="s1", s3=s3_root.options)
    gl.publish_annotations(s3_root.uri, "n", "v1", list(range(50)), s3=s3_root.options)
    ds = gl.open(s3_root.uri, s3=s3_root.options)
    assert len(ds) == 50
    assert ds[31] == records[31]
    assert ds.get_many([49, 0, 29, 30]) == [records[i] for i in (49, 0, 29, 30)]
    assert ds[10:40] == records[10:40]
    assert list(ds) == records
    assert ds.annotation("n", 33) == 33
    with pytest.raises(gl.PublicationCollisionError) as caught:
        gl.write_shard(records[:1], s3_root.uri, work_id="w", shard=0, s3=s3_root.options)
    assert caught.value.key == "shards/w/00000000.glm"


def test_http_root_reads_and_refuses_writes(http_root: HttpRoot) -> None:
    records = captions(20)
    shard = gl.write_shard(records, http_root.directory, work_id="w")
    gl.publish(http_root.directory, [shard], dataset_id="d", snapshot_id="s")
    ds = gl.open(http_root.url)
    assert len(ds) == 20
    assert ds[13] == records[13]
    assert ds.get_many([19, 2]) == [records[19], records[2]]
    assert list(ds) == records
    with pytest.raises(gl.ReadOnlyRootError) as caught:
        gl.write_shard(records, http_root.url, work_id="w", shard=1)
    assert caught.value.root is not None
    with pytest.raises(gl.ReadOnlyRootError):
        gl.publish(http_root.url, [shard], dataset_id="d", snapshot_id="s2", mode="append")


def test_http_root_whose_server_lists_directories(http_root: HttpRoot) -> None:
    # The nginx test server serves the same files under /listed/ with JSON listings.
    records = captions(12)
    for n, snap in enumerate(["s1", "s2", "s3"]):
        shard = gl.write_shard(records[n * 4 : n * 4 + 4], http_root.directory, work_id=f"w{n}")
        gl.publish(
            http_root.directory,
            [shard],
            dataset_id="d",
            snapshot_id=snap,
            mode="full" if n == 0 else "append",
        )
    base, name = (
        http_root.url.removesuffix(http_root.directory.name + "/"),
        http_root.directory.name,
    )
    listed = f"{base}listed/{name}/"
    for url, listing in [(listed, True), (listed, False), (http_root.url, True)]:
        ds = gl.open(url, http_listing=listing)
        assert len(ds) == 12, (url, listing)
        assert ds[9] == records[9]
