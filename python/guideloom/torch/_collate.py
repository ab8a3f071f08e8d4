"""Raw records collate: :class:`RawBatch` and :func:`collate_raw`, registered in torch's
``default_collate`` for ``guideloom.Bytes`` when this module is imported."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import Any

import guideloom as gl


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


def collate_columns(batch: Any) -> dict[str, Any]:
    """The ``collate_fn`` of a columns-mode :class:`guideloom.torch.Dataset`: its
    ``pyarrow.RecordBatch`` as ``{column: tensor}`` for numbers and fixed-shape tensors
    (``(batch, *shape)``), and ``{column: list}`` for text, bytes and nested values
    (:func:`guideloom._columns.batch_to_torch`)."""
    from guideloom._columns import batch_to_torch

    return batch_to_torch(batch)
