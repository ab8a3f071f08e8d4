//! The WebDataset reader against webdataset itself: the fixture tars of
//! `python/tests/fixtures_gen/webdataset_fixture.py` (written by `webdataset.TarWriter` and
//! `tarfile`) read back value for value as `webdataset.WebDataset(url)` yields them
//! (`expected.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_array::{Array, BinaryArray, RecordBatch, StringArray};
use arrow_schema::DataType;
use guideloom_import::webdataset::{EXTENSION_KEY, WebDatasetOptions, WebDatasetReader};
use guideloom_import::{Error, MEDIA_KEY};

/// One sample: its key and its fields' bytes (absent fields left out).
type Sample = (String, BTreeMap<String, Vec<u8>>);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/webdataset")
}

fn hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex {text:?}");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// What webdataset yields for `file` (one of the fixture tars), and the extensions in the
/// order they first come.
fn expected(file: &str) -> (Vec<Sample>, Vec<String>) {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).expect("expected.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    let tars = json["tars"].as_array().expect("tars");
    let tar = tars
        .iter()
        .find(|t| t["file"] == file)
        .expect("the tar in expected.json");
    let mut order = Vec::new();
    let samples = tar["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| {
            let key = s["__key__"].as_str().expect("key").to_owned();
            let fields = s["fields"].as_object().expect("fields");
            for ext in fields.keys() {
                if !order.contains(ext) {
                    order.push(ext.clone());
                }
            }
            let fields = fields
                .iter()
                .map(|(ext, v)| (ext.clone(), hex(v.as_str().expect("hex"))))
                .collect();
            (key, fields)
        })
        .collect();
    (samples, order)
}

/// The rows of `batches` as samples (a null field left out; a Utf8 field as its bytes).
fn samples(batches: &[RecordBatch]) -> Vec<Sample> {
    let mut out = Vec::new();
    for batch in batches {
        let keys = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("keys");
        assert_eq!(keys.null_count(), 0);
        for row in 0..batch.num_rows() {
            let mut fields = BTreeMap::new();
            for (field, column) in batch.schema().fields().iter().zip(batch.columns()).skip(1) {
                if column.is_null(row) {
                    continue;
                }
                let value = match column.data_type() {
                    DataType::Binary => column
                        .as_any()
                        .downcast_ref::<BinaryArray>()
                        .expect("binary")
                        .value(row)
                        .to_vec(),
                    DataType::Utf8 => column
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .expect("utf8")
                        .value(row)
                        .as_bytes()
                        .to_vec(),
                    other => panic!("unexpected column type {other}"),
                };
                fields.insert(field.name().clone(), value);
            }
            out.push((keys.value(row).to_owned(), fields));
        }
    }
    out
}

fn shards() -> Vec<PathBuf> {
    vec![
        fixtures().join("shard-000000.tar"),
        fixtures().join("shard-000001.tar.gz"),
    ]
}

fn read_all(reader: &WebDatasetReader) -> Vec<RecordBatch> {
    reader
        .batches()
        .collect::<Result<Vec<_>, _>>()
        .expect("batches")
}

