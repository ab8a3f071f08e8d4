"""Writes the WebDataset fixture of crates/guideloom-import/tests/webdataset.rs.

Run with the project venv (`webdataset` and Pillow installed there by hand; neither is needed
to run the Rust tests, which read the committed output):

    .xtask/venv/bin/pip install webdataset pillow
    .xtask/venv/bin/python python/tests/fixtures_gen/webdataset_fixture.py

It writes into crates/guideloom-import/tests/fixtures/webdataset/ (or the directory given as
the only argument):

- `shard-000000.tar` and `shard-000001.tar.gz`: 30 samples written by `webdataset.TarWriter`
  (a tiny JPEG, a PNG mask as `seg.png`, a class id as `cls`, JSON and text), one sample
  lacking `txt`, one lacking `json`, one with an empty `txt`, keys with a directory;
- `edge-pax.tar` and `edge-gnu.tar`: members written with `tarfile` to pin webdataset's
  grouping rules: a directory, a symlink, `__index__` and `__meta__/` (skipped as metadata),
  a name without an extension, upper-case extensions, a key repeated non-consecutively,
  `dir/.hidden`, an empty extension, `__key__.txt`, a long name (a pax record in one, a GNU
  long name in the other) and a non-ASCII name;
- `expected.json`: what `webdataset.WebDataset(url)` (no decoders) yields for each tar, the
  values as hex: `{"tars": [{"file": ..., "samples": [{"__key__": ..., "fields":
  {ext: hex, ...}}, ...]}, ...]}`, fields in the order webdataset's sample dict has them.
"""

from __future__ import annotations

import gzip
import importlib
import io
import json
import sys
import tarfile
import warnings
from pathlib import Path
from typing import Any

# Imported by name so that mypy (which checks python/tests without these packages installed)
# sees `Any` rather than a missing module.
wds: Any = importlib.import_module("webdataset")
pil_image: Any = importlib.import_module("PIL.Image")

MTIME = 1_700_000_000
HERE = Path(__file__).resolve()
DEFAULT_OUT = HERE.parents[3] / "crates" / "guideloom-import" / "tests" / "fixtures" / "webdataset"


def image(kind: str, seed: int) -> bytes:
    """A 4x4 image encoded as `kind` (`JPEG` or `PNG`), its pixels a function of `seed`."""
    mode = "RGB" if kind == "JPEG" else "L"
    img = pil_image.new(mode, (4, 4))
    for y in range(4):
        for x in range(4):
            v = (seed * 37 + x * 53 + y * 91) % 256
            img.putpixel((x, y), (v, 255 - v, (v * 3) % 256) if mode == "RGB" else v % 4)
    out = io.BytesIO()
    if kind == "JPEG":
        img.save(out, format="JPEG", quality=50, optimize=True)
    else:
        img.save(out, format="PNG", optimize=True)
    return out.getvalue()


def sample(i: int) -> dict[str, Any]:
    """Sample `i` as TarWriter takes it (its default encoder turns each value into bytes)."""
    key = f"sample{i:06d}" if i % 7 != 3 else f"val/sample{i:06d}"
    s: dict[str, Any] = {
        "__key__": key,
        "jpg": image("JPEG", i),
        "seg.png": image("PNG", i),
        "cls": i % 10,
        "json": {"id": i, "label": f"class-{i % 10}", "score": i / 8},
        "txt": f"caption {i}: a café ☕ number {i}" if i % 5 else f"caption {i}",
    }
    if i == 5:
        del s["txt"]
    if i == 20:
        del s["json"]
    if i == 21:
        s["txt"] = ""
    return s


def write_shards(out: Path) -> list[str]:
    with wds.TarWriter(str(out / "shard-000000.tar"), mtime=MTIME) as w:
        for i in range(10):
            w.write(sample(i))
    raw = io.BytesIO()
    with wds.TarWriter(raw, mtime=MTIME, compress=False) as w:
        for i in range(10, 30):
            w.write(sample(i))
    (out / "shard-000001.tar.gz").write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return ["shard-000000.tar", "shard-000001.tar.gz"]


def member(name: str, data: bytes | None = None, kind: bytes = tarfile.REGTYPE) -> tuple[Any, Any]:
    info = tarfile.TarInfo(name)
    info.mtime = MTIME
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "a.txt"
    if data is None:
        return info, None
    info.size = len(data)
    return info, io.BytesIO(data)


def write_edge(path: Path, fmt: int, long_ext: str) -> None:
    long_name = "long/" + "d" * 120 + "." + long_ext
    members = [
        member("part/", kind=tarfile.DIRTYPE),
        member("__index__", b"metadata, skipped"),
        member("__meta__/info.json", b'{"skipped": true}'),
        member("README", b"no extension: skipped"),
        member("a.txt", b"first a"),
        member("a.cls", b"1"),
        member("part/.hidden", b"a key that is a directory"),
        member("x.y/.z", b"no key: skipped"),
        member("b.JPG", image("JPEG", 99)),
        member("b.Txt", b"upper-case extensions are lower-cased"),
        member("link.txt", kind=tarfile.SYMTYPE),
        member("a.seg.png", image("PNG", 7)),
        member(long_name, b"a long name"),
        member("caf\u00e9.txt", "non-ASCII name \u00e9".encode()),
        member("e.", b"empty extension"),
        member("__key__.txt", b"a key named __key__"),
        member("__x__/y.txt", b"under a __x__ directory: skipped"),
        member("f.txt", b"lower f"),
        member("F.txt", b"upper F"),
    ]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as t:
        for info, data in members:
            t.addfile(info, data)
        end = t.offset + 2 * tarfile.BLOCKSIZE
    # The archive without tarfile's padding to a 10 KiB record (the two end blocks kept).
    path.write_bytes(raw.getvalue()[:end])


def expected(out: Path, files: list[str]) -> dict[str, Any]:
    tars = []
    for name in files:
        url = str(out / name)
        samples = []
        for s in wds.WebDataset(url, shardshuffle=False):
            fields = {k: v.hex() for k, v in s.items() if not k.startswith("__")}
            samples.append({"__key__": s["__key__"], "fields": fields})
        tars.append({"file": name, "samples": samples})
    return {"tars": tars}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    files = write_shards(out)
    write_edge(out / "edge-pax.tar", tarfile.PAX_FORMAT, "txt")
    write_edge(out / "edge-gnu.tar", tarfile.GNU_FORMAT, "cls")
    files += ["edge-pax.tar", "edge-gnu.tar"]
    text = json.dumps(expected(out, files), indent=1, ensure_ascii=False) + "\n"
    (out / "expected.json").write_text(text, encoding="utf-8")
    total = sum((out / f).stat().st_size for f in [*files, "expected.json"])
    print(f"wrote {len(files)} tars and expected.json into {out} ({total} bytes)")


if __name__ == "__main__":
    main()
