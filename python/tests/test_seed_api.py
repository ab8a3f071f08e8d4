"""The names and behaviours the specification's code uses, as it uses them:
`guideloom.storage.backends.s3`, `ArrayRecordShardStore(staging=EphemeralFileStaging(...))`,
`EphemeralFileStaging` without `objects=` (its own default store, and the pitfall that comes
with it), `StorageOptions(max_encoded_shard_bytes=...)`, and object_store's AWS environment
conventions (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`) as the command line follows them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import guideloom as gl
from conftest import S3Root
from guideloom.storage import (
    ArrayRecordShardStore,
    EphemeralFileStaging,
    S3ObjectStore,
    StorageOptions,
)
from test_s3_storage import DEAD_ENDPOINT, needs_proc, staged_files


def test_the_s3_backend_module_names_the_storage_objects() -> None:
    import guideloom.storage
    from guideloom.storage.backends import s3 as backend
    from guideloom.storage.backends.s3 import S3Options, s3_backend

    assert S3Options is guideloom.storage.S3Options is gl.S3Options
    assert s3_backend is guideloom.storage.s3_backend
    assert backend.S3ObjectStore is guideloom.storage.S3ObjectStore
    assert backend.S3Backend is guideloom.storage.S3Backend
    options = S3Options(endpoint_url="http://127.0.0.1:9", allow_http=True)
    assert s3_backend(options).options == options


# --- StorageOptions -----------------------------------------------------------------------


def test_storage_options_set_the_shard_cap_and_its_error_is_a_storage_error(
    local_root: Path,
) -> None:
    assert StorageOptions().max_encoded_shard_bytes == 5 << 30
    assert StorageOptions(max_encoded_shard_bytes=None) == StorageOptions()
    with pytest.raises(gl.InvalidArgumentError, match="max_encoded_shard_bytes"):
        StorageOptions(max_encoded_shard_bytes=-1)
    with pytest.raises(TypeError):
        StorageOptions(max_encoded_shard_bytes=True)
    assert gl.StorageOptions is StorageOptions

    small = StorageOptions(max_encoded_shard_bytes=1000)
    records = [b"x" * 300 for _ in range(10)]
    try:
        gl.write_shard(records, local_root, work_id="w", format="raw", storage_options=small)
    except gl.StorageError as e:  # the seed's contract: the cap's error is a StorageError
        assert isinstance(e, gl.TooLargeError)
        assert "max_encoded_shard_bytes" in str(e) and "1000" in str(e)
        assert e.key == "shards/w/00000000.glm"
    else:
        pytest.fail("a shard above max_encoded_shard_bytes was written")
    assert not (local_root / "shards" / "w").exists() or not any(
        (local_root / "shards" / "w").iterdir()
    )
    # The same records fit under the default cap; publishing them under a smaller cap is
    # refused before anything is published.
    shard = gl.write_shard(records, local_root, work_id="w", format="raw")
    with pytest.raises(gl.TooLargeError):
        gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s", storage_options=small)
    snapshot = gl.publish(
        local_root,
        [shard],
        dataset_id="d",
        snapshot_id="s",
        storage_options=StorageOptions(max_encoded_shard_bytes=shard.size),
    )
    assert snapshot.total_records == 10
    assert len(gl.open(local_root, storage_options=small)) == 10


# --- ArrayRecordShardStore ----------------------------------------------------------------


def test_array_record_shards_are_written_and_read_through_the_shard_store(
    local_root: Path,
) -> None:
    store = ArrayRecordShardStore()
    assert store.staging is None and store.options is None
    values = [f"record {i}".encode() * (i + 1) for i in range(50)]
    shard = gl.write_shard(values, local_root, work_id="w", shard_store=store)
    assert shard.key == "shards/w/00000000.array_record" and shard.record_count == 50
    more = gl.write_shard(
        values[:5],
        local_root,
        work_id="w",
        shard=1,
        shard_store=ArrayRecordShardStore(options="group_size:4,uncompressed"),
    )
    gl.publish(local_root, [shard, more], dataset_id="d", snapshot_id="s")
    ds = gl.open(local_root, shard_store=store)
    assert ds.format == "raw"
    assert [bytes(r) for r in ds] == values + values[:5]
    # The files are the array_record package's format.
    reader_module = pytest.importorskip("array_record.python.array_record_module")
    reader = reader_module.ArrayRecordReader(str(local_root / shard.key))
    assert reader.read_all() == values
    reader.close()


def test_array_record_shards_of_another_format_and_bad_arguments(local_root: Path) -> None:
    values = [{"i": i} for i in range(5)]
    shard = gl.write_shard(
        values, local_root, work_id="a", format="cbor", shard_store=ArrayRecordShardStore()
    )
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    # ArrayRecord files do not name their records' format: the reader says it.
    ds = gl.open(local_root, format="cbor", shard_store=ArrayRecordShardStore())
    assert list(ds) == values
    native = gl.write_shard(values, local_root, work_id="n")
    gl.publish(local_root, [native], dataset_id="d", snapshot_id="s2", mode="append")
    with pytest.raises(gl.FormatMismatchError) as caught:
        gl.open(local_root, shard_store=ArrayRecordShardStore())
    assert caught.value.key == native.key
    with pytest.raises(gl.InvalidArgumentError, match="group_size"):
        ArrayRecordShardStore(options="group_size:zero")
    with pytest.raises(gl.InvalidArgumentError, match="open"):
        gl.write_shard(
            [b"x"],
            local_root,
            work_id="b",
            shard_store=EphemeralFileStaging(objects=S3ObjectStore()),  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError):
        gl.open(local_root, shard_store="array_record")  # type: ignore[arg-type]


@needs_proc
def test_the_seeds_composition_stages_array_record_shards(s3_root: S3Root, tmp_path: Path) -> None:
    store = S3ObjectStore(options=s3_root.options)
    shard_store = ArrayRecordShardStore(
        staging=EphemeralFileStaging(objects=store, directory=tmp_path, max_object_bytes=1 << 30)
    )
    values = [os.urandom(1000) for _ in range(100)]
    shards = [
        gl.write_shard(
            values[:50],
            s3_root.uri,
            work_id="w",
            shard=0,
            object_store=store,
            shard_store=shard_store,
        ),
        gl.write_shard(
            values[50:],
            s3_root.uri,
            work_id="w",
            shard=1,
            object_store=store,
            shard_store=shard_store,
        ),
    ]
    gl.publish(s3_root.uri, shards, dataset_id="d", snapshot_id="s", object_store=store)
    ds = gl.open(s3_root.uri, object_store=store, shard_store=shard_store)
    assert [bytes(r) for r in ds] == values  # in order: each shard staged whole
    staged = staged_files(tmp_path)
    assert len(staged) == 2 and all("(deleted)" in f for f in staged), staged
    # The staging's store serves the root without object_store= too.
    assert bytes(gl.open(s3_root.uri, shard_store=shard_store)[7]) == values[7]


# --- EphemeralFileStaging without objects= ------------------------------------------------


def test_a_staging_without_objects_builds_its_own_store(local_root: Path, tmp_path: Path) -> None:
    staging = EphemeralFileStaging(directory=tmp_path, max_object_bytes=1 << 20)
    assert staging.owns_store and isinstance(staging.objects, S3ObjectStore)
    assert staging.objects is staging.objects  # built once
    assert not EphemeralFileStaging(objects=staging.objects).owns_store
    assert "objects=None" in repr(staging)
    # Only its staging options apply to a root that is not s3://.
    shard = gl.write_shard([1, 2, 3], local_root, work_id="w")
    gl.publish(local_root, [shard], dataset_id="d", snapshot_id="s")
    assert list(gl.open(local_root, shard_store=staging)) == [1, 2, 3]
    # The pitfall, refused where it can be seen: its store is neither another object_store
    # nor one built from s3=.
    mine = S3ObjectStore(options=gl.S3Options(endpoint_url=DEAD_ENDPOINT, allow_http=True))
    with pytest.raises(gl.InvalidArgumentError, match="without objects="):
        gl.open("s3://bucket/prefix", object_store=mine, shard_store=staging)
    with pytest.raises(gl.InvalidArgumentError, match="without objects="):
        gl.open("s3://bucket/prefix", s3=mine.options, shard_store=staging)


# --- the AWS environment --------------------------------------------------------------------


def run_with_env(script: str, env: dict[str, str], *args: str) -> dict[str, object]:
    """Runs `script` in a child process with `env` added (the environment is read by the
    stores a process builds), returning the JSON it prints."""
    environment = {**os.environ, **env}
    for name in ("AWS_ALLOW_HTTP", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT"):
        if name not in env:
            environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


ENV_CHILD = """
    import json, sys
    import guideloom as gl
    from guideloom.storage import EphemeralFileStaging, S3Options, default_registry, s3_backend

    uri, dead = sys.argv[1], sys.argv[2]
    out = {}
    def attempt(name, call):
        try:
            out[name] = {"ok": call()}
        except gl.GuideloomError as e:
            out[name] = {"error": type(e).__name__, "message": str(e)}

    def write_and_read():
        shard = gl.write_shard(["a", "b", "c"], uri, work_id="w")
        gl.publish(uri, [shard], dataset_id="d", snapshot_id="s")
        return list(gl.open(uri))
    attempt("no options", write_and_read)
    attempt("S3Options() defaults", lambda: list(gl.open(uri, s3=S3Options())))
    attempt("staging's own store", lambda: list(gl.open(uri, shard_store=EphemeralFileStaging())))
    # The pitfall: a backend registered for s3:// is not what the staging's own store uses.
    default_registry().register(s3_backend(S3Options(endpoint_url=dead, allow_http=True, retries=1)))
    attempt("registered dead backend", lambda: list(gl.open(uri)))
    attempt("staging's own store ignores the registry",
            lambda: list(gl.open(uri, shard_store=EphemeralFileStaging())))
    print(json.dumps(out))