#[test]
fn shards_read_as_webdataset_reads_them() {
    let reader = WebDatasetReader::open(&shards(), WebDatasetOptions::default()).expect("open");
    let schema = reader.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["__key__", "cls", "jpg", "json", "seg.png", "txt"]);
    assert_eq!(schema.field(0).data_type(), &DataType::Utf8);
    assert!(!schema.field(0).is_nullable());
    let media = [
        ("cls", "text/plain"),
        ("jpg", "image/jpeg"),
        ("json", "application/json"),
        ("seg.png", "image/png"),
        ("txt", "text/plain"),
    ];
    for (field, (ext, mime)) in schema.fields().iter().skip(1).zip(media) {
        assert_eq!(field.data_type(), &DataType::Binary, "{ext}");
        assert!(field.is_nullable(), "{ext}");
        assert_eq!(
            field.metadata().get(MEDIA_KEY).map(String::as_str),
            Some(mime),
            "{ext}"
        );
        assert_eq!(
            field.metadata().get(EXTENSION_KEY).map(String::as_str),
            Some(ext),
            "{ext}"
        );
    }

    let batches = read_all(&reader);
    assert!(batches.iter().all(|b| b.schema() == schema));
    let (mut want, _) = expected("shard-000000.tar");
    want.extend(expected("shard-000001.tar.gz").0);
    assert_eq!(want.len(), 30);
    let got = samples(&batches);
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(&want) {
        assert_eq!(got, want, "sample {}", want.0);
    }
    // The fixture's particular samples: a directory in a key, a missing field (a null), an
    // empty member (an empty value, not a null).
    assert_eq!(got[3].0, "val/sample000003");
    assert!(!got[5].1.contains_key("txt") && got[5].1.len() == 4);
    assert!(!got[20].1.contains_key("json"));
    assert_eq!(got[21].1.get("txt").map(Vec::len), Some(0));
}

