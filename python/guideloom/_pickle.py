"""Pickle support for the Rust core's values that cross process boundaries.

A :class:`~guideloom.ShardRef` returned by ``write_shard`` on a distributed worker (Dask,
Ray, ``multiprocessing``) travels back to the process that publishes by ``pickle``: it is
carried as its manifest JSON and rebuilt by :func:`shard_ref`. A record buffer
(:class:`~guideloom.Bytes`, e.g. from a ``DataLoader`` worker) arrives as plain ``bytes``: a
pickle copies the bytes anyway, and ``bytes`` is what every receiver understands.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable

from guideloom._records import Bytes
from guideloom._roots import ShardRef


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
