//! `s3://` stores: options, the object_store Amazon S3 client, and (feature `aws-profile`)
//! the AWS credentials chain that signs its requests ([`credentials`]).

use std::sync::Arc;

use super::StoreOptions;
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

/// How `s3://` roots are reached: the S3 part of [`StoreOptions`] (whose retry and timeouts
/// apply to every remote client, S3's included). Credentials are never part of this: they
/// come from the standard AWS chain (environment variables, web identity, container and
/// instance roles), and with feature `aws-profile` also from the shared config files and
/// named profiles (see the `credentials` module in that build, and `docs/publication.md`,
/// "Credentials, profiles and regions").
///
/// ```no_run
/// use guideloom_publish::{Root, RootOptions, S3Options, StoreOptions};
///
/// // Keys and region of the `analytics` profile (feature `aws-profile`).
/// let options = StoreOptions::default().with_s3(S3Options::default().with_profile("analytics"));
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
    /// A named profile of the shared AWS config files (`AWS_CONFIG_FILE`,
    /// `AWS_SHARED_CREDENTIALS_FILE`): its credentials (only them) sign the requests and its
    /// region applies unless [`S3Options::region`] is set. Needs feature `aws-profile`;
    /// without it, setting a profile is refused with [`Error::Unsupported`] rather than
    /// silently ignored. A profile that does not exist is an [`Error::AwsProfile`].
    pub profile: Option<String>,
}

impl S3Options {
    /// Sets the region ([`S3Options::region`]).
    #[must_use]
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Sets the endpoint of an S3-compatible server ([`S3Options::endpoint`]).
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Sets path or virtual-hosted addressing.
    #[must_use]
    pub fn with_addressing(mut self, addressing: S3Addressing) -> Self {
        self.addressing = addressing;
        self
    }

    /// Allows plain `http://` endpoints.
    #[must_use]
    pub fn with_allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// Signs with a named profile of the shared AWS files ([`S3Options::profile`]).
    #[must_use]
    pub fn with_profile(mut self, profile: impl Into<String>) -> Self {
        self.profile = Some(profile.into());
        self
    }
}

#[cfg(feature = "s3")]
pub(super) fn build_s3(bucket: &str, store: &StoreOptions) -> Result<Arc<ObjectStoreBucket>> {
    use object_store::aws::{AmazonS3Builder, S3ConditionalPut};

    #[cfg(not(feature = "aws-profile"))]
    if let Some(profile) = &store.s3.profile {
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
    let options = &store.s3.with_environment(&environment);
    options.check_plain_http(bucket, &environment)?;
    // Environment first (the standard chain's AWS_* variables), then explicit options win.
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_virtual_hosted_style_request(options.addressing == S3Addressing::VirtualHosted)
        .with_retry(store.object_store_retry_config())
        .with_client_options(store.object_store_client(options.allow_http));
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
pub(super) fn build_s3(bucket: &str, _options: &StoreOptions) -> Result<Arc<ObjectStoreBucket>> {
    Err(Error::Unsupported {
        what: format!(
            "s3://{bucket}: guideloom-publish was built without feature `s3`; enable it, or \
             register an S3 store for this bucket with Registry::register"
        ),
    })
}
