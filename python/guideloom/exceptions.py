"""The exceptions guideloom raises.

Every one derives from :class:`GuideloomError`. Some also derive from the builtin a Python
caller already handles: a missing object is a :class:`FileNotFoundError`, an index past the
end an :class:`IndexError`, a bad argument a :class:`ValueError`. Failures of the storage
itself are :class:`StorageError`: transport, permission and disk failures, and the refusals
of a store (:class:`TooLargeError`, :class:`RefusedFileError`,
:class:`ConcurrentUpdateError`), so ``except StorageError`` catches every one of them.
``docs/python.md`` shows the whole hierarchy, and ``python/tests/test_errors.py`` checks
the classes against it.

The object at fault is in the message and, when known, in the attributes ``key`` (relative
to the root), ``path`` (a local file), ``index``/``len`` (a record index and the number of
records), ``uri`` and ``root``; attributes that do not apply are ``None``.

``KeyboardInterrupt`` and ``SystemExit`` raised inside a backend written in Python are never
wrapped: they reach the caller as themselves.
"""

from __future__ import annotations

__all__ = [
    "ConcurrentUpdateError",
    "CorruptObjectError",
    "CorruptShardError",
    "CountMismatchError",
    "DatasetMismatchError",
    "DecodeError",
    "EncodeError",
    "FormatMismatchError",
    "GuideloomError",
    "IndexOutOfRangeError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "PublicationCollisionError",
    "ReadOnlyRootError",
    "RefusedFileError",
    "SchemaError",
    "ShardExistsError",
    "StorageError",
    "TooLargeError",
    "UnsupportedError",
    "VerificationError",
]


class GuideloomError(Exception):
    """The base of every guideloom exception."""

    key: str | None
    path: str | None
    index: int | None
    len: int | None
    uri: str | None
    root: str | None

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        path: str | None = None,
        index: int | None = None,
        len: int | None = None,
        uri: str | None = None,
        root: str | None = None,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.path = path
        self.index = index
        self.len = len
        self.uri = uri
        self.root = root

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NotFoundError(GuideloomError, FileNotFoundError):
    """The object (shard, snapshot, annotation set, file) does not exist."""


class IndexOutOfRangeError(GuideloomError, IndexError):
    """A record index (or stream slice) past the end; ``index`` and ``len`` say which."""


class InvalidArgumentError(GuideloomError, ValueError):
    """An invalid argument: a name, a URI, an option, a non-dense index."""


class EncodeError(GuideloomError, ValueError):
    """A record could not be encoded by its format (``index`` is the record's)."""


class DecodeError(GuideloomError, ValueError):
    """A record's bytes could not be decoded by its format."""


class CountMismatchError(GuideloomError, ValueError):
    """A count given by the caller differs from the one it must equal."""


class SchemaError(GuideloomError, ValueError):
    """A record does not match its dataset's schema (``path`` names the shard, ``index`` the
    record, the message the field), or a snapshot's schema does not evolve from the latest
    one's (a changed type, a dropped field, a new required field: that needs a new dataset)."""


class PublicationCollisionError(GuideloomError):
    """A create-only object (``key``) already exists with different content."""


class ShardExistsError(GuideloomError, FileExistsError):
    """A storage writer found a shard already at the name it was about to use."""


class StorageError(GuideloomError):
    """A storage request or local file operation failed (transport, permission, disk)."""


class CorruptShardError(GuideloomError):
    """A shard (``key``) is damaged or not a shard: footer, index, metadata or a record."""


class CorruptObjectError(GuideloomError):
    """A control object of a root (identity, log entry, pointer, catalog) is malformed."""


class FormatMismatchError(GuideloomError):
    """A shard holds another record format or storage kind than the one asked for."""


class VerificationError(GuideloomError):
    """An object's size, hash or record count differs from the reference to it."""


class DatasetMismatchError(GuideloomError):
    """The root holds another dataset (or the annotation set another snapshot)."""


class ConcurrentUpdateError(StorageError):
    """A compare-and-swap kept losing to concurrent writers and gave up."""


class TooLargeError(StorageError):
    """An object is larger than its limit (a shard for one PUT, a control object, staging)."""


class ReadOnlyRootError(GuideloomError):
    """The root (an ``http(s)://`` base URL) is served, not written."""


class RefusedFileError(StorageError):
    """A local root met a symbolic link, FIFO, device or socket where it reads or writes, or
    a local backend (``SeekIO``, ``PosixPreadIO``, ``MmapIO``) something other than a
    regular file where it opens a shard (``path`` names it). Refused at once, never waited
    on."""


class UnsupportedError(GuideloomError):
    """The operation or root kind is not available (in this build, or on this store)."""


class InternalError(GuideloomError):
    """A bug in guideloom: a Rust panic was caught before it could reach the interpreter."""
