#!/usr/bin/env python3
"""Regenerates the committed seed corpora under fuzz/seeds/ (see fuzz/seeds/README.md).

    python3 fuzz/seeds/generate.py [path/to/guideloom]

The guideloom binary (default: target/debug/guideloom, built with
`cargo build -p guideloom-cli` if missing) publishes a small real dataset into a temporary
directory; its control objects become the control_objects seeds. The other seeds are written
from the tables below (and the metadata blocks of the format crate's committed fixtures).
Only the standard library is used.
"""

import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURES = REPO / "crates/guideloom-format/tests/fixtures"


def reset(name):
    d = HERE / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def run(*args, **kw):
    subprocess.run([str(a) for a in args], check=True, stdout=subprocess.DEVNULL, **kw)


# --- control_objects: selector byte (0 identity, 1 manifest, 2 pointer, 3 claim, 4 catalog;
# ids and log key taken from the object) + the object as a publication wrote it.
def control_objects(binary):
    out = reset("control_objects")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        run(binary, "quickstart", "--workers", "3", "--records-per-worker", "4", tmp / "qs")
        root = tmp / "qs" / "dataset"
        extra = tmp / "extra.jsonl"
        extra.write_text('{"id":"extra-0","text":"appended"}\n{"id":"extra-1","text":"x"}\n')
        run(binary, "write", "--root", root, "--work-id", "extra", extra)
        run(binary, "publish", "--root", root, "--dataset-id", "captions",
            "--snapshot-id", "v2", "--append", "--work-id", "extra")
        labels = tmp / "labels.jsonl"
        labels.write_text("".join(f'{{"ok":{str(i % 2 == 0).lower()}}}\n' for i in range(14)))
        run(binary, "annotate", "--name", "labels", root, labels)
        files = [(0, root / "dataset.json")]
        files += [(1, p) for p in sorted((root / "log").glob("*.json"))]
        files += [(2, p) for p in sorted((root / "snapshots").glob("*.json"))]
        files += [(3, p) for p in sorted((root / "claims").glob("*.json"))]
        files += [(4, root / "annotations" / "catalog.json")]
        for selector, path in files:
            name = f"{selector}-{path.parent.name}-{path.stem}"
            (out / name).write_bytes(bytes([selector]) + path.read_bytes())
        # One shard of the publication, for shard_reader.
        shard = sorted((root / "shards" / "extra").glob("*.glm"))[0]
        reader = reset("shard_reader")
        shutil.copy(shard, reader / "cli-cbor-documents.glm")


# --- metadata_decode: the CBOR metadata block of each committed fixture (footer: 64 bytes
# at the end; metadata offset and length at footer bytes 16..24 and 24..32, little-endian).
def metadata_decode():
    out = reset("metadata_decode")
    for f in sorted(FIXTURES.glob("*.glm")):
        data = f.read_bytes()
        if len(data) < 64:
            continue
        footer = data[-64:]
        off, length = struct.unpack_from("<QQ", footer, 16)
        if off + length <= len(data) - 64 and length > 0:
            (out / f"{f.stem}.cbor").write_bytes(data[off:off + length])


# --- multipart_byteranges: header line + body, as origins answer multi-range GETs.
def multipart_byteranges():
    out = reset("multipart_byteranges")

    def body(parts, boundary="00000000000000000002", eol=b"\r\n", pre=b"", epi=b"",
             pad=b""):
        b = bytearray(pre)
        for cr, data in parts:
            b += b"--" + boundary.encode() + pad + eol
            b += b"Content-Type: application/octet-stream" + eol
            b += b"Content-Range: " + cr.encode() + eol + eol
            b += data + eol
        b += b"--" + boundary.encode() + b"--" + eol + epi
        return bytes(b)

    obj = bytes(range(256)) * 4
    seeds = {
        # nginx: a leading CRLF, CRLF line ends.
        "nginx": b"multipart/byteranges; boundary=00000000000000000002\n"
        + body([("bytes 0-9/1024", obj[0:10]), ("bytes 100-131/1024", obj[100:132])],
               pre=b"\r\n"),
        # Parts out of order, quoted boundary, bare LF, preamble and epilogue.
        "reordered-lf": b'Multipart/ByteRanges; charset=x; boundary="a b"\n'
        + body([("bytes 500-503/1024", obj[500:504]), ("bytes 0-0/*", obj[0:1])],
               boundary="a b", eol=b"\n", pre=b"preamble\n", epi=b"epilogue"),
        # The payload contains the boundary; transport padding after a delimiter.
        "boundary-in-payload": b"multipart/byteranges; boundary=XYZ\n"
        + body([("bytes 10-19/20", b"--XYZ\r\n--X")], boundary="XYZ", pad=b" \t"),
        # Merged neighbours: one part covering two wanted ranges.
        "merged": b"multipart/byteranges; boundary=m\n"
        + body([("bytes 0-63/1024", obj[0:64])], boundary="m"),
        # Only a Content-Range (a single-part 206).
        "content-range-only": b"bytes 0-9/100\n0123456789",
        "content-range-unknown-total": b"bytes 5-5/*\n",
        "content-range-no-range": b"bytes */42\n",
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)


# --- cli_records: JSON texts as `write` reads them and CBOR records as `get`/`cat` print.
JSON_SEEDS = [
    b'{"id":"cap-00-000000","text":"man mountain","tokens":[1016,1012],"width":1408}',
    b"[0.1,-0.0,5e-324,2.2250738585072014e-308,1.7976931348623157e308,0.30000000000000004]",
    b"[9007199254740991,9007199254740992,9007199254740993,18446744073709551615]",
    b"[18446744073709551616,-18446744073709551616,-18446744073709551617,1000000000000000000000000000000]",
    b'{"z":1,"a":2,"m":{"\\u00e9":"\\ud83d\\ude00","":null,"t":true,"f":false}}',
    b'"tab\\tnew\\nline \\"quoted\\" \\\\ \\/ \\u0000 \\u001f"',
    b"[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]",
    b" \t\r\n 1e2 \n",
    b"[1E+2,1e-2,-1.5E0,123.456e-7]",
    b'{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,'
    b'"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17}',
]


