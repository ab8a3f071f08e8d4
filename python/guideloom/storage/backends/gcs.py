"""The ``gs://`` backend: :class:`GcsOptions` (endpoint, service-account key file, unsigned
requests, plain HTTP, retries) and :func:`gcs_backend` (the backend to register in
:func:`guideloom.storage.default_registry`). The same objects as :mod:`guideloom.storage`'s.

Credentials come from the Google environment as object_store reads it
(``GOOGLE_SERVICE_ACCOUNT``, ``GOOGLE_SERVICE_ACCOUNT_PATH``, ``GOOGLE_SERVICE_ACCOUNT_KEY``,
``GOOGLE_APPLICATION_CREDENTIALS``, the gcloud application-default file, the metadata server);
``GOOGLE_SKIP_SIGNATURE=true`` sends requests unsigned as ``anonymous=True`` does.
"""

from __future__ import annotations

from guideloom._guideloom import GcsBackend, GcsOptions, gcs_backend

__all__ = ["GcsBackend", "GcsOptions", "gcs_backend"]
