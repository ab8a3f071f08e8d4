//! Parquet in: files written by the `parquet` crate, imported into a root, read back through
//! `Dataset::get_many` and `BatchDecoder`, compared value for value with the `parquet`
//! crate's own reading of the same files (dictionaries normalised to their values).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::builder::{
    BinaryBuilder, Float32Builder, Int32Builder, ListBuilder, StringBuilder,
    StringDictionaryBuilder,
};
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    StructArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Fields, Schema as ArrowSchema};
use guideloom::{PublishMode, Publisher};
use guideloom_arrow::BatchDecoder;
use guideloom_import::Error;
use guideloom_import::parquet::{ParquetInput, ParquetOptions};
use guideloom_import::sink::{ImportOptions, ImportSink, Imported, publish};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use proptest::prelude::*;

/// Writes `batches` as one Parquet file, row groups of `group_rows` rows.
fn write_parquet(path: &Path, batches: &[RecordBatch], group_rows: usize) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group_rows))
        .build();
    let file = File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
    for b in batches {
        writer.write(b).unwrap();
    }
    writer.close().unwrap();
}

/// The `parquet` crate's own reading of `paths`, one batch, dictionaries cast to values.
fn read_parquet(paths: &[PathBuf]) -> RecordBatch {
    let mut batches = Vec::new();
    for p in paths {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(p).unwrap())
            .unwrap()
            .build()
            .unwrap();
        batches.extend(reader.map(Result::unwrap));
    }
    let batch = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
    normalise(&batch)
}

/// Dictionary columns (top level) as plain value columns: what an import stores.
fn normalise(batch: &RecordBatch) -> RecordBatch {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Dictionary(_, values) => {
                let cast = arrow_cast::cast(column, values).unwrap();
                fields.push(
                    Field::new(field.name(), (**values).clone(), field.is_nullable())
                        .with_metadata(field.metadata().clone()),
                );
                columns.push(cast);
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(Arc::clone(column));
            }
        }
    }
    let schema = ArrowSchema::new_with_metadata(fields, batch.schema().metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

/// Every record of the root's latest snapshot, decoded under its schema.
fn read_back(publisher: &Publisher) -> RecordBatch {
    let ds = publisher.dataset().unwrap();
    let schema = ds.snapshot().manifest.schema.clone().expect("a schema");
    let mut decoder = BatchDecoder::new(&schema).unwrap();
    let indices: Vec<u64> = (0..ds.len()).collect();
    for record in ds.get_many(&indices).unwrap() {
        decoder.push(&record).unwrap();
    }
    decoder.finish().unwrap()
}

/// Imports `paths` into `publisher`'s root as snapshot `snapshot` (one sink per unit).
fn import(
    publisher: &Publisher,
    paths: &[PathBuf],
    snapshot: &str,
    mode: PublishMode,
    shard_bytes: u64,
    batch_rows: usize,
) -> guideloom_import::Result<Imported> {
    let input = ParquetInput::open_with(paths, ParquetOptions { batch_rows })?;
    let mut all = Imported::default();
    for (n, (file, groups)) in input.units().into_iter().enumerate() {
        let options = ImportOptions::new(format!("{snapshot}-{n}")).shard_bytes(shard_bytes);
        let mut sink = ImportSink::new(publisher.clone(), input.schema().clone(), options)?;
        sink.count_input(input.bytes(file, groups.clone()));
        sink.write(input.row_groups(file, groups)?)?;
        all.extend(sink.finish());
    }
    let schema = input.schema().clone();
    publish(publisher, "ds", snapshot, all.shards.clone(), mode, schema)?;
    Ok(all)
}

const ROWS: usize = 350;

/// Mixed columns: int, float, utf8 with nulls, binary, list<float32>, struct, timestamp with
/// a zone, and dictionary-encoded strings.
fn mixed_batch(offset: usize, rows: usize) -> RecordBatch {
    let ids = Int64Array::from_iter_values((offset..offset + rows).map(|i| i as i64 * 7 - 1000));
    let scores = Float64Array::from_iter(
        (offset..offset + rows).map(|i| (i % 5 != 0).then(|| i as f64 / 3.0 - 50.0)),
    );
    let text = StringArray::from_iter(
        (offset..offset + rows).map(|i| (i % 3 != 1).then(|| format!("caption {i} é ✓"))),
    );
    let mut blob = BinaryBuilder::new();
    for i in offset..offset + rows {
        blob.append_value(vec![u8::try_from(i % 256).unwrap(); i % 17]);
    }
    let mut emb = ListBuilder::new(Float32Builder::new());
    for i in offset..offset + rows {
        for k in 0..(i % 4) {
            emb.values().append_value(i as f32 + k as f32 / 8.0);
        }
        emb.append(i % 11 != 0);
    }
    let mut source = StringBuilder::new();
    let mut n = Int32Builder::new();
    for i in offset..offset + rows {
        source.append_value(format!("src-{}", i % 4));
        n.append_option((i % 2 == 0).then(|| i32::try_from(i).unwrap()));
    }
    let meta = StructArray::new(
        Fields::from(vec![
            Field::new("source", DataType::Utf8, false),
            Field::new("n", DataType::Int32, true),
        ]),
        vec![Arc::new(source.finish()) as ArrayRef, Arc::new(n.finish())],
        None,
    );
    let ts = TimestampMicrosecondArray::from_iter_values(
        (offset..offset + rows).map(|i| 1_700_000_000_000_000 + i as i64 * 1_000_003),
    )
    .with_timezone("UTC");
    let mut label = StringDictionaryBuilder::<Int32Type>::new();
    for i in offset..offset + rows {
        if i % 13 == 0 {
            label.append_null();
        } else {
            label.append_value(["cat", "dog", "bird"][i % 3]);
        }
    }
    let fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("score", DataType::Float64, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("blob", DataType::Binary, false)
            .with_metadata([("guideloom.media".to_owned(), "image/png".to_owned())].into()),
        Field::new("emb", emb_type(), true),
        Field::new("meta", meta.data_type().clone(), false),
        Field::new("ts", ts.data_type().clone(), false),
        Field::new(
            "label",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
    ];
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(fields)),
        vec![
            Arc::new(ids),
            Arc::new(scores),
            Arc::new(text),
            Arc::new(blob.finish()),
            Arc::new(emb.finish()),
            Arc::new(meta),
            Arc::new(ts),
            Arc::new(label.finish()),
        ],
    )
    .unwrap()
}

