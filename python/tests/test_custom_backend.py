"""IO backends written in Python (guideloom.types), read through DocumentStorage.

The examples of docs/python.md: a local-file sync backend, and an aiohttp range backend over
nginx through `async_reader()`; and the contract the Rust side enforces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import aiohttp
import pytest

import guideloom as gl
from conftest import HttpRoot
from guideloom import DocumentPickleFormat, DocumentStorage
from guideloom.types import IOAsyncReaderAbstract, IOReaderAbstract, IOSyncReaderAbstract


class FileReader(IOSyncReaderAbstract[Path]):
    """Reads a local file; records what it was asked to do."""

    log: ClassVar[list[str]] = []
    short_by = 0

    def open(self) -> None:
        self.file = open(self.path, "rb")  # FileNotFoundError ends shard discovery
        self.log.append(f"open {self.path.name}")

    def close(self) -> None:
        self.log.append(f"close {self.path.name}")
        if hasattr(self, "file"):
            self.file.close()

    def filesize(self) -> int:
        return self.path.stat().st_size

    def read(self, offset: int, size: int) -> bytes:
        self.file.seek(offset)
        return self.file.read(max(0, size - self.short_by))


class FileBackend(IOReaderAbstract[Path]):
    def sync_reader(self) -> Callable[[Path], IOSyncReaderAbstract[Path]]:
        return FileReader


def write_docs(directory: Path, n: int = 30) -> list[dict[str, int]]:
    docs = [{"document_id": i} for i in range(n)]
    with DocumentStorage(
        directory, DocumentPickleFormat(), max_shard_records=10
    ).sync_writer() as w:
        for i, doc in enumerate(docs):
            w.append(i, doc)
    return docs


@pytest.fixture(autouse=True)
def fresh_log() -> None:
    FileReader.log = []
    FileReader.short_by = 0


def test_sync_backend_in_python(tmp_path: Path) -> None:
    docs = write_docs(tmp_path)
    storage = DocumentStorage(tmp_path, DocumentPickleFormat(), read_interface=FileBackend())
    with storage.sync_reader() as reader:
        assert len(reader) == 30
        assert reader.read(17) == docs[17]
        assert reader.read_many([29, 0, 10]) == [docs[29], docs[0], docs[10]]
        assert list(reader) == docs
    opened = [e for e in FileReader.log if e.startswith("open")]
    assert opened == ["open shard-000000.glm", "open shard-000001.glm", "open shard-000002.glm"]
    # Every reader opened is closed exactly once when released, and so is the one whose open
    # failed (shard 3 does not exist: that ended discovery).
    closed = [e for e in FileReader.log if e.startswith("close")]
    assert sorted(closed) == [
        "close shard-000000.glm",
        "close shard-000001.glm",
        "close shard-000002.glm",
        "close shard-000003.glm",
    ]


def test_a_short_read_is_an_error(tmp_path: Path) -> None:
    write_docs(tmp_path, 5)
    FileReader.short_by = 1
    with pytest.raises(gl.GuideloomError) as caught:
        DocumentStorage(tmp_path, read_interface=FileBackend()).sync_reader()
    assert "short read" in str(caught.value)


def test_close_after_a_failed_open_and_the_cause_is_kept(tmp_path: Path) -> None:
    class Failing(FileReader):
        def open(self) -> None:
            self.log.append("half open")
            raise PermissionError("no entry")

    class Backend(IOReaderAbstract[Path]):
        def sync_reader(self) -> Callable[[Path], IOSyncReaderAbstract[Path]]:
            return Failing

    write_docs(tmp_path, 3)
    with pytest.raises(gl.StorageError) as caught:
        DocumentStorage(tmp_path, read_interface=Backend()).sync_reader()
    assert isinstance(caught.value.__cause__, PermissionError)
    assert FileReader.log == ["half open", "close shard-000000.glm"]


def test_an_async_only_backend_answers_sync_reader_with_its_own_error(tmp_path: Path) -> None:
    class AsyncOnly(IOReaderAbstract[Path]):
        pass

    write_docs(tmp_path, 3)
    with pytest.raises(gl.GuideloomError) as caught:
        DocumentStorage(tmp_path, read_interface=AsyncOnly()).sync_reader()
    assert isinstance(caught.value.__cause__, gl.UnsupportedError)
    assert "AsyncOnly has no synchronous reader" in str(caught.value)
    with pytest.raises(gl.UnsupportedError):
        DocumentStorage(tmp_path, read_interface=AsyncOnly()).sync_writer()


def test_the_abstract_reader_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError):
        IOSyncReaderAbstract(Path("x"))  # type: ignore[abstract]


class AiohttpReader(IOAsyncReaderAbstract[PurePosixPath]):
    """HTTP ranges with aiohttp: HEAD for the size, an exact 206 for each read."""

    def __init__(self, session: aiohttp.ClientSession, path: PurePosixPath) -> None:
        super().__init__(path)
        self.session = session
        self.size = 0

    async def open(self) -> None:
        async with self.session.head(str(self.path)) as response:
            if response.status == 404:
                raise FileNotFoundError(str(self.path))
            response.raise_for_status()
            self.size = int(response.headers["Content-Length"])

    async def close(self) -> None:
        pass

    def close_sync(self) -> None:
        pass

    async def filesize(self) -> int:
        return self.size

    async def read(self, offset: int, size: int) -> bytes:
        if size == 0:
            return b""
        headers = {"Range": f"bytes={offset}-{offset + size - 1}"}
        async with self.session.get(str(self.path), headers=headers) as response:
            if response.status == 404:
                raise FileNotFoundError(str(self.path))
            if response.status == 200:
                raise OSError(f"{self.path}: the server ignored the Range header")
            if response.status == 416:
                raise OSError(f"{self.path}: range {offset}+{size} not satisfiable")
            if response.status != 206:
                raise OSError(f"{self.path}: HTTP {response.status}")
            return await response.read()


class AiohttpBackend(IOReaderAbstract[PurePosixPath]):
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    def async_reader(self) -> Callable[[PurePosixPath], IOAsyncReaderAbstract[PurePosixPath]]:
        return lambda path: AiohttpReader(self.session, path)


def test_aiohttp_backend_over_nginx(http_root: HttpRoot) -> None:
    docs = write_docs(http_root.directory, 25)
    base_url, name = (
        http_root.url.removesuffix(http_root.directory.name + "/"),
        http_root.directory.name,
    )

    async def main() -> list[Any]:
        async with aiohttp.ClientSession(base_url=base_url) as session:
            storage = DocumentStorage(
                PurePosixPath(name), DocumentPickleFormat(), read_interface=AiohttpBackend(session)
            )
            async with storage.async_reader() as reader:
                assert len(reader) == 25
                assert await reader.read(13) == docs[13]
                assert await reader.read_many([24, 0]) == [docs[24], docs[0]]
                got = await asyncio.gather(*(reader.read(i) for i in range(25)))
            # A directory that does not exist is an empty storage (the HEAD of shard 0 is a 404).
            missing = DocumentStorage(
                PurePosixPath("no-such-dir"),
                DocumentPickleFormat(),
                read_interface=AiohttpBackend(session),
            )
            async with missing.async_reader() as empty:
                assert len(empty) == 0
            return list(got)

    assert asyncio.run(main()) == docs
