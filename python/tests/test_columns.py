"""Typed data in and out: importers (Arrow, Hugging Face datasets, Parquet, CSV, JSON Lines,
WebDataset, MDS) on real data shipped in packages, read back as Arrow batches and NumPy
arrays, compared with each source library's own reading."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import guideloom as gl

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
realdata = pytest.importorskip("realdata")

FIXTURES = (
    Path(__file__).resolve().parents[2] / "crates" / "guideloom-import" / "tests" / "fixtures"
)


def stored(table: Any) -> Any:
    """`table` as guideloom stores it: dictionaries and large types as the plain ones."""
    fields = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_large_string(kind):
            kind = pa.string()
        if pa.types.is_large_binary(kind):
            kind = pa.binary()
        fields.append(pa.field(field.name, kind, field.nullable, field.metadata))
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def assert_same_rows(ds: gl.Dataset, table: Any, indices: list[int]) -> None:
    batch = ds.get_batch(indices)
    expected = stored(table).take(pa.array(indices, type=pa.int64())).combine_chunks()
    assert batch.schema.names == expected.schema.names
    for name in expected.schema.names:
        got, want = batch.column(name), expected.column(name)
        assert got.type == want.type or got.to_pylist() == want.to_pylist(), name
        assert got.to_pylist() == want.to_pylist(), name


def test_digits_through_arrow_come_back_as_arrays(tmp_path: Path) -> None:
    table = realdata.digits_table()
    summary = gl.import_arrow(table, tmp_path / "root", dataset_id="digits", snapshot_id="v1")
    assert summary.records == table.num_rows == 1797
    ds = gl.open(tmp_path / "root")
    assert len(ds) == 1797
    schema = ds.schema
    assert schema.field("png").metadata[b"guideloom.media"] == b"image/png"
    # The canonical tensor extension comes back as pyarrow's type (it consumes the metadata).
    tensor = schema.field("image").type
    assert isinstance(tensor, pa.FixedShapeTensorType) and list(tensor.shape) == [8, 8]
    indices = random.Random(7).sample(range(len(ds)), 64)
    assert_same_rows(ds, table, indices)
    arrays = ds.get_numpy(indices)
    images, labels = realdata.digits()
    assert arrays["image"].shape == (64, 8, 8) and arrays["image"].dtype == np.uint8
    assert np.array_equal(arrays["image"], images[indices])
    assert np.array_equal(arrays["label"], labels[indices])
    assert list(arrays["png"]) == [realdata.digit_pngs()[i] for i in indices]
    # A record is still a dict (CBOR): the tensor's packed bytes, the label, the PNG.
    record = ds[indices[0]]
    assert record["label"] == labels[indices[0]]
    assert bytes(record["image"]) == images[indices[0]].tobytes()


def test_hugging_face_datasets_and_their_parquet(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    text = realdata.stdlib_text_table(limit=300)
    hf = datasets.Dataset(text)
    gl.import_arrow(hf, tmp_path / "hf", dataset_id="stdlib", snapshot_id="v1")
    ds = gl.open(tmp_path / "hf")
    indices = list(range(0, 300, 7))
    assert ds.get_batch(indices).to_pylist() == hf.with_format("arrow")[indices].to_pylist()
    # The same rows as Parquet written by `datasets`, imported by row group.
    files = realdata.write_parquet_by_datasets(text, tmp_path / "parquet", shards=3)
    summary = gl.import_parquet(files, tmp_path / "pq", dataset_id="stdlib", snapshot_id="v1")
    assert summary.records == 300 and summary.units >= 3
    from_files = datasets.Dataset.from_parquet([str(f) for f in files])
    got = gl.open(tmp_path / "pq").get_batch(indices).to_pylist()
    assert got == from_files.with_format("arrow")[indices].to_pylist()


def test_parquet_by_pyarrow_with_images_and_row_groups(tmp_path: Path) -> None:
    table = realdata.skimage_images_table()
    path = tmp_path / "images.parquet"
    realdata.write_parquet_by_pyarrow(table, path, row_group_size=5)
    summary = gl.import_parquet(
        path, tmp_path / "root", dataset_id="img", snapshot_id="v1", unit_rows=5
    )
    assert (
        summary.records == table.num_rows and summary.units == pq.ParquetFile(path).num_row_groups
    )
    ds = gl.open(tmp_path / "root")
    assert_same_rows(ds, pq.read_table(path), list(range(table.num_rows))[::-1])
    assert ds.schema.field("jpeg").metadata[b"guideloom.media"] == b"image/jpeg"


@pytest.mark.parametrize("seed", range(6))
def test_random_tables_round_trip_through_parquet(tmp_path: Path, seed: int) -> None:
    """A property test (seeded): random columns with nulls, NaNs and extremes, written by
    pyarrow, imported, read back equal to pyarrow's own reading of the file."""
    rng = random.Random(seed)
    n = rng.randrange(1, 200)

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.2 else v

    table = pa.table(
        {
            "i8": pa.array([maybe(rng.randint(-128, 127)) for _ in range(n)], pa.int8()),
            "u64": pa.array([maybe(rng.choice([0, 2**64 - 1, rng.getrandbits(64)])) for _ in range(n)], pa.uint64()),
            "f32": pa.array([maybe(rng.choice([0.1, -0.0, float("inf"), rng.random()])) for _ in range(n)], pa.float32()),
            "f64": pa.array([rng.choice([float("nan"), 1e308, -1e-308, rng.random()]) for _ in range(n)], pa.float64()),
            "s": pa.array([maybe("".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(8)))) for _ in range(n)]),
            "b": pa.array([maybe(rng.randbytes(rng.randrange(12))) for _ in range(n)], pa.binary()),
            "l": pa.array([maybe([maybe(rng.randrange(1000)) for _ in range(rng.randrange(5))]) for _ in range(n)], pa.list_(pa.int32())),
            "st": pa.array([maybe({"a": rng.random() < 0.5, "t": maybe(rng.randrange(-5, 5))}) for _ in range(n)], pa.struct([("a", pa.bool_()), ("t", pa.int16())])),
        }
    )  # fmt: skip
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=max(1, n // 3))
    gl.import_parquet(path, tmp_path / "root", dataset_id="r", snapshot_id="v1", batch_rows=17)
    back = gl.open(tmp_path / "root").get_batch(range(n))
    source = pq.read_table(path)
    for name in table.schema.names:
        got, want = back.column(name), source.column(name).combine_chunks()
        if name == "f64":  # NaN != NaN: compare the bits
            assert got.to_numpy().tobytes() == want.to_numpy().tobytes()
        else:
            assert got.to_pylist() == want.to_pylist(), name


def test_csv_and_json_lines(tmp_path: Path) -> None:
    csv = tmp_path / "a.csv"
    csv.write_text("name,count,score\nalpha,1,0.5\nbeta,2,\ngamma,3,1.25\n")
    gl.import_csv(csv, tmp_path / "csv", dataset_id="c", snapshot_id="v1")
    assert gl.open(tmp_path / "csv").get_batch([0, 1, 2]).to_pylist() == [
        {"name": "alpha", "count": 1, "score": 0.5},
        {"name": "beta", "count": 2, "score": None},
        {"name": "gamma", "count": 3, "score": 1.25},
    ]
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"x": 1, "tags": ["a"]}\n{"x": 2, "tags": []}\n')
    gl.import_jsonl(jsonl, tmp_path / "jl", dataset_id="j", snapshot_id="v1")
    assert gl.open(tmp_path / "jl").get_batch([1, 0]).to_pylist() == [
        {"x": 2, "tags": []},
        {"x": 1, "tags": ["a"]},
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"x": 1}\n{"x": 2}\n{"x": 3\n{"x": 4}\n')
    with pytest.raises(gl.GuideloomError, match=r"bad\.jsonl:3: "):
        gl.import_jsonl(bad, tmp_path / "bad", dataset_id="j", snapshot_id="v1", batch_rows=1)


def test_webdataset_tars_as_webdataset_reads_them(tmp_path: Path) -> None:
    fixture = FIXTURES / "webdataset"
    tars = [fixture / "shard-000000.tar", fixture / "shard-000001.tar.gz"]
    summary = gl.import_webdataset(tars, tmp_path / "root", dataset_id="w", snapshot_id="v1")
    expected = json.loads((fixture / "expected.json").read_text())["tars"]
    by_file = {t["file"]: t["samples"] for t in expected}
    samples = [s for tar in tars for s in by_file[tar.name]]
    assert summary.records == len(samples)
    rows = gl.open(tmp_path / "root").get_batch(range(summary.records)).to_pylist()
    for row, sample in zip(rows, samples, strict=True):
        assert row["__key__"] == sample["__key__"]
        for field, value in row.items():
            if field == "__key__":
                continue
            want = sample["fields"].get(field)
            assert row[field] == (None if want is None else bytes.fromhex(want)), field


def test_mds_as_streaming_reads_it(tmp_path: Path) -> None:
    fixture = FIXTURES / "mds"
    summary = gl.import_mds(
        fixture / "all" / "zstd", tmp_path / "root", dataset_id="m", snapshot_id="v1"
    )
    ds = gl.open(tmp_path / "root")
    assert summary.records == len(ds) == 40
    schema = ds.schema
    assert schema.field("jpeg").metadata[b"guideloom.media"] == b"image/jpeg"
    assert schema.field("jpeg").metadata[b"guideloom.mds.encoding"] == b"jpeg"
    # What streaming's StreamingDataset read from the same files (the fixture generator
    # recorded it): bytes and str columns compared value for value.
    recorded = json.loads((fixture / "expected.json").read_text())
    expected = recorded["datasets"]["all/plain"]

    def blob(value: str) -> bytes:
        kind, _, rest = value.partition(":")
        return bytes.fromhex(rest if kind == "hex" else recorded["blobs"][int(rest)])

    rows = ds.get_batch(range(40)).to_pylist()
    samples = expected["samples"]
    assert len(rows) == len(samples) == 40
    for row, sample in zip(rows, samples, strict=True):
        for column in ("int", "int8", "int64", "uint64", "str", "str_int", "str_decimal"):
            assert row[column] == sample[column], column
        for column in ("bytes", "pkl", "jpeg", "png"):
            assert row[column] == blob(sample[column]), column
        assert row["json"] == sample["json"]["text"]
        assert np.float64(row["float64"]).tobytes().hex() == sample["float64"]["bits"]


def test_schema_changes_are_refused_and_added_columns_allowed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    gl.import_arrow(
        pa.table({"x": pa.array([1, 2], pa.int64())}), root, dataset_id="d", snapshot_id="v1"
    )
    with pytest.raises(gl.SchemaError, match="type changed from int64 to utf8"):
        gl.import_arrow(
            pa.table({"x": ["a"]}), root, dataset_id="d", snapshot_id="v2", mode="append"
        )
    more = pa.table({"x": pa.array([3], pa.int64()), "note": pa.array(["new"], pa.string())})
    gl.import_arrow(more, root, dataset_id="d", snapshot_id="v3", mode="append")
    ds = gl.open(root)
    assert ds.get_batch([0, 2]).to_pylist() == [{"x": 1, "note": None}, {"x": 3, "note": "new"}]
    assert gl.open(root, snapshot="v1").schema.names == ["x"]


def test_a_schemaless_dataset_has_no_batches(tmp_path: Path) -> None:
    shard = gl.write_shard([{"a": 1}], tmp_path / "root", work_id="w")
    gl.publish(tmp_path / "root", [shard], dataset_id="d", snapshot_id="v1")
    ds = gl.open(tmp_path / "root")
    assert ds.schema is None
    with pytest.raises(gl.UnsupportedError, match="no schema"):
        ds.get_batch([0])


def test_fan_out_on_dask_and_ray(tmp_path: Path) -> None:
    table = realdata.stdlib_text_table(limit=400)
    path = tmp_path / "t.parquet"
    realdata.write_parquet_by_pyarrow(table, path, row_group_size=50)
    distributed = pytest.importorskip("dask.distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        summary = gl.import_parquet(
            path, tmp_path / "dask", dataset_id="d", snapshot_id="v1", executor=client, unit_rows=50
        )
    assert summary.units == 8 and summary.records == 400
    # One work id per unit: eight tasks, eight work ids under shards/.
    assert len(list((tmp_path / "dask" / "shards").iterdir())) == 8
    assert gl.open(tmp_path / "dask").get_batch(range(400)).to_pylist() == table.to_pylist()
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        summary = gl.import_parquet(
            path, tmp_path / "ray", dataset_id="d", snapshot_id="v1", executor="ray", unit_rows=50
        )
    finally:
        ray.shutdown()
    assert gl.open(tmp_path / "ray").get_batch(range(400)).to_pylist() == table.to_pylist()


def test_torch_columns_collate(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import guideloom.torch as gt

    table = realdata.digits_table()
    gl.import_arrow(table, tmp_path / "root", dataset_id="digits", snapshot_id="v1")
    ds = gt.Dataset(str(tmp_path / "root"), columns=True, shuffle=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, collate_fn=gt.collate_columns)
    first = next(iter(loader))
    images, labels = realdata.digits()
    assert first["image"].shape == (32, 8, 8)
    assert torch.equal(first["image"], torch.from_numpy(images[:32]))
    assert torch.equal(first["label"], torch.from_numpy(labels[:32]))
    assert len(first["png"]) == 32
    # An annotation set joined as a column, through the read-ahead of the batch sampler.
    gl.Root(str(tmp_path / "root")).publish_annotations(
        "even", "v1", [i % 2 == 0 for i in range(1797)]
    )
    joined = gt.Dataset(str(tmp_path / "root"), columns=True, annotations=["even"], seed=3)
    sampler = joined.batch_sampler(16)
    loader = torch.utils.data.DataLoader(
        joined, batch_sampler=sampler, collate_fn=gt.collate_columns, num_workers=0
    )
    plan = joined.plan(16)
    for k, batch in enumerate(loader):
        assert batch["even"].tolist() == [i % 2 == 0 for i in plan.batch(k)]
        assert torch.equal(batch["label"], torch.from_numpy(labels[plan.batch(k)]))
        if k == 3:
            break


def test_export_parquet_and_jsonl_round_trip(tmp_path: Path) -> None:
    table = realdata.skimage_images_table()
    gl.import_arrow(table, tmp_path / "root", dataset_id="img", snapshot_id="v1")
    records, size = gl.export_parquet(tmp_path / "root", tmp_path / "out.parquet")
    assert records == table.num_rows and size == (tmp_path / "out.parquet").stat().st_size
    back = pq.read_table(tmp_path / "out.parquet")
    assert back.to_pylist() == table.to_pylist()
    assert back.schema.field("jpeg").metadata[b"guideloom.media"] == b"image/jpeg"
    gl.export_jsonl(tmp_path / "root", tmp_path / "out.jsonl", start=2, stop=4)
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [x["name"] for x in lines] == table.column("name").to_pylist()[2:4]
    assert bytes.fromhex(lines[0]["jpeg"]) == table.column("jpeg")[2].as_py()
    with pytest.raises(gl.GuideloomError):
        gl.export_parquet(tmp_path / "root", tmp_path / "out.parquet")  # never replaced


def test_annotations_join_as_columns(tmp_path: Path) -> None:
    table = realdata.digits_table()
    gl.import_arrow(table, tmp_path / "root", dataset_id="digits", snapshot_id="v1")
    root = gl.Root(str(tmp_path / "root"))
    labels = [int(x) % 2 for x in table.column("label").to_pylist()]
    root.publish_annotations("parity", "v1", labels)
    root.publish_annotations("parity", "v2", [1 - x for x in labels])
    ds = gl.open(tmp_path / "root")
    batch = ds.get_batch([5, 0, 9], annotations=["parity", ("parity", "v1")])
    assert batch.schema.names[-2:] == ["parity", "parity"]
    assert batch.column(batch.num_columns - 2).to_pylist() == [1 - labels[i] for i in (5, 0, 9)]
    assert batch.column(batch.num_columns - 1).to_pylist() == [labels[i] for i in (5, 0, 9)]
    meta = batch.schema.field(batch.num_columns - 1).metadata
    assert meta[b"guideloom.annotation"] == b"parity/v1"


@pytest.mark.parametrize("seed", range(4))
def test_random_csv_reads_as_pyarrow_reads_it(tmp_path: Path, seed: int) -> None:
    """Property (seeded): a random table written by pyarrow's CSV writer, imported, reads
    back as pyarrow's CSV reader reads the file."""
    from pyarrow import csv as pacsv

    rng = random.Random(seed)
    n = rng.randrange(1, 300)

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.15 else v

    table = pa.table(
        {
            "i": pa.array([maybe(rng.randrange(-(2**63), 2**63)) for _ in range(n)], pa.int64()),
            "f": pa.array([maybe(rng.randrange(-10**6, 10**6) / 8 + 0.5) for _ in range(n)], pa.float64()),
            "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
            "s": pa.array(["".join(rng.choice("abcxyz ,\"'") for _ in range(rng.randrange(1, 9))) + "." for _ in range(n)]),
        }
    )  # fmt: skip
    path = tmp_path / "t.csv"
    pacsv.write_csv(table, path)
    gl.import_csv(path, tmp_path / "root", dataset_id="c", snapshot_id="v1", batch_rows=37)
    got = gl.open(tmp_path / "root").get_batch(range(n)).to_pylist()
    assert got == pacsv.read_csv(path).to_pylist() == table.to_pylist()


@pytest.mark.parametrize("seed", range(4))
def test_random_json_lines_read_as_json_reads_them(tmp_path: Path, seed: int) -> None:
    """Property (seeded): random JSON objects (ints, floats, text with escapes, bools, nulls,
    lists, absent keys), imported, read back as `json.loads` reads each line."""
    rng = random.Random(seed)
    n = rng.randrange(1, 200)
    objects = []
    for _ in range(n):
        obj: dict[str, Any] = {
            "id": rng.randrange(-(2**53), 2**53),
            "score": rng.randrange(-(10**6), 10**6) / 4 + 0.25,
            "text": "".join(rng.choice('ab "\\\n\té€😀') for _ in range(rng.randrange(10))),
            "ok": rng.random() < 0.5,
            "tags": [rng.randrange(100) for _ in range(rng.randrange(4))],
        }
        for key in ("score", "ok", "tags"):
            if rng.random() < 0.2:
                del obj[key]
        objects.append(obj)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    gl.import_jsonl(path, tmp_path / "root", dataset_id="j", snapshot_id="v1", batch_rows=19)
    got = gl.open(tmp_path / "root").get_batch(range(n)).to_pylist()
    read = [json.loads(line) for line in path.read_text().splitlines()]
    expected = [{k: o.get(k) for k in ("id", "score", "text", "ok", "tags")} for o in read]
    assert got == expected


@pytest.mark.parametrize("seed", range(3))
def test_random_webdataset_tars_read_as_webdataset_reads_them(tmp_path: Path, seed: int) -> None:
    """Property (seeded): random samples written by `webdataset.TarWriter` (random bytes per
    extension, some extensions missing), imported, read back as `webdataset.WebDataset`
    iterates the tars."""
    wds = pytest.importorskip("webdataset")
    rng = random.Random(seed)
    tars = []
    for t in range(2):
        path = tmp_path / f"shard-{t}.tar"
        with wds.TarWriter(str(path)) as sink:
            for k in range(rng.randrange(1, 25)):
                sample: dict[str, Any] = {"__key__": f"s{t}-{k:04d}"}
                for ext in ("bin", "seg.png", "json"):
                    if ext == "bin" or rng.random() < 0.8:
                        sample[ext] = rng.randbytes(rng.randrange(0, 300))
                sink.write(sample)
        tars.append(path)
    fields = ["bin", "json", "seg.png"]
    summary = gl.import_webdataset(
        tars, tmp_path / "root", dataset_id="w", snapshot_id="v1", fields=fields
    )
    rows = gl.open(tmp_path / "root").get_batch(range(summary.records)).to_pylist()
    read = [dict(s) for tar in tars for s in wds.WebDataset(str(tar), shardshuffle=False)]
    assert len(rows) == len(read) == summary.records
    for row, sample in zip(rows, read, strict=True):
        assert row["__key__"] == sample["__key__"]
        for field in fields:
            assert row.get(field) == sample.get(field), (sample["__key__"], field)
