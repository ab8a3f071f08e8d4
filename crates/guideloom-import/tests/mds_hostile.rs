//! Hostile MDS directories (made from the fixtures of tests/fixtures/mds or by hand): each
//! refused with the right error kind, naming the file (and the sample and column), never a
//! panic.

use std::fs;
use std::path::{Path, PathBuf};

use guideloom_import::Error;
use guideloom_import::mds::MdsReader;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mds")
}

/// A copy of fixture `name` in a fresh temporary directory.
fn copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().join(name);
    for entry in fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    tmp
}

fn edit_index(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("index.json");
    let mut index: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut index);
    fs::write(path, serde_json::to_string(&index).unwrap()).unwrap();
}

/// Reads every batch of `dir`, the first error returned.
fn read_all(dir: &Path) -> Result<usize, Error> {
    let reader = MdsReader::open(dir)?;
    let mut rows = 0;
    for batch in reader.batches(7) {
        rows += batch?.num_rows();
    }
    Ok(rows)
}

#[track_caller]
fn assert_corrupt(result: Result<usize, Error>, file: &str, words: &str) {
    match result {
        Err(Error::Corrupt { path, detail }) => {
            assert!(path.ends_with(file), "{path:?} is not {file}: {detail}");
            assert!(detail.contains(words), "{detail:?} lacks {words:?}");
        }
        other => panic!("expected Corrupt naming {file}, got {other:?}"),
    }
}

#[track_caller]
fn assert_unsupported(result: Result<usize, Error>, file: &str, words: &str) {
    match result {
        Err(Error::Unsupported { path, detail }) => {
            assert!(path.ends_with(file), "{path:?} is not {file}: {detail}");
            assert!(detail.contains(words), "{detail:?} lacks {words:?}");
        }
        other => panic!("expected Unsupported naming {file}, got {other:?}"),
    }
}

/// An MDS shard file: `[n][n + 1 offsets][samples]` (no config).
fn shard_file(samples: &[Vec<u8>]) -> Vec<u8> {
    let n = u32::try_from(samples.len()).unwrap();
    let mut offsets = vec![4 + 4 * (n + 1)];
    for s in samples {
        offsets.push(offsets.last().unwrap() + u32::try_from(s.len()).unwrap());
    }
    let mut out = n.to_le_bytes().to_vec();
    offsets.iter().for_each(|o| out.extend(o.to_le_bytes()));
    samples.iter().for_each(|s| out.extend(s));
    out
}

/// A one-shard dataset of `columns` (name, encoding, size) holding `data`, `samples` declared.
fn dataset(columns: &[(&str, &str, Option<u64>)], data: &[u8], samples: u64) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("shard.00000.mds"), data).unwrap();
    let index = json!({"version": 2, "shards": [{
        "format": "mds", "version": 2, "compression": null, "hashes": [], "size_limit": null,
        "column_names": columns.iter().map(|c| c.0).collect::<Vec<_>>(),
        "column_encodings": columns.iter().map(|c| c.1).collect::<Vec<_>>(),
        "column_sizes": columns.iter().map(|c| c.2).collect::<Vec<_>>(),
        "raw_data": {"basename": "shard.00000.mds", "bytes": data.len(), "hashes": {}},
        "zip_data": null, "samples": samples,
    }]});
    fs::write(tmp.path().join("index.json"), index.to_string()).unwrap();
    tmp
}

fn str_sample(text: &[u8]) -> Vec<u8> {
    let mut s = u32::try_from(text.len()).unwrap().to_le_bytes().to_vec();
    s.extend(text);
    s
}

#[test]
fn a_handmade_dataset_reads() {
    let data = shard_file(&[str_sample(b"a"), str_sample(b"")]);
    let tmp = dataset(&[("s", "str", None)], &data, 2);
    assert_eq!(read_all(tmp.path()).unwrap(), 2);
}

#[test]
fn truncated_shard_is_corrupt() {
    let tmp = copy("partitioned/part0");
    let shard = tmp.path().join("shard.00001.mds");
    let data = fs::read(&shard).unwrap();
    fs::write(&shard, &data[..data.len() - 3]).unwrap();
    assert_corrupt(read_all(tmp.path()), "shard.00001.mds", "index.json says");
    // The index agreeing with the truncated file: the last offset is past the end.
    edit_index(tmp.path(), |ix| {
        ix["shards"][1]["raw_data"]["bytes"] = json!(data.len() - 3)
    });
    assert_corrupt(read_all(tmp.path()), "shard.00001.mds", "offset of end");
}

