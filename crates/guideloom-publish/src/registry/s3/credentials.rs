//! AWS credentials and region from the standard AWS chain, bridged into object_store
//! (feature `aws-profile`).
//!
//! object_store's own S3 credential chain reads environment variables, web identity and
//! container/instance roles, but no shared config files (`~/.aws/config`,
//! `~/.aws/credentials`) and so no named profiles. [`AwsChainCredentials`] closes that gap: it
//! wraps aws-config's providers in object_store's [`CredentialProvider`] trait and caches each
//! credential until 5 minutes before it expires, so expiring credentials
//! (assumed roles, web identity, SSO-less credential processes, instance roles) are refreshed
//! without a failed request.
//!
//! Which provider is used:
//! - [`S3Options::profile`] set: that profile of the shared files, and only it (an explicit
//!   choice beats ambient `AWS_ACCESS_KEY_ID`); the profile may itself assume a role, use web
//!   identity or run a `credential_process`. A profile that does not exist is an
//!   [`Error::AwsProfile`] when the root is resolved, not at the first request.
//! - otherwise: aws-config's default chain — environment, the ambient profile (`AWS_PROFILE`,
//!   else `default`), web identity, ECS container credentials, EC2 instance metadata.
//!
//! The files are `AWS_CONFIG_FILE` (default `~/.aws/config`) and `AWS_SHARED_CREDENTIALS_FILE`
//! (default `~/.aws/credentials`). Region precedence is [`RegionInputs::pick`].
//!
//! Secrets never reach a log or a `Debug` output: [`AwsChainCredentials`] prints its source
//! and the cached credential's expiry only.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_config::Region;
use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::profile::ProfileFileCredentialsProvider;
use aws_config::provider_config::ProviderConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_runtime::env_config::file::EnvConfigFiles;
use aws_types::os_shim_internal::{Env, Fs};
use object_store::CredentialProvider;
use object_store::aws::AwsCredential;
use tokio::sync::{Mutex, OnceCell};
use tracing::{Instrument, debug, info_span, warn};

use super::S3Options;
use crate::error::{Error, Result};

/// The providers' configuration with their HTTP client (STS, SSO, instance metadata) on the
/// one TLS stack of guideloom: rustls with ring. aws-config's default client is built without
/// `default-https-client`, which would add aws-lc-rs.
fn provider_config() -> ProviderConfig {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    let client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    ProviderConfig::default().with_http_client(client)
}

/// A cached credential is refreshed this long before it expires.
pub(crate) const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

/// Where the region of an `s3://` root came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionSource {
    /// [`S3Options::region`].
    Options,
    /// The profile named in [`S3Options::profile`].
    NamedProfile,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    Environment,
    /// The ambient profile (`AWS_PROFILE`, else `default`).
    AmbientProfile,
}

/// A region and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRegion {
    /// The region name, e.g. `eu-west-1`.
    pub region: String,
    /// Its source.
    pub source: RegionSource,
}

/// Everything the region precedence looks at; empty strings count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionInputs {
    /// [`S3Options::region`].
    pub options: Option<String>,
    /// The `region` of the selected profile.
    pub profile: Option<String>,
    /// Whether the profile was named in [`S3Options::profile`] (else it is the ambient one).
    pub profile_named: bool,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub environment: Option<String>,
}

impl RegionInputs {
    /// The region an `s3://` root uses:
    /// 1. [`S3Options::region`];
    /// 2. the region of the profile named in [`S3Options::profile`];
    /// 3. `AWS_REGION`, then `AWS_DEFAULT_REGION`;
    /// 4. the region of the ambient profile (`AWS_PROFILE`, else `default`) — after the
    ///    environment, as in the AWS CLI and SDKs;
    /// 5. `None`: object_store's default (`us-east-1`), reached only when nothing names one.
    ///
    /// ```
    /// use guideloom_publish::credentials::{RegionInputs, RegionSource};
    ///
    /// let inputs = RegionInputs {
    ///     profile: Some("eu-central-1".into()),
    ///     profile_named: true,
    ///     environment: Some("us-west-2".into()),
    ///     ..RegionInputs::default()
    /// };
    /// let picked = inputs.pick().unwrap();
    /// assert_eq!(picked.region, "eu-central-1");
    /// assert_eq!(picked.source, RegionSource::NamedProfile);
    /// ```
    pub fn pick(&self) -> Option<ResolvedRegion> {
        fn set(v: &Option<String>) -> Option<&str> {
            v.as_deref().filter(|s| !s.trim().is_empty())
        }
        let profile_source = if self.profile_named {
            RegionSource::NamedProfile
        } else {
            RegionSource::AmbientProfile
        };
        let order = [
            (set(&self.options), RegionSource::Options),
            (
                set(&self.profile).filter(|_| self.profile_named),
                profile_source,
            ),
            (set(&self.environment), RegionSource::Environment),
            (
                set(&self.profile).filter(|_| !self.profile_named),
                profile_source,
            ),
        ];
        order
            .into_iter()
            .find_map(|(region, source)| region.map(|r| (r, source)))
            .map(|(region, source)| ResolvedRegion {
                region: region.trim().to_owned(),
                source,
            })
    }
}

