//! `gs://` (feature `gcs`) and `az://` (feature `azure`) roots through object_store's Google
//! Cloud Storage and Azure Blob Storage clients.
//!
//! Both services implement conditional writes natively, and object_store uses them:
//! create-only is `ifGenerationMatch=0` on GCS and `If-None-Match: *` on Azure; an update is
//! `If-Match: <etag>` on Azure and a generation match on GCS (see [`EtagCasOnGenerations`]).
//! The one-time probe of [`ObjectStoreBucket`] still checks both before the first write.
//!
//! Credentials come only from each service's standard sources, read by object_store's
//! `from_env` builders; the library stores none and logs none:
//! - GCS: `GOOGLE_SERVICE_ACCOUNT` / `GOOGLE_SERVICE_ACCOUNT_PATH` / `GOOGLE_SERVICE_ACCOUNT_KEY`,
//!   [`GcsOptions::service_account_path`], `GOOGLE_APPLICATION_CREDENTIALS` or the gcloud
//!   application-default credentials file, else the metadata server (GCE, GKE).
//! - Azure: `AZURE_STORAGE_ACCOUNT_KEY`, SAS tokens, client secrets, workload identity
//!   (federated token file), the Azure CLI or managed identity (`AZURE_*` variables).
//!
//! The cross-crate tests run both against emulators started by `cargo xtask ci`
//! (fake-gcs-server and Azurite; see docs/publication.md for what each emulator departs from).

use std::path::PathBuf;

/// How `gs://` roots are reached when no store is registered for the bucket: the GCS part of
/// [`StoreOptions`](super::StoreOptions), whose retry and timeouts apply to every remote
/// client. Credentials are never part of this (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcsOptions {
    /// A service-account JSON key file (`None`: `GOOGLE_SERVICE_ACCOUNT` and the other
    /// standard sources). A path, not the key itself: nothing secret is held here.
    pub service_account_path: Option<PathBuf>,
    /// Base URL of a GCS-compatible server such as an emulator (`None`: Google).
    pub endpoint: Option<String>,
    /// Allow a plain `http://` endpoint.
    pub allow_http: bool,
    /// Send requests unsigned, without fetching a token (an emulator such as fake-gcs-server,
    /// or a public bucket read anonymously). Also `GOOGLE_SKIP_SIGNATURE=true`
    /// ([`GcsOptions::with_environment`]).
    pub anonymous: bool,
}

impl GcsOptions {
    /// Sets the service-account JSON key file ([`GcsOptions::service_account_path`]).
    #[must_use]
    pub fn with_service_account_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.service_account_path = Some(path.into());
        self
    }

    /// Sets the base URL of a GCS-compatible server.
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Allows a plain `http://` endpoint.
    #[must_use]
    pub fn with_allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// Sends requests unsigned ([`GcsOptions::anonymous`]).
    #[must_use]
    pub fn with_anonymous(mut self, anonymous: bool) -> Self {
        self.anonymous = anonymous;
        self
    }
}

/// How `az://` roots are reached when no store is registered for the container: the Azure
/// part of [`StoreOptions`](super::StoreOptions), whose retry and timeouts apply to every
/// remote client. Credentials are never part of this (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AzureOptions {
    /// The storage account (`None`: `AZURE_STORAGE_ACCOUNT_NAME`). Required unless
    /// [`AzureOptions::use_emulator`].
    pub account: Option<String>,
    /// Blob service URL, e.g. an Azurite instance `http://127.0.0.1:10000/devstoreaccount1`
    /// (`None`: `https://<account>.blob.core.windows.net`).
    pub endpoint: Option<String>,
    /// Use the Azurite emulator: its well-known development account (`devstoreaccount1`, or
    /// [`AzureOptions::account`]) and public key, at [`AzureOptions::endpoint`] when set (the
    /// blob service's base URL, `http://127.0.0.1:PORT`, without the account), else at
    /// `AZURITE_BLOB_STORAGE_URL` (default `http://127.0.0.1:10000`).
    pub use_emulator: bool,
    /// Allow a plain `http://` endpoint.
    pub allow_http: bool,
}

impl AzureOptions {
    /// Sets the storage account ([`AzureOptions::account`]).
    #[must_use]
    pub fn with_account(mut self, account: impl Into<String>) -> Self {
        self.account = Some(account.into());
        self
    }

    /// Sets the blob service URL ([`AzureOptions::endpoint`]).
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Uses the Azurite emulator ([`AzureOptions::use_emulator`]).
    #[must_use]
    pub fn with_use_emulator(mut self, emulator: bool) -> Self {
        self.use_emulator = emulator;
        self
    }

    /// Allows a plain `http://` endpoint.
    #[must_use]
    pub fn with_allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }
}

