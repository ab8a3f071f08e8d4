//! Options of `gs://` and `az://` roots from Python: `GcsOptions` (endpoint, service-account
//! key file, unsigned requests, plain HTTP, retries) and `AzureOptions` (account, endpoint, the
//! Azurite emulator, plain HTTP, retries), the GCS and Azure parts and the retry of the Rust
//! `StoreOptions`, as `S3Options` is its S3 part (`crate::options`).
//!
//! Neither holds a credential: keys, tokens and SAS signatures come from each service's
//! standard environment, read by object_store when a store is built (GCS:
//! `GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_SERVICE_ACCOUNT_PATH`, `GOOGLE_SERVICE_ACCOUNT_KEY`,
//! `GOOGLE_APPLICATION_CREDENTIALS`, the gcloud application-default file, the metadata
//! server; Azure: `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_KEY`, client secrets,
//! workload identity, the Azure CLI, managed identity). An `endpoint_url` that carries one
//! (`user:password@`, or a query string such as a SAS token) is refused, and the refusal shows
//! the endpoint without it.

use std::path::PathBuf;

use guideloom::publish::{
    AzureOptions as RustAzureOptions, DEFAULT_OBJECT_STORE_RETRY, GcsOptions as RustGcsOptions,
    RetryPolicy, StoreOptions,
};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::raise;
use crate::options::{py_str, retry_policy, without_userinfo};

fn invalid(text: String) -> PyErr {
    raise("InvalidArgumentError", text)
}

/// `endpoint` as errors and reprs show it: no userinfo, no query string or fragment.
fn shown(endpoint: &str) -> String {
    without_userinfo(endpoint.split(['?', '#']).next().unwrap_or_default())
}

/// `true`/`false` as Python writes them.
fn py_bool(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// Checks `endpoint_url=` of `class`: an `http://` or `https://` URL with a host and no
/// credentials in it; a plain `http://` one needs `allow_http=True` (`plain_ok`: the emulator,
/// which is plain HTTP by nature). Returns the URL's path (after the authority).
fn check_endpoint<'e>(
    class: &str,
    endpoint: &'e str,
    allow_http: bool,
    plain_ok: bool,
) -> PyResult<&'e str> {
    let show = shown(endpoint);
    let Some((scheme, rest)) = endpoint.split_once("://") else {
        return Err(invalid(format!(
            "{class}: endpoint_url must be an http:// or https:// URL, not {show:?}"
        )));
    };
    let plain = scheme.eq_ignore_ascii_case("http");
    if !plain && !scheme.eq_ignore_ascii_case("https") {
        return Err(invalid(format!(
            "{class}: endpoint_url must be an http:// or https:// URL, not {show:?}"
        )));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    if authority.contains('@') || path.contains(['?', '#']) {
        return Err(invalid(format!(
            "{class}: endpoint_url {show:?} carries credentials (user:password@ or a query \
             string such as a SAS token); pass the endpoint alone: credentials come from the \
             environment and are never stored in the options"
        )));
    }
    if authority.is_empty() {
        return Err(invalid(format!(
            "{class}: endpoint_url {show:?} has no host"
        )));
    }
    if plain && !allow_http && !plain_ok {
        return Err(invalid(format!(
            "{class}: endpoint_url {show:?} is plain http://; pass allow_http=True to allow it"
        )));
    }
    Ok(path)
}

/// An optional path argument (`str` or `os.PathLike` of a `str`) of `class`, not empty.
fn path_arg(
    value: Option<&Bound<'_, PyAny>>,
    class: &str,
    name: &str,
) -> PyResult<Option<PathBuf>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let path = value
        .py()
        .import("os")?
        .getattr("fspath")?
        .call1((value,))?;
    let path = match path.cast::<PyString>() {
        Ok(s) => s.to_str()?.to_owned(),
        Err(_) => {
            return Err(invalid(format!(
                "{class}: {name} must be a str or a str path (bytes paths are not supported)"
            )));
        }
    };
    if path.is_empty() {
        return Err(invalid(format!("{class}: {name} must not be empty")));
    }
    Ok(Some(PathBuf::from(path)))
}

