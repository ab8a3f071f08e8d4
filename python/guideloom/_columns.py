"""Typed columns out of Arrow batches: :func:`batch_to_numpy` and :func:`batch_to_torch`.

A batch comes from :meth:`guideloom.Dataset.get_batch`, decoded in Rust into Arrow arrays;
these turn its columns into NumPy arrays (or torch tensors) with pyarrow's conversions, so no
Python object is made per value where the type allows it:

- fixed-width numbers without nulls: a NumPy array sharing the Arrow buffer (no copy);
- ``arrow.fixed_shape_tensor`` columns (and fixed-size lists of numbers): one
  ``(rows, *shape)`` array;
- numbers with nulls: floats with NaN for the nulls (pyarrow's rule);
- text, bytes, lists and structs: an object array (one Python object per value: their
  lengths vary).
"""

from __future__ import annotations

import json
from typing import Any

TENSOR_EXTENSION = "arrow.fixed_shape_tensor"


def _shape(field: Any) -> list[int] | None:
    """The shape of a fixed-shape tensor field (from its extension metadata), else ``None``."""
    meta = field.metadata or {}
    if meta.get(b"ARROW:extension:name") != TENSOR_EXTENSION.encode():
        return None
    params = json.loads(meta.get(b"ARROW:extension:metadata", b"{}"))
    shape = params.get("shape")
    return [int(d) for d in shape] if isinstance(shape, list) else None


def column_to_numpy(field: Any, column: Any) -> Any:
    """One Arrow column as a NumPy array (see the module documentation)."""
    import numpy as np
    import pyarrow as pa

    kind = field.type
    shape = _shape(field)
    if isinstance(kind, pa.FixedShapeTensorType):
        # pyarrow turns the canonical extension into its type (the metadata is consumed).
        shape = [int(d) for d in kind.shape]
        column = column.storage
        kind = kind.storage_type
    if pa.types.is_fixed_size_list(kind) and column.null_count == 0:
        values = column.flatten()
        numeric = pa.types.is_integer(values.type) or pa.types.is_floating(values.type)
        if numeric and values.null_count == 0:
            flat = values.to_numpy(zero_copy_only=False)
            return flat.reshape([len(column), *(shape or [kind.list_size])])
    plain = (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_date(kind)
    )
    if plain:
        return column.to_numpy(zero_copy_only=False)
    return np.array(column.to_pylist(), dtype=object)


def batch_to_numpy(batch: Any) -> dict[str, Any]:
    """A ``pyarrow.RecordBatch`` as ``{column name: numpy array}``."""
    return {
        field.name: column_to_numpy(field, column)
        for field, column in zip(batch.schema, batch.columns, strict=True)
    }


def batch_to_torch(batch: Any) -> dict[str, Any]:
    """A ``pyarrow.RecordBatch`` as ``{column name: tensor}`` for the numeric columns (and
    tensors) — sharing memory with the NumPy arrays of :func:`batch_to_numpy` — and lists of
    Python objects for the others (text, bytes, nested values)."""
    import numpy as np
    import torch

    out: dict[str, Any] = {}
    for name, array in batch_to_numpy(batch).items():
        if array.dtype == object:
            out[name] = list(array)
        elif array.dtype.kind == "M":
            out[name] = torch.from_numpy(array.astype(np.int64))
        else:
            if not array.flags.writeable:
                array = array.copy()  # torch wants writable memory; Arrow's buffers are not
            out[name] = torch.from_numpy(array)
    return out
