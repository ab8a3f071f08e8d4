//! MDS directories written by `streaming.MDSWriter` (tests/fixtures/mds, made by
//! python/tests/fixtures_gen/mds_fixture.py) read value for value as `streaming` reads them,
//! batch by batch and shard by shard (the hostile cases are in mds_hostile.rs).

use std::fs;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use guideloom_import::MEDIA_KEY;
use guideloom_import::mds::{ENCODING_KEY, MdsReader};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mds")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bytes_value(bytes: &[u8]) -> Value {
    Value::String(format!("hex:{}", hex(bytes)))
}

/// The expected samples of `name`, `blob:N` references replaced by `hex:...`.
fn expected(name: &str) -> (Vec<(String, String)>, Vec<Value>) {
    let text = fs::read_to_string(fixtures().join("expected.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    let blobs = all["blobs"].as_array().unwrap().clone();
    let mut dataset = &all["datasets"][name];
    if let Some(same) = dataset.get("same_as") {
        dataset = &all["datasets"][same.as_str().unwrap()];
    }
    let columns = dataset["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c[0].as_str().unwrap().to_owned(),
                c[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    fn resolve(v: &mut Value, blobs: &[Value]) {
        match v {
            Value::String(s) if s.starts_with("blob:") => {
                let i: usize = s[5..].parse().unwrap();
                *s = format!("hex:{}", blobs[i].as_str().unwrap());
            }
            Value::Array(items) => items.iter_mut().for_each(|i| resolve(i, blobs)),
            Value::Object(map) => map.values_mut().for_each(|i| resolve(i, blobs)),
            _ => {}
        }
    }
    let mut samples = dataset["samples"].as_array().unwrap().clone();
    samples.iter_mut().for_each(|s| resolve(s, &blobs));
    (columns, samples)
}

/// The little-endian bytes of a primitive array's values.
fn le_bytes(a: &dyn Array) -> Vec<u8> {
    macro_rules! le {
        ($t:ty) => {
            a.as_primitive::<$t>()
                .values()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect()
        };
    }
    match a.data_type() {
        DataType::UInt8 => le!(UInt8Type),
        DataType::Int8 => le!(Int8Type),
        DataType::UInt16 => le!(UInt16Type),
        DataType::Int16 => le!(Int16Type),
        DataType::Float16 => le!(Float16Type),
        DataType::UInt32 => le!(UInt32Type),
        DataType::Int32 => le!(Int32Type),
        DataType::Float32 => le!(Float32Type),
        DataType::UInt64 => le!(UInt64Type),
        DataType::Int64 => le!(Int64Type),
        DataType::Float64 => le!(Float64Type),
        other => panic!("not a primitive: {other}"),
    }
}

fn pil_value(a: &dyn Array, row: usize) -> Value {
    let s = a.as_struct();
    json!({
        "width": s.column(0).as_primitive::<UInt32Type>().value(row),
        "height": s.column(1).as_primitive::<UInt32Type>().value(row),
        "mode": s.column(2).as_string::<i32>().value(row),
        "data": bytes_value(s.column(3).as_binary::<i32>().value(row)),
    })
}

/// Row `row` of column `a` (stored with MDS encoding `encoding`) in the form of expected.json.
fn value(a: &dyn Array, row: usize, encoding: &str, shape: Option<&Value>) -> Value {
    match encoding {
        "bytes" | "pkl" | "jpeg" | "png" => bytes_value(a.as_binary::<i32>().value(row)),
        "str" | "str_decimal" => Value::String(a.as_string::<i32>().value(row).to_owned()),
        "json" => {
            let text = a.as_string::<i32>().value(row);
            json!({"text": text, "value": serde_json::from_str::<Value>(text).unwrap()})
        }
        "float16" | "float32" | "float64" | "str_float" => {
            json!({"bits": hex(&le_bytes(&a.slice(row, 1)))})
        }
        "pil" => pil_value(a, row),
        "jpeg_array" | "jpegarray" | "list[jpeg]" | "list[png]" => {
            let items = a.as_list::<i32>().value(row);
            let items = items.as_binary::<i32>();
            Value::Array(items.iter().map(|b| bytes_value(b.unwrap())).collect())
        }
        "list[pil]" => {
            let items = a.as_list::<i32>().value(row);
            Value::Array((0..items.len()).map(|i| pil_value(&items, i)).collect())
        }
        "ndarray" | "ndarray:float32" => {
            let s = a.as_struct();
            let shape = s.column(1).as_list::<i32>().value(row);
            let shape: Vec<i64> = shape.as_primitive::<Int64Type>().values().to_vec();
            json!({
                "dtype": s.column(0).as_string::<i32>().value(row),
                "shape": shape,
                "data": bytes_value(s.column(2).as_binary::<i32>().value(row)),
            })
        }
        e if e.starts_with("ndarray:") => {
            let values = a.as_fixed_size_list().value(row);
            let dtype = e.split(':').nth(1).unwrap();
            json!({"dtype": dtype, "shape": shape.unwrap(), "data": bytes_value(&le_bytes(&values))})
        }
        _ => {
            let v = le_bytes(&a.slice(row, 1));
            match a.data_type() {
                DataType::UInt64 => json!(u64::from_le_bytes(v.try_into().unwrap())),
                DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => {
                    let mut b = [0u8; 8];
                    b[..v.len()].copy_from_slice(&v);
                    json!(u64::from_le_bytes(b))
                }
                _ => {
                    let fill = if v.last().unwrap() & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    };
                    let mut b = [fill; 8];
                    b[..v.len()].copy_from_slice(&v);
                    json!(i64::from_le_bytes(b))
                }
            }
        }
    }
}

/// The rows of `batches` in the form of expected.json.
fn rows(reader: &MdsReader, batches: &[RecordBatch]) -> Vec<Value> {
    let schema = reader.schema();
    let mut out = Vec::new();
    for batch in batches {
        assert_eq!(batch.schema(), schema);
        for row in 0..batch.num_rows() {
            let mut sample = serde_json::Map::new();
            for (field, column) in schema.fields().iter().zip(batch.columns()) {
                let encoding = &field.metadata()[ENCODING_KEY];
                let shape = field
                    .metadata()
                    .get("ARROW:extension:metadata")
                    .map(|m| serde_json::from_str::<Value>(m).unwrap()["shape"].clone());
                let v = value(column.as_ref(), row, encoding, shape.as_ref());
                sample.insert(field.name().clone(), v);
            }
            out.push(Value::Object(sample));
        }
    }
    out
}

fn compare(name: &str, got: &[Value], want: &[Value]) {
    assert_eq!(got.len(), want.len(), "{name}: row count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        for (column, wv) in w.as_object().unwrap() {
            assert_eq!(&g[column], wv, "{name}: row {i}, column {column}");
        }
        assert_eq!(
            g.as_object().unwrap().len(),
            w.as_object().unwrap().len(),
            "{name}: row {i}"
        );
    }
}

const DATASETS: [&str; 9] = [
    "all/plain",
    "all/zstd",
    "compressions/br",
    "compressions/bz2",
    "compressions/gz",
    "compressions/snappy",
    "compressions/zstd:7",
    "merged",
    "partitioned",
];

#[test]
fn every_value_is_read_as_streaming_reads_it() {
    for name in DATASETS {
        let (columns, want) = expected(name);
        let reader = MdsReader::open(&fixtures().join(name)).unwrap();
        let names: Vec<(String, String)> = reader
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.metadata()[ENCODING_KEY].clone()))
            .collect();
        assert_eq!(names, columns, "{name}: columns");
        assert_eq!(reader.len(), want.len() as u64, "{name}");
        let batches: Vec<RecordBatch> = reader.batches(1000).collect::<Result<_, _>>().unwrap();
        compare(name, &rows(&reader, &batches), &want);
    }
}

