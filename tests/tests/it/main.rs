//! Cross-crate integration tests, one test binary (one link of the dependency tree): each
//! former `tests/tests/<name>.rs` is the module `<name>`; the shared helpers are
//! `faults_common` (the fault proxy between clients and servers) and `publish_common` (roots
//! on every store). Modules that need a platform say so with their own `#![cfg(...)]`.
//!
//! Four files stay binaries of their own, because they measure or change the whole process
//! and under `cargo test` (tests as threads of one process) the other tests would disturb
//! them: `load_readers.rs` (the process's memory and descriptors), `publish_hostile_local.rs`
//! and `publish_hostile_remote.rs` (the process's peak RSS), `publish_aws_profile.rs` (sets
//! environment variables). They reach the shared helpers by `#[path]`.
//!
//! proptest keeps the seeds of failures in `tests/tests/proptest-regressions/<module>.txt`.

mod faults_common;
mod gc_races;
mod publish_common;

mod facade_dataset;
mod facade_streams;
mod faults_proxy;
mod faults_proxy_publish;
mod faults_proxy_roots;
mod format_backends;
mod format_http;
mod format_s3;
mod io_downstream_backend;
mod io_send_sync;
mod loader_mixture;
mod loader_packing;
mod loader_properties;
mod loader_storage;
mod publish_array_record;
mod publish_cache;
mod publish_cache_far;
mod publish_clouds;
mod publish_compact;
mod publish_crash;
mod publish_fault_schedule;
mod publish_faults;
mod publish_http_root;
mod publish_identical;
mod publish_mount;
mod publish_races;
mod publish_read_ahead;
mod publish_requests;
mod publish_rgw;
mod publish_roots;
mod publish_spool;
mod publish_staging;
mod publish_swapped;
