//! `guideloom import` and `export`: Parquet files (written here by the `parquet` crate) into a
//! local root, read back with `info`, `get` and `cat`, exported to Parquet and read back
//! equal; an append with a changed column type and a CSV line that does not parse are refused
//! with one line, before anything is written.

use crate::common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray, Float64Array, Int64Array, RecordBatch, StringArray};
use common::{fails, files, guideloom, json, ok};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;

/// Rows `offset..offset + n`: an id, a caption with nulls, a score and bytes.
fn table(offset: i64, n: i64) -> RecordBatch {
    let ids = offset..offset + n;
    RecordBatch::try_from_iter_with_nullable([
        (
            "id",
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
            false,
        ),
        (
            "caption",
            Arc::new(StringArray::from_iter(
                ids.clone()
                    .map(|i| (i % 5 != 0).then(|| format!("caption {i}"))),
            )),
            true,
        ),
        (
            "score",
            Arc::new(Float64Array::from_iter_values(
                ids.clone().map(|i| i as f64 / 4.0),
            )),
            false,
        ),
        (
            "bytes",
            Arc::new(BinaryArray::from_iter_values(ids.map(|i| {
                i.to_le_bytes()[..usize::try_from(i % 8).unwrap()].to_vec()
            }))),
            false,
        ),
    ])
    .unwrap()
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(40))
        .build();
    let mut writer =
        ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn import_parquet_then_info_get_cat_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    write_parquet(&a, &table(0, 200));
    write_parquet(&b, &table(200, 100));
    let root = dir.path().join("root");
    let root = root.to_str().unwrap();

    let out = ok(guideloom(&[
        "import",
        "parquet",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        root,
        "--dataset",
        "captions",
        "--snapshot",
        "v1",
        "--shard-bytes",
        "2048",
        "--batch-rows",
        "16",
    ]));
    assert!(out.starts_with("imported 300 records ("), "{out}");
    assert!(out.contains("from 2 input(s)"), "{out}");
    assert!(
        out.contains("as snapshot v1 (#1) of dataset captions"),
        "{out}"
    );

    let info = ok(guideloom(&["info", root]));
    assert!(info.contains("300 records"), "{info}");

    let record = json(&ok(guideloom(&["get", root, "215"])));
    assert_eq!(
        record,
        serde_json::json!({
            "id": 215,
            "caption": null,
            "score": 53.75,
            "bytes": {"hex": "d7000000000000"},
        })
    );
    let cat = ok(guideloom(&["cat", root, "--start", "298"]));
    let lines: Vec<serde_json::Value> = cat.lines().map(json).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["caption"], "caption 299");

    // Parquet out, read back equal to what went in.
    let exported = dir.path().join("out.parquet");
    let text = ok(guideloom(&[
        "export",
        "parquet",
        root,
        exported.to_str().unwrap(),
        "--batch-records",
        "33",
    ]));
    assert!(
        text.starts_with("exported 300 records of snapshot v1"),
        "{text}"
    );
    let back = read_parquet(&exported);
    let back = arrow_select::concat::concat_batches(&back[0].schema(), &back).unwrap();
    assert_eq!(back, table(0, 300));
    // An existing output is refused, untouched.
    let again = fails(guideloom(&[
        "export",
        "jsonl",
        root,
        exported.to_str().unwrap(),
    ]));
    assert!(again.contains("already exists"), "{again}");

    // --json: the counts, the shards and the schema.
    let c = dir.path().join("c.parquet");
    write_parquet(&c, &table(300, 10));
    let doc = json(&ok(guideloom(&[
        "import",
        "parquet",
        "--root",
        root,
        c.to_str().unwrap(),
        "--dataset",
        "captions",
        "--snapshot",
        "v2",
        "--mode",
        "append",
        "--json",
    ])));
    assert_eq!(doc["records"], 10);
    assert_eq!(doc["mode"], "append");
    assert_eq!(doc["work_id"], "import-v2");
    assert_eq!(doc["schema"]["fields"][0]["name"], "id");
    let info = ok(guideloom(&["info", root]));
    assert!(info.contains("310 records"), "{info}");
}

#[test]
fn an_append_with_another_column_type_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1.parquet");
    write_parquet(&v1, &table(0, 10));
    let root_dir = dir.path().join("root");
    let root = root_dir.to_str().unwrap();
    let import = |input: &Path, snapshot: &str| {
        guideloom(&[
            "import",
            "parquet",
            input.to_str().unwrap(),
            root,
            "--dataset",
            "d",
            "--snapshot",
            snapshot,
            "--mode",
            "append",
        ])
    };
    ok(import(&v1, "v1"));
    let v2 = dir.path().join("v2.parquet");
    let retyped =
        RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["one"])) as ArrayRef)])
            .unwrap();
    write_parquet(&v2, &retyped);
    let before = files(&root_dir);
    let err = fails(import(&v2, "v2"));
    assert!(err.contains("schema change at \"id\""), "{err}");
    assert_eq!(files(&root_dir), before, "nothing written");
}

#[test]
fn a_csv_line_that_does_not_parse_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "id,note\n1,a\n2,\"b\nc\"\nthree,d\n").unwrap();
    let root = dir.path().join("root");
    let err = fails(guideloom(&[
        "import",
        "csv",
        csv.to_str().unwrap(),
        root.to_str().unwrap(),
        "--dataset",
        "d",
        "--snapshot",
        "v1",
        "--infer-rows",
        "2",
    ]));
    assert!(
        err.starts_with(&format!("error: {}:5: ", csv.display())),
        "{err}"
    );
    assert!(err.contains("three"), "{err}");
    assert!(
        files(&root).iter().all(|f| !f.starts_with("log/")),
        "nothing published"
    );
}
