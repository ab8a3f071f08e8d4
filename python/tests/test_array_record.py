"""Datasets whose shards are ArrayRecord files, from Python: files written by Google's
`array_record` package adopted into a snapshot without rewriting them, read through
`guideloom.open`, alone and beside native shards (docs/arrayrecord.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import guideloom as gl

try:
    from array_record.python.array_record_module import ArrayRecordWriter
except ImportError:  # pragma: no cover - the project venv has it
    if os.environ.get("GUIDELOOM_CI") == "1":
        raise
    pytest.skip("the array_record package is not installed", allow_module_level=True)


def write_array_record(path: Path, records: list[bytes], options: str = "group_size:1") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = ArrayRecordWriter(str(path), options)
    for record in records:
        writer.write(record)
    writer.close()


def records(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() * (i % 4 + 1) for i in range(n)]


def test_adopted_array_record_files_read_as_a_dataset(tmp_path: Path) -> None:
    root = tmp_path / "root"
    first, second = records("a", 7), records("b", 300)
    write_array_record(root / "imported" / "train-0.array_record", first)
    write_array_record(root / "imported" / "train-1.array_record", second, "group_size:64,zstd:3")
    shards = [
        gl.adopt_array_record(root, "imported/train-0.array_record"),
        gl.adopt_array_record(root, "imported/train-1.array_record"),
    ]
    assert [s.record_count for s in shards] == [7, 300]
    gl.publish(root, shards, dataset_id="imported", snapshot_id="v1")
    # Adoption copies nothing: the files are the shards.
    assert sorted(p.name for p in (root / "imported").iterdir()) == [
        "train-0.array_record",
        "train-1.array_record",
    ]
    ds = gl.open(root)
    assert ds.format == "raw"
    assert len(ds) == 307
    assert bytes(ds[0]) == first[0]
    assert bytes(ds[7 + 299]) == second[299]
    assert [bytes(r) for r in ds.get_many([306, 3, 100])] == [second[299], first[3], second[93]]
    assert [bytes(r) for r in ds] == first + second


def test_a_snapshot_mixing_native_and_array_record_shards_needs_a_format(tmp_path: Path) -> None:
    root = tmp_path / "root"
    native = [b"n0", b"n1", b"n2"]
    shard = gl.write_shard(native, root, work_id="w", format="raw")
    write_array_record(root / "ar" / "part.array_record", records("c", 5))
    adopted = gl.adopt_array_record(root, "ar/part.array_record")
    gl.publish(root, [shard, adopted], dataset_id="mixed", snapshot_id="v1")
    with pytest.raises(gl.UnsupportedError, match="mixes native and ArrayRecord"):
        gl.open(root)
    ds = gl.open(root, format="raw")
    assert [bytes(r) for r in ds] == native + records("c", 5)


def test_a_damaged_or_foreign_file_is_a_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = root / "ar" / "part.array_record"
    # 400 records of ~1 KiB: record 25 lies far before the tail the reference checksums.
    written = [f"d-{i:04}".encode() * 170 for i in range(400)]
    write_array_record(path, written, "group_size:1,uncompressed")
    (root / "ar" / "notes.txt").write_text("not an ArrayRecord file, but long enough " * 4)
    with pytest.raises(gl.CorruptShardError) as info:
        gl.adopt_array_record(root, "ar/notes.txt")
    assert info.value.key == "ar/notes.txt"
    with pytest.raises(FileNotFoundError):
        gl.adopt_array_record(root, "ar/missing.array_record")
    gl.publish(
        root,
        [gl.adopt_array_record(root, "ar/part.array_record")],
        dataset_id="d",
        snapshot_id="v1",
    )
    # Damage a record's chunk in place (same size): reading it fails by its hash, typed.
    data = bytearray(path.read_bytes())
    assert len(data) > 2 * 128 * 1024
    at = data.find(b"d-0025d-0025")
    assert 0 < at < len(data) // 2
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    ds = gl.open(root)
    assert bytes(ds[24]) == written[24]
    with pytest.raises(gl.CorruptShardError) as damaged:
        ds[25]
    assert damaged.value.key == "ar/part.array_record"


def test_damage_in_the_checksummed_tail_refuses_the_open(tmp_path: Path) -> None:
    # A small file lies inside the tail the reference checksums: damage anywhere in it is
    # refused when the snapshot opens, naming the file, before any record is served.
    root = tmp_path / "root"
    path = root / "ar" / "part.array_record"
    write_array_record(path, records("d", 50), "group_size:1,uncompressed")
    gl.publish(
        root,
        [gl.adopt_array_record(root, "ar/part.array_record")],
        dataset_id="d",
        snapshot_id="v1",
    )
    data = bytearray(path.read_bytes())
    at = data.find(b"d-25d-25")
    assert at > 0
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(gl.VerificationError, match="tail checksum") as refused:
        gl.open(root)
    assert refused.value.key == "ar/part.array_record"
