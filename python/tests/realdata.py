"""Test data built from data shipped inside installed packages: nothing is downloaded.

- `digits_table()`: scikit-learn's 1 797 handwritten digits (its bundled `digits.csv.gz`):
  `image` as the canonical `arrow.fixed_shape_tensor` (uint8, shape [8, 8]), `label`, and
  the same pixels as a grayscale PNG (`png`, field metadata `guideloom.media: image/png`).
- `skimage_images_table()`: scikit-image's sample images that ship in its wheel (the ones
  `skimage.data` loads without pooch) as JPEG (`guideloom.media: image/jpeg`).
- `stdlib_text_table()`: the running CPython's standard library sources (UTF-8 ones only).
- `write_parquet_by_pyarrow()` / `write_parquet_by_datasets()`: the same table written as
  Parquet by pyarrow and by Hugging Face `datasets`.
- `mixed_table()` / `mixed_batches()` / `big_mixed_parquet()`: rows mixing all three, for
  random-access and import benchmarks (python/bench/columnar_peers.py, import_peers.py).

What the writers keep (pyarrow 26, datasets 4.8, checked by hand): pyarrow's Parquet stores
the Arrow schema (`ARROW:schema`), so the tensor extension and the field metadata come back
on read. `datasets` refuses extension types (`ValueError: ... does not have a datasets dtype
equivalent`), so `write_parquet_by_datasets` hands it the storage (`fixed_size_list<uint8>
[64]`); its Parquet then carries no field metadata at all (no media type, no extension), only
its own `huggingface` schema metadata, and names the list's child `element`, not `item`.

Run this file to build each table and print its rows and bytes:
`python python/tests/realdata.py [MiB of mixed Parquet, default 16]`.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
from PIL import Image

# Nothing here needs the hub; a test that imports this module stays offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

MEDIA_KEY = "guideloom.media"
"""The field metadata key naming a binary column's media type."""

DIGIT_SHAPE = (8, 8)
GIB = 1 << 30
MIB = 1 << 20

# scikit-image's sample images whose files are in its wheel (skimage/data/*.png|jpg): the
# others (`brain`, `cells3d`, `kidney`, `lily`, ...) need pooch and a download. Generated
# ones (`binary_blobs`) and stacks (`lfw_subset`) are left out. `cat` is `chelsea` again.
SKIMAGE_IMAGES = (
    "astronaut",
    "brick",
    "camera",
    "cell",
    "checkerboard",
    "chelsea",
    "clock",
    "coffee",
    "coins",
    "colorwheel",
    "grass",
    "gravel",
    "horse",
    "hubble_deep_field",
    "immunohistochemistry",
    "logo",
    "microaneurysms",
    "moon",
    "page",
    "retina",
    "rocket",
    "shepp_logan_phantom",
    "text",
)

Pixels = npt.NDArray[np.uint8]


def media_field(name: str, media: str) -> pa.Field:
    """A binary field whose metadata names its media type (`guideloom.media`)."""
    return pa.field(name, pa.binary(), metadata={MEDIA_KEY: media})


def digit_tensor_type() -> pa.DataType:
    """`arrow.fixed_shape_tensor` of uint8, shape [8, 8] (storage `fixed_size_list[64]`)."""
    return pa.fixed_shape_tensor(pa.uint8(), list(DIGIT_SHAPE))


def encode_png(pixels: Pixels) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def encode_jpeg(pixels: Pixels, quality: int = 90) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=quality)
    return out.getvalue()


@functools.cache
def digits() -> tuple[Pixels, npt.NDArray[np.int64]]:
    """scikit-learn's digits: images (n, 8, 8) uint8 in 0..16, labels (n,) int64."""
    from sklearn.datasets import load_digits  # type: ignore[import-untyped, unused-ignore]

    bunch: Any = load_digits()
    images: Pixels = np.ascontiguousarray(bunch.images, dtype=np.uint8)
    labels: npt.NDArray[np.int64] = np.asarray(bunch.target, dtype=np.int64)
    return images, labels


