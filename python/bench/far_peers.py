"""Two epochs over a far object store, guideloom beside MosaicML Streaming (MDS) and LitData:
the same records in moto's S3, read through the fault proxy's link (the `far_link` example:
a round trip of RTT ms and a bandwidth cap), one shuffled epoch after another through torch's
DataLoader with 2 workers, batches of 64; and guideloom's epoch from a local root of the same
records as the ceiling.

    cargo build --release -p guideloom-faultproxy --example far_link
    pip install moto[server] mosaicml-streaming litdata boto3  # the peers (not the package's deps)
    python python/bench/far_peers.py [--records N] [--record-bytes B] [--rtt MS] [--mbps MB_PER_S]

It starts its own moto server (threaded: the one `cargo xtask servers` starts for the tests
answers one request at a time, which would hide every reader's concurrency) on a free port
of 127.0.0.1, and stops it at the end.

Per system and epoch: records/s, requests and bytes through the proxy (counted by far_link),
and at the end the cache directory's size (MDS and LitData keep downloaded shards; guideloom
keeps nothing unless its node cache is on: the `guideloom-cache` row, docs/cache.md) and the peak RSS of the process and of its
DataLoader workers. Each system runs in a fresh process. Wall-clock figures on a shared
machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _far import far_link

RECORD = 1024  # bytes per record; --record-bytes sets it (the 256 KiB profile: 262144)
SHARD_BYTES = 8 << 20
BATCH = 64
WORKERS = 2


def record(i: int, size: int = RECORD) -> bytes:
    return i.to_bytes(8, "little") * (size // 8)


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
    )


def upload(directory: Path, endpoint: str, bucket: str, prefix: str) -> None:
    client = s3_client(endpoint)
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(directory)}")


def write_all(
    work: Path, n: int, size: int, endpoint: str, bucket: str, prefix: str, systems: list[str]
) -> None:
    """The same records for the systems asked for: guideloom published straight into moto
    (and into a local root, the ceiling), MDS and LitData written locally by their own
    writers and uploaded."""
    import guideloom as gl

    per_shard = max(1, SHARD_BYTES // size)
    local = work / "gl-local"
    s3 = gl.S3Options(endpoint_url=endpoint, allow_http=True)
    for where, options in ((str(local), None), (f"s3://{bucket}/{prefix}/gl", s3)):
        root = gl.Root(where, s3=options) if options else gl.Root(where)
        refs = [
            root.write_shard(
                (record(i, size) for i in range(s, min(n, s + per_shard))),
                work_id="w",
                shard=s // per_shard,
                format="raw",
            )
            for s in range(0, n, per_shard)
        ]
        root.publish(refs, dataset_id="far", snapshot_id="s")

    if "mds" in systems:
        write_mds(work, n, size, endpoint, bucket, prefix)
    if "litdata" in systems:
        write_litdata(work, n, size, endpoint, bucket, prefix)


def write_mds(work: Path, n: int, size: int, endpoint: str, bucket: str, prefix: str) -> None:
    from streaming import MDSWriter

    mds = work / "mds"
    with MDSWriter(out=str(mds), columns={"data": "bytes"}, size_limit=SHARD_BYTES) as w:
        for i in range(n):
            w.write({"data": record(i, size)})
    upload(mds, endpoint, bucket, f"{prefix}/mds")


def write_litdata(work: Path, n: int, size: int, endpoint: str, bucket: str, prefix: str) -> None:
    import litdata

    lit = work / "lit"
    litdata.optimize(
        # LitData writes no chunk for a functools.partial (tried): the size travels with
        # each input instead.
        fn=_lit_item,
        inputs=[(i, size) for i in range(n)],
        output_dir=str(lit),
        chunk_bytes="8MB",
        num_workers=1,
        mode="overwrite",
    )
    upload(lit, endpoint, bucket, f"{prefix}/lit")


def _lit_item(item: tuple[int, int]) -> dict[str, Any]:
    i, size = item
    return {"data": record(i, size)}


def _lit_allow_http() -> None:
    """LitData fetches chunks with obstore, whose client refuses plain http unless told; the
    far store here is http on loopback (real S3 is https). Its fast path kept."""
    from litdata.streaming import downloader

    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True


def _lit_worker_init(_worker: int) -> None:
    _lit_allow_http()


def _lit_collate(batch: list[dict[str, Any]]) -> list[bytes]:
    """A LitData batch as the records' bytes (its bytes column yields memoryviews)."""
    return [bytes(r["data"]) for r in batch]


