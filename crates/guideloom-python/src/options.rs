//! Root arguments and storage options from Python: a root is a `str` or an `os.PathLike`;
//! `S3Options` configures `s3://` roots (endpoint, region, addressing, plain HTTP, profile,
//! retries): the S3 part and the retry of the Rust `StoreOptions`.

use guideloom::publish::{
    DEFAULT_OBJECT_STORE_RETRY, RetryPolicy, RootOptions, S3Addressing, S3Options as RustS3Options,
    StoreOptions,
};
use guideloom::storage::WriterOptions;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

use crate::errors::raise;

/// A root argument as a URI: a `str`, or any `os.PathLike` (through `os.fspath`).
pub(crate) fn root_uri(root: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = root.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    let path = root.py().import("os")?.getattr("fspath")?.call1((root,))?;
    match path.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => Err(raise(
            "InvalidArgumentError",
            "a root must be a str or a str path (bytes paths are not supported)",
        )),
    }
}

/// A storage's writer options from its constructor's optional arguments (`None`: the
/// format crate's default).
pub(crate) fn writer_options(
    max_shard_records: Option<u64>,
    max_shard_bytes: Option<u64>,
    chunk_bytes: Option<u64>,
) -> WriterOptions {
    let mut options = WriterOptions::default();
    if let Some(n) = max_shard_records {
        options = options.max_shard_records(n);
    }
    if let Some(n) = max_shard_bytes {
        options = options.max_shard_bytes(n);
    }
    if let Some(n) = chunk_bytes {
        options = options.stream_chunk_bytes(n);
    }
    options
}

/// Options of `s3://` roots. Credentials come from the standard AWS chain (environment,
/// shared files, profiles); none are stored or logged here.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct S3Options {
    /// The S3 part of the store options.
    pub(crate) inner: RustS3Options,
    /// `retries=`: the store options' retry (`None`: the object-store default).
    pub(crate) retry: Option<RetryPolicy>,
}

impl S3Options {
    /// The Python options as the Rust store options of an `s3://` root.
    pub(crate) fn store_options(&self) -> StoreOptions {
        StoreOptions {
            s3: self.inner.clone(),
            retry: self.retry,
            ..StoreOptions::default()
        }
    }

    /// The Python options of an `s3://` root's store options (the inverse of
    /// [`store_options`](Self::store_options)).
    pub(crate) fn from_store_options(options: &StoreOptions) -> Self {
        S3Options {
            inner: options.s3.clone(),
            retry: options.retry,
        }
    }
}

/// The most attempts `retries=` accepts (a bound, so a typo cannot retry for hours).
const MAX_ATTEMPTS: u32 = 100;

/// A non-negative `int` argument (not a `bool`) as a `u64`.
pub(crate) fn count_arg(value: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, not {}",
            value.get_type().name()?
        )));
    }
    let n: i128 = value.extract()?;
    u64::try_from(n).map_err(|_| {
        raise(
            "InvalidArgumentError",
            format!("{name} must be a non-negative int that fits 64 bits, not {n}"),
        )
    })
}

/// `retries=`: the number of attempts of each request (1 = no retry), with the S3 store's
/// default backoff bounds.
pub(crate) fn retry_policy(retries: &Bound<'_, PyAny>) -> PyResult<RetryPolicy> {
    let attempts = count_arg(retries, "retries")?;
    match u32::try_from(attempts) {
        Ok(n @ 1..=MAX_ATTEMPTS) => Ok(DEFAULT_OBJECT_STORE_RETRY.with_max_attempts(n)),
        _ => Err(raise(
            "InvalidArgumentError",
            format!(
                "retries is the number of attempts of a request, from 1 (no retry) to \
                 {MAX_ATTEMPTS}, not {attempts}"
            ),
        )),
    }
}

