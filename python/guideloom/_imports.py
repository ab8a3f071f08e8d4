"""Importers: Parquet, CSV, JSON Lines, WebDataset tars, MDS directories and any Arrow data
(pyarrow tables, Hugging Face ``datasets``) into a snapshot with a schema.

Every importer reads its input in Rust (guideloom-import) as Arrow batches, encodes each row
as a record of the input's schema and writes shards, then publishes them once, declaring the
schema. The input splits into *units* (a Parquet row-group range, a file, a tar, an MDS
shard); with ``executor=`` each unit is one task on a Dask cluster (a ``distributed.Client``
or any ``concurrent.futures.Executor``) or on Ray (``executor="ray"``), writing its own work
id; the caller's process publishes what the tasks return. A task that dies leaves shards no
snapshot references (nothing is published unless every task returned).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from guideloom._roots import Root, ShardRef, Snapshot

_Mode = Literal["full", "append"]
_Kind = Literal["parquet", "csv", "jsonl", "webdataset", "mds"]
PathArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


@dataclass(frozen=True)
class ImportSummary:
    """What an import wrote and published."""

    snapshot: Snapshot
    """The published snapshot."""
    schema: Any
    """The records' schema (a ``pyarrow.Schema``)."""
    records: int
    """Records written."""
    shards: int
    """Shards written."""
    input_bytes: int
    """Bytes of input read."""
    shard_bytes: int
    """Bytes of the shards written."""
    seconds: float
    """Wall time from the first read to the publication."""
    units: int
    """Units of work (row-group ranges, files, tars, MDS shards) the input split into."""

    @property
    def snapshot_id(self) -> str:
        return self.snapshot.id

    @property
    def mb_per_s(self) -> float:
        """Input MB (10^6 bytes) per second."""
        return self.input_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"imported {self.records:,} records from {self.input_bytes / 1e6:,.1f} MB in "
            f"{self.seconds:.1f} s ({self.mb_per_s:,.1f} MB/s): {self.shards} shards, "
            f"{self.shard_bytes / 1e6:,.1f} MB, snapshot {self.snapshot_id}"
        )


def _paths(paths: PathArg) -> list[str]:
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _root(root: str | os.PathLike[str] | Root, root_options: dict[str, Any] | None) -> Root:
    if isinstance(root, Root):
        return root
    return Root(os.fspath(root), **(root_options or {}))


def _uri(root: str | os.PathLike[str] | Root) -> str:
    return root.uri if isinstance(root, Root) else os.fspath(root)


def _run_units(
    uri: str,
    root_options: dict[str, Any] | None,
    kind: str,
    paths: list[str],
    units: list[int],
    work_id: str,
    options: dict[str, Any],
) -> dict[str, Any]:
    """One task: units ``units`` of the import, written under ``work_id`` (on any process)."""
    return Root(uri, **(root_options or {})).import_units(
        kind, paths, work_id=work_id, units=units, **options
    )


def _fan_out(
    executor: Any,
    uri: str,
    root_options: dict[str, Any] | None,
    kind: str,
    paths: list[str],
    units: int,
    work_id: str,
    options: dict[str, Any],
) -> list[dict[str, Any]]:
    """One task per unit on ``executor`` (``"ray"``, or anything with ``submit``), each under
    work id ``<work_id>-<unit>``; the results in unit order."""
    args = [
        (uri, root_options, kind, paths, [u], f"{work_id}-{u:06d}", options) for u in range(units)
    ]
    if executor == "ray":
        import ray

        task = ray.remote(_run_units)
        return list(ray.get([task.remote(*a) for a in args]))
    if not hasattr(executor, "submit"):
        raise TypeError(
            "executor must be None, 'ray', a dask.distributed.Client or a "
            f"concurrent.futures.Executor, not {type(executor).__name__}"
        )
    futures = [executor.submit(_run_units, *a) for a in args]
    return [f.result() for f in futures]


def _import(
    kind: _Kind,
    paths: PathArg,
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode,
    work_id: str | None,
    batch_rows: int,
    shard_bytes: int | None,
    executor: Any,
    root_options: dict[str, Any] | None,
    text_fields: Sequence[str] | None = None,
    unit_rows: int | None = None,
    fields: Sequence[str] | None = None,
) -> ImportSummary:
    started = time.perf_counter()
    files = _paths(paths)
    target = _root(root, root_options)
    schema, units, _ = target.import_plan(
        kind,
        files,
        batch_rows=batch_rows,
        text_fields=list(text_fields or []),
        unit_rows=unit_rows,
        fields=None if fields is None else list(fields),
    )
    work_id = work_id or f"import-{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {
        "batch_rows": batch_rows,
        "shard_bytes": shard_bytes,
        "unit_rows": unit_rows,
    }
    if text_fields:
        options["text_fields"] = list(text_fields)
    if fields is not None:
        options["fields"] = list(fields)
    if executor is None:
        results = [target.import_units(kind, files, work_id=work_id, **options)]
    else:
        results = _fan_out(executor, _uri(root), root_options, kind, files, units, work_id, options)
    return _publish(target, results, schema, dataset_id, snapshot_id, mode, started, units=units)


