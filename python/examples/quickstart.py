"""The README's Python quick start: write two shards, publish them, read records back."""

from __future__ import annotations

import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import guideloom as gl


def main(directory: Path) -> None:
    root = directory / "captures"
    records: list[dict[str, Any]] = [{"id": i, "text": f"caption {i}"} for i in range(100)]
    shards = [
        gl.write_shard(records[:60], root, work_id="worker-000", shard=0),
        gl.write_shard(records[60:], root, work_id="worker-000", shard=1),
    ]
    snapshot = gl.publish(root, shards, dataset_id="captures", snapshot_id="run-001")
    gl.publish_annotations(root, "quality", "v1", [i / 100 for i in range(100)])

    dataset = gl.open(root)
    assert len(dataset) == snapshot.total_records == 100
    assert dataset[42] == {"id": 42, "text": "caption 42"}
    batch: list[Any] = dataset.get_many([7, 99, 0])
    assert [r["id"] for r in batch] == [7, 99, 0]
    assert dataset.annotation("quality", 42) == 0.42
    try:
        dataset[100]
    except IndexError as error:  # also a gl.IndexOutOfRangeError
        print(f"as expected: {error}", file=sys.stderr)
    print(f"{len(dataset)} records in snapshot {dataset.snapshot_id}")


if __name__ == "__main__":
    with TemporaryDirectory() as tmp:
        main(Path(tmp))
