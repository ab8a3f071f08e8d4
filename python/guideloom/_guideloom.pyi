# Type stubs of the Rust extension module (crates/guideloom-python). Keep in step with it.
from collections.abc import Iterable, Iterator, Sequence
from os import PathLike
from typing import Any, Literal, SupportsIndex, final, overload

__version__: str

_Root = str | PathLike[str]
_FormatArg = CborFormat | DocumentPickleFormat | RawFormat | Literal["cbor", "pickle", "raw"]

@final
class Bytes:
    """A read-only, zero-copy buffer over a record's bytes (buffer protocol)."""

    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    def to_bytes(self) -> bytes: ...

@final
class CborFormat:
    """JSON-compatible values as CBOR: the bytes of the Rust ``CborFormat``."""

    def __init__(self) -> None: ...
    @property
    def name(self) -> str: ...
    def encode(self, record: Any) -> Bytes: ...
    def decode(self, data: bytes | bytearray | memoryview | Bytes) -> Any: ...

@final
class DocumentPickleFormat:
    """Any picklable object (pickle protocol 5)."""

    def __init__(self) -> None: ...
    @property
    def name(self) -> str: ...

@final
class RawFormat:
    """Bytes-like records in, zero-copy :class:`Bytes` out."""

    def __init__(self) -> None: ...
    @property
    def name(self) -> str: ...

@final
class S3Options:
    def __init__(
        self,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        addressing_style: Literal["path", "virtual"] = "path",
        profile_name: str | None = None,
        allow_http: bool = False,
    ) -> None: ...
    @property
    def region_name(self) -> str | None: ...
    @property
    def endpoint_url(self) -> str | None: ...
    @property
    def addressing_style(self) -> str: ...
    @property
    def profile_name(self) -> str | None: ...
    @property
    def allow_http(self) -> bool: ...

@final
class ShardRef:
    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def record_count(self) -> int: ...

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

@final
class PublicationOptions:
    def __init__(self, *, verify_record_counts: bool = False) -> None: ...
    @property
    def verify_record_counts(self) -> bool: ...

@final
class Dataset:
    """One snapshot of a dataset root."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, key: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, key: slice) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...
    def get(self, index: SupportsIndex) -> Any: ...
    def get_many(self, indices: Iterable[SupportsIndex]) -> list[Any]: ...
    def get_raw(self, index: int) -> Bytes: ...
    def get_many_raw(self, indices: Iterable[SupportsIndex]) -> list[Bytes]: ...
    def annotation(self, name: str, index: int) -> Any: ...
    def annotations(self, name: str) -> list[Any]: ...
    @property
    def snapshot_id(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def format(self) -> str: ...

def open(
    root: _Root,
    *,
    snapshot: str | None = None,
    format: _FormatArg | None = None,
    s3: S3Options | None = None,
    mount: bool = False,
) -> Dataset: ...
def write_shard(
    records: Iterable[Any],
    root: _Root,
    *,
    work_id: str,
    shard: int = 0,
    format: _FormatArg | None = None,
    s3: S3Options | None = None,
    mount: bool = False,
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
    mount: bool = False,
) -> Snapshot: ...
def publish_annotations(
    root: _Root,
    name: str,
    version: str,
    values: Iterable[Any],
    *,
    snapshot: str | None = None,
    s3: S3Options | None = None,
    mount: bool = False,
) -> None: ...
