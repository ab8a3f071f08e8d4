//! Integration tests of guideloom-arrayrecord, one binary (one link of the dependency tree):
//! the committed fixtures, interop with the `array_record` package, files on real servers,
//! and the round-trip properties.
//!
//! `tests/bounds.rs` stays a binary of its own: its `#[global_allocator]` (a counting
//! allocator) is process-wide and would sit under every test of a shared binary.
//!
//! proptest keeps the seeds of failures in `tests/proptest-regressions/<module>.txt`.

mod fixtures;
mod interop;
mod remote;
mod roundtrip;
