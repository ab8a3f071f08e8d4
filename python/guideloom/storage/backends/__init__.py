"""The scheme backends of :func:`guideloom.storage.default_registry`, one module each:
:mod:`guideloom.storage.backends.s3` (``s3://``), :mod:`guideloom.storage.backends.gcs`
(``gs://``) and :mod:`guideloom.storage.backends.azure` (``az://``). The objects are those of
:mod:`guideloom.storage`, under the names a backend module gives them.
"""

from __future__ import annotations

from guideloom.storage.backends import azure, gcs, s3

__all__ = ["azure", "gcs", "s3"]
