//! Test support shared by the integration tests of this crate.
// Test data are small: u64 offsets into them cannot truncate.
#![allow(dead_code, clippy::cast_possible_truncation)]

pub(crate) mod origin;
pub(crate) mod servers;
