"""StreamStorage: numpy elements across shards, zero-copy reads, every local backend and HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path, PurePosixPath
from typing import Any

import aiohttp
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
    for key in (slice(None, None, -1), slice(2900, 100, -7), slice(5, 2999, 13), slice(10, 5)):
        assert np.array_equal(reader[key], data[key])
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


def test_a_python_backend_reads_streams(tmp_path: Path) -> None:
    from test_custom_backend import FileBackend, FileReader

    data = np.arange(20_000, dtype=np.int64)
    with gl.StreamStorage(tmp_path, np.int64, max_shard_bytes=50_000).sync_writer() as writer:
        writer.append(data)
    FileReader.log = []
    FileReader.short_by = 0
    reader = gl.StreamStorage(tmp_path, np.int64, read_interface=FileBackend()).sync_reader()
    assert len(reader) == 20_000
    assert np.array_equal(reader.read(6000, 1000), data[6000:7000])  # across a shard boundary
    assert np.array_equal(reader[-10:], data[-10:])
    opened = [e for e in FileReader.log if e.startswith("open")]
    assert opened == [f"open shard-00000{n}.glm" for n in range(4)]
    reader.close()
    FileReader.short_by = 1  # the contract is enforced for streams too
    with pytest.raises(gl.GuideloomError, match="short read"):
        gl.StreamStorage(tmp_path, np.int64, read_interface=FileBackend()).sync_reader()
    with pytest.raises(gl.UnsupportedError):
        gl.StreamStorage(tmp_path, np.int64, read_interface=FileBackend()).sync_writer()


def test_async_reader_every_backend(tmp_path: Path) -> None:
    data = np.arange(5000, dtype=np.uint16)
    with gl.StreamStorage(tmp_path, np.uint16, max_shard_bytes=4096).sync_writer() as writer:
        writer.append(data)

    async def main(interface: Any) -> None:
        async with gl.StreamStorage(
            tmp_path, np.uint16, read_interface=interface
        ).async_reader() as r:
            assert len(r) == 5000
            parts = await asyncio.gather(*(r.read(i * 500, 500) for i in range(10)))
            assert np.array_equal(np.concatenate(parts), data)
            with pytest.raises(IndexError):
                await r.read(4990, 20)

    for interface in (SeekIO(), PosixPreadIO(), MmapIO()):
        asyncio.run(main(interface))


def test_aiohttp_backend_streams_over_nginx(http_root: HttpRoot) -> None:
    from test_custom_backend import AiohttpBackend

    data = np.arange(30_000, dtype=np.uint32)
    with gl.StreamStorage(
        http_root.directory, np.uint32, max_shard_bytes=40_000
    ).sync_writer() as w:
        w.append(data)
    base_url, name = (
        http_root.url.removesuffix(http_root.directory.name + "/"),
        http_root.directory.name,
    )

    async def main() -> None:
        async with aiohttp.ClientSession(base_url=base_url) as session:
            storage = gl.StreamStorage(
                PurePosixPath(name), np.uint32, read_interface=AiohttpBackend(session)
            )
            async with storage.async_reader() as reader:
                assert len(reader) == 30_000
                got = await reader.read(9000, 3000)  # spans two shards
                assert np.array_equal(got, data[9000:12000])

    asyncio.run(main())

    async def http() -> None:
        async with gl.StreamStorage(
            http_root.url, np.uint32, read_interface=HttpIO()
        ).async_reader() as r:
            assert np.array_equal(await r.read(0, 10), data[:10])

    asyncio.run(http())