#[pymethods]
impl S3Options {
    #[new]
    #[pyo3(signature = (*, region_name = None, endpoint_url = None, addressing_style = "path", profile_name = None, allow_http = false, retries = None))]
    fn new(
        region_name: Option<String>,
        endpoint_url: Option<String>,
        addressing_style: &str,
        profile_name: Option<String>,
        allow_http: bool,
        retries: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let addressing = match addressing_style {
            "path" => S3Addressing::Path,
            "virtual" => S3Addressing::VirtualHosted,
            other => {
                return Err(raise(
                    "InvalidArgumentError",
                    format!("addressing_style must be \"path\" or \"virtual\", not {other:?}"),
                ));
            }
        };
        let inner = RustS3Options {
            region: region_name,
            endpoint: endpoint_url,
            addressing,
            allow_http,
            profile: profile_name,
        };
        let retry = match retries.filter(|r| !r.is_none()) {
            Some(retries) => Some(retry_policy(retries)?),
            None => None,
        };
        Ok(S3Options { inner, retry })
    }

    #[getter]
    fn region_name(&self) -> Option<&str> {
        self.inner.region.as_deref()
    }

    #[getter]
    fn endpoint_url(&self) -> Option<&str> {
        self.inner.endpoint.as_deref()
    }

    #[getter]
    fn addressing_style(&self) -> &'static str {
        match self.inner.addressing {
            S3Addressing::VirtualHosted => "virtual",
            _ => "path",
        }
    }

    #[getter]
    fn profile_name(&self) -> Option<&str> {
        self.inner.profile.as_deref()
    }

    #[getter]
    fn allow_http(&self) -> bool {
        self.inner.allow_http
    }

    /// Attempts of each request (1 = no retry).
    #[getter]
    fn retries(&self) -> u32 {
        self.retry
            .unwrap_or(DEFAULT_OBJECT_STORE_RETRY)
            .max_attempts
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<S3Options>()
            .is_ok_and(|o| o.get().inner == self.inner && o.get().retries() == self.retries())
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{:?}", self.inner).hash(&mut h);
        self.retries().hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        let endpoint = self.inner.endpoint.as_deref().map(without_userinfo);
        format!(
            "S3Options(region_name={}, endpoint_url={}, addressing_style='{}', profile_name={}, allow_http={}, retries={})",
            py_str(self.inner.region.as_deref()),
            py_str(endpoint.as_deref()),
            self.addressing_style(),
            py_str(self.inner.profile.as_deref()),
            if self.inner.allow_http {
                "True"
            } else {
                "False"
            },
            self.retries(),
        )
    }
}

/// An optional string as Python writes it: `'text'` or `None`.
pub(crate) fn py_str(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'")),
        None => "None".to_owned(),
    }
}

/// `url` with any `user:password@` of its authority replaced by `<redacted>@`.
pub(crate) fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://<redacted>{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// Options of a dataset root, for every call that writes or reads one
/// (`storage_options=StorageOptions(...)`): `max_encoded_shard_bytes` is the largest shard
/// written, uploaded or published (one PUT; default 5 GiB), the limit a `TooLargeError`
/// names.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct StorageOptions {
    max_encoded_shard_bytes: u64,
}

#[pymethods]
impl StorageOptions {
    #[new]
    #[pyo3(signature = (*, max_encoded_shard_bytes = None))]
    fn new(max_encoded_shard_bytes: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let max_encoded_shard_bytes = match max_encoded_shard_bytes.filter(|m| !m.is_none()) {
            None => RootOptions::default().max_encoded_shard_bytes,
            Some(m) => count_arg(m, "max_encoded_shard_bytes")?,
        };
        Ok(StorageOptions {
            max_encoded_shard_bytes,
        })
    }

    /// The largest shard written, uploaded or published, in bytes.
    #[getter]
    fn max_encoded_shard_bytes(&self) -> u64 {
        self.max_encoded_shard_bytes
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<StorageOptions>()
            .is_ok_and(|o| o.get().max_encoded_shard_bytes == self.max_encoded_shard_bytes)
    }

    fn __hash__(&self) -> u64 {
        self.max_encoded_shard_bytes
    }

    fn __repr__(&self) -> String {
        format!(
            "StorageOptions(max_encoded_shard_bytes={})",
            self.max_encoded_shard_bytes
        )
    }
}

impl StorageOptions {
    /// Sets these options on `root`.
    pub(crate) fn apply(&self, root: &mut RootOptions) {
        root.max_encoded_shard_bytes = self.max_encoded_shard_bytes;
    }
}
