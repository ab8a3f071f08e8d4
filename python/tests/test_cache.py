"""`gl.open(..., cache_dir=..., cache_bytes=...)` and `Root.open(cache_dir=...)`: the shared
node cache of a remote root (docs/cache.md). An `http://` root served by nginx is read once with the cache on; its shard
files are then removed from the origin, and a second reader with the same cache directory
still reads every record (so it made no shard request), while one without it fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import guideloom as gl
from conftest import HttpRoot

RECORDS = 90


def publish(directory: Path) -> list[dict[str, object]]:
    records: list[dict[str, object]] = [{"i": i, "pad": "x" * (i % 13)} for i in range(RECORDS)]
    shards = [
        gl.write_shard(records[n * 30 : n * 30 + 30], directory, work_id="w", shard=n)
        for n in range(3)
    ]
    gl.publish(directory, shards, dataset_id="d", snapshot_id="s")
    return records


def test_a_second_reader_needs_no_shard_from_the_origin(
    http_root: HttpRoot, tmp_path: Path
) -> None:
    records = publish(http_root.directory)
    cache = tmp_path / "cache"
    first = gl.open(http_root.url, cache_dir=cache, cache_bytes=64 << 20)
    # Opening learns the record format from shard 0's footer: nothing is filled yet.
    entries = cache / "v1" / "entries"
    assert not entries.exists() or not list(entries.iterdir())
    assert [first[i] for i in range(RECORDS)] == records
    assert len(list((cache / "v1" / "entries").iterdir())) == 3
    del first

    shutil.rmtree(http_root.directory / "shards")
    second = gl.open(http_root.url, cache_dir=str(cache))
    assert second.get_many(list(range(RECORDS))) == records
    with pytest.raises(gl.GuideloomError):
        gl.open(http_root.url)[0]


def test_cache_bytes_needs_a_directory(tmp_path: Path) -> None:
    publish(tmp_path / "root")
    with pytest.raises(ValueError, match="cache_dir"):
        gl.open(tmp_path / "root", cache_bytes=1 << 20)
    # A local root is read in place: the cache is for remote roots.
    ds = gl.open(tmp_path / "root", cache_dir=tmp_path / "cache")
    assert ds[5]["i"] == 5
    assert not (tmp_path / "cache").exists()


def test_a_root_opens_through_the_cache(http_root: HttpRoot, tmp_path: Path) -> None:
    """`Root.open(cache_dir=...)` reads through the node cache as `gl.open` does."""
    records = publish(http_root.directory)
    cache = tmp_path / "cache"
    root = gl.Root(http_root.url)
    first = root.open(cache_dir=cache, cache_bytes=64 << 20)
    assert first.get_many(list(range(RECORDS))) == records
    assert len(list((cache / "v1" / "entries").iterdir())) == 3
    del first

    shutil.rmtree(http_root.directory / "shards")
    assert root.open(cache_dir=cache)[RECORDS - 1] == records[-1]
    with pytest.raises(gl.GuideloomError):
        root.open()[0]  # without the cache the shards are gone
    with pytest.raises(ValueError, match="cache_dir"):
        root.open(cache_bytes=1 << 20)


def test_a_swapped_first_shard_fails_the_open_and_fills_nothing(
    http_root: HttpRoot, tmp_path: Path
) -> None:
    """Opening reads shard 0's footer and metadata for the record format (no fill): a shard 0
    replaced behind the server (here by shard 1's bytes) is refused by name, and the cache
    keeps nothing of it."""
    publish(http_root.directory)
    files = sorted((http_root.directory / "shards").rglob("*.glm"))
    assert len(files) == 3
    files[0].write_bytes(files[1].read_bytes())
    cache = tmp_path / "cache"
    with pytest.raises(gl.GuideloomError) as refused:
        gl.open(http_root.url, cache_dir=cache)
    assert isinstance(refused.value, (gl.VerificationError, gl.CorruptShardError)), refused.value
    assert files[0].name in str(refused.value)
    entries = cache / "v1" / "entries"
    assert not entries.exists() or not list(entries.iterdir())