#[test]
fn shard_batches_of_three_rows_give_the_same_rows() {
    for name in DATASETS {
        let (_, want) = expected(name);
        let reader = MdsReader::open(&fixtures().join(name)).unwrap();
        assert!(reader.shard_count() >= 2, "{name}: a single shard");
        let mut batches = Vec::new();
        let mut total = 0;
        for shard in 0..reader.shard_count() {
            let mut n = 0;
            for batch in reader.shard_batches(shard, 3).unwrap() {
                let batch = batch.unwrap();
                assert!((1..=3).contains(&batch.num_rows()));
                n += batch.num_rows() as u64;
                batches.push(batch);
            }
            assert_eq!(n, reader.shard_len(shard), "{name}: shard {shard}");
            total += n;
        }
        assert_eq!(total, reader.len());
        compare(name, &rows(&reader, &batches), &want);
        // batches(3) as well, and batch_rows 0 reads as 1.
        let again: Vec<RecordBatch> = reader.batches(3).collect::<Result<_, _>>().unwrap();
        assert_eq!(again, batches);
        assert!(
            reader
                .shard_batches(0, 0)
                .unwrap()
                .all(|b| b.unwrap().num_rows() == 1)
        );
    }
}

#[test]
fn readers_and_batches_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<MdsReader>();
    send_sync::<guideloom_import::mds::ShardBatches<'_>>();
    send_sync::<guideloom_import::mds::Batches<'_>>();
    // One shard per thread, as an import fans out.
    let reader = MdsReader::open(&fixtures().join("all/zstd")).unwrap();
    let counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..reader.shard_count())
            .map(|i| {
                let reader = &reader;
                s.spawn(move || {
                    let batches = reader.shard_batches(i, 5).unwrap();
                    batches.map(|b| b.unwrap().num_rows() as u64).sum()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(counts.iter().sum::<u64>(), reader.len());
}

#[test]
fn schema_types_and_metadata() {
    let reader = MdsReader::open(&fixtures().join("all/plain")).unwrap();
    let schema = reader.schema();
    let field = |n: &str| schema.field_with_name(n).unwrap().clone();
    let media = |n: &str| field(n).metadata().get(MEDIA_KEY).cloned();
    for f in schema.fields() {
        assert!(!f.is_nullable(), "{}", f.name());
        assert!(f.metadata().contains_key(ENCODING_KEY), "{}", f.name());
    }
    let types = [
        ("bytes", DataType::Binary),
        ("str", DataType::Utf8),
        ("int", DataType::Int64),
        ("int8", DataType::Int8),
        ("uint64", DataType::UInt64),
        ("float16", DataType::Float16),
        ("float32", DataType::Float32),
        ("str_int", DataType::Int64),
        ("str_float", DataType::Float64),
        ("str_decimal", DataType::Utf8),
        ("json", DataType::Utf8),
        ("pkl", DataType::Binary),
        ("jpeg", DataType::Binary),
        ("png", DataType::Binary),
    ];
    for (name, t) in types {
        assert_eq!(field(name).data_type(), &t, "{name}");
    }
    assert_eq!(media("str_decimal").as_deref(), Some("text/x-decimal"));
    assert_eq!(media("json").as_deref(), Some("application/json"));
    assert_eq!(media("pkl").as_deref(), Some("application/x-python-pickle"));
    assert_eq!(media("jpeg").as_deref(), Some("image/jpeg"));
    assert_eq!(media("png").as_deref(), Some("image/png"));
    assert_eq!(media("pil").as_deref(), Some("application/x-mds-pil"));
    assert_eq!(media("nd").as_deref(), Some("application/x-ndarray"));
    assert_eq!(media("str"), None);
    let DataType::List(item) = field("list_png").data_type().clone() else {
        panic!()
    };
    assert_eq!(item.metadata()[MEDIA_KEY], "image/png");
    let DataType::List(item) = field("jpeg_array").data_type().clone() else {
        panic!()
    };
    assert_eq!(item.metadata()[MEDIA_KEY], "image/jpeg");
    let t = field("tensor_i16");
    let DataType::FixedSizeList(item, 6) = t.data_type() else {
        panic!("{t:?}")
    };
    assert_eq!(item.data_type(), &DataType::Int16);
    assert_eq!(
        t.metadata()["ARROW:extension:name"],
        "arrow.fixed_shape_tensor"
    );
    assert_eq!(
        t.metadata()["ARROW:extension:metadata"],
        r#"{"shape":[2,3]}"#
    );
    assert_eq!(t.metadata()[ENCODING_KEY], "ndarray:int16:2,3");
    let DataType::Struct(fields) = field("nd").data_type().clone() else {
        panic!()
    };
    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["dtype", "shape", "data"]);
    let DataType::Struct(fields) = field("pil").data_type().clone() else {
        panic!()
    };
    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["width", "height", "mode", "data"]);
}
