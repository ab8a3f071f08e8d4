//! The importers' own parsers of untrusted files: MDS directories (`index.json` and shard
//! files) and WebDataset tars, read to the end: typed errors only, no panic, no allocation
//! from a count or size in the bytes.
//!
//! The first byte selects what the rest is:
//! - 0: an MDS `index.json`, beside the four shard files of the committed `all/plain` fixture
//!   (every encoding);
//! - 1: an MDS shard file, under that fixture's index with the first shard's declared size and
//!   sample count made to match the bytes (so the parser gets past the index);
//! - 2: a WebDataset tar (the reader infers the fields from its first sample);
//! - 3: a WebDataset tar read with a fixed field list (`bin`, `json`, `seg.png`).
#![no_main]

use std::path::{Path, PathBuf};

use guideloom_import::mds::MdsReader;
use guideloom_import::webdataset::{WebDatasetOptions, WebDatasetReader};
use libfuzzer_sys::fuzz_target;


const INDEX: &[u8] = include_bytes!("../../crates/guideloom-import/tests/fixtures/mds/all/plain/index.json");
const SHARDS: [&[u8]; 4] = [
    include_bytes!("../../crates/guideloom-import/tests/fixtures/mds/all/plain/shard.00000.mds"),
    include_bytes!("../../crates/guideloom-import/tests/fixtures/mds/all/plain/shard.00001.mds"),
    include_bytes!("../../crates/guideloom-import/tests/fixtures/mds/all/plain/shard.00002.mds"),
    include_bytes!("../../crates/guideloom-import/tests/fixtures/mds/all/plain/shard.00003.mds"),
];

fn read_mds(dir: &Path) {
    if let Ok(reader) = MdsReader::open(dir) {
        for batch in reader.batches(7) {
            if batch.is_err() {
                break;
            }
        }
    }
}

fn read_tar(path: PathBuf, fields: Option<&[String]>) {
    let options = WebDatasetOptions { batch_rows: 5, max_member_bytes: 1 << 20, ..WebDatasetOptions::default() };
    let reader = match fields {
        Some(fields) => WebDatasetReader::with_fields(&[path], fields, options),
        None => WebDatasetReader::open(&[path], options),
    };
    if let Ok(reader) = reader {
        for batch in reader.batches() {
            if batch.is_err() {
                break;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    match selector % 4 {
        0 => {
            std::fs::write(dir.path().join("index.json"), rest).unwrap();
            for (i, shard) in SHARDS.iter().enumerate() {
                std::fs::write(dir.path().join(format!("shard.{i:05}.mds")), shard).unwrap();
            }
            read_mds(dir.path());
        }
        1 => {
            let mut index: serde_json::Value = serde_json::from_slice(INDEX).unwrap();
            let shards = index["shards"].as_array_mut().unwrap();
            shards.truncate(1);
            let count = rest.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            shards[0]["samples"] = count.into();
            shards[0]["raw_data"]["bytes"] = rest.len().into();
            std::fs::write(dir.path().join("index.json"), index.to_string()).unwrap();
            std::fs::write(dir.path().join("shard.00000.mds"), rest).unwrap();
            read_mds(dir.path());
        }
        2 => {
            let path = dir.path().join("shard.tar");
            std::fs::write(&path, rest).unwrap();
            read_tar(path, None);
        }
        _ => {
            let path = dir.path().join("shard.tar");
            std::fs::write(&path, rest).unwrap();
            let fields = ["bin", "json", "seg.png"].map(String::from);
            read_tar(path, Some(&fields));
        }
    }

});
