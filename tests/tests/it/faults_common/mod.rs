//! Shared helpers of `faults_proxy.rs` and `faults_proxy_publish.rs`: the fault kinds, short
//! client bounds, S3 stores and roots through a proxy, the hang detector.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use guideloom_faultproxy::Fault;
use guideloom_io::RetryPolicy;
use guideloom_io::http::HttpOptions;
use guideloom_publish::{Registry, Root, RootOptions, S3Options, StoreOptions};
use object_store::ObjectStore;

/// The hang detector around every case: generous, not a performance bound.
pub const HANG: Duration = Duration::from_secs(120);

/// `HttpIo`'s per-attempt timeout in these tests (nginx answers in milliseconds).
pub const ATTEMPT: Duration = Duration::from_secs(1);

/// The S3 client's per-attempt timeout in these tests: 2 s, because moto serves one request
/// at a time for every test of the run, and a request queued behind a large one must not
/// time out spuriously (that would add an unscripted retry).
pub const S3_ATTEMPT: Duration = Duration::from_secs(2);

/// Attempts per request (2 retries) for HTTP and S3 alike.
pub const ATTEMPTS: u32 = 3;

/// Runs `f` under the hang detector; returns its output and how long it took.
pub async fn guarded<T>(what: &str, f: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = tokio::time::timeout(HANG, f)
        .await
        .unwrap_or_else(|_| panic!("hang detector: {what} still running after {HANG:?}"));
    (out, started.elapsed())
}

/// A fault with a name for messages and the report table.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    pub name: &'static str,
    pub fault: Fault,
}

const fn named(name: &'static str, fault: Fault) -> Named {
    Named { name, fault }
}

/// Every fault kind the proxy has, as used against reads. Byte counts: 10 falls inside a
/// response head, 5000 inside the body of the reads below (each at least 16 KiB).
pub fn every_fault() -> Vec<Named> {
    vec![
        named(
            "reset after 0 response bytes",
            Fault::ResetAfterResponseBytes(0),
        ),
        named(
            "reset after 10 response bytes",
            Fault::ResetAfterResponseBytes(10),
        ),
        named(
            "reset after 5000 response bytes",
            Fault::ResetAfterResponseBytes(5000),
        ),
        named(
            "reset after 10 request bytes",
            Fault::ResetAfterRequestBytes(10),
        ),
        named("stall", Fault::Stall),
        named("drip 1 B/s", Fault::Drip(Duration::from_secs(1))),
        named("close before headers", Fault::CloseBeforeHeaders),
        named("503 Retry-After 1", Fault::unavailable(1)),
        named("500", Fault::internal_error()),
        named("truncate body after 100 bytes", Fault::TruncateBody(100)),
    ]
}

/// Short bounds for `HttpIo`: 1 s per attempt and to connect, 3 attempts, 10–50 ms backoff,
/// and a read deadline that does not bind (20 s) unless a test sets one.
pub fn http_options() -> HttpOptions {
    HttpOptions::default()
        .with_request_timeout(ATTEMPT)
        .with_connect_timeout(ATTEMPT)
        .with_retry(RetryPolicy::new(
            ATTEMPTS,
            Duration::from_millis(10),
            Duration::from_millis(50),
        ))
        .with_operation_timeout(Duration::from_secs(20))
}

/// The S3 client's retry policy: 2 retries, 10–50 ms backoff.
pub fn s3_retry() -> RetryPolicy {
    RetryPolicy::new(
        ATTEMPTS,
        Duration::from_millis(10),
        Duration::from_millis(50),
    )
}

/// No retry of the S3 client starts after this long.
pub const S3_RETRY_TIMEOUT: Duration = Duration::from_secs(20);

/// The S3 client bounds on the store options: [`S3_ATTEMPT`] per attempt and to connect,
/// [`s3_retry`], no retry after [`S3_RETRY_TIMEOUT`].
pub fn s3_bounds(options: StoreOptions) -> StoreOptions {
    options
        .with_retry(s3_retry())
        .with_retry_timeout(S3_RETRY_TIMEOUT)
        .with_request_timeout(S3_ATTEMPT)
        .with_connect_timeout(S3_ATTEMPT)
}

