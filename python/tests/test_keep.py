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


def _png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes([x * 40, 255 - x * 40, 128]) * 4 for x in range(4))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_notebooks_render_datasets_and_records_as_escaped_html(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    records = [_png(), b"<script>alert(1)</script>", "caption é".encode()]
    ref = gl.write_shard(records, root, work_id="w")
    gl.publish(root, [ref], dataset_id="d", snapshot_id='s"1')
    ds = gl.open(root)
    html = ds._repr_html_()
    assert "s&quot;1" in html and "3 record(s)" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "data:image/png;base64," in html
    shown = ds.show(0)
    assert isinstance(shown, gl.RecordHtml)
    assert shown._repr_html_() == shown.html
    assert shown.html.startswith('<div class="guideloom">') and "<img" in shown.html
    assert "caption é" in ds.show(-1).html
    with pytest.raises(IndexError):
        ds.show(3)
