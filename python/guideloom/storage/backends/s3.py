"""The ``s3://`` backend: :class:`S3Options` (region, endpoint, addressing, plain HTTP,
profile, retries), :func:`s3_backend` (the backend to register in
:func:`guideloom.storage.default_registry`) and :class:`S3ObjectStore` (a store built once
and reused). The same objects as :mod:`guideloom.storage`'s.

Unset options come from the AWS environment as object_store reads it (``AWS_ENDPOINT_URL``,
``AWS_REGION``, ``AWS_ALLOW_HTTP``, ...), as for the command line.
"""

from __future__ import annotations

from guideloom._guideloom import S3Backend, S3ObjectStore, S3Options, s3_backend

__all__ = ["S3Backend", "S3ObjectStore", "S3Options", "s3_backend"]
