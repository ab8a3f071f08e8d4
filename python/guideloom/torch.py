"""PyTorch datasets over guideloom roots and storages, in the Rust loader's order.

- :class:`Dataset` is map-style: ``ds[i]`` is record ``i``; ``__getitems__`` (which
  ``DataLoader`` calls with a whole batch of indices) is one batched read, coalesced per shard,
  with the GIL released. :meth:`Dataset.batch_sampler` gives the batches of the Rust
  ``Loader`` for this rank (``DataLoader(ds, batch_sampler=ds.batch_sampler(32))``).
- :class:`IterableDataset` yields this rank's records batch after batch in the Rust
  ``Loader``'s order, its batches split over ``DataLoader`` workers; ``set_epoch``,
  ``state_dict`` and ``load_state_dict`` resume an epoch exactly.
- :class:`PackedTokens` yields LLM pre-training windows of a token-stream root: whole
  documents packed best-fit (:class:`guideloom.Packing`) into ``input_ids``, ``labels`` and
  ``position_ids`` tensors, resumable like :class:`IterableDataset`.

Orders are never computed here: they come from :class:`guideloom._guideloom.EpochPlan`, the
Rust loader's own plan. torch is imported when this module is; the classes raise
``ImportError`` when it is missing. See ``docs/python.md``.

Raw records (:class:`guideloom.Bytes`) collate: importing this module teaches torch's
``default_collate`` to pack a batch of them into a :class:`RawBatch` (one buffer of the
records back to back and their offsets), which crosses from a ``DataLoader`` worker to the
main process as one object instead of one pickled object per record.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

import guideloom as gl
from guideloom._plan import EpochPlan

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

__all__ = [
    "BatchSampler",
    "Dataset",
    "IterableDataset",
    "LoaderState",
    "PackedTokens",
    "RawBatch",
    "Shuffle",
    "Source",
    "collate_raw",
]

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


@dataclass(frozen=True)
class RawBatch:
    """A batch of raw records: ``data`` holds them back to back, record ``i`` is
    ``data[offsets[i]:offsets[i + 1]]`` (``offsets``: one more than the records).

    What ``default_collate`` makes of a batch of :class:`guideloom.Bytes` once
    ``guideloom.torch`` is imported (:func:`collate_raw`): one object per batch, so a
    ``DataLoader`` worker sends the main process one buffer instead of a pickled object per
    record. ``rb[i]`` is record ``i`` as a ``memoryview`` (no copy), ``rb.tolist()`` the
    records as ``bytes``, ``rb.tensor()`` the whole buffer as a ``uint8`` tensor (no copy),
    and ``rb.stack()`` a ``(len(rb), record_len)`` view of it when every record has the same
    length.
    """

    data: bytearray
    offsets: list[int]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> memoryview:
        if not -len(self) <= i < len(self):
            raise IndexError(f"record {i} of a batch of {len(self)}")
        i %= len(self)
        return memoryview(self.data)[self.offsets[i] : self.offsets[i + 1]]

    def tolist(self) -> list[bytes]:
        """The records as ``bytes`` (copies)."""
        return [bytes(self.data[a:b]) for a, b in pairwise(self.offsets)]

    def tensor(self) -> Any:
        """``data`` as a ``uint8`` tensor sharing its memory."""
        import torch

        if not self.data:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer(self.data, dtype=torch.uint8)

    def stack(self) -> Any:
        """A ``(records, record_len)`` view of :meth:`tensor`; ``ValueError`` unless every
        record has the same length."""
        lengths = {b - a for a, b in pairwise(self.offsets)}
        if len(lengths) != 1:
            raise ValueError("stack() needs records of one length (and at least one record)")
        return self.tensor().view(len(self), lengths.pop())


def collate_raw(batch: Sequence[Any], *, collate_fn_map: Any = None) -> RawBatch:
    """Packs raw records (``guideloom.Bytes``, ``bytes``, ``bytearray``, ``memoryview``) into
    a :class:`RawBatch`: one copy of each record."""
    lengths = [r.nbytes if isinstance(r, memoryview) else len(r) for r in batch]
    return RawBatch(bytearray().join(batch), list(accumulate(lengths, initial=0)))


def _register_collate() -> None:
    """Adds :func:`collate_raw` for ``guideloom.Bytes`` to torch's ``default_collate``."""
    try:
        from torch.utils.data._utils.collate import default_collate_fn_map
    except ImportError:  # torch missing, or a torch without the map (older than 2.0)
        return
    default_collate_fn_map.setdefault(gl.Bytes, collate_raw)


