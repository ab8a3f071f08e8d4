"""A first measurement from Python: random single reads and batches of 64 on 1 KiB records of
a local root, beside os.pread of the same byte ranges in the same run (the ceiling).

    python python/bench/read_latency.py [RECORDS] [SINGLE_READS] [BATCHES]

Wall-clock figures on a shared machine are noisy: compare the ratio, not the absolute times.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import guideloom as gl

RECORD = 1024
PER_SHARD = 5000


def record(i: int) -> bytes:
    return i.to_bytes(8, "little") * (RECORD // 8)


def main(n: int, singles: int, batches: int) -> None:
    with TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        shards = [
            gl.write_shard(
                (record(i) for i in range(s, min(n, s + PER_SHARD))),
                root,
                work_id="bench",
                shard=s // PER_SHARD,
                format="raw",
            )
            for s in range(0, n, PER_SHARD)
        ]
        gl.publish(root, shards, dataset_id="bench", snapshot_id="s")
        # Where each record's bytes are: the payloads lie back to back after the header.
        files = []
        for shard in shards:
            path = root / shard.key
            first = path.read_bytes()
            start = first.find(record(len(files) * PER_SHARD))
            files.append((os.open(path, os.O_RDONLY), start))

        def where(i: int) -> tuple[int, int]:
            fd, start = files[i // PER_SHARD]
            return fd, start + (i % PER_SHARD) * RECORD

        ds = gl.open(root)
        assert bytes(ds[n - 1]) == record(n - 1)
        rng = random.Random(7)
        single = [rng.randrange(n) for _ in range(singles)]
        batched = [[rng.randrange(n) for _ in range(64)] for _ in range(batches)]

        def timed(label: str, count: int, f: object) -> float:
            assert callable(f)
            t = time.perf_counter()
            f()
            per = (time.perf_counter() - t) / count * 1e6
            print(f"{label:<44} {per:9.2f} µs per {'read' if 'single' in label else 'batch'}")
            return per

        def gl_single() -> None:
            for i in single:
                ds.get_raw(i)

        def gl_single_decoded() -> None:
            for i in single:
                ds[i]

        def pread_single() -> None:
            for i in single:
                fd, off = where(i)
                os.pread(fd, RECORD, off)

        def gl_batch() -> None:
            for b in batched:
                ds.get_many_raw(b)

        def pread_batch() -> None:
            for b in batched:
                for i in b:
                    fd, off = where(i)
                    os.pread(fd, RECORD, off)

        for _ in range(2):  # the second round is the one to read (page cache warm)
            print(f"-- {n} records of {RECORD} B, {len(shards)} shards, local root")
            a = timed("guideloom get_raw (single)", singles, gl_single)
            timed("guideloom ds[i] (single, raw buffer)", singles, gl_single_decoded)
            b = timed("os.pread same ranges (single)", singles, pread_single)
            c = timed("guideloom get_many_raw (batch of 64)", batches, gl_batch)
            d = timed("os.pread x64 same ranges (batch of 64)", batches, pread_batch)
            print(f"ratio single {a / b:.1f}x pread, batch {c / d:.1f}x pread")
        for fd, _ in files:
            os.close(fd)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [20000, 5000, 300][len(args) :]))
