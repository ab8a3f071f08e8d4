"""`KeyboardInterrupt` and `SystemExit` raised inside a backend written in Python reach the
caller as themselves, at every place the Rust side calls into the backend: the reader's
constructor, `open`, `filesize`, `read` (one record, a batch, iteration), the path type's
`/`, and the async reader's coroutines. Any other exception stays the `__cause__` of a
`StorageError`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from os import PathLike
from pathlib import Path, PosixPath

import pytest

import guideloom as gl
from guideloom import DocumentPickleFormat, DocumentStorage
from guideloom.types import IOAsyncReaderAbstract, IOReaderAbstract, IOSyncReaderAbstract

# Where the backend raises, and the exceptions tried there.
INTERRUPTS: list[type[BaseException]] = [KeyboardInterrupt, SystemExit]


class Trap:
    """Which backend method raises what (armed by the test when it wants it to)."""

    method: str | None = None
    raises: type[BaseException] = KeyboardInterrupt

    @classmethod
    def spring(cls, method: str) -> None:
        if cls.method == method:
            raise cls.raises(f"raised in {method}")


@pytest.fixture(autouse=True)
def disarmed() -> None:
    Trap.method = None


class TrappedReader(IOSyncReaderAbstract[Path]):
    def open(self) -> None:
        Trap.spring("open")
        self.file = open(self.path, "rb")

    def close(self) -> None:
        if hasattr(self, "file"):
            self.file.close()

    def filesize(self) -> int:
        Trap.spring("filesize")
        return self.path.stat().st_size

    def read(self, offset: int, size: int) -> bytes:
        Trap.spring("read")
        self.file.seek(offset)
        return self.file.read(size)


def trapped_constructor(path: Path) -> TrappedReader:
    Trap.spring("construct")
    return TrappedReader(path)


class TrappedBackend(IOReaderAbstract[Path]):
    def sync_reader(self) -> Callable[[Path], IOSyncReaderAbstract[Path]]:
        return trapped_constructor


class TrappedPath(PosixPath):
    """A path whose `/` springs the trap."""

    def __truediv__(self, name: str | PathLike[str]) -> TrappedPath:
        Trap.spring("join")
        return TrappedPath(str(self), name)


def write_docs(directory: Path, n: int = 30) -> None:
    storage = DocumentStorage(directory, DocumentPickleFormat(), max_shard_records=10)
    with storage.sync_writer() as writer:
        for i in range(n):
            writer.append(i, {"i": i})


@pytest.mark.parametrize("raises", INTERRUPTS)
@pytest.mark.parametrize("method", ["construct", "open", "filesize", "read", "join"])
def test_opening_a_reader_lets_interrupts_through(
    tmp_path: Path, method: str, raises: type[BaseException]
) -> None:
    write_docs(tmp_path)
    Trap.method, Trap.raises = method, raises
    storage = DocumentStorage(TrappedPath(tmp_path), read_interface=TrappedBackend())
    with pytest.raises(raises) as caught:
        storage.sync_reader()
    assert type(caught.value) is raises
    assert str(caught.value) == f"raised in {method}"


@pytest.mark.parametrize("raises", INTERRUPTS)
@pytest.mark.parametrize("how", ["read", "read_many", "slice", "iterate"])
def test_reads_let_interrupts_through(
    tmp_path: Path, how: str, raises: type[BaseException]
) -> None:
    write_docs(tmp_path)
    reader = DocumentStorage(tmp_path, read_interface=TrappedBackend()).sync_reader()
    Trap.method, Trap.raises = "read", raises
    reads: dict[str, Callable[[], object]] = {
        "read": lambda: reader.read(3),
        "read_many": lambda: reader.read_many([29, 0, 15]),
        "slice": lambda: reader[5:25],
        "iterate": lambda: list(reader),
    }
    with pytest.raises(raises) as caught:
        try:
            reads[how]()
        except Exception as swallowed:  # what a caller's blanket handler would do
            pytest.fail(f"an `except Exception` caught {swallowed!r}")
    assert type(caught.value) is raises
    # The reader still works once the trap is disarmed.
    Trap.method = None
    assert reader.read(3) == {"i": 3}


def test_other_exceptions_stay_the_cause_of_a_storage_error(tmp_path: Path) -> None:
    write_docs(tmp_path)
    reader = DocumentStorage(tmp_path, read_interface=TrappedBackend()).sync_reader()
    Trap.method, Trap.raises = "read", PermissionError
    with pytest.raises(gl.StorageError) as caught:
        reader.read(3)
    assert isinstance(caught.value.__cause__, PermissionError)


class TrappedAsyncReader(IOAsyncReaderAbstract[Path]):
    async def open(self) -> None:
        Trap.spring("open")
        self.data = self.path.read_bytes()

    async def close(self) -> None:
        pass

    def close_sync(self) -> None:
        pass

    async def filesize(self) -> int:
        Trap.spring("filesize")
        return len(self.data)

    async def read(self, offset: int, size: int) -> bytes:
        Trap.spring("read")
        return self.data[offset : offset + size]


class TrappedAsyncBackend(IOReaderAbstract[Path]):
    def async_reader(self) -> Callable[[Path], IOAsyncReaderAbstract[Path]]:
        return TrappedAsyncReader


# The interrupt stops the event loop, so the `close()` coroutine scheduled after a failed
# `open` never runs (Python warns; the reader is still closed, by `close_sync` when dropped).
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
@pytest.mark.parametrize("raises", INTERRUPTS)
@pytest.mark.parametrize("method", ["open", "filesize", "read"])
def test_async_readers_let_interrupts_through(
    tmp_path: Path, method: str, raises: type[BaseException]
) -> None:
    write_docs(tmp_path)
    storage = DocumentStorage(tmp_path, read_interface=TrappedAsyncBackend())

    async def main() -> None:
        if method != "read":
            Trap.method, Trap.raises = method, raises
        try:
            async with storage.async_reader() as reader:
                Trap.method, Trap.raises = method, raises
                await reader.read_many([0, 12, 29])
        except Exception as swallowed:
            pytest.fail(f"an `except Exception` caught {swallowed!r}")

    with pytest.raises(raises) as caught:
        asyncio.run(main())
    assert type(caught.value) is raises
