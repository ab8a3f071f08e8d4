"""Storage options of dataset roots: :class:`S3Options` for ``s3://`` roots.

Credentials come from the standard AWS chain (environment variables, shared config and
credentials files, named profiles through ``profile_name``); guideloom stores and logs none.
"""

from __future__ import annotations

from guideloom._guideloom import S3Options

__all__ = ["S3Options"]