fn emb_type() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Float32, true)))
}

#[test]
fn mixed_columns_over_row_groups_and_files_read_back_value_for_value() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    write_parquet(&a, &[mixed_batch(0, 200), mixed_batch(200, 150)], 64);
    write_parquet(&b, &[mixed_batch(ROWS, 90)], 40);
    let paths = vec![a.clone(), b.clone()];

    let input = ParquetInput::open(&paths).unwrap();
    assert_eq!(input.row_group_count(0), 6, "350 rows in groups of 64");
    assert_eq!(input.row_group_count(1), 3);
    assert_eq!(input.num_rows(), 440);
    assert_eq!(
        input.split_units(100).len(),
        2 + 2,
        "{:?}",
        input.split_units(100)
    );

    let root = dir.path().join("root");
    let publisher = Publisher::open(root.to_str().unwrap()).unwrap();
    // Small shards and batches: many shards, rows carried across batch and shard ends.
    let imported = import(&publisher, &paths, "v1", PublishMode::Full, 4096, 37).unwrap();
    assert_eq!(imported.records, 440);
    assert!(
        imported.shards.len() > 4,
        "{} shards",
        imported.shards.len()
    );
    assert!(imported.input_bytes > 0 && imported.payload_bytes > 0);
    let sizes: u64 = imported.shards.iter().map(|s| s.size).sum();
    assert_eq!(imported.shard_bytes, sizes);

    let expected = read_parquet(&paths);
    let got = read_back(&publisher);
    assert_eq!(got.schema(), expected.schema());
    assert_eq!(got, expected);

    // The snapshot declares the schema, and every shard carries it.
    let ds = publisher.dataset().unwrap();
    let schema = ds.snapshot().manifest.schema.clone().unwrap();
    assert_eq!(&schema, input.schema());
    assert_eq!(schema.field("blob").unwrap().media(), Some("image/png"));
}

#[test]
fn a_file_of_another_schema_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    write_parquet(&a, &[mixed_batch(0, 10)], 64);
    let other =
        RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)])
            .unwrap();
    write_parquet(&b, &[other], 64);
    let err = ParquetInput::open(&[a, b.clone()]).unwrap_err();
    assert!(
        matches!(&err, Error::SchemaDiffers { path, .. } if *path == b),
        "{err}"
    );
    assert!(err.to_string().contains("b.parquet"), "{err}");
}

#[test]
fn an_unstored_type_is_refused_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let batch = RecordBatch::try_from_iter([(
        "price",
        Arc::new(
            arrow_array::Decimal128Array::from(vec![1234])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ) as ArrayRef,
    )])
    .unwrap();
    write_parquet(&a, &[batch], 64);
    let err = ParquetInput::open(&[a]).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("a.parquet") && text.contains("price"),
        "{text}"
    );
}

