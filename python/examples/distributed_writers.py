"""Writers on a distributed engine: a Dask cluster writes the shards, one `publish` commits.

Each task writes one shard with `gl.write_shard` under its own work id (`part-00000`, ...);
the tasks run on the cluster's worker processes and hand their `ShardRef`s back (they pickle);
then the client publishes them all as one snapshot. A task that dies mid-write leaves no
shard under its final key (the write is create-only and appears whole or not at all), and
nothing is visible to readers before `publish`.

    [GUIDELOOM_EXAMPLE_ROOT=ROOT] python python/examples/distributed_writers.py

ROOT is a local directory, `file://`, or `s3://bucket/prefix`. Without it: an `s3://` root on
the test S3 server when `GUIDELOOM_S3_ENDPOINT` and `GUIDELOOM_S3_BUCKET` are set (as after
`source .xtask/servers/up/env.sh`), else a temporary directory.
"""

from __future__ import annotations

import os
import uuid
from tempfile import TemporaryDirectory
from typing import Any

import guideloom as gl

TASKS = 8
RECORDS_PER_TASK = 500


def s3_options() -> gl.S3Options | None:
    """S3 options for the test server, when its environment is set."""
    endpoint = os.environ.get("GUIDELOOM_S3_ENDPOINT")
    if not endpoint:
        return None
    return gl.S3Options(
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        allow_http=True,
    )


def options_state(s3: gl.S3Options | None) -> dict[str, Any] | None:
    """`S3Options` as plain keyword arguments, to send to the workers (the object itself does
    not pickle)."""
    if s3 is None:
        return None
    return {
        "region_name": s3.region_name,
        "endpoint_url": s3.endpoint_url,
        "addressing_style": s3.addressing_style,
        "profile_name": s3.profile_name,
        "allow_http": s3.allow_http,
    }


def write_part(root: str, part: int, count: int, s3: dict[str, Any] | None) -> gl.ShardRef:
    """One task: records `part * count ..` as shard 0 of work id `part-NNNNN`."""
    records = (
        {"part": part, "i": part * count + i, "text": f"record {i} of part {part}"}
        for i in range(count)
    )
    options = gl.S3Options(**s3) if s3 is not None else None
    return gl.write_shard(records, root, work_id=f"part-{part:05d}", s3=options)


def main(
    root: str, s3: gl.S3Options | None, *, workers: int = 2, tasks: int = TASKS
) -> gl.Snapshot:
    from dask.distributed import Client, LocalCluster

    # Worker processes (not threads), listening on the loopback interface only.
    with (
        LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,  # type: ignore[no-untyped-call]
    ):
        futures = [
            client.submit(write_part, root, part, RECORDS_PER_TASK, options_state(s3), pure=False)
            for part in range(tasks)
        ]
        shards: list[gl.ShardRef] = client.gather(futures)
    snapshot = gl.publish(
        root, shards, dataset_id="distributed", snapshot_id=f"run-{uuid.uuid4().hex[:8]}", s3=s3
    )

    dataset = gl.open(root, s3=s3)
    assert len(dataset) == snapshot.total_records == tasks * RECORDS_PER_TASK
    assert sorted(r["i"] for r in dataset) == list(range(tasks * RECORDS_PER_TASK))
    print(
        f"{len(shards)} shards from {workers} Dask workers: {snapshot.total_records} records in {root}"
    )
    return snapshot


if __name__ == "__main__":
    # The root comes from the environment, not sys.argv: the example tests run this file with
    # runpy, where sys.argv holds pytest's arguments.
    if root := os.environ.get("GUIDELOOM_EXAMPLE_ROOT"):
        main(root, s3_options() if root.startswith("s3://") else None)
    elif os.environ.get("GUIDELOOM_S3_ENDPOINT") and os.environ.get("GUIDELOOM_S3_BUCKET"):
        main(f"s3://{os.environ['GUIDELOOM_S3_BUCKET']}/example-{uuid.uuid4().hex}", s3_options())
    else:
        with TemporaryDirectory() as tmp:
            main(os.path.join(tmp, "root"), None)
