"""`guideloom.Root`: a root whose store is resolved once, with the root's operations as
methods, on a local disk and on S3 (moto and Ceph RGW); the module-level functions are a
`Root` of one call (same arguments, same behaviour); the Rust-aligned names of the IO
backends; the class-style rule of docs/python.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import guideloom as gl
import guideloom.io
import guideloom.storage
from conftest import S3Root
from guideloom.storage import ArrayRecordShardStore, EphemeralFileStaging, S3ObjectStore
from test_s3_storage import write_profile


def captions(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"caption {i}"} for i in range(start, start + n)]


def exercise(root: gl.Root, **store: Any) -> None:
    """Every method of `root`, on a fresh root built with the store arguments `store`."""
    with pytest.raises(gl.NotFoundError):
        root.latest()
    assert root.snapshots() == []
    first = root.write_shard(iter(captions(10)), work_id="w", shard=0)
    assert (first.key, first.record_count) == ("shards/w/00000000.glm", 10)
    v1 = root.publish([first], dataset_id="d", snapshot_id="v1")
    assert (v1.id, v1.total_records, v1.outcome) == ("v1", 10, "committed")
    again = root.publish([first], dataset_id="d", snapshot_id="v1")
    assert again.outcome == "already_published"
    second = root.write_shard(captions(5, start=10), work_id="w", shard=1, format="pickle")
    v2 = root.publish([second], dataset_id="d", snapshot_id="v2", mode="append")
    assert v2.total_records == 15
    assert (root.latest().id, root.latest().outcome) == ("v2", None)
    assert root.snapshot("v1").total_records == 10
    assert [s.id for s in root.snapshots()] == ["v1", "v2"]
    with pytest.raises(gl.NotFoundError):
        root.snapshot("v9")

    old = root.open(snapshot="v1")
    assert (len(old), old.snapshot_id, old[3]) == (10, "v1", captions(10)[3])
    root.publish_annotations("len", "1", (len(str(c)) for c in captions(15)))
    ds = root.open(format="cbor")
    assert (len(ds), ds.snapshot_id) == (15, "v2")
    assert ds.annotation("len", 14) == len(str(captions(15)[14]))
    root.publish_annotations("flag", "1", [True] * 10, snapshot="v1")
    assert root.open(snapshot="v1").annotations("flag") == [True] * 10

    # ArrayRecord shards under the same root: written by a Root whose shard store says so,
    # then adopted by this one.
    ar = gl.Root(root.uri, shard_store=ArrayRecordShardStore(), **store)
    written = ar.write_shard([b"x" * i for i in range(1, 6)], work_id="ar")
    assert written.key == "shards/ar/00000000.array_record"
    adopted = root.adopt_array_record(written.key)
    assert (adopted.key, adopted.record_count, adopted.size) == (written.key, 5, written.size)
    root.publish([adopted], dataset_id="d", snapshot_id="ar")
    assert [bytes(r) for r in ar.open(snapshot="ar")] == [b"x" * i for i in range(1, 6)]


def test_every_method_on_a_local_root(local_root: Path) -> None:
    root = gl.Root(local_root)
    assert root.uri == str(local_root) and root.shard_store is None
    assert str(local_root) in repr(root)
    exercise(root)
    # What the module-level functions see is the same root.
    assert len(gl.open(local_root, snapshot="v2")) == 15


def test_every_method_on_an_s3_root(s3_root: S3Root) -> None:
    root = gl.Root(s3_root.uri, s3=s3_root.options)
    exercise(root, s3=s3_root.options)
    assert len(gl.open(s3_root.uri, s3=s3_root.options, snapshot="v2")) == 15


def test_the_store_is_resolved_once_not_per_call(
    s3_root: S3Root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Credentials from a profile this test controls: once it is gone, only a root whose store
    # resolved them at construction can still sign requests (as an S3ObjectStore can).
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    region = s3_root.options.region_name or "us-east-1"
    write_profile(tmp_path, "once", region)
    options = gl.S3Options(
        endpoint_url=s3_root.options.endpoint_url, allow_http=True, profile_name="once"
    )
    root = gl.Root(s3_root.uri, s3=options)
    shard = root.write_shard(captions(4), work_id="w")
    root.publish([shard], dataset_id="d", snapshot_id="s1")

    write_profile(tmp_path, "another", region)  # the profile "once" no longer exists
    with pytest.raises(gl.InvalidArgumentError, match="once"):
        gl.open(s3_root.uri, s3=options)  # a call of its own resolves it again, and fails
    assert root.open()[2] == captions(4)[2]
    more = root.write_shard(captions(2, start=4), work_id="w", shard=1)
    assert root.publish([more], dataset_id="d", snapshot_id="s2", mode="append").total_records == 6
    root.publish_annotations("n", "1", range(6))
    assert root.open().annotations("n") == list(range(6))


def test_the_constructor_checks_the_store_arguments_as_the_functions_do(
    s3_root: S3Root, tmp_path: Path
) -> None:
    store = S3ObjectStore(options=s3_root.options)
    with pytest.raises(gl.InvalidArgumentError, match="s3://"):
        gl.Root(tmp_path, object_store=store)
    with pytest.raises(gl.InvalidArgumentError, match="either s3= or object_store="):
        gl.Root(s3_root.uri, object_store=store, s3=s3_root.options)
    with pytest.raises(gl.InvalidArgumentError, match="mount"):
        gl.Root(s3_root.uri, object_store=store, mount=True)
    with pytest.raises(TypeError):
        gl.Root(tmp_path, shard_store="array_record")  # type: ignore[arg-type]
    root = gl.Root(s3_root.uri, object_store=store)
    shard = root.write_shard([1, 2, 3], work_id="w")
    root.publish([shard], dataset_id="d", snapshot_id="s")
    assert list(gl.open(s3_root.uri, object_store=store)) == [1, 2, 3]


def test_a_staging_root_reads_through_its_staging_and_writes_native_shards(
    s3_root: S3Root,
) -> None:
    store = S3ObjectStore(options=s3_root.options)
    staging = EphemeralFileStaging(objects=store)
    root = gl.Root(s3_root.uri, object_store=store, shard_store=staging)
    assert root.shard_store is staging
    # The module-level write_shard refuses a staging (it stages reads)...
    with pytest.raises(gl.InvalidArgumentError, match="open"):
        gl.write_shard([1], s3_root.uri, work_id="w", object_store=store, shard_store=staging)  # type: ignore[arg-type]
    # ...a Root holding one writes native shards and reads through it.
    shard = root.write_shard(captions(3), work_id="w")
    assert shard.key.endswith(".glm")
    root.publish([shard], dataset_id="d", snapshot_id="s")
    assert list(root.open()) == captions(3)


def test_module_functions_and_methods_raise_the_same_errors(local_root: Path) -> None:
    root = gl.Root(local_root)
    with pytest.raises(gl.InvalidArgumentError, match="mode"):
        root.publish([], dataset_id="d", snapshot_id="s", mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(gl.InvalidArgumentError, match="mode"):
        gl.publish(local_root, [], dataset_id="d", snapshot_id="s", mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(gl.InvalidArgumentError, match="record format"):
        root.write_shard([1], work_id="w", format="yaml")  # type: ignore[arg-type]
    with pytest.raises(ZeroDivisionError):
        root.write_shard((1 // 0 for _ in range(1)), work_id="w")
    assert not (local_root / "shards" / "w").exists() or not any(
        (local_root / "shards" / "w").iterdir()
    )
    with pytest.raises(gl.ReadOnlyRootError):
        gl.Root("http://127.0.0.1:9/x/").write_shard([1], work_id="w")


def test_a_root_keeps_working_in_a_forked_child(local_root: Path) -> None:
    root = gl.Root(local_root)
    root.publish([root.write_shard(captions(3), work_id="w")], dataset_id="d", snapshot_id="s")
    assert root.open()[0] == captions(1)[0]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            shard = root.write_shard(captions(2), work_id="child")
            root.publish([shard], dataset_id="d", snapshot_id="t", mode="append")
            os._exit(0 if len(root.open()) == 5 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(root.open()) == 5


# --- names -----------------------------------------------------------------------------


def test_the_rust_names_of_the_io_backends_are_the_same_classes(tmp_path: Path) -> None:
    assert guideloom.io.SeekIo is guideloom.io.SeekIO
    assert guideloom.io.PreadIo is guideloom.io.PosixPreadIO
    assert guideloom.io.MmapIo is guideloom.io.MmapIO
    assert guideloom.io.HttpIo is guideloom.io.HttpIO
    storage = gl.DocumentStorage(tmp_path, read_interface=guideloom.io.MmapIo())
    with storage.sync_writer() as writer:
        writer.push({"a": 1})
    with storage.sync_reader() as reader:
        assert reader[0] == {"a": 1}
    assert isinstance(guideloom.io.PreadIo(), guideloom.io.PosixPreadIO)


# --- the class-style rule (docs/python.md) -------------------------------------------------

HANDLES = [gl.Root, gl.Dataset, gl.DocumentStorage, gl.EpochPlan, S3ObjectStore]
OPTIONS = [
    gl.S3Options(),
    gl.StorageOptions(),
    gl.PublicationOptions(),
    gl.CborFormat(),
    guideloom.io.SeekIO(),
    EphemeralFileStaging(objects=S3ObjectStore()),
    ArrayRecordShardStore(),
]


@pytest.mark.parametrize("cls", HANDLES, ids=lambda c: c.__name__)
def test_rust_classes_are_final(cls: type) -> None:
    assert cls.__module__ == "guideloom._guideloom"
    with pytest.raises(TypeError):
        type("Sub", (cls,), {})


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: type(o).__name__)
def test_options_are_immutable_and_keyword_only(options: object) -> None:
    with pytest.raises(AttributeError):
        options.anything = 1  # type: ignore[attr-defined]
    name = type(options).__name__
    assert repr(options).startswith(name)


def test_every_public_name_is_reachable_from_its_module() -> None:
    for name in gl.__all__:
        assert getattr(gl, name) is not None, name
    for name in guideloom.storage.__all__:
        assert getattr(guideloom.storage, name) is not None, name
