//! Oracles shared by the fuzz targets: independent models of what the code under test
//! promises, so a target can check more than "no panic".
//!
//! - [`json_model`]: a strict RFC 8259 reader that keeps numbers exact (integers of any size,
//!   floats by `str::parse::<f64>`, which is correctly rounded) and keys in order.
//! - [`cbor_model`]: a CBOR decoder and canonical encoder built on `ciborium-ll` (not on the
//!   CLI's own reader and writer), and the JSON view of a CBOR item as `docs/cli.md`
//!   ("Exact JSON") defines it.
//! - [`shard_repair`]: valid checksums for a fuzzed shard, so targets reach what is behind.

pub mod cbor_model;
pub mod json_model;
pub mod shard_repair;
