//! `s3://` stores: options, the object_store Amazon S3 client, and (feature `aws-profile`)
//! the AWS credentials chain that signs its requests ([`credentials`]).

use std::sync::Arc;
use std::time::Duration;

use guideloom_io::RetryPolicy;

use crate::error::{Error, Result};
use crate::store::ObjectStoreBucket;
#[cfg(feature = "s3")]
use crate::uri::redact_userinfo;

#[cfg(feature = "aws-profile")]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-profile")))]
pub mod credentials;
mod env;

pub use env::{ALLOW_HTTP_VARIABLE, ENDPOINT_VARIABLES, REGION_VARIABLES, S3Environment};

/// S3 addressing style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum S3Addressing {
    /// `https://endpoint/bucket/key` (what most S3-compatible servers want).
    #[default]
    Path,
    /// `https://bucket.endpoint/key` (AWS's preferred style).
    VirtualHosted,
}

/// Default [`S3Retry::request_timeout`]: 30 s per attempt (object_store's own default).
pub(crate) const DEFAULT_S3_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`S3Retry::connect_timeout`]: 5 s (object_store's own default).
pub(crate) const DEFAULT_S3_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default [`S3Retry::policy`]: 5 attempts (4 retries after the first; object_store's default
/// is 10 retries), waits bounded by 100 ms doubling up to 5 s.
pub(crate) const DEFAULT_S3_RETRY: RetryPolicy =
    RetryPolicy::new(5, Duration::from_millis(100), Duration::from_secs(5));
/// Default [`S3Retry::retry_timeout`]: no retry starts 60 s after the first attempt
/// (object_store's default is 3 minutes).
pub(crate) const DEFAULT_S3_RETRY_TIMEOUT: Duration = Duration::from_secs(60);

/// Retries and timeouts of the object-store client (S3, and the same shape for GCS and
/// Azure), passed to object_store's `RetryConfig` and `ClientOptions`.
///
/// object_store retries 5xx and 429 answers, connection failures, and timeouts of reads
/// (GET, HEAD; a timed-out PUT is retried only where it is idempotent), and resumes a GET
/// whose body broke off with a ranged GET. A request therefore ends within about
/// `policy.max_attempts × request_timeout` plus backoffs, and no retry starts after
/// `retry_timeout`: with the defaults, at most about `retry_timeout + request_timeout` =
/// 90 s. A publication resolves what a failed PUT left behind by reading it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S3Retry {
    /// Attempts (1 disables retries) and backoff bounds: 5 attempts, waits
    /// bounded by 100 ms doubling up to 5 s. object_store
    /// draws the jittered waits itself, within these bounds
    /// ([`RetryPolicy::object_store_config`]).
    pub policy: RetryPolicy,
    /// No retry starts after this long since the first attempt:
    /// 60 s.
    pub retry_timeout: Duration,
    /// Timeout of one attempt, from connecting to the end of the body (`None`: no limit):
    /// 30 s.
    pub request_timeout: Option<Duration>,
    /// Timeout of connecting (`None`: no limit): 5 s.
    pub connect_timeout: Option<Duration>,
}

impl Default for S3Retry {
    fn default() -> Self {
        S3Retry {
            policy: DEFAULT_S3_RETRY,
            retry_timeout: DEFAULT_S3_RETRY_TIMEOUT,
            request_timeout: Some(DEFAULT_S3_REQUEST_TIMEOUT),
            connect_timeout: Some(DEFAULT_S3_CONNECT_TIMEOUT),
        }
    }
}

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
impl S3Retry {
    /// object_store's `RetryConfig` for this policy (io's one conversion).
    pub(crate) fn retry_config(&self) -> object_store::RetryConfig {
        self.policy.object_store_config(self.retry_timeout)
    }

    /// `client` with this policy's timeouts (a `None` disables object_store's default).
    pub(crate) fn client_options(
        &self,
        client: object_store::ClientOptions,
    ) -> object_store::ClientOptions {
        let client = match self.request_timeout {
            Some(t) => client.with_timeout(t),
            None => client.with_timeout_disabled(),
        };
        match self.connect_timeout {
            Some(t) => client.with_connect_timeout(t),
            None => client.with_connect_timeout_disabled(),
        }
    }
}

/// How `s3://` roots are reached. Credentials are never part of this: they come from the
/// standard AWS chain (environment variables, web identity, container and instance roles),
/// and with feature `aws-profile` also from the shared config files and named profiles (see
/// the `credentials` module in that build, and `docs/publication.md`, "Credentials, profiles and
/// regions").
///
/// ```no_run
/// use guideloom_publish::{Root, RootOptions, S3Options, StoreOptions};
///
/// // Keys and region of the `analytics` profile (feature `aws-profile`).
/// let options = StoreOptions {
///     s3: S3Options { profile: Some("analytics".into()), ..S3Options::default() },
///     ..StoreOptions::default()
/// };
/// let root = Root::open("s3://my-datasets/captures", &options, RootOptions::default())?;
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// Region; `None`: with feature `aws-profile` the profile's or the environment's (see
    /// `credentials::RegionInputs::pick`), else `AWS_REGION` / `AWS_DEFAULT_REGION`, then
    /// `us-east-1`.
    pub region: Option<String>,
    /// Endpoint URL of an S3-compatible server (`None`: AWS).
    pub endpoint: Option<String>,
    /// Path or virtual-hosted addressing.
    pub addressing: S3Addressing,
    /// Allow plain `http://` endpoints.
    pub allow_http: bool,
    /// Request retries and timeouts (bounded by default; see [`S3Retry`]).
    pub retry: S3Retry,
    /// A named profile of the shared AWS config files (`AWS_CONFIG_FILE`,
    /// `AWS_SHARED_CREDENTIALS_FILE`): its credentials (only them) sign the requests and its
    /// region applies unless [`S3Options::region`] is set. Needs feature `aws-profile`;
    /// without it, setting a profile is refused with [`Error::Unsupported`] rather than
    /// silently ignored. A profile that does not exist is an [`Error::AwsProfile`].
    pub profile: Option<String>,
}