/// `retries=` as a policy (`None` or not given: the object-store default).
fn retry_arg(retries: Option<&Bound<'_, PyAny>>) -> PyResult<Option<RetryPolicy>> {
    retries
        .filter(|r| !r.is_none())
        .map(retry_policy)
        .transpose()
}

/// The attempts of each request of `retry` (`None`: the object-store default).
fn attempts(retry: Option<RetryPolicy>) -> u32 {
    retry.unwrap_or(DEFAULT_OBJECT_STORE_RETRY).max_attempts
}

fn hash_of(debug: &impl std::fmt::Debug, retries: u32) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{debug:?}").hash(&mut h);
    retries.hash(&mut h);
    h.finish()
}

/// Options of `gs://` roots. Credentials come from the standard Google sources; a
/// service-account key file is named by its path, never read into the options.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct GcsOptions {
    /// The GCS part of the store options.
    pub(crate) inner: RustGcsOptions,
    /// `retries=`: the store options' retry (`None`: the object-store default).
    pub(crate) retry: Option<RetryPolicy>,
}

impl GcsOptions {
    /// The Python options as the Rust store options of a `gs://` root.
    pub(crate) fn store_options(&self) -> StoreOptions {
        StoreOptions {
            gcs: self.inner.clone(),
            retry: self.retry,
            ..StoreOptions::default()
        }
    }

    /// The Python options of a `gs://` root's store options.
    pub(crate) fn from_store_options(options: &StoreOptions) -> Self {
        GcsOptions {
            inner: options.gcs.clone(),
            retry: options.retry,
        }
    }
}

#[pymethods]
impl GcsOptions {
    #[new]
    #[pyo3(signature = (*, endpoint_url = None, service_account_path = None, anonymous = false, allow_http = false, retries = None))]
    fn new(
        endpoint_url: Option<String>,
        service_account_path: Option<&Bound<'_, PyAny>>,
        anonymous: bool,
        allow_http: bool,
        retries: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if let Some(endpoint) = &endpoint_url {
            check_endpoint("GcsOptions", endpoint, allow_http, false)?;
        }
        let inner = RustGcsOptions {
            service_account_path: path_arg(
                service_account_path,
                "GcsOptions",
                "service_account_path",
            )?,
            endpoint: endpoint_url,
            allow_http,
            anonymous,
        };
        Ok(GcsOptions {
            inner,
            retry: retry_arg(retries)?,
        })
    }

    /// Base URL of a GCS-compatible server (`None`: Google).
    #[getter]
    fn endpoint_url(&self) -> Option<&str> {
        self.inner.endpoint.as_deref()
    }

    /// The service-account JSON key file (`None`: the environment's credentials).
    #[getter]
    fn service_account_path(&self) -> Option<String> {
        self.inner
            .service_account_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
    }

    /// Requests are sent unsigned (an emulator, or a public bucket).
    #[getter]
    fn anonymous(&self) -> bool {
        self.inner.anonymous
    }

    #[getter]
    fn allow_http(&self) -> bool {
        self.inner.allow_http
    }

    /// Attempts of each request (1 = no retry).
    #[getter]
    fn retries(&self) -> u32 {
        attempts(self.retry)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<GcsOptions>()
            .is_ok_and(|o| o.get().inner == self.inner && o.get().retries() == self.retries())
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.inner, self.retries())
    }

    fn __repr__(&self) -> String {
        let endpoint = self.inner.endpoint.as_deref().map(shown);
        format!(
            "GcsOptions(endpoint_url={}, service_account_path={}, anonymous={}, allow_http={}, retries={})",
            py_str(endpoint.as_deref()),
            py_str(self.service_account_path().as_deref()),
            py_bool(self.inner.anonymous),
            py_bool(self.inner.allow_http),
            self.retries(),
        )
    }
}

