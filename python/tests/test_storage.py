"""DocumentStorage from Python: sync writer, sync and async readers, every IO backend."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pytest

import guideloom as gl
from conftest import HttpRoot
from guideloom import DocumentPickleFormat, DocumentStorage
from guideloom.io import HttpIO, MmapIO, PosixPreadIO, SeekIO


def test_the_issue_example_runs_as_written() -> None:
    with TemporaryDirectory() as directory:
        storage = DocumentStorage(Path(directory), DocumentPickleFormat(), read_interface=MmapIO())
        with storage.sync_writer() as writer:
            writer.append(0, {"document_id": 1})
        with storage.sync_reader() as reader:
            assert reader.read(0)["document_id"] == 1


def write(directory: Path, n: int, fmt: Any = None, **kwargs: Any) -> list[Any]:
    docs = [{"document_id": i, "text": "x" * (i % 7)} for i in range(n)]
    storage = DocumentStorage(directory, fmt, **kwargs)
    with storage.sync_writer() as writer:
        for i, doc in enumerate(docs):
            writer.append(i, doc)
        assert len(writer) == n
    return docs


@pytest.mark.parametrize("interface", [SeekIO(), PosixPreadIO(), MmapIO()], ids=repr)
def test_readers_over_each_local_backend(tmp_path: Path, interface: Any) -> None:
    assert type(interface).is_supported()
    docs = write(tmp_path, 250, max_shard_records=100)
    assert sorted(p.name for p in tmp_path.iterdir())[:1] == ["shard-000000.glm"]
    storage = DocumentStorage(tmp_path, DocumentPickleFormat(), read_interface=interface)
    with storage.sync_reader() as reader:
        assert reader.len() == len(reader) == 250
        assert reader.read(123) == docs[123]
        assert reader.read(-1) == docs[-1]
        assert reader[5] == docs[5]
        assert reader[95:105] == docs[95:105]
        assert reader[::50] == docs[::50]
        assert reader.read_many([249, 0, 100, 99]) == [docs[i] for i in (249, 0, 100, 99)]
        assert list(reader) == docs
        with pytest.raises(IndexError):
            reader.read(250)
    with pytest.raises(gl.GuideloomError, match="closed"):
        reader.read(0)


def test_formats_and_mismatch(tmp_path: Path) -> None:
    write(tmp_path / "cbor", 3, "cbor")
    assert (
        DocumentStorage(tmp_path / "cbor", gl.CborFormat()).sync_reader().read(2)["document_id"]
        == 2
    )
    with pytest.raises(gl.FormatMismatchError):
        DocumentStorage(tmp_path / "cbor", DocumentPickleFormat()).sync_reader()
    raw = DocumentStorage(tmp_path / "raw", "raw")
    with raw.sync_writer() as writer:
        assert writer.push(b"abc") == 0
        assert writer.push(memoryview(b"de")) == 1
    assert [bytes(r) for r in raw.sync_reader()] == [b"abc", b"de"]


def test_writer_rules(tmp_path: Path) -> None:
    storage = DocumentStorage(tmp_path, DocumentPickleFormat())
    with storage.sync_writer() as writer:
        writer.append(0, "a")
        with pytest.raises(ValueError):
            writer.append(5, "not dense")
        writer.append(1, "b")
    with pytest.raises(gl.GuideloomError):
        writer.append(2, "after finish")
    # An exception inside the block discards the unfinished shard.
    other = DocumentStorage(tmp_path / "other", DocumentPickleFormat())
    with pytest.raises(RuntimeError):
        with other.sync_writer() as writer:
            writer.append(0, "lost")
            raise RuntimeError("stop")
    assert len(other.sync_reader()) == 0
    # A missing directory is an empty storage.
    assert len(DocumentStorage(tmp_path / "nothing").sync_reader()) == 0


def test_async_reader(tmp_path: Path) -> None:
    docs = write(tmp_path, 40, max_shard_records=16)
    storage = DocumentStorage(tmp_path, read_interface=PosixPreadIO())

    async def main() -> None:
        async with storage.async_reader() as reader:
            assert reader.len() == 40
            assert await reader.read(17) == docs[17]
            got = await asyncio.gather(*(reader.read(i) for i in range(40)))
            assert list(got) == docs
            assert await reader.read_many([39, 0]) == [docs[39], docs[0]]
            with pytest.raises(IndexError):
                await reader.read(40)

    asyncio.run(main())


def test_http_storage_sync_and_async(http_root: HttpRoot) -> None:
    docs = write(http_root.directory, 30, max_shard_records=8)
    assert HttpIO.is_supported()
    storage = DocumentStorage(http_root.url, read_interface=HttpIO())
    with storage.sync_reader() as reader:
        assert len(reader) == 30
        assert reader.read(9) == docs[9]
        assert reader.read_many([29, 3, 8]) == [docs[29], docs[3], docs[8]]
        assert list(reader) == docs

    async def main() -> None:
        async with storage.async_reader() as reader:
            assert await reader.read(29) == docs[29]

    asyncio.run(main())
    with pytest.raises(gl.UnsupportedError):
        storage.sync_writer()
    # Shard discovery ends at the first missing shard (a 404).
    shutil.rmtree(http_root.directory)
    assert len(DocumentStorage(http_root.url, read_interface=HttpIO()).sync_reader()) == 0