_register_collate()


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
    ) -> None:
        self._factory: Callable[[], Any] | None = None
        self._root: str | None = None
        self._snapshot = snapshot
        self._format = format
        self._s3 = _s3_state(s3)
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
                    gl.open(self._root, snapshot=self._snapshot, format=self._format, s3=s3)
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


class Dataset(_MapStyle):
    """A map-style PyTorch dataset: ``ds[i]`` is record ``i`` of ``source``, decoded.

    ``__getitems__`` reads a whole batch with one coalesced read per shard (GIL released), so
    ``DataLoader(ds, batch_size=...)`` and :meth:`batch_sampler` fetch each batch at once.
    ``seed``, ``shuffle``, ``window``, ``drop_last``, ``equalize``, ``rank`` and
    ``world_size`` configure :meth:`batch_sampler` (the Rust loader's options of the same
    names; ``rank``/``world_size`` default to torch.distributed's when it is initialised).
    ``snapshot``, ``format`` and ``s3`` are :func:`guideloom.open`'s, for a root URI (``s3``
    also re-opens an opened S3 dataset in a spawned worker).

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
        read_ahead: int = 16,
        read_ahead_bytes: int = 64 << 20,
    ) -> None:
        _require_torch()
        if read_ahead < 0 or read_ahead_bytes < 0:
            raise ValueError("read_ahead and read_ahead_bytes must not be negative")
        self._read_ahead = read_ahead
        self._read_ahead_bytes = read_ahead_bytes
        self._ahead: _Ahead | None = None
        # The announced plan this process's read-ahead was tried for (tried once each).
        self._ahead_tried: tuple[int, int, int] | None = None
        self._records = _Records(source, snapshot=snapshot, format=format, s3=s3)
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

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The records at ``indices``: one batched read, coalesced per shard (or taken from
        this worker's read-ahead, see the class documentation)."""
        if self._ahead is not None:
            got = self._ahead.take(indices)
            if got is not None:
                return got
            self._ahead.reader.close()
            self._ahead = None
        started = self._start_ahead(indices)
        if started is not None:
            return started
        return self._records.many(indices)

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
        read_ahead: int = 16,
        read_ahead_bytes: int = 64 << 20,
    ) -> None:
        _require_torch()
        if read_ahead < 0 or read_ahead_bytes < 0:
            raise ValueError("read_ahead and read_ahead_bytes must not be negative")
        records = _Records(source, snapshot=snapshot, format=format, s3=s3)
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


