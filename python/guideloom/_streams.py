"""StreamStorage: a stream of fixed-width numpy elements sliced across numbered shards.

The Rust core stores little-endian elements and hands back the bytes of a range; this wrapper
maps numpy dtypes onto the element types and views those bytes as arrays without a copy.
numpy is imported only when a stream storage is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

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


class StreamWriter:
    """Appends elements (arrays of the storage's dtype); a context manager."""

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

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        if kind is not None:
            self._raw.abort()
        else:
            self._raw.finish()
        return False


class StreamReader:
    """Reads element ranges as numpy arrays: ``read(offset, length)``, ``[a:b]``, ``len()``."""

    def __init__(self, raw: RawStreamReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    def read(self, offset: int, length: int) -> np.ndarray[Any, np.dtype[Any]]:
        """Elements ``offset .. offset + length`` (a read-only view of the bytes read)."""
        import numpy as np

        if offset < 0 or length < 0:
            raise IndexError(f"negative offset or length: {offset}, {length}")
        return np.frombuffer(memoryview(self._raw.read(offset, length)), dtype=self._dtype)

    def len(self) -> int:
        return self._raw.len()

    def __len__(self) -> int:
        return self._raw.len()

    def __getitem__(self, key: slice | int) -> Any:
        n = self._raw.len()
        if isinstance(key, slice):
            wanted = range(*key.indices(n))
            if not wanted:
                return self.read(0, 0)
            # One read of the window the slice spans, then a strided view of it.
            lo, hi = min(wanted[0], wanted[-1]), max(wanted[0], wanted[-1]) + 1
            window = self.read(lo, hi - lo)
            return window if wanted.step == 1 else window[wanted[0] - lo :: wanted.step]
        index = key + n if key < 0 else key
        if not 0 <= index < n:
            raise IndexError(f"element {key} is out of range for a stream of {n} elements")
        return self.read(index, 1)[0]

    def __iter__(self) -> Iterator[Any]:
        n, chunk = self._raw.len(), 1 << 16
        for start in range(0, n, chunk):
            yield from self.read(start, min(chunk, n - start))

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(self, *args: object) -> Literal[False]:
        self.close()
        return False


class AsyncStreamReader:
    """Reads element ranges asynchronously: ``await read(offset, length)``, ``len()``."""

    def __init__(self, raw: RawAsyncStreamReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    async def read(self, offset: int, length: int) -> np.ndarray[Any, np.dtype[Any]]:
        """Elements ``offset .. offset + length`` (a read-only view of the bytes read)."""
        import numpy as np

        if offset < 0 or length < 0:
            raise IndexError(f"negative offset or length: {offset}, {length}")
        return np.frombuffer(memoryview(await self._raw.read(offset, length)), dtype=self._dtype)

    def len(self) -> int:
        return self._raw.len()

    def __len__(self) -> int:
        return self._raw.len()

    def close(self) -> None:
        self._raw.close()


class _AsyncStreamReaderContext:
    """``async with storage.async_reader() as reader``: opened on entry, closed on exit."""

    def __init__(self, raw: RawStreamStorage, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype
        self._reader: AsyncStreamReader | None = None

    async def __aenter__(self) -> AsyncStreamReader:
        self._reader = AsyncStreamReader(await self._raw.open_async(), self._dtype)
        return self._reader

    async def __aexit__(self, *args: object) -> Literal[False]:
        if self._reader is not None:
            self._reader.close()
        return False


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

    def async_reader(self) -> _AsyncStreamReaderContext:
        """``async with storage.async_reader() as reader:`` then ``await reader.read(o, n)``."""
        return _AsyncStreamReaderContext(self._raw, self.dtype)
