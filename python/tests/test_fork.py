"""A child forked after the parent has read (the runtime started) reads too, and does not hang."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import guideloom as gl
from conftest import S3Root

TIMEOUT_S = 60.0


def read_in_child(ds: gl.Dataset, indices: list[int]) -> list[object]:
    """Forks; the child reads `indices` and reports through a pipe. Kills a hung child."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_fd)
            got = [ds[i] for i in indices] + ds.get_many(indices)
            os.write(write_fd, repr(got).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child did not finish reading within {TIMEOUT_S} s")
        time.sleep(0.02)
    with os.fdopen(read_fd, "rb") as pipe:
        output = pipe.read().decode()
    assert os.waitstatus_to_exitcode(status) == 0, output
    return list(eval(output))  # our own repr of JSON-like values


def test_forked_child_reads_a_local_root(local_root: Path) -> None:
    shard = gl.write_shard([{"i": i} for i in range(100)], local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    ds = gl.open(local_root)
    assert ds[3] == {"i": 3}  # the parent's runtime is running now
    got = read_in_child(ds, [7, 99])
    assert got == [{"i": 7}, {"i": 99}, {"i": 7}, {"i": 99}]
    # The parent still reads after the child is gone.
    assert ds.get_many([1, 2]) == [{"i": 1}, {"i": 2}]
    # A dataset opened in the parent after the fork keeps working too.
    assert list(gl.open(local_root))[-1] == {"i": 99}


def test_forked_child_keeps_the_parents_snapshot_without_a_request(local_root: Path) -> None:
    """A child (a DataLoader worker) reads the snapshot its parent opened without reading
    the root's log or manifest again: with them gone from the root, it still reads."""
    shard = gl.write_shard([{"i": i} for i in range(50)], local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    ds = gl.open(local_root)
    assert len(ds) == 50
    control = [p for p in local_root.iterdir() if p.name != "shards"]
    assert control, "the root has control objects beside its shards"
    for path in control:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    with pytest.raises(gl.GuideloomError):
        gl.open(local_root)  # a fresh open needs them
    assert read_in_child(ds, [0, 49]) == [{"i": 0}, {"i": 49}, {"i": 0}, {"i": 49}]


def test_forked_child_reads_an_s3_root(s3_root: S3Root) -> None:
    shard = gl.write_shard(
        [{"i": i} for i in range(10)], s3_root.uri, work_id="w", s3=s3_root.options
    )
    gl.publish(s3_root.uri, [shard], dataset_id="d", snapshot_id="s", s3=s3_root.options)
    ds = gl.open(s3_root.uri, s3=s3_root.options)
    assert ds[0] == {"i": 0}
    assert read_in_child(ds, [9]) == [{"i": 9}, {"i": 9}]
    assert ds[5] == {"i": 5}
