"""FileSystemDocument and FileSystemStream: shard files managed one by one.

The storages (``DocumentStorage``, ``StreamStorage``) number their shards themselves. These
classes are for callers who decide which shard each worker writes (worker ``k`` writes shard
``k``) and find them again later: they name shards as the Rust crate does
(``shard-000000.glm``, ...), write one shard at a time into a local directory, and discover
the finished shards through any IO backend, a Python one included. Discovery opens shards
``0, 1, ...`` and stops at the first one the backend reports missing (``FileNotFoundError``
from a Python backend, 404 over HTTP); any other failure is raised. A directory written this
way is also a ``DocumentStorage`` / ``StreamStorage`` directory.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NamedTuple,
    SupportsIndex,
    TypeVar,
    overload,
)

from guideloom._guideloom import (
    CborFormat,
    DocumentPickleFormat,
    HttpIO,
    MmapIO,
    PosixPreadIO,
    RawFileSystem,
    RawFormat,
    RawShard,
    RawShardWriter,
    SeekIO,
)
from guideloom._readers import (
    DocumentReads,
    ElementReads,
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

    _FormatArg = CborFormat | DocumentPickleFormat | RawFormat | Literal["cbor", "pickle", "raw"]

__all__ = [
    "DocumentShardReader",
    "FileSystemDocument",
    "FileSystemStream",
    "LocalShard",
    "ShardInfo",
    "ShardWriter",
    "StreamShardReader",
]

P = TypeVar("P")
W = TypeVar("W")

_Interface = SeekIO | PosixPreadIO | MmapIO | HttpIO


class LocalShard(NamedTuple):
    """A finished shard found by ``discover()``."""

    number: int
    #: Where it is, as the backend describes it (a path, a URL, the Python path's ``str``).
    location: str
    #: Records in it (documents; for a stream shard, its checksummed chunks).
    records: int
    #: Bytes in its data region (a stream shard's elements times their width).
    data_len: int


class ShardInfo(NamedTuple):
    """A shard published by ``ShardWriter.finish()``."""

    path: str
    records: int
    #: The shard file's size in bytes.
    size: int


class ShardWriter(FinishOnExit, Generic[W]):
    """Writes one shard: ``append(record)`` returns its local index; nothing appears under
    the shard's name until ``finish()`` (a context manager: leaving the block finishes,
    leaving it by an exception discards the shard). A taken name is ``ShardExistsError``."""

    _raw: RawShardWriter

    def __init__(self, raw: RawShardWriter, dtype: np.dtype[Any] | None = None) -> None:
        self._raw = raw
        self._dtype = dtype

    @property
    def number(self) -> int:
        return self._raw.number

    def append(self, record: W) -> int:
        if self._dtype is None:
            return self._raw.append(record)
        import numpy as np

        array = np.ascontiguousarray(record, dtype=self._dtype)
        return self._raw.append(array.data.cast("B"))

    def __len__(self) -> int:
        """Records appended so far."""
        return self._raw.len()

    def finish(self) -> ShardInfo:
        return ShardInfo(*self._raw.finish())

    def abort(self) -> None:
        """Discards the shard (its temporary file is deleted)."""
        self._raw.abort()


def _resolve(index: SupportsIndex, n: int) -> int:
    return resolve(index, n, "record", "shard")


class _Shard:
    """A shard's number, location and user metadata."""

    _raw: RawShard

    @property
    def number(self) -> int:
        return self._raw.number

    @property
    def location(self) -> str:
        return self._raw.location

    def user_metadata(self) -> dict[str, Any]:
        return self._raw.user_metadata()


class DocumentShardReader(_Shard, DocumentReads[Any]):
    """One document shard: ``read(i)``, ``read_many``, ``len()``, ``[i]``, ``[a:b]``,
    iteration, ``user_metadata()``. The shard is released when the reader is dropped."""

    def __init__(self, raw: RawShard) -> None:
        self._raw = raw

    def read(self, index: SupportsIndex) -> Any:
        return self._raw.read_documents([_resolve(index, self._raw.len())])[0]

    def read_many(self, indices: Iterable[SupportsIndex]) -> list[Any]:
        """Documents at ``indices`` (any order): one batched read."""
        n = self._raw.len()
        return self._raw.read_documents([_resolve(i, n) for i in indices])

    def len(self) -> int:
        return self._raw.len()


