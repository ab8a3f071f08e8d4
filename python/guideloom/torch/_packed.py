"""LLM pre-training windows: :class:`PackedTokens`, whole documents packed best-fit."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeAlias, cast

import guideloom as gl
from guideloom._plan import EpochPlan
from guideloom.torch._base import Equalize, _IterStyle, _require_torch, _world
from guideloom.torch._datasets import _Progress
from guideloom.torch._records import _Order, _positions, _Records

PackedSource: TypeAlias = str | os.PathLike[str] | gl.Dataset | Callable[[], gl.Dataset]
"""A token-stream root: its URI or path, an opened ``guideloom.Dataset``, or a function
returning one (for spawned workers)."""


class _PackedOrder(_Order):
    """The order of :class:`PackedTokens`: the Rust loader's plan over the windows of the
    epoch's packing (a full shuffle of window numbers; a packing has no shard locality), or,
    for several corpora mixed by token share, over the ids of a ``guideloom.Mixture`` of
    their packings (docs/loader.md, "Weighted mixtures")."""

    # Not the base's __init__: its checks are for record sources.
    def __init__(
        self,
        corpora: list[_Records],
        shares: list[float] | None,
        *,
        seq_len: int,
        seed: int,
        buffer: int,
        drop_last: bool,
        equalize: Equalize,
        rank: int | None,
        world_size: int | None,
    ) -> None:
        self.records = corpora[0]
        self.corpora = corpora
        self.shares = shares
        self.seq_len = seq_len
        self.seed = seed
        self.shuffle = "full"
        self.window = 4
        self.buffer = buffer
        self.drop_last = drop_last
        self.equalize = equalize
        self.rank, self.world_size = _world(rank, world_size)
        self.announced = None
        self._packed: tuple[int, list[gl.Packing], gl.Mixture | None] | None = None

    def packings(self, epoch: int) -> list[gl.Packing]:
        """The packings of ``epoch``, one per corpus (the last epoch's are kept; another
        epoch repacks, no read)."""
        if self._packed is None:
            packings = []
            for records in self.corpora:
                dataset = records.get()
                if not isinstance(dataset, gl.Dataset):
                    raise TypeError("PackedTokens reads token-stream dataset roots")
                packings.append(
                    gl.Packing(
                        dataset,
                        seq_len=self.seq_len,
                        labels=True,
                        seed=self.seed,
                        epoch=epoch,
                        buffer=self.buffer,
                    )
                )
            self._packed = (epoch, packings, self._mix(packings))
        elif self._packed[0] != epoch:
            packings = [p.repack(epoch) for p in self._packed[1]]
            self._packed = (epoch, packings, self._mix(packings))
        return self._packed[1]

    def _mix(self, packings: list[gl.Packing]) -> gl.Mixture | None:
        if self.shares is None:
            return None
        return gl.Mixture(packings, token_shares=self.shares)

    def mixture(self, epoch: int) -> gl.Mixture | None:
        """The mixture of ``epoch``'s packings (``None`` for one corpus)."""
        self.packings(epoch)
        assert self._packed is not None
        return self._packed[2]

    def plan(self, *, batch_size: int, epoch: int, start: int) -> EpochPlan:
        mixture = self.mixture(epoch)
        return EpochPlan(
            len(self.packings(epoch)[0]) if mixture is None else mixture,
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

    **Several corpora by token share**: ``source`` a list of ``(corpus, share)`` pairs
    (``[("s3://b/web", 0.7), ("s3://b/code", 0.3)]``). Each corpus is packed on its own
    (same ``seq_len``, seed and epoch; repacked every epoch) and the windows are mixed by a
    ``guideloom.Mixture(packings, token_shares=...)``: its exact split of windows weighted so
    that each corpus gets its share of the tokens (off only by the spread of tokens per
    window, at most the padding). The epoch is the windows of all corpora, in the mixture's
    order; resume, workers and ranks as above. A batch may hold windows of several corpora.
    """

    def __init__(
        self,
        source: PackedSource | Sequence[tuple[PackedSource, float]],
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
        gcs: gl.GcsOptions | None = None,
        azure: gl.AzureOptions | None = None,
    ) -> None:
        _require_torch()
        shares: list[float] | None = None
        if isinstance(source, (list, tuple)):
            pairs = list(source)
            if not pairs or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
                raise ValueError(
                    "several corpora are a non-empty list of (corpus, token share) pairs"
                )
            corpora = [
                _Records(c, snapshot=snapshot, format=None, s3=s3, gcs=gcs, azure=azure)
                for c, _ in pairs
            ]
            shares = [float(share) for _, share in pairs]
        else:
            one = cast(PackedSource, source)  # not a list or tuple of pairs
            corpora = [_Records(one, snapshot=snapshot, format=None, s3=s3, gcs=gcs, azure=azure)]
        order = _PackedOrder(
            corpora,
            shares,
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
        """The packing of the current epoch (of the one corpus; ``packings()`` for several)."""
        packings = self.packings()
        if len(packings) != 1:
            raise ValueError(f"{len(packings)} corpora are mixed: use packings()")
        return packings[0]

    def packings(self) -> list[gl.Packing]:
        """The packings of the current epoch, one per corpus, in order."""
        return self._packed_order.packings(self._epoch)

    def mixture(self) -> gl.Mixture | None:
        """The mixture of the current epoch's packings (``None`` for one corpus): its ids
        are the plan's, ``locate(id)`` gives ``(corpus, window)``."""
        return self._packed_order.mixture(self._epoch)

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
        packings = self.packings()
        mixture = self.mixture()
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if info is None:
            self._delivered = 0
        for k in range(worker, len(plan), workers):
            stacked = torch.from_numpy(self._batch_array(plan.batch(k), packings, mixture))
            if info is None:
                self._delivered = k + 1  # counted before the batch goes out
            # Views of one tensor: a DataLoader worker moves one storage to shared memory per
            # batch, not three (3x the batches/s with 2 workers).
            yield {"input_ids": stacked[0], "labels": stacked[1], "position_ids": stacked[2]}

    def _batch_array(
        self, ids: list[int], packings: list[gl.Packing], mixture: gl.Mixture | None
    ) -> Any:
        """The ``(3, len(ids), seq_len)`` array of windows ``ids`` (window numbers, or
        mixture ids each located in its corpus's packing)."""
        if mixture is None:
            return packings[0].batch_array(
                ids, pad_id=self._pad_id, ignore_index=self._ignore_index
            )
        import numpy as np

        located = [mixture.locate(i) for i in ids]
        out = np.empty((3, len(ids), self._packed_order.seq_len), dtype=np.int64)
        for s, packing in enumerate(packings):
            rows = [r for r, (corpus, _) in enumerate(located) if corpus == s]
            if rows:
                out[:, rows] = packing.batch_array(
                    [located[r][1] for r in rows],
                    pad_id=self._pad_id,
                    ignore_index=self._ignore_index,
                )
        return out
