"""Writers on a Dask `distributed` cluster (2 worker processes) into an s3:// root on moto.

N tasks with distinct work ids run `write_shard` on the workers, one `publish` on the client
makes one snapshot holding every record; a worker killed in the middle of a write leaves no
object under that shard's key. dask comes from the venv `cargo xtask ci` builds.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import guideloom as gl
from conftest import S3Root

try:
    import dask
    from distributed import Client, KilledWorker, LocalCluster
except ImportError:
    if os.environ.get("GUIDELOOM_CI") == "1":
        raise
    pytest.skip("skipped: dask[distributed] is not installed", allow_module_level=True)

TIMEOUT_S = 120


def s3_state(options: gl.S3Options) -> dict[str, Any]:
    return {
        "region_name": options.region_name,
        "endpoint_url": options.endpoint_url,
        "addressing_style": options.addressing_style,
        "profile_name": options.profile_name,
        "allow_http": options.allow_http,
    }


def write_part(root: str, part: int, count: int, s3: dict[str, Any]) -> tuple[int, gl.ShardRef]:
    records = ({"part": part, "i": part * count + i} for i in range(count))
    return os.getpid(), gl.write_shard(records, root, work_id=f"part-{part}", s3=gl.S3Options(**s3))


def slow_write(root: str, s3: dict[str, Any], marker: str, count: int) -> gl.ShardRef:
    """A large write that announces its process id half-way and then slows down."""

    def records() -> Iterator[dict[str, Any]]:
        for i in range(count):
            if i == count // 10:
                Path(marker).write_text(str(os.getpid()))
            if i >= count // 10:
                time.sleep(0.01)
            yield {"i": i, "pad": os.urandom(64 * 1024)}

    return gl.write_shard(records(), root, work_id="killed", s3=gl.S3Options(**s3))


def cluster() -> LocalCluster:
    return LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )


def keys(root: S3Root) -> list[str]:
    """Every object under the root, listed with boto3 (the moto server's own view)."""
    import boto3

    bucket, _, prefix = root.uri.removeprefix("s3://").partition("/")
    client = boto3.client(
        "s3", endpoint_url=root.options.endpoint_url, region_name=root.options.region_name
    )
    found: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix + "/"
    ):
        found.extend(item["Key"].removeprefix(prefix + "/") for item in page.get("Contents", []))
    return found


def test_dask_workers_write_shards_and_one_publish_holds_every_record(s3_root: S3Root) -> None:
    tasks, count = 6, 200
    with cluster() as c, Client(c) as client:  # type: ignore[no-untyped-call]
        futures = [
            client.submit(
                write_part, s3_root.uri, part, count, s3_state(s3_root.options), pure=False
            )
            for part in range(tasks)
        ]
        results: list[tuple[int, gl.ShardRef]] = client.gather(futures)
    assert os.getpid() not in {pid for pid, _ in results}  # written in the workers' processes
    assert sorted(k for k in keys(s3_root) if k.startswith("shards/")) == sorted(
        ref.key for _, ref in results
    )
    with pytest.raises(gl.NotFoundError):
        gl.open(s3_root.uri, s3=s3_root.options)  # nothing is visible before publish
    snapshot = gl.publish(
        s3_root.uri,
        [ref for _, ref in results],
        dataset_id="d",
        snapshot_id="s",
        s3=s3_root.options,
    )
    assert snapshot.total_records == tasks * count
    assert sorted(s.key for s in snapshot.shards) == sorted(ref.key for _, ref in results)
    assert len({s.key.split("/")[1] for s in snapshot.shards}) == tasks  # one work id each
    ds = gl.open(s3_root.uri, s3=s3_root.options)
    assert sorted(r["i"] for r in ds) == list(range(tasks * count))


def test_a_worker_killed_mid_write_leaves_nothing_under_a_final_name(
    s3_root: S3Root, tmp_path: Path
) -> None:
    marker = tmp_path / "writing"
    state = s3_state(s3_root.options)
    # The scheduler must not retry the task on the other worker once its worker dies.
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        cluster() as c,
        Client(c) as client,  # type: ignore[no-untyped-call]
    ):
        survivor = client.submit(write_part, s3_root.uri, 0, 100, state, pure=False).result(
            timeout=TIMEOUT_S
        )
        doomed = client.submit(slow_write, s3_root.uri, state, str(marker), 500, pure=False)
        deadline = time.monotonic() + TIMEOUT_S
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline, "the large write never started"
            assert not doomed.done(), doomed
            time.sleep(0.01)
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the worker process, mid-write
        with pytest.raises(KilledWorker):
            doomed.result(timeout=TIMEOUT_S)
    left = keys(s3_root)
    assert not [k for k in left if k.startswith("shards/killed")], left
    _, ref = survivor
    assert [k for k in left if k.startswith("shards/")] == [ref.key]
    # The survivor publishes alone; the killed work id can be written again from scratch.
    assert (
        gl.publish(
            s3_root.uri, [ref], dataset_id="d", snapshot_id="s", s3=s3_root.options
        ).total_records
        == 100
    )
    again = gl.write_shard(
        ({"i": i} for i in range(3)), s3_root.uri, work_id="killed", s3=s3_root.options
    )
    assert again.record_count == 3


def test_shard_refs_pickle(s3_root: S3Root) -> None:
    import pickle

    ref = gl.write_shard([{"i": 1}], s3_root.uri, work_id="p", s3=s3_root.options)
    back = pickle.loads(pickle.dumps(ref))
    assert (back.key, back.size, back.record_count) == (ref.key, ref.size, ref.record_count)
    gl.publish(s3_root.uri, [back], dataset_id="d", snapshot_id="s", s3=s3_root.options)
    with pytest.raises(gl.InvalidArgumentError):
        gl.ShardRef._from_json("{}")
