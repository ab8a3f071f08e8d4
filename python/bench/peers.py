"""guideloom from Python beside array_record, MosaicML Streaming (MDS) and Lance, same records,
same run: random single reads, batches of 64 random indices, and a sequential scan, with the
Python `os.pread` ceiling (single and batch) and a plain sequential read (scan) of one flat
file holding the same bytes.

    python python/bench/peers.py [--scale S] [--rounds R]

Profiles (the issue's): 100 000 x 1 KiB and 2 000 x 256 KiB incompressible records, local
disk, page cache warm (every reader runs each operation once untimed first). `--scale 0.1`
shrinks the record counts for a quick look. A peer that is not installed is reported as
such, never silently dropped. Medians of R rounds; ratios are against the ceilings and the
best peer. Wall-clock figures on a shared machine are noisy: compare the ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import guideloom as gl

PROFILES = (("1KiB", 100_000, 1024), ("256KiB", 2_000, 256 * 1024))
SINGLES = 5_000
BATCHES = 300
BATCH = 64
RECORDS_PER_SHARD = 4096


def records(n: int, size: int) -> Iterator[bytes]:
    rng = random.Random(size)
    for _ in range(n):
        yield rng.randbytes(size)


class Reader:
    """One system's three operations; `None` where it has no such operation."""

    def __init__(
        self,
        name: str,
        single: Callable[[int], Any],
        batch: Callable[[list[int]], Any],
        scan: Callable[[], int],
    ) -> None:
        self.name, self.single, self.batch, self.scan = name, single, batch, scan


def flat(dir: Path, n: int, size: int) -> list[Reader]:
    path = dir / "flat.bin"
    with path.open("wb") as f:
        for r in records(n, size):
            f.write(r)
    fd = os.open(path, os.O_RDONLY)

    def scan() -> int:
        total = 0
        with path.open("rb", buffering=0) as f:
            buf = bytearray(1 << 20)
            while got := f.readinto(buf):
                total += got
        return total

    return [
        Reader(
            "os.pread / sequential read (ceiling)",
            lambda i: os.pread(fd, size, i * size),
            lambda b: [os.pread(fd, size, i * size) for i in b],
            scan,
        )
    ]


