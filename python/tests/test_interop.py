"""A dataset written from Rust (serde records through CborFormat) reads in Python, and back.

The Rust side is the facade's example `python_interop` (crates/guideloom/examples/), found
through GUIDELOOM_INTEROP_EXAMPLE (set by `cargo xtask ci`) or under target/debug/examples.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import guideloom as gl

REPO = Path(__file__).resolve().parents[2]


def example() -> Path:
    configured = os.environ.get("GUIDELOOM_INTEROP_EXAMPLE")
    path = (
        Path(configured)
        if configured
        else REPO / "target" / "debug" / "examples" / "python_interop"
    )
    if path.is_file():
        return path
    if os.environ.get("GUIDELOOM_CI") == "1":
        pytest.fail(f"{path} is missing: `cargo build -p guideloom --example python_interop`")
    pytest.skip(f"skipped: {path} is missing (`cargo build -p guideloom --example python_interop`)")


def expected(n: int = 25) -> list[dict[str, Any]]:
    """What the Rust example writes and expects (see its `expected`)."""
    return [
        {
            "id": i,
            "text": f"caption {i} é",
            "score": i / 4,
            "tags": [f"t{t}" for t in range(i % 3)],
            "blob": bytes([i] * 3) if i % 2 == 0 else None,
        }
        for i in range(n)
    ]


def test_rust_written_dataset_reads_in_python(tmp_path: Path) -> None:
    root = tmp_path / "from-rust"
    subprocess.run([example(), "write", root], check=True, timeout=120)
    ds = gl.open(root)
    assert ds.format == "cbor" and ds.snapshot_id == "from-rust"
    assert list(ds) == expected()
    assert ds[24] == expected()[24]


def test_python_written_dataset_reads_in_rust(tmp_path: Path) -> None:
    root = tmp_path / "from-python"
    records = expected()
    shards = [
        gl.write_shard(records[i : i + 7], root, work_id="python", shard=i // 7)
        for i in range(0, len(records), 7)
    ]
    gl.publish(root, shards, dataset_id="interop", snapshot_id="from-python")
    done = subprocess.run(
        [example(), "check", root], check=True, timeout=120, capture_output=True, text=True
    )
    assert "25 records" in done.stdout


def expected_docs(n: int = 23) -> list[tuple[list[int], dict[str, Any]]]:
    """What the Rust example's `expected_docs` writes and expects (a `DocMeta` is a dict)."""
    return [
        (
            [i * 100 + k for k in range(i % 5)],
            {"id": i, "source": f"doc-{i}.txt", "lang": "en" if i % 2 == 0 else None},
        )
        for i in range(n)
    ]


def test_rust_written_stream_with_meta_reads_in_python(tmp_path: Path) -> None:
    import numpy as np

    corpus = tmp_path / "from-rust"
    subprocess.run([example(), "write-stream-meta", corpus], check=True, timeout=120)
    reader = gl.StreamWithMetaStorage(corpus, np.uint32).sync_reader()
    assert len(reader) == 23
    for (tokens, meta), (want, want_meta) in zip(reader, expected_docs()):
        assert tokens.tolist() == want and meta == want_meta


def test_python_written_stream_with_meta_reads_in_rust(tmp_path: Path) -> None:
    import numpy as np

    corpus = tmp_path / "from-python"
    with gl.StreamWithMetaStorage(corpus, np.uint32, max_shard_records=5).sync_writer() as writer:
        for tokens, meta in expected_docs():
            writer.append(tokens, meta)
    done = subprocess.run(
        [example(), "check-stream-meta", corpus],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert "23 documents" in done.stdout