#[test]
fn offsets_out_of_range_are_corrupt() {
    let mut data = shard_file(&[str_sample(b"abc"), str_sample(b"de")]);
    // Sample 1 starts past the end of the file.
    data[8..12].copy_from_slice(&1000u32.to_le_bytes());
    let tmp = dataset(&[("s", "str", None)], &data, 2);
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00000.mds",
        "offset of sample 1",
    );
    // Offsets going backwards.
    let mut data = shard_file(&[str_sample(b"abc"), str_sample(b"de")]);
    data[8..12].copy_from_slice(&13u32.to_le_bytes());
    let tmp = dataset(&[("s", "str", None)], &data, 2);
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00000.mds",
        "offset of sample 1",
    );
    // A value's size past its sample.
    let mut sample = str_sample(b"abc");
    sample[0] = 200;
    let tmp = dataset(&[("s", "str", None)], &shard_file(&[sample]), 1);
    assert_corrupt(read_all(tmp.path()), "shard.00000.mds", "sample 0");
}

#[test]
fn huge_sample_counts_are_refused_before_allocating() {
    let data = shard_file(&[str_sample(b"x")]);
    // In index.json: 2^60 samples in a 100-byte shard.
    let mut padded = data.clone();
    padded.resize(100, 0);
    let tmp = dataset(&[("s", "str", None)], &padded, 1 << 60);
    assert_corrupt(read_all(tmp.path()), "index.json", "cannot fit");
    // In the shard's header: u32::MAX samples where index.json says 1.
    let mut data = data;
    data[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let tmp = dataset(&[("s", "str", None)], &data, 1);
    assert_corrupt(read_all(tmp.path()), "shard.00000.mds", "index.json says 1");
}

#[test]
fn an_index_that_lies_about_sizes_is_corrupt() {
    let tmp = copy("partitioned/part0");
    edit_index(tmp.path(), |ix| {
        ix["shards"][2]["raw_data"]["bytes"] = json!(17)
    });
    assert_corrupt(read_all(tmp.path()), "shard.00002.mds", "17");
    let tmp = copy("partitioned/part0");
    edit_index(tmp.path(), |ix| {
        ix["shards"][0]["column_sizes"][2] = json!(4)
    });
    assert_corrupt(read_all(tmp.path()), "index.json", "size 4");
    let tmp = copy("partitioned/part0");
    edit_index(tmp.path(), |ix| ix["shards"][3]["samples"] = json!(5));
    assert_corrupt(read_all(tmp.path()), "shard.00003.mds", "index.json says 5");
    // A zstd shard that decompresses to more than its declared raw size.
    let tmp = copy("compressions/zstd:7");
    edit_index(tmp.path(), |ix| {
        ix["shards"][1]["raw_data"]["bytes"] = json!(20)
    });
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00001.mds.zstd",
        "decompresses to more than",
    );
    // ... or to less.
    let tmp = copy("compressions/gz");
    edit_index(tmp.path(), |ix| {
        ix["shards"][1]["raw_data"]["bytes"] = json!(100_000)
    });
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00001.mds.gz",
        "decompresses to only",
    );
    // Snappy's own length header disagreeing, and a file past snappy's bound.
    for (raw, words) in [(200, "index.json says 200"), (20, "past snappy's bound")] {
        let tmp = copy("compressions/snappy");
        edit_index(tmp.path(), |ix| {
            ix["shards"][0]["raw_data"]["bytes"] = json!(raw)
        });
        assert_corrupt(read_all(tmp.path()), "shard.00000.mds.snappy", words);
    }
    // Garbage where the compressed data should be.
    let tmp = copy("compressions/bz2");
    let zip = tmp.path().join("shard.00000.mds.bz2");
    let len = fs::read(&zip).unwrap().len();
    fs::write(&zip, vec![0x5a; len]).unwrap();
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00000.mds.bz2",
        "cannot decompress",
    );
    // A path out of the directory.
    let tmp = copy("partitioned/part0");
    edit_index(tmp.path(), |ix| {
        ix["shards"][0]["raw_data"]["basename"] = json!("../x.mds")
    });
    assert_corrupt(read_all(tmp.path()), "index.json", "basename");
}

