"""Importing a Parquet dataset: guideloom beside LitData `optimize` and MosaicML Streaming's
`MDSWriter`, with a plain pyarrow read of the same files as the ceiling.

    python python/bench/import_peers.py [--bytes 1GiB] [--data DIR] [--json PATH]

The data: python/tests/realdata.py `big_mixed_parquet`, at least `--bytes` (default 1 GiB;
`200MB` for a quick run) of Parquet written by pyarrow, files of about 256 MiB, row groups of
128 rows of about 64 KB each: a whole scikit-image sample image as JPEG, a digit (tensor
[8, 8] uint8 and PNG), a whole standard-library source file, an index and names. `--data
DIR` keeps the files there and reuses them on the next run.

- pyarrow (ceiling): `pq.ParquetFile(f).iter_batches` over every file (batches of a row
  group), nothing written.
- guideloom: `gl.import_parquet(files, root, batch_rows=1024)` (publishes a snapshot).
  Reported as not available while the package has no `import_parquet`.
- litdata: `litdata.optimize`, one input per row group, its top-level `fn` reading that row
  group and yielding one dict per row (Python values, the tensor as a numpy array), chunks
  of 64 MB, `--lit-workers` worker processes (default: the machine's cores, LitData's own
  default).
- mds: one `MDSWriter` fed the same dicts (row group by row group), columns as `bytes` /
  `str` / `int64` / `ndarray:uint8:8,8` (its `jpeg`/`png` encodings take PIL images and
  encode them again), no compression, shards of 64 MB.

Each system runs in a fresh process (`--rounds N`: N times, the median kept); this one
reports its MB/s (Parquet bytes on disk per second of the import call), the peak RSS of its
largest process (`wait4`'s rusage: the process or any it waited for) and, with psutil, the
peak RSS summed over its process tree (sampled every 50 ms). Wall-clock figures on a shared
machine are noisy: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import realdata
from columnar_peers import mds_columns, py_rows

import guideloom as gl

SYSTEMS = ("pyarrow", "guideloom", "litdata", "mds")
CEILING = "pyarrow"
SHARD_BYTES = 64 << 20


def parse_bytes(text: str) -> int:
    """`1GiB`, `200MB`, `512MiB`, `1.5GB` or a plain count of bytes."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    units |= {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in units:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(float(m.group(1)) * units[m.group(2).upper()])


def parquet_files(data: Path) -> list[Path]:
    return sorted(data.glob("part-*.parquet"))


# ---- the systems, each run in its own process (`--one`) ----


def run_pyarrow(files: list[Path], _out: Path, _args: argparse.Namespace) -> dict[str, Any]:
    records, arrow_bytes = 0, 0
    for f in files:
        pf = pq.ParquetFile(f)
        # Batches of one row group: larger ones are glued across row groups, a copy that
        # made this read 2-3x slower (batch_size=1024 over row groups of 128 rows).
        rows = max(pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups))
        for batch in pf.iter_batches(batch_size=rows):
            records += batch.num_rows
            arrow_bytes += batch.nbytes
    return {"records": records, "arrow_bytes": arrow_bytes}


def run_guideloom(files: list[Path], out: Path, _args: argparse.Namespace) -> dict[str, Any]:
    summary: Any = gl.import_parquet(  # type: ignore[attr-defined, unused-ignore]
        [str(f) for f in files],
        str(out),
        dataset_id="bench",
        snapshot_id="v1",
        batch_rows=1024,
        work_id="bench",
    )
    return {
        "records": summary.records,
        "out_bytes": summary.shard_bytes,
        "shards": summary.shards,
        "snapshot_id": summary.snapshot_id,
    }


def row_groups(files: list[Path]) -> list[tuple[str, int]]:
    """Every (file, row group) of `files`, in order: the unit LitData and MDS are fed by."""
    return [(str(f), g) for f in files for g in range(pq.ParquetFile(f).num_row_groups)]