/// Options of `az://` roots (Azure Blob Storage). Credentials come from the standard Azure
/// sources (`AZURE_STORAGE_ACCOUNT_KEY`, SAS, identities); with `use_emulator=True`, Azurite's
/// published development account and key.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct AzureOptions {
    /// The Azure part of the store options.
    pub(crate) inner: RustAzureOptions,
    /// `retries=`: the store options' retry (`None`: the object-store default).
    pub(crate) retry: Option<RetryPolicy>,
}

impl AzureOptions {
    /// The Python options as the Rust store options of an `az://` root.
    pub(crate) fn store_options(&self) -> StoreOptions {
        StoreOptions {
            azure: self.inner.clone(),
            retry: self.retry,
            ..StoreOptions::default()
        }
    }

    /// The Python options of an `az://` root's store options.
    pub(crate) fn from_store_options(options: &StoreOptions) -> Self {
        AzureOptions {
            inner: options.azure.clone(),
            retry: options.retry,
        }
    }
}

/// Azure storage account names: 3 to 24 lowercase letters and digits.
fn check_account(account: &str) -> PyResult<()> {
    let ok = (3..=24).contains(&account.len())
        && account
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "AzureOptions: account_name must be 3 to 24 lowercase letters and digits, not \
             {account:?}"
        )))
    }
}

#[pymethods]
impl AzureOptions {
    #[new]
    #[pyo3(signature = (*, account_name = None, endpoint_url = None, use_emulator = false, allow_http = false, retries = None))]
    fn new(
        account_name: Option<String>,
        endpoint_url: Option<String>,
        use_emulator: bool,
        allow_http: bool,
        retries: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if let Some(account) = &account_name {
            check_account(account)?;
        }
        if let Some(endpoint) = &endpoint_url {
            let path = check_endpoint("AzureOptions", endpoint, allow_http, use_emulator)?;
            if use_emulator && !path.trim_end_matches('/').is_empty() {
                return Err(invalid(format!(
                    "AzureOptions: with use_emulator=True, endpoint_url is the emulator's blob \
                     base URL without the account (such as http://127.0.0.1:10000), not {:?}",
                    shown(endpoint)
                )));
            }
        }
        let inner = RustAzureOptions {
            account: account_name,
            endpoint: endpoint_url,
            use_emulator,
            allow_http,
        };
        Ok(AzureOptions {
            inner,
            retry: retry_arg(retries)?,
        })
    }

    /// The storage account (`None`: `AZURE_STORAGE_ACCOUNT_NAME`, or the emulator's).
    #[getter]
    fn account_name(&self) -> Option<&str> {
        self.inner.account.as_deref()
    }

    /// The blob service URL (with `use_emulator`, the emulator's base URL).
    #[getter]
    fn endpoint_url(&self) -> Option<&str> {
        self.inner.endpoint.as_deref()
    }

    #[getter]
    fn use_emulator(&self) -> bool {
        self.inner.use_emulator
    }

    #[getter]
    fn allow_http(&self) -> bool {
        self.inner.allow_http
    }

    /// Attempts of each request (1 = no retry).
    #[getter]
    fn retries(&self) -> u32 {
        attempts(self.retry)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<AzureOptions>()
            .is_ok_and(|o| o.get().inner == self.inner && o.get().retries() == self.retries())
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.inner, self.retries())
    }

    fn __repr__(&self) -> String {
        let endpoint = self.inner.endpoint.as_deref().map(shown);
        format!(
            "AzureOptions(account_name={}, endpoint_url={}, use_emulator={}, allow_http={}, retries={})",
            py_str(self.inner.account.as_deref()),
            py_str(endpoint.as_deref()),
            py_bool(self.inner.use_emulator),
            py_bool(self.inner.allow_http),
            self.retries(),
        )
    }
}