#[test]
fn an_oversized_index_is_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let file = fs::File::create(tmp.path().join("index.json")).unwrap();
    file.set_len(65 << 20).unwrap(); // sparse
    assert_corrupt(read_all(tmp.path()), "index.json", "limit");
}

#[test]
fn unknown_encodings_and_formats_are_unsupported() {
    for encoding in ["foo", "int:3", "list[str]", "ndarray:complex64"] {
        let data = shard_file(&[str_sample(b"x")]);
        let tmp = dataset(&[("s", encoding, None)], &data, 1);
        assert_unsupported(read_all(tmp.path()), "index.json", encoding);
    }
    let tmp = copy("compressions/br");
    edit_index(tmp.path(), |ix| {
        ix["shards"][0]["compression"] = json!("lz4")
    });
    assert_unsupported(read_all(tmp.path()), "index.json", "lz4");
    let tmp = copy("partitioned/part0");
    edit_index(tmp.path(), |ix| ix["shards"][1]["format"] = json!("json"));
    assert_unsupported(read_all(tmp.path()), "index.json", "json");
    let tmp = copy("partitioned/part0");
    edit_index(tmp.path(), |ix| {
        ix["shards"][1]["column_encodings"][3] = json!("bytes")
    });
    assert_unsupported(read_all(tmp.path()), "index.json", "columns differ");
}

#[test]
fn bad_values_name_shard_sample_and_column() {
    let tmp = dataset(
        &[("s", "str", None)],
        &shard_file(&[str_sample(b"ok"), str_sample(b"\xff")]),
        2,
    );
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00000.mds",
        r#"sample 1, column "s" (str): not UTF-8"#,
    );
    let big = str_sample(b"9223372036854775808");
    let tmp = dataset(&[("n", "str_int", None)], &shard_file(&[big]), 1);
    assert_unsupported(read_all(tmp.path()), "shard.00000.mds", "outside Int64");
    let tmp = dataset(
        &[("f", "str_float", None)],
        &shard_file(&[str_sample(b"1.5x")]),
        1,
    );
    assert_corrupt(read_all(tmp.path()), "shard.00000.mds", "not a float");
    // A dynamic ndarray with dtype code 7 (none).
    let tmp = dataset(
        &[("a", "ndarray", None)],
        &shard_file(&[str_sample(&[7, 4, 1, 0])]),
        1,
    );
    assert_corrupt(read_all(tmp.path()), "shard.00000.mds", "dtype code 7");
    // An int column with a byte too many in its sample.
    let mut sample = 5i64.to_le_bytes().to_vec();
    sample.push(0);
    let tmp = dataset(&[("i", "int", Some(8))], &shard_file(&[sample]), 1);
    assert_corrupt(
        read_all(tmp.path()),
        "shard.00000.mds",
        "after the last column",
    );
}

#[test]
fn a_missing_shard_is_an_io_error_naming_it() {
    let tmp = copy("compressions/gz");
    fs::remove_file(tmp.path().join("shard.00002.mds.gz")).unwrap();
    match read_all(tmp.path()) {
        Err(Error::Io { path, source }) => {
            assert!(path.ends_with("shard.00002.mds.gz"), "{path:?}");
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    let reader = MdsReader::open(tmp.path()).unwrap();
    assert!(matches!(reader.shard_batches(99, 1), Err(Error::Io { .. })));
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        MdsReader::open(empty.path()),
        Err(Error::Io { .. })
    ));
}

mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Any byte of a shard changed, or the shard cut short with its index agreeing: an
        /// answer or an error, never a panic.
        #[test]
        fn damaged_shards_never_panic(at in any::<prop::sample::Index>(), byte in any::<u8>(),
                                      cut in any::<bool>()) {
            let tmp = copy("all/plain");
            let shard = tmp.path().join("shard.00003.mds");
            let mut data = fs::read(&shard).unwrap();
            let i = at.index(data.len());
            if cut {
                data.truncate(i);
                edit_index(tmp.path(), |ix| ix["shards"][3]["raw_data"]["bytes"] = json!(i));
            } else {
                data[i] = byte;
            }
            fs::write(&shard, &data).unwrap();
            let _ = read_all(tmp.path());
        }
    }
}
