//! Root arguments and storage options from Python: a root is a `str` or an `os.PathLike`;
//! `S3Options` configures `s3://` roots (endpoint, region, addressing, plain HTTP, profile).

use guideloom::StoreOptions;
use guideloom::publish::{S3Addressing, S3Options as RustS3Options};
use pyo3::prelude::*;
use pyo3::types::PyString;

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

/// Options of `s3://` roots. Credentials come from the standard AWS chain (environment,
/// shared files, profiles); none are stored or logged here.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct S3Options {
    inner: RustS3Options,
}

#[pymethods]
impl S3Options {
    #[new]
    #[pyo3(signature = (*, region_name = None, endpoint_url = None, addressing_style = "path", profile_name = None, allow_http = false))]
    fn new(
        region_name: Option<String>,
        endpoint_url: Option<String>,
        addressing_style: &str,
        profile_name: Option<String>,
        allow_http: bool,
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
        Ok(S3Options {
            inner: RustS3Options {
                region: region_name,
                endpoint: endpoint_url,
                addressing,
                allow_http,
                profile: profile_name,
                ..RustS3Options::default()
            },
        })
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

    fn __repr__(&self) -> String {
        format!(
            "S3Options(region_name={:?}, endpoint_url={:?}, addressing_style={:?}, profile_name={:?}, allow_http={})",
            self.inner.region,
            self.inner.endpoint,
            self.addressing_style(),
            self.inner.profile,
            if self.inner.allow_http {
                "True"
            } else {
                "False"
            }
        )
    }
}

/// The storage options of a root argument's call.
pub(crate) fn storage_options(s3: Option<&Bound<'_, S3Options>>, mount: bool) -> StoreOptions {
    let mut options = StoreOptions {
        mount,
        ..StoreOptions::default()
    };
    if let Some(s3) = s3 {
        options.s3 = s3.get().inner.clone();
    }
    options
}