/// The variable that allows plain-HTTP GCS endpoints, as object_store names it.
pub const GCS_ALLOW_HTTP_VARIABLE: &str = "GOOGLE_ALLOW_HTTP";
/// The variable that makes GCS requests unsigned ([`GcsOptions::anonymous`]).
pub const GCS_SKIP_SIGNATURE_VARIABLE: &str = "GOOGLE_SKIP_SIGNATURE";
/// The variable that allows plain-HTTP Azure endpoints, as object_store names it.
pub const AZURE_ALLOW_HTTP_VARIABLE: &str = "AZURE_ALLOW_HTTP";

impl GcsOptions {
    /// These options completed from the environment `lookup` reads (a variable's value by
    /// name), where they leave the choice to it: plain HTTP allowed when
    /// [`GCS_ALLOW_HTTP_VARIABLE`] is true, unsigned requests when
    /// [`GCS_SKIP_SIGNATURE_VARIABLE`] is. An option's `false` cannot be told from unset, so a
    /// true variable wins, as for object_store's own builders and
    /// [`S3Options::with_environment`](super::S3Options::with_environment). `gs://` stores
    /// built by the registry apply the process environment this way; without it the store's
    /// client options would replace the `allow_http` object_store's `from_env` read, and an
    /// unsigned client would still fetch a token before each upload.
    ///
    /// ```
    /// use guideloom_publish::GcsOptions;
    /// let env = |name: &str| (name == "GOOGLE_ALLOW_HTTP").then(|| "TRUE".to_owned());
    /// let options = GcsOptions::default().with_environment(env);
    /// assert!(options.allow_http && !options.anonymous);
    /// ```
    #[must_use]
    pub fn with_environment(&self, lookup: impl Fn(&str) -> Option<String>) -> GcsOptions {
        let set = |name: &str| lookup(name).is_some_and(|v| super::is_true(&v));
        GcsOptions {
            allow_http: self.allow_http || set(GCS_ALLOW_HTTP_VARIABLE),
            anonymous: self.anonymous || set(GCS_SKIP_SIGNATURE_VARIABLE),
            ..self.clone()
        }
    }
}

impl AzureOptions {
    /// These options completed from the environment `lookup` reads: plain HTTP allowed when
    /// [`AZURE_ALLOW_HTTP_VARIABLE`] is true (see [`GcsOptions::with_environment`] for why).
    /// The account, the emulator switch and the credentials object_store reads itself.
    ///
    /// ```
    /// use guideloom_publish::AzureOptions;
    /// let options = AzureOptions::default().with_environment(|_| Some("1".to_owned()));
    /// assert!(options.allow_http);
    /// ```
    #[must_use]
    pub fn with_environment(&self, lookup: impl Fn(&str) -> Option<String>) -> AzureOptions {
        AzureOptions {
            allow_http: self.allow_http
                || lookup(AZURE_ALLOW_HTTP_VARIABLE).is_some_and(|v| super::is_true(&v)),
            ..self.clone()
        }
    }
}

/// `scheme://user:secret@host/path?sas` → `scheme://host/path`: endpoints go into errors and
/// logs, userinfo and query strings (SAS tokens) never do.
#[cfg(any(feature = "gcs", feature = "azure", test))]
fn describe_endpoint(endpoint: &str) -> String {
    crate::uri::redact_userinfo(endpoint.split(['?', '#']).next().unwrap_or_default())
}

#[cfg(feature = "gcs")]
pub(super) use gcs::build_gcs;

#[cfg(feature = "gcs")]
mod gcs {
    use std::sync::Arc;

    use object_store::StaticCredentialProvider;
    use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder, GoogleConfigKey};

    use super::describe_endpoint;
    use crate::error::{Error, Result};
    use crate::registry::StoreOptions;
    use crate::registry::generation::EtagCasOnGenerations;
    use crate::store::ObjectStoreBucket;

    /// A `gs://bucket` store: `from_env()`, then the options win.
    pub(in crate::registry) fn build_gcs(
        bucket: &str,
        store: &StoreOptions,
    ) -> Result<Arc<ObjectStoreBucket>> {
        let options = &store.gcs.with_environment(|name| std::env::var(name).ok());
        let mut builder = GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(bucket)
            .with_retry(store.object_store_retry_config())
            .with_client_options(store.object_store_client(options.allow_http));
        if let Some(path) = &options.service_account_path {
            let path = path.to_str().ok_or_else(|| {
                Error::invalid(format!(
                    "gs://{bucket}: service account path {} is not UTF-8",
                    path.display()
                ))
            })?;
            builder = builder.with_service_account_path(path);
        }
        if let Some(endpoint) = &options.endpoint {
            builder = builder.with_base_url(endpoint);
        }
        if options.anonymous {
            // `skip_signature` leaves GETs, HEADs and LISTs unauthenticated, but object_store
            // 0.14 still asks its credential provider before a PUT (ignoring the flag there),
            // which would reach for the metadata server; a static empty token answers it.
            builder = builder.with_skip_signature(true).with_credentials(Arc::new(
                StaticCredentialProvider::new(GcpCredential {
                    bearer: String::new(),
                }),
            ));
        }
        // The URL requests go to: the options', else GOOGLE_BASE_URL as object_store read it.
        let base_url = builder.get_config_value(&GoogleConfigKey::BaseUrl);
        let store = builder
            .build()
            .map_err(|e| Error::storage(format!("gs://{bucket}"), "configure", e))?;
        let endpoint = format!(
            "gs://{bucket} at {}",
            base_url
                .as_deref()
                .map_or_else(|| "Google Cloud Storage".to_owned(), describe_endpoint)
        );
        let store = EtagCasOnGenerations::new(Arc::new(store));
        Ok(ObjectStoreBucket::new(Arc::new(store), endpoint))
    }
}

