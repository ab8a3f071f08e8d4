"""Shared fixtures: roots on the local disk, on S3 (moto and Ceph RGW) and behind nginx.

The servers come from `cargo xtask ci` (or `cargo xtask servers up` + `source .../env.sh`)
through the environment, as for the Rust tests: without the variables a server test is
skipped, unless GUIDELOOM_CI=1, where a missing server is a failure. Ceph RGW is the
exception the Rust tests make too: when CI was told to leave it out
(GUIDELOOM_XTASK_CEPH=0), its tests are skipped even under GUIDELOOM_CI=1.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import guideloom as gl


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
