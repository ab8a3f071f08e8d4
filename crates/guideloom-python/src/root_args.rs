//! How a call's root arguments (`s3=`, `gcs=`, `azure=`, `mount=`, `object_store=`,
//! `shard_store=`, `storage_options=`) become the facade's `DatasetOptions` ([`call_options`]).
//!
//! Where a call's store comes from: `object_store=` (or the staging's `objects`) → that
//! store's registry; `s3=`, `gcs=` or `azure=` given for a root of their scheme (`s3://`,
//! `gs://`, `az://`) → a registry of the call alone (the options apply exactly, never a store
//! cached from other options); none of these → the global registry. Options of a scheme are
//! refused beside a bucket root of another scheme (`gcs=` for an `s3://` root), and ignored
//! beside a root that is no bucket (a local path, `memory://`, `http(s)://`), as `s3=` always
//! was. A staging built without `objects=` holds a default store of its own, used for `s3://`
//! roots (and refused beside `s3=` or another `object_store=`); `storage_options=`
//! (`StorageOptions`) sets the root's options (the shard size limit).

use std::sync::Arc;

use guideloom::DatasetOptions;
use guideloom::publish::{Registry, RootUri, StoreOptions};
use pyo3::prelude::*;

use crate::cloud_options::{AzureOptions, GcsOptions};
use crate::errors::raise;
use crate::options::{S3Options, StorageOptions};
use crate::shard_stores::ShardStoreArg;
use crate::stores::S3ObjectStore;

/// The per-call options of the cloud schemes: `s3=`, `gcs=`, `azure=`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SchemeArgs<'a, 'py> {
    pub(crate) s3: Option<&'a Bound<'py, S3Options>>,
    pub(crate) gcs: Option<&'a Bound<'py, GcsOptions>>,
    pub(crate) azure: Option<&'a Bound<'py, AzureOptions>>,
}

/// One scheme's keyword: its name, the scheme of its roots, how its options are named.
struct Keyword {
    name: &'static str,
    scheme: &'static str,
    options: &'static str,
}

const S3: Keyword = Keyword {
    name: "s3",
    scheme: "s3",
    options: "S3Options",
};
const GCS: Keyword = Keyword {
    name: "gcs",
    scheme: "gs",
    options: "GcsOptions",
};
const AZURE: Keyword = Keyword {
    name: "azure",
    scheme: "az",
    options: "AzureOptions",
};
const KEYWORDS: [&Keyword; 3] = [&S3, &GCS, &AZURE];

impl SchemeArgs<'_, '_> {
    /// The store options of each keyword given, with the keyword.
    fn given(&self) -> Vec<(&'static Keyword, StoreOptions)> {
        let mut given = Vec::new();
        if let Some(s3) = self.s3 {
            given.push((&S3, s3.get().store_options()));
        }
        if let Some(gcs) = self.gcs {
            given.push((&GCS, gcs.get().store_options()));
        }
        if let Some(azure) = self.azure {
            given.push((&AZURE, azure.get().store_options()));
        }
        given
    }

    /// The store options these arguments give a root of `uri`: those of the root's scheme
    /// when it is a bucket (`s3://`, `gs://`, `az://`) and they were given; `None` otherwise
    /// (a root that is no bucket ignores them). Options of another scheme than a bucket
    /// root's are an `InvalidArgumentError`.
    fn for_root(&self, uri: &str) -> PyResult<Option<StoreOptions>> {
        let Ok(RootUri::Bucket { scheme, .. }) = RootUri::parse(uri) else {
            return Ok(None);
        };
        let mut chosen = None;
        for (keyword, options) in self.given() {
            if keyword.scheme == scheme {
                chosen = Some(options);
                continue;
            }
            let right = KEYWORDS
                .iter()
                .find(|k| k.scheme == scheme)
                .map_or_else(String::new, |k| {
                    format!(": pass {}={}(...)", k.name, k.options)
                });
            return Err(invalid(format!(
                "{}= ({}) configures {}:// roots, not {uri:?} (a {scheme}:// root){right}",
                keyword.name, keyword.options, keyword.scheme
            )));
        }
        Ok(chosen)
    }
}

/// The store arguments of one call.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreArgs<'a, 'py> {
    pub(crate) schemes: SchemeArgs<'a, 'py>,
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
    let scheme_options = args.schemes.for_root(uri)?;
    match (py_store, args.schemes.s3.is_some()) {
        (Some(_), true) if own && args.object_store.is_none() => Err(invalid(format!(
            "{OWN_STORE}, which would not use s3=: build the staging with \
             objects=S3ObjectStore(options=<the S3Options>)"
        ))),
        (Some(_), true) => Err(invalid(
            "pass either s3= or object_store= (the store carries its own S3Options)".to_owned(),
        )),
        (Some(store), false) => {
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
        (None, _) => {
            match scheme_options {
                Some(store) => {
                    options.store = store.with_mount(args.mount);
                    options.registry = Some(Arc::new(Registry::new()));
                }
                // No options of the root's scheme (or no bucket root): the global registry.
                None => options.store.mount = args.mount,
            }
            Ok(options)
        }
    }
}
