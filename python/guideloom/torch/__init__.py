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

from guideloom.torch._base import LoaderState, Shuffle, Source
from guideloom.torch._collate import RawBatch, collate_columns, collate_raw
from guideloom.torch._datasets import BatchSampler, Dataset, IterableDataset
from guideloom.torch._packed import PackedTokens

__all__ = [
    "BatchSampler",
    "Dataset",
    "IterableDataset",
    "LoaderState",
    "PackedTokens",
    "RawBatch",
    "Shuffle",
    "Source",
    "collate_columns",
    "collate_raw",
]
