//! Integration tests of guideloom-format (one binary): shards, corruption,
//! committed fixtures.

// Test code runs on 64-bit hosts; offsets of small test files fit in usize.
#![allow(clippy::cast_possible_truncation)]

mod corruption;
mod fixtures;
mod send_sync;
mod shard;
mod util;
