"""What the torch datasets share: torch's base classes (or ``object`` when torch is missing),
the option types, and the helpers that resolve ranks, shuffle names and S3 options."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

import guideloom as gl

if TYPE_CHECKING:
    from torch.utils.data import Dataset as _MapBase
    from torch.utils.data import IterableDataset as _IterBase
    from torch.utils.data import Sampler as _SamplerBase

    _MapStyle: TypeAlias = _MapBase[Any]
    _IterStyle: TypeAlias = _IterBase[Any]
    _BatchSamplerBase: TypeAlias = _SamplerBase[list[int]]
else:
    try:
        from torch.utils.data import Dataset as _MapStyle
        from torch.utils.data import IterableDataset as _IterStyle
        from torch.utils.data import Sampler as _BatchSamplerBase

        _TORCH_MISSING: ImportError | None = None
    except ImportError as missing:  # the classes below raise it when used
        _MapStyle = _IterStyle = _BatchSamplerBase = object
        _TORCH_MISSING = missing


Shuffle = bool | Literal["auto", "full", "window", "sequential"]
"""``True`` is ``"auto"`` (shard windows on remote roots, a full shuffle otherwise), ``False``
is ``"sequential"``; the names are the Rust ``ShuffleMode``s."""

Equalize = Literal["none", "pad", "drop"]

Source = (
    str
    | os.PathLike[str]
    | gl.Dataset
    | gl.Mixture
    | gl.DocumentStorage
    | gl.DocumentReader
    | Callable[[], "gl.Dataset | gl.Mixture | gl.DocumentStorage | gl.DocumentReader"]
)
"""A root URI or path, an opened dataset, a :class:`guideloom.Mixture` of datasets, a document
storage or its reader, or a picklable function returning one of those (what a spawned worker
calls to open it again). A mixture's record indices are its ids (``mixture.locate(id)``)."""


class LoaderState(TypedDict):
    """The Rust ``LoaderState``: positions ``0..consumed`` of ``epoch``'s global order are
    delivered (by all ranks together)."""

    seed: int
    epoch: int
    consumed: int


def _require_torch() -> None:
    missing = globals().get("_TORCH_MISSING")
    if missing is not None:
        raise ImportError("guideloom.torch needs PyTorch: `pip install torch`") from missing


def _world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """The rank and world size given, else torch.distributed's when initialised, else 0 of 1."""
    if rank is not None and world_size is not None:
        return rank, world_size
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return (
            dist.get_rank() if rank is None else rank,
            dist.get_world_size() if world_size is None else world_size,
        )
    if rank is not None or world_size is not None:
        raise ValueError("pass both rank= and world_size=, or neither (torch.distributed decides)")
    return 0, 1


def _shuffle_name(shuffle: Shuffle) -> Literal["auto", "full", "window", "sequential"]:
    if shuffle is True:
        return "auto"
    if shuffle is False:
        return "sequential"
    return shuffle


def _s3_state(s3: gl.S3Options | None) -> dict[str, Any] | None:
    if s3 is None:
        return None
    return {
        "region_name": s3.region_name,
        "endpoint_url": s3.endpoint_url,
        "addressing_style": s3.addressing_style,
        "profile_name": s3.profile_name,
        "allow_http": s3.allow_http,
    }
