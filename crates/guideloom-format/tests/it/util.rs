//! Shared helpers.

use std::path::Path;

use bytes::Bytes;
use guideloom_format::{ShardMetadata, ShardWriter};

/// Writes `records` as a raw-format document shard at `path` and returns its bytes.
pub(crate) fn write_shard(path: &Path, records: &[Vec<u8>]) -> Bytes {
    let mut w = ShardWriter::create(path, ShardMetadata::new("raw", "documents")).unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.finish().unwrap();
    std::fs::read(path).unwrap().into()
}

/// A shard built in a temporary directory, as bytes.
pub(crate) fn shard_bytes(records: &[Vec<u8>]) -> Bytes {
    let dir = tempfile::tempdir().unwrap();
    write_shard(&dir.path().join("s.glm"), records)
}

/// Names of all entries in `dir`, sorted.
pub(crate) fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A small current-thread tokio runtime for async tests.
pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}
