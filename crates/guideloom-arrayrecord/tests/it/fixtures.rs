//! Files the `array_record` Python package wrote (tests/fixtures, made by generate.py), read
//! with no Python: every record of every codec, the request counts, the corrupted twins, and
//! byte-identical rewrites where the codec is deterministic across implementations.

use std::path::{Path, PathBuf};

use guideloom_arrayrecord::{
    ArrayRecordReadOptions, ArrayRecordReader, ArrayRecordWriter, ArrayRecordWriterOptions,
    AsyncArrayRecordReader, Error,
};
use guideloom_io::{Backend, CountingReader, MmapIo, PreadIo, SeekIo, SyncReader};
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(dir().join("fixtures.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The i-th record of a rule, as generate.py defines it.
fn record(rule: &str, i: u64) -> Vec<u8> {
    match rule {
        "small" => format!("{i}:")
            .repeat(usize::try_from(i % 7).unwrap())
            .into_bytes(),
        "big" => {
            vec![u8::try_from((i * 37 + 11) % 251).unwrap(); 70000 + usize::try_from(i).unwrap()]
        }
        _ => panic!("unknown rule {rule}"),
    }
}

fn valid() -> Vec<(String, String, String, u64, String)> {
    manifest()["valid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["file"].as_str().unwrap().to_owned(),
                v["options"].as_str().unwrap().to_owned(),
                v["rule"].as_str().unwrap().to_owned(),
                v["count"].as_u64().unwrap(),
                v["writer_options"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn readers(path: &PathBuf) -> Vec<Box<dyn SyncReader>> {
    vec![
        SeekIo::new().open(path).unwrap(),
        PreadIo::new().open(path).unwrap(),
        MmapIo::new().open(path).unwrap(),
    ]
}

#[test]
fn every_python_written_file_reads_on_every_local_backend() {
    for (file, _, rule, count, writer_options) in valid() {
        let path = dir().join(&file);
        for reader in readers(&path) {
            for options in [
                ArrayRecordReadOptions::default(),
                ArrayRecordReadOptions::default().with_tail_len(0),
            ] {
                let ar = ArrayRecordReader::open(&reader, &options).unwrap();
                assert_eq!(ar.len(), count, "{file}");
                assert_eq!(ar.layout().writer_options(), writer_options, "{file}");
                if file.starts_with("transposed") {
                    let err = ar.get(0).unwrap_err();
                    assert!(
                        matches!(&err, Error::Unsupported { what, .. } if what.contains("transposed")),
                        "{err}"
                    );
                    continue;
                }
                for i in 0..count {
                    assert_eq!(ar.get(i).unwrap(), record(&rule, i), "{file} record {i}");
                }
                let backwards: Vec<u64> = (0..count).rev().chain(0..count).collect();
                let got = ar.get_many(&backwards).unwrap();
                for (g, &i) in got.iter().zip(&backwards) {
                    assert_eq!(g, &record(&rule, i), "{file} record {i}");
                }
                let err = ar.get(count).unwrap_err();
                assert!(matches!(err, Error::IndexOutOfRange { .. }), "{err}");
            }
        }
    }
}

#[tokio::test]
async fn the_async_reader_reads_them_too() {
    for (file, _, rule, count, _) in valid() {
        if file.starts_with("transposed") {
            continue;
        }
        let reader = MmapIo::new().open_async(&dir().join(&file)).await.unwrap();
        let ar = AsyncArrayRecordReader::open(reader, &ArrayRecordReadOptions::default())
            .await
            .unwrap();
        assert_eq!(ar.len(), count);
        for i in 0..count {
            assert_eq!(ar.get(i).await.unwrap(), record(&rule, i), "{file} {i}");
        }
        let all: Vec<u64> = (0..count).collect();
        let got = ar.get_many(&all).await.unwrap();
        assert_eq!(got.len() as u64, count);
    }
}

#[test]
fn opening_costs_one_read_and_a_record_one_more() {
    let path = dir().join("default.array_record");
    let counted = CountingReader::new(PreadIo::new().open(&path).unwrap());
    let stats = std::sync::Arc::clone(counted.stats());
    let ar = ArrayRecordReader::open(counted, &ArrayRecordReadOptions::default()).unwrap();
    assert_eq!(stats.snapshot().requests, 1, "open = one tail read");
    let before = stats.snapshot();
    ar.get(5).unwrap();
    let one = stats.snapshot() - before;
    assert_eq!(one.requests, 1, "get = one ranged read");
    let chunk = ar.layout().chunks()[5];
    assert_eq!(
        one.bytes_received,
        chunk.end - chunk.offset,
        "only the chunk's bytes"
    );
    ar.get(5).unwrap();
    assert_eq!(
        (stats.snapshot() - before).requests,
        1,
        "a cached chunk costs nothing"
    );
    let before = stats.snapshot();
    ar.get_many(&[1, 9, 3, 9, 12, 5]).unwrap();
    assert_eq!(
        (stats.snapshot() - before).requests,
        1,
        "a batch = one read_ranges"
    );

    // When the footer is not in the tail, opening takes one more read.
    let counted = CountingReader::new(PreadIo::new().open(&path).unwrap());
    let stats = std::sync::Arc::clone(counted.stats());
    let small_tail = ArrayRecordReadOptions::default().with_tail_len(0);
    ArrayRecordReader::open(counted, &small_tail).unwrap();
    assert_eq!(stats.snapshot().requests, 2);
    assert!(stats.snapshot().bytes_received < 2 * 65536);
}

#[test]
fn corrupted_twins_give_typed_errors() {
    for twin in manifest()["corrupt"].as_array().unwrap() {
        let file = twin["file"].as_str().unwrap();
        let what = twin["what"].as_str().unwrap();
        let path = dir().join(file);
        for reader in readers(&path) {
            let err = match ArrayRecordReader::open(reader, &ArrayRecordReadOptions::default()) {
                Err(e) => e,
                Ok(ar) => {
                    let all: Vec<u64> = (0..ar.len()).collect();
                    ar.get_many(&all).expect_err(file)
                }
            };
            let text = err.to_string();
            assert!(matches!(err, Error::Corrupt { .. }), "{file}: {text}");
            assert!(
                text.contains(file),
                "{file}: the error names the file: {text}"
            );
            let word = what.split(' ').next().unwrap();
            assert!(
                what == "truncated" || text.contains(word),
                "{file}: expected a {what} error, got {text}"
            );
        }
    }
}

/// Writing the same records with the same options gives the package's bytes exactly, for
/// every codec of the fixtures (zstd through the same libzstd, Snappy and Brotli on these
/// small inputs): the block-boundary arithmetic, padding, footer and postscript included.
#[test]
fn rust_writes_the_same_bytes_as_the_package() {
    let mut compared = 0;
    for (file, options, rule, count, _) in valid() {
        let Ok(opts) = options.parse::<ArrayRecordWriterOptions>() else {
            assert!(file.starts_with("transposed"), "{file}");
            continue;
        };
        let mut w = ArrayRecordWriter::new(Vec::new(), opts);
        for i in 0..count {
            w.write(&record(&rule, i)).unwrap();
        }
        let ours = w.finish().unwrap();
        let theirs = std::fs::read(dir().join(&file)).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{file}");
        let first_diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);
        assert_eq!(first_diff, None, "{file}: first differing byte");
        compared += 1;
    }
    assert_eq!(compared, 8);
}
