//! Integration tests of guideloom-storage (one binary): storages, file-system pieces,
//! the stream-storage migration.

// Test code runs on 64-bit hosts; offsets of small test files fit in usize.
#![allow(clippy::cast_possible_truncation)]

mod convert;
mod discovery;
mod send_sync;
mod storage;
mod util;
