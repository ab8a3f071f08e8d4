"""StreamStorage: numpy elements across shards, zero-copy reads, every local backend and HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import guideloom as gl
from conftest import HttpRoot
from guideloom.io import HttpIO, MmapIO, PosixPreadIO, SeekIO

DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int32, np.int64, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_each_dtype(tmp_path: Path, dtype: Any) -> None:
    data = (np.arange(3000) % 200).astype(dtype)
    storage = gl.StreamStorage(tmp_path, dtype, max_shard_bytes=2048, chunk_bytes=512)
    with storage.sync_writer() as writer:
        writer.append(data[:1000])
        writer.append(data[1000:].tolist())
        assert len(writer) == 3000
    assert len(list(tmp_path.glob("shard-*.glm"))) > 1
    reader = storage.sync_reader()
    assert len(reader) == 3000
    got = reader.read(0, 3000)
    assert got.dtype == np.dtype(dtype).newbyteorder("<") and np.array_equal(got, data)
    assert np.array_equal(reader[100:2900], data[100:2900])
    assert reader[-1] == data[-1]
    with pytest.raises(IndexError):
        reader.read(2999, 2)


@pytest.mark.parametrize("interface", [SeekIO(), PosixPreadIO(), MmapIO()], ids=repr)
def test_backends_and_zero_copy(tmp_path: Path, interface: Any) -> None:
    data = np.arange(10_000, dtype=np.uint32)
    storage = gl.StreamStorage(tmp_path, np.uint32)
    with storage.sync_writer() as writer:
        writer.append(data)
    reader = gl.StreamStorage(tmp_path, "uint32", read_interface=interface).sync_reader()
    piece = reader.read(1234, 100)
    assert np.array_equal(piece, data[1234:1334])
    assert not piece.flags.writeable  # a view of the read buffer, not a copy
    assert sum(1 for _ in reader) == 10_000


def test_wrong_dtype_and_mismatch(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        gl.StreamStorage(tmp_path, np.complex64)
    with gl.StreamStorage(tmp_path, np.uint16).sync_writer() as writer:
        writer.append(np.arange(10, dtype=np.uint16))
    with pytest.raises(gl.FormatMismatchError):
        gl.StreamStorage(tmp_path, np.uint32).sync_reader()


def test_http_stream(http_root: HttpRoot) -> None:
    data = np.linspace(0, 1, 5000, dtype=np.float32)
    with gl.StreamStorage(http_root.directory, np.float32, max_shard_bytes=8192).sync_writer() as w:
        w.append(data)
    reader = gl.StreamStorage(http_root.url, np.float32, read_interface=HttpIO()).sync_reader()
    assert len(reader) == 5000
    assert np.array_equal(reader.read(1000, 3000), data[1000:4000])
