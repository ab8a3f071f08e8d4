//! Rows → records → rows: every value comes back exactly, for every stored type.

use std::sync::Arc;

use arrow_array::builder::{
    FixedSizeListBuilder, Float32Builder, ListBuilder, StringDictionaryBuilder, UInt8Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, FixedSizeBinaryArray, Float16Array,
    Float64Array, Int8Array, Int64Array, LargeStringArray, RecordBatch, StringArray, StructArray,
    TimestampMicrosecondArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use ciborium::cbor;
use guideloom_arrow::{BatchDecoder, Error, RowEncoder, from_arrow, to_arrow};
use proptest::prelude::*;

fn round_trip(batch: &RecordBatch) -> RecordBatch {
    let encoder = RowEncoder::new(&batch.schema()).unwrap();
    let prepared = encoder.prepare(batch).unwrap();
    let compiled = encoder.schema().compile().unwrap();
    let mut decoder = BatchDecoder::new(encoder.schema()).unwrap();
    let mut record = Vec::new();
    for row in 0..prepared.num_rows() {
        record.clear();
        encoder.encode(&prepared, row, &mut record).unwrap();
        compiled.check(&record).unwrap();
        decoder.push(&record).unwrap();
    }
    let decoded = decoder.finish().unwrap();
    assert_eq!(decoded, prepared);
    decoded
}

fn column(name: &str, array: ArrayRef) -> (Field, ArrayRef) {
    (Field::new(name, array.data_type().clone(), true), array)
}

#[test]
fn every_type_with_nulls_and_nesting() {
    let mut tensor = FixedSizeListBuilder::new(UInt8Builder::new(), 4);
    for i in 0..3u8 {
        tensor.values().append_slice(&[i, i + 1, i + 2, i + 3]);
        tensor.append(true);
    }
    let mut boxes = ListBuilder::new(Float32Builder::new());
    boxes.values().append_slice(&[0.5, f32::NAN]);
    boxes.append(true);
    boxes.append(false);
    boxes.values().append_value(1.0);
    boxes.values().append_null();
    boxes.append(true);
    let mut names = StringDictionaryBuilder::<Int32Type>::new();
    names.append_value("cat");
    names.append_null();
    names.append_value("cat");
    let meta = StructArray::from(vec![
        (
            Arc::new(Field::new("source", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])) as ArrayRef,
        ),
        (
            Arc::new(Field::new("n", DataType::Int8, true)),
            Arc::new(Int8Array::from(vec![1, -128, 127])) as ArrayRef,
        ),
    ]);
    let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = [
        column(
            "bool",
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
        ),
        column(
            "i64",
            Arc::new(Int64Array::from(vec![i64::MIN, 0, i64::MAX])),
        ),
        column("u64", Arc::new(UInt64Array::from(vec![u64::MAX, 0, 1]))),
        column(
            "f16",
            Arc::new(Float16Array::from(vec![
                half::f16::from_f32(0.5),
                half::f16::NAN,
                half::f16::NEG_ZERO,
            ])),
        ),
        column(
            "f64",
            Arc::new(Float64Array::from(vec![
                Some(-0.0),
                None,
                Some(f64::MIN_POSITIVE),
            ])),
        ),
        column(
            "text",
            Arc::new(LargeStringArray::from(vec![Some("héllo"), Some(""), None])),
        ),
        column(
            "bytes",
            Arc::new(BinaryArray::from(vec![
                Some(&b"\x00\xff"[..]),
                None,
                Some(b""),
            ])),
        ),
        column(
            "fixed",
            Arc::new(
                FixedSizeBinaryArray::try_from_iter([b"ab", b"cd", b"ef"].into_iter()).unwrap(),
            ),
        ),
        column("date", Arc::new(Date32Array::from(vec![-1, 0, 19_000]))),
        column(
            "ts",
            Arc::new(TimestampMicrosecondArray::from(vec![1, -2, 3]).with_timezone("UTC")),
        ),
        column("tensor", Arc::new(tensor.finish())),
        column("boxes", Arc::new(boxes.finish())),
        column("name", Arc::new(names.finish())),
        column("meta", Arc::new(meta)),
    ]
    .into_iter()
    .unzip();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let decoded = round_trip(&batch);
    // The dictionary and the large string are stored as plain strings.
    assert_eq!(
        decoded
            .schema()
            .field_with_name("name")
            .unwrap()
            .data_type(),
        &DataType::Utf8
    );
    assert_eq!(
        decoded
            .schema()
            .field_with_name("text")
            .unwrap()
            .data_type(),
        &DataType::Utf8
    );
    // A slice (an offset into the buffers) encodes the same rows.
    round_trip(&batch.slice(1, 2));
}

#[test]
fn metadata_and_schema_survive() {
    let field = Field::new("png", DataType::Binary, false)
        .with_metadata([("guideloom.media".to_owned(), "image/png".to_owned())].into());
    let schema =
        Schema::new(vec![field]).with_metadata([("source".to_owned(), "digits".to_owned())].into());
    let ours = from_arrow(&schema).unwrap();
    assert_eq!(ours.fields[0].media(), Some("image/png"));
    assert_eq!(to_arrow(&ours), schema);
}

#[test]
fn unsupported_types_are_named() {
    let schema = Schema::new(vec![Field::new(
        "s",
        DataType::Struct(vec![Field::new("d", DataType::Decimal128(5, 2), true)].into()),
        true,
    )]);
    match from_arrow(&schema) {
        Err(Error::Unsupported { path, .. }) => assert_eq!(path, "s.d"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_foreign_record_poisons_the_decoder() {
    let schema = from_arrow(&Schema::new(vec![Field::new("x", DataType::Int8, false)])).unwrap();
    let mut decoder = BatchDecoder::new(&schema).unwrap();
    let mut record = Vec::new();
    ciborium::into_writer(&cbor!({"x" => 1000}).unwrap(), &mut record).unwrap();
    match decoder.push(&record) {
        Err(Error::Mismatch { index: 0, source }) => assert_eq!(source.path, "x"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(decoder.finish(), Err(Error::Poisoned)));
}

proptest! {
    #[test]
    fn random_tables_round_trip(
        ints in proptest::collection::vec(proptest::option::of(any::<i64>()), 0..20),
        floats in proptest::collection::vec(any::<f64>(), 20),
        texts in proptest::collection::vec(proptest::option::of(".{0,8}"), 20),
        blobs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..16), 20),
        lists in proptest::collection::vec(proptest::option::of(proptest::collection::vec(proptest::option::of(any::<u16>()), 0..6)), 20),
    ) {
        let n = ints.len();
        let mut list = ListBuilder::new(arrow_array::builder::UInt16Builder::new());
        for l in &lists[..n] {
            match l {
                Some(items) => {
                    for i in items { list.values().append_option(*i); }
                    list.append(true);
                }
                None => list.append(false),
            }
        }
        let batch = RecordBatch::try_from_iter([
            ("i", Arc::new(Int64Array::from(ints.clone())) as ArrayRef),
            ("f", Arc::new(Float64Array::from(floats[..n].to_vec())) as ArrayRef),
            ("t", Arc::new(StringArray::from(texts[..n].to_vec())) as ArrayRef),
            ("b", Arc::new(BinaryArray::from_iter_values(blobs[..n].iter())) as ArrayRef),
            ("l", Arc::new(list.finish()) as ArrayRef),
        ]).unwrap();
        let decoded = round_trip(&batch);
        prop_assert_eq!(decoded.num_rows(), n);
        prop_assert!(decoded.column(1).len() == n);
    }
}
