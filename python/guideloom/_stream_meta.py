"""StreamWithMetaStorage: a token stream of numpy elements cut into documents with metadata.

Each document is a run of elements of the storage's dtype plus one JSON-compatible metadata
value (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, lists, dicts), stored as
the Rust ``StreamWithMetaStorage<E, M>`` stores it: ``shard-n.glm`` holds the elements (one
record per document), ``meta-n.glm`` the metadata as CBOR. A corpus written from Rust with
serde metadata therefore reads here, and the other way round. Documents are read as
read-only numpy views of the bytes read (no copy); the whole stream stays addressable by
element (``read_elements``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from guideloom._guideloom import (
    Bytes,
    HttpIO,
    MmapIO,
    PosixPreadIO,
    RawAsyncStreamMetaReader,
    RawStreamMetaReader,
    RawStreamMetaStorage,
    RawStreamMetaWriter,
    SeekIO,
)
from guideloom._streams import _element_name
from guideloom.exceptions import IndexOutOfRangeError
from guideloom.types import IOReaderAbstract

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "AsyncStreamWithMetaReader",
    "StreamWithMetaReader",
    "StreamWithMetaStorage",
    "StreamWithMetaWriter",
]

P = TypeVar("P")

_Interface = SeekIO | PosixPreadIO | MmapIO | HttpIO

#: A document: its elements (a read-only numpy view) and its metadata.
Document = tuple["np.ndarray[Any, np.dtype[Any]]", Any]

#: Documents read per batch while iterating.
ITER_CHUNK = 1024


def _resolve(index: int, n: int) -> int:
    """A Python index (negative from the end) as a document number, or IndexOutOfRangeError."""
    resolved = index + n if index < 0 else index
    if not 0 <= resolved < n:
        raise IndexOutOfRangeError(
            f"document {index} is out of range for a storage of {n} documents", index=index, len=n
        )
    return resolved


def _resolve_many(indices: Iterable[int], n: int) -> list[int]:
    """``_resolve`` over a batch, checking the bounds once."""
    wanted = [i + n if i < 0 else i for i in map(int, indices)]
    if wanted and (min(wanted) < 0 or max(wanted) >= n):
        for given in indices:
            _resolve(int(given), n)
    return wanted


def _documents(raw: list[tuple[Bytes, Any]], dtype: np.dtype[Any]) -> list[Document]:
    import numpy as np

    return [(np.frombuffer(memoryview(data), dtype=dtype), meta) for data, meta in raw]


class StreamWithMetaWriter:
    """Appends documents: ``append(elements, meta)``; a context manager."""

    def __init__(self, raw: RawStreamMetaWriter, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    def append(self, elements: npt.ArrayLike, meta: Any = None) -> int:
        """Appends one document (an array-like of the dtype, maybe empty); returns its number."""
        import numpy as np

        array = np.ascontiguousarray(elements, dtype=self._dtype)
        return self._raw.append(array.data.cast("B"), meta)

    def __len__(self) -> int:
        """Documents in the storage after this writer's appends."""
        return self._raw.num_docs()

    def finish(self) -> int:
        """Publishes the last shard pair; returns the number of shard files written."""
        return self._raw.finish()

    def __enter__(self) -> StreamWithMetaWriter:
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


