# Stubs of dataset roots, datasets, shard references and snapshots (Rust:
# crates/guideloom-python/src/{root,dataset,publish,tokens}.rs).
from collections.abc import Iterable, Sequence
from os import PathLike
from typing import Any, Literal, Self, SupportsIndex, TypeAlias, final, overload

import numpy as np
import numpy.typing as npt

from guideloom._plan import EpochPlan
from guideloom._records import Bytes, _FormatArg
from guideloom.storage import (
    ArrayRecordShardStore,
    AzureOptions,
    EphemeralFileStaging,
    GcsOptions,
    S3ObjectStore,
    S3Options,
    StorageOptions,
)

#: A root argument: a path, ``file://``, ``memory://``, ``s3://bucket/prefix``,
#: ``gs://bucket/prefix``, ``az://container/prefix`` or ``http(s)://``.
_Root: TypeAlias = str | PathLike[str]
_ShardStore: TypeAlias = EphemeralFileStaging | ArrayRecordShardStore
_Array: TypeAlias = np.ndarray[tuple[int], np.dtype[Any]]

@final
class ShardRef:
    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    def _to_json(self) -> str: ...
    @staticmethod
    def _from_json(json: str) -> ShardRef: ...

@final
class Snapshot:
    @property
    def id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def total_records(self) -> int: ...
    @property
    def shards(self) -> list[ShardRef]: ...
    @property
    def outcome(self) -> Literal["committed", "already_published", "other"] | None: ...

@final
class PublicationOptions:
    def __new__(cls, *, verify_record_counts: bool = False) -> Self: ...
    @property
    def verify_record_counts(self) -> bool: ...

@final
class DatasetIter:
    def __iter__(self) -> Self: ...
    def __next__(self) -> Any: ...

@final
class ReadAheadIter:
    """The batches of :meth:`Dataset.read_ahead`, in order."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> list[Any]: ...
    @property
    def held_bytes(self) -> int: ...
    def close(self) -> None: ...

@final
class RecordHtml:
    """One record as HTML (``Dataset.show(i)``); Jupyter displays it."""

    @property
    def html(self) -> str: ...
    def _repr_html_(self) -> str: ...

@final
class Dataset:
    """One snapshot of a dataset root (a token stream too, if its shards are stream shards)."""

    def __len__(self) -> int: ...
    def _repr_html_(self) -> str: ...
    def show(self, index: SupportsIndex) -> RecordHtml: ...
    @overload
    def __getitem__(self, key: SupportsIndex, /) -> Any: ...
    @overload
    def __getitem__(self, key: slice, /) -> list[Any]: ...
    def __iter__(self) -> DatasetIter: ...
    def get(self, index: SupportsIndex) -> Any: ...
    def get_many(self, indices: Iterable[SupportsIndex]) -> list[Any]: ...
    def get_raw(self, index: SupportsIndex) -> Bytes: ...
    def get_many_raw(self, indices: Iterable[SupportsIndex]) -> list[Bytes]: ...
    @property
    def schema(self) -> Any: ...
    def get_batch(
        self,
        indices: Iterable[SupportsIndex],
        *,
        annotations: Sequence[str | tuple[str, str]] | None = None,
    ) -> Any: ...
    def get_numpy(self, indices: Iterable[SupportsIndex]) -> dict[str, Any]: ...
    def batch_of(
        self,
        records: Sequence[Bytes],
        *,
        indices: Sequence[int] | None = None,
        annotations: Sequence[str | tuple[str, str]] | None = None,
    ) -> Any: ...
    def export(
        self,
        kind: Literal["parquet", "jsonl"],
        path: str | PathLike[str],
        *,
        start: int | None = None,
        stop: int | None = None,
        batch_records: int = 1024,
    ) -> tuple[int, int]: ...
    def read_ahead(
        self,
        batches: Iterable[Iterable[SupportsIndex]] | EpochPlan,
        *,
        start: int = 0,
        step: int = 1,
        batches_ahead: int = ...,
        bytes_ahead: int = ...,
        raw: bool = False,
    ) -> ReadAheadIter: ...
    def annotation(self, name: str, index: SupportsIndex) -> Any: ...
    def annotations(self, name: str) -> list[Any]: ...
    def stream_element(self) -> str: ...
    def num_tokens(self) -> int: ...
    def tokens(self, start: SupportsIndex, stop: SupportsIndex) -> _Array: ...
    def document(self, index: SupportsIndex) -> _Array: ...
    def document_range(self, index: SupportsIndex) -> range: ...
    def document_meta(self, index: SupportsIndex) -> Any: ...
    @property
    def snapshot_id(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def format(self) -> str: ...

@final
class Root:
    """A dataset root whose store is resolved once; the root's operations as methods."""

    def __new__(
        cls,
        uri: _Root,
        *,
        s3: S3Options | None = None,
        gcs: GcsOptions | None = None,
        azure: AzureOptions | None = None,
        mount: bool = False,
        object_store: S3ObjectStore | None = None,
        shard_store: _ShardStore | None = None,
        storage_options: StorageOptions | None = None,
        http_listing: bool = False,
    ) -> Self: ...
    @property
    def uri(self) -> str: ...
    @property
    def shard_store(self) -> _ShardStore | None: ...
    def write_shard(
        self,
        records: Iterable[Any],
        *,
        work_id: str,
        shard: int = 0,
        format: _FormatArg | None = None,
    ) -> ShardRef: ...
    def write_stream_shard(
        self,
        documents: Iterable[npt.ArrayLike],
        *,
        work_id: str,
        dtype: npt.DTypeLike,
        shard: int = 0,
    ) -> ShardRef: ...
    def adopt_array_record(self, key: str) -> ShardRef: ...
    def publish(
        self,
        shards: Sequence[ShardRef],
        *,
        dataset_id: str,
        snapshot_id: str,
        mode: Literal["full", "append"] = "full",
        options: PublicationOptions | None = None,
        schema: Any = None,
    ) -> Snapshot: ...
    def import_plan(
        self,
        kind: str,
        paths: Sequence[str],
        *,
        batch_rows: int = 1024,
        text_fields: Sequence[str] | None = None,
        unit_rows: int | None = None,
        fields: Sequence[str] | None = None,
    ) -> tuple[Any, int, int]: ...
    def import_units(
        self,
        kind: str,
        paths: Sequence[str],
        *,
        work_id: str,
        units: Sequence[int] | None = None,
        batch_rows: int = 1024,
        shard_bytes: int | None = None,
        first_shard: int = 0,
        text_fields: Sequence[str] | None = None,
        unit_rows: int | None = None,
        fields: Sequence[str] | None = None,
    ) -> dict[str, Any]: ...
    def write_batches(
        self,
        data: Any,
        *,
        work_id: str,
        shard_bytes: int | None = None,
        first_shard: int = 0,
    ) -> dict[str, Any]: ...
    def publish_annotations(
        self,
        name: str,
        version: str,
        values: Iterable[Any],
        *,
        snapshot: str | None = None,
    ) -> None: ...
    def open(
        self,
        *,
        snapshot: str | None = None,
        format: _FormatArg | None = None,
        cache_dir: str | PathLike[str] | None = None,
        cache_bytes: int | None = None,
    ) -> Dataset: ...
    def latest(self) -> Snapshot: ...
    def snapshot(self, snapshot_id: str) -> Snapshot: ...
    def snapshots(self) -> list[Snapshot]: ...
    def gc(
        self,
        *,
        keep_last: int = 1,
        keep_younger_than: float | None = None,
        keep_annotated: bool = True,
        grace: float = 604800.0,
        dry_run: bool = False,
    ) -> dict[str, Any]: ...
    def storage(self) -> dict[str, Any]: ...
    def expired(self) -> list[str]: ...
    def tag(self, name: str, snapshot_id: str) -> str | None: ...
    def untag(self, name: str) -> str: ...
    def tags(self) -> dict[str, str]: ...
    def compact(
        self,
        snapshot_id: str,
        *,
        from_snapshot: str | None = None,
        target_shard_bytes: int = 268435456,
        work_id: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]: ...
    def write_card(
        self,
        snapshot_id: str,
        readme: str,
        *,
        licence: str | None = None,
        description: str | None = None,
        citation: str | None = None,
        splits: dict[str, str] | None = None,
    ) -> None: ...
    def card(self, snapshot_id: str | None = None) -> dict[str, Any] | None: ...