def guideloom(dir: Path, n: int, size: int) -> list[Reader]:
    root = dir / "guideloom"
    gen = records(n, size)
    shards = []
    for s in range(0, n, RECORDS_PER_SHARD):
        chunk = [next(gen) for _ in range(min(RECORDS_PER_SHARD, n - s))]
        shards.append(
            gl.write_shard(chunk, root, work_id="bench", shard=s // RECORDS_PER_SHARD, format="raw")
        )
    gl.publish(root, shards, dataset_id="bench", snapshot_id="s")
    ds = gl.open(root, format="raw")

    def scan() -> int:
        return sum(len(r) for r in ds)

    return [Reader("guideloom", ds.get_raw, ds.get_many_raw, scan)]


def array_record(dir: Path, n: int, size: int) -> list[Reader]:
    from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter

    ar_root = dir / "ar"
    ar_root.mkdir()
    path = str(ar_root / "data.array_record")
    writer = ArrayRecordWriter(path, "group_size:1")
    for r in records(n, size):
        writer.write(r)
    writer.close()
    reader = ArrayRecordReader(path, "readahead_buffer_size:0")

    def scan() -> int:
        total = 0
        for start in range(0, n, 1024):
            total += sum(len(r) for r in reader.read(start, min(n, start + 1024)))
        return total

    # The same file adopted into a guideloom snapshot (no copy) and read through gl.open:
    # issue 14's "from Python >= 10x ArrayRecordReader single reads" on the package's own file.
    gl.publish(
        ar_root,
        [gl.adopt_array_record(ar_root, "data.array_record")],
        dataset_id="ar",
        snapshot_id="s",
    )
    adopted = gl.open(ar_root)

    def adopted_scan() -> int:
        return sum(len(r) for r in adopted)

    return [
        Reader("array_record", lambda i: reader.read([i]), reader.read, scan),
        Reader(
            "guideloom over the array_record file",
            adopted.get_raw,
            adopted.get_many_raw,
            adopted_scan,
        ),
    ]


def mds(dir: Path, n: int, size: int) -> list[Reader]:
    from streaming import MDSWriter, StreamingDataset

    out = str(dir / "mds")
    with MDSWriter(out=out, columns={"b": "bytes"}, compression=None, size_limit=1 << 26) as writer:
        for r in records(n, size):
            writer.write({"b": r})
    ds = StreamingDataset(local=out, shuffle=False, batch_size=BATCH)

    def scan() -> int:
        return sum(len(ds.get_item(i)["b"]) for i in range(n))

    return [
        Reader("mosaicml-streaming (MDS)", ds.get_item, lambda b: [ds.get_item(i) for i in b], scan)
    ]


def lance(dir: Path, n: int, size: int) -> list[Reader]:
    import lance as lancedb
    import pyarrow as pa

    uri = str(dir / "data.lance")
    gen = records(n, size)
    batches = (
        pa.record_batch(
            [pa.array([next(gen) for _ in range(min(8192, n - s))], pa.binary())], names=["b"]
        )
        for s in range(0, n, 8192)
    )
    schema = pa.schema([("b", pa.binary())])
    lancedb.write_dataset(pa.RecordBatchReader.from_batches(schema, batches), uri)
    ds = lancedb.dataset(uri)

    def scan() -> int:
        return sum(b.column(0).nbytes for b in ds.to_batches())

    return [Reader("pylance", lambda i: ds.take([i]), ds.take, scan)]


SYSTEMS: list[tuple[str, Callable[[Path, int, int], list[Reader]]]] = [
    ("ceiling", flat),
    ("guideloom", guideloom),
    ("array_record", array_record),
    ("mosaicml-streaming", mds),
    ("pylance", lance),
]


def median_time(f: Callable[[], Any], rounds: int) -> float:
    f()  # warm: page cache, lazily opened files
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def profile(label: str, n: int, size: int, rounds: int) -> None:
    rng = random.Random(7)
    singles = [rng.randrange(n) for _ in range(SINGLES)]
    batches = [[rng.randrange(n) for _ in range(BATCH)] for _ in range(BATCHES)]
    rows: dict[str, tuple[float, float, float]] = {}
    print(
        f"\n## {label}: {n} records of {size} B (incompressible), local disk, medians of {rounds}"
    )
    with TemporaryDirectory(dir=os.environ.get("GUIDELOOM_BENCH_TMP")) as tmp:
        for name, build in SYSTEMS:
            where = Path(tmp) / name
            where.mkdir()
            try:
                readers = build(where, n, size)
            except ImportError as missing:
                print(f"{name}: not installed ({missing}); left out of this run")
                continue
            for r in readers:
                one = median_time(lambda: [r.single(i) for i in singles], rounds) / SINGLES
                many = median_time(lambda: [r.batch(b) for b in batches], rounds) / BATCHES
                scan = median_time(r.scan, rounds)
                rows[r.name] = (one, BATCH / many, n / scan)
    print("| reader | single read µs | batch-64 records/s | scan records/s |")
    print("|---|---|---|---|")
    for name, (one, batch, scan) in rows.items():
        print(f"| {name} | {one * 1e6:.2f} | {batch:,.0f} | {scan:,.0f} |")
    ceiling = rows.get("os.pread / sequential read (ceiling)")
    ours = rows.get("guideloom")
    if ceiling and ours:
        peers = {
            k: v
            for k, v in rows.items()
            if not k.startswith("guideloom") and k != "os.pread / sequential read (ceiling)"
        }
        print(
            f"\nguideloom single = {ceiling[0] / ours[0]:.2f}x the os.pread ceiling's speed (target >= 0.8)"
        )
        for k, v in peers.items():
            print(f"guideloom single vs {k}: {v[0] / ours[0]:.1f}x faster")
        if peers:
            best = max(v[1] for v in peers.values())
            print(
                f"guideloom batch-64 = {ours[1] / best:.2f}x the best peer's records/s (target >= 2)"
            )
        print(
            f"guideloom scan = {ours[2] / ceiling[2]:.2f}x a plain sequential read (target >= 0.7)"
        )
    adopted, package = rows.get("guideloom over the array_record file"), rows.get("array_record")
    if adopted and package:
        print(
            f"guideloom over the array_record file, single = {package[0] / adopted[0]:.1f}x "
            f"ArrayRecordReader's speed (issue 14's target >= 10); batch-64 = "
            f"{adopted[1] / package[1]:.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for label, n, size in PROFILES:
        profile(label, max(BATCH, int(n * args.scale)), size, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
