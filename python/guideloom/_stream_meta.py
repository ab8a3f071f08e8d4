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

import operator
from collections.abc import Iterable
from os import PathLike
from typing import TYPE_CHECKING, Any, SupportsIndex, TypeVar, overload

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
from guideloom._readers import (
    AsyncReaderContext,
    CloseOnExit,
    DocumentReads,
    FinishOnExit,
    as_array,
    check_range,
    resolve,
)
from guideloom._streams import _element_name
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


def _resolve_many(indices: Iterable[SupportsIndex], n: int) -> list[int]:
    """``resolve`` over a batch, checking the bounds once."""
    wanted = [i + n if i < 0 else i for i in map(operator.index, indices)]
    if wanted and (min(wanted) < 0 or max(wanted) >= n):
        for given in indices:
            resolve(given, n)
    return wanted


def _documents(raw: list[tuple[Bytes, Any]], dtype: np.dtype[Any]) -> list[Document]:
    return [(as_array(data, dtype), meta) for data, meta in raw]


def _batch(indices: Iterable[SupportsIndex], n: int) -> list[int]:
    """``indices`` resolved against ``n`` documents (an iterator is read once)."""
    if not isinstance(indices, (list, range, tuple)):
        indices = list(indices)
    return _resolve_many(indices, n)


class StreamWithMetaWriter(FinishOnExit):
    """Appends documents: ``append(elements, meta)``; a context manager."""

    _raw: RawStreamMetaWriter

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


class _DocumentIndex:
    """What the sync and async readers answer without reading: document and element
    counts and a document's element range."""

    _raw: RawStreamMetaReader | RawAsyncStreamMetaReader

    def doc_range(self, index: SupportsIndex) -> range:
        """The element range of document ``index`` in the stream."""
        start, stop = self._raw.doc_range(resolve(index, self._raw.num_docs()))
        return range(start, stop)

    def num_elements(self) -> int:
        """Elements in the stream (all documents)."""
        return self._raw.len()

    def len(self) -> int:
        """Documents."""
        return self._raw.num_docs()

    def __len__(self) -> int:
        return self._raw.num_docs()


class StreamWithMetaReader(_DocumentIndex, DocumentReads[Document], CloseOnExit):
    """Reads documents: ``read(i)`` → ``(elements, meta)``, ``read_many``, ``[i]``, ``[a:b]``,
    ``len()`` (documents), iteration; and the stream by element (``read_elements``)."""

    _raw: RawStreamMetaReader

    def __init__(self, raw: RawStreamMetaReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    def read(self, index: SupportsIndex) -> Document:
        """Document ``index``: a read-only view of its elements and its metadata."""
        return self.read_many([index])[0]

    def read_many(self, indices: Iterable[SupportsIndex]) -> list[Document]:
        """Documents at ``indices`` (any order): one batched read per shard touched."""
        wanted = _batch(indices, self._raw.num_docs())
        return _documents(self._raw.read_docs(wanted), self._dtype)

    def read_elements(
        self, offset: SupportsIndex, length: SupportsIndex
    ) -> np.ndarray[Any, np.dtype[Any]]:
        """Elements ``offset .. offset + length`` of the whole stream, across documents."""
        offset, length = check_range(offset, length, self._raw.len())
        return as_array(self._raw.read(offset, length), self._dtype)


class AsyncStreamWithMetaReader(_DocumentIndex):
    """The async reader: ``await read(i)``, ``await read_many(indices)``,
    ``await read_elements(offset, length)``, ``len()``."""

    _raw: RawAsyncStreamMetaReader

    def __init__(self, raw: RawAsyncStreamMetaReader, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype

    async def read(self, index: SupportsIndex) -> Document:
        return (await self.read_many([index]))[0]

    async def read_many(self, indices: Iterable[SupportsIndex]) -> list[Document]:
        wanted = _batch(indices, self._raw.num_docs())
        return _documents(await self._raw.read_docs(wanted), self._dtype)

    async def read_elements(
        self, offset: SupportsIndex, length: SupportsIndex
    ) -> np.ndarray[Any, np.dtype[Any]]:
        offset, length = check_range(offset, length, self._raw.len())
        return as_array(await self._raw.read(offset, length), self._dtype)

    def close(self) -> None:
        self._raw.close()


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

    def async_reader(self) -> AsyncReaderContext[AsyncStreamWithMetaReader]:
        """``async with storage.async_reader() as reader:`` then ``await reader.read(i)``."""

        async def opening() -> AsyncStreamWithMetaReader:
            return AsyncStreamWithMetaReader(await self._raw.open_async(), self.dtype)

        return AsyncReaderContext(opening)

    @property
    def directory(self) -> str:
        return self._raw.directory
