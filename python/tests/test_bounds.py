"""Indices of any size and closed readers, everywhere an index is taken.

An integer index outside the sequence is an `IndexOutOfRangeError` (an `IndexError`) however
large it is (`2**64`, `-2**64`, `2**200`), as an `int` or a numpy integer, one at a time or in
a batch; never the `OverflowError` of a fixed-width conversion. A non-integer index is a
`TypeError`. A reader closed (explicitly, or by leaving its `async with` block) refuses
reads, sync or async alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, SupportsIndex

import numpy as np
import pytest

import guideloom as gl
from guideloom import DocumentStorage

HUGE: list[SupportsIndex] = [2**63, 2**64, 2**64 + 5, -(2**63) - 1, -(2**64), 2**200, -(2**200)]
NUMPY: list[SupportsIndex] = [np.uint64(2**64 - 1), np.int64(-(2**63)), np.int64(2**63 - 1)]
N = 7


def out_of_range(call: Callable[[], object], what: str) -> None:
    with pytest.raises(IndexError) as caught:
        call()
    assert isinstance(caught.value, gl.IndexOutOfRangeError), what


def check_indexing(
    one: Callable[[Any], object], many: Callable[[list[Any]], object], n: int, what: str
) -> None:
    for bad in [*HUGE, *NUMPY, n, -n - 1]:
        out_of_range(lambda: one(bad), f"{what}[{bad!r}]")
        out_of_range(lambda: many([0, bad]), f"{what} batch with {bad!r}")
    # Integers of every kind still index; a float does not.
    assert one(np.int64(-1)) == one(n - 1) == one(np.uint8(n - 1))
    with pytest.raises(TypeError):
        one(1.0)


@pytest.fixture
def dataset(local_root: Path) -> gl.Dataset:
    shard = gl.write_shard([{"i": i} for i in range(N)], local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    return gl.open(local_root)


def test_dataset_indices(dataset: gl.Dataset) -> None:
    check_indexing(dataset.__getitem__, dataset.get_many, N, "ds")
    check_indexing(dataset.get, dataset.get_many_raw, N, "ds.get")
    check_indexing(dataset.get_raw, dataset.get_many, N, "ds.get_raw")
    with pytest.raises(gl.IndexOutOfRangeError) as caught:
        dataset[2**64]
    assert caught.value.index == 2**64 and caught.value.len == N
    assert str(2**64) in str(caught.value)
    with pytest.raises(gl.IndexOutOfRangeError):
        dataset.get_many(np.array([0, 2**64 - 1], dtype=np.uint64))
    # Slices clamp, as Python's do.
    assert dataset[2**64 : 2**65] == [] and len(dataset[-(2**64) :]) == N


def test_annotation_indices(local_root: Path, dataset: gl.Dataset) -> None:
    gl.publish_annotations(local_root, "label", "v1", [i * 10 for i in range(N)])
    ds = gl.open(local_root)
    for bad in [*HUGE, N]:
        out_of_range(lambda: ds.annotation("label", bad), f"annotation {bad}")
    assert ds.annotation("label", np.int64(-1)) == (N - 1) * 10


def write_documents(directory: Path) -> None:
    with DocumentStorage(directory, max_shard_records=3).sync_writer() as writer:
        for i in range(N):
            writer.append(i, {"i": i})


def test_document_reader_indices(tmp_path: Path) -> None:
    write_documents(tmp_path)
    with DocumentStorage(tmp_path).sync_reader() as reader:
        check_indexing(reader.read, reader.read_many, N, "reader.read")
        check_indexing(reader.__getitem__, reader.read_many, N, "reader[]")


def test_async_document_reader_indices(tmp_path: Path) -> None:
    write_documents(tmp_path)
    storage = DocumentStorage(tmp_path)

    async def main() -> None:
        async with storage.async_reader() as reader:
            for bad in [*HUGE, *NUMPY, N]:
                with pytest.raises(gl.IndexOutOfRangeError):
                    await reader.read(bad)
                with pytest.raises(gl.IndexOutOfRangeError):
                    await reader.read_many([0, bad])
            assert await reader.read(np.int64(-1)) == {"i": N - 1}

    asyncio.run(main())


def test_an_async_document_reader_is_closed_after_its_block(tmp_path: Path) -> None:
    write_documents(tmp_path)
    storage = DocumentStorage(tmp_path)

    async def main() -> gl.AsyncDocumentReader:
        async with storage.async_reader() as reader:
            assert await reader.read(0) == {"i": 0}
        # Left the block: closed, as a sync reader is after its `with` block.
        with pytest.raises(gl.GuideloomError, match="closed"):
            await reader.read(0)
        with pytest.raises(gl.GuideloomError, match="closed"):
            await reader.read_many([0])
        with pytest.raises(gl.GuideloomError, match="closed"):
            reader.len()
        return reader

    asyncio.run(main())

    # And explicitly, like the sync reader's close().
    async def closed_explicitly() -> None:
        async with storage.async_reader() as reader:
            reader.close()
            with pytest.raises(gl.GuideloomError, match="closed"):
                await reader.read(0)

    asyncio.run(closed_explicitly())
    with storage.sync_reader() as sync:
        pass
    with pytest.raises(gl.GuideloomError, match="closed"):
        sync.read(0)


def test_stream_readers_indices_and_close(tmp_path: Path) -> None:
    data = np.arange(100, dtype=np.uint32)
    storage = gl.StreamStorage(tmp_path, np.uint32, max_shard_bytes=128)
    with storage.sync_writer() as writer:
        writer.append(data)
    with storage.sync_reader() as reader:
        for offset, length in [(2**64, 1), (0, 2**64), (-(2**64), 1), (99, 2), (-1, 1), (0, -1)]:
            out_of_range(lambda: reader.read(offset, length), f"read({offset}, {length})")
        for bad in [*HUGE, 100, -101]:
            out_of_range(lambda: reader[bad], f"stream[{bad}]")
        assert reader.read(np.uint64(98), np.int64(2)).tolist() == [98, 99]
        assert reader[np.int64(-1)] == 99

    async def main() -> None:
        async with storage.async_reader() as r:
            with pytest.raises(gl.IndexOutOfRangeError):
                await r.read(2**64, 1)
            assert (await r.read(np.uint64(1), 2)).tolist() == [1, 2]
        with pytest.raises(gl.GuideloomError, match="closed"):
            await r.read(0, 1)

    asyncio.run(main())


def test_stream_with_meta_indices_and_close(tmp_path: Path) -> None:
    storage = gl.StreamWithMetaStorage(tmp_path, np.uint16, max_shard_records=3)
    with storage.sync_writer() as writer:
        for i in range(N):
            writer.append(np.full(i + 1, i, dtype=np.uint16), {"i": i})
    with storage.sync_reader() as reader:
        check_indexing(lambda i: reader.read(i)[1], lambda ix: reader.read_many(ix), N, "meta.read")
        for bad in HUGE:
            out_of_range(lambda: reader.doc_range(bad), f"doc_range({bad})")
            out_of_range(lambda: reader.read_elements(bad, 1), f"read_elements({bad})")
        with pytest.raises(TypeError):
            reader.read_many([0.5])  # type: ignore[list-item]

    async def main() -> None:
        async with storage.async_reader() as r:
            with pytest.raises(gl.IndexOutOfRangeError):
                await r.read(2**64)
            with pytest.raises(gl.IndexOutOfRangeError):
                await r.read_elements(0, 2**64)
        with pytest.raises(gl.GuideloomError, match="closed"):
            await r.read(0)

    asyncio.run(main())


def test_file_system_shard_indices(tmp_path: Path) -> None:
    docs = gl.FileSystemDocument(tmp_path / "docs", gl.CborFormat())
    with docs.create_shard(0) as writer:
        for i in range(N):
            writer.append({"i": i})
    shard = docs.open_shard(0)
    check_indexing(shard.read, shard.read_many, N, "shard.read")
    stream = gl.FileSystemStream(tmp_path / "stream", np.int32)
    with stream.create_shard(0) as w:
        w.append(np.arange(10, dtype=np.int32))
    elements = stream.open_shard(0)
    for offset, length in [(2**64, 1), (0, 2**64), (9, 2)]:
        out_of_range(lambda: elements.read(offset, length), f"read({offset}, {length})")
    out_of_range(lambda: elements[2**64], "elements[2**64]")