def open(
    root: _Root,
    *,
    snapshot: str | None = None,
    format: _FormatArg | None = None,
    s3: S3Options | None = None,
    gcs: GcsOptions | None = None,
    azure: AzureOptions | None = None,
    mount: bool = False,
    object_store: S3ObjectStore | None = None,
    shard_store: _ShardStore | None = None,
    http_listing: bool = False,
    storage_options: StorageOptions | None = None,
    cache_dir: str | PathLike[str] | None = None,
    cache_bytes: int | None = None,
) -> Dataset: ...
def write_shard(
    records: Iterable[Any],
    root: _Root,
    *,
    work_id: str,
    shard: int = 0,
    format: _FormatArg | None = None,
    s3: S3Options | None = None,
    gcs: GcsOptions | None = None,
    azure: AzureOptions | None = None,
    mount: bool = False,
    object_store: S3ObjectStore | None = None,
    shard_store: ArrayRecordShardStore | None = None,
    storage_options: StorageOptions | None = None,
) -> ShardRef: ...
def adopt_array_record(
    root: _Root,
    key: str,
    *,
    s3: S3Options | None = None,
    gcs: GcsOptions | None = None,
    azure: AzureOptions | None = None,
    mount: bool = False,
    object_store: S3ObjectStore | None = None,
    storage_options: StorageOptions | None = None,
) -> ShardRef: ...
def publish(
    root: _Root,
    shards: Sequence[ShardRef],
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: Literal["full", "append"] = "full",
    options: PublicationOptions | None = None,
    s3: S3Options | None = None,
    gcs: GcsOptions | None = None,
    azure: AzureOptions | None = None,
    mount: bool = False,
    object_store: S3ObjectStore | None = None,
    storage_options: StorageOptions | None = None,
) -> Snapshot: ...
def publish_annotations(
    root: _Root,
    name: str,
    version: str,
    values: Iterable[Any],
    *,
    snapshot: str | None = None,
    s3: S3Options | None = None,
    gcs: GcsOptions | None = None,
    azure: AzureOptions | None = None,
    mount: bool = False,
    object_store: S3ObjectStore | None = None,
    storage_options: StorageOptions | None = None,
) -> None: ...
def convert_stream_storage(
    directory: str | PathLike[str],
    root: _Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    work_id: str = "convert",
    s3: S3Options | None = None,
    gcs: GcsOptions | None = None,
    azure: AzureOptions | None = None,
    mount: bool = False,
    object_store: S3ObjectStore | None = None,
    storage_options: StorageOptions | None = None,
) -> Snapshot: ...

__all__ = [
    "Dataset",
    "DatasetIter",
    "PublicationOptions",
    "ReadAheadIter",
    "RecordHtml",
    "Root",
    "ShardRef",
    "Snapshot",
    "adopt_array_record",
    "convert_stream_storage",
    "open",
    "publish",
    "publish_annotations",
    "write_shard",
]
