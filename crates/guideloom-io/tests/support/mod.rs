//! Test support shared by the integration tests of this crate.
#![allow(dead_code)]

pub(crate) mod origin;
pub(crate) mod servers;
