"""One shuffled epoch through torch's DataLoader over a far store: an `http://` root served by
nginx behind the fault proxy's link (the `far_link` example: a round trip of RTT ms), with
`guideloom.torch.IterableDataset` reading ahead or not, beside the same epoch from the local
root the files are in.

    cargo xtask servers up nginx && source .xtask/servers/up/env.sh
    cargo build --release -p guideloom-faultproxy --example far_link
    python python/bench/far_epoch.py [--records N] [--rtt MS] [--workers 0,2,8]

The issue's setup: 100 000 x 1 KiB records in 8 MB shards, batches of 64, 20 ms. Wall-clock
figures on a shared machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from _far import far_link
from torch.utils.data import DataLoader

import guideloom as gl
from guideloom.torch import IterableDataset

RECORD = 1024
PER_SHARD = 8192
BATCH = 64


def publish(directory: Path, n: int) -> None:
    shards = []
    for s in range(0, n, PER_SHARD):
        records = (i.to_bytes(8, "little") * (RECORD // 8) for i in range(s, min(n, s + PER_SHARD)))
        shards.append(
            gl.write_shard(records, directory, work_id="w", shard=s // PER_SHARD, format="raw")
        )
    gl.publish(directory, shards, dataset_id="far", snapshot_id="s")


def epoch(root: str, workers: int, read_ahead: int, n: int) -> float:
    ds = IterableDataset(root, batch_size=BATCH, seed=1, read_ahead=read_ahead)
    loader = DataLoader(
        ds,
        batch_size=BATCH,
        num_workers=workers,
        multiprocessing_context="fork" if workers else None,
    )
    started = time.perf_counter()
    got = 0
    for batch in loader:
        got += len(batch)
    took = time.perf_counter() - started
    assert got == n, (got, n)
    return n / took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rtt", type=int, default=20)
    parser.add_argument("--workers", default="0,2,8")
    args = parser.parse_args()
    url, served = os.environ.get("GUIDELOOM_NGINX_URL"), os.environ.get("GUIDELOOM_NGINX_ROOT")
    if not url or not served:
        sys.exit("far_epoch: no nginx (GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT)")
    name = f"far-epoch-{uuid.uuid4().hex}"
    directory = Path(served) / name
    link = subprocess.Popen(
        [far_link(), url, str(args.rtt)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert link.stdout is not None
        proxy = link.stdout.readline().strip()
        publish(directory, args.records)
        far = f"{proxy}/{name}/"
        print(f"{args.records} records of {RECORD} B, batches of {BATCH}, round trip {args.rtt} ms")
        print(f"{'':44s} {'records/s':>10s}")
        for workers in [int(w) for w in args.workers.split(",")]:
            local = epoch(str(directory), workers, 16, args.records)
            print(f"local root, {workers} workers {'':23s} {local:>10.0f}")
            for ahead in (0, 16):
                rate = epoch(far, workers, ahead, args.records)
                print(
                    f"far root, {workers} workers, read_ahead {ahead:>2} {'':12s} {rate:>10.0f}"
                    f"  ({rate / local:.3f} of local)"
                )
    finally:
        if link.stdin is not None:
            link.stdin.close()
        link.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
