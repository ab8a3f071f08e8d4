"""Abstract base classes for IO backends written in Python.

Subclass :class:`IOReaderAbstract` and pass an instance as a storage's ``read_interface``;
the storage's directory is then of the backend's path type ``P`` (anything that joins with
``/``, such as ``pathlib.PurePath``). ``sync_reader()`` and ``async_reader()`` return reader
constructors taking a path: subclasses of :class:`IOSyncReaderAbstract` or
:class:`IOAsyncReaderAbstract`. The Rust side enforces the contract: a read must return
exactly ``size`` bytes (fewer or more is an error), ``close`` is called once (also after a
failed ``open``), and ``FileNotFoundError`` means "no such object" (it ends shard
discovery). A backend without a sync (or async) flavour raises its own error from
``sync_reader()`` (or ``async_reader()``); the defaults raise :class:`UnsupportedError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

from guideloom.exceptions import UnsupportedError

__all__ = ["IOAsyncReaderAbstract", "IOReaderAbstract", "IOSyncReaderAbstract"]

P = TypeVar("P")


class IOSyncReaderAbstract(ABC, Generic[P]):
    """A synchronous reader of one object."""

    def __init__(self, path: P) -> None:
        self.path = path

    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def filesize(self) -> int: ...

    @abstractmethod
    def read(self, offset: int, size: int) -> bytes | bytearray | memoryview:
        """Exactly ``size`` bytes at ``offset``."""


class IOAsyncReaderAbstract(ABC, Generic[P]):
    """An asynchronous reader of one object (its coroutines run on the caller's loop)."""

    def __init__(self, path: P) -> None:
        self.path = path

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def close_sync(self) -> None:
        """Releases the reader without a running loop (called when it is dropped unclosed)."""

    @abstractmethod
    async def filesize(self) -> int: ...

    @abstractmethod
    async def read(self, offset: int, size: int) -> bytes | bytearray | memoryview:
        """Exactly ``size`` bytes at ``offset``."""


class IOReaderAbstract(ABC, Generic[P]):
    """An IO backend: which readers it has, and whether it works here."""

    def is_supported(self) -> bool:
        return True

    def sync_reader(self) -> Callable[[P], IOSyncReaderAbstract[P]]:
        raise UnsupportedError(f"{type(self).__name__} has no synchronous reader")

    def async_reader(self) -> Callable[[P], IOAsyncReaderAbstract[P]]:
        raise UnsupportedError(f"{type(self).__name__} has no asynchronous reader")
