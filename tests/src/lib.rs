//! Helpers shared by the cross-crate integration tests in `tests/tests/`: unique names,
//! and the test servers that `cargo xtask ci` starts (found through environment variables).
//!
//! A test that needs a server calls [`nginx`], [`moto`], [`rgw`], [`gcs`] or [`azure`]: without the server's
//! variables it gets `None` after a printed `skipped: ...` line, except under `GUIDELOOM_CI=1`,
//! where a missing server is a failure (a panic naming the test and the variables; for RGW
//! only when CI was not told to leave Ceph out with `GUIDELOOM_XTASK_CEPH=0`). The rclone
//! mount of a bucket is [`mount::mount`].

pub mod cache;
pub mod crash;
pub mod mount;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::ObjectStore;

/// A name no other test, process or earlier run uses: `<tag>-<pid>-<nanos>-<counter>`.
pub fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{tag}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Skips (prints why, returns `None`) or, under `GUIDELOOM_CI=1`, fails.
pub(crate) fn missing<T>(test: &str, vars: &str) -> Option<T> {
    assert!(
        std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
        "{test}: GUIDELOOM_CI=1 but {vars} are not set"
    );
    println!("skipped: {test}: {vars} not set");
    None
}

/// The nginx origin: its base URL (ending in `/`) and the directory it serves.
pub fn nginx(test: &str) -> Option<(String, PathBuf)> {
    match (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT")) {
        (Some(url), Some(root)) => Some((url, PathBuf::from(root))),
        _ => missing(test, "GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT"),
    }
}

/// An S3 endpoint (moto, or Ceph RGW from [`rgw`]): a store for its test bucket.
#[derive(Debug)]
pub struct Moto {
    /// The S3 store, bound to [`Moto::bucket`].
    pub store: Arc<dyn ObjectStore>,
    /// The endpoint URL (`http://127.0.0.1:PORT`).
    pub endpoint: String,
    /// The bucket, already created by the xtask.
    pub bucket: String,
}

/// The moto server named by `GUIDELOOM_S3_ENDPOINT`/`GUIDELOOM_S3_BUCKET`, with the dummy
/// credentials from the environment (default `test`) and short retries so failures surface
/// quickly.
pub fn moto(test: &str) -> Option<Moto> {
    let (Some(endpoint), Some(bucket)) = (var("GUIDELOOM_S3_ENDPOINT"), var("GUIDELOOM_S3_BUCKET"))
    else {
        return missing(test, "GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET");
    };
    Some(Moto {
        store: s3_store(&endpoint, &bucket),
        endpoint,
        bucket,
    })
}

/// An S3 store for `bucket` at `endpoint` with the dummy credentials from the environment
/// (default `test`, which the xtask also gives the RGW user) and short retries.
pub(crate) fn s3_store(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    let env = |k: &str| var(k).unwrap_or_else(|| "test".to_owned());
    // Not from_env: this machine sets AWS_CA_BUNDLE and other variables.
    guideloom_io::tls::install_crypto_provider();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_access_key_id(env("AWS_ACCESS_KEY_ID"))
        .with_secret_access_key(env("AWS_SECRET_ACCESS_KEY"))
        .with_region(var("AWS_REGION").unwrap_or_else(|| "us-east-1".to_owned()))
        .with_allow_http(true)
        .with_retry(object_store::RetryConfig {
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
            ..Default::default()
        })
        .build()
        .unwrap_or_else(|e| panic!("an S3 store for {bucket} at {endpoint}: {e}"));
    Arc::new(store)
}

/// Whether `cargo xtask ci` starts Ceph RGW in this run: by default, unless
/// `GUIDELOOM_XTASK_CEPH=0` (the opt-out, inherited by the test processes).
fn ci_starts_ceph() -> bool {
    std::env::var("GUIDELOOM_XTASK_CEPH").as_deref() != Ok("0")
}

/// The one-node Ceph RADOS Gateway (`cargo xtask servers up ceph`) named by
/// `GUIDELOOM_RGW_ENDPOINT`/`GUIDELOOM_RGW_BUCKET`: a store for its test bucket, built like
/// [`moto`]'s (the xtask creates the RGW user with the same dummy keys).
///
/// `None` after a printed `skipped: ...` line when the variables are absent; a panic instead
/// under `GUIDELOOM_CI=1`, unless CI was told not to start Ceph (`GUIDELOOM_XTASK_CEPH=0`).
pub fn rgw(test: &str) -> Option<Moto> {
    let (Some(endpoint), Some(bucket)) =
        (var("GUIDELOOM_RGW_ENDPOINT"), var("GUIDELOOM_RGW_BUCKET"))
    else {
        let vars = "GUIDELOOM_RGW_ENDPOINT/GUIDELOOM_RGW_BUCKET";
        if ci_starts_ceph() {
            return missing(test, vars);
        }
        println!("skipped: {test}: {vars} not set (GUIDELOOM_XTASK_CEPH=0)");
        return None;
    };
    Some(Moto {
        store: s3_store(&endpoint, &bucket),
        endpoint,
        bucket,
    })
}

