"""StreamWithMetaStorage: documents of numpy elements with metadata, zero-copy, every backend."""

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
from test_custom_backend import AiohttpBackend, FileBackend, FileReader

Doc = tuple[np.ndarray[Any, np.dtype[Any]], dict[str, Any]]


def corpus(n: int, dtype: Any) -> list[Doc]:
    """Documents of varied lengths (some empty), each with its metadata."""
    rng = np.random.default_rng(7)
    docs: list[Doc] = []
    for i in range(n):
        length = 0 if i % 7 == 3 else int(rng.integers(1, 40))
        tokens = (np.arange(length) * (i + 1) % 250).astype(dtype)
        docs.append((tokens, {"doc": i, "source": f"file-{i}.txt", "tags": ["a", i % 3]}))
    return docs


def write(directory: Path, docs: list[Doc], dtype: Any, **options: Any) -> None:
    storage = gl.StreamWithMetaStorage(directory, dtype, **options)
    with storage.sync_writer() as writer:
        for i, (tokens, meta) in enumerate(docs):
            assert writer.append(tokens, meta) == i
        assert len(writer) == len(docs)


def check(reader: gl.StreamWithMetaReader, docs: list[Doc]) -> None:
    assert len(reader) == reader.len() == len(docs)
    assert reader.num_elements() == sum(len(t) for t, _ in docs)
    for i, (tokens, meta) in enumerate(docs):
        got, got_meta = reader.read(i)
        assert np.array_equal(got, tokens) and got_meta == meta
    picks = [len(docs) - 1, 0, 5, 5, -2]
    for (got, got_meta), i in zip(reader.read_many(picks), picks):
        assert np.array_equal(got, docs[i][0]) and got_meta == docs[i][1]
    sliced = reader[3:20:4]
    assert [m for _, m in sliced] == [m for _, m in docs[3:20:4]]
    assert [m for _, m in reader[::-5]] == [m for _, m in docs[::-5]]
    assert [m["doc"] for _, m in reader] == list(range(len(docs)))


@pytest.mark.parametrize(
    "dtype", [np.uint16, np.uint32, np.int64, np.float32], ids=lambda d: np.dtype(d).name
)
def test_round_trip_across_shard_pairs(tmp_path: Path, dtype: Any) -> None:
    docs = corpus(40, dtype)
    write(tmp_path, docs, dtype, max_shard_records=6)
    assert len(list(tmp_path.glob("shard-*.glm"))) == len(list(tmp_path.glob("meta-*.glm"))) == 7
    with gl.StreamWithMetaStorage(tmp_path, dtype).sync_reader() as reader:
        check(reader, docs)
        # The stream by element: document 10's range, and a slice across documents.
        span = reader.doc_range(10)
        assert len(span) == len(docs[10][0])
        assert np.array_equal(reader.read_elements(span.start, len(span)), docs[10][0])
        flat = np.concatenate([t for t, _ in docs])
        assert np.array_equal(reader.read_elements(5, len(flat) - 10), flat[5:-5])
        with pytest.raises(IndexError):
            reader.read(40)
        with pytest.raises(gl.IndexOutOfRangeError):
            reader.read_many([0, -41])
        with pytest.raises(IndexError):
            reader.read_elements(len(flat), 1)


@pytest.mark.parametrize("interface", [SeekIO(), PosixPreadIO(), MmapIO()], ids=repr)
def test_every_local_backend_and_zero_copy(tmp_path: Path, interface: Any) -> None:
    docs = corpus(25, np.uint32)
    write(tmp_path, docs, np.uint32, max_shard_records=10)
    reader = gl.StreamWithMetaStorage(tmp_path, np.uint32, read_interface=interface).sync_reader()
    check(reader, docs)
    tokens, _ = reader.read(1)
    # A view of the buffer Rust read (a guideloom.Bytes), never a copy.
    base = tokens.base
    assert isinstance(base, memoryview) and isinstance(base.obj, gl.Bytes)
    assert not tokens.flags.writeable


