"""Storage of dataset roots: S3 options, reusable S3 stores, the registry, staging.

- :class:`S3Options` configures ``s3://`` roots (region, endpoint, addressing, plain HTTP,
  profile, ``retries`` = attempts of each request).
- :class:`S3ObjectStore` is a store built once and reused: pass it as
  ``open(root, object_store=store)`` (and to ``write_shard``, ``publish``,
  ``publish_annotations``); its S3 client and credentials are resolved once per bucket.
- :func:`default_registry` is the process-wide registry:
  ``default_registry().register(s3_backend(S3Options(...)), replace=True)`` makes later
  ``open("s3://...")`` calls without ``s3=``/``object_store=`` use those options.
- :class:`EphemeralFileStaging` stages whole remote shards into a local directory
  (``open(root, object_store=store, shard_store=staging)``); the files have no names and
  are reclaimed when the dataset is closed or collected.

Credentials come from the standard AWS chain (environment variables, shared config and
credentials files, named profiles through ``profile_name``); guideloom stores and logs none.
"""

from __future__ import annotations

from guideloom._guideloom import (
    EphemeralFileStaging,
    Registry,
    S3Backend,
    S3ObjectStore,
    S3Options,
    default_registry,
    s3_backend,
)

__all__ = [
    "EphemeralFileStaging",
    "Registry",
    "S3Backend",
    "S3ObjectStore",
    "S3Options",
    "default_registry",
    "s3_backend",
]