def head(major, arg):
    if arg < 24:
        return bytes([major << 5 | arg])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if arg < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, arg)
    raise ValueError(arg)


def text(s):
    b = s.encode()
    return head(3, len(b)) + b


CBOR_SEEDS = {
    "map": head(5, 2) + text("id") + text("x") + text("n") + head(0, 500),
    "floats": head(4, 4) + b"\xf9\x3e\x00" + b"\xfa\x47\xc3\x50\x00" + b"\xfb" + struct.pack(">d", 0.1)
    + b"\xf9\x80\x00",
    "bignums": head(4, 3) + b"\xc2\x49\x01" + bytes(8) + b"\xc3\x49\x01" + bytes(8)
    + b"\xc2\x41\x05",
    "bytes": head(5, 1) + text("blob") + head(2, 4) + b"\x00\xff\x10\x80",
    "indefinite": b"\x9f" + b"\x7f" + text("ab") + text("c") + b"\xff" + b"\xbf" + text("k")
    + b"\x5f" + head(2, 1) + b"\x01" + b"\xff" + b"\xff" + b"\xff",
    "simple": head(4, 4) + b"\xf4\xf5\xf6\xf7",
    "nan-inf": head(4, 2) + b"\xf9\x7e\x00" + b"\xf9\xfc\x00",
    "tag": b"\xc1\x1a\x5f\x00\x00\x00",
    "wide-heads": b"\x98\x02\x18\x17\x19\x00\x01",
    "negative": head(4, 2) + head(1, 0) + b"\x3b" + b"\xff" * 8,
    "nested": b"\x81" * 20 + b"\xa0",
}


def cli_records():
    out = reset("cli_records")
    for i, text_ in enumerate(JSON_SEEDS):
        (out / f"json-{i:02}").write_bytes(text_)
    for name, data in CBOR_SEEDS.items():
        (out / f"cbor-{name}").write_bytes(data)


# --- arrayrecord_reader: selector byte, then (built mode, selector & 7 >= 3) a description
# of up to three chunks for guideloom-arrayrecord's `hostile` kit (see the target's doc), or
# (flip mode, 1 and 2) length-prefixed records and a 4-byte flip position. A few hundred bytes
# each: the target lays out the 128 KiB files itself.
def arrayrecord_reader():
    out = reset("arrayrecord_reader")

    def chunk(codec, lies, records, claims=b""):
        body = bytes([codec | lies << 2, len(records) - 1])
        for r in records:
            body += bytes([len(r)]) + r
        return body + claims

    recs = [b"record %d" % i for i in range(5)]
    seeds = {
        # One honest chunk per codec (0 none, 1 zstd, 2 snappy, 3 brotli), no perturbation.
        **{f"built-honest-{c}": bytes([3, 0]) + chunk(c, 0, recs) + b"\0" for c in range(4)},
        # Three chunks of 5 records (the footer's group rule), zstd.
        "built-three-chunks": bytes([3, 2]) + chunk(1, 0, recs) * 3 + b"\0",
        # A record count claimed far above the 5 held (2^12 << 8).
        "built-claims-records": bytes([3, 0]) + chunk(0, 1, recs, bytes([2 | 8 << 2, 0, 16]))
        + b"\0",
        # A decoded size claimed near the truth.
        "built-claims-decoded": bytes([11, 0]) + chunk(1, 2, recs, bytes([0, 3, 0])) + b"\0",
        # zstd prefixes that lie: sizes by +2, values far above (a bomb's claim).
        "built-bomb-prefix": bytes([3, 0])
        + chunk(1, 4, recs, bytes([0, 2, 0, 2 | 20 << 2, 1, 0])) + b"\0",
        # Brotli values as a stream of the input's own bytes.
        "built-garbage-stream": bytes([3, 0])
        + chunk(3, 4 | 8, recs, bytes([0, 0, 0, 0, 40, 0]) + bytes([8]) + b"\x1b\x03\x00\x00\x00\x00\x00\x00")
        + b"\0",
        # A transposed chunk where records are expected.
        "built-transposed": bytes([3, 0]) + chunk(1, 16, recs) + bytes([0]) + b"\0",
        # Footer entry 0's offset moved (perturbation of field 0 by +7).
        "built-footer-offset": bytes([3, 0]) + chunk(0, 0, recs) + bytes([1, 0, 0, 7, 0]),
        # Flip mode: records for "group_size:3,snappy" and "" (zstd), a flip position.
        "flip-snappy": bytes([1 | 2 << 3]) + b"".join(bytes([len(r)]) + r for r in recs)
        + (300).to_bytes(4, "little"),
        "flip-default": bytes([2]) + b"".join(bytes([len(r)]) + r for r in recs)
        + (70000).to_bytes(4, "little"),
    }
    for name, data in seeds.items():
        (out / name).write_bytes(data)


def main():
    binary = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "target/debug/guideloom"
    if not binary.exists():
        run("cargo", "build", "-p", "guideloom-cli", cwd=REPO)
    control_objects(binary)
    metadata_decode()
    multipart_byteranges()
    cli_records()
    arrayrecord_reader()
    for d in sorted(p for p in HERE.iterdir() if p.is_dir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
