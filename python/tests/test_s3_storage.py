"""guideloom.storage against moto and Ceph RGW: retries, S3ObjectStore reuse, the default
registry's backends, whole-shard staging, declared mounts, and errors naming the root."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

import guideloom as gl
from conftest import S3Root
from guideloom.storage import (
    EphemeralFileStaging,
    Registry,
    S3ObjectStore,
    S3Options,
    default_registry,
    s3_backend,
)

# An endpoint nothing listens on (the discard port): connections are refused at once.
DEAD_ENDPOINT = "http://127.0.0.1:9"


def records(n: int, size: int = 2048) -> list[dict[str, object]]:
    return [{"i": i, "pad": "x" * size} for i in range(n)]


def publish_two_shards(root: S3Root, per_shard: int = 64) -> list[dict[str, object]]:
    values = records(2 * per_shard)
    shards = [
        gl.write_shard(values[:per_shard], root.uri, work_id="w", shard=0, s3=root.options),
        gl.write_shard(values[per_shard:], root.uri, work_id="w", shard=1, s3=root.options),
    ]
    gl.publish(root.uri, shards, dataset_id="d", snapshot_id="s1", s3=root.options)
    return values


@pytest.fixture
def registry() -> Iterator[Registry]:
    """The process-wide registry, with no `s3` backend before and after the test."""
    registry = default_registry()
    registry.unregister("s3")
    yield registry
    registry.unregister("s3")


# --- retries -----------------------------------------------------------------------------


def test_retries_option_is_validated() -> None:
    assert S3Options().retries == 5
    assert S3Options(retries=1).retries == 1
    assert S3Options(retries=None).retries == 5
    assert "retries=3" in repr(S3Options(retries=3))
    for bad in (0, -1, 101, 2**70):
        with pytest.raises(ValueError) as caught:
            S3Options(retries=bad)
        assert isinstance(caught.value, gl.InvalidArgumentError)
        assert "retries" in str(caught.value)
    for wrong in (True, "3", 2.5):
        with pytest.raises(TypeError):
            S3Options(retries=wrong)  # type: ignore[arg-type]


def test_repr_hides_credentials_written_into_the_endpoint() -> None:
    options = S3Options(endpoint_url="http://user:secret@127.0.0.1:9000/x")
    assert "secret" not in repr(options) and "127.0.0.1:9000" in repr(options)


class Failing(BaseHTTPRequestHandler):
    """Answers every request 503 and counts each distinct request (method and target)."""

    seen: ClassVar[dict[str, int]] = {}
    lock = threading.Lock()

    def answer(self) -> None:
        with Failing.lock:
            request = f"{self.command} {self.path}"
            Failing.seen[request] = Failing.seen.get(request, 0) + 1
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def failing_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("attempts", [1, 3])
def test_retries_is_the_number_of_attempts(
    failing_endpoint: str, attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Credentials from the environment (the server ignores them), never from elsewhere.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    options = S3Options(endpoint_url=failing_endpoint, allow_http=True, retries=attempts)
    Failing.seen = {}
    with pytest.raises(gl.StorageError):
        gl.open("s3://bucket/prefix", s3=options)
    # Opening lists `log/` and reads `dataset.json` at once; each request that was sent
    # failed exactly `attempts` times, and the log listing was among them.
    assert Failing.seen, "no request reached the server"
    assert set(Failing.seen.values()) == {attempts}, Failing.seen
    assert any("list-type=2" in request and "log" in request for request in Failing.seen)


# --- S3ObjectStore -----------------------------------------------------------------------


def write_profile(directory: Path, profile: str, region: str) -> None:
    key = os.environ.get("AWS_ACCESS_KEY_ID", "test")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "test")
    (directory / "config").write_text(f"[profile {profile}]\nregion = {region}\n")
    (directory / "credentials").write_text(
        f"[{profile}]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
    )


def test_an_object_store_is_built_once_and_reused(
    s3_root: S3Root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The credentials come from a profile of files this test controls: once the profile is
    # gone, only a store whose credentials were already resolved can still sign requests.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    region = s3_root.options.region_name or "us-east-1"
    write_profile(tmp_path, "reuse", region)
    options = S3Options(
        endpoint_url=s3_root.options.endpoint_url, allow_http=True, profile_name="reuse"
    )
    store = S3ObjectStore(options=options)
    assert store.options == options
    values = records(10, size=16)
    shard = gl.write_shard(values, s3_root.uri, work_id="w", object_store=store)
    gl.publish(s3_root.uri, [shard], dataset_id="d", snapshot_id="s1", object_store=store)
    assert list(gl.open(s3_root.uri, object_store=store)) == values

    write_profile(tmp_path, "another", region)  # the profile "reuse" no longer exists
    # A new store resolves the profile again, and fails...
    with pytest.raises(gl.InvalidArgumentError) as caught:
        gl.open(s3_root.uri, object_store=S3ObjectStore(options=options))
    assert "reuse" in str(caught.value)
    # ...while the store passed before keeps its client and credentials.
    ds = gl.open(s3_root.uri, object_store=store)
    assert ds[3] == values[3]
    gl.publish_annotations(s3_root.uri, "n", "v1", range(10), object_store=store)
    assert gl.open(s3_root.uri, object_store=store).annotations("n") == list(range(10))


def test_a_store_passed_by_the_caller_is_never_replaced_by_the_registry(
    s3_root: S3Root, registry: Registry
) -> None:
    values = publish_two_shards(s3_root, per_shard=4)
    store = S3ObjectStore(options=s3_root.options)
    registry.register(s3_backend(S3Options(endpoint_url=DEAD_ENDPOINT, allow_http=True, retries=1)))
    # Roots without a store use the (dead) backend...
    with pytest.raises(gl.StorageError):
        gl.open(s3_root.uri)
    # ...the caller's store is used as given.
    assert list(gl.open(s3_root.uri, object_store=store)) == values


def test_object_store_arguments_are_checked(s3_root: S3Root, tmp_path: Path) -> None:
    store = S3ObjectStore(options=s3_root.options)
    with pytest.raises(gl.InvalidArgumentError, match="s3://"):
        gl.open(tmp_path, object_store=store)
    with pytest.raises(gl.InvalidArgumentError, match="either s3= or object_store="):
        gl.open(s3_root.uri, object_store=store, s3=s3_root.options)
    with pytest.raises(gl.InvalidArgumentError, match="mount"):
        gl.write_shard([1], s3_root.uri, work_id="w", object_store=store, mount=True)


# --- the default registry ----------------------------------------------------------------


def test_a_registered_backend_serves_roots_opened_without_options(
    s3_root: S3Root, registry: Registry
) -> None:
    values = publish_two_shards(s3_root, per_shard=4)
    assert registry.backend("s3") is None
    registry.register(s3_backend(s3_root.options))
    backend = registry.backend("s3")
    assert backend is not None and backend.options == s3_root.options
    assert list(gl.open(s3_root.uri)) == values

    # A second backend for the scheme must say it replaces the first.
    dead = S3Options(endpoint_url=DEAD_ENDPOINT, allow_http=True, retries=1)
    with pytest.raises(gl.InvalidArgumentError, match="already registered"):
        registry.register(s3_backend(dead))
    assert gl.open(s3_root.uri)[0] == values[0]
    # Replaced: the client built from the first backend is dropped, later roots use the new.
    registry.register(s3_backend(dead), replace=True)
    with pytest.raises(gl.StorageError):
        gl.open(s3_root.uri)
    # Explicit options still apply exactly.
    assert gl.open(s3_root.uri, s3=s3_root.options)[1] == values[1]
    assert registry.unregister("s3") and not registry.unregister("s3")


# --- staging -----------------------------------------------------------------------------


def staged_files(directory: Path) -> list[str]:
    """This process's open files in `directory` (the staging files have no names there)."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(f"{directory}/"):
            found.append(target)
    return found


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc/self/fd"
)


