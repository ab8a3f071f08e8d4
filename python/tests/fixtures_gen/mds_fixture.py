"""Writes the MDS fixtures of crates/guideloom-import/tests/mds.rs and mds_hostile.rs.

Run with the project venv (`mosaicml-streaming` installed there, with its Pillow; neither is
needed to run the Rust tests, which read the committed output):

    .xtask/venv/bin/python python/tests/fixtures_gen/mds_fixture.py

It writes into crates/guideloom-import/tests/fixtures/mds/ (or the directory given as the
only argument), each dataset written by `streaming.MDSWriter`:

- `all/plain/` and `all/zstd/`: the same 40 samples of one column per MDS encoding of
  `streaming` (every scalar width, the text encodings, JSON, pickle, JPEG, PNG, PIL images of
  several modes, the image lists, `ndarray` with no, a dtype-only and a fixed dtype and
  shape), in several shards (a small `size_limit`), uncompressed and with `compression='zstd'`
  (the writer keeps only the `.mds.zstd` files);
- `compressions/{br,bz2,gz,snappy,zstd:7}/`: 6 samples of four columns, one per shard (a
  150-byte `size_limit`, which also makes the writer flush an empty first shard), each
  compressed with that algorithm (gzip stamps the time: only the `gz` files change from one
  run to the next);
- `partitioned/`: no `index.json` at the root, two partitions `part0/` and `part1/` each with
  one; `merged/`: the same partitions with the root `index.json` of `merge_index`;
- `expected.json`: what `streaming.StreamingDataset` (local only, no shuffle) returns for each
  dataset, as `{"datasets": {name: {"columns": [[name, encoding], ...], "samples": [...]}},
  "blobs": [hex, ...]}` (`all/zstd`, read the same as `all/plain`, as
  `{"same_as": "all/plain"}`). A sample maps each column to its value:
  - ints as JSON numbers; floats (scalars and `str_float`) as `{"bits": little-endian hex}`;
  - text (`str`, `str_decimal`) as strings; `json` as `{"text": stored, "value": decoded}`;
  - bytes (`bytes`, `pkl`, `jpeg`, `png`) as `"hex:..."` or `"blob:N"` (an index into `blobs`,
    for values over 32 bytes); a decoded JPEG or PNG as the bytes it was opened from; a
    pickle as its stored bytes (checked to unpickle to the decoded value);
  - a PIL image as `{"width", "height", "mode", "data": bytes of Image.tobytes()}`;
  - lists as JSON lists; arrays as `{"dtype", "shape", "data": bytes of tobytes()}`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import io
import json
import pickle
import shutil
import struct
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
DEFAULT_OUT = HERE.parents[3] / "crates" / "guideloom-import" / "tests" / "fixtures" / "mds"
SEED = 20240611
N = 40


class _StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stand-in `transformers` modules: every attribute is an empty class."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] != "transformers":
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        return None

    def exec_module(self, module: Any) -> None:
        def attribute(attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return type(attr, (), {})

        module.__path__ = []
        module.__getattr__ = attribute


def import_streaming() -> Any:
    """`streaming`, imported even where its `transformers` imports are broken.

    `streaming/__init__` imports its DataLoader and its text datasets, which import
    `transformers`; when that fails (a `huggingface-hub` it does not accept), `transformers` is
    replaced by stand-in modules. Nothing here uses what `streaming` takes from it.
    """
    try:
        return importlib.import_module("streaming")
    except ImportError:
        for name in [m for m in sys.modules if m.split(".")[0] in ("streaming", "transformers")]:
            del sys.modules[name]
        sys.meta_path.insert(0, _StandIn())
        return importlib.import_module("streaming")


streaming: Any = import_streaming()
encodings: Any = importlib.import_module("streaming.base.format.mds.encodings")
util: Any = importlib.import_module("streaming.base.util")
pil_image: Any = importlib.import_module("PIL.Image")

COLUMNS = {
    "bytes": "bytes",
    "str": "str",
    "int": "int",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "str_int": "str_int",
    "str_float": "str_float",
    "str_decimal": "str_decimal",
    "json": "json",
    "pkl": "pkl",
    "jpeg": "jpeg",
    "png": "png",
    "pil": "pil",
    "jpeg_array": "jpeg_array",
    "jpegarray": "jpegarray",
    "list_jpeg": "list[jpeg]",
    "list_png": "list[png]",
    "list_pil": "list[pil]",
    "nd": "ndarray",
    "nd_f32": "ndarray:float32",
    "tensor_i16": "ndarray:int16:2,3",
    "tensor_f16": "ndarray:float16:4",
    "tensor_u8": "ndarray:uint8:2,2,2",
}

DTYPES = [
    "uint8",
    "int8",
    "uint16",
    "int16",
    "float16",
    "uint32",
    "int32",
    "float32",
    "uint64",
    "int64",
    "float64",
]

# PIL modes with their sizes (width not a multiple of 8 for mode "1").
PIL_MODES = [
    ("RGB", (3, 2)),
    ("L", (4, 1)),
    ("1", (11, 2)),
    ("RGBA", (2, 2)),
    ("I;16", (3, 1)),
    ("F", (2, 1)),
    ("P", (2, 3)),
    ("LA", (1, 2)),
    ("CMYK", (1, 1)),
    ("I", (2, 2)),
]


def pixels(mode: str, size: tuple[int, int], rng: Any) -> Any:
    """An image of `mode` and `size` with random pixels."""
    img = pil_image.new(mode, size)
    bands = len(img.getbands())
    for y in range(size[1]):
        for x in range(size[0]):
            if mode == "F":
                img.putpixel((x, y), float(rng.normal()))
            elif mode in ("I", "I;16"):
                img.putpixel((x, y), int(rng.integers(0, 60000)))
            elif bands == 1:
                img.putpixel((x, y), int(rng.integers(0, 2 if mode == "1" else 256)))
            else:
                img.putpixel((x, y), tuple(int(v) for v in rng.integers(0, 256, bands)))
    return img


def small_images(rng: Any, tmp: Path) -> tuple[list[Any], list[Any]]:
    """A few tiny grayscale JPEG images opened from files in `tmp` (which the writer's JPEG
    encoding copies as they are) and a few images to store as PNG."""
    jpegs = []
    for k in range(3):
        path = tmp / f"{k}.jpg"
        pixels("L", (4, 4), rng).save(path, format="JPEG", quality=30, optimize=True)
        jpegs.append(pil_image.open(path))
    pngs = [pixels(m, s, rng) for m, s in [("RGB", (2, 2)), ("L", (3, 1)), ("P", (2, 1))]]
    return jpegs, pngs


def samples(rng: Any, tmp: Path) -> list[dict[str, Any]]:
    """The 40 samples of the `all` datasets (their JPEG files in `tmp`)."""
    jpegs, pngs = small_images(rng, tmp)
    jpeg_bytes = [encodings.mds_encode("jpeg", j) for j in jpegs]
    f16_edges = [np.nan, np.inf, -np.inf, -0.0, 65504.0, 6e-8]
    float_edges = [np.nan, np.inf, -np.inf, -0.0, 5e-324, 1.7976931348623157e308]
    int_edges = [-(2**63), 2**63 - 1, 0, -1]
    texts = ["", "plain", "é ü ß", "日本語", "emoji 🦀", "nul \x00 byte", "tab\tnew\nline"]
    decimals = ["3.14159265358979323846264338327950288", "-0.00", "1E+5", "NaN", "-Infinity"]
    json_values: list[Any] = [
        {"a": 1, "b": [1, 2.5, None, True], "c": {"d": "é"}},
        [],
        "string",
        12345678901234567890,
        None,
        {"nested": [[{"x": -1e-7}]]},
    ]
    pickles: list[Any] = [{"k": (1, 2)}, None, [1.5, "x", b"\x00\xff"], ("tuple", 3), 7]
    out = []
    for i in range(N):
        mode, size = PIL_MODES[i % len(PIL_MODES)]
        dt = DTYPES[i % len(DTYPES)]
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(d) for d in rng.integers(1, 4, ndim))
        if i == 7:
            shape = (300,)  # a dimension over 255: a uint16 shape
        nd = (rng.normal(size=shape) * 100).astype(dt)
        count = 2 if i % 5 == 0 else 1
        sample = {
            "bytes": bytes(rng.integers(0, 256, int(rng.integers(0, 12)), dtype=np.uint8)),
            "str": texts[i % len(texts)],
            "int": int_edges[i] if i < len(int_edges) else int(rng.integers(-(10**9), 10**9)),
            "int8": int(rng.integers(-128, 128)),
            "int16": int(rng.integers(-(2**15), 2**15)),
            "int32": int(rng.integers(-(2**31), 2**31)),
            "int64": int(rng.integers(-(2**63), 2**63 - 1)),
            "uint8": int(rng.integers(0, 256)),
            "uint16": int(rng.integers(0, 2**16)),
            "uint32": int(rng.integers(0, 2**32)),
            "uint64": 2**64 - 1 if i == 0 else int(rng.integers(0, 2**63)),
            "float16": f16_edges[i] if i < len(f16_edges) else float(rng.normal()),
            "float32": float_edges[i] if i < 4 else float(rng.normal() * 1e3),
            "float64": float_edges[i] if i < len(float_edges) else float(rng.normal() * 1e10),
            "str_int": [-(2**63), 2**63 - 1][i] if i < 2 else int(rng.integers(-(10**12), 10**12)),
            "str_float": float_edges[i] if i < len(float_edges) else float(rng.normal() / 3),
            "str_decimal": Decimal(decimals[i]) if i < len(decimals) else Decimal(i) / 7,
            "json": json_values[i % len(json_values)],
            "pkl": pickles[i % len(pickles)],
            "jpeg": jpegs[i % len(jpegs)],
            "png": pngs[i % len(pngs)],
            "pil": pixels(mode, size, rng),
            "jpeg_array": [jpeg_bytes[(i + k) % 3] for k in range(count)],
            "jpegarray": [jpeg_bytes[i % 3]],
            "list_jpeg": [jpegs[(i + k) % 3] for k in range(count - 1)],
            "list_png": [pngs[(i + k) % 3] for k in range(i % 3)],
            "list_pil": [pixels("RGB", (1, 2), rng) for _ in range(i % 2 + 1)],
            "nd": nd,
            "nd_f32": rng.normal(size=(1, int(rng.integers(1, 5)))).astype(np.float32),
            "tensor_i16": rng.integers(-(2**15), 2**15, (2, 3)).astype(np.int16),
            "tensor_f16": rng.normal(size=4).astype(np.float16),
            "tensor_u8": rng.integers(0, 256, (2, 2, 2)).astype(np.uint8),
        }
        out.append(sample)
    return out


class Dumper:
    """Turns decoded values into the JSON of `expected.json`, sharing long bytes as blobs."""

    def __init__(self) -> None:
        self.blobs: list[str] = []
        self.index: dict[str, int] = {}

    def data(self, b: bytes) -> str:
        h = b.hex()
        if len(b) <= 32:
            return "hex:" + h
        if h not in self.index:
            self.index[h] = len(self.blobs)
            self.blobs.append(h)
        return f"blob:{self.index[h]}"

    def image_file(self, img: Any, stored: bytes) -> str:
        """The bytes a decoded JPEG/PNG was opened from (the stored bytes, checked)."""
        fp = getattr(img, "fp", None)
        got = fp.getvalue() if isinstance(fp, io.BytesIO) else None
        assert got == stored, "the decoded image was not opened from the stored bytes"
        return self.data(got)

    def pil(self, img: Any) -> dict[str, Any]:
        w, h = img.size
        return {"width": w, "height": h, "mode": img.mode, "data": self.data(img.tobytes())}

    def array(self, a: Any) -> dict[str, Any]:
        return {"dtype": a.dtype.name, "shape": list(a.shape), "data": self.data(a.tobytes())}

    def value(self, enc: str, v: Any, original: Any) -> Any:
        """`v` as read by streaming, `original` as given to the writer."""
        if enc in ("float16", "float32", "float64"):
            return {"bits": v.tobytes().hex()}
        if enc == "str_float":
            return {"bits": struct.pack("<d", v).hex()}
        if enc in ("bytes",):
            return self.data(v)
        if enc == "str":
            return v
        if enc == "str_decimal":
            return str(v)
        if enc == "json":
            text = encodings.mds_encode("json", original).decode()
            assert json.loads(text) == v
            return {"text": text, "value": v}
        if enc == "pkl":
            stored = pickle.dumps(original)
            assert pickle.loads(stored) == v and pickle.dumps(v) == stored
            return self.data(stored)
        if enc in ("jpeg", "png"):
            return self.image_file(v, encodings.mds_encode(enc, original))
        if enc == "pil":
            return self.pil(v)
        if enc in ("jpeg_array", "jpegarray"):
            return [self.image_file(img, b) for img, b in zip(v, original, strict=True)]
        if enc in ("list[jpeg]", "list[png]"):
            kind = enc[5:-1]
            return [
                self.image_file(img, encodings.mds_encode(kind, o))
                for img, o in zip(v, original, strict=True)
            ]
        if enc == "list[pil]":
            return [self.pil(img) for img in v]
        if enc.startswith("ndarray"):
            return self.array(v)
        return int(v)


def write(out: Path, columns: dict[str, str], rows: list[dict[str, Any]], **kw: Any) -> None:
    """Writes `rows` with MDSWriter (which, compressing, writes only the compressed files)."""
    with streaming.MDSWriter(out=str(out), columns=columns, **kw) as w:
        for row in rows:
            w.write(row)


def read(path: Path) -> list[dict[str, Any]]:
    """The samples of the dataset at `path` as StreamingDataset returns them (from a copy,
    where it decompresses the shards)."""
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "ds"
        shutil.copytree(path, local)
        ds = streaming.StreamingDataset(
            local=str(local), shuffle=False, batch_size=1, allow_unsafe_types=True
        )
        rows = [ds[i] for i in range(len(ds))]
        # The lazily decoded images keep their bytes; nothing more is read from disk.
        return rows


def expect(
    dumper: Dumper, path: Path, columns: dict[str, str], originals: list[dict[str, Any]]
) -> dict[str, Any]:
    rows = read(path)
    assert len(rows) == len(originals), (path, len(rows))
    names = sorted(columns)
    out = []
    for row, original in zip(rows, originals, strict=True):
        out.append({n: dumper.value(columns[n], row[n], original[n]) for n in names})
    return {"columns": [[n, columns[n]] for n in names], "samples": out}


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    util.clean_stale_shared_memory()
    rng = np.random.default_rng(SEED)
    dumper = Dumper()
    datasets: dict[str, Any] = {}

    with tempfile.TemporaryDirectory() as tmp:
        rows = samples(rng, Path(tmp))
        write(out / "all" / "plain", COLUMNS, rows, size_limit=1 << 14)
        write(out / "all" / "zstd", COLUMNS, rows, size_limit=1 << 14, compression="zstd")
        datasets["all/plain"] = expect(dumper, out / "all" / "plain", COLUMNS, rows)
        # Read too, and the same: stored once.
        zstd = expect(dumper, out / "all" / "zstd", COLUMNS, rows)
        assert zstd == datasets["all/plain"]
        datasets["all/zstd"] = {"same_as": "all/plain"}

    small = {"id": "int", "text": "str", "blob": "bytes", "arr": "ndarray"}
    few = [
        {
            "id": i,
            "text": f"row {i} " * (i + 1),
            "blob": bytes(range(i * 7)),
            "arr": np.arange(i + 1, dtype=np.int32) * (i - 3),
        }
        for i in range(6)
    ]
    for algo in ("br", "bz2", "gz", "snappy", "zstd:7"):
        path = out / "compressions" / algo
        write(path, small, few, size_limit=150, compression=algo)
        datasets[f"compressions/{algo}"] = expect(dumper, path, small, few)

    for part, part_rows in (("part0", few[:4]), ("part1", few[4:])):
        write(out / "partitioned" / part, small, part_rows, size_limit=150)
        write(out / "merged" / part, small, part_rows, size_limit=150)
    util.merge_index(str(out / "merged"), keep_local=True)
    datasets["merged"] = expect(dumper, out / "merged", small, few)
    # No root index: StreamingDataset reads one partition at a time; the reader concatenates
    # them in name order.
    parts = [
        expect(dumper, out / "partitioned" / p, small, r)
        for p, r in (("part0", few[:4]), ("part1", few[4:]))
    ]
    datasets["partitioned"] = {
        "columns": parts[0]["columns"],
        "samples": parts[0]["samples"] + parts[1]["samples"],
    }

    expected = {"datasets": datasets, "blobs": dumper.blobs}
    text = json.dumps(expected, indent=None, sort_keys=True, separators=(",", ":"))
    (out / "expected.json").write_text(text + "\n")
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out} ({total} bytes)")


if __name__ == "__main__":
    main()