class StreamWithMetaReader:
    """Reads documents: ``read(i)`` → ``(elements, meta)``, ``read_many``, ``[i]``, ``[a:b]``,
    ``len()`` (documents), iteration; and the stream by element (``read_elements``)."""

    def __init__(self, raw: RawStreamMetaReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    def read(self, index: int) -> Document:
        """Document ``index``: a read-only view of its elements and its metadata."""
        return self.read_many([index])[0]

    def read_many(self, indices: Iterable[int]) -> list[Document]:
        """Documents at ``indices`` (any order): one batched read per shard touched."""
        if not isinstance(indices, (list, range, tuple)):
            indices = list(indices)
        wanted = _resolve_many(indices, self._raw.num_docs())
        return _documents(self._raw.read_docs(wanted), self._dtype)

    def read_elements(self, offset: int, length: int) -> np.ndarray[Any, np.dtype[Any]]:
        """Elements ``offset .. offset + length`` of the whole stream, across documents."""
        import numpy as np

        if offset < 0 or length < 0:
            raise IndexError(f"negative offset or length: {offset}, {length}")
        return np.frombuffer(memoryview(self._raw.read(offset, length)), dtype=self._dtype)

    def doc_range(self, index: int) -> range:
        """The element range of document ``index`` in the stream."""
        start, stop = self._raw.doc_range(_resolve(index, self._raw.num_docs()))
        return range(start, stop)

    def num_elements(self) -> int:
        """Elements in the stream (all documents)."""
        return self._raw.len()

    def len(self) -> int:
        """Documents."""
        return self._raw.num_docs()

    def __len__(self) -> int:
        return self._raw.num_docs()

    @overload
    def __getitem__(self, key: int) -> Document: ...

    @overload
    def __getitem__(self, key: slice) -> list[Document]: ...

    def __getitem__(self, key: int | slice) -> Document | list[Document]:
        if isinstance(key, slice):
            return self.read_many(range(*key.indices(self._raw.num_docs())))
        return self.read(key)

    def __iter__(self) -> Iterator[Document]:
        n = self._raw.num_docs()
        for start in range(0, n, ITER_CHUNK):
            yield from self.read_many(range(start, min(n, start + ITER_CHUNK)))

    def close(self) -> None:
        """Releases the shards; later reads raise."""
        self._raw.close()

    def __enter__(self) -> StreamWithMetaReader:
        return self

    def __exit__(self, *args: object) -> Literal[False]:
        self.close()
        return False


class AsyncStreamWithMetaReader:
    """The async reader: ``await read(i)``, ``await read_many(indices)``,
    ``await read_elements(offset, length)``, ``len()``."""

    def __init__(self, raw: RawAsyncStreamMetaReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    async def read(self, index: int) -> Document:
        return (await self.read_many([index]))[0]

    async def read_many(self, indices: Iterable[int]) -> list[Document]:
        if not isinstance(indices, (list, range, tuple)):
            indices = list(indices)
        wanted = _resolve_many(indices, self._raw.num_docs())
        return _documents(await self._raw.read_docs(wanted), self._dtype)

    async def read_elements(self, offset: int, length: int) -> np.ndarray[Any, np.dtype[Any]]:
        import numpy as np

        if offset < 0 or length < 0:
            raise IndexError(f"negative offset or length: {offset}, {length}")
        return np.frombuffer(memoryview(await self._raw.read(offset, length)), dtype=self._dtype)

    def doc_range(self, index: int) -> range:
        start, stop = self._raw.doc_range(_resolve(index, self._raw.num_docs()))
        return range(start, stop)

    def num_elements(self) -> int:
        return self._raw.len()

    def len(self) -> int:
        return self._raw.num_docs()

    def __len__(self) -> int:
        return self._raw.num_docs()

    def close(self) -> None:
        self._raw.close()


class _AsyncContext:
    """``async with storage.async_reader() as reader``: opened on entry, closed on exit."""

    def __init__(self, raw: RawStreamMetaStorage, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype
        self._reader: AsyncStreamWithMetaReader | None = None

    async def __aenter__(self) -> AsyncStreamWithMetaReader:
        self._reader = AsyncStreamWithMetaReader(await self._raw.open_async(), self._dtype)
        return self._reader

    async def __aexit__(self, *args: object) -> Literal[False]:
        if self._reader is not None:
            self._reader.close()
        return False


class StreamWithMetaStorage:
    """Documents of ``dtype`` elements with JSON-compatible metadata, in numbered shard pairs
    under ``directory``.

    A shard pair is cut before it would exceed ``max_shard_records`` documents or
    ``max_shard_bytes`` bytes of elements. ``read_interface`` is one of :mod:`guideloom.io` or
    a :class:`guideloom.types.IOReaderAbstract` backend written in Python (the directory then
    has its path type; such storages only read).
    """

    @overload
    def __init__(
        self,
        directory: str | PathLike[str],
        dtype: npt.DTypeLike,
        *,
        read_interface: _Interface | None = None,
        max_shard_records: int | None = None,
        max_shard_bytes: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        directory: P,
        dtype: npt.DTypeLike,
        *,
        read_interface: IOReaderAbstract[P],
        max_shard_records: int | None = None,
        max_shard_bytes: int | None = None,
    ) -> None: ...

    def __init__(
        self,
        directory: Any,
        dtype: npt.DTypeLike,
        *,
        read_interface: _Interface | IOReaderAbstract[Any] | None = None,
        max_shard_records: int | None = None,
        max_shard_bytes: int | None = None,
    ) -> None:
        name, self.dtype = _element_name(dtype)
        self._raw = RawStreamMetaStorage(
            directory,
            name,
            read_interface=read_interface,
            max_shard_records=max_shard_records,
            max_shard_bytes=max_shard_bytes,
        )

    def sync_writer(self) -> StreamWithMetaWriter:
        """A writer appending documents after those already stored."""
        return StreamWithMetaWriter(self._raw.sync_writer(), self.dtype)

    def sync_reader(self) -> StreamWithMetaReader:
        """A reader over the shard pairs finished now."""
        return StreamWithMetaReader(self._raw.sync_reader(), self.dtype)

    def async_reader(self) -> _AsyncContext:
        """``async with storage.async_reader() as reader:`` then ``await reader.read(i)``."""
        return _AsyncContext(self._raw, self.dtype)

    @property
    def directory(self) -> str:
        return self._raw.directory
