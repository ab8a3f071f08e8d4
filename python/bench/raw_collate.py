"""Raw records through torch's DataLoader: the default collate (a RawBatch per batch) beside a
collate_fn returning a list of bytes, with 2 forked workers and without workers.

    python python/bench/raw_collate.py [RECORDS]

Wall-clock figures on a shared machine are noisy: compare rows of the same run.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from torch.utils.data import DataLoader

import guideloom as gl
from guideloom.torch import IterableDataset


def as_bytes(batch: list[gl.Bytes]) -> list[bytes]:
    return [bytes(r) for r in batch]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "raw"
        recs = (i.to_bytes(8, "little") * 128 for i in range(n))
        shard = gl.write_shard(recs, root, work_id="w", format="raw")
        gl.publish(root, [shard], dataset_id="r", snapshot_id="s")
        for round_ in range(2):
            for label, workers, collate in [
                ("list of bytes (user collate), 2 workers", 2, as_bytes),
                ("RawBatch (default collate), 2 workers", 2, None),
                ("list of bytes (user collate), 0 workers", 0, as_bytes),
                ("RawBatch, 0 workers", 0, None),
            ]:
                ds = IterableDataset(root, batch_size=64, seed=round_)
                kw = {} if collate is None else {"collate_fn": collate}
                loader = DataLoader(
                    ds,
                    batch_size=64,
                    num_workers=workers,
                    multiprocessing_context="fork" if workers else None,
                    **kw,
                )
                t = time.perf_counter()
                got = 0
                for b in loader:
                    got += len(b)
                dt = time.perf_counter() - t
                assert got == n
                print(f"{label:45s} {n / dt:>10.0f} rec/s")


if __name__ == "__main__":
    main()
