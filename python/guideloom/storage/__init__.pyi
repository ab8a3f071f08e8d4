# Stubs of guideloom.storage: S3, GCS and Azure options, stores, the registry, shard stores and
# root options (Rust: crates/guideloom-python/src/{options,cloud_options,stores,shard_stores}.rs).

from os import PathLike
from typing import Literal, Self, TypeAlias, final

@final
class S3Options:
    def __new__(
        cls,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        addressing_style: Literal["path", "virtual"] = "path",
        profile_name: str | None = None,
        allow_http: bool = False,
        retries: int | None = None,
    ) -> Self: ...
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
    @property
    def retries(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class GcsOptions:
    """Options of ``gs://`` roots; credentials come from the Google environment, never here."""

    def __new__(
        cls,
        *,
        endpoint_url: str | None = None,
        service_account_path: str | PathLike[str] | None = None,
        anonymous: bool = False,
        allow_http: bool = False,
        retries: int | None = None,
    ) -> Self: ...
    @property
    def endpoint_url(self) -> str | None: ...
    @property
    def service_account_path(self) -> str | None: ...
    @property
    def anonymous(self) -> bool: ...
    @property
    def allow_http(self) -> bool: ...
    @property
    def retries(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class AzureOptions:
    """Options of ``az://`` roots; credentials come from the Azure environment, never here."""

    def __new__(
        cls,
        *,
        account_name: str | None = None,
        endpoint_url: str | None = None,
        use_emulator: bool = False,
        allow_http: bool = False,
        retries: int | None = None,
    ) -> Self: ...
    @property
    def account_name(self) -> str | None: ...
    @property
    def endpoint_url(self) -> str | None: ...
    @property
    def use_emulator(self) -> bool: ...
    @property
    def allow_http(self) -> bool: ...
    @property
    def retries(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class S3ObjectStore:
    def __new__(cls, options: S3Options | None = None) -> Self: ...
    @property
    def options(self) -> S3Options: ...

@final
class S3Backend:
    def __new__(cls, options: S3Options | None = None) -> Self: ...
    @property
    def scheme(self) -> Literal["s3"]: ...
    @property
    def options(self) -> S3Options: ...

def s3_backend(options: S3Options | None = None) -> S3Backend: ...

@final
class GcsBackend:
    def __new__(cls, options: GcsOptions | None = None) -> Self: ...
    @property
    def scheme(self) -> Literal["gs"]: ...
    @property
    def options(self) -> GcsOptions: ...

def gcs_backend(options: GcsOptions | None = None) -> GcsBackend: ...

@final
class AzureBackend:
    def __new__(cls, options: AzureOptions | None = None) -> Self: ...
    @property
    def scheme(self) -> Literal["az"]: ...
    @property
    def options(self) -> AzureOptions: ...

def azure_backend(options: AzureOptions | None = None) -> AzureBackend: ...

_Backend: TypeAlias = S3Backend | GcsBackend | AzureBackend

@final
class Registry:
    def register(self, backend: _Backend, *, replace: bool = False) -> None: ...
    def unregister(self, scheme: str) -> bool: ...
    def backend(self, scheme: str) -> _Backend | None: ...

def default_registry() -> Registry: ...

@final
class EphemeralFileStaging:
    """Whole-shard staging; without ``objects=`` it builds its own default store."""

    def __new__(
        cls,
        *,
        objects: S3ObjectStore | None = None,
        directory: str | PathLike[str] | None = None,
        max_object_bytes: int | None = None,
    ) -> Self: ...
    @property
    def objects(self) -> S3ObjectStore: ...
    @property
    def owns_store(self) -> bool: ...
    @property
    def directory(self) -> str | None: ...
    @property
    def max_object_bytes(self) -> int: ...

@final
class ArrayRecordShardStore:
    """A root's shards as ArrayRecord files: written by ``write_shard``, read by ``open``."""

    def __new__(
        cls, *, staging: EphemeralFileStaging | None = None, options: str | None = None
    ) -> Self: ...
    @property
    def staging(self) -> EphemeralFileStaging | None: ...
    @property
    def options(self) -> str | None: ...

@final
class StorageOptions:
    """A root's options: ``max_encoded_shard_bytes`` (default 5 GiB)."""

    def __new__(cls, *, max_encoded_shard_bytes: int | None = None) -> Self: ...
    @property
    def max_encoded_shard_bytes(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

__all__ = [
    "ArrayRecordShardStore",
    "AzureBackend",
    "AzureOptions",
    "EphemeralFileStaging",
    "GcsBackend",
    "GcsOptions",
    "Registry",
    "S3Backend",
    "S3ObjectStore",
    "S3Options",
    "StorageOptions",
    "azure_backend",
    "default_registry",
    "gcs_backend",
    "s3_backend",
]
