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
    records: list[object] = [_png(), "<script>alert(1)</script>", {"caption": "é <b>"}]
    ref = gl.write_shard(records, root, work_id="w")
    gl.publish(root, [ref], dataset_id="d", snapshot_id="s1")
    ds = gl.open(root)
    html = ds._repr_html_()
    assert "s1" in html and "3 record(s)" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "data:image/png;base64," in html
    shown = ds.show(0)
    assert isinstance(shown, gl.RecordHtml)
    assert shown._repr_html_() == shown.html
    assert shown.html.startswith('<div class="guideloom">') and "<img" in shown.html
    last = ds.show(-1).html
    assert "é &lt;b&gt;" in last and "caption" in last
    with pytest.raises(IndexError):
        ds.show(3)


def test_compaction_keeps_every_record_and_cards_are_versioned(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    for i in range(6):
        ref = gl.write_shard([f"{i}:{j}".encode() for j in range(5)], root, work_id=f"w{i}")
        gl.publish(root, [ref], dataset_id="d", snapshot_id=f"a{i}", mode="append" if i else "full")
    before = list(gl.open(root))
    r = gl.Root(root)
    done = r.compact("c1")
    assert done["snapshot_id"] == "c1" and done["output_shards"] == 1 and done["records"] == 30
    assert list(gl.open(root)) == before
    gone = r.gc(grace=0)
    assert len([k for k, _ in gone["deleted"] if k.endswith(".glm")]) == 6
    assert list(gl.open(root)) == before
    assert r.card() is None
    r.write_card("c1", "# Six batches\n", licence="MIT", splits={"train": "0..20", "all": "c1"})
    card = r.card()
    assert card is not None and card["snapshot_id"] == "c1" and card["licence"] == "MIT"
    assert card["splits"] == {"all": "c1", "train": "0..20"}
    with pytest.raises(gl.PublicationCollisionError):
        r.write_card("c1", "# Another text\n")