def tensor_array(images: Pixels) -> pa.Array:
    """(n, 8, 8) uint8 as an `arrow.fixed_shape_tensor` array."""
    flat = pa.array(np.ascontiguousarray(images).reshape(-1), pa.uint8())
    storage = pa.FixedSizeListArray.from_arrays(flat, images.shape[1] * images.shape[2])
    return pa.ExtensionArray.from_storage(digit_tensor_type(), storage)


@functools.cache
def digit_pngs() -> tuple[bytes, ...]:
    """Each digit as a grayscale PNG of the same pixels (0..16, so it decodes to `image`)."""
    return tuple(encode_png(im) for im in digits()[0])


def digits_table() -> pa.Table:
    """scikit-learn's digits: `image` (tensor [8, 8] uint8), `label` int64, `png` binary."""
    images, labels = digits()
    schema = pa.schema(
        [
            pa.field("image", digit_tensor_type()),
            pa.field("label", pa.int64()),
            media_field("png", "image/png"),
        ]
    )
    return pa.Table.from_arrays(
        [tensor_array(images), pa.array(labels), pa.array(digit_pngs(), pa.binary())],
        schema=schema,
    )


def _as_uint8_image(x: Any) -> Pixels:
    """A sample image as uint8 gray (h, w) or RGB (h, w, 3): booleans to 0/255, floats in
    [0, 1] scaled, RGBA composited over white."""
    a = np.asarray(x)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8) * 255
    elif a.dtype.kind == "f":
        a = (np.clip(a, 0.0, 1.0) * 255.0).round()
    if a.ndim == 3 and a.shape[2] == 4:
        rgb, alpha = a[:, :, :3].astype(np.float64), a[:, :, 3:].astype(np.float64) / 255.0
        a = (rgb * alpha + 255.0 * (1.0 - alpha)).round()
    out: Pixels = np.ascontiguousarray(a, dtype=np.uint8)
    return out


@functools.cache
def skimage_images() -> tuple[tuple[str, Pixels], ...]:
    """The bundled sample images of scikit-image, by name, as uint8 arrays."""
    import skimage.data

    found = []
    for name in SKIMAGE_IMAGES:
        load = getattr(skimage.data, name, None)
        if load is None:
            continue
        try:
            image = load()
        except (ModuleNotFoundError, OSError, ValueError):  # needs pooch / not in this wheel
            continue
        found.append((name, _as_uint8_image(image)))
    if len(found) < 10:
        raise RuntimeError(f"only {len(found)} scikit-image sample images load offline")
    return tuple(found)


@functools.cache
def skimage_jpegs() -> tuple[tuple[str, bytes, int, int], ...]:
    """(name, JPEG bytes, height, width) of each bundled sample image."""
    return tuple((name, encode_jpeg(px), px.shape[0], px.shape[1]) for name, px in skimage_images())


def skimage_images_table() -> pa.Table:
    """scikit-image's bundled sample images: `name`, `jpeg` (image/jpeg), `height`, `width`."""
    rows = skimage_jpegs()
    schema = pa.schema(
        [
            pa.field("name", pa.utf8()),
            media_field("jpeg", "image/jpeg"),
            pa.field("height", pa.int32()),
            pa.field("width", pa.int32()),
        ]
    )
    return pa.Table.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.utf8()),
            pa.array([r[1] for r in rows], pa.binary()),
            pa.array([r[2] for r in rows], pa.int32()),
            pa.array([r[3] for r in rows], pa.int32()),
        ],
        schema=schema,
    )


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