/// The selected profile of the shared AWS config files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsProfile {
    /// Its name.
    pub name: String,
    /// Its `region`, if it sets one.
    pub region: Option<String>,
}

/// The shared config files searched, for error messages (paths only).
fn searched_files() -> String {
    let config = std::env::var("AWS_CONFIG_FILE").unwrap_or_else(|_| "~/.aws/config".into());
    let credentials = std::env::var("AWS_SHARED_CREDENTIALS_FILE")
        .unwrap_or_else(|_| "~/.aws/credentials".into());
    format!("{config} and {credentials}")
}

/// Loads the profile `named` (or, when `None`, the ambient one: `AWS_PROFILE`, else
/// `default`) from the shared config files.
///
/// A named profile that does not exist is an [`Error::AwsProfile`] naming it and the files
/// searched, and so are files that cannot be read or parsed. For the ambient profile both are
/// `Ok(None)` (unparsable files with a warning), as in the AWS SDKs: the default chain then
/// tries its other sources.
pub fn load_profile(named: Option<&str>) -> Result<Option<AwsProfile>> {
    let fs = Fs::real();
    let env = Env::real();
    let files = EnvConfigFiles::default();
    let name_override = named.map(|n| Cow::Owned(n.to_owned()));
    // The loader is async in signature only (it reads with std::fs), so one poll completes
    // it: no runtime, no blocking, and no nested-executor panic when called from async code.
    let loaded = complete_now(aws_config::profile::load(&fs, &env, &files, name_override));
    let set = match loaded {
        Some(Ok(set)) => set,
        None => {
            return Err(Error::AwsProfile {
                profile: named.unwrap_or("(ambient)").to_owned(),
                what: "aws-config's profile loader did not complete synchronously; this \
                       aws-config version is not supported by guideloom-publish"
                    .to_owned(),
                source: None,
            });
        }
        Some(Err(e)) => match named {
            Some(name) => {
                return Err(Error::AwsProfile {
                    profile: name.to_owned(),
                    what: format!("could not load {}", searched_files()),
                    source: Some(Box::new(e)),
                });
            }
            // As the AWS SDKs do for the ambient profile: warn and go on with the other
            // sources (environment, web identity, roles) rather than fail every root.
            None => {
                warn!(files = %searched_files(), error = %e, "ignoring unreadable shared AWS config files");
                return Ok(None);
            }
        },
    };
    let selected = set.selected_profile().to_owned();
    match set.get_profile(&selected) {
        Some(profile) => Ok(Some(AwsProfile {
            name: selected,
            region: profile.get("region").map(str::to_owned),
        })),
        None if named.is_some() => {
            let mut known: Vec<&str> = set.profiles().collect();
            known.sort_unstable();
            Err(Error::AwsProfile {
                profile: selected,
                what: format!(
                    "no such profile in {} (profiles found: {})",
                    searched_files(),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
                source: None,
            })
        }
        None => Ok(None),
    }
}

/// Polls `fut` once; `None` if it is not ready at once.
fn complete_now<F: std::future::Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

fn environment_region() -> Option<String> {
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
}

/// The region and credentials of an `s3://` root, resolved from [`S3Options`], the shared
/// config files and the environment.
#[derive(Debug)]
pub struct AwsChain {
    /// The region ([`RegionInputs::pick`]); `None` when no source names one.
    pub region: Option<ResolvedRegion>,
    /// The credential provider to hand to object_store.
    pub credentials: AwsChainCredentials,
}

impl AwsChain {
    /// Resolves `options`: loads the named (or ambient) profile, picks the region and builds
    /// the credential provider (which fetches nothing until the first request).
    ///
    /// ```no_run
    /// use guideloom_publish::S3Options;
    /// use guideloom_publish::credentials::AwsChain;
    ///
    /// let options = S3Options { profile: Some("analytics".into()), ..S3Options::default() };
    /// let chain = AwsChain::resolve(&options)?;
    /// println!("region {:?} via {}", chain.region, chain.credentials.label());
    /// # Ok::<(), guideloom_publish::Error>(())
    /// ```
    pub fn resolve(options: &S3Options) -> Result<AwsChain> {
        let named = options.profile.as_deref();
        let profile = load_profile(named)?;
        let region = RegionInputs {
            options: options.region.clone(),
            profile: profile.as_ref().and_then(|p| p.region.clone()),
            profile_named: named.is_some(),
            environment: environment_region(),
        }
        .pick();
        let region_name = region.as_ref().map(|r| r.region.clone());
        let credentials = match named {
            Some(name) => AwsChainCredentials::profile(name, region_name),
            None => AwsChainCredentials::default_chain(region_name),
        };
        Ok(AwsChain {
            region,
            credentials,
        })
    }
}

enum Source {
    Profile {
        name: String,
        region: Option<String>,
    },
    DefaultChain {
        region: Option<String>,
    },
    Given,
}

struct Cached {
    credential: Arc<AwsCredential>,
    expiry: Option<SystemTime>,
}

impl Cached {
    fn fresh_at(&self, now: SystemTime) -> bool {
        match self.expiry {
            None => true,
            Some(expiry) => now + REFRESH_BEFORE_EXPIRY < expiry,
        }
    }
}

/// aws-config's credential providers as an object_store [`CredentialProvider`] for
/// `AmazonS3Builder::with_credentials`, with a cache that refreshes
/// 5 minutes before expiry (one fetch at a time; concurrent requests wait for
/// it). Its `Debug` output names the source, never a key.
pub struct AwsChainCredentials {
    label: String,
    source: Source,
    provider: OnceCell<SharedCredentialsProvider>,
    cache: Mutex<Option<Cached>>,
}

impl AwsChainCredentials {
    /// Credentials of the profile `name` only (region `region` for STS calls it makes).
    pub fn profile(name: &str, region: Option<String>) -> Self {
        Self::with_source(
            format!("AWS profile {name:?}"),
            Source::Profile {
                name: name.to_owned(),
                region,
            },
            OnceCell::new(),
        )
    }

    /// aws-config's default chain (environment, ambient profile, web identity, container and
    /// instance roles); `region` is used for STS calls, `None` lets aws-config find one.
    pub fn default_chain(region: Option<String>) -> Self {
        Self::with_source(
            "AWS default credential chain".to_owned(),
            Source::DefaultChain { region },
            OnceCell::new(),
        )
    }

    /// Any aws-config credential provider, described as `label` in logs and errors.
    pub fn from_provider(
        label: impl Into<String>,
        provider: impl ProvideCredentials + 'static,
    ) -> Self {
        Self::with_source(
            label.into(),
            Source::Given,
            OnceCell::new_with(Some(SharedCredentialsProvider::new(provider))),
        )
    }

    fn with_source(
        label: String,
        source: Source,
        provider: OnceCell<SharedCredentialsProvider>,
    ) -> Self {
        AwsChainCredentials {
            label,
            source,
            provider,
            cache: Mutex::new(None),
        }
    }

    /// Where the credentials come from, e.g. `AWS profile "dev"` (no secrets).
    pub fn label(&self) -> &str {
        &self.label
    }

    async fn provider(&self) -> &SharedCredentialsProvider {
        self.provider
            .get_or_init(|| async {
                match &self.source {
                    Source::Profile { name, region } => {
                        let config = provider_config().with_region(region.clone().map(Region::new));
                        SharedCredentialsProvider::new(
                            ProfileFileCredentialsProvider::builder()
                                .configure(&config)
                                .profile_name(name)
                                .build(),
                        )
                    }
                    Source::DefaultChain { region } => {
                        let mut builder =
                            DefaultCredentialsChain::builder().configure(provider_config());
                        if let Some(region) = region {
                            builder = builder.region(Region::new(region.clone()));
                        }
                        SharedCredentialsProvider::new(builder.build().await)
                    }
                    Source::Given => unreachable!("a given provider is set at construction"),
                }
            })
            .await
    }

    /// The current credential: the cached one while it is fresh, else a new one from the
    /// provider.
    async fn current(&self) -> std::result::Result<Arc<AwsCredential>, CredentialsFailed> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.fresh_at(SystemTime::now())
        {
            return Ok(Arc::clone(&cached.credential));
        }
        let provider = self.provider().await;
        let span = info_span!("aws_credentials", source = %self.label);
        let fetched = provider
            .provide_credentials()
            .instrument(span)
            .await
            .map_err(|e| CredentialsFailed {
                label: self.label.clone(),
                detail: error_chain(&e),
            })?;
        debug!(source = %self.label, expiry = ?fetched.expiry(), "fetched AWS credentials");
        let credential = Arc::new(AwsCredential {
            key_id: fetched.access_key_id().to_owned(),
            secret_key: fetched.secret_access_key().to_owned(),
            token: fetched.session_token().map(str::to_owned),
        });
        *cache = Some(Cached {
            credential: Arc::clone(&credential),
            expiry: fetched.expiry(),
        });
        Ok(credential)
    }
}

impl fmt::Debug for AwsChainCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let expiry = self
            .cache
            .try_lock()
            .ok()
            .and_then(|c| c.as_ref().map(|c| c.expiry));
        f.debug_struct("AwsChainCredentials")
            .field("source", &self.label)
            .field("cached_expiry", &expiry)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl CredentialProvider for AwsChainCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        self.current()
            .await
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })
    }
}

/// The credential provider failed; `detail` is its error chain (never a secret).
#[derive(Debug, thiserror::Error)]
#[error("no AWS credentials from {label}: {detail}")]
struct CredentialsFailed {
    label: String,
    detail: String,
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests;
