//! The real test servers `cargo xtask ci` starts (nginx, moto), found through environment
//! variables. Without them a test prints `skipped: <reason>` and returns, unless
//! `GUIDELOOM_CI=1`, where a missing server is a failure.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

fn in_ci() -> bool {
    std::env::var("GUIDELOOM_CI").is_ok_and(|v| v == "1")
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn missing(test: &str, what: &str) {
    assert!(
        !in_ci(),
        "{test}: GUIDELOOM_CI=1 but {what} is not set: the test server is missing"
    );
    println!(
        "skipped: {test}: {what} is not set (run `cargo xtask ci`, or start the server by hand)"
    );
}

/// nginx: `(base URL ending in '/', the directory it serves)`.
pub(crate) fn nginx(test: &str) -> Option<(String, PathBuf)> {
    match (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT")) {
        (Some(url), Some(root)) => Some((url, PathBuf::from(root))),
        _ => {
            missing(test, "GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT");
            None
        }
    }
}

/// moto: `(endpoint, bucket)`.
pub(crate) fn s3(test: &str) -> Option<(String, String)> {
    match (var("GUIDELOOM_S3_ENDPOINT"), var("GUIDELOOM_S3_BUCKET")) {
        (Some(e), Some(b)) => Some((e, b)),
        _ => {
            missing(test, "GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET");
            None
        }
    }
}

/// A name unique to this process and call, for test subdirectories and key prefixes.
pub(crate) fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Deterministic pseudo-random bytes.
pub(crate) fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