def _publish(
    root: Root,
    results: list[dict[str, Any]],
    schema: Any,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode,
    started: float,
    *,
    units: int,
) -> ImportSummary:
    shards: list[ShardRef] = [s for r in results for s in r["shards"]]
    snapshot = root.publish(
        shards, dataset_id=dataset_id, snapshot_id=snapshot_id, mode=mode, schema=schema
    )
    return ImportSummary(
        snapshot=snapshot,
        schema=schema,
        records=sum(r["records"] for r in results),
        shards=len(shards),
        input_bytes=sum(r["input_bytes"] for r in results),
        shard_bytes=sum(r["shard_bytes"] for r in results),
        seconds=time.perf_counter() - started,
        units=units,
    )


_DOC_ARGS = """
    ``root`` is a path or URI (with ``root_options``: ``Root``'s keyword arguments, e.g.
    ``{"s3": gl.S3Options(...)}``, which must pickle for ``executor=``) or a
    :class:`guideloom.Root`. The snapshot ``snapshot_id`` of ``dataset_id`` is published in
    ``mode`` (``"append"`` extends the latest snapshot; its schema must evolve from the
    latest one's, else :class:`guideloom.SchemaError`). ``batch_rows`` rows are read at a time,
    shards end at ``shard_bytes`` of records (default 64 MiB); ``executor`` runs one task per
    unit (module documentation). Returns an :class:`ImportSummary`.
"""


def import_parquet(
    paths: PathArg,
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode = "full",
    work_id: str | None = None,
    batch_rows: int = 1024,
    shard_bytes: int | None = None,
    executor: Any = None,
    root_options: dict[str, Any] | None = None,
    unit_rows: int | None = None,
) -> ImportSummary:
    """Imports Parquet files (one schema; streamed by row group, memory bounded by one
    batch), each row a record with the files' Arrow schema and field metadata. A unit of
    work is a file, or with ``unit_rows`` a range of whole row groups of about that many
    rows (finer tasks for ``executor=``)."""
    return _import(
        "parquet", paths, root, dataset_id=dataset_id, snapshot_id=snapshot_id, mode=mode,
        work_id=work_id, batch_rows=batch_rows, shard_bytes=shard_bytes, executor=executor,
        root_options=root_options, unit_rows=unit_rows,
    )  # fmt: skip