@needs_proc
def test_staging_downloads_whole_shards_and_drops_them_with_the_dataset(
    s3_root: S3Root, tmp_path: Path
) -> None:
    values = publish_two_shards(s3_root)
    directory = tmp_path / "staging"
    directory.mkdir()
    store = S3ObjectStore(options=s3_root.options)
    staging = EphemeralFileStaging(objects=store, directory=directory, max_object_bytes=1 << 20)
    assert staging.directory == str(directory) and staging.max_object_bytes == 1 << 20
    ds = gl.open(s3_root.uri, object_store=store, shard_store=staging)
    assert staged_files(directory) == []
    assert list(ds) == values  # an in-order read of each whole shard
    staged = staged_files(directory)
    assert len(staged) == 2, staged  # one staged file per shard, both within the bound
    assert all("(deleted)" in f for f in staged), staged
    assert list(directory.iterdir()) == []  # unnamed: nothing to leave behind
    assert ds[len(values) - 1] == values[-1]
    del ds
    gc.collect()
    assert staged_files(directory) == []


@needs_proc
def test_shards_larger_than_max_object_bytes_are_read_by_ranges(
    s3_root: S3Root, tmp_path: Path
) -> None:
    values = publish_two_shards(s3_root)
    store = S3ObjectStore(options=s3_root.options)
    # Each shard is about 130 KiB: none fits.
    staging = EphemeralFileStaging(objects=store, directory=tmp_path, max_object_bytes=64 << 10)
    ds = gl.open(s3_root.uri, shard_store=staging)  # the staging's store serves the root
    assert list(ds) == values
    assert staged_files(tmp_path) == []


