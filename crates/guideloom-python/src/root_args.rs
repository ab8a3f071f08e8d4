//! How a call's root arguments (`s3=`, `mount=`, `object_store=`, `shard_store=`,
//! `storage_options=`) become the facade's `DatasetOptions` ([`call_options`]).
//!
//! Where a call's store comes from: `object_store=` (or the staging's `objects`) → that
//! store's registry; `s3=` → a registry of the call alone (the options apply exactly, never a
//! store cached from other options); neither → the global registry. A staging built without
//! `objects=` holds a default store of its own, used for `s3://` roots (and refused beside
//! `s3=` or another `object_store=`); `storage_options=` (`StorageOptions`) sets the root's
//! options (the shard size limit).

use std::sync::Arc;

use guideloom::DatasetOptions;
use guideloom::publish::{Registry, RootUri};
use pyo3::prelude::*;

use crate::errors::raise;
use crate::options::{S3Options, StorageOptions};
use crate::shard_stores::ShardStoreArg;
use crate::stores::S3ObjectStore;

/// The store arguments of one call.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreArgs<'a, 'py> {
    pub(crate) s3: Option<&'a Bound<'py, S3Options>>,
    pub(crate) mount: bool,
    pub(crate) object_store: Option<&'a Bound<'py, S3ObjectStore>>,
    pub(crate) shard_store: Option<ShardStoreArg<'py>>,
    pub(crate) storage: Option<&'a Bound<'py, StorageOptions>>,
}

fn is_s3(uri: &str) -> bool {
    matches!(RootUri::parse(uri), Ok(RootUri::Bucket { scheme, .. }) if scheme == "s3")
}

fn invalid(text: String) -> PyErr {
    raise("InvalidArgumentError", text)
}

/// The facade options of a call on `uri` (see the module documentation for where its store
/// comes from). Conflicting arguments are an `InvalidArgumentError`.
pub(crate) fn call_options(uri: &str, args: StoreArgs<'_, '_>) -> PyResult<DatasetOptions> {
    let staging = args.shard_store.as_ref().and_then(ShardStoreArg::staging);
    // A staging's store serves the root, except a default store the staging built itself
    // for a root that is not s3:// (there only its staging options apply).
    let own = staging.as_ref().is_some_and(|st| st.get().owns_its_store());
    let staged_store = staging
        .as_ref()
        .filter(|_| !own || is_s3(uri))
        .map(|st| st.get().store(st.py()).clone());
    const OWN_STORE: &str = "the shard_store's EphemeralFileStaging was built without objects= \
                             and holds its own default S3ObjectStore (AWS environment options)";
    let py_store = match (args.object_store, staged_store) {
        (Some(store), Some(staged)) => {
            if !staged.is(store) {
                return Err(invalid(if own {
                    format!(
                        "{OWN_STORE}, not object_store: build the staging with \
                         objects=<the store passed as object_store>"
                    )
                } else {
                    "shard_store stages through another store than object_store: build the \
                     staging with objects=<the store passed as object_store>"
                        .to_owned()
                }));
            }
            Some(store.clone())
        }
        (Some(store), None) => Some(store.clone()),
        (None, Some(staged)) => Some(staged),
        (None, None) => None,
    };
    let mut options = DatasetOptions::default();
    if let Some(staging) = &staging {
        options.root.staging = staging.get().staging_options();
    }
    if let Some(storage) = args.storage {
        storage.get().apply(&mut options.root);
    }
    match (py_store, args.s3) {
        (Some(_), Some(_)) if own && args.object_store.is_none() => Err(invalid(format!(
            "{OWN_STORE}, which would not use s3=: build the staging with \
             objects=S3ObjectStore(options=<the S3Options>)"
        ))),
        (Some(_), Some(_)) => Err(invalid(
            "pass either s3= or object_store= (the store carries its own S3Options)".to_owned(),
        )),
        (Some(store), None) => {
            if args.mount {
                return Err(invalid(
                    "mount=True declares a local directory; an object_store serves s3:// roots"
                        .to_owned(),
                ));
            }
            if !is_s3(uri) {
                return Err(invalid(format!(
                    "an S3ObjectStore serves s3://bucket/prefix roots, not {uri:?}"
                )));
            }
            let store = store.get();
            options.store = store.store_options();
            options.registry = Some(Arc::clone(&store.registry));
            Ok(options)
        }
        (None, Some(s3)) => {
            options.store = s3.get().store_options().with_mount(args.mount);
            if is_s3(uri) {
                options.registry = Some(Arc::new(Registry::new()));
            } else {
                // `retries=` is documented for s3:// roots: another root keeps its default.
                options.store.retry = None;
            }
            Ok(options)
        }
        (None, None) => {
            options.store.mount = args.mount;
            Ok(options)
        }
    }
}
