"""gs:// and az:// roots: GcsOptions and AzureOptions, the gcs= and azure= keywords of every
call that takes s3=, and the registry's gcs_backend / azure_backend.

The option classes, their checks and the scheme checks of the keywords need no server. The
rest runs against the emulators `cargo xtask ci` starts (`cloud_root` in conftest.py): the
GCS emulator (fake-gcs-server behind its front, unsigned plain HTTP) and Azurite (its
development account and key); without their variables these tests skip, and under
GUIDELOOM_CI=1 they fail.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import guideloom as gl
from conftest import CLOUD_SERVERS, CloudRoot, cloud_options, metadata_requests, server_var
from guideloom.storage import (
    AzureBackend,
    AzureOptions,
    GcsBackend,
    GcsOptions,
    Registry,
    S3ObjectStore,
    S3Options,
    azure_backend,
    default_registry,
    gcs_backend,
    s3_backend,
)

# An endpoint nothing listens on (the discard port): connections are refused at once.
DEAD_ENDPOINT = "http://127.0.0.1:9"

# Azurite's published development key (not a secret: it is in Azurite's README); errors must
# never show it all the same, as they would never show a real account key.
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def records(n: int, size: int = 512) -> list[dict[str, object]]:
    return [{"i": i, "pad": "x" * size} for i in range(n)]


@pytest.fixture
def registry() -> Iterator[Registry]:
    """The process-wide registry, with no `gs` nor `az` backend before and after the test."""
    registry = default_registry()
    for scheme in ("gs", "az"):
        registry.unregister(scheme)
    yield registry
    for scheme in ("gs", "az"):
        registry.unregister(scheme)


# --- the option classes (no server) ------------------------------------------------------


def test_gcs_options_defaults_getters_and_equality(tmp_path: Path) -> None:
    default = GcsOptions()
    assert default.endpoint_url is None and default.service_account_path is None
    assert not default.anonymous and not default.allow_http and default.retries == 5
    key = tmp_path / "sa.json"
    options = GcsOptions(
        endpoint_url="http://127.0.0.1:4443",
        service_account_path=key,  # an os.PathLike is taken, a str comes back
        anonymous=True,
        allow_http=True,
        retries=2,
    )
    assert options.endpoint_url == "http://127.0.0.1:4443"
    assert options.service_account_path == str(key)
    assert options.anonymous and options.allow_http and options.retries == 2
    same = GcsOptions(
        endpoint_url="http://127.0.0.1:4443",
        service_account_path=str(key),
        anonymous=True,
        allow_http=True,
        retries=2,
    )
    assert options == same and hash(options) == hash(same)
    assert options != GcsOptions(endpoint_url="http://127.0.0.1:4443", allow_http=True)
    assert GcsOptions(retries=5) == GcsOptions()  # 5 is the default's attempts
    assert options != S3Options() and GcsOptions() != AzureOptions()
    assert len({options, same, default}) == 2
    assert repr(options) == (
        f"GcsOptions(endpoint_url='http://127.0.0.1:4443', service_account_path='{key}', "
        "anonymous=True, allow_http=True, retries=2)"
    )
    assert repr(default) == (
        "GcsOptions(endpoint_url=None, service_account_path=None, anonymous=False, "
        "allow_http=False, retries=5)"
    )


def test_azure_options_defaults_getters_and_equality() -> None:
    default = AzureOptions()
    assert default.account_name is None and default.endpoint_url is None
    assert not default.use_emulator and not default.allow_http and default.retries == 5
    options = AzureOptions(
        account_name="devstoreaccount1",
        endpoint_url="http://127.0.0.1:10000",
        use_emulator=True,
        allow_http=True,
        retries=3,
    )
    assert options.account_name == "devstoreaccount1"
    assert options.endpoint_url == "http://127.0.0.1:10000"
    assert options.use_emulator and options.allow_http and options.retries == 3
    same = AzureOptions(
        account_name="devstoreaccount1",
        endpoint_url="http://127.0.0.1:10000",
        use_emulator=True,
        allow_http=True,
        retries=3,
    )
    assert options == same and hash(options) == hash(same)
    assert options != AzureOptions(use_emulator=True)
    assert repr(options) == (
        "AzureOptions(account_name='devstoreaccount1', endpoint_url='http://127.0.0.1:10000', "
        "use_emulator=True, allow_http=True, retries=3)"
    )
    real = AzureOptions(
        account_name="myaccount", endpoint_url="https://myaccount.blob.core.windows.net"
    )
    assert not real.use_emulator and real.endpoint_url == "https://myaccount.blob.core.windows.net"


@pytest.mark.parametrize("cls", [GcsOptions, AzureOptions])
def test_options_are_frozen_keyword_only_and_final(cls: Any) -> None:
    options = cls()
    with pytest.raises(AttributeError):
        options.retries = 1
    with pytest.raises(TypeError):
        cls("http://127.0.0.1:1")
    with pytest.raises(TypeError):
        type("Sub", (cls,), {})


@pytest.mark.parametrize("cls", [GcsOptions, AzureOptions])
def test_retries_are_validated(cls: Any) -> None:
    assert cls(retries=1).retries == 1 and cls(retries=None).retries == 5
    for bad in (0, -1, 101, 2**70):
        with pytest.raises(gl.InvalidArgumentError, match="retries"):
            cls(retries=bad)
    for wrong in (True, "3", 2.5):
        with pytest.raises(TypeError):
            cls(retries=wrong)


@pytest.mark.parametrize("cls", [GcsOptions, AzureOptions])
def test_endpoints_are_validated_without_showing_credentials(cls: Any) -> None:
    for bad in ("127.0.0.1:4443", "ftp://127.0.0.1", "http://", "http:///path"):
        with pytest.raises(gl.InvalidArgumentError, match="endpoint_url"):
            cls(endpoint_url=bad, allow_http=True)
    # A plain http:// endpoint must be allowed explicitly.
    with pytest.raises(gl.InvalidArgumentError, match="allow_http=True") as caught:
        cls(endpoint_url="http://127.0.0.1:1")
    assert cls.__name__ in str(caught.value)
    assert cls(endpoint_url="https://127.0.0.1:1").endpoint_url == "https://127.0.0.1:1"
    # Credentials written into an endpoint are refused, and never echoed.
    for secret_url in (
        "http://user:SECRET@127.0.0.1:1",
        "https://127.0.0.1:1/?sv=2024&sig=SECRET",
        "https://127.0.0.1:1/#SECRET",
    ):
        with pytest.raises(gl.InvalidArgumentError, match="credentials") as caught:
            cls(endpoint_url=secret_url, allow_http=True)
        assert "SECRET" not in str(caught.value) and "127.0.0.1:1" in str(caught.value)


def test_gcs_and_azure_specific_checks() -> None:
    with pytest.raises(gl.InvalidArgumentError, match="service_account_path"):
        GcsOptions(service_account_path="")
    with pytest.raises(gl.InvalidArgumentError, match="service_account_path"):
        GcsOptions(service_account_path=b"/key.json")  # type: ignore[arg-type]
    for bad in ("ab", "UPPER", "has-dash", "x" * 25, ""):
        with pytest.raises(gl.InvalidArgumentError, match="account_name"):
            AzureOptions(account_name=bad)
    # The emulator is plain HTTP by nature; its endpoint is the blob base URL, no account.
    assert AzureOptions(use_emulator=True, endpoint_url="http://127.0.0.1:1").use_emulator
    with pytest.raises(gl.InvalidArgumentError, match="without the account"):
        AzureOptions(use_emulator=True, endpoint_url="http://127.0.0.1:1/devstoreaccount1")


def test_options_pickle_as_their_keyword_arguments(tmp_path: Path) -> None:
    for options in (
        GcsOptions(
            endpoint_url="http://127.0.0.1:1",
            service_account_path=tmp_path / "sa.json",
            anonymous=True,
            allow_http=True,
            retries=2,
        ),
        GcsOptions(),
        AzureOptions(account_name="acct123", endpoint_url="https://e.example", retries=7),
        AzureOptions(use_emulator=True),
    ):
        back = pickle.loads(pickle.dumps(options))
        assert type(back) is type(options) and back == options and repr(back) == repr(options)


def test_backends_name_their_scheme_and_options() -> None:
    options = GcsOptions(endpoint_url="http://127.0.0.1:1", anonymous=True, allow_http=True)
    backend = gcs_backend(options)
    assert isinstance(backend, GcsBackend)
    assert backend.scheme == "gs" and backend.options is options
    assert repr(backend) == f"gcs_backend({options!r})"
    assert gcs_backend().options == GcsOptions() == GcsBackend().options
    azure = AzureOptions(use_emulator=True)
    abackend = azure_backend(azure)
    assert isinstance(abackend, AzureBackend)
    assert abackend.scheme == "az" and abackend.options is azure
    assert repr(abackend) == f"azure_backend({azure!r})"
    assert azure_backend().options == AzureOptions()


def test_the_registry_takes_each_backend_and_refuses_a_second_without_replace(
    registry: Registry,
) -> None:
    gcs = GcsOptions(endpoint_url=DEAD_ENDPOINT, anonymous=True, allow_http=True, retries=1)
    azure = AzureOptions(use_emulator=True, endpoint_url=DEAD_ENDPOINT, retries=1)
    assert registry.backend("gs") is None and registry.backend("az") is None
    registry.register(gcs_backend(gcs))
    registry.register(azure_backend(azure))
    got = registry.backend("gs")
    assert isinstance(got, GcsBackend) and got.options == gcs
    for alias in ("az", "azure", "abfs", "AZ"):
        back = registry.backend(alias)
        assert isinstance(back, AzureBackend) and back.options == azure, alias
    with pytest.raises(gl.InvalidArgumentError, match="already registered"):
        registry.register(gcs_backend(GcsOptions(anonymous=True)))
    with pytest.raises(gl.InvalidArgumentError, match="already registered"):
        registry.register(azure_backend(AzureOptions(use_emulator=True)))
    other = registry.backend("gs")
    assert isinstance(other, GcsBackend) and other.options == gcs  # unchanged
    registry.register(gcs_backend(GcsOptions(anonymous=True)), replace=True)
    replaced = registry.backend("gs")
    assert isinstance(replaced, GcsBackend) and replaced.options == GcsOptions(anonymous=True)
    with pytest.raises(TypeError, match="gcs_backend"):
        registry.register(gcs)  # type: ignore[arg-type]
    assert registry.unregister("azure") and not registry.unregister("az")
    assert registry.unregister("gs") and registry.backend("gs") is None


# --- the keywords' schemes (no server) ---------------------------------------------------


def test_options_of_another_scheme_are_refused_for_a_bucket_root() -> None:
    gcs, azure, s3 = GcsOptions(anonymous=True), AzureOptions(use_emulator=True), S3Options()
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("s3://bucket/p", {"gcs": gcs}, "s3=S3Options"),
        ("s3://bucket/p", {"azure": azure}, "s3=S3Options"),
        ("gs://bucket/p", {"s3": s3}, "gcs=GcsOptions"),
        ("gs://bucket/p", {"azure": azure}, "gcs=GcsOptions"),
        ("az://container/p", {"s3": s3}, "azure=AzureOptions"),
        ("azure://container/p", {"gcs": gcs}, "azure=AzureOptions"),
        ("gs://bucket/p", {"gcs": gcs, "s3": s3}, "gcs=GcsOptions"),
    ]
    for uri, kwargs, hint in cases:
        for call in (
            lambda: gl.open(uri, **kwargs),
            lambda: gl.Root(uri, **kwargs),
            lambda: gl.write_shard([b"x"], uri, work_id="w", **kwargs),
            lambda: gl.publish(uri, [], dataset_id="d", snapshot_id="s", **kwargs),
            lambda: gl.publish_annotations(uri, "n", "v", [], **kwargs),
            lambda: gl.adopt_array_record(uri, "k.array_record", **kwargs),
        ):
            with pytest.raises(gl.InvalidArgumentError, match="configures") as caught:
                call()
            assert hint in str(caught.value) and uri in str(caught.value), str(caught.value)


def test_options_of_any_scheme_are_ignored_by_a_root_that_is_no_bucket(tmp_path: Path) -> None:
    # As s3= always was: a local path (or memory://, http(s)://) has no backend options.
    dead_gcs = GcsOptions(endpoint_url=DEAD_ENDPOINT, allow_http=True)
    dead_azure = AzureOptions(account_name="nobody", endpoint_url=DEAD_ENDPOINT, allow_http=True)
    shard = gl.write_shard([{"a": 1}], tmp_path, work_id="w", gcs=dead_gcs, azure=dead_azure)
    gl.publish(tmp_path, [shard], dataset_id="d", snapshot_id="s", gcs=dead_gcs)
    assert list(gl.open(tmp_path, azure=dead_azure, gcs=dead_gcs)) == [{"a": 1}]
    assert gl.Root(str(tmp_path), gcs=dead_gcs).open()[0] == {"a": 1}


def test_an_s3_object_store_does_not_serve_gs_nor_az_roots() -> None:
    store = S3ObjectStore()
    with pytest.raises(gl.InvalidArgumentError, match="S3ObjectStore serves s3://"):
        gl.open("gs://bucket/p", object_store=store, gcs=GcsOptions(anonymous=True))
    with pytest.raises(gl.InvalidArgumentError, match="S3ObjectStore serves s3://"):
        gl.open("az://container/p", object_store=store)


def test_an_azure_root_without_an_account_is_refused_naming_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_USE_EMULATOR", raising=False)
    with pytest.raises(gl.InvalidArgumentError, match="AZURE_STORAGE_ACCOUNT_NAME") as caught:
        gl.open("az://container/p", azure=AzureOptions())
    # The Python spelling of each remedy is named.
    assert "account_name=" in str(caught.value) and "use_emulator=True" in str(caught.value)


# --- against the emulators ---------------------------------------------------------------


def test_write_publish_open_and_read_back(cloud_root: CloudRoot) -> None:
    values = records(80)
    shards = [
        gl.write_shard(values[:50], cloud_root.uri, work_id="w", shard=0, **cloud_root.call),
        gl.write_shard(values[50:], cloud_root.uri, work_id="w", shard=1, **cloud_root.call),
    ]
    assert [s.key for s in shards] == ["shards/w/00000000.glm", "shards/w/00000001.glm"]
    snapshot = gl.publish(
        cloud_root.uri, shards, dataset_id="d", snapshot_id="s1", **cloud_root.call
    )
    assert snapshot.total_records == 80 and snapshot.outcome == "committed"
    ds = gl.open(cloud_root.uri, **cloud_root.call)
    assert len(ds) == 80 and ds.snapshot_id == "s1"
    assert ds[0] == values[0] and ds[49] == values[49] and ds[50] == values[50]
    assert ds[-1] == values[-1]
    assert ds.get_many([79, 3, 50, 49]) == [values[i] for i in (79, 3, 50, 49)]
    assert ds[40:60] == values[40:60]
    assert list(ds) == values
    # A Root resolves its store once and does the same.
    root = gl.Root(cloud_root.uri, **cloud_root.call)
    assert root.open()[77] == values[77]
    appended = root.write_shard(records(5), work_id="w2")
    root.publish([appended], dataset_id="d", snapshot_id="s2", mode="append")
    assert len(gl.open(cloud_root.uri, **cloud_root.call)) == 85
    # Unsigned (GCS) or signed with the emulator's key (Azure): no token was asked for.
    assert metadata_requests() == []


def test_reads_by_index_return_the_bytes_written(cloud_root: CloudRoot) -> None:
    blobs = [os.urandom(n) for n in (0, 1, 7, 4096, 65537, 300)]
    shard = gl.write_shard(blobs, cloud_root.uri, work_id="raw", format="raw", **cloud_root.call)
    gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **cloud_root.call)
    ds = gl.open(cloud_root.uri, **cloud_root.call)
    assert ds.format == "raw"
    for i in (4, 0, 5, 1, 3, 2):
        assert bytes(ds[i]) == blobs[i], i
        assert bytes(ds.get_raw(i)) == blobs[i], i
    assert [bytes(b) for b in ds.get_many([3, 4, 1])] == [blobs[3], blobs[4], blobs[1]]


def test_a_second_publish_of_a_snapshot_id_is_refused(cloud_root: CloudRoot) -> None:
    shard = gl.write_shard(records(4), cloud_root.uri, work_id="w", **cloud_root.call)
    first = gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **cloud_root.call)
    # The identical request (another rank, a retried job) writes nothing and says so.
    again = gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **cloud_root.call)
    assert (first.outcome, again.outcome) == ("committed", "already_published")
    other = gl.write_shard(records(2), cloud_root.uri, work_id="w2", **cloud_root.call)
    with pytest.raises(gl.PublicationCollisionError):
        gl.publish(cloud_root.uri, [other], dataset_id="d", snapshot_id="s", **cloud_root.call)
    # A shard key is create-only too: other bytes under it collide.
    with pytest.raises(gl.PublicationCollisionError) as caught:
        gl.write_shard(records(3), cloud_root.uri, work_id="w", **cloud_root.call)
    assert caught.value.key == "shards/w/00000000.glm"
    assert len(gl.open(cloud_root.uri, **cloud_root.call)) == 4


def test_annotations_update_the_catalog_by_compare_and_swap(cloud_root: CloudRoot) -> None:
    n = 12
    shard = gl.write_shard(records(n, 8), cloud_root.uri, work_id="w", **cloud_root.call)
    gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **cloud_root.call)
    gl.publish_annotations(cloud_root.uri, "label", "v1", range(n), **cloud_root.call)
    gl.publish_annotations(cloud_root.uri, "label", "v2", [-i for i in range(n)], **cloud_root.call)
    # Annotators racing on one catalog: each update is a conditional write on the catalog's
    # version (an ETag on Azure, a generation on GCS); the losers re-read and retry.
    errors: list[BaseException] = []

    def annotate(k: int) -> None:
        try:
            gl.publish_annotations(cloud_root.uri, f"racer{k}", "v1", [k] * n, **cloud_root.call)
        except BaseException as e:  # reported below, on the main thread
            errors.append(e)

    threads = [threading.Thread(target=annotate, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ds = gl.open(cloud_root.uri, **cloud_root.call)
    assert ds.annotations("label") == [-i for i in range(n)]  # the latest version
    assert ds.annotation("label", 5) == -5
    for k in range(4):
        assert ds.annotations(f"racer{k}") == [k] * n
    with pytest.raises(gl.CountMismatchError):
        gl.publish_annotations(cloud_root.uri, "short", "v1", [1, 2], **cloud_root.call)


def test_per_call_options_and_the_registry_backend(
    cloud_root: CloudRoot, registry: Registry
) -> None:
    values = records(6)
    shard = gl.write_shard(values, cloud_root.uri, work_id="w", **cloud_root.call)
    gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **cloud_root.call)
    make_backend: Any = gcs_backend if cloud_root.server == "gcs" else azure_backend
    scheme = "gs" if cloud_root.server == "gcs" else "az"
    registry.register(make_backend(cloud_root.options))
    back = registry.backend(scheme)
    assert back is not None and back.options == cloud_root.options
    assert list(gl.open(cloud_root.uri)) == values  # no options: the registered backend's

    dead = cloud_options(cloud_root.server, DEAD_ENDPOINT, retries=1)
    with pytest.raises(gl.InvalidArgumentError, match="already registered"):
        registry.register(make_backend(dead))
    assert gl.open(cloud_root.uri)[0] == values[0]  # still the first backend
    # Replaced: the client built from the first backend is dropped, later roots use the new.
    registry.register(make_backend(dead), replace=True)
    with pytest.raises(gl.StorageError) as caught:
        gl.open(cloud_root.uri)
    assert "127.0.0.1:9" in str(caught.value)
    # Per-call options apply exactly, whatever the registry holds...
    assert gl.open(cloud_root.uri, **cloud_root.call)[1] == values[1]
    # ...and per-call options of a dead endpoint fail though the registry's would not.
    registry.register(make_backend(cloud_root.options), replace=True)
    with pytest.raises(gl.StorageError):
        gl.open(cloud_root.uri, **{cloud_root.server: dead})
    assert gl.open(cloud_root.uri)[2] == values[2]
    # An s3 backend is another scheme's: it changes nothing here.
    default_registry().register(
        s3_backend(S3Options(endpoint_url=DEAD_ENDPOINT, allow_http=True)), replace=True
    )
    try:
        assert gl.open(cloud_root.uri)[3] == values[3]
    finally:
        default_registry().unregister("s3")


def test_errors_name_the_root_and_show_no_secret(cloud_root: CloudRoot) -> None:
    with pytest.raises(gl.NotFoundError) as caught:
        gl.open(cloud_root.uri, **cloud_root.call)
    prefix = cloud_root.uri.split("/", 3)[3]
    text = str(caught.value)
    assert cloud_root.bucket in text and prefix in text, text
    assert AZURITE_KEY not in text and "sig=" not in text
    assert AZURITE_KEY not in repr(cloud_root.options)
    assert AZURITE_KEY not in repr(gl.Root(cloud_root.uri, **cloud_root.call))


def test_the_other_schemes_keyword_is_refused_for_an_emulator_root(cloud_root: CloudRoot) -> None:
    wrong: dict[str, Any] = (
        {"azure": AzureOptions(use_emulator=True)}
        if cloud_root.server == "gcs"
        else {"gcs": GcsOptions(anonymous=True)}
    )
    with pytest.raises(gl.InvalidArgumentError, match="configures"):
        gl.write_shard(records(1), cloud_root.uri, work_id="w", **wrong)
    with pytest.raises(gl.InvalidArgumentError, match="configures"):
        gl.open(cloud_root.uri, s3=S3Options(), **cloud_root.call)


def test_a_root_configured_by_the_environment_alone(
    cloud_root: CloudRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The services' standard variables, with no endpoint, no `allow_http` and no
    `anonymous` in the options: object_store reads the endpoint and the credentials, the
    library the plain-HTTP and unsigned switches (GOOGLE_ALLOW_HTTP used to be replaced by
    the store's client options, and GOOGLE_SKIP_SIGNATURE alone still fetched a token)."""
    endpoint = server_var(CLOUD_SERVERS[cloud_root.server][0])
    if cloud_root.server == "gcs":
        env = {
            "GOOGLE_BASE_URL": endpoint,
            "GOOGLE_ALLOW_HTTP": "true",
            "GOOGLE_SKIP_SIGNATURE": "true",
        }
        options: dict[str, Any] = {"gcs": GcsOptions()}
    else:
        env = {
            "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
            "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
            "AZURE_STORAGE_ENDPOINT": f"{endpoint.rstrip('/')}/devstoreaccount1",
            "AZURE_ALLOW_HTTP": "1",
        }
        options = {"azure": AzureOptions()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    values = records(7)
    shard = gl.write_shard(values, cloud_root.uri, work_id="w", **options)
    gl.publish(cloud_root.uri, [shard], dataset_id="d", snapshot_id="s", **options)
    assert list(gl.open(cloud_root.uri, **options)) == values
    assert metadata_requests() == []
    # Without the plain-HTTP switch the same environment is refused, naming the scheme.
    monkeypatch.delenv("GOOGLE_ALLOW_HTTP" if cloud_root.server == "gcs" else "AZURE_ALLOW_HTTP")
    with pytest.raises(gl.StorageError) as caught:
        gl.open(cloud_root.uri, **options)
    # The error names the endpoint the variables gave, not the service's default.
    assert endpoint.removeprefix("http://").rstrip("/") in str(caught.value), caught.value
    assert "scheme is not allowed" in str(caught.value), caught.value