#[test]
fn each_tar_and_small_batches_give_the_same_rows() {
    let options = WebDatasetOptions {
        batch_rows: 4,
        ..WebDatasetOptions::default()
    };
    let reader = WebDatasetReader::open(&shards(), options).expect("open");
    let batches = read_all(&reader);
    // 10 rows then 20: 4 + 4 + 2, then 5 × 4 (a batch never spans two tars).
    let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
    assert_eq!(sizes, [4, 4, 2, 4, 4, 4, 4, 4]);
    let whole = WebDatasetReader::open(&shards(), WebDatasetOptions::default()).expect("open");
    assert_eq!(samples(&batches), samples(&read_all(&whole)));

    for (tar, file) in ["shard-000000.tar", "shard-000001.tar.gz"]
        .into_iter()
        .enumerate()
    {
        let one: Vec<RecordBatch> = reader
            .tar_batches(tar)
            .expect("tar")
            .collect::<Result<_, _>>()
            .expect("batches");
        assert_eq!(samples(&one), expected(file).0, "{file}");
    }
    assert!(matches!(
        reader.tar_batches(2),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn text_fields_are_utf8_columns() {
    let text = ["cls", "json", "txt"].map(String::from).to_vec();
    let options = WebDatasetOptions {
        text_fields: text,
        batch_rows: 7,
        ..WebDatasetOptions::default()
    };
    let reader = WebDatasetReader::open(&shards(), options).expect("open");
    let schema = reader.schema();
    for field in schema.fields().iter().skip(1) {
        let want = if field.name() == "jpg" || field.name() == "seg.png" {
            DataType::Binary
        } else {
            DataType::Utf8
        };
        assert_eq!(field.data_type(), &want, "{}", field.name());
    }
    let batches = read_all(&reader);
    let txt = batches[0]
        .column_by_name("txt")
        .expect("txt")
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("utf8");
    assert_eq!(txt.value(1), "caption 1: a café ☕ number 1");
    assert!(txt.is_null(5));
    let (mut want, _) = expected("shard-000000.tar");
    want.extend(expected("shard-000001.tar.gz").0);
    assert_eq!(samples(&batches), want);

    // A text field must be a field.
    let options = WebDatasetOptions {
        text_fields: vec!["caption".into()],
        ..WebDatasetOptions::default()
    };
    let err = WebDatasetReader::open(&shards(), options).expect_err("not a field");
    assert!(
        matches!(&err, Error::Unsupported { detail, .. } if detail.contains("caption")),
        "{err}"
    );
}

#[test]
fn edge_tars_group_as_webdataset_does() {
    for file in ["edge-pax.tar", "edge-gnu.tar"] {
        let (want, fields) = expected(file);
        let tars = [fixtures().join(file)];
        let reader = WebDatasetReader::with_fields(&tars, &fields, WebDatasetOptions::default())
            .expect("with_fields");
        let got = samples(&read_all(&reader));
        assert_eq!(got, want, "{file}");
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        // Non-consecutive `a`: two samples, as webdataset yields them; `part/.hidden` keyed
        // on its directory; `__key__.txt` a sample keyed `__key__`; `e.` an empty extension.
        assert_eq!(keys.iter().filter(|k| **k == "a").count(), 2, "{file}");
        assert!(
            keys.contains(&"part/") && keys.contains(&"__key__") && keys.contains(&"café"),
            "{file}"
        );
        assert!(keys.iter().any(|k| k.len() > 100), "{file}: the long name");
        assert!(
            fields.contains(&String::new()),
            "{file}: the empty extension"
        );
        assert!(
            !keys.contains(&"__index__") && !keys.contains(&"README") && !keys.contains(&"link"),
            "{file}"
        );
    }
}

#[test]
fn open_infers_the_first_sample_and_names_a_later_extension() {
    let tar = fixtures().join("edge-pax.tar");
    let reader = WebDatasetReader::open(std::slice::from_ref(&tar), WebDatasetOptions::default())
        .expect("open");
    assert_eq!(reader.fields(), ["txt", "cls"]);
    let err = reader
        .batches()
        .find_map(Result::err)
        .expect("an unknown extension");
    match &err {
        Error::Unsupported { path, detail } => {
            assert_eq!(path, &tar.join("part/.hidden"), "{err}");
            assert!(
                detail.contains("\"hidden\"") && detail.contains("with_fields"),
                "{err}"
            );
        }
        other => panic!("{other}"),
    }
}

#[test]
fn field_lists_and_options_are_checked() {
    let tars = shards();
    let options = WebDatasetOptions::default;
    for fields in [&["jpg", "jpg"][..], &["JPG"], &["__key__"], &["a/b"]] {
        let fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        let err = WebDatasetReader::with_fields(&tars, &fields, options()).expect_err("refused");
        assert!(
            matches!(&err, Error::Unsupported { detail, .. } if detail.contains(&format!("{:?}", fields[0]))),
            "{err}"
        );
    }
    let zero = WebDatasetOptions {
        batch_rows: 0,
        ..options()
    };
    assert!(matches!(
        WebDatasetReader::open(&tars, zero),
        Err(Error::Unsupported { .. })
    ));
    let huge = WebDatasetOptions {
        max_member_bytes: 1 << 31,
        ..options()
    };
    assert!(matches!(
        WebDatasetReader::open(&tars, huge),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        WebDatasetReader::open(&[], options()),
        Err(Error::Unsupported { .. })
    ));
    // With a field list, nothing is read: a missing tar fails when its batches are asked for.
    let missing = [fixtures().join("missing.tar")];
    let reader =
        WebDatasetReader::with_fields(&missing, &["txt".to_owned()], options()).expect("lazy");
    assert!(matches!(reader.tar_batches(0), Err(Error::Io { path, .. }) if path == missing[0]));
}

#[test]
fn one_task_per_tar_runs_on_its_own_thread() {
    fn send<T: Send>(_: &T) {}
    let reader = WebDatasetReader::open(&shards(), WebDatasetOptions::default()).expect("open");
    let batches = reader.tar_batches(0).expect("tar 0");
    send(&batches);
    let counts: Vec<usize> = std::thread::scope(|scope| {
        let tasks: Vec<_> = (0..reader.tars().len())
            .map(|tar| {
                let reader = &reader;
                scope.spawn(move || {
                    let batches = reader.tar_batches(tar).expect("tar");
                    batches.map(|b| b.expect("batch").num_rows()).sum::<usize>()
                })
            })
            .collect();
        tasks.into_iter().map(|t| t.join().expect("task")).collect()
    });
    assert_eq!(counts, [10, 20]);
}
