"""Shared fixtures: roots on the local disk, on S3 (moto) and behind nginx.

The servers come from `cargo xtask ci` (or `cargo xtask servers up` + `source .../env.sh`)
through the environment, as for the Rust tests: without the variables a server test is
skipped, unless GUIDELOOM_CI=1, where a missing server is a failure.
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


@dataclass
class HttpRoot:
    directory: Path
    url: str


@pytest.fixture
def local_root(tmp_path: Path) -> Path:
    return tmp_path / "root"


@pytest.fixture
def s3_root() -> S3Root:
    endpoint = server_var("GUIDELOOM_S3_ENDPOINT")
    bucket = server_var("GUIDELOOM_S3_BUCKET")
    options = gl.S3Options(
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        allow_http=True,
    )
    return S3Root(f"s3://{bucket}/python-{uuid.uuid4().hex}", options)


@pytest.fixture
def http_root() -> HttpRoot:
    url = server_var("GUIDELOOM_NGINX_URL")
    served = Path(server_var("GUIDELOOM_NGINX_ROOT"))
    name = f"python-{uuid.uuid4().hex}"
    return HttpRoot(served / name, f"{url}{name}/")
