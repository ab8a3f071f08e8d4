"""Random batches of 64 records as Arrow from Python: guideloom beside Hugging Face datasets,
Lance and MosaicML Streaming (MDS), with pyarrow's in-memory `Table.take` as the ceiling.

    python python/bench/columnar_peers.py [--rows N] [--batches B] [--rounds R] [--json PATH]

The data (python/tests/realdata.py `mixed_table`): N rows (default 100 000) of scikit-learn's
digits (tensor [8, 8] uint8, label, PNG), 64 x 64 JPEG tiles of scikit-image's sample images
and 512 characters of CPython's standard-library sources, about 2 KB a row, repeated. Each
system gets it its usual way, then answers the same B seeded batches of 64 random indices:

- ceiling: `Table.take(indices)` on the table in memory, its chunks combined into one.
- guideloom: `gl.import_parquet` of the table written by pyarrow, `gl.open(root).get_batch`
  (a RecordBatch). Reported as not available while the package has no `import_parquet`.
- datasets: `Dataset.from_parquet` of the table written by `datasets` (its Arrow cache,
  memory-mapped), `ds.with_format("arrow")[indices]` (a Table).
- pylance: `lance.write_dataset(table)`, `ds.take(indices)` (a Table).
- mosaicml-streaming: `MDSWriter` (bytes / str / int64 / ndarray columns), then
  `StreamingDataset(local=...)[i]` for the 64 indices: Python dicts, not Arrow, so its row
  counts no conversion to Arrow at all (it is favoured).

Each system reads every batch once untimed (page cache warm, files open), then R rounds of
all B batches; the median round gives records/s. Every result's `index` column is checked
against the indices asked for. A peer that is not installed says so in its row. Wall-clock
figures on a shared machine are noisy: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import realdata

import guideloom as gl

BATCH = 64
CEILING = "pyarrow Table.take (ceiling)"

Read = Callable[[list[int]], list[int]]
"""Reads one batch; returns its `index` values (for the check)."""


class Unavailable(Exception):
    """A system that cannot run here (not installed, or no such API yet)."""


def mds_columns(schema: pa.Schema) -> dict[str, str]:
    """MDS's encoding of each column: binary as `bytes` (its `jpeg`/`png` encodings take PIL
    images and encode them again), utf8 as `str`, integers as themselves, the tensor as
    `ndarray:<dtype>:<shape>`."""
    out = {}
    for field in schema:
        t = field.type
        if isinstance(t, pa.FixedShapeTensorType):
            out[field.name] = f"ndarray:{t.value_type}:{','.join(str(d) for d in t.shape)}"
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            out[field.name] = "bytes"
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            out[field.name] = "str"
        elif pa.types.is_integer(t):
            out[field.name] = str(t)
        else:
            raise ValueError(f"no MDS encoding for {field.name}: {t}")
    return out


def py_rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    """A record batch as one dict per row, as a user feeds MDS or LitData: Python values,
    tensors as numpy arrays."""
    columns: dict[str, Any] = {}
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if isinstance(field.type, pa.FixedShapeTensorType):
            columns[field.name] = column.to_numpy_ndarray()
        else:
            columns[field.name] = column.to_pylist()
    for i in range(batch.num_rows):
        yield {name: values[i] for name, values in columns.items()}


def ceiling(table: pa.Table, _work: Path) -> Read:
    # One chunk: pyarrow's take over a chunked column concatenates its chunks first (every
    # call pays for the whole table: 25 000 records/s at 20 000 rows in 5 chunks).
    table = table.combine_chunks()

    def read(indices: list[int]) -> list[int]:
        out: list[int] = table.take(indices).column("index").to_pylist()
        return out

    return read


def guideloom(table: pa.Table, work: Path) -> Read:
    if not hasattr(gl, "import_parquet"):
        raise Unavailable("not available: this guideloom has no import_parquet yet")
    parquet = realdata.write_parquet_by_pyarrow(table, work / "in.parquet", 1024)
    root = work / "root"
    gl.import_parquet(  # type: ignore[attr-defined, unused-ignore]
        [parquet], str(root), dataset_id="bench", snapshot_id="v1", batch_rows=1024, work_id="bench"
    )
    ds: Any = gl.open(str(root))

    def read(indices: list[int]) -> list[int]:
        out: list[int] = ds.get_batch(indices).column("index").to_pylist()
        return out

    return read


def hf_datasets(table: pa.Table, work: Path) -> Read:
    try:
        import datasets  # type: ignore[import-untyped, unused-ignore]
    except ImportError as e:
        raise Unavailable(f"not installed ({e})") from e
    datasets.disable_progress_bars()
    files = realdata.write_parquet_by_datasets(table, work / "parquet", shards=4)
    ds = datasets.Dataset.from_parquet(
        [str(f) for f in files], cache_dir=str(work / "cache"), keep_in_memory=False
    ).with_format("arrow")

    def read(indices: list[int]) -> list[int]:
        out: list[int] = ds[indices].column("index").to_pylist()
        return out

    return read


def pylance(table: pa.Table, work: Path) -> Read:
    try:
        import lance
    except ImportError as e:
        raise Unavailable(f"not installed ({e})") from e
    lance.write_dataset(table, str(work / "data.lance"))
    ds = lance.dataset(str(work / "data.lance"))

    def read(indices: list[int]) -> list[int]:
        out: list[int] = ds.take(indices).column("index").to_pylist()
        return out

    return read


def mds(table: pa.Table, work: Path) -> Read:
    try:
        from streaming import MDSWriter, StreamingDataset
        from streaming.base.util import clean_stale_shared_memory
    except ImportError as e:
        raise Unavailable(f"not installed ({e})") from e
    out = str(work / "mds")
    with MDSWriter(
        out=out, columns=mds_columns(table.schema), compression=None, size_limit=1 << 26
    ) as writer:
        for batch in table.to_batches():
            for row in py_rows(batch):
                writer.write(row)
    clean_stale_shared_memory()
    ds = StreamingDataset(local=out, shuffle=False, batch_size=BATCH)

    def read(indices: list[int]) -> list[int]:
        return [int(ds[i]["index"]) for i in indices]

    return read


SYSTEMS: list[tuple[str, Callable[[pa.Table, Path], Read]]] = [
    (CEILING, ceiling),
    ("guideloom", guideloom),
    ("datasets (HF)", hf_datasets),
    ("pylance", pylance),
    ("mosaicml-streaming (MDS)", mds),
]


def measure(read: Read, batches: list[list[int]], rounds: int) -> float:
    """records/s of the median of `rounds` passes over `batches`, after one untimed pass
    that also checks every batch's `index` column."""
    for b in batches:
        got = read(b)
        if got != b:
            raise AssertionError(f"asked for {b[:4]}..., got {got[:4]}...")
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for b in batches:
            read(b)
        times.append(time.perf_counter() - started)
    return len(batches) * BATCH / statistics.median(times)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    table = realdata.mixed_table(args.rows)
    print(
        f"{args.rows} mixed rows, {table.nbytes / 1e6:.0f} MB in Arrow, built in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    rng = random.Random(args.seed)
    batches = [[rng.randrange(args.rows) for _ in range(BATCH)] for _ in range(args.batches)]
    results: dict[str, dict[str, Any]] = {}
    with TemporaryDirectory(
        prefix="columnar-peers-", dir=os.environ.get("GUIDELOOM_BENCH_TMP")
    ) as tmp:
        for name, build in SYSTEMS:
            work = Path(tmp) / name.split()[0]
            work.mkdir()
            started = time.perf_counter()
            try:
                read = build(table, work)
            except Unavailable as why:
                results[name] = {"status": str(why)}
                print(f"{name}: {why}", flush=True)
                continue
            except Exception as e:  # a peer's failure is reported, not fatal
                results[name] = {"status": f"failed: {type(e).__name__}: {e}"}
                print(f"{name}: failed: {type(e).__name__}: {e}", flush=True)
                continue
            setup = time.perf_counter() - started
            try:
                rate = measure(read, batches, args.rounds)
            except Exception as e:
                results[name] = {"status": f"failed: {type(e).__name__}: {e}", "setup_s": setup}
                print(f"{name}: failed: {type(e).__name__}: {e}", flush=True)
                continue
            results[name] = {"status": "ok", "records_per_s": rate, "setup_s": setup}
            print(f"{name}: {rate:,.0f} records/s (setup {setup:.1f} s)", flush=True)
    return {
        "rows": args.rows,
        "batch": BATCH,
        "batches": args.batches,
        "rounds": args.rounds,
        "seed": args.seed,
        "arrow_bytes": table.nbytes,
        "systems": results,
    }


def report(out: dict[str, Any]) -> None:
    systems = out["systems"]
    rate = {k: v["records_per_s"] for k, v in systems.items() if v["status"] == "ok"}
    top, ours = rate.get(CEILING), rate.get("guideloom")
    print(
        f"\n## random batches of {out['batch']}: {out['rows']} rows, {out['batches']} batches, "
        f"median of {out['rounds']} rounds"
    )
    print("| system | records/s | ÷ ceiling | guideloom ÷ this | setup s |")
    print("|---|---:|---:|---:|---:|")
    for name, v in systems.items():
        if v["status"] != "ok":
            print(f"| {name} | {v['status']} | | | |")
            continue
        r = v["records_per_s"]
        vs_top = f"{r / top:.2f}" if top else ""
        vs_ours = f"{ours / r:.2f}" if ours and name != "guideloom" else ""
        print(f"| {name} | {r:,.0f} | {vs_top} | {vs_ours} | {v['setup_s']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=200, help="batches of 64 per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args()
    out = run(args)
    report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