#[test]
fn an_append_with_a_changed_column_type_is_a_schema_change() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1.parquet");
    let v2 = dir.path().join("v2.parquet");
    let ints = RecordBatch::try_from_iter([(
        "label",
        Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef,
    )])
    .unwrap();
    let texts = RecordBatch::try_from_iter([(
        "label",
        Arc::new(StringArray::from(vec!["one"])) as ArrayRef,
    )])
    .unwrap();
    write_parquet(&v1, &[ints], 64);
    write_parquet(&v2, &[texts], 64);
    let publisher = Publisher::open(dir.path().join("root").to_str().unwrap()).unwrap();
    import(&publisher, &[v1], "v1", PublishMode::Full, 1 << 20, 1024).unwrap();
    let err = import(&publisher, &[v2], "v2", PublishMode::Append, 1 << 20, 1024).unwrap_err();
    let Error::Publish { source, .. } = &err else {
        panic!("expected a publication error, got {err}");
    };
    assert!(
        matches!(
            **source,
            guideloom::Error::Publish(guideloom::publish::Error::SchemaChange { .. })
        ),
        "{source:?}"
    );
    assert!(err.to_string().contains("label"), "{err}");
    assert_eq!(publisher.latest().unwrap().id(), "v1");
}

#[test]
fn a_batch_of_another_schema_is_refused_by_the_sink() {
    let publisher = Publisher::open("memory://import-batch-schema").unwrap();
    let batch = mixed_batch(0, 4);
    let schema = guideloom_arrow::from_arrow(&batch.schema()).unwrap();
    let mut sink = ImportSink::new(publisher, schema, ImportOptions::new("w")).unwrap();
    let other =
        RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)])
            .unwrap();
    let err = sink.write([Ok(batch), Ok(other)]).unwrap_err();
    assert!(matches!(err, Error::SchemaDiffers { .. }), "{err}");
    // The shard being written when the batch came is left out.
    assert!(sink.imported().shards.is_empty());
}

static ROOTS: AtomicU64 = AtomicU64::new(0);

/// A small table of random ints, floats (NaN, -0.0, infinities included), strings, binaries,
/// with nulls.
fn table() -> impl Strategy<Value = RecordBatch> {
    let float = prop_oneof![
        Just(f64::NAN),
        Just(-0.0),
        Just(0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE / 2.0),
        any::<f64>().prop_filter("canonical NaN only", |f| !f.is_nan()),
    ];
    let row = (
        any::<i64>(),
        proptest::option::of(any::<i32>()),
        proptest::option::of(float),
        proptest::option::of(".{0,12}"),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24)),
    );
    proptest::collection::vec(row, 0..60).prop_map(|rows| {
        RecordBatch::try_from_iter_with_nullable([
            (
                "i64",
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
                false,
            ),
            (
                "i32",
                Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.1))),
                true,
            ),
            (
                "f64",
                Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.2))),
                true,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.3.clone()))),
                true,
            ),
            (
                "b",
                Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.4.clone()))),
                true,
            ),
        ])
        .unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_tables_round_trip(batch in table(), group in 1usize..40, shard in 64u64..2048) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        write_parquet(&path, std::slice::from_ref(&batch), group);
        let n = ROOTS.fetch_add(1, Ordering::Relaxed);
        let publisher = Publisher::open(&format!("memory://import-prop-{n}")).unwrap();
        let imported = import(&publisher, &[path], "v1", PublishMode::Full, shard, 7).unwrap();
        prop_assert_eq!(imported.records, batch.num_rows() as u64);
        if batch.num_rows() > 0 {
            // Bit for bit: NaN, -0.0 and infinities included (Arrow compares value bytes).
            prop_assert_eq!(read_back(&publisher), batch);
        }
    }
}

/// Column names with dots (`seg.png` of a WebDataset, `a.b` of a flattened pandas frame) are
/// names like any other.
#[test]
fn dotted_column_names_import() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dots.parquet");
    let batch = RecordBatch::try_from_iter([
        ("a.b", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            "seg.png",
            Arc::new(BinaryArray::from_iter_values([b"x", b"y"])),
        ),
    ])
    .unwrap();
    write_parquet(&path, std::slice::from_ref(&batch), 10);
    let publisher = Publisher::open("memory://import-dotted-names").unwrap();
    import(&publisher, &[path], "v1", PublishMode::Full, 1 << 20, 16).unwrap();
    assert_eq!(read_back(&publisher), batch);
}
