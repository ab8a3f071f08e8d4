"""`convert_stream_storage`: a StreamStorage / StreamWithMetaStorage directory migrates into a
root as a stream snapshot (the one token-stream encoding) with the same tokens, documents and
metadata; what cannot be represented is refused before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import guideloom as gl

DOCS: list[tuple[list[int], dict[str, Any]]] = [
    ([1, 2, 3], {"doc": 0, "tags": ["a"]}),
    ([], {"doc": 1, "tags": []}),
    ([4, 5], {"doc": 2, "score": 0.5}),
    ([6, 7, 8, 9], {"doc": 3, "source": "x.txt"}),
]


@pytest.mark.parametrize("dtype", [np.uint16, np.int64, np.float32], ids=lambda d: np.dtype(d).name)
def test_a_stream_with_meta_storage_converts_with_its_documents(tmp_path: Path, dtype: Any) -> None:
    src = tmp_path / "corpus"
    storage = gl.StreamWithMetaStorage(src, dtype, max_shard_records=3)
    with storage.sync_writer() as writer:
        for tokens, meta in DOCS:
            writer.append(np.array(tokens, dtype=dtype), meta)
    root = tmp_path / "root"
    snapshot = gl.convert_stream_storage(src, root, dataset_id="corpus", snapshot_id="v1")
    assert snapshot.id == "v1"
    ds = gl.open(root)
    whole = np.array([t for d, _ in DOCS for t in d], dtype=dtype)
    assert (len(ds), ds.num_tokens()) == (len(DOCS), whole.size)
    np.testing.assert_array_equal(ds.tokens(0, whole.size), whole)
    for i, (tokens, meta) in enumerate(DOCS):
        np.testing.assert_array_equal(ds.document(i), np.array(tokens, dtype=dtype))
        assert ds.document_meta(i) == meta


def test_a_plain_stream_converts_its_tokens(tmp_path: Path) -> None:
    src = tmp_path / "stream"
    storage = gl.StreamStorage(src, np.uint32)
    with storage.sync_writer() as writer:
        writer.append(np.arange(1000, dtype=np.uint32))
    root = tmp_path / "root"
    gl.convert_stream_storage(src, str(root), dataset_id="s", snapshot_id="v1", work_id="import")
    ds = gl.open(root)
    np.testing.assert_array_equal(ds.tokens(0, 1000), np.arange(1000, dtype=np.uint32))


def test_refusals_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with pytest.raises(gl.InvalidArgumentError, match=r"no shard-000000\.glm"):
        gl.convert_stream_storage(tmp_path / "missing", root, dataset_id="d", snapshot_id="v1")
    docs = tmp_path / "docs"
    with gl.DocumentStorage(docs, gl.RawFormat()).sync_writer() as writer:
        writer.append(0, b"x")
    with pytest.raises(gl.InvalidArgumentError, match="not a token stream"):
        gl.convert_stream_storage(docs, root, dataset_id="d", snapshot_id="v1")
    assert not any((root / "log").glob("*")) if (root / "log").exists() else True
