//! The records of the node cache tests (`tests/tests/it/publish_cache.rs`) and of their
//! helper process (`src/bin/cache_reader.rs`), so both sides agree on every byte.

/// Shards in the cache tests' roots.
pub const SHARDS: u64 = 4;

/// Records per shard.
pub const RECORDS: u64 = 256;

/// Bytes per record (a shard is about 1 MiB).
pub const RECORD_LEN: usize = 4096;

/// Record `i` (global index) of a cache test root named by `seed`.
pub fn record(seed: u8, i: u64) -> Vec<u8> {
    let mut r = format!("cache record {seed} {i:06} ").into_bytes();
    r.resize(
        RECORD_LEN,
        b'a' + u8::try_from(i % 26).unwrap_or(0) + seed % 3,
    );
    r
}