def lit_rows(item: tuple[str, int]) -> Iterator[dict[str, Any]]:
    """One row group of one file, one dict per row. LitData's `fn` (top level: LitData's
    spawned workers import it by name; a functools.partial writes no chunks), MDS's feed."""
    path, group = item
    table = pq.ParquetFile(path).read_row_group(group)
    for batch in table.to_batches():
        yield from py_rows(batch)


def run_litdata(files: list[Path], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    import litdata  # type: ignore[import-untyped, unused-ignore]

    litdata.optimize(
        fn=lit_rows,
        inputs=row_groups(files),
        output_dir=str(out),
        chunk_bytes="64MB",
        num_workers=args.lit_workers,
        mode="overwrite",
        verbose=False,
    )
    index = json.loads((out / "index.json").read_text())
    records = sum(int(c["chunk_size"]) for c in index["chunks"])
    return {"records": records, "out_bytes": dir_bytes(out)}


def run_mds(files: list[Path], out: Path, _args: argparse.Namespace) -> dict[str, Any]:
    from streaming import MDSWriter

    records = 0
    columns = mds_columns(pq.read_schema(files[0]))
    with MDSWriter(
        out=str(out), columns=columns, compression=None, size_limit=SHARD_BYTES
    ) as writer:
        for item in row_groups(files):
            for row in lit_rows(item):
                writer.write(row)
                records += 1
    return {"records": records, "out_bytes": dir_bytes(out)}


RUNNERS = {
    "pyarrow": run_pyarrow,
    "guideloom": run_guideloom,
    "litdata": run_litdata,
    "mds": run_mds,
}


def run_one(args: argparse.Namespace) -> None:
    """One system in this process: prints one JSON line."""
    files = parquet_files(Path(args.data))
    out = Path(args.out)
    started = time.perf_counter()
    result = RUNNERS[args.one](files, out, args)
    result["seconds"] = time.perf_counter() - started
    print(json.dumps(result), flush=True)


# ---- the parent ----


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def unavailable(system: str) -> str | None:
    """Why `system` cannot run here, or None."""
    if system == "guideloom" and not hasattr(gl, "import_parquet"):
        return "not available: this guideloom has no import_parquet yet"
    module = {"litdata": "litdata", "mds": "streaming"}.get(system)
    if module:
        import importlib.util

        if importlib.util.find_spec(module) is None:
            return f"not installed (no module {module})"
    return None


class TreeRss:
    """Samples the summed RSS of a process and its descendants (psutil), keeping the peak."""

    def __init__(self, pid: int) -> None:
        self.peak = 0
        self.available = True
        self._stop = threading.Event()
        try:
            import psutil  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            self.available = False
            return
        self._root = psutil.Process(pid)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil  # type: ignore[import-untyped, unused-ignore]

        while not self._stop.is_set():
            total = 0
            try:
                procs = [self._root, *self._root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.05)

    def stop(self) -> int | None:
        if not self.available:
            return None
        self._stop.set()
        self._thread.join()
        return self.peak


def run_system(system: str, data: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = work / f"out-{system}"
    log = work / f"{system}.log"
    cmd = [sys.executable, __file__, "--one", system, "--data", str(data), "--out", str(out)]
    cmd += ["--lit-workers", str(args.lit_workers)]
    try:
        with log.open("w") as sink:
            proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
            tree = TreeRss(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            tree_peak = tree.stop()
        text = log.read_text(errors="replace")
        lines = [x for x in text.splitlines() if x.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = "\n".join(text.splitlines()[-15:])
            return {"status": f"failed (exit {proc.returncode})", "log_tail": tail}
        result: dict[str, Any] = json.loads(lines[-1])
        result["status"] = "ok"
        result["peak_rss_mib"] = usage.ru_maxrss / 1024
        result["tree_rss_mib"] = None if tree_peak is None else tree_peak / (1 << 20)
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


def repeat(system: str, data: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`--rounds` runs of `system`: the median one's figures, the peaks' maximum."""
    runs = []
    for _ in range(args.rounds):
        r = run_system(system, data, work, args)
        if r["status"] != "ok":
            return r
        runs.append(r)
    runs.sort(key=lambda r: float(r["seconds"]))
    out = dict(runs[len(runs) // 2])
    out["all_seconds"] = [r["seconds"] for r in runs]
    out["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    trees = [r["tree_rss_mib"] for r in runs if r["tree_rss_mib"] is not None]
    out["tree_rss_mib"] = max(trees) if trees else None
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(
        prefix="import-peers-", dir=os.environ.get("GUIDELOOM_BENCH_TMP")
    ) as tmp:
        work = Path(tmp)
        data = Path(args.data) if args.data else work / "data"
        files = parquet_files(data)
        if files and sum(f.stat().st_size for f in files) >= args.bytes:
            print(f"reusing {len(files)} files in {data}", flush=True)
        else:
            for f in files:
                f.unlink()
            started = time.perf_counter()
            files = realdata.big_mixed_parquet(data, args.bytes)
            print(
                f"wrote {len(files)} Parquet files in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
        in_bytes = sum(f.stat().st_size for f in files)
        records = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        print(f"{records} records, {in_bytes / 1e6:.0f} MB of Parquet in {len(files)} files")
        results: dict[str, dict[str, Any]] = {}
        for system in args.systems.split(","):
            why = unavailable(system)
            if why:
                results[system] = {"status": why}
            else:
                results[system] = repeat(system, data, work, args)
                r = results[system]
                if r["status"] == "ok" and r["records"] != records:
                    r["status"] = f"wrong count: {r['records']} of {records} records"
            r = results[system]
            if r["status"] == "ok":
                r["mb_per_s"] = in_bytes / 1e6 / r["seconds"]
                print(
                    f"{system}: {r['mb_per_s']:.0f} MB/s ({r['seconds']:.1f} s), peak RSS "
                    f"{r['peak_rss_mib']:.0f} MiB",
                    flush=True,
                )
            else:
                print(f"{system}: {r['status']}\n{r.get('log_tail', '')}".rstrip(), flush=True)
    return {
        "parquet_bytes": in_bytes,
        "records": records,
        "files": len(files),
        "lit_workers": args.lit_workers,
        "rounds": args.rounds,
        "systems": results,
    }


def report(out: dict[str, Any]) -> None:
    systems = out["systems"]
    rate = {k: v["mb_per_s"] for k, v in systems.items() if v["status"] == "ok"}
    top, ours = rate.get(CEILING), rate.get("guideloom")
    print(
        f"\n## import of {out['parquet_bytes'] / 1e6:.0f} MB of Parquet ({out['records']} "
        f"records, {out['files']} files)"
    )
    print(
        "| system | MB/s | ÷ ceiling | guideloom ÷ this | peak RSS MiB (largest process / "
        "tree) | output MB |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, v in systems.items():
        label = f"{name} (ceiling)" if name == CEILING else name
        if v["status"] != "ok":
            print(f"| {label} | {v['status']} | | | | |")
            continue
        r = v["mb_per_s"]
        vs_top = f"{r / top:.2f}" if top else ""
        vs_ours = f"{ours / r:.2f}" if ours and name != "guideloom" else ""
        tree = "" if v["tree_rss_mib"] is None else f" / {v['tree_rss_mib']:.0f}"
        written = f"{v['out_bytes'] / 1e6:.0f}" if "out_bytes" in v else ""
        print(
            f"| {label} | {r:.0f} | {vs_top} | {vs_ours} | {v['peak_rss_mib']:.0f}{tree} | "
            f"{written} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bytes", type=parse_bytes, default=1 << 30, help="e.g. 1GiB, 200MB")
    parser.add_argument("--data", help="keep the Parquet files here (reused when big enough)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--lit-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=1, help="runs per system (median)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--one", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args)
        return
    out = run(args)
    report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
