"""Only regular files are read: a FIFO (or a directory, a device, a socket) named like a
shard is refused at once with a `RefusedFileError` (a `StorageError`) naming it, by every
storage reader and backend, discovery, and dataset roots alike. Opening a FIFO used to block
until a writer appeared, so each case runs in a child process with a timeout: a regression
fails here instead of hanging the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Whatever each case raised: its class, whether it is a StorageError, and its path.
CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import numpy as np
    import guideloom as gl
    from guideloom.io import MmapIO, PosixPreadIO, SeekIO

    directory, special = sys.argv[1], sys.argv[2]
    results = {}

    def attempt(name, call):
        try:
            call()
            results[name] = {"raised": None}
        except BaseException as e:
            results[name] = {
                "raised": type(e).__name__,
                "storage_error": isinstance(e, gl.StorageError),
                "path": getattr(e, "path", None),
                "message": str(e),
            }

    async def async_read(storage):
        async with storage.async_reader() as reader:
            pass

    for io in (SeekIO(), PosixPreadIO(), MmapIO()):
        name = type(io).__name__
        docs = gl.DocumentStorage(directory, read_interface=io)
        attempt(f"DocumentStorage.sync_reader {name}", docs.sync_reader)
        attempt(f"DocumentStorage.async_reader {name}", lambda: asyncio.run(async_read(docs)))
        stream = gl.StreamStorage(directory, np.uint8, read_interface=io)
        attempt(f"StreamStorage.sync_reader {name}", stream.sync_reader)
        attempt(f"StreamStorage.async_reader {name}", lambda: asyncio.run(async_read(stream)))
        meta = gl.StreamWithMetaStorage(directory, np.uint8, read_interface=io)
        attempt(f"StreamWithMetaStorage.sync_reader {name}", meta.sync_reader)
        fs = gl.FileSystemDocument(directory, "pickle", read_interface=io)
        attempt(f"FileSystemDocument.discover {name}", fs.discover)
    fs = gl.FileSystemDocument(directory, "pickle")
    attempt("FileSystemDocument.open_shard", lambda: fs.open_shard(0))
    stream_fs = gl.FileSystemStream(directory, np.uint8)
    attempt("FileSystemStream.discover", stream_fs.discover)
    attempt("FileSystemStream.open_shard", lambda: stream_fs.open_shard(0))
    print(json.dumps(results))
    """
)


def run_child(directory: Path, special: Path) -> dict[str, dict[str, object]]:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(directory), str(special)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading a directory holding {special.name} hung (killed after 120 s)")
    assert done.returncode == 0, done.stderr
    results: dict[str, dict[str, object]] = json.loads(done.stdout)
    return results


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_directory(path: Path) -> None:
    path.mkdir()


def make_socket(path: Path) -> None:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def make_device_link(path: Path) -> None:
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize(
    "make", [make_fifo, make_directory, make_socket, make_device_link], ids=lambda f: f.__name__
)
def test_a_special_file_named_like_a_shard_is_refused_at_once(tmp_path: Path, make: object) -> None:
    shard = tmp_path / "shard-000000.glm"
    assert callable(make)
    make(shard)
    results = run_child(tmp_path, shard)
    assert len(results) == 21
    for case, outcome in results.items():
        assert outcome["raised"] == "RefusedFileError", (case, outcome)
        assert outcome["storage_error"] is True, case
        assert outcome["path"] == str(shard), (case, outcome)
        assert str(shard) in str(outcome["message"]), case


def test_a_fifo_beside_a_real_shard_is_refused_too(tmp_path: Path) -> None:
    import guideloom as gl

    with gl.DocumentStorage(tmp_path, max_shard_records=1).sync_writer() as writer:
        writer.append(0, "first shard is real")
    os.mkfifo(tmp_path / "shard-000001.glm")
    results = run_child(tmp_path, tmp_path / "shard-000001.glm")
    refused = {c for c, o in results.items() if o["raised"] == "RefusedFileError"}
    # The pickled documents are not streams: stream storages refuse the first shard's kind
    # before they reach the FIFO; every document reader reaches it and refuses it.
    assert {c for c in results if "Stream" not in c and "open_shard" not in c} <= refused


def test_dataset_roots_refuse_a_fifo_the_same_way(local_root: Path) -> None:
    import guideloom as gl

    shard = gl.write_shard(["a", "b"], local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    path = local_root / shard.key
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(gl.RefusedFileError) as caught:
        gl.open(local_root)[0]
    assert isinstance(caught.value, gl.StorageError)
    assert caught.value.path is not None and caught.value.path.endswith(shard.key)
