//! Export: Parquet imported into a root, exported again as Parquet (read back equal to the
//! original, types and field metadata included) and as JSON Lines; ranges; refusals.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, StringDictionaryBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use guideloom::{PublishMode, Publisher};
use guideloom_import::Error;
use guideloom_import::export::{ExportBatches, ExportOptions, export_jsonl, export_parquet};
use guideloom_import::parquet::ParquetInput;
use guideloom_import::sink::{ImportOptions, ImportSink, publish};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const ROWS: usize = 300;

/// A table with a media field, a tensor (fixed-shape extension), a zoned timestamp, nulls and
/// dictionary-encoded strings.
fn table() -> RecordBatch {
    let mut tensor = FixedSizeListBuilder::new(Float32Builder::new(), 4)
        .with_field(Arc::new(Field::new("item", DataType::Float32, false)));
    let mut label = StringDictionaryBuilder::<Int32Type>::new();
    for i in 0..ROWS {
        for k in 0..4 {
            tensor.values().append_value(i as f32 * 4.0 + k as f32);
        }
        tensor.append(true);
        label.append_value(["a", "b"][i % 2]);
    }
    let tensor_field = Field::new("tensor", tensor_type(), false).with_metadata(
        [
            (
                "ARROW:extension:name".to_owned(),
                "arrow.fixed_shape_tensor".to_owned(),
            ),
            (
                "ARROW:extension:metadata".to_owned(),
                r#"{"shape":[2,2]}"#.to_owned(),
            ),
        ]
        .into(),
    );
    let fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("image", DataType::Binary, false)
            .with_metadata([("guideloom.media".to_owned(), "image/png".to_owned())].into()),
        Field::new("caption", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
        tensor_field,
        Field::new(
            "at",
            DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, Some("+02:00".into())),
            false,
        ),
        Field::new(
            "label",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            false,
        ),
    ];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..ROWS as i64)),
        Arc::new(BinaryArray::from_iter_values(
            (0..ROWS).map(|i| vec![0x89, b'P', u8::try_from(i % 256).unwrap()]),
        )),
        Arc::new(StringArray::from_iter(
            (0..ROWS).map(|i| (i % 4 != 0).then(|| format!("caption {i}"))),
        )),
        Arc::new(Float64Array::from_iter(
            (0..ROWS).map(|i| (i % 7 != 0).then_some(i as f64 * 0.25)),
        )),
        Arc::new(tensor.finish()),
        Arc::new(
            TimestampMillisecondArray::from_iter_values((0..ROWS).map(|i| i as i64 * 1000))
                .with_timezone("+02:00"),
        ),
        Arc::new(label.finish()),
    ];
    RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns).unwrap()
}

fn tensor_type() -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, false)), 4)
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let mut writer =
        ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

fn read_parquet(path: &Path) -> RecordBatch {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap()
}

/// `batch` with its dictionary column `label` as plain strings (what an import stores).
fn normalised(batch: &RecordBatch) -> RecordBatch {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut columns = batch.columns().to_vec();
    let i = batch.schema().index_of("label").unwrap();
    columns[i] = arrow_cast::cast(&columns[i], &DataType::Utf8).unwrap();
    fields[i] = Field::new("label", DataType::Utf8, false);
    RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns).unwrap()
}

/// A root holding `table()` as snapshot v1, imported from Parquet.
fn imported_root(dir: &Path) -> Publisher {
    let source = dir.join("source.parquet");
    write_parquet(&source, &table());
    let input = ParquetInput::open(&[source]).unwrap();
    let publisher = Publisher::open(dir.join("root").to_str().unwrap()).unwrap();
    let options = ImportOptions::new("w").shard_bytes(2048);
    let mut sink = ImportSink::new(publisher.clone(), input.schema().clone(), options).unwrap();
    sink.write(input.batches()).unwrap();
    let shards = sink.finish().shards;
    assert!(shards.len() > 3);
    let schema = input.schema().clone();
    publish(&publisher, "ds", "v1", shards, PublishMode::Full, schema).unwrap();
    publisher
}

#[test]
fn parquet_out_reads_back_as_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let publisher = imported_root(dir.path());
    let ds = publisher.dataset().unwrap();
    let out = dir.path().join("out.parquet");
    let options = ExportOptions {
        batch_records: 41,
        range: None,
    };
    let exported = export_parquet(&ds, &out, &options).unwrap();
    assert_eq!(exported.records, ROWS as u64);
    assert_eq!(exported.bytes, std::fs::metadata(&out).unwrap().len());
    let back = read_parquet(&out);
    // Field metadata (media type, tensor extension) and the zone come back too.
    assert_eq!(back, normalised(&table()));
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
    // Readable by others, as any file the user writes (not the temporary file's 0600).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o644, 0o644, "{mode:o}");
    }
}

#[test]
fn a_range_exports_those_records_and_an_end_past_the_last_is_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let publisher = imported_root(dir.path());
    let ds = publisher.dataset().unwrap();
    let out = dir.path().join("range.parquet");
    let options = ExportOptions {
        batch_records: 7,
        range: Some(250..1000),
    };
    assert_eq!(export_parquet(&ds, &out, &options).unwrap().records, 50);
    assert_eq!(read_parquet(&out), normalised(&table()).slice(250, 50));

    let past = ExportOptions {
        batch_records: 7,
        range: Some(301..400),
    };
    let err = ExportBatches::new(&ds, &past).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn jsonl_out_has_every_field_and_bytes_as_hex() {
    let dir = tempfile::tempdir().unwrap();
    let publisher = imported_root(dir.path());
    let ds = publisher.dataset().unwrap();
    let out = dir.path().join("out.jsonl");
    let exported = export_jsonl(&ds, &out, &ExportOptions::default()).unwrap();
    assert_eq!(exported.records, ROWS as u64);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), ROWS);
    let first = &lines[4];
    assert_eq!(first["id"], 4);
    assert_eq!(first["image"], "895004");
    assert_eq!(first["caption"], serde_json::Value::Null);
    assert_eq!(first["score"], 1.0);
    assert_eq!(first["tensor"], serde_json::json!([16.0, 17.0, 18.0, 19.0]));
    assert_eq!(first["label"], "a");
    assert!(
        first["at"]
            .as_str()
            .unwrap()
            .starts_with("1970-01-01T02:00:04"),
        "{first}"
    );
}

#[test]
fn an_existing_output_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let publisher = imported_root(dir.path());
    let ds = publisher.dataset().unwrap();
    let out = dir.path().join("taken.parquet");
    std::fs::write(&out, b"keep me").unwrap();
    let err = export_parquet(&ds, &out, &ExportOptions::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, .. } if *path == out),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
}

#[test]
fn a_schemaless_snapshot_is_refused() {
    let publisher = Publisher::open("memory://export-schemaless").unwrap();
    let shard = publisher.write_shard("w", 0, ["a", "b"]).unwrap();
    publisher
        .publish("ds", "v1", vec![shard], PublishMode::Full)
        .unwrap();
    let ds = publisher.dataset().unwrap();
    let err = ExportBatches::new(&ds, &ExportOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("no schema"), "{err}");
}
