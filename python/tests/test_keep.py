"""Retention, garbage collection and tags from Python (`gl.gc`, `Root.gc/tag/tags/...`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import guideloom as gl


def _publish(root: Path, snapshot: str, work: str) -> None:
    ref = gl.write_shard([f"{work}:{i}".encode() for i in range(4)], str(root), work_id=work)
    gl.publish(str(root), [ref], dataset_id="d", snapshot_id=snapshot)


def test_gc_expires_superseded_snapshots_and_tags_keep_theirs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for i in range(3):
        _publish(root, f"s{i}", f"w{i}")
    gl.write_shard([b"never published"], str(root), work_id="failed")
    r = gl.Root(str(root))
    assert r.tag("prod", "s0") is None
    assert r.tags() == {"prod": "s0"}
    dry = gl.gc(str(root), grace=0, dry_run=True)
    assert dry["dry_run"] and dry["expired"] == ["s1"]
    done = gl.gc(str(root), grace=0)
    assert done["expired"] == ["s1"]
    assert sorted(k for k, _ in done["deleted"]) == sorted(k for k, _ in dry["deleted"])
    assert done["bytes"] == sum(b for _, b in done["deleted"]) > 0
    assert not (root / "shards" / "w1").exists() or not list((root / "shards" / "w1").iterdir())
    assert not list((root / "shards" / "failed").glob("*.glm"))
    assert r.expired() == ["s1"]
    # The tag opens like an id; the latest and the tagged snapshot read whole.
    assert gl.open(str(root), snapshot="prod")[3] == b"w0:3"
    assert gl.open(str(root))[0] == b"w2:0"
    with pytest.raises(gl.NotFoundError):
        r.tag("eval", "s1")
    assert r.untag("prod") == "s0"
    storage = r.storage()
    assert storage["live_bytes"] > 0
    assert {s["snapshot_id"]: s["expired"] for s in storage["snapshots"]} == {
        "s0": False,
        "s1": True,
        "s2": False,
    }
    # Untagged, s0 would expire under the default policy (keep the latest only).
    assert [s["expires"] for s in storage["snapshots"]] == [True, False, False]
    with pytest.raises(gl.InvalidArgumentError):
        gl.gc(str(root), grace=-1)
