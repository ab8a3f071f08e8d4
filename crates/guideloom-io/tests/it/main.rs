//! Integration tests of guideloom-io, one binary (one link of the dependency tree): typed
//! causes of remote failures, `HttpIo` against scripted origins and nginx, `ObjectStoreIo`
//! against stores. The shared helpers are `support` (a scripted HTTP origin and the test
//! servers' addresses). Modules that need a feature say so with their own `#![cfg(...)]`.
//!
//! `tests/http_tracing.rs` stays a binary of its own: tracing caches each callsite's interest
//! process-wide, so tests running beside it without a subscriber would disable the
//! callsites it observes.

mod support;

mod causes;
mod http_faults;
mod http_nginx;
mod objstore_stores;