def test_a_python_backend_reads_streams_with_meta(tmp_path: Path) -> None:
    docs = corpus(30, np.int32)
    write(tmp_path, docs, np.int32, max_shard_records=10)
    FileReader.log = []
    FileReader.short_by = 0
    with gl.StreamWithMetaStorage(
        tmp_path, np.int32, read_interface=FileBackend()
    ).sync_reader() as r:
        check(r, docs)
    opened = sorted(e for e in FileReader.log if e.startswith("open"))
    assert opened == [f"open {kind}-00000{n}.glm" for kind in ("meta", "shard") for n in range(3)]
    with pytest.raises(gl.UnsupportedError):
        gl.StreamWithMetaStorage(tmp_path, np.int32, read_interface=FileBackend()).sync_writer()


def test_async_reader(tmp_path: Path) -> None:
    docs = corpus(20, np.uint16)
    write(tmp_path, docs, np.uint16, max_shard_records=8)

    async def main() -> None:
        storage = gl.StreamWithMetaStorage(tmp_path, np.uint16, read_interface=MmapIO())
        async with storage.async_reader() as reader:
            assert len(reader) == 20 and reader.num_elements() == sum(len(t) for t, _ in docs)
            got = await asyncio.gather(*(reader.read(i) for i in range(20)))
            for (tokens, meta), (want, want_meta) in zip(got, docs):
                assert np.array_equal(tokens, want) and meta == want_meta
            many = await reader.read_many([19, 0, -1])
            assert [m["doc"] for _, m in many] == [19, 0, 19]
            span = reader.doc_range(4)
            assert np.array_equal(await reader.read_elements(span.start, len(span)), docs[4][0])
            with pytest.raises(IndexError):
                await reader.read(20)

    asyncio.run(main())


def test_writer_appends_discards_on_error_and_checks_its_input(tmp_path: Path) -> None:
    docs = corpus(12, np.uint32)
    write(tmp_path, docs[:5], np.uint32)
    storage = gl.StreamWithMetaStorage(tmp_path, np.uint32)
    with storage.sync_writer() as writer:  # appends after what is stored
        for tokens, meta in docs[5:]:
            writer.append(tokens, meta)
    check(storage.sync_reader(), docs)
    with pytest.raises(RuntimeError), storage.sync_writer() as writer:
        writer.append([1, 2, 3], {"doc": "lost"})
        raise RuntimeError("stop")
    assert len(storage.sync_reader()) == 12  # the unfinished pair was discarded
    with storage.sync_writer() as writer, pytest.raises(TypeError):
        writer.append([1], object())  # metadata must be JSON-compatible (CBOR)
    with pytest.raises(gl.FormatMismatchError):
        gl.StreamWithMetaStorage(tmp_path, np.uint16).sync_reader()


def test_a_missing_meta_shard_is_a_corrupt_pair(tmp_path: Path) -> None:
    write(tmp_path, corpus(10, np.uint8), np.uint8, max_shard_records=4)
    (tmp_path / "meta-000001.glm").unlink()
    with pytest.raises(gl.CorruptShardError, match="meta shard is missing"):
        gl.StreamWithMetaStorage(tmp_path, np.uint8).sync_reader()


def test_http_and_the_aiohttp_backend(http_root: HttpRoot) -> None:
    docs = corpus(30, np.float64)
    write(http_root.directory, docs, np.float64, max_shard_records=12)
    check(
        gl.StreamWithMetaStorage(http_root.url, np.float64, read_interface=HttpIO()).sync_reader(),
        docs,
    )
    base_url, name = (
        http_root.url.removesuffix(http_root.directory.name + "/"),
        http_root.directory.name,
    )

    async def main() -> None:
        async with aiohttp.ClientSession(base_url=base_url) as session:
            storage = gl.StreamWithMetaStorage(
                PurePosixPath(name), np.float64, read_interface=AiohttpBackend(session)
            )
            async with storage.async_reader() as reader:
                assert len(reader) == 30
                tokens, meta = await reader.read(17)
                assert np.array_equal(tokens, docs[17][0]) and meta == docs[17][1]

    asyncio.run(main())
