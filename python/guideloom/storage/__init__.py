"""Storage of dataset roots: S3, GCS and Azure options, reusable S3 stores, the registry,
shard stores and root options.

- :class:`S3Options` configures ``s3://`` roots (region, endpoint, addressing, plain HTTP,
  profile, ``retries`` = attempts of each request).
- :class:`GcsOptions` configures ``gs://`` roots (endpoint, service-account key file,
  unsigned requests, plain HTTP, retries) and :class:`AzureOptions` ``az://`` roots (account,
  endpoint, the Azurite emulator, plain HTTP, retries); every call that takes ``s3=`` takes
  ``gcs=`` and ``azure=`` too.
- :class:`S3ObjectStore` is a store built once and reused: pass it as
  ``open(root, object_store=store)`` (and to ``write_shard``, ``publish``,
  ``publish_annotations``); its S3 client and credentials are resolved once per bucket.
- :func:`default_registry` is the process-wide registry:
  ``default_registry().register(s3_backend(S3Options(...)), replace=True)`` makes later
  ``open("s3://...")`` calls without ``s3=``/``object_store=`` use those options;
  :func:`gcs_backend` and :func:`azure_backend` do the same for ``gs://`` and ``az://``.
- :class:`EphemeralFileStaging` stages whole remote shards into a local directory
  (``open(root, object_store=store, shard_store=staging)``); the files have no names and
  are reclaimed when the dataset is closed or collected. Without ``objects=`` it builds its
  own default :class:`S3ObjectStore` (AWS environment options), which shares nothing with
  the caller's stores, ``s3=`` options or registered backends (see ``docs/python.md``).
- :class:`ArrayRecordShardStore` makes a root's shards ArrayRecord files:
  ``write_shard(records, root, ..., shard_store=ArrayRecordShardStore())`` writes one, and
  ``open(root, shard_store=ArrayRecordShardStore(staging=...))`` reads them through its
  staging.
- :class:`StorageOptions` are a root's options (``storage_options=`` on every call):
  ``max_encoded_shard_bytes``, the largest shard written or published (default 5 GiB).
- :mod:`guideloom.storage.backends.s3` names the S3 backend: ``S3Options``, ``s3_backend``;
  :mod:`~guideloom.storage.backends.gcs` and :mod:`~guideloom.storage.backends.azure` the
  others.

Credentials come from the standard AWS chain (environment variables, shared config and
credentials files, named profiles through ``profile_name``), the Google and Azure
environments (``GOOGLE_APPLICATION_CREDENTIALS``, ``GOOGLE_SERVICE_ACCOUNT*``,
``AZURE_STORAGE_ACCOUNT_KEY``, SAS tokens, identities); guideloom stores and logs none.
"""

from __future__ import annotations

from guideloom._guideloom import (
    ArrayRecordShardStore,
    AzureBackend,
    AzureOptions,
    EphemeralFileStaging,
    GcsBackend,
    GcsOptions,
    Registry,
    S3Backend,
    S3ObjectStore,
    S3Options,
    StorageOptions,
    azure_backend,
    default_registry,
    gcs_backend,
    s3_backend,
)

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
