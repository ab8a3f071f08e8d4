//! Integration tests of the `guideloom` binary, one test binary (one link of the dependency
//! tree): each former `tests/<name>.rs` is the module `<name>`, the shared helpers are
//! `common` (running the binary, reading its output) and `strace_audit` (the syscall audit of
//! mounts). Modules whose tests need a feature or a platform say so with their own
//! `#![cfg(...)]`.
//!
//! `tests/cli_exact.rs` stays a binary of its own: it measures the peak RSS of the children
//! it waited for (`getrusage(RUSAGE_CHILDREN)`), which is process-wide, so under
//! `cargo test` (tests as threads of one process) the binaries other tests run would count
//! too.

mod common;
mod strace_audit;

mod cli;
mod cli_array_record;
mod cli_array_record_bounds;
mod cli_bounds;
mod cli_checks;
mod cli_clouds;
mod cli_convert;
mod cli_error_lines;
mod cli_faults;
mod cli_features;
mod cli_hostile;
mod cli_import;
mod cli_keep;
mod cli_memory;
mod cli_messages;
mod cli_mount;
mod cli_publish_race;
mod cli_raw_out;
mod cli_roots;
mod cli_serve;
mod cli_shape;
mod cli_streams;
