# Stub of the Rust loader's epoch plan and mixtures (Rust: crates/guideloom-python/src/order.rs,
# mixture.rs) and of the packing of a token stream's documents into windows (packing.rs).
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Self, SupportsIndex, TypeAlias, final

import numpy as np

from guideloom._records import Bytes
from guideloom._roots import Dataset, ReadAheadIter

@final
class Mixture:
    """Several datasets (or packings of token streams, each record a window) read as one id
    space, mixed by weight, by token share or by samples per epoch: the Rust
    ``guideloom::Mixture`` (order specified in docs/loader.md, "Weighted mixtures")."""

    def __new__(
        cls,
        sources: Sequence[Dataset | Packing],
        *,
        weights: Sequence[float] | None = None,
        token_shares: Sequence[float] | None = None,
        choose: Sequence[int | None] | None = None,
        repeat: Sequence[float | None] | None = None,
        ranges: Sequence[tuple[int, int] | None] | None = None,
        epoch_size: int | None = None,
        schedule: Sequence[tuple[int, Sequence[float]]] | None = None,
        every: int | None = None,
    ) -> Self: ...
    def __len__(self) -> int: ...
    def __getitem__(self, id: SupportsIndex, /) -> Any: ...
    def locate(self, id: SupportsIndex) -> tuple[int, int]: ...
    @property
    def sources(self) -> list[Dataset | Packing]: ...
    def get_many(self, ids: Iterable[SupportsIndex]) -> list[Any]: ...
    def get_many_raw(self, ids: Iterable[SupportsIndex]) -> list[Bytes]: ...
    def read_ahead(
        self,
        batches: Iterable[Iterable[SupportsIndex]] | EpochPlan,
        *,
        start: int = 0,
        step: int = 1,
        batches_ahead: int = ...,
        bytes_ahead: int = ...,
        raw: bool = False,
    ) -> ReadAheadIter: ...

@final
class EpochPlan:
    """The Rust ``Loader``'s plan of one epoch for one rank (no IO): see ``guideloom.torch``."""

    def __new__(
        cls,
        source: int | Dataset | Mixture,
        *,
        batch_size: int,
        epoch: int = 0,
        start: int = 0,
        seed: int = 0,
        shuffle: Literal["auto", "full", "window", "sequential"] = "auto",
        window: int = ...,  # 4 shards
        drop_last: bool = False,
        equalize: Literal["none", "pad", "drop"] = "none",
        rank: int = 0,
        world_size: int = 1,
        shard_bounds: Sequence[int] | None = None,
        remote: bool = False,
    ) -> Self: ...
    def __len__(self) -> int: ...
    def batch(self, k: int) -> list[int]: ...
    def global_batch(self, k: int) -> int: ...
    def records(self) -> list[int]: ...
    def record_at(self, p: int) -> int: ...
    def state_after(self, k: int) -> tuple[int, int, int]: ...
    @property
    def total_positions(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...

_Int64Matrix: TypeAlias = np.ndarray[tuple[int, int], np.dtype[np.int64]]
_Int64Stack: TypeAlias = np.ndarray[tuple[int, int, int], np.dtype[np.int64]]

@final
class Packing:
    """The documents of a token-stream ``Dataset`` packed best-fit into windows of ``seq_len``
    tokens (``seq_len + 1`` with ``labels``), for ``(seed, epoch)`` (docs/loader.md, "Packed
    windows"). ``batch(indices)`` builds the training arrays of windows ``indices``."""

    def __new__(
        cls,
        dataset: Dataset,
        *,
        seq_len: int,
        labels: bool = True,
        seed: int = 0,
        epoch: int = 0,
        buffer: int = ...,  # 4096 pieces
    ) -> Self: ...
    def repack(self, epoch: int) -> Packing: ...
    def __len__(self) -> int: ...
    def pieces(self, k: int) -> list[tuple[int, int]]: ...
    def batch(
        self,
        indices: Sequence[int],
        *,
        pad_id: int = 0,
        ignore_index: int = ...,  # -100
    ) -> dict[str, _Int64Matrix]: ...
    def batch_array(
        self,
        indices: Sequence[int],
        *,
        pad_id: int = 0,
        ignore_index: int = ...,  # -100
    ) -> _Int64Stack: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def labels(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def buffer(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def padding_tokens(self) -> int: ...
    @property
    def padding(self) -> float: ...
    @property
    def num_pieces(self) -> int: ...
    @property
    def num_documents(self) -> int: ...

__all__ = [
    "EpochPlan",
    "Mixture",
    "Packing",
]