def test_staging_arguments_are_checked(tmp_path: Path) -> None:
    store = S3ObjectStore()
    with pytest.raises(gl.InvalidArgumentError, match="directory"):
        EphemeralFileStaging(objects=store, directory=tmp_path / "missing")
    with pytest.raises(gl.InvalidArgumentError, match="max_object_bytes"):
        EphemeralFileStaging(objects=store, max_object_bytes=-1)
    with pytest.raises(TypeError):
        EphemeralFileStaging(objects=store, max_object_bytes=True)
    staging = EphemeralFileStaging(objects=store)
    assert staging.directory is None and staging.max_object_bytes == 4 << 30
    assert staging.objects is store
    with pytest.raises(gl.InvalidArgumentError, match="another store"):
        gl.open("s3://bucket/prefix", object_store=S3ObjectStore(), shard_store=staging)


# --- declared mounts and errors naming the root ------------------------------------------


def test_annotations_are_refused_on_a_declared_mount(tmp_path: Path) -> None:
    root = tmp_path / "mounted-bucket"
    shard = gl.write_shard([{"a": 1}, {"a": 2}], root, work_id="w", mount=True)
    gl.publish(root, [shard], dataset_id="d", snapshot_id="s1", mount=True)
    assert list(gl.open(root, mount=True)) == [{"a": 1}, {"a": 2}]
    with pytest.raises(gl.UnsupportedError) as caught:
        gl.publish_annotations(root, "n", "v1", [1, 2], mount=True)
    assert "s3://" in str(caught.value)
    assert caught.value.root is not None and str(root) in caught.value.root


def test_a_missing_s3_root_is_named(s3_root: S3Root) -> None:
    with pytest.raises(gl.NotFoundError) as caught:
        gl.open(s3_root.uri, s3=s3_root.options)
    prefix = s3_root.uri.removeprefix(f"s3://{s3_root.bucket}/")
    assert s3_root.bucket in str(caught.value) and prefix in str(caught.value)
    assert caught.value.root is not None and prefix in caught.value.root