def import_csv(
    paths: PathArg,
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode = "full",
    work_id: str | None = None,
    batch_rows: int = 1024,
    shard_bytes: int | None = None,
    executor: Any = None,
    root_options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Imports CSV files with a header row (types inferred from the first rows of the first
    file; a line that does not parse is refused by file and line)."""
    return _import(
        "csv", paths, root, dataset_id=dataset_id, snapshot_id=snapshot_id, mode=mode,
        work_id=work_id, batch_rows=batch_rows, shard_bytes=shard_bytes, executor=executor,
        root_options=root_options,
    )  # fmt: skip


def import_jsonl(
    paths: PathArg,
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode = "full",
    work_id: str | None = None,
    batch_rows: int = 1024,
    shard_bytes: int | None = None,
    executor: Any = None,
    root_options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Imports JSON Lines files (one object per line; types inferred from the first lines)."""
    return _import(
        "jsonl", paths, root, dataset_id=dataset_id, snapshot_id=snapshot_id, mode=mode,
        work_id=work_id, batch_rows=batch_rows, shard_bytes=shard_bytes, executor=executor,
        root_options=root_options,
    )  # fmt: skip


def import_webdataset(
    tars: PathArg,
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode = "full",
    text_fields: Sequence[str] = (),
    fields: Sequence[str] | None = None,
    work_id: str | None = None,
    batch_rows: int = 1024,
    shard_bytes: int | None = None,
    executor: Any = None,
    root_options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Imports WebDataset tars (``.tar`` or gzipped): members grouped into samples by key as
    ``webdataset`` groups them, each extension a binary column (``text_fields``: UTF-8 text
    columns) with its MIME type, and ``__key__``. The columns are the first sample's
    extensions unless ``fields`` lists them (a later sample with another extension is refused
    by name, never dropped)."""
    return _import(
        "webdataset", tars, root, dataset_id=dataset_id, snapshot_id=snapshot_id, mode=mode,
        work_id=work_id, batch_rows=batch_rows, shard_bytes=shard_bytes, executor=executor,
        root_options=root_options, text_fields=text_fields, fields=fields,
    )  # fmt: skip


def import_mds(
    directory: str | os.PathLike[str],
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode = "full",
    work_id: str | None = None,
    batch_rows: int = 1024,
    shard_bytes: int | None = None,
    executor: Any = None,
    root_options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Imports a MosaicML Streaming (MDS) directory (``index.json`` and its shards, any
    compression): every MDS encoding as its Arrow type (docs/python.md has the table)."""
    return _import(
        "mds", [directory], root, dataset_id=dataset_id, snapshot_id=snapshot_id, mode=mode,
        work_id=work_id, batch_rows=batch_rows, shard_bytes=shard_bytes, executor=executor,
        root_options=root_options,
    )  # fmt: skip


def _arrow_stream(data: Any) -> Any:
    """``data`` as something with ``__arrow_c_stream__``: a Hugging Face dataset's table, a
    pyarrow Table or reader as it is."""
    if hasattr(data, "__arrow_c_stream__"):
        return data
    table = getattr(getattr(data, "data", None), "table", None)  # datasets.Dataset
    if table is not None and hasattr(table, "__arrow_c_stream__"):
        return table
    raise TypeError(
        "data must have __arrow_c_stream__ (a pyarrow Table or RecordBatchReader, ...) or be "
        f"a Hugging Face datasets.Dataset, not {type(data).__name__}"
    )


def import_arrow(
    data: Any,
    root: str | os.PathLike[str] | Root,
    *,
    dataset_id: str,
    snapshot_id: str,
    mode: _Mode = "full",
    work_id: str | None = None,
    shard_bytes: int | None = None,
    root_options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Imports Arrow data in this process: a pyarrow ``Table`` or ``RecordBatchReader``,
    anything with ``__arrow_c_stream__`` (polars, DuckDB results...), or a Hugging Face
    ``datasets.Dataset`` (its Arrow table, memory-mapped: nothing is fetched from the Hub)."""
    started = time.perf_counter()
    target = _root(root, root_options)
    result = target.write_batches(
        _arrow_stream(data),
        work_id=work_id or f"import-{uuid.uuid4().hex[:12]}",
        shard_bytes=shard_bytes,
    )
    return _publish(
        target, [result], result["schema"], dataset_id, snapshot_id, mode, started, units=1
    )


def write_table(
    table: Any,
    root: str | os.PathLike[str] | Root,
    *,
    work_id: str,
    shard_bytes: int | None = None,
    first_shard: int = 0,
    root_options: dict[str, Any] | None = None,
) -> tuple[list[ShardRef], Any]:
    """Writes Arrow data (as :func:`import_arrow` takes) as shards of ``work_id`` without
    publishing: ``(shard references, schema)``, for a writer of its own fan-out (publish with
    ``Root.publish(shards, ..., schema=schema)``)."""
    result = _root(root, root_options).write_batches(
        _arrow_stream(table), work_id=work_id, shard_bytes=shard_bytes, first_shard=first_shard
    )
    return list(result["shards"]), result["schema"]


def records_to_table(records: Iterable[dict[str, Any]], schema: Any) -> Any:
    """Python records (dicts) as a pyarrow Table of ``schema``, with pyarrow's conversions
    (a Python float into a ``float32`` column is rounded, as pyarrow rounds it)."""
    import pyarrow as pa

    return pa.Table.from_pylist(list(records), schema=schema)


def export_parquet(
    root: str | os.PathLike[str] | Root,
    path: str | os.PathLike[str],
    *,
    snapshot: str | None = None,
    start: int | None = None,
    stop: int | None = None,
    root_options: dict[str, Any] | None = None,
) -> tuple[int, int]:
    """Writes a snapshot with a schema (default the latest; records ``start:stop``) to the
    Parquet file ``path`` (zstd, the Arrow schema with its field metadata; never replacing a
    file). Returns ``(records, bytes written)``."""
    ds = _root(root, root_options).open(snapshot=snapshot)
    return ds.export("parquet", os.fspath(path), start=start, stop=stop)


def export_jsonl(
    root: str | os.PathLike[str] | Root,
    path: str | os.PathLike[str],
    *,
    snapshot: str | None = None,
    start: int | None = None,
    stop: int | None = None,
    root_options: dict[str, Any] | None = None,
) -> tuple[int, int]:
    """Writes a snapshot with a schema to the JSON Lines file ``path`` (one object per record,
    bytes as lowercase hex strings). Returns ``(records, bytes written)``."""
    ds = _root(root, root_options).open(snapshot=snapshot)
    return ds.export("jsonl", os.fspath(path), start=start, stop=stop)
