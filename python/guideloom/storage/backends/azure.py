"""The ``az://`` backend (Azure Blob Storage; ``azure://`` and ``abfs://`` roots too):
:class:`AzureOptions` (account, endpoint, the Azurite emulator, plain HTTP, retries) and
:func:`azure_backend` (the backend to register in :func:`guideloom.storage.default_registry`).
The same objects as :mod:`guideloom.storage`'s.

Credentials come from the Azure environment as object_store reads it
(``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_KEY``, client secrets, workload identity,
the Azure CLI, managed identity); the account from ``account_name`` or
``AZURE_STORAGE_ACCOUNT_NAME``.
"""

from __future__ import annotations

from guideloom._guideloom import AzureBackend, AzureOptions, azure_backend

__all__ = ["AzureBackend", "AzureOptions", "azure_backend"]