class StreamShardReader(_Shard, ElementReads):
    """One stream shard's elements: ``read(offset, length)`` (a read-only numpy view),
    ``len()`` (elements), ``[i]``, ``[a:b]``, iteration, ``user_metadata()``."""

    def __init__(self, raw: RawShard, dtype: np.dtype[Any]) -> None:
        self._raw = raw
        self._dtype = dtype
        self._len = raw.data_len() // dtype.itemsize

    def read(self, offset: SupportsIndex, length: SupportsIndex) -> np.ndarray[Any, np.dtype[Any]]:
        offset, length = check_range(offset, length, self._len)
        size = self._dtype.itemsize
        return as_array(self._raw.read_data(offset * size, length * size), self._dtype)

    def len(self) -> int:
        return self._len

    def _position(self, key: SupportsIndex, n: int) -> int:
        return _resolve(key, n)


class _FileSystem:
    """The directory, shard names and discovery of both file systems."""

    _raw: RawFileSystem

    @property
    def directory(self) -> str:
        return self._raw.directory

    def shard_name(self, n: int) -> str:
        """``<prefix>-<n zero-padded to 6 digits>.glm``."""
        return self._raw.shard_name(n)

    def discover(self) -> list[LocalShard]:
        """The finished shards ``0, 1, ...`` up to the first missing one."""
        return [LocalShard(*s) for s in self._raw.discover()]


class FileSystemDocument(_FileSystem):
    """Document shards ``<prefix>-NNNNNN.glm`` of one record format in ``directory``.

    ``create_shard(n)`` writes shard ``n`` (local directories only); ``discover()`` lists
    the finished shards and ``open_shard(n)`` reads one, both through ``read_interface``.
    """

    @overload
    def __init__(
        self,
        directory: str | PathLike[str],
        format: _FormatArg | None = None,
        *,
        prefix: str = "shard",
        read_interface: _Interface | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        directory: P,
        format: _FormatArg | None = None,
        *,
        prefix: str = "shard",
        read_interface: IOReaderAbstract[P],
    ) -> None: ...

    def __init__(
        self,
        directory: Any,
        format: _FormatArg | None = None,
        *,
        prefix: str = "shard",
        read_interface: _Interface | IOReaderAbstract[Any] | None = None,
    ) -> None:
        self._raw = RawFileSystem(
            directory, format=format, prefix=prefix, read_interface=read_interface
        )

    def open_shard(self, n: int) -> DocumentShardReader:
        """Shard ``n`` (one tail read); ``NotFoundError`` if it does not exist."""
        return DocumentShardReader(self._raw.open_shard(n))

    def create_shard(
        self, n: int, *, user_metadata: dict[str, Any] | None = None
    ) -> ShardWriter[Any]:
        """A writer of shard ``n`` with JSON-compatible ``user_metadata``."""
        return ShardWriter(self._raw.create_shard(n, user_metadata))


class FileSystemStream(_FileSystem):
    """Stream shards ``shard-NNNNNN.glm`` of ``dtype`` elements in ``directory``.

    Each ``append`` to a shard writer is one checksummed record (a run of elements); a
    reader reads any element range of one shard. The directory is also a ``StreamStorage``
    directory (whose writer cuts records of ``chunk_bytes``).
    """

    @overload
    def __init__(
        self,
        directory: str | PathLike[str],
        dtype: npt.DTypeLike,
        *,
        read_interface: _Interface | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self, directory: P, dtype: npt.DTypeLike, *, read_interface: IOReaderAbstract[P]
    ) -> None: ...

    def __init__(
        self,
        directory: Any,
        dtype: npt.DTypeLike,
        *,
        read_interface: _Interface | IOReaderAbstract[Any] | None = None,
    ) -> None:
        name, self.dtype = _element_name(dtype)
        self._raw = RawFileSystem(directory, element=name, read_interface=read_interface)

    def open_shard(self, n: int) -> StreamShardReader:
        """Shard ``n`` (one tail read); ``NotFoundError`` if it does not exist."""
        return StreamShardReader(self._raw.open_shard(n), self.dtype)

    def create_shard(
        self, n: int, *, user_metadata: dict[str, Any] | None = None
    ) -> ShardWriter[npt.ArrayLike]:
        """A writer of shard ``n``: ``append(elements)`` writes one record."""
        return ShardWriter(self._raw.create_shard(n, user_metadata), self.dtype)
