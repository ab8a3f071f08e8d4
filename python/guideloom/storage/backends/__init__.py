"""The scheme backends of :func:`guideloom.storage.default_registry`, one module each:
:mod:`guideloom.storage.backends.s3` (``s3://``). The objects are those of
:mod:`guideloom.storage`, under the names a backend module gives them.
"""

from __future__ import annotations

from guideloom.storage.backends import s3

__all__ = ["s3"]