#[cfg(feature = "azure")]
pub(super) use azure::build_azure;

#[cfg(feature = "azure")]
mod azure {
    use std::sync::Arc;

    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

    use super::describe_endpoint;
    use crate::error::{Error, Result};
    use crate::registry::StoreOptions;
    use crate::store::ObjectStoreBucket;

    /// Azurite's development account and its well-known key, published in Azurite's README.
    const AZURITE_ACCOUNT: &str = "devstoreaccount1";
    const AZURITE_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    /// An `az://container` store: `from_env()`, then the options win.
    pub(in crate::registry) fn build_azure(
        container: &str,
        store: &StoreOptions,
    ) -> Result<Arc<ObjectStoreBucket>> {
        let options = &store
            .azure
            .with_environment(|name| std::env::var(name).ok());
        let mut builder = MicrosoftAzureBuilder::from_env()
            .with_container_name(container)
            .with_retry(store.object_store_retry_config())
            .with_client_options(store.object_store_client(options.allow_http));
        if let Some(account) = &options.account {
            builder = builder.with_account(account);
        }
        match (&options.endpoint, options.use_emulator) {
            // object_store's emulator mode reads its URL from the environment only: an
            // emulator at a given endpoint is the account-at-endpoint form with Azurite's
            // well-known account and key (public, documented; not a secret).
            (Some(endpoint), true) => {
                let account = options.account.as_deref().unwrap_or(AZURITE_ACCOUNT);
                let base = endpoint.trim_end_matches('/');
                builder = builder
                    .with_account(account)
                    .with_access_key(AZURITE_KEY)
                    .with_endpoint(format!("{base}/{account}"))
                    .with_allow_http(true);
            }
            (Some(endpoint), false) => builder = builder.with_endpoint(endpoint.clone()),
            (None, true) => builder = builder.with_use_emulator(true),
            (None, false) => {}
        }
        let account = builder.get_config_value(&AzureConfigKey::AccountName);
        let emulated = options.use_emulator
            || builder
                .get_config_value(&AzureConfigKey::UseEmulator)
                .is_some_and(|v| v == "true");
        if account.is_none() && !emulated {
            return Err(Error::invalid(format!(
                "az://{container}: no Azure storage account: set AZURE_STORAGE_ACCOUNT_NAME, \
                 or the account in the options (AzureOptions(account_name=...) in Python, \
                 AzureOptions::account in Rust), or use the emulator for Azurite \
                 (use_emulator=True in Python, AzureOptions::use_emulator in Rust)"
            )));
        }
        // The options' endpoint, else AZURE_STORAGE_ENDPOINT as object_store read it.
        let configured = builder.get_config_value(&AzureConfigKey::Endpoint);
        let store = builder
            .build()
            .map_err(|e| Error::storage(format!("az://{container}"), "configure", e))?;
        let at = match (&options.endpoint, emulated, &configured) {
            (Some(endpoint), _, _) | (None, false, Some(endpoint)) => describe_endpoint(endpoint),
            (None, true, _) => "the Azurite emulator".to_owned(),
            (None, false, None) => format!(
                "https://{}.blob.core.windows.net",
                account.as_deref().unwrap_or_default()
            ),
        };
        let endpoint = format!("az://{container} at {at}");
        Ok(ObjectStoreBucket::new(Arc::new(store), endpoint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_lose_userinfo_and_sas_tokens() {
        assert_eq!(
            describe_endpoint("https://u:p@acct.blob.core.windows.net/c?sv=2024&sig=SECRET"),
            "https://acct.blob.core.windows.net/c"
        );
        assert_eq!(
            describe_endpoint("http://127.0.0.1:4443"),
            "http://127.0.0.1:4443"
        );
    }

    fn lookup<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn a_true_environment_variable_completes_the_options_and_a_false_one_changes_nothing() {
        let gcs = GcsOptions::default();
        assert_eq!(gcs.with_environment(lookup(&[])), gcs);
        let on = lookup(&[
            ("GOOGLE_ALLOW_HTTP", " Yes"),
            ("GOOGLE_SKIP_SIGNATURE", "1"),
        ]);
        let completed = gcs.with_environment(on);
        assert!(completed.allow_http && completed.anonymous, "{completed:?}");
        let off = lookup(&[
            ("GOOGLE_ALLOW_HTTP", "false"),
            ("GOOGLE_SKIP_SIGNATURE", ""),
        ]);
        assert_eq!(gcs.with_environment(off), gcs);
        // An option already set stays set whatever the environment says.
        let set = GcsOptions::default()
            .with_allow_http(true)
            .with_anonymous(true)
            .with_endpoint("http://127.0.0.1:1");
        assert_eq!(
            set.with_environment(lookup(&[("GOOGLE_ALLOW_HTTP", "0")])),
            set
        );

        let azure = AzureOptions::default().with_account("a");
        assert_eq!(azure.with_environment(lookup(&[])), azure);
        assert!(
            azure
                .with_environment(lookup(&[("AZURE_ALLOW_HTTP", "ON")]))
                .allow_http
        );
        // Only the Azure variable counts for Azure, only Google's for GCS.
        assert!(
            !azure
                .with_environment(lookup(&[("GOOGLE_ALLOW_HTTP", "1")]))
                .allow_http
        );
        assert!(
            !gcs.with_environment(lookup(&[("AZURE_ALLOW_HTTP", "1")]))
                .allow_http
        );
    }

    #[cfg(feature = "gcs")]
    #[test]
    fn gcs_builds_from_options_without_network() {
        use crate::registry::{Registry, StoreOptions};
        let dir = tempfile::tempdir().unwrap();
        // The emulator form of a service-account file (fake-gcs-server): no key, no OAuth.
        let sa = dir.path().join("sa.json");
        std::fs::write(
            &sa,
            r#"{"gcs_base_url": "http://127.0.0.1:1", "disable_oauth": true,
                "client_email": "", "private_key": "", "private_key_id": ""}"#,
        )
        .unwrap();
        let mut opts = StoreOptions::default();
        opts.gcs.service_account_path = Some(sa);
        opts.gcs.endpoint = Some("http://x:secret@127.0.0.1:1".into());
        opts.gcs.allow_http = true;
        let store = Registry::new().resolve("gs://bkt/pre", &opts).unwrap();
        let d = store.describe();
        assert!(d.contains("gs://bkt at http://127.0.0.1:1"), "{d}");
        assert!(!d.contains("secret"), "{d}");

        // A service-account file that does not exist: a configure error naming it.
        opts.gcs.service_account_path = Some(dir.path().join("missing.json"));
        let err = Registry::new().resolve("gs://bkt/pre", &opts).unwrap_err();
        assert!(
            matches!(&err, crate::Error::Storage { key, operation: "configure", .. }
                if key == "gs://bkt")
                && err.to_string().contains("missing.json"),
            "{err}"
        );
    }

    #[cfg(feature = "azure")]
    #[test]
    fn azure_builds_from_options_without_network() {
        use crate::registry::{Registry, StoreOptions};
        let mut opts = StoreOptions::default();
        opts.azure.account = Some("devaccount".into());
        opts.azure.endpoint = Some("http://127.0.0.1:1/devaccount?sig=SECRET".into());
        opts.azure.allow_http = true;
        let store = Registry::new()
            .resolve("az://container/pre", &opts)
            .unwrap();
        let d = store.describe();
        assert!(
            d.contains("az://container at http://127.0.0.1:1/devaccount"),
            "{d}"
        );
        assert!(!d.contains("SECRET"), "{d}");

        // The emulator needs no account.
        let emulated =
            StoreOptions::default().with_azure(AzureOptions::default().with_use_emulator(true));
        let store = Registry::new().resolve("azure://c", &emulated).unwrap();
        assert!(store.describe().contains("Azurite"), "{}", store.describe());

        // No account anywhere: a typed error naming what to set. (Assumes this process has
        // no AZURE_STORAGE_ACCOUNT_NAME, as on the CI machines.)
        if std::env::var_os("AZURE_STORAGE_ACCOUNT_NAME").is_none() {
            let err = Registry::new()
                .resolve("az://c", &StoreOptions::default())
                .unwrap_err();
            assert!(
                matches!(&err, crate::Error::InvalidArgument { what }
                    if what.contains("AZURE_STORAGE_ACCOUNT_NAME")
                        && what.contains("AzureOptions::account")),
                "{err}"
            );
        }
    }
}
