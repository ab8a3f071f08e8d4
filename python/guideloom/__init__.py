"""guideloom: sharded datasets of records for training and evaluating ML models.

The Rust core (``guideloom._guideloom``) does the IO; this package adds the exceptions
(:mod:`guideloom.exceptions`), the S3 options (:mod:`guideloom.storage`) and type stubs.
See ``docs/python.md``.

>>> import guideloom as gl
>>> shard = gl.write_shard(records, root, work_id="worker-000")  # doctest: +SKIP
>>> gl.publish(root, [shard], dataset_id="captures", snapshot_id="run-001")  # doctest: +SKIP
>>> gl.open(root)[42]  # doctest: +SKIP
"""

from __future__ import annotations

from guideloom._guideloom import (
    Bytes,
    CborFormat,
    AsyncDocumentReader,
    Dataset,
    DocumentPickleFormat,
    DocumentReader,
    DocumentStorage,
    DocumentWriter,
    EpochPlan,
    PublicationOptions,
    RawFormat,
    S3Options,
    ShardRef,
    Snapshot,
    StorageOptions,
    __version__,
    adopt_array_record,
    open,
    publish,
    publish_annotations,
    write_shard,
)
from guideloom import _pickle  # noqa: F401  (registers pickling of ShardRef)
from guideloom._streams import AsyncStreamReader, StreamReader, StreamStorage, StreamWriter
from guideloom._stream_meta import (
    AsyncStreamWithMetaReader,
    StreamWithMetaReader,
    StreamWithMetaStorage,
    StreamWithMetaWriter,
)
from guideloom._filesystem import (
    DocumentShardReader,
    FileSystemDocument,
    FileSystemStream,
    LocalShard,
    ShardInfo,
    ShardWriter,
    StreamShardReader,
)
from guideloom.exceptions import (
    ConcurrentUpdateError,
    CorruptObjectError,
    CorruptShardError,
    CountMismatchError,
    DatasetMismatchError,
    DecodeError,
    EncodeError,
    FormatMismatchError,
    GuideloomError,
    IndexOutOfRangeError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PublicationCollisionError,
    ReadOnlyRootError,
    RefusedFileError,
    ShardExistsError,
    StorageError,
    TooLargeError,
    UnsupportedError,
    VerificationError,
)

__all__ = [
    "AsyncDocumentReader",
    "AsyncStreamReader",
    "AsyncStreamWithMetaReader",
    "Bytes",
    "CborFormat",
    "ConcurrentUpdateError",
    "CorruptObjectError",
    "CorruptShardError",
    "CountMismatchError",
    "Dataset",
    "DatasetMismatchError",
    "DecodeError",
    "DocumentPickleFormat",
    "DocumentReader",
    "DocumentShardReader",
    "DocumentStorage",
    "DocumentWriter",
    "EncodeError",
    "EpochPlan",
    "FileSystemDocument",
    "FileSystemStream",
    "FormatMismatchError",
    "GuideloomError",
    "IndexOutOfRangeError",
    "InternalError",
    "InvalidArgumentError",
    "LocalShard",
    "NotFoundError",
    "PublicationCollisionError",
    "PublicationOptions",
    "RawFormat",
    "ReadOnlyRootError",
    "RefusedFileError",
    "S3Options",
    "ShardExistsError",
    "ShardInfo",
    "ShardRef",
    "ShardWriter",
    "Snapshot",
    "StorageError",
    "StorageOptions",
    "StreamReader",
    "StreamShardReader",
    "StreamStorage",
    "StreamWithMetaReader",
    "StreamWithMetaStorage",
    "StreamWithMetaWriter",
    "StreamWriter",
    "TooLargeError",
    "UnsupportedError",
    "VerificationError",
    "__version__",
    "adopt_array_record",
    "open",
    "publish",
    "publish_annotations",
    "write_shard",
]
