//! Tags: named, movable references to snapshots (`prod`, `eval-2026-12`), held in the
//! catalog (`annotations/catalog.json`, the one mutable object) and moved by
//! compare-and-swap, so a tag move, an annotation set and garbage collection's expiry
//! decisions are ordered against each other: a tag never names a snapshot that expired
//! before the move, and collection keeps every snapshot a tag names when it decides.
//! [`Root::tag`](crate::Root::tag), [`Root::untag`](crate::Root::untag) and
//! [`Root::tags`](crate::Root::tags) delegate here; [`Root::snapshot`](crate::Root::snapshot)
//! resolves a tag wherever a snapshot id is taken.

use std::collections::BTreeMap;

use tracing::{Instrument, info_span};

use crate::annotations::{CATALOG_KEY, Catalog, TagEntry, catalog_of};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::key::check_name;
use crate::manifest::MAX_CATALOG_BYTES;
use crate::snapshot_log::Snapshot;
use crate::store::{RootStore, cas_update};
use guideloom_io::RetryPolicy;

/// Points tag `name` at `snapshot` (creating or moving it): the previous target, if any.
/// Refused with [`Error::SnapshotExpired`] when the snapshot expired, and on a declared
/// mount ([`Error::MountedBucketCannotAnnotate`]: no compare-and-swap there).
pub(crate) async fn set(
    store: &dyn RootStore,
    identity: &Identity,
    name: &str,
    snapshot: &Snapshot,
    retry: &RetryPolicy,
) -> Result<Option<TagEntry>> {
    store.check_cas()?;
    check_name("tag", name)?;
    let dataset_id = identity.get(store).await?.dataset_id;
    let entry = TagEntry {
        snapshot_id: snapshot.id().to_owned(),
        seq: snapshot.seq(),
    };
    let mut previous = None;
    cas_update(store, CATALOG_KEY, MAX_CATALOG_BYTES, retry, |current| {
        let mut catalog = parse(current, &dataset_id)?;
        catalog.check_not_expired(snapshot.id())?;
        previous = catalog.tags.get(name).cloned();
        if previous.as_ref() == Some(&entry) {
            return Ok(None);
        }
        catalog.tags.insert(name.to_owned(), entry.clone());
        Ok(Some(catalog.to_body()))
    })
    .instrument(info_span!("tag", root = %store.describe(), name, snapshot_id = %snapshot.id()))
    .await?;
    Ok(previous)
}

/// Removes tag `name`: its last target ([`Error::NotFound`] if there was no such tag).
pub(crate) async fn remove(
    store: &dyn RootStore,
    identity: &Identity,
    name: &str,
    retry: &RetryPolicy,
) -> Result<TagEntry> {
    store.check_cas()?;
    check_name("tag", name)?;
    let dataset_id = identity.get(store).await?.dataset_id;
    let mut removed = None;
    cas_update(store, CATALOG_KEY, MAX_CATALOG_BYTES, retry, |current| {
        let mut catalog = parse(current, &dataset_id)?;
        match catalog.tags.remove(name) {
            Some(entry) => {
                removed = Some(entry);
                Ok(Some(catalog.to_body()))
            }
            // Gone already: ours (an earlier attempt whose reply was lost) or another's.
            None => Ok(None),
        }
    })
    .instrument(info_span!("untag", root = %store.describe(), name))
    .await?;
    removed.ok_or_else(|| Error::NotFound { key: tag_key(name) })
}

/// Every tag, by name (one GET of the catalog).
pub(crate) async fn all(
    store: &dyn RootStore,
    identity: &Identity,
) -> Result<BTreeMap<String, TagEntry>> {
    let dataset_id = identity.get(store).await?.dataset_id;
    Ok(catalog_of(store, &dataset_id).await?.tags)
}

/// The tag `name`, if there is one (one GET of the catalog).
pub(crate) async fn find(
    store: &dyn RootStore,
    dataset_id: &str,
    name: &str,
) -> Result<Option<TagEntry>> {
    Ok(catalog_of(store, dataset_id).await?.tags.remove(name))
}

/// How a tag is named in errors: the catalog's key and the tag.
pub(crate) fn tag_key(name: &str) -> String {
    format!("{CATALOG_KEY}#tag/{name}")
}

fn parse(current: Option<&[u8]>, dataset_id: &str) -> Result<Catalog> {
    match current {
        Some(body) => Catalog::parse(body, dataset_id),
        None => Ok(Catalog::empty(dataset_id)),
    }
}
