"""Shared fixtures: roots on the local disk, on S3 (moto and Ceph RGW), on the GCS and Azure
emulators (fake-gcs-server behind its front, Azurite) and behind nginx.

The servers come from `cargo xtask ci` (or `cargo xtask servers up` + `source .../env.sh`)
through the environment, as for the Rust tests: without the variables a server test is
skipped, unless GUIDELOOM_CI=1, where a missing server is a failure. Ceph RGW is the
exception the Rust tests make too: when CI was told to leave it out
(GUIDELOOM_XTASK_CEPH=0), its tests are skipped even under GUIDELOOM_CI=1.

`cargo xtask ci` tests the wheel installed into a fresh venv, which it names in
GUIDELOOM_TEST_WHEEL_VENV: the run then stops at once unless `guideloom` and its extension
module were imported from that venv's site-packages, never from the source tree's
python/guideloom (which has no extension module in a fresh clone, and may hold a stale one
left by `maturin develop`).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

import guideloom as gl
import guideloom._guideloom as _extension

WHEEL_VENV = "GUIDELOOM_TEST_WHEEL_VENV"


def imported_from() -> list[Path]:
    """Where `guideloom` and its compiled extension module were loaded from."""
    return [Path(gl.__file__).resolve(), Path(_extension.__file__ or "").resolve()]


def pytest_report_header() -> str:
    return "guideloom: " + ", ".join(str(p) for p in imported_from())


def pytest_configure(config: pytest.Config) -> None:
    venv = os.environ.get(WHEEL_VENV)
    if not venv:
        return
    if Path(sys.prefix).resolve() != Path(venv).resolve():
        raise pytest.UsageError(f"{WHEEL_VENV}={venv} but pytest runs in {sys.prefix}")
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    for path in imported_from():
        if not any(path.is_relative_to(s) for s in site):
            raise pytest.UsageError(
                f"guideloom was imported from {path}, not from the site-packages of the "
                f"installed wheel ({', '.join(map(str, sorted(site)))})"
            )


class _Metadata(BaseHTTPRequestHandler):
    """A stand-in for the GCE metadata server, which object_store's GCS client asks for a
    token when no credential is configured: nothing here may reach the real address
    (169.254.169.254). Every request is recorded and answered 404."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


_metadata = ThreadingHTTPServer(("127.0.0.1", 0), _Metadata)
threading.Thread(target=_metadata.serve_forever, daemon=True).start()
# Read by object_store when it fetches a token, in this process and in its children.
for _var in ("GCE_METADATA_HOST", "GCE_METADATA_IP"):
    os.environ[_var] = f"127.0.0.1:{_metadata.server_address[1]}"


def metadata_requests() -> list[str]:
    """The paths asked of the stand-in metadata server so far (by this process)."""
    return list(_Metadata.seen)


def server_var(name: str) -> str:
    value = os.environ.get(name)
    if value:
        return value
    if os.environ.get("GUIDELOOM_CI") == "1":
        pytest.fail(f"{name} is not set but GUIDELOOM_CI=1: the server is missing")
    pytest.skip(f"skipped: {name} is not set (start the servers with `cargo xtask servers up`)")


@dataclass
class S3Root:
    uri: str
    options: gl.S3Options
    server: str
    """`moto` or `ceph`."""
    bucket: str


# The S3 servers every S3 test runs against: (endpoint variable, bucket variable).
S3_SERVERS = {
    "moto": ("GUIDELOOM_S3_ENDPOINT", "GUIDELOOM_S3_BUCKET"),
    "ceph": ("GUIDELOOM_RGW_ENDPOINT", "GUIDELOOM_RGW_BUCKET"),
}


@dataclass
class CloudRoot:
    """A fresh prefix in the bucket (GCS) or container (Azure) of an emulator."""

    uri: str
    server: str
    """`gcs` or `azure`: also the keyword of its options (`gcs=`, `azure=`)."""
    bucket: str
    options: gl.GcsOptions | gl.AzureOptions

    @property
    def call(self) -> dict[str, Any]:
        """The per-call keyword argument of its options: `{"gcs": ...}` or `{"azure": ...}`."""
        return {self.server: self.options}


# The emulators of gs:// and az:// roots: (endpoint variable, bucket or container variable).
CLOUD_SERVERS = {
    "gcs": ("GUIDELOOM_GCS_ENDPOINT", "GUIDELOOM_GCS_BUCKET"),
    "azure": ("GUIDELOOM_AZURE_ENDPOINT", "GUIDELOOM_AZURE_CONTAINER"),
}


def cloud_options(server: str, endpoint: str, retries: int | None = None) -> Any:
    """The options of `server`'s emulator at `endpoint`: fake-gcs-server takes unsigned plain
    HTTP requests; Azurite, its development account and key (`use_emulator`)."""
    if server == "gcs":
        return gl.GcsOptions(
            endpoint_url=endpoint, anonymous=True, allow_http=True, retries=retries
        )
    return gl.AzureOptions(
        use_emulator=True, endpoint_url=endpoint, allow_http=True, retries=retries
    )


@pytest.fixture(params=sorted(CLOUD_SERVERS))
def cloud_root(request: pytest.FixtureRequest) -> CloudRoot:
    """A fresh prefix on the GCS emulator (`gs://`), then on Azurite (`az://`)."""
    server: str = request.param
    endpoint_var, bucket_var = CLOUD_SERVERS[server]
    endpoint, bucket = server_var(endpoint_var), server_var(bucket_var)
    scheme = "gs" if server == "gcs" else "az"
    uri = f"{scheme}://{bucket}/python-{uuid.uuid4().hex}"
    return CloudRoot(uri, server, bucket, cloud_options(server, endpoint))


@dataclass
class HttpRoot:
    directory: Path
    url: str


@pytest.fixture
def local_root(tmp_path: Path) -> Path:
    return tmp_path / "root"


def s3_server(server: str) -> tuple[str, str]:
    """The endpoint and bucket of `server` (a key of S3_SERVERS), or skip / fail."""
    endpoint_var, bucket_var = S3_SERVERS[server]
    if (
        server == "ceph"
        and not os.environ.get(endpoint_var)
        and os.environ.get("GUIDELOOM_XTASK_CEPH") == "0"
    ):
        pytest.skip(f"skipped: {endpoint_var} not set (GUIDELOOM_XTASK_CEPH=0)")
    return server_var(endpoint_var), server_var(bucket_var)


@pytest.fixture(params=sorted(S3_SERVERS))
def s3_root(request: pytest.FixtureRequest) -> S3Root:
    """A fresh prefix in the test bucket of moto, then of Ceph RGW."""
    server: str = request.param
    endpoint, bucket = s3_server(server)
    options = gl.S3Options(
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        allow_http=True,
    )
    return S3Root(f"s3://{bucket}/python-{uuid.uuid4().hex}", options, server, bucket)


@pytest.fixture
def http_root() -> HttpRoot:
    url = server_var("GUIDELOOM_NGINX_URL")
    served = Path(server_var("GUIDELOOM_NGINX_ROOT"))
    name = f"python-{uuid.uuid4().hex}"
    return HttpRoot(served / name, f"{url}{name}/")
