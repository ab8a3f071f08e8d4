"""The map-style :class:`Dataset` with its :class:`BatchSampler`, and the
:class:`IterableDataset`."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import guideloom as gl
from guideloom._plan import EpochPlan
from guideloom.torch._base import (
    Equalize,
    LoaderState,
    Shuffle,
    Source,
    _BatchSamplerBase,
    _IterStyle,
    _MapStyle,
    _require_torch,
)
from guideloom.torch._records import _Order, _positions, _Records


class Dataset(_MapStyle):
    """A map-style PyTorch dataset: ``ds[i]`` is record ``i`` of ``source``, decoded.

    ``__getitems__`` reads a whole batch with one coalesced read per shard (GIL released), so
    ``DataLoader(ds, batch_size=...)`` and :meth:`batch_sampler` fetch each batch at once.
    ``seed``, ``shuffle``, ``window``, ``drop_last``, ``equalize``, ``rank`` and
    ``world_size`` configure :meth:`batch_sampler` (the Rust loader's options of the same
    names; ``rank``/``world_size`` default to torch.distributed's when it is initialised).
    ``snapshot``, ``format``, ``s3``, ``gcs`` and ``azure`` are :func:`guideloom.open`'s, for
    a root URI (the options also re-open an opened remote dataset in a spawned worker).

    ``columns=True`` (a dataset with a schema) makes ``__getitems__`` return the batch as one
    ``pyarrow.RecordBatch``, decoded in Rust (read-ahead included), with the annotation sets
    ``annotations`` (names, or ``(name, version)``) joined as extra columns; pass
    ``collate_fn=guideloom.torch.collate_columns`` to the ``DataLoader`` for a dict of
    tensors (numbers and tensors as tensors, text and bytes as lists).

    Iterated through :meth:`batch_sampler`, each ``DataLoader`` worker reads its next
    ``read_ahead`` batches ahead (within ``read_ahead_bytes``; ``read_ahead=0``: off): the
    sampler announces its plan before the workers start, and a worker predicts the batches
    the ``DataLoader`` will hand it and checks each one asked for. Any other sampler, or
    ``persistent_workers=True`` past the first epoch, reads each batch when asked.
    """

    def __init__(
        self,
        source: Source,
        *,
        seed: int = 0,
        shuffle: Shuffle = True,
        window: int = 4,
        drop_last: bool = False,
        equalize: Equalize = "none",
        rank: int | None = None,
        world_size: int | None = None,
        snapshot: str | None = None,
        format: Literal["cbor", "pickle", "raw"] | None = None,
        s3: gl.S3Options | None = None,
        gcs: gl.GcsOptions | None = None,
        azure: gl.AzureOptions | None = None,
        read_ahead: int = 16,
        read_ahead_bytes: int = 64 << 20,
        columns: bool = False,
        annotations: Sequence[str | tuple[str, str]] = (),
    ) -> None:
        _require_torch()
        self._columns = columns
        self._annotations = list(annotations)
        if self._annotations and not columns:
            raise ValueError("annotations= joins columns: it needs columns=True")
        if read_ahead < 0 or read_ahead_bytes < 0:
            raise ValueError("read_ahead and read_ahead_bytes must not be negative")
        self._read_ahead = read_ahead
        self._read_ahead_bytes = read_ahead_bytes
        self._ahead: _Ahead | None = None
        # The announced plan this process's read-ahead was tried for (tried once each).
        self._ahead_tried: tuple[int, int, int] | None = None
        self._records = _Records(
            source, snapshot=snapshot, format=format, s3=s3, gcs=gcs, azure=azure
        )
        self._order = _Order(
            self._records,
            seed=seed,
            shuffle=shuffle,
            window=window,
            drop_last=drop_last,
            equalize=equalize,
            rank=rank,
            world_size=world_size,
        )

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, index: int) -> Any:
        return self._records.one(index)

    def __getitems__(self, indices: Sequence[int]) -> Any:
        """The records at ``indices``: one batched read, coalesced per shard (or taken from
        this worker's read-ahead, see the class documentation)."""
        if self._ahead is not None:
            got = self._ahead.take(indices)
            if got is not None:
                return self._batch(got, indices)
            self._ahead.reader.close()
            self._ahead = None
        started = self._start_ahead(indices)
        if started is not None:
            return self._batch(started, indices)
        if self._columns:
            return self._records.get().get_batch(indices, annotations=self._annotations)
        return self._records.many(indices)

    def _batch(self, records: list[Any], indices: Sequence[int]) -> Any:
        """A read-ahead batch as :meth:`__getitems__` returns it (raw records are decoded
        into one Arrow batch in ``columns`` mode)."""
        if self._columns:
            return self._records.get().batch_of(
                records, indices=list(indices), annotations=self._annotations
            )
        return records

    def _start_ahead(self, indices: Sequence[int]) -> list[Any] | None:
        """Starts reading ahead from the batch ``indices`` is, if the announced plan (tried
        once per plan and process) says which one it is."""
        announced = self._order.announced
        if self._read_ahead == 0 or announced is None or not self._records.has_shards():
            return None
        if self._ahead_tried == announced:
            return None
        self._ahead_tried = announced
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        batch_size, epoch, start = announced
        plan = self._order.plan(batch_size=batch_size, epoch=epoch, start=start)
        mine = range(worker, len(plan), workers)
        wanted = list(indices)
        at = next((n for n, k in enumerate(mine) if plan.batch(k) == wanted), None)
        if at is None:
            return None
        ks = mine[at:]
        opened = self._records.get()
        reader = opened.read_ahead(
            plan,
            start=ks.start,
            step=ks.step,
            batches_ahead=self._read_ahead,
            bytes_ahead=self._read_ahead_bytes,
            raw=self._columns,
        )
        self._ahead = _Ahead(plan, ks, reader)
        return self._ahead.take(indices)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_ahead"] = None  # a reader belongs to the process that made it
        return state

    def plan(self, batch_size: int, *, epoch: int = 0, start: int = 0) -> EpochPlan:
        """This rank's plan of ``epoch`` in batches of ``batch_size`` (the Rust loader's)."""
        return self._order.plan(batch_size=batch_size, epoch=epoch, start=start)

    def batch_sampler(self, batch_size: int, *, epoch: int = 0) -> BatchSampler:
        """A sampler of this rank's batches of record indices, in the Rust loader's order."""
        return BatchSampler(self._order, batch_size=batch_size, epoch=epoch)


class _Ahead:
    """A DataLoader worker's read-ahead for the map-style :class:`Dataset`: the batches the
    ``DataLoader`` will hand this worker next, predicted from the announced plan (batch ``k``
    of the sampler goes to worker ``k % num_workers``) and checked against each batch asked
    for; a batch that is not the predicted one is read directly and ends the prediction."""

    def __init__(self, plan: EpochPlan, ks: range, reader: gl.ReadAheadIter) -> None:
        self.pid = os.getpid()
        self.plan = plan
        self.ks = ks
        self.pos = 0
        self.reader = reader

    def take(self, indices: Sequence[int]) -> list[Any] | None:
        if self.pid != os.getpid() or self.pos >= len(self.ks):
            return None
        if self.plan.batch(self.ks[self.pos]) != list(indices):
            return None
        self.pos += 1
        return next(self.reader)


class _Progress:
    """Epoch and position, with the ``state_dict`` protocol of :class:`LoaderState`."""

    def __init__(self, order: _Order, batch_size: int, epoch: int) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._order = order
        self._batch_size = batch_size
        self._epoch = epoch
        self._start = 0
        self._delivered: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning at the next iteration."""
        self._epoch = epoch
        self._start = 0
        self._delivered = None

    def plan(self) -> EpochPlan:
        """The plan the next iteration follows (this rank, from the loaded position)."""
        return self._order.plan(batch_size=self._batch_size, epoch=self._epoch, start=self._start)

    def state_dict(self, batches: int | None = None) -> LoaderState:
        """Where the epoch stands once this rank received ``batches`` batches of it.

        ``batches`` counts the batches the training loop received since the epoch (or the
        loaded state) started, all ranks in lockstep. Without it, what this process iterated
        itself is counted, which is right only when no ``DataLoader`` workers run.
        """
        if batches is None:
            if self._delivered is None:
                if self._start == 0:
                    raise ValueError(
                        "pass batches=: the batches were read by DataLoader workers (or not at "
                        "all), so this process cannot count them"
                    )
                batches = 0
            else:
                batches = self._delivered
        if batches < 0:
            raise ValueError(f"batches must not be negative: {batches}")
        seed, epoch, consumed = self.plan().state_after(batches)
        return {"seed": seed, "epoch": epoch, "consumed": consumed}

    def load_state_dict(self, state: LoaderState) -> None:
        """Continue from ``state``: the next iteration delivers exactly the rest of its epoch."""
        if state["seed"] != self._order.seed:
            raise ValueError(
                f"state has seed {state['seed']}, this dataset has seed {self._order.seed}"
            )
        self._order.plan(batch_size=self._batch_size, epoch=state["epoch"], start=state["consumed"])
        self._epoch = state["epoch"]
        self._start = state["consumed"]
        self._delivered = None


class BatchSampler(_Progress, _BatchSamplerBase):
    """This rank's batches of record indices in the Rust loader's order, for a map-style
    :class:`Dataset`: ``DataLoader(ds, batch_sampler=ds.batch_sampler(32))``.

    The sampler runs in the main process; ``DataLoader`` workers fetch the batches with
    ``__getitems__``. ``set_epoch``/``state_dict``/``load_state_dict`` as for
    :class:`IterableDataset` (``state_dict`` needs ``batches=``: the loader draws batches
    ahead of the training loop).
    """

    def __init__(self, order: _Order, *, batch_size: int, epoch: int = 0) -> None:
        _require_torch()
        _Progress.__init__(self, order, batch_size, epoch)

    def __iter__(self) -> Iterator[list[int]]:
        # Not a generator: the plan is announced when DataLoader calls iter(), before it
        # starts its workers, so that the dataset they get knows what to read ahead.
        plan = self.plan()
        self._order.announced = (self._batch_size, self._epoch, self._start)
        return (plan.batch(k) for k in range(len(plan)))

    def __len__(self) -> int:
        return len(self.plan())


class IterableDataset(_Progress, _IterStyle):
    """An iterable PyTorch dataset: this rank's records, batch after batch, in the Rust
    ``Loader``'s order for ``(seed, epoch, rank, world_size)``.

    Iterate it with ``DataLoader(ds, batch_size=<the same batch_size>)``: each ``DataLoader``
    worker takes every ``num_workers``-th batch of the rank (``get_worker_info``), and the
    loader's round-robin over workers gives the batches back in order. The record count need
    not divide by anything; ranks may differ by one batch unless ``equalize="pad"`` (repeat
    records from the start of the order) or ``"drop"`` (cut the end) makes their batch
    counts equal, as collectives need. ``set_epoch(e)`` starts epoch ``e``;
    ``state_dict()``/``load_state_dict()`` resume mid-epoch, with any worker count or world
    size.

    Each worker reads its next ``read_ahead`` batches ahead of the one it yields (a remote
    root: requests in flight while the training step runs; a local root reads each batch
    when it is due), holding at most ``read_ahead_bytes`` of payload fetched and not yet
    yielded; ``read_ahead=0`` reads one batch at a time. Other arguments as for
    :class:`Dataset`.
    """

    def __init__(
        self,
        source: Source,
        *,
        batch_size: int,
        seed: int = 0,
        shuffle: Shuffle = True,
        window: int = 4,
        drop_last: bool = False,
        equalize: Equalize = "none",
        rank: int | None = None,
        world_size: int | None = None,
        epoch: int = 0,
        snapshot: str | None = None,
        format: Literal["cbor", "pickle", "raw"] | None = None,
        s3: gl.S3Options | None = None,
        gcs: gl.GcsOptions | None = None,
        azure: gl.AzureOptions | None = None,
        read_ahead: int = 16,
        read_ahead_bytes: int = 64 << 20,
    ) -> None:
        _require_torch()
        if read_ahead < 0 or read_ahead_bytes < 0:
            raise ValueError("read_ahead and read_ahead_bytes must not be negative")
        records = _Records(source, snapshot=snapshot, format=format, s3=s3, gcs=gcs, azure=azure)
        order = _Order(
            records,
            seed=seed,
            shuffle=shuffle,
            window=window,
            drop_last=drop_last,
            equalize=equalize,
            rank=rank,
            world_size=world_size,
        )
        _Progress.__init__(self, order, batch_size, epoch)
        self._read_ahead = read_ahead
        self._read_ahead_bytes = read_ahead_bytes

    def __len__(self) -> int:
        """Records this rank yields in the next iteration (all workers together)."""
        return _positions(self.plan())

    def __iter__(self) -> Iterator[Any]:
        from torch.utils.data import get_worker_info

        plan = self.plan()
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if info is None:
            self._delivered = 0
        records = self._order.records
        mine = range(worker, len(plan), workers)
        fetched = records.batches(
            plan, mine, ahead=self._read_ahead, ahead_bytes=self._read_ahead_bytes
        )
        for k, batch in zip(mine, fetched, strict=True):
            yield from batch[:-1]
            if info is None:
                # Counted before the batch's last record goes out: once the consumer holds
                # the whole batch, the state already covers it.
                self._delivered = k + 1
            yield batch[-1]
