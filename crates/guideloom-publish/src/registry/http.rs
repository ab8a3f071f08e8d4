//! `http(s)://` roots: the read-only store built from [`StoreOptions`] (its retry, timeouts
//! and listing flag; see `StoreOptions::http_options`).

use std::sync::Arc;

use super::StoreOptions;

#[cfg(not(feature = "http"))]
use crate::error::Error;
use crate::error::Result;
use crate::store::RootStore;

/// A read-only store for an `http(s)://` base URL (feature `http`).
#[cfg(feature = "http")]
pub(super) fn http_store(url: &str, options: &StoreOptions) -> Result<Arc<dyn RootStore>> {
    Ok(Arc::new(
        crate::store::HttpRootStore::with_options(url, options.http_options())?
            .with_listing(options.http_listing),
    ))
}

#[cfg(not(feature = "http"))]
pub(super) fn http_store(url: &str, _options: &StoreOptions) -> Result<Arc<dyn RootStore>> {
    Err(Error::Unsupported {
        what: format!(
            "{}: read-only HTTP roots need guideloom-publish's feature `http`",
            crate::uri::redact_userinfo(url.split('?').next().unwrap_or(""))
        ),
    })
}
