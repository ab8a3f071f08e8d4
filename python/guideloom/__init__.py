"""guideloom: sharded datasets of records for training and evaluating ML models.

The Rust core (``guideloom._guideloom``) does the IO; this package adds the exceptions
(:mod:`guideloom.exceptions`), the S3, GCS and Azure options (:mod:`guideloom.storage`) and
type stubs.
See ``docs/python.md``.

>>> import guideloom as gl
>>> root = gl.Root("s3://bucket/captures", s3=gl.S3Options(region_name="eu-west-1"))  # doctest: +SKIP
>>> shard = root.write_shard(records, work_id="worker-000")  # doctest: +SKIP
>>> root.publish([shard], dataset_id="captures", snapshot_id="run-001")  # doctest: +SKIP
>>> root.open()[42]  # doctest: +SKIP

The module-level functions take the root and its store arguments on every call:
``gl.write_shard(records, root, work_id=..., s3=...)`` is ``gl.Root(root, s3=...).write_shard(...)``.
"""

from __future__ import annotations

from guideloom import _pickle  # noqa: F401  (registers pickling of ShardRef and the options)
from guideloom._documents import (
    AsyncDocumentReader,
    DocumentReader,
    DocumentStorage,
    DocumentWriter,
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
from guideloom._guideloom import __version__
from guideloom._imports import (
    ImportSummary,
    export_jsonl,
    export_parquet,
    import_arrow,
    import_csv,
    import_jsonl,
    import_mds,
    import_parquet,
    import_webdataset,
    write_table,
)
from guideloom._keep import gc
from guideloom._plan import EpochPlan, Mixture, Packing
from guideloom._records import Bytes, CborFormat, DocumentPickleFormat, RawFormat
from guideloom._roots import (
    Dataset,
    PublicationOptions,
    ReadAheadIter,
    RecordHtml,
    Root,
    ShardRef,
    Snapshot,
    adopt_array_record,
    convert_stream_storage,
    open,
    publish,
    publish_annotations,
    write_shard,
)
from guideloom._stream_meta import (
    AsyncStreamWithMetaReader,
    StreamWithMetaReader,
    StreamWithMetaStorage,
    StreamWithMetaWriter,
)
from guideloom._streams import AsyncStreamReader, StreamReader, StreamStorage, StreamWriter
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
    SchemaError,
    ShardExistsError,
    StorageError,
    TooLargeError,
    UnsupportedError,
    VerificationError,
)
from guideloom.storage import AzureOptions, GcsOptions, S3Options, StorageOptions

__all__ = [
    "AsyncDocumentReader",
    "AsyncStreamReader",
    "AsyncStreamWithMetaReader",
    "AzureOptions",
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
    "GcsOptions",
    "GuideloomError",
    "ImportSummary",
    "IndexOutOfRangeError",
    "InternalError",
    "InvalidArgumentError",
    "LocalShard",
    "Mixture",
    "NotFoundError",
    "Packing",
    "PublicationCollisionError",
    "PublicationOptions",
    "RawFormat",
    "ReadAheadIter",
    "ReadOnlyRootError",
    "RecordHtml",
    "RefusedFileError",
    "Root",
    "S3Options",
    "SchemaError",
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
    "convert_stream_storage",
    "export_jsonl",
    "export_parquet",
    "gc",
    "import_arrow",
    "import_csv",
    "import_jsonl",
    "import_mds",
    "import_parquet",
    "import_webdataset",
    "open",
    "publish",
    "publish_annotations",
    "write_shard",
    "write_table",
]
