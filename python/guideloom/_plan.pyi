# Stub of the Rust loader's epoch plan (Rust: crates/guideloom-python/src/order.rs).
from collections.abc import Sequence
from typing import Literal, Self, final

from guideloom._roots import Dataset

@final
class EpochPlan:
    """The Rust ``Loader``'s plan of one epoch for one rank (no IO): see ``guideloom.torch``."""

    def __new__(
        cls,
        source: int | Dataset,
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

__all__ = [
    "EpochPlan",
]
