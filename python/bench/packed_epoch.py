"""One epoch of packed LLM windows over a tokenised corpus, beside its ceiling: the standard
library's sources tokenised as python/tests/test_packing.py does (a byte-level BPE trained on
them), published as a uint16 token stream on a local root, packed into windows of SEQ_LEN + 1.

    python python/bench/packed_epoch.py [SEQ_LEN] [FILES] [ROUNDS]

Rows, windows/s (wall clock, shared machine: compare rows of the same run):
- raw `Dataset.tokens` per piece: the same token ranges read one by one, no arrays built (the
  ceiling of what a Python loop over this stream does);
- `Packing.batch` of 16: reading and building the int64 input_ids/labels/position_ids in Rust;
- `PackedTokens`, in process: the torch dataset yielding a dict of tensors per batch of 16;
- `PackedTokens` (batches of 16) through `DataLoader(batch_size=None)`, 0 and 2 forked
  workers (persistent: the best of the rounds leaves the workers' start out).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader

import guideloom as gl
from guideloom.torch import PackedTokens

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
import test_packing  # the corpus and tokenizer of the test


def main() -> None:
    seq_len = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    test_packing.FILES = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    started = time.perf_counter()
    docs = test_packing.tokenise(test_packing.stdlib_texts())
    print(
        f"tokenised {len(docs)} files, {sum(map(len, docs))} tokens in "
        f"{time.perf_counter() - started:.1f} s"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = gl.Root(str(Path(tmp) / "corpus"))
        shards = [
            root.write_stream_shard(
                docs[i : i + 100], work_id="tok", shard=i // 100, dtype=np.uint16
            )
            for i in range(0, len(docs), 100)
        ]
        root.publish(shards, dataset_id="stdlib", snapshot_id="v1")
        ds = root.open()
        started = time.perf_counter()
        packing = gl.Packing(ds, seq_len=seq_len)
        print(
            f"packed into {len(packing)} windows of {packing.capacity} ({packing.num_pieces} "
            f"pieces) in {(time.perf_counter() - started) * 1000:.1f} ms, padding "
            f"{packing.padding * 100:.3f} %"
        )
        n = len(packing)

        def raw() -> None:
            for k in range(n):
                for a, b in packing.pieces(k):
                    ds.tokens(a, b)

        def batch() -> None:
            for k in range(0, n, 16):
                packing.batch(list(range(k, min(k + 16, n))))

        def packed() -> None:
            for _ in PackedTokens(ds, seq_len=seq_len, batch_size=16, rank=0, world_size=1):
                pass

        data = PackedTokens(ds, seq_len=seq_len, batch_size=16, rank=0, world_size=1)
        # Workers kept between rounds: the best round is the steady state, without the
        # workers' start.
        loaders = {
            0: DataLoader(data, batch_size=None),
            2: DataLoader(data, batch_size=None, num_workers=2, persistent_workers=True),
        }

        def loader(workers: int) -> None:
            for _ in loaders[workers]:
                pass

        rows = [
            ("raw Dataset.tokens per piece (ceiling)", raw),
            ("Packing.batch of 16", batch),
            ("PackedTokens, in process", packed),
            ("PackedTokens, DataLoader, 0 workers", lambda: loader(0)),
            ("PackedTokens, DataLoader, 2 workers", lambda: loader(2)),
        ]
        for name, run in rows:
            best = min(_timed(run) for _ in range(rounds))
            print(f"| {name} | {n / best:,.0f} |")


def _timed(run: object) -> float:
    assert callable(run)
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