"""


def test_aws_allow_http_and_the_endpoint_come_from_the_environment(s3_root: S3Root) -> None:
    endpoint = s3_root.options.endpoint_url
    assert endpoint is not None and endpoint.startswith("http://127.0.0.1:")
    out = run_with_env(
        ENV_CHILD,
        {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"},
        s3_root.uri,
        DEAD_ENDPOINT,
    )
    for case in (
        "no options",
        "S3Options() defaults",
        "staging's own store",
        "staging's own store ignores the registry",
    ):
        assert out[case] == {"ok": ["a", "b", "c"]}, (case, out[case])
    dead = out["registered dead backend"]
    assert isinstance(dead, dict) and dead["error"] == "StorageError", dead
    assert DEAD_ENDPOINT.removeprefix("http://") in str(dead["message"]), dead


def test_a_plain_http_endpoint_without_allow_http_names_the_setting(s3_root: S3Root) -> None:
    endpoint = s3_root.options.endpoint_url
    assert endpoint is not None
    out = run_with_env(ENV_CHILD, {"AWS_ENDPOINT_URL": endpoint}, s3_root.uri, DEAD_ENDPOINT)
    refused = out["no options"]
    assert isinstance(refused, dict) and refused["error"] == "InvalidArgumentError", refused
    message = str(refused["message"])
    for part in ("allow_http", "AWS_ALLOW_HTTP", "AWS_ENDPOINT_URL", endpoint, s3_root.bucket):
        assert part in message, (part, message)
    assert "at AWS" not in message and "URL scheme is not allowed" not in message, message


def test_errors_name_the_environments_endpoint_not_aws(tmp_path: Path) -> None:
    script = """
        import json, sys
        import guideloom as gl
        try:
            gl.open("s3://bucket/prefix", s3=gl.S3Options(retries=1))
            print(json.dumps({"ok": True}))
        except gl.GuideloomError as e:
            print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    """
    out = run_with_env(script, {"AWS_ENDPOINT_URL": DEAD_ENDPOINT, "AWS_ALLOW_HTTP": "1"})
    assert out["error"] == "StorageError", out
    assert f"at {DEAD_ENDPOINT}" in str(out["message"]), out
    assert "at AWS" not in str(out["message"]), out