#[cfg(feature = "s3")]
pub(super) fn build_s3(bucket: &str, options: &S3Options) -> Result<Arc<ObjectStoreBucket>> {
    use object_store::ClientOptions;
    use object_store::aws::{AmazonS3Builder, S3ConditionalPut};

    #[cfg(not(feature = "aws-profile"))]
    if let Some(profile) = &options.profile {
        return Err(Error::Unsupported {
            what: format!(
                "S3 profile {profile:?}: reading AWS config profiles needs guideloom-publish's \
                 feature `aws-profile`; enable it, or use environment credentials"
            ),
        });
    }
    // The environment's endpoint and AWS_ALLOW_HTTP, by the conventions the CLI reads
    // them with (a plain-HTTP endpoint not allowed is refused here, naming the setting).
    let environment = S3Environment::read();
    let options = &options.with_environment(&environment);
    options.check_plain_http(bucket, &environment)?;
    // reqwest takes the process's rustls provider: make it ring (one TLS stack).
    guideloom_io::tls::install_crypto_provider();
    // Environment first (the standard chain's AWS_* variables), then explicit options win.
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_virtual_hosted_style_request(options.addressing == S3Addressing::VirtualHosted)
        .with_retry(options.retry.retry_config());
    let client = ClientOptions::new().with_allow_http(options.allow_http);
    builder = builder.with_client_options(options.retry.client_options(client));
    #[cfg(feature = "aws-profile")]
    let source = {
        // The full AWS chain (profiles included) replaces object_store's own; the region
        // follows credentials::RegionInputs::pick.
        let chain = credentials::AwsChain::resolve(options)?;
        if let Some(region) = &chain.region {
            builder = builder.with_region(&region.region);
        }
        let label = chain.credentials.label().to_owned();
        builder = builder.with_credentials(Arc::new(chain.credentials));
        label
    };
    #[cfg(not(feature = "aws-profile"))]
    let source = {
        if let Some(region) = &options.region {
            builder = builder.with_region(region);
        }
        "environment credentials"
    };
    if let Some(endpoint) = &options.endpoint {
        // Also as the S3-specific endpoint, which object_store prefers to the generic one:
        // otherwise AWS_ENDPOINT_URL_S3 would beat an explicit endpoint.
        builder = builder
            .with_endpoint(endpoint)
            .with_config(object_store::aws::AmazonS3ConfigKey::S3Endpoint, endpoint);
    }
    let store = builder
        .build()
        .map_err(|e| Error::storage(format!("s3://{bucket}"), "configure", e))?;
    let endpoint = format!(
        "s3://{bucket} at {} ({source})",
        options
            .endpoint
            .as_deref()
            .map_or_else(|| "AWS".to_owned(), redact_userinfo)
    );
    Ok(ObjectStoreBucket::new(Arc::new(store), endpoint))
}

#[cfg(not(feature = "s3"))]
pub(super) fn build_s3(bucket: &str, _options: &S3Options) -> Result<Arc<ObjectStoreBucket>> {
    Err(Error::Unsupported {
        what: format!(
            "s3://{bucket}: guideloom-publish was built without feature `s3`; enable it, or \
             register an S3 store for this bucket with Registry::register"
        ),
    })
}
