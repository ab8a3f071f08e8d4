"""Pickle support for the Rust core's values that cross process boundaries.

A :class:`~guideloom.ShardRef` returned by ``write_shard`` on a distributed worker (Dask,
Ray, ``multiprocessing``) travels back to the process that publishes by ``pickle``: it is
carried as its manifest JSON and rebuilt by :func:`shard_ref`. A record buffer
(:class:`~guideloom.Bytes`, e.g. from a ``DataLoader`` worker) arrives as plain ``bytes``: a
pickle copies the bytes anyway, and ``bytes`` is what every receiver understands.
:class:`~guideloom.GcsOptions` and :class:`~guideloom.AzureOptions` (e.g. in ``root_options=``
of an import with ``executor=``) travel as their keyword arguments, which hold no credential.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable
from typing import Any

from guideloom._records import Bytes
from guideloom._roots import ShardRef
from guideloom.storage import AzureOptions, GcsOptions


def shard_ref(state: str) -> ShardRef:
    """The :class:`ShardRef` whose manifest JSON is ``state``."""
    return ShardRef._from_json(state)


def _reduce_shard_ref(ref: ShardRef) -> tuple[Callable[[str], ShardRef], tuple[str]]:
    return shard_ref, (ref._to_json(),)


copyreg.pickle(ShardRef, _reduce_shard_ref)


def _reduce_bytes(buffer: Bytes) -> tuple[type[bytes], tuple[bytes]]:
    return bytes, (bytes(buffer),)


# Deliberately rebuilt as `bytes`, not `Bytes` (copyreg's stub expects the same type back).
copyreg.pickle(Bytes, _reduce_bytes)  # type: ignore[arg-type]


def gcs_options(kwargs: dict[str, Any]) -> GcsOptions:
    """The :class:`GcsOptions` built with ``kwargs``."""
    return GcsOptions(**kwargs)


def _reduce_gcs_options(
    options: GcsOptions,
) -> tuple[Callable[[dict[str, Any]], GcsOptions], tuple[dict[str, Any]]]:
    return gcs_options, (
        {
            "endpoint_url": options.endpoint_url,
            "service_account_path": options.service_account_path,
            "anonymous": options.anonymous,
            "allow_http": options.allow_http,
            "retries": options.retries,
        },
    )


copyreg.pickle(GcsOptions, _reduce_gcs_options)


def azure_options(kwargs: dict[str, Any]) -> AzureOptions:
    """The :class:`AzureOptions` built with ``kwargs``."""
    return AzureOptions(**kwargs)


def _reduce_azure_options(
    options: AzureOptions,
) -> tuple[Callable[[dict[str, Any]], AzureOptions], tuple[dict[str, Any]]]:
    return azure_options, (
        {
            "account_name": options.account_name,
            "endpoint_url": options.endpoint_url,
            "use_emulator": options.use_emulator,
            "allow_http": options.allow_http,
            "retries": options.retries,
        },
    )


copyreg.pickle(AzureOptions, _reduce_azure_options)