fn env(k: &str, default: &str) -> String {
    std::env::var(k)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// An object_store S3 client for `bucket` at `endpoint` with [`s3_bounds`]'s bounds and the
/// dummy credentials from the environment.
pub fn s3_store(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    guideloom_io::tls::install_crypto_provider();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_access_key_id(env("AWS_ACCESS_KEY_ID", "test"))
        .with_secret_access_key(env("AWS_SECRET_ACCESS_KEY", "test"))
        .with_region(env("AWS_REGION", "us-east-1"))
        .with_allow_http(true)
        .with_client_options(
            object_store::ClientOptions::new()
                .with_allow_http(true)
                .with_timeout(S3_ATTEMPT)
                .with_connect_timeout(S3_ATTEMPT),
        )
        .with_retry(s3_retry().object_store_config(S3_RETRY_TIMEOUT))
        .build()
        .unwrap_or_else(|e| panic!("an S3 store for {bucket} at {endpoint}: {e}"));
    Arc::new(store)
}

/// A root `s3://bucket/prefix` resolved the way a user does (a fresh registry, the
/// endpoint and bounds in [`S3Options`]), so the conditional-write probe runs too.
pub fn s3_root(endpoint: &str, bucket: &str, prefix: &str) -> Root {
    let options = s3_bounds(
        StoreOptions::default().with_s3(
            S3Options::default()
                .with_endpoint(endpoint)
                .with_region(env("AWS_REGION", "us-east-1"))
                .with_allow_http(true),
        ),
    );
    Registry::new()
        .resolve(&format!("s3://{bucket}/{prefix}"), &options)
        .map(|store| Root::new(store, RootOptions::default()))
        .unwrap_or_else(|e| panic!("s3://{bucket}/{prefix} at {endpoint}: {e}"))
}

/// One object-store server of this run, `"moto"`, `"rgw"`, `"gcs"` or `"azure"`:
/// `(endpoint, bucket)`, or `None` after a printed `skipped: ...` (a failure under
/// `GUIDELOOM_CI=1`; see `guideloom_tests::moto`).
pub fn s3_server(test: &str, which: &str) -> Option<(String, String)> {
    match which {
        "gcs" | "azure" => {
            let cloud = cloud(test, which)?;
            Some((cloud.endpoint, cloud.bucket))
        }
        "moto" => guideloom_tests::moto(test).map(|m| (m.endpoint, m.bucket)),
        _ => guideloom_tests::rgw(test).map(|m| (m.endpoint, m.bucket)),
    }
}

fn cloud(test: &str, which: &str) -> Option<guideloom_tests::Cloud> {
    if which == "gcs" {
        guideloom_tests::gcs(test)
    } else {
        guideloom_tests::azure(test)
    }
}

/// A root on `server` (as [`s3_server`] names it) whose requests go to `endpoint` (the
/// server's own, or a proxy in front of it), resolved as a user does with [`s3_bounds`]'s
/// bounds: [`s3_root`] for the S3 servers, `gs://` or `az://` for the emulators.
pub fn server_root(server: &str, endpoint: &str, bucket: &str, prefix: &str) -> Root {
    if !matches!(server, "gcs" | "azure") {
        return s3_root(endpoint, bucket, prefix);
    }
    let cloud = guideloom_tests::Cloud {
        scheme: if server == "gcs" { "gs" } else { "az" },
        endpoint: endpoint.to_owned(),
        bucket: bucket.to_owned(),
    };
    let uri = cloud.uri(prefix);
    Registry::new()
        .resolve(&uri, &s3_bounds(cloud.store_options_at(endpoint)))
        .map(|store| Root::new(store, RootOptions::default()))
        .unwrap_or_else(|e| panic!("{uri} at {endpoint}: {e}"))
}

/// The S3 servers of this run: `(name, endpoint, bucket)` for moto and Ceph RGW (each only
/// when configured; see `guideloom_tests::moto`/`rgw`).
pub fn s3_servers(test: &str) -> Vec<(&'static str, String, String)> {
    let mut v = Vec::new();
    if let Some(m) = guideloom_tests::moto(test) {
        v.push(("moto", m.endpoint, m.bucket));
    }
    if let Some(r) = guideloom_tests::rgw(test) {
        v.push(("rgw", r.endpoint, r.bucket));
    }
    v
}

/// `n` bytes of a pattern with no short period (so a misplaced range cannot match).
pub fn data(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (x >> 56) as u8
        })
        .collect()
}

/// Whether an error text calls a transport fault something it is not.
pub fn misnamed(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("corrupt") || t.contains("short read")
}
