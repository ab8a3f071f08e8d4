"""Creates a blob container on Azurite, for `cargo xtask servers up azure`.

Usage: python azurite_container.py PORT CONTAINER

A Create Container request signed with Shared Key by Azurite's development account
(`devstoreaccount1` and its well-known key, both published in Azurite's README; not
secrets). 201 Created, or 409 when it exists, is success.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import sys
from email.utils import formatdate

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
VERSION = "2021-08-06"


def main() -> None:
    port, container = int(sys.argv[1]), sys.argv[2]
    date = formatdate(usegmt=True)
    path = f"/{ACCOUNT}/{container}"
    # https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key
    to_sign = "\n".join(
        ["PUT"] + [""] * 11 + [f"x-ms-date:{date}", f"x-ms-version:{VERSION}"]
        + [f"/{ACCOUNT}{path}\nrestype:container"]
    )
    digest = hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()
    headers = {
        "x-ms-date": date,
        "x-ms-version": VERSION,
        "Authorization": f"SharedKey {ACCOUNT}:{base64.b64encode(digest).decode()}",
        "Content-Length": "0",
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("PUT", f"{path}?restype=container", headers=headers)
    resp = conn.getresponse()
    body = resp.read().decode("utf-8", "replace")
    if resp.status not in (201, 409):
        sys.exit(f"creating container {container}: {resp.status} {resp.reason}: {body}")


if __name__ == "__main__":
    main()
