"""Storages from docs/python.md: a token corpus with per-document metadata, and shards written
one per worker then discovered. Runs as written (python/tests/test_examples.py)."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

import guideloom as gl
from guideloom.io import MmapIO


def main() -> None:
    with TemporaryDirectory() as directory:
        corpus = Path(directory) / "corpus"
        storage = gl.StreamWithMetaStorage(corpus, np.uint16, max_shard_records=100)
        with storage.sync_writer() as writer:
            for i in range(250):
                tokens = np.arange(i % 17, dtype=np.uint16)
                writer.append(tokens, {"source": f"file-{i}.txt", "lang": "en"})
        with gl.StreamWithMetaStorage(
            corpus, np.uint16, read_interface=MmapIO()
        ).sync_reader() as reader:
            tokens, meta = reader.read(42)  # a read-only numpy view, and the metadata
            assert len(tokens) == 42 % 17 and meta == {"source": "file-42.txt", "lang": "en"}
            assert len(reader) == 250 and reader.num_elements() == sum(i % 17 for i in range(250))

        shards = Path(directory) / "shards"
        fs = gl.FileSystemDocument(shards, gl.CborFormat())
        for worker_id in (1, 0):  # each worker writes its own shard, in any order
            with fs.create_shard(worker_id, user_metadata={"worker": worker_id}) as shard_writer:
                for k in range(10):
                    shard_writer.append({"worker": worker_id, "k": k})
        found = fs.discover()
        assert [(s.number, s.records) for s in found] == [(0, 10), (1, 10)]
        assert fs.open_shard(1).read(3) == {"worker": 1, "k": 3}
        assert gl.DocumentStorage(shards, gl.CborFormat()).sync_reader()[10] == {
            "worker": 1,
            "k": 0,
        }


if __name__ == "__main__":
    main()
