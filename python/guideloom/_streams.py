"""StreamStorage: a stream of fixed-width numpy elements sliced across numbered shards.

The Rust core stores little-endian elements and hands back the bytes of a range; this wrapper
maps numpy dtypes onto the element types and views those bytes as arrays without a copy.
numpy is imported only when a stream storage is used.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any, SupportsIndex, TypeVar, overload

from guideloom._guideloom import (
    HttpIO,
    MmapIO,
    PosixPreadIO,
    RawAsyncStreamReader,
    RawStreamReader,
    RawStreamStorage,
    RawStreamWriter,
    SeekIO,
)
from guideloom._readers import (
    AsyncReaderContext,
    CloseOnExit,
    ElementReads,
    FinishOnExit,
    as_array,
    check_range,
)
from guideloom.types import IOReaderAbstract

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["AsyncStreamReader", "StreamReader", "StreamStorage", "StreamWriter"]

P = TypeVar("P")

_Interface = SeekIO | PosixPreadIO | MmapIO | HttpIO

_ELEMENTS = ("u8", "u16", "u32", "u64", "i32", "i64", "f32", "f64")


def _element_name(dtype: npt.DTypeLike) -> tuple[str, np.dtype[Any]]:
    import numpy as np

    dt = np.dtype(dtype)
    name = f"{dt.kind}{dt.itemsize * 8}"
    if dt.kind not in "uif" or name not in _ELEMENTS:
        raise TypeError(
            f"unsupported stream dtype {dt}: use uint8, uint16, uint32, uint64, int32, int64, "
            "float32 or float64"
        )
    return name, dt.newbyteorder("<")


class StreamWriter(FinishOnExit):
    """Appends elements (arrays of the storage's dtype); a context manager."""

    _raw: RawStreamWriter

    def __init__(self, raw: RawStreamWriter, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    def append(self, elements: npt.ArrayLike) -> None:
        import numpy as np

        array = np.ascontiguousarray(elements, dtype=self._dtype)
        self._raw.append(array.data.cast("B"))

    def __len__(self) -> int:
        return self._raw.len()

    def finish(self) -> int:
        return self._raw.finish()


class StreamReader(ElementReads, CloseOnExit):
    """Reads element ranges as numpy arrays: ``read(offset, length)``, ``[a:b]``, ``len()``."""

    _raw: RawStreamReader

    def __init__(self, raw: RawStreamReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    def read(self, offset: SupportsIndex, length: SupportsIndex) -> np.ndarray[Any, np.dtype[Any]]:
        """Elements ``offset .. offset + length`` (a read-only view of the bytes read)."""
        offset, length = check_range(offset, length, self._raw.len())
        return as_array(self._raw.read(offset, length), self._dtype)

    def len(self) -> int:
        return self._raw.len()


class AsyncStreamReader:
    """Reads element ranges asynchronously: ``await read(offset, length)``, ``len()``."""

    def __init__(self, raw: RawAsyncStreamReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    async def read(
        self, offset: SupportsIndex, length: SupportsIndex
    ) -> np.ndarray[Any, np.dtype[Any]]:
        """Elements ``offset .. offset + length`` (a read-only view of the bytes read)."""
        offset, length = check_range(offset, length, self._raw.len())
        return as_array(await self._raw.read(offset, length), self._dtype)

    def len(self) -> int:
        return self._raw.len()

    def __len__(self) -> int:
        return self._raw.len()

    def close(self) -> None:
        self._raw.close()


class StreamStorage:
    """A stream of ``dtype`` elements in numbered shards under ``directory``.

    Elements are stored in checksummed chunks of ``chunk_bytes`` (default 8 KiB); a shard is
    cut before it would exceed ``max_shard_bytes``. ``read_interface`` is one of
    :mod:`guideloom.io` or a :class:`guideloom.types.IOReaderAbstract` backend written in
    Python, whose path type the directory then has (such storages only read).
    """

    @overload
    def __init__(
        self,
        directory: str | PathLike[str],
        dtype: npt.DTypeLike,
        *,
        read_interface: _Interface | None = None,
        max_shard_bytes: int | None = None,
        chunk_bytes: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        directory: P,
        dtype: npt.DTypeLike,
        *,
        read_interface: IOReaderAbstract[P],
        max_shard_bytes: int | None = None,
        chunk_bytes: int | None = None,
    ) -> None: ...

    def __init__(
        self,
        directory: Any,
        dtype: npt.DTypeLike,
        *,
        read_interface: _Interface | IOReaderAbstract[Any] | None = None,
        max_shard_bytes: int | None = None,
        chunk_bytes: int | None = None,
    ) -> None:
        name, self.dtype = _element_name(dtype)
        self._raw = RawStreamStorage(
            directory,
            name,
            read_interface=read_interface,
            max_shard_bytes=max_shard_bytes,
            chunk_bytes=chunk_bytes,
        )

    def sync_writer(self) -> StreamWriter:
        return StreamWriter(self._raw.sync_writer(), self.dtype)

    def sync_reader(self) -> StreamReader:
        return StreamReader(self._raw.sync_reader(), self.dtype)

    def async_reader(self) -> AsyncReaderContext[AsyncStreamReader]:
        """``async with storage.async_reader() as reader:`` then ``await reader.read(o, n)``."""

        async def opening() -> AsyncStreamReader:
            return AsyncStreamReader(await self._raw.open_async(), self.dtype)

        return AsyncReaderContext(opening)
