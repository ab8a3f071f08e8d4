"""Every failure is a guideloom exception of the right kind, with the object at fault."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import guideloom as gl


def publish_small(root: Path, n: int = 5) -> gl.ShardRef:
    shard = gl.write_shard([{"i": i} for i in range(n)], root, work_id="w")
    gl.publish(root, [shard], dataset_id="d", snapshot_id="s")
    return shard


# The documented hierarchy (docs/python.md, "Exceptions"): every class and its direct bases.
DOCUMENTED_BASES: dict[str, tuple[str, ...]] = {
    "GuideloomError": ("Exception",),
    "NotFoundError": ("GuideloomError", "FileNotFoundError"),
    "IndexOutOfRangeError": ("GuideloomError", "IndexError"),
    "InvalidArgumentError": ("GuideloomError", "ValueError"),
    "EncodeError": ("GuideloomError", "ValueError"),
    "DecodeError": ("GuideloomError", "ValueError"),
    "SchemaError": ("GuideloomError", "ValueError"),
    "CountMismatchError": ("GuideloomError", "ValueError"),
    "PublicationCollisionError": ("GuideloomError",),
    "ShardExistsError": ("GuideloomError", "FileExistsError"),
    "StorageError": ("GuideloomError",),
    "TooLargeError": ("StorageError",),
    "RefusedFileError": ("StorageError",),
    "ConcurrentUpdateError": ("StorageError",),
    "CorruptShardError": ("GuideloomError",),
    "CorruptObjectError": ("GuideloomError",),
    "VerificationError": ("GuideloomError",),
    "FormatMismatchError": ("GuideloomError",),
    "DatasetMismatchError": ("GuideloomError",),
    "ReadOnlyRootError": ("GuideloomError",),
    "UnsupportedError": ("GuideloomError",),
    "InternalError": ("GuideloomError",),
}


def documented_table() -> dict[str, tuple[str, ...]]:
    """The rows of docs/python.md's hierarchy table: `| `Class` | `Base`, `Base` | ...`."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "python.md"
    text = docs.read_text().split("<!-- exception hierarchy -->")[1]
    rows: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            if rows:
                break
            continue
        rows[cells[0].strip("`")] = tuple(b.strip().strip("`") for b in cells[1].split(","))
    return rows


def test_the_whole_documented_hierarchy_holds() -> None:
    import builtins

    from guideloom import exceptions

    def cls(name: str) -> type[BaseException]:
        found = getattr(exceptions, name, None) or getattr(builtins, name)
        assert isinstance(found, type) and issubclass(found, BaseException), name
        return found

    assert documented_table() == DOCUMENTED_BASES
    assert sorted(exceptions.__all__) == sorted(DOCUMENTED_BASES)
    for name, bases in DOCUMENTED_BASES.items():
        assert cls(name).__bases__ == tuple(cls(b) for b in bases), name
        # The same class under the package's name.
        assert getattr(gl, name) is cls(name)
    # The relations callers rely on, spelled out.
    assert issubclass(gl.TooLargeError, gl.StorageError)
    assert issubclass(gl.RefusedFileError, gl.StorageError)
    assert issubclass(gl.ConcurrentUpdateError, gl.StorageError)
    assert issubclass(gl.NotFoundError, FileNotFoundError)
    assert issubclass(gl.IndexOutOfRangeError, IndexError)


def test_missing_root_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        gl.open(tmp_path / "nothing here")
    assert isinstance(caught.value, gl.NotFoundError)
    assert caught.value.key is not None
    # The message and the `root` attribute name the root, not only the key within it.
    assert str(tmp_path / "nothing here") in str(caught.value)
    assert caught.value.root is not None and "nothing here" in caught.value.root


def test_missing_snapshot(local_root: Path) -> None:
    publish_small(local_root)
    with pytest.raises(gl.NotFoundError) as caught:
        gl.open(local_root, snapshot="no-such-snapshot")
    assert "no-such-snapshot" in str(caught.value)


def test_index_past_the_end(local_root: Path) -> None:
    publish_small(local_root, 5)
    ds = gl.open(local_root)
    for bad in (5, -6, 2**62):
        with pytest.raises(IndexError) as caught:
            ds[bad]
        assert isinstance(caught.value, gl.IndexOutOfRangeError)
        assert caught.value.len == 5
    with pytest.raises(gl.IndexOutOfRangeError):
        ds.get_many([0, 5])


def test_bad_arguments(local_root: Path) -> None:
    shard = publish_small(local_root)
    with pytest.raises(ValueError):
        gl.publish(local_root, [shard], dataset_id="d", snapshot_id="x", mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gl.write_shard([1], local_root, work_id="bad/name")
    with pytest.raises(ValueError):
        gl.write_shard([1], local_root, work_id="w", format="yaml")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gl.S3Options(addressing_style="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gl.open("s3://")
    with pytest.raises(TypeError):
        gl.write_shard([object()], local_root, work_id="w", shard=3)
    with pytest.raises(TypeError):
        gl.write_shard(["text"], local_root, work_id="w", shard=4, format="raw")
    with pytest.raises(TypeError):
        gl.open(local_root)["0"]  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        gl.write_shard(5, local_root, work_id="w", shard=6)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gl.write_shard([2**64], local_root, work_id="w", shard=7)
    nested: list[Any] = []
    nested.append(nested)
    with pytest.raises(ValueError):
        gl.write_shard([nested], local_root, work_id="w", shard=8)


def test_an_error_raised_by_the_records_iterator_passes_through(local_root: Path) -> None:
    def records() -> Any:
        yield {"ok": 1}
        raise KeyError("from the caller")

    with pytest.raises(KeyError, match="from the caller"):
        gl.write_shard(records(), local_root, work_id="w", shard=9)
    # Nothing was written under the key.
    assert not (local_root / "shards" / "w" / "00000009.glm").exists()


def test_publication_collision(local_root: Path) -> None:
    publish_small(local_root)
    with pytest.raises(gl.PublicationCollisionError) as caught:
        gl.write_shard([{"other": True}], local_root, work_id="w")
    assert caught.value.key == "shards/w/00000000.glm"
    assert "shards/w/00000000.glm" in str(caught.value)
    # Identical bytes are not a collision.
    gl.write_shard([{"i": i} for i in range(5)], local_root, work_id="w")


def test_corrupt_shard(local_root: Path) -> None:
    shard = publish_small(local_root)
    path = local_root / shard.key
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the footer's last byte
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    with pytest.raises(gl.CorruptShardError) as caught:
        gl.open(local_root)[0]
    assert caught.value.key == shard.key


def test_damaged_record_is_corrupt(local_root: Path) -> None:
    shard = gl.write_shard([b"A" * 64] * 4, local_root, work_id="w", format="raw")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    path = local_root / shard.key
    data = bytearray(path.read_bytes())
    where = data.find(b"A" * 64)
    data[where + 3] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    ds = gl.open(local_root)
    with pytest.raises(gl.CorruptShardError):
        ds[0]
    assert bytes(ds[1]) == b"A" * 64


def test_dataset_mismatch(local_root: Path) -> None:
    shard = publish_small(local_root)
    with pytest.raises(gl.DatasetMismatchError):
        gl.publish(local_root, [shard], dataset_id="another", snapshot_id="s2")


def test_decode_error_when_the_format_is_forced_wrong(local_root: Path) -> None:
    shard = gl.write_shard([b"\xff\xff"], local_root, work_id="w", format="raw")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    with pytest.raises(gl.DecodeError):
        gl.open(local_root, format="cbor")[0]
