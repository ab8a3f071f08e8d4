# The Rust extension module (crates/guideloom-python, built by maturin). Its classes are typed
# in one stub per concern, and this stub re-exports them so that `mypy.stubtest` checks every
# name of the extension against the compiled module:
#   _records.pyi           record formats, Bytes
#   _roots.pyi             Root, Dataset (and its token-stream reads), ShardRef, Snapshot,
#                          PublicationOptions, open / write_shard / adopt_array_record /
#                          publish / publish_annotations / convert_stream_storage
#   _documents.pyi         DocumentStorage and its readers and writers
#   _plan.pyi              EpochPlan, Mixture, Packing
#   _raw.pyi               the Rust halves of the numpy-typed storages (private)
#   io.pyi                 IO backends (guideloom.io)
#   storage/__init__.pyi   S3, GCS and Azure options, stores, registry, shard stores
#                          (guideloom.storage)
from guideloom._documents import AsyncDocumentReader as AsyncDocumentReader
from guideloom._documents import AsyncDocumentReaderContext as AsyncDocumentReaderContext
from guideloom._documents import DocumentIter as DocumentIter
from guideloom._documents import DocumentReader as DocumentReader
from guideloom._documents import DocumentStorage as DocumentStorage
from guideloom._documents import DocumentWriter as DocumentWriter
from guideloom._plan import EpochPlan as EpochPlan
from guideloom._plan import Mixture as Mixture
from guideloom._plan import Packing as Packing
from guideloom._raw import RawAsyncStreamMetaReader as RawAsyncStreamMetaReader
from guideloom._raw import RawAsyncStreamReader as RawAsyncStreamReader
from guideloom._raw import RawFileSystem as RawFileSystem
from guideloom._raw import RawShard as RawShard
from guideloom._raw import RawShardWriter as RawShardWriter
from guideloom._raw import RawStreamMetaReader as RawStreamMetaReader
from guideloom._raw import RawStreamMetaStorage as RawStreamMetaStorage
from guideloom._raw import RawStreamMetaWriter as RawStreamMetaWriter
from guideloom._raw import RawStreamReader as RawStreamReader
from guideloom._raw import RawStreamStorage as RawStreamStorage
from guideloom._raw import RawStreamWriter as RawStreamWriter
from guideloom._records import Bytes as Bytes
from guideloom._records import CborFormat as CborFormat
from guideloom._records import DocumentPickleFormat as DocumentPickleFormat
from guideloom._records import RawFormat as RawFormat
from guideloom._roots import Dataset as Dataset
from guideloom._roots import DatasetIter as DatasetIter
from guideloom._roots import PublicationOptions as PublicationOptions
from guideloom._roots import ReadAheadIter as ReadAheadIter
from guideloom._roots import RecordHtml as RecordHtml
from guideloom._roots import Root as Root
from guideloom._roots import ShardRef as ShardRef
from guideloom._roots import Snapshot as Snapshot
from guideloom._roots import adopt_array_record as adopt_array_record
from guideloom._roots import convert_stream_storage as convert_stream_storage
from guideloom._roots import open as open
from guideloom._roots import publish as publish
from guideloom._roots import publish_annotations as publish_annotations
from guideloom._roots import write_shard as write_shard
from guideloom.io import HttpIO as HttpIO
from guideloom.io import MmapIO as MmapIO
from guideloom.io import PosixPreadIO as PosixPreadIO
from guideloom.io import SeekIO as SeekIO
from guideloom.storage import ArrayRecordShardStore as ArrayRecordShardStore
from guideloom.storage import AzureBackend as AzureBackend
from guideloom.storage import AzureOptions as AzureOptions
from guideloom.storage import EphemeralFileStaging as EphemeralFileStaging
from guideloom.storage import GcsBackend as GcsBackend
from guideloom.storage import GcsOptions as GcsOptions
from guideloom.storage import Registry as Registry
from guideloom.storage import S3Backend as S3Backend
from guideloom.storage import S3ObjectStore as S3ObjectStore
from guideloom.storage import S3Options as S3Options
from guideloom.storage import StorageOptions as StorageOptions
from guideloom.storage import azure_backend as azure_backend
from guideloom.storage import default_registry as default_registry
from guideloom.storage import gcs_backend as gcs_backend
from guideloom.storage import s3_backend as s3_backend

__version__: str

__all__ = [
    "ArrayRecordShardStore",
    "AsyncDocumentReader",
    "AsyncDocumentReaderContext",
    "AzureBackend",
    "AzureOptions",
    "Bytes",
    "CborFormat",
    "Dataset",
    "DatasetIter",
    "DocumentIter",
    "DocumentPickleFormat",
    "DocumentReader",
    "DocumentStorage",
    "DocumentWriter",
    "EphemeralFileStaging",
    "EpochPlan",
    "GcsBackend",
    "GcsOptions",
    "HttpIO",
    "Mixture",
    "MmapIO",
    "Packing",
    "PosixPreadIO",
    "PublicationOptions",
    "RawAsyncStreamMetaReader",
    "RawAsyncStreamReader",
    "RawFileSystem",
    "RawFormat",
    "RawShard",
    "RawShardWriter",
    "RawStreamMetaReader",
    "RawStreamMetaStorage",
    "RawStreamMetaWriter",
    "RawStreamReader",
    "RawStreamStorage",
    "RawStreamWriter",
    "ReadAheadIter",
    "RecordHtml",
    "Registry",
    "Root",
    "S3Backend",
    "S3ObjectStore",
    "S3Options",
    "SeekIO",
    "ShardRef",
    "Snapshot",
    "StorageOptions",
    "__version__",
    "adopt_array_record",
    "azure_backend",
    "convert_stream_storage",
    "default_registry",
    "gcs_backend",
    "open",
    "publish",
    "publish_annotations",
    "s3_backend",
    "write_shard",
]