@functools.cache
def stdlib_sources() -> tuple[tuple[str, str, int], ...]:
    """(path relative to the stdlib, text, size in bytes) of each UTF-8 `.py` file of the
    running CPython's standard library (site-packages left out), sorted by path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if "site-packages" in rel.parts or not path.is_file():
            continue
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:  # a few test files are Latin-1 / KOI8-R on purpose
            continue
        out.append((rel.as_posix(), text, len(raw)))
    return tuple(out)


def stdlib_text_table(limit: int | None = None) -> pa.Table:
    """The standard library's sources: `path` utf8, `text` utf8, `lines` int32, `bytes`
    int64; the first `limit` files by path when given."""
    rows = stdlib_sources()[:limit]
    schema = pa.schema(
        [
            pa.field("path", pa.utf8()),
            pa.field("text", pa.utf8()),
            pa.field("lines", pa.int32()),
            pa.field("bytes", pa.int64()),
        ]
    )
    return pa.Table.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.utf8()),
            pa.array([r[1] for r in rows], pa.utf8()),
            pa.array([_line_count(r[1]) for r in rows], pa.int32()),
            pa.array([r[2] for r in rows], pa.int64()),
        ],
        schema=schema,
    )


def storage_only(table: pa.Table) -> pa.Table:
    """`table` with each extension column replaced by its storage (field metadata kept)."""
    fields, columns = [], []
    for field, column in zip(table.schema, table.columns, strict=True):
        if isinstance(field.type, pa.BaseExtensionType):
            column = pa.chunked_array(
                [chunk.storage for chunk in column.chunks], field.type.storage_type
            )
            field = pa.field(field.name, field.type.storage_type, field.nullable, field.metadata)
        fields.append(field)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def write_parquet_by_pyarrow(
    table: pa.Table, path: str | os.PathLike[str], row_group_size: int
) -> Path:
    """`table` as one Parquet file written by pyarrow, `row_group_size` rows per row group."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out, row_group_size=row_group_size)
    return out


def write_parquet_by_datasets(
    table: pa.Table, dir: str | os.PathLike[str], shards: int = 1
) -> list[Path]:
    """`table` written by Hugging Face `datasets` (`Dataset.to_parquet`) as `shards` files
    `data-XXXXX-of-YYYYY.parquet` in `dir`. Extension columns go in as their storage
    (`datasets` refuses extension types); the files keep no field metadata (module doc)."""
    import datasets  # type: ignore[import-untyped, unused-ignore]
    from datasets.table import InMemoryTable  # type: ignore[import-untyped, unused-ignore]

    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    ds: Any = datasets.Dataset(InMemoryTable(storage_only(table)))
    paths = []
    for i in range(shards):
        path = out / f"data-{i:05d}-of-{shards:05d}.parquet"
        part = ds.shard(num_shards=shards, index=i, contiguous=True) if shards > 1 else ds
        part.to_parquet(str(path))
        paths.append(path)
    return paths


def mixed_schema() -> pa.Schema:
    """The mixed rows: `index`, the sample image's `name` and `jpeg`, a digit's `label`,
    `digit` tensor and `png`, and a standard-library source's `text`."""
    return pa.schema(
        [
            pa.field("index", pa.int64()),
            pa.field("name", pa.utf8()),
            media_field("jpeg", "image/jpeg"),
            pa.field("label", pa.int64()),
            pa.field("digit", digit_tensor_type()),
            media_field("png", "image/png"),
            pa.field("text", pa.utf8()),
        ]
    )