/// A GCS or Azure emulator started by the xtask (fake-gcs-server behind its XML-API front, or
/// Azurite): where it answers and its test bucket (container).
#[derive(Debug, Clone)]
pub struct Cloud {
    /// `gs` or `az`.
    pub scheme: &'static str,
    /// The base URL (`http://127.0.0.1:PORT`).
    pub endpoint: String,
    /// The bucket (GCS) or container (Azure), already created by the xtask.
    pub bucket: String,
}

impl Cloud {
    /// `gs://bucket/prefix` or `az://container/prefix`.
    pub fn uri(&self, prefix: &str) -> String {
        format!("{}://{}/{prefix}", self.scheme, self.bucket)
    }

    /// Store options reaching this emulator at `endpoint` (its own, or a proxy in front of it),
    /// with short retries so failures surface quickly: GCS unsigned (the emulator checks no
    /// token), Azure with Azurite's development account.
    pub fn store_options_at(&self, endpoint: &str) -> guideloom_publish::StoreOptions {
        use guideloom_publish::{AzureOptions, GcsOptions, RetryPolicy, StoreOptions};
        let options = StoreOptions::default()
            .with_retry(RetryPolicy::new(
                3,
                Duration::from_millis(20),
                Duration::from_millis(500),
            ))
            .with_retry_timeout(Duration::from_secs(10));
        if self.scheme == "gs" {
            options.with_gcs(
                GcsOptions::default()
                    .with_endpoint(endpoint)
                    .with_allow_http(true)
                    .with_anonymous(true),
            )
        } else {
            options.with_azure(
                AzureOptions::default()
                    .with_use_emulator(true)
                    .with_endpoint(endpoint)
                    .with_allow_http(true),
            )
        }
    }

    /// [`Cloud::store_options_at`] its own endpoint.
    pub fn store_options(&self) -> guideloom_publish::StoreOptions {
        self.store_options_at(&self.endpoint)
    }
}

/// fake-gcs-server (behind its front) named by `GUIDELOOM_GCS_ENDPOINT`/`GUIDELOOM_GCS_BUCKET`.
pub fn gcs(test: &str) -> Option<Cloud> {
    match (var("GUIDELOOM_GCS_ENDPOINT"), var("GUIDELOOM_GCS_BUCKET")) {
        (Some(endpoint), Some(bucket)) => Some(Cloud {
            scheme: "gs",
            endpoint,
            bucket,
        }),
        _ => missing(test, "GUIDELOOM_GCS_ENDPOINT/GUIDELOOM_GCS_BUCKET"),
    }
}

/// Azurite named by `GUIDELOOM_AZURE_ENDPOINT`/`GUIDELOOM_AZURE_CONTAINER`.
pub fn azure(test: &str) -> Option<Cloud> {
    match (
        var("GUIDELOOM_AZURE_ENDPOINT"),
        var("GUIDELOOM_AZURE_CONTAINER"),
    ) {
        (Some(endpoint), Some(bucket)) => Some(Cloud {
            scheme: "az",
            endpoint,
            bucket,
        }),
        _ => missing(test, "GUIDELOOM_AZURE_ENDPOINT/GUIDELOOM_AZURE_CONTAINER"),
    }
}

/// Every regular file under `dir`, by its path relative to `dir` (`/`-separated), with its
/// contents; directories appear as `<path>/` with no contents. For "nothing was written"
/// checks that compare a whole tree before and after, so they still fail when the layout
/// moves a file somewhere else.
pub fn tree(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(
        base: &std::path::Path,
        dir: &std::path::Path,
        out: &mut std::collections::BTreeMap<String, Vec<u8>>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("readable directory entry").path();
            let name = path
                .strip_prefix(base)
                .expect("under the base")
                .to_string_lossy()
                .into_owned();
            let kind = std::fs::symlink_metadata(&path).expect("stat");
            if kind.is_dir() {
                out.insert(format!("{name}/"), Vec::new());
                walk(base, &path, out);
            } else {
                out.insert(name, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}
