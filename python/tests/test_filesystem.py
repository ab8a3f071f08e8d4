"""FileSystemDocument / FileSystemStream: shards written one by one and discovered on disk
through every IO backend, Python backends included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import guideloom as gl
from conftest import HttpRoot
from guideloom._guideloom import RawFileSystem
from guideloom.io import HttpIO, MmapIO, PosixPreadIO, SeekIO
from guideloom.types import IOReaderAbstract, IOSyncReaderAbstract
from test_custom_backend import FileBackend, FileReader

LOCAL = [SeekIO(), PosixPreadIO(), MmapIO(), FileBackend()]


def write_workers(directory: Path, shards: list[int], per_shard: int = 7) -> None:
    """Each "worker" writes its own shard, in any order."""
    fs = gl.FileSystemDocument(directory, gl.CborFormat())
    for n in shards:
        with fs.create_shard(n, user_metadata={"worker": n}) as writer:
            for k in range(per_shard):
                assert writer.append({"worker": n, "k": k}) == k
            assert len(writer) == per_shard


@pytest.mark.parametrize("interface", LOCAL, ids=lambda i: type(i).__name__)
def test_documents_written_per_worker_and_discovered(tmp_path: Path, interface: Any) -> None:
    FileReader.log, FileReader.short_by = [], 0
    write_workers(tmp_path, [2, 0, 1])
    fs = gl.FileSystemDocument(tmp_path, "cbor", read_interface=interface)
    assert fs.shard_name(3) == "shard-000003.glm"
    found = fs.discover()
    assert [s.number for s in found] == [0, 1, 2]
    assert all(s.records == 7 and s.data_len > 0 for s in found)
    assert found[1].location.endswith("shard-000001.glm")
    shard = fs.open_shard(1)
    assert len(shard) == shard.len() == 7 and shard.number == 1
    assert shard.user_metadata() == {"worker": 1}
    assert shard.read(3) == {"worker": 1, "k": 3}
    assert shard.read_many([6, 0, -1]) == [{"worker": 1, "k": k} for k in (6, 0, 6)]
    assert [d["k"] for d in shard[1:6:2]] == [1, 3, 5]
    assert [d["k"] for d in shard] == list(range(7))
    with pytest.raises(IndexError):
        shard.read(7)
    with pytest.raises(gl.NotFoundError) as missing:
        fs.open_shard(3)
    assert isinstance(missing.value, FileNotFoundError)
    # The directory is a DocumentStorage directory too.
    reader = gl.DocumentStorage(tmp_path, gl.CborFormat(), read_interface=interface).sync_reader()
    assert len(reader) == 21 and reader[7] == {"worker": 1, "k": 0}


def test_discovery_stops_at_the_first_missing_shard(tmp_path: Path) -> None:
    write_workers(tmp_path, [0, 1, 3])  # worker 2 has not finished
    FileReader.log, FileReader.short_by = [], 0
    fs = gl.FileSystemDocument(tmp_path, "cbor", read_interface=FileBackend())
    assert [s.number for s in fs.discover()] == [0, 1]
    # Shard 2's open raised FileNotFoundError: that ended discovery; shard 3 was never tried.
    assert not any("shard-000003" in e for e in FileReader.log)
    assert fs.open_shard(3).read(0) == {"worker": 3, "k": 0}
    assert gl.FileSystemDocument(tmp_path / "nowhere", "cbor").discover() == []


def test_other_backend_errors_are_raised_not_taken_for_the_end(tmp_path: Path) -> None:
    class Denied(FileReader):
        def open(self) -> None:
            if self.path.name == "shard-000001.glm":
                raise PermissionError("denied")
            super().open()

    class Backend(IOReaderAbstract[Path]):
        def sync_reader(self) -> Callable[[Path], IOSyncReaderAbstract[Path]]:
            return Denied

    class AsyncOnly(IOReaderAbstract[Path]):
        pass

    write_workers(tmp_path, [0, 1])
    with pytest.raises(gl.StorageError) as caught:
        gl.FileSystemDocument(tmp_path, "cbor", read_interface=Backend()).discover()
    assert isinstance(caught.value.__cause__, PermissionError)
    with pytest.raises(gl.GuideloomError) as unsupported:
        gl.FileSystemDocument(tmp_path, "cbor", read_interface=AsyncOnly()).discover()
    assert isinstance(unsupported.value.__cause__, gl.UnsupportedError)
    with pytest.raises(gl.UnsupportedError):
        gl.FileSystemDocument(tmp_path, "cbor", read_interface=FileBackend()).create_shard(5)


def test_writers_are_create_only_and_discard_on_error(tmp_path: Path) -> None:
    write_workers(tmp_path, [0])
    fs = gl.FileSystemDocument(tmp_path, gl.DocumentPickleFormat(), prefix="part")
    with pytest.raises(RuntimeError), fs.create_shard(0) as writer:
        writer.append({"lost": True})
        raise RuntimeError("worker died")
    assert not (tmp_path / "part-000000.glm").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard-000000.glm"]  # no temp file left
    writer = fs.create_shard(0)
    writer.append({"a": 1})
    info = writer.finish()
    assert info.records == 1 and info.path.endswith("part-000000.glm") and info.size > 0
    with pytest.raises(gl.ShardExistsError):
        gl.FileSystemDocument(tmp_path, "cbor").create_shard(0)
    with pytest.raises(gl.FormatMismatchError):
        gl.FileSystemDocument(tmp_path, "pickle").discover()  # shard-* are CBOR
    assert [s.number for s in fs.discover()] == [0]
    with pytest.raises(gl.InvalidArgumentError):
        gl.FileSystemDocument(tmp_path, prefix="a/b")


@pytest.mark.parametrize("interface", LOCAL, ids=lambda i: type(i).__name__)
def test_stream_shards(tmp_path: Path, interface: Any) -> None:
    fs = gl.FileSystemStream(tmp_path, np.uint32)
    data = np.arange(3000, dtype=np.uint32)
    for n in (1, 0):
        with fs.create_shard(n, user_metadata={"part": n}) as writer:
            for start in range(0, 1500, 500):  # each append is one checksummed record
                writer.append(data[n * 1500 + start : n * 1500 + start + 500])
    reading = gl.FileSystemStream(tmp_path, "uint32", read_interface=interface)
    found = reading.discover()
    assert [(s.number, s.records, s.data_len) for s in found] == [(0, 3, 6000), (1, 3, 6000)]
    shard = reading.open_shard(1)
    assert len(shard) == 1500 and shard.user_metadata() == {"part": 1}
    window = shard.read(400, 300)  # across two records
    assert np.array_equal(window, data[1900:2200]) and not window.flags.writeable
    assert np.array_equal(shard[-3:], data[-3:]) and shard[0] == 1500
    assert np.array_equal(shard[10:0:-3], data[1510:1500:-3])
    assert np.array_equal(np.fromiter(shard, dtype=np.uint32), data[1500:])
    with pytest.raises(IndexError):
        shard.read(1499, 2)
    # The directory is a StreamStorage directory too.
    assert np.array_equal(gl.StreamStorage(tmp_path, np.uint32).sync_reader().read(0, 3000), data)
    with pytest.raises(gl.FormatMismatchError):
        gl.FileSystemStream(tmp_path, np.uint16).discover()
    # The Rust writer refuses bytes that are not a whole number of elements (the wrapper
    # always hands it whole arrays of the dtype).
    raw = RawFileSystem(tmp_path, element="u32").create_shard(2)
    with pytest.raises(gl.InvalidArgumentError):
        raw.append(b"abc")
    raw.abort()
    assert [s.number for s in fs.discover()] == [0, 1]


def test_http_discovery(http_root: HttpRoot) -> None:
    write_workers(http_root.directory, [0, 1, 2])
    fs = gl.FileSystemDocument(http_root.url, "cbor", read_interface=HttpIO())
    assert [s.number for s in fs.discover()] == [0, 1, 2]  # shard 3 answered 404
    assert fs.open_shard(2).read_many([0, 6]) == [{"worker": 2, "k": 0}, {"worker": 2, "k": 6}]
    with pytest.raises(gl.NotFoundError):
        fs.open_shard(3)
    with pytest.raises(gl.UnsupportedError):
        fs.create_shard(3)