class _PackedOrder(_Order):
    """The order of :class:`PackedTokens`: the Rust loader's plan over the windows of the
    epoch's packing (a full shuffle of window numbers; a packing has no shard locality)."""

    # Not the base's __init__: its checks are for record sources.
    def __init__(
        self,
        records: _Records,
        *,
        seq_len: int,
        seed: int,
        buffer: int,
        drop_last: bool,
        equalize: Equalize,
        rank: int | None,
        world_size: int | None,
    ) -> None:
        self.records = records
        self.seq_len = seq_len
        self.seed = seed
        self.shuffle = "full"
        self.window = 4
        self.buffer = buffer
        self.drop_last = drop_last
        self.equalize = equalize
        self.rank, self.world_size = _world(rank, world_size)
        self.announced = None
        self._packed: tuple[int, gl.Packing] | None = None

    def packing(self, epoch: int) -> gl.Packing:
        """The packing of ``epoch`` (the last one is kept; another epoch repacks, no read)."""
        if self._packed is None:
            dataset = self.records.get()
            if not isinstance(dataset, gl.Dataset):
                raise TypeError("PackedTokens reads a token-stream dataset root")
            packing = gl.Packing(
                dataset, seq_len=self.seq_len, labels=True, seed=self.seed, epoch=epoch,
                buffer=self.buffer,
            )  # fmt: skip
            self._packed = (epoch, packing)
        elif self._packed[0] != epoch:
            self._packed = (epoch, self._packed[1].repack(epoch))
        return self._packed[1]

    def plan(self, *, batch_size: int, epoch: int, start: int) -> EpochPlan:
        return EpochPlan(
            len(self.packing(epoch)),
            batch_size=batch_size,
            epoch=epoch,
            start=start,
            seed=self.seed,
            shuffle="full",
            drop_last=self.drop_last,
            equalize=self.equalize,
            rank=self.rank,
            world_size=self.world_size,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_packed"] = None  # a spawned worker packs again (the same windows)
        return state


class PackedTokens(_Progress, _IterStyle):
    """LLM pre-training windows from a token-stream root: whole documents packed best-fit into
    windows of ``seq_len + 1`` tokens (``gl.Packing``, docs/loader.md "Packed windows"),
    yielded **a batch at a time** as a dict of ``int64`` tensors of shape
    ``(batch, seq_len)``: ``input_ids`` (padded with ``pad_id``), ``labels`` (the next token
    of the same document, ``ignore_index`` at a document's last token and on padding) and
    ``position_ids`` (0 at every document start). Iterate it with
    ``DataLoader(ds, batch_size=None)``: a worker then sends three tensors per batch instead
    of three per window.

    The packing is a pure function of ``(seed, epoch)``; this rank's windows are the Rust
    loader's order over the window numbers, batches of ``batch_size`` split across ranks and
    ``DataLoader`` workers as for :class:`IterableDataset` (worker ``w`` of ``W`` takes the
    rank's batches ``w, w + W, ...``). ``set_epoch``, ``state_dict`` and ``load_state_dict``
    resume an epoch exactly, with any worker count or world size. A document longer than a
    window is cut into pieces that start every ``seq_len`` tokens (each piece's positions
    restart at 0; no token is dropped). ``buffer``: pieces sorted together before placing.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | gl.Dataset | Callable[[], gl.Dataset],
        *,
        seq_len: int,
        batch_size: int,
        seed: int = 0,
        epoch: int = 0,
        buffer: int = 4096,
        pad_id: int = 0,
        ignore_index: int = -100,
        drop_last: bool = False,
        equalize: Equalize = "none",
        rank: int | None = None,
        world_size: int | None = None,
        snapshot: str | None = None,
        s3: gl.S3Options | None = None,
    ) -> None:
        _require_torch()
        records = _Records(source, snapshot=snapshot, format=None, s3=s3)
        order = _PackedOrder(
            records,
            seq_len=seq_len,
            seed=seed,
            buffer=buffer,
            drop_last=drop_last,
            equalize=equalize,
            rank=rank,
            world_size=world_size,
        )
        _Progress.__init__(self, order, batch_size, epoch)
        self._packed_order = order  # self._order, typed
        self._pad_id = pad_id
        self._ignore_index = ignore_index
        self.plan()  # packs now: bad options and a root that is no token stream fail here

    def packing(self) -> gl.Packing:
        """The packing of the current epoch."""
        return self._packed_order.packing(self._epoch)

    def __len__(self) -> int:
        """Batches this rank yields in the next iteration (all workers together)."""
        return len(self.plan())

    def windows(self) -> int:
        """Windows this rank yields in the next iteration (all workers together)."""
        return _positions(self.plan())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import torch
        from torch.utils.data import get_worker_info

        plan = self.plan()
        packing = self.packing()
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if info is None:
            self._delivered = 0
        for k in range(worker, len(plan), workers):
            stacked = torch.from_numpy(
                packing.batch_array(
                    plan.batch(k), pad_id=self._pad_id, ignore_index=self._ignore_index
                )
            )
            if info is None:
                self._delivered = k + 1  # counted before the batch goes out
            # Views of one tensor: a DataLoader worker moves one storage to shared memory per
            # batch, not three (3x the batches/s with 2 workers).
            yield {"input_ids": stacked[0], "labels": stacked[1], "position_ids": stacked[2]}
