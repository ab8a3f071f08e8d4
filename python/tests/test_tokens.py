"""Published token streams from Python: `Root.write_stream_shard` writes documents of tokens as
stream shards, and a snapshot of them reads as a token stream through `Dataset` (`tokens`,
`document`, `document_range`, `num_tokens`, `stream_element`), locally and on S3."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import guideloom as gl
from conftest import S3Root

DOCS: list[list[int]] = [[1, 2, 3], [], [4, 5], [6], [7, 8, 9, 10]]


def publish_stream(root: gl.Root, dtype: npt.DTypeLike) -> gl.Dataset:
    first = root.write_stream_shard(
        (np.array(d, dtype=np.int64) for d in DOCS[:3]), work_id="w", dtype=dtype
    )
    second = root.write_stream_shard(DOCS[3:], work_id="w", shard=1, dtype=dtype)
    assert (first.record_count, second.record_count) == (3, 2)
    root.publish([first, second], dataset_id="tokens", snapshot_id="v1")
    return root.open()


def check_stream(ds: gl.Dataset, dtype: npt.DTypeLike) -> None:
    whole = np.array([t for d in DOCS for t in d], dtype=dtype)
    assert (len(ds), ds.num_tokens()) == (5, 10)
    assert ds.stream_element() == f"{np.dtype(dtype).kind}{np.dtype(dtype).itemsize * 8}"
    tokens = ds.tokens(0, 10)
    assert tokens.dtype == np.dtype(dtype) and not tokens.flags.writeable
    np.testing.assert_array_equal(tokens, whole)
    # Across documents and across the two shards.
    np.testing.assert_array_equal(ds.tokens(2, 7), whole[2:7])
    assert ds.tokens(4, 4).size == 0
    for i, doc in enumerate(DOCS):
        np.testing.assert_array_equal(ds.document(i), np.array(doc, dtype=dtype))
    np.testing.assert_array_equal(ds.document(-1), np.array(DOCS[-1], dtype=dtype))
    assert [ds.document_range(i) for i in range(5)] == [
        range(0, 3),
        range(3, 3),
        range(3, 5),
        range(5, 6),
        range(6, 10),
    ]
    for start, stop in [(0, 11), (5, 4), (-1, 2), (0, 2**64)]:
        with pytest.raises(gl.IndexOutOfRangeError):
            ds.tokens(start, stop)
    for index in (5, -6, 2**64):
        with pytest.raises(gl.IndexOutOfRangeError):
            ds.document(index)
    # The records are the documents' little-endian bytes.
    assert (
        bytes(ds.get_raw(0)) == np.array(DOCS[0], dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    )


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.int64, np.float32])
def test_a_token_stream_on_a_local_root(local_root: Path, dtype: npt.DTypeLike) -> None:
    check_stream(publish_stream(gl.Root(local_root), dtype), dtype)


def test_a_token_stream_on_s3(s3_root: S3Root) -> None:
    root = gl.Root(s3_root.uri, s3=s3_root.options)
    check_stream(publish_stream(root, np.uint16), np.uint16)
    # Another process (a plain `open`) reads the same stream.
    ds = gl.open(s3_root.uri, s3=s3_root.options)
    np.testing.assert_array_equal(ds.tokens(1, 5), [2, 3, 4, 5])


def test_a_dataset_of_records_is_not_a_stream(local_root: Path) -> None:
    root = gl.Root(local_root)
    root.publish([root.write_shard([1, 2], work_id="w")], dataset_id="d", snapshot_id="s")
    ds = root.open()
    for read in (ds.num_tokens, ds.stream_element, lambda: ds.tokens(0, 1), lambda: ds.document(0)):
        with pytest.raises(gl.UnsupportedError, match="not a token stream"):
            read()


def test_unsupported_dtypes_and_failing_iterables_write_nothing(local_root: Path) -> None:
    root = gl.Root(local_root)
    for dtype in (np.int8, np.complex64, "U4"):
        with pytest.raises(TypeError, match="unsupported stream dtype"):
            root.write_stream_shard([[1]], work_id="w", dtype=dtype)

    def failing() -> object:
        yield np.arange(3)
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        root.write_stream_shard(failing(), work_id="w", dtype=np.uint16)  # type: ignore[arg-type]
    shards = local_root / "shards" / "w"
    assert not shards.exists() or not [p for p in shards.iterdir() if not p.name.startswith(".")]
