"""A torch dataset's source, opened lazily and picklable as a recipe (:class:`_Records`), and
the order options it shares with its sampler (:class:`_Order`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import guideloom as gl
from guideloom._plan import EpochPlan
from guideloom.torch._base import Equalize, Shuffle, Source, _s3_state, _shuffle_name, _world


class _Records:
    """The records of a source, opened lazily, picklable as a recipe to open them again.

    A root is re-opened at the snapshot pinned when it was first opened, so every worker
    reads the same records; a forked worker keeps the parent's object (the Rust core
    re-opens itself after a fork).
    """

    def __init__(
        self,
        source: Source,
        *,
        snapshot: str | None,
        format: Literal["cbor", "pickle", "raw"] | None,
        s3: gl.S3Options | None,
        gcs: gl.GcsOptions | None = None,
        azure: gl.AzureOptions | None = None,
    ) -> None:
        self._factory: Callable[[], Any] | None = None
        self._root: str | None = None
        self._snapshot = snapshot
        self._format = format
        self._s3 = _s3_state(s3)
        # GcsOptions and AzureOptions pickle themselves (guideloom._pickle).
        self._gcs = gcs
        self._azure = azure
        self._opened: Any = None
        if isinstance(source, (str, os.PathLike)):
            self._root = os.fspath(source)
        elif isinstance(source, gl.Dataset):
            self._adopt(source)
        elif isinstance(source, gl.Mixture):
            self._opened = source
        elif isinstance(source, (gl.DocumentStorage, gl.DocumentReader)):
            self._opened = self._reader(source)
        elif callable(source):
            self._factory = source
        else:
            raise TypeError(
                "a guideloom.torch source is a root URI or path, a guideloom.Dataset or Mixture, a "
                f"DocumentStorage or DocumentReader, or a function returning one; not {type(source).__name__}"
            )

    def _adopt(self, dataset: gl.Dataset) -> None:
        self._opened = dataset
        self._root = dataset.uri
        self._snapshot = dataset.snapshot_id
        self._format = dataset.format  # type: ignore[assignment]

    @staticmethod
    def _reader(value: Any) -> Any:
        return value.sync_reader() if isinstance(value, gl.DocumentStorage) else value

    def get(self) -> Any:
        """The opened dataset or reader of this process."""
        if self._opened is None:
            if self._factory is not None:
                made = self._factory()
                if isinstance(made, (gl.Dataset, gl.Mixture)):
                    self._opened = made
                else:
                    self._opened = self._reader(made)
            else:
                assert self._root is not None
                s3 = gl.S3Options(**self._s3) if self._s3 is not None else None
                self._adopt(
                    gl.open(
                        self._root,
                        snapshot=self._snapshot,
                        format=self._format,
                        s3=s3,
                        gcs=self._gcs,
                        azure=self._azure,
                    )
                )
        return self._opened

    def has_shards(self) -> bool:
        """A dataset or a mixture of datasets: shard bounds known, so shard windows work."""
        return isinstance(self.get(), (gl.Dataset, gl.Mixture))

    def __len__(self) -> int:
        return len(self.get())

    def one(self, index: int) -> Any:
        return self.get()[index]

    def many(self, indices: Sequence[int]) -> list[Any]:
        opened = self.get()
        if isinstance(opened, (gl.Dataset, gl.Mixture)):
            return opened.get_many(indices)
        return list(opened.read_many(indices))

    def batches(
        self, plan: EpochPlan, mine: range, *, ahead: int, ahead_bytes: int
    ) -> Iterator[list[Any]]:
        """The records of ``plan``'s batches ``mine``, in order; a dataset reads ``ahead``
        batches ahead (within ``ahead_bytes``; on a local root each batch is read when
        taken), the batches computed as they are fetched."""
        opened = self.get()
        if isinstance(opened, (gl.Dataset, gl.Mixture)) and ahead > 0 and len(mine) > 0:
            reader = opened.read_ahead(
                plan,
                start=mine.start,
                step=mine.step,
                batches_ahead=ahead,
                bytes_ahead=ahead_bytes,
            )
            try:
                yield from reader
            finally:
                reader.close()
            return
        for k in mine:
            yield self.many(plan.batch(k))

    def __getstate__(self) -> dict[str, Any]:
        if self._root is None and self._factory is None:
            raise TypeError(
                "a guideloom.torch dataset over a DocumentStorage or a Mixture cannot be sent to "
                "a spawned worker: pass a function that opens the storage or builds the mixture "
                "instead (or use fork)"
            )
        state = dict(self.__dict__)
        state["_opened"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class _Order:
    """The order options shared by the datasets and the sampler."""

    def __init__(
        self,
        records: _Records,
        *,
        seed: int,
        shuffle: Shuffle,
        window: int,
        drop_last: bool,
        equalize: Equalize,
        rank: int | None,
        world_size: int | None,
    ) -> None:
        self.records = records
        self.seed = seed
        self.shuffle = _shuffle_name(shuffle)
        self.window = window
        self.drop_last = drop_last
        self.equalize = equalize
        self.rank, self.world_size = _world(rank, world_size)
        # (batch_size, epoch, start) of the plan a BatchSampler began to hand out, set in the
        # main process before DataLoader workers start: the map-style dataset's read-ahead
        # follows that plan.
        self.announced: tuple[int, int, int] | None = None
        if self.shuffle == "window" and not records.has_shards():
            raise ValueError(
                'shuffle="window" needs a dataset root (a storage reader does not expose its '
                'shard bounds here); use "full"'
            )
        # Checks the options now (the Rust loader's checks) rather than in a worker.
        self.plan(batch_size=1, epoch=0, start=0)

    def plan(self, *, batch_size: int, epoch: int, start: int) -> EpochPlan:
        opened = self.records.get()
        source: int | gl.Dataset | gl.Mixture = (
            opened if isinstance(opened, (gl.Dataset, gl.Mixture)) else len(opened)
        )
        return EpochPlan(
            source,
            batch_size=batch_size,
            epoch=epoch,
            start=start,
            seed=self.seed,
            shuffle=self.shuffle,
            window=self.window,
            drop_last=self.drop_last,
            equalize=self.equalize,
            rank=self.rank,
            world_size=self.world_size,
        )


def _positions(plan: EpochPlan) -> int:
    """How many records this rank's batches of ``plan`` hold."""
    batches = len(plan)
    if batches == 0:
        return 0
    remaining = plan.total_positions - plan.start
    global_batches = -(-remaining // plan.batch_size)
    last = remaining - (global_batches - 1) * plan.batch_size
    holds_last = (global_batches - 1) % plan.world_size == plan.rank
    return batches * plan.batch_size - (plan.batch_size - last if holds_last else 0)