class Link:
    """The far_link process: its proxy URL and its counters."""

    def __init__(self, upstream: str, rtt: int, mbps: int) -> None:
        cap = [str(mbps)] if mbps > 0 else []
        self.proc = subprocess.Popen(
            [far_link(), upstream, str(rtt), *cap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stats(self) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        return {k: int(v) for k, v in (item.split("=") for item in line)}

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a forked worker still holds the pipe
            self.proc.kill()
            self.proc.wait(timeout=30)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    """A threaded moto server on a free port, with one bucket."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            s3_client(endpoint).create_bucket(Bucket=BUCKET)
            return proc, endpoint
        except Exception:  # not listening yet
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("far_peers: moto did not start")


BUCKET = "far-peers"


def run_one(system: str, args: argparse.Namespace) -> dict[str, Any]:
    """Two epochs of `system` in this process; prints one JSON line."""
    from torch.utils.data import DataLoader

    link = Link(args.endpoint, args.rtt, args.mbps)
    cache = Path(args.work) / f"cache-{system}-{uuid.uuid4().hex[:8]}"
    bucket, prefix = BUCKET, args.prefix
    try:
        if system == "guideloom-local":
            from guideloom.torch import IterableDataset

            ds: Any = IterableDataset(str(Path(args.work) / "gl-local"), batch_size=BATCH, seed=1)
            loader: Any = DataLoader(
                ds, batch_size=BATCH, num_workers=WORKERS, multiprocessing_context="fork"
            )
        elif system in ("guideloom", "guideloom-cache"):
            import guideloom as gl
            from guideloom.torch import IterableDataset

            if system == "guideloom-cache":
                # The node cache (docs/cache.md), as a user turns it on for every open.
                os.environ["GUIDELOOM_CACHE_DIR"] = str(cache)
                os.environ["GUIDELOOM_CACHE_BYTES"] = str(4 << 30)

            s3 = gl.S3Options(endpoint_url=link.url, allow_http=True)
            ds = IterableDataset(
                f"s3://{bucket}/{prefix}/gl", batch_size=BATCH, seed=1, s3=s3, read_ahead=16
            )
            loader = DataLoader(
                ds, batch_size=BATCH, num_workers=WORKERS, multiprocessing_context="fork"
            )
        elif system == "mds":
            from streaming import StreamingDataset
            from streaming.base.util import clean_stale_shared_memory

            clean_stale_shared_memory()
            os.environ["S3_ENDPOINT_URL"] = link.url
            ds = StreamingDataset(
                remote=f"s3://{bucket}/{prefix}/mds",
                local=str(cache),
                shuffle=True,
                shuffle_seed=1,
                batch_size=BATCH,
            )
            loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS)
        elif system == "litdata":
            import litdata

            _lit_allow_http()

            options = {
                "endpoint_url": link.url,
                "aws_access_key_id": os.environ.get("AWS_ACCESS_KEY_ID", "test"),
                "aws_secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
                "region_name": os.environ.get("AWS_REGION", "us-east-1"),
            }
            ds = litdata.StreamingDataset(
                f"s3://{bucket}/{prefix}/lit",
                cache_dir=str(cache),
                shuffle=True,
                seed=1,
                storage_options=options,
            )
            # Its workers need the http patch too (they are spawned when LitData set spawn),
            # and its records (memoryviews) a collate: torch's default turns each byte into
            # a tensor row, and a memoryview cannot be pickled to the main process (without
            # it, a worker's batch is lost and the epoch waits forever).
            loader = litdata.StreamingDataLoader(
                ds,
                batch_size=BATCH,
                num_workers=WORKERS,
                worker_init_fn=_lit_worker_init,
                collate_fn=_lit_collate,
            )
        else:
            raise SystemExit(f"unknown system {system}")
        epochs = []
        for epoch in range(2):
            if hasattr(ds, "set_epoch"):
                ds.set_epoch(epoch)
            before = link.stats()
            started = time.perf_counter()
            got = 0
            for batch in loader:
                got += len(batch["data"]) if isinstance(batch, dict) else len(batch)
            took = time.perf_counter() - started
            after = link.stats()
            if got != args.records:
                raise SystemExit(f"{system}: epoch {epoch} gave {got} of {args.records} records")
            epochs.append(
                {
                    "rate": got / took,
                    "gets": after["gets"] - before["gets"],
                    "bytes": after["bytes_to_client"] - before["bytes_to_client"],
                }
            )
        result = {
            "system": system,
            "epochs": epochs,
            "cache_bytes": dir_bytes(cache),
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "workers_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
        print(json.dumps(result), flush=True)
        return result
    finally:
        link.close()
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument(
        "--record-bytes", type=int, default=RECORD, help="bytes per record (a multiple of 8)"
    )
    parser.add_argument("--rtt", type=int, default=20)
    parser.add_argument("--mbps", type=int, default=100, help="MB/s to the reader (0: no cap)")
    parser.add_argument(
        "--systems",
        default="guideloom-local,guideloom-cache,mds,litdata",
        help="comma-separated; `guideloom` (no node cache) reads record by record: minutes here",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    os.environ.setdefault("AWS_REGION", "us-east-1")
    if args.one:
        run_one(args.one, args)
        return
    moto, endpoint = start_moto()
    try:
        run_all(args, endpoint)
    finally:
        moto.kill()
        moto.wait(timeout=30)


def run_all(args: argparse.Namespace, endpoint: str) -> None:
    with tempfile.TemporaryDirectory(prefix="far-peers-") as work:
        prefix = f"far-peers-{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        systems = args.systems.split(",")
        write_all(Path(work), args.records, args.record_bytes, endpoint, BUCKET, prefix, systems)
        print(
            f"wrote {args.records} x {args.record_bytes} B for {len(systems)} systems in "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        results = []
        for system in systems:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    system,
                    "--work",
                    work,
                    "--prefix",
                    prefix,
                    "--endpoint",
                    endpoint,
                    "--records",
                    str(args.records),
                    "--record-bytes",
                    str(args.record_bytes),
                    "--rtt",
                    str(args.rtt),
                    "--mbps",
                    str(args.mbps),
                ],
                capture_output=True,
                text=True,
            )
            lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
            if out.returncode != 0 or not lines:
                print(f"{system}: failed\n{out.stderr[-3000:]}", flush=True)
                continue
            results.append(json.loads(lines[-1]))
            print(lines[-1], flush=True)
    print(
        f"\n{args.records} x {args.record_bytes} B, {WORKERS} workers, batches of {BATCH}, "
        f"{args.rtt} ms round trip, {args.mbps} MB/s"
    )
    print(
        "| system | epoch 1 rec/s | epoch 2 rec/s | GETs 1 / 2 | MB fetched 1 / 2 | cache MB "
        "| RSS MiB (main / workers) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        e1, e2 = r["epochs"]
        print(
            f"| {r['system']} | {e1['rate']:,.0f} | {e2['rate']:,.0f} | {e1['gets']} / "
            f"{e2['gets']} | {e1['bytes'] / 1e6:.1f} / {e2['bytes'] / 1e6:.1f} | "
            f"{r['cache_bytes'] / 1e6:.1f} | {r['rss_mib']:.0f} / {r['workers_rss_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
