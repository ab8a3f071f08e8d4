"""LLM pre-training windows: :class:`PackedTokens`, whole documents packed best-fit."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import guideloom as gl
from guideloom._plan import EpochPlan
from guideloom.torch._base import Equalize, _IterStyle, _require_torch, _world
from guideloom.torch._datasets import _Progress
from guideloom.torch._records import _Order, _positions, _Records


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