@functools.cache
def _jpeg_pool(tile: int | None) -> tuple[tuple[str, bytes], ...]:
    """Whole sample images as JPEG, or (with `tile`) up to 64 tiles of tile x tile pixels
    cut from each on a grid, named `name@y,x`."""
    if tile is None:
        return tuple((name, jpeg) for name, jpeg, _, _ in skimage_jpegs())
    pool = []
    for name, px in skimage_images():
        tiles = [
            (y, x)
            for y in range(0, px.shape[0] - tile + 1, tile)
            for x in range(0, px.shape[1] - tile + 1, tile)
        ]
        for y, x in tiles[:: max(1, len(tiles) // 64)][:64]:
            pool.append((f"{name}@{y},{x}", encode_jpeg(px[y : y + tile, x : x + tile])))
    return tuple(pool)


def mixed_batches(
    start: int,
    stop: int,
    batch_rows: int = 256,
    *,
    tile: int | None = None,
    text_chars: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Rows `start..stop` of the mixed data (`mixed_schema()`), `batch_rows` at a time. Row i
    takes sample image i mod their count (whole, or a tile of `tile` pixels), digit i mod
    1 797 and source file i mod their count (its first `text_chars` characters when given):
    the same row for the same i, whatever the batching. Memory: the pools plus one batch."""
    jpegs = _jpeg_pool(tile)
    images, labels = digits()
    pngs = digit_pngs()
    texts = [t[1] if text_chars is None else t[1][:text_chars] for t in stdlib_sources()]
    schema = mixed_schema()
    for lo in range(start, stop, batch_rows):
        idx = np.arange(lo, min(stop, lo + batch_rows), dtype=np.int64)
        j, d, t = idx % len(jpegs), idx % len(images), idx % len(texts)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(idx, pa.int64()),
                pa.array([jpegs[k][0] for k in j], pa.utf8()),
                pa.array([jpegs[k][1] for k in j], pa.binary()),
                pa.array(labels[d], pa.int64()),
                tensor_array(images[d]),
                pa.array([pngs[k] for k in d], pa.binary()),
                pa.array([texts[k] for k in t], pa.utf8()),
            ],
            schema=schema,
        )


def mixed_table(rows: int, *, tile: int | None = 64, text_chars: int | None = 512) -> pa.Table:
    """`rows` mixed rows in memory; by default small ones (64 x 64 JPEG tiles, 512 characters
    of text: about 3 KB a row) so that 100 000 of them fit a benchmark."""
    return pa.Table.from_batches(
        list(mixed_batches(0, rows, 4096, tile=tile, text_chars=text_chars)), mixed_schema()
    )


def big_mixed_parquet(
    dir: str | os.PathLike[str],
    target_bytes: int = GIB,
    *,
    file_bytes: int = 256 * MIB,
    batch_rows: int = 128,
) -> list[Path]:
    """Parquet files `part-XXXXX.parquet` in `dir` adding up to at least `target_bytes` on
    disk, each about `file_bytes`, of mixed rows (`mixed_batches`, whole JPEGs and whole
    source files: about 64 KB a row), one row group per `batch_rows` rows. Written batch by
    batch, so memory stays at the pools plus one batch. Dictionary encoding is on only for
    `name` and `label`: the repeated images and texts would otherwise shrink to a dictionary,
    which real data (all distinct) never does. Returns the files in order."""
    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    total, row = 0, 0
    while total < target_bytes:
        path = out / f"part-{len(files):05d}.parquet"
        goal = min(file_bytes, target_bytes - total)
        with pq.ParquetWriter(
            path, mixed_schema(), compression="snappy", use_dictionary=["name", "label"]
        ) as writer:
            while True:
                batch = next(mixed_batches(row, row + batch_rows, batch_rows))
                writer.write_batch(batch, row_group_size=batch_rows)
                row += batch.num_rows
                if path.stat().st_size >= goal:
                    break
        files.append(path)
        total += path.stat().st_size
    return files


def _table_bytes(table: pa.Table) -> int:
    return int(table.nbytes)


def _self_test(mixed_mib: int) -> None:
    for name, table in (
        ("digits_table", digits_table()),
        ("skimage_images_table", skimage_images_table()),
        ("stdlib_text_table", stdlib_text_table()),
        ("mixed_table(10_000)", mixed_table(10_000)),
    ):
        print(f"{name}: {table.num_rows} rows, {_table_bytes(table) / MIB:.1f} MiB in Arrow")
    print("sample images:", ", ".join(n for n, _ in skimage_images()))
    with tempfile.TemporaryDirectory(prefix="realdata-") as tmp:
        digits_path = write_parquet_by_pyarrow(digits_table(), Path(tmp) / "digits.parquet", 512)
        schema = pq.read_schema(digits_path)
        print(
            f"digits by pyarrow: {digits_path.stat().st_size} B; read back image: "
            f"{schema.field('image').type}, png metadata: {schema.field('png').metadata}"
        )
        by_hf = write_parquet_by_datasets(digits_table(), Path(tmp) / "hf", shards=2)
        schema = pq.read_schema(by_hf[0])
        print(
            f"digits by datasets: {[p.name for p in by_hf]}, "
            f"{sum(p.stat().st_size for p in by_hf)} B; read back image: "
            f"{schema.field('image').type}, png metadata: {schema.field('png').metadata}"
        )
        files = big_mixed_parquet(Path(tmp) / "mixed", mixed_mib * MIB, file_bytes=8 * MIB)
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        size = sum(f.stat().st_size for f in files)
        print(f"big_mixed_parquet({mixed_mib} MiB): {len(files)} files, {rows} rows, {size} B")


def _main(argv: Sequence[str]) -> None:
    _self_test(int(argv[0]) if argv else 16)


if __name__ == "__main__":
    _main(sys.argv[1:])
