//! The snapshot log protocol (`log/<seq>.json` and the pointers `snapshots/<id>.json`):
//! finding the latest entry, by LIST or by HEAD probing on stores that cannot list
//! (`http(s)://` roots), reading one entry with its checks, opening a snapshot by id through
//! its pointer, and auditing the log for gaps ([`audit`]). Free functions over the store
//! trait; [`Root`](crate::Root) delegates to them.
//!
//! **One rule for the latest entry.** Sequence numbers are dense from 1 (an entry `n + 1` is
//! created only after `n` was read), so the latest is the entry whose successor does not
//! exist. Both ways of reaching a root find it with the same search ([`LatestSearch`]: HEAD
//! 1, 2, 4, … until one is absent, then bisect), fed by HEAD requests or by membership in one
//! listing. A log damaged by hand (an entry deleted: a *gap*) therefore gives every reader the
//! same answer however it reaches the root — an entry that exists and has no successor — and
//! the damage is reported by [`audit`] (`Root::audit_log`, `guideloom verify`) and refused by
//! publication ([`Error::LogGap`]) instead of being papered over.
//!
//! **Trust.** Every control object is read bounded by the size the reference pointing at it
//! gives (a listing, a HEAD, a pointer) or by its kind's cap, and checked against that
//! reference (size, and SHA-256 for pointers) before it is parsed.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tracing::{Instrument, debug, info_span, warn};

use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::key::{check_name, sha256_hex};
use crate::manifest::{
    LOG_PREFIX, MAX_MANIFEST_BYTES, MAX_POINTER_BYTES, Manifest, ShardRef, SnapshotPointer,
    log_key, parse_log_key, pointer_key,
};
use crate::store::{ObjectInfo, RootStore};

mod audit;
mod search;

pub use audit::LogAudit;
pub(crate) use audit::audit;
use search::LatestSearch;

/// An opened snapshot: its validated manifest and where it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The manifest.
    pub manifest: Manifest,
    /// Its log key.
    pub log_key: String,
    /// Size of the log entry.
    pub log_size: u64,
    /// SHA-256 of the log entry.
    pub log_sha256: String,
}

impl Snapshot {
    /// The snapshot's id.
    pub fn id(&self) -> &str {
        &self.manifest.snapshot_id
    }

    /// Its sequence number.
    pub fn seq(&self) -> u64 {
        self.manifest.seq
    }

    /// Records in the snapshot.
    pub fn total_records(&self) -> u64 {
        self.manifest.total_records
    }

    /// The shards.
    pub fn shards(&self) -> &[ShardRef] {
        &self.manifest.shards
    }
}

/// How many incomplete newest log entries [`latest`] skips on a store without atomic
/// writes before it reports the newest one's error.
pub(crate) const MAX_INCOMPLETE_SKIPPED: u64 = 16;

/// Opens the latest snapshot: LIST `log/`, GET the highest entry (size checked against
/// the listing), validate. [`Error::NotFound`] (`log/`) if nothing is published.
///
/// On a store that cannot list (`http(s)://` roots, [`StoreCapabilities::list`]
/// `false`), the highest entry is found by probing with GETs of at most [`PROBE_BYTES`]
/// instead of a listing: for latest sequence number `n`, `2 * (floor(log2 n) + 1)` requests,
/// and the latest entry's bytes are usually in hand when the search ends (one more GET when
/// it is larger than a probe reads). Opening a fresh root is thus 2 requests either way
/// (`n = 1`): `dataset.json` is not read (see [`entry_from_body`]).
///
/// [`StoreCapabilities::list`]: crate::StoreCapabilities::list
pub(crate) async fn latest(store: &dyn RootStore, identity: &Identity) -> Result<Snapshot> {
    async {
        let not_found = || Error::NotFound {
            key: format!("{LOG_PREFIX}/"),
        };
        let (seq, read) = if let Some(found) = latest_listed(store).await? {
            let (seq, info) = found.ok_or_else(not_found)?;
            (seq, read_entry(store, identity, seq, Some(info.size)).await)
        } else {
            let (seq, size, body) = probe_latest_by_get(store).await?.ok_or_else(not_found)?;
            let read = match body {
                Some(body) => entry_from_body(identity, seq, size, body),
                None => read_entry(store, identity, seq, size).await,
            };
            (seq, read)
        };
        match read {
            Err(e @ (Error::Corrupt { .. } | Error::Verification { .. }))
                if !store.capabilities().atomic_writes =>
            {
                latest_complete_before(store, identity, seq, e).await
            }
            other => other,
        }
    }
    .instrument(info_span!("open_latest", root = %store.describe()))
    .await
}

/// On a store without atomic writes (a declared mount), the newest log entry can be
/// incomplete: still being written, or left by a killed writer. Such an entry is not
/// committed, so the latest snapshot is the newest complete entry below it (at most
/// [`MAX_INCOMPLETE_SKIPPED`] entries are skipped; then the first error stands).
async fn latest_complete_before(
    store: &dyn RootStore,
    identity: &Identity,
    seq: u64,
    first: Error,
) -> Result<Snapshot> {
    let lowest = seq.saturating_sub(MAX_INCOMPLETE_SKIPPED).max(1);
    for older in (lowest..seq).rev() {
        let Some(info) = head(store, older).await? else {
            continue;
        };
        match read_entry(store, identity, older, Some(info.size)).await {
            Ok(snapshot) => {
                tracing::warn!(
                    skipped = seq - older,
                    newest = seq,
                    error = %first,
                    "newest log entries incomplete (mount: in flight or a killed writer); \
                     opening the newest complete one"
                );
                return Ok(snapshot);
            }
            Err(Error::Corrupt { .. } | Error::Verification { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(first)
}

/// Opens the snapshot `snapshot_id`: GET its pointer, GET the log entry it names and
/// check size and SHA-256 against the pointer. If the pointer is missing (a publisher
/// crashed after committing), falls back to scanning `log/` from the newest entry (on a
/// store that cannot list, the newest is found by probing, as in [`latest`]).
pub(crate) async fn by_id(
    store: &dyn RootStore,
    identity: &Identity,
    snapshot_id: &str,
) -> Result<Snapshot> {
    check_name("snapshot id", snapshot_id)?;
    async {
        match by_pointer(store, identity, snapshot_id).await {
            Ok(Some(snapshot)) => Ok(snapshot),
            Ok(None) => scan_for(store, identity, snapshot_id).await,
            // On a declared mount a killed publisher can leave the pointer partial; the log
            // entry it would name is the commit point, so scan for it.
            Err(Error::Corrupt { ref key, .. })
                if !store.capabilities().atomic_writes && *key == pointer_key(snapshot_id) =>
            {
                scan_for(store, identity, snapshot_id).await
            }
            Err(e) => Err(e),
        }
    }
    .instrument(info_span!("open_snapshot", root = %store.describe(), snapshot_id))
    .await
}

/// The snapshot `snapshot_id`'s pointer, and the log entry it names (size and SHA-256
/// checked against the pointer): `None` when there is no pointer.
pub(crate) async fn by_pointer(
    store: &dyn RootStore,
    identity: &Identity,
    snapshot_id: &str,
) -> Result<Option<Snapshot>> {
    let pkey = pointer_key(snapshot_id);
    let pointer = match store.get(&pkey, MAX_POINTER_BYTES).await {
        Ok(obj) => SnapshotPointer::parse(&pkey, &obj.body, snapshot_id)?,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let snapshot = read_entry(store, identity, pointer.seq, Some(pointer.log_size)).await?;
    if snapshot.log_sha256 != pointer.log_sha256 {
        return Err(Error::Verification {
            key: pointer.log_key,
            what: "sha256",
            expected: pointer.log_sha256,
            actual: snapshot.log_sha256,
        });
    }
    if snapshot.id() != snapshot_id {
        return Err(Error::corrupt(
            &pkey,
            format!("points at the log entry of snapshot {:?}", snapshot.id()),
        ));
    }
    Ok(Some(snapshot))
}

async fn scan_for(
    store: &dyn RootStore,
    identity: &Identity,
    snapshot_id: &str,
) -> Result<Snapshot> {
    debug!(snapshot_id, "no pointer; scanning the log");
    for (seq, size) in entries(store).await?.into_iter().rev() {
        let snapshot = read_entry(store, identity, seq, size).await?;
        if snapshot.id() == snapshot_id {
            return Ok(snapshot);
        }
    }
    Err(Error::NotFound {
        key: pointer_key(snapshot_id),
    })
}

/// Every snapshot, in order (one LIST plus one GET per snapshot; on a store that cannot
/// list, the probe of [`latest`] instead of the LIST).
pub(crate) async fn all(store: &dyn RootStore, identity: &Identity) -> Result<Vec<Snapshot>> {
    let reads: Vec<BoxFuture<'_, Result<Snapshot>>> = entries(store)
        .await?
        .into_iter()
        .map(|(seq, size)| read_entry(store, identity, seq, size).boxed())
        .collect();
    let read: Vec<Result<Snapshot>> = futures::stream::iter(reads).buffered(8).collect().await;
    // On a store without atomic writes (a declared mount) an incomplete entry is one still
    // being written or left by a killed writer: not committed, so not listed.
    let skip_incomplete = !store.capabilities().atomic_writes;
    let listed = store.capabilities().list;
    let mut out = Vec::with_capacity(read.len());
    for r in read {
        match r {
            Ok(s) => out.push(s),
            // A store that cannot list assumes `1..=latest` exist; an entry deleted by
            // hand (a gap, see `audit_log`) is left out, as a listing leaves it out.
            Err(e) if e.is_not_found() && !listed => {}
            Err(Error::Corrupt { .. } | Error::Verification { .. }) if skip_incomplete => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Every log entry the store lists, by sequence number; `None` when the store cannot list
/// (it says so, or an origin declared to list turns out not to: an HTTP root), so the
/// caller probes.
async fn listed_if_listing(store: &dyn RootStore) -> Result<Option<BTreeMap<u64, ObjectInfo>>> {
    if !store.capabilities().list {
        return Ok(None);
    }
    match listed(store).await {
        Ok(listed) => Ok(Some(listed)),
        Err(Error::Unsupported { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every log entry the store lists, by sequence number (stores that can list).
async fn listed(store: &dyn RootStore) -> Result<BTreeMap<u64, ObjectInfo>> {
    Ok(store
        .list(LOG_PREFIX)
        .await?
        .into_iter()
        .filter_map(|info| parse_log_key(&info.key).map(|seq| (seq, info)))
        .collect())
}

/// The log entries readers see, sorted: those of `1..=latest` that exist (on a store that
/// cannot list, `1..=latest` as probed, sizes unknown: `None`; a missing one then reads as
/// [`Error::NotFound`]).
pub(crate) async fn entries(store: &dyn RootStore) -> Result<Vec<(u64, Option<u64>)>> {
    let Some(listed) = listed_if_listing(store).await? else {
        return Ok(match probe_latest(store).await? {
            None => Vec::new(),
            Some((latest, info)) => (1..latest)
                .map(|seq| (seq, None))
                .chain(std::iter::once((latest, Some(info.size))))
                .collect(),
        });
    };
    let latest = LatestSearch::over(&listed)?.unwrap_or(0);
    Ok(listed
        .into_iter()
        .take_while(|(seq, _)| *seq <= latest)
        .map(|(seq, info)| (seq, Some(info.size)))
        .collect())
}

/// The latest log entry by the one rule (see the module docs) from one listing (a listing
/// that shows entries above it, a gap, is logged as a warning); `None` when the store cannot
/// list ([`listed_if_listing`]), so the caller probes.
async fn latest_listed(store: &dyn RootStore) -> Result<Option<Option<(u64, ObjectInfo)>>> {
    let Some(mut listed) = listed_if_listing(store).await? else {
        return Ok(None);
    };
    let Some(latest) = LatestSearch::over(&listed)? else {
        if let Some((&newest, _)) = listed.last_key_value() {
            warn!(root = %store.describe(), newest, "log/1 is missing: readers see no snapshot (the log is damaged)");
        }
        return Ok(Some(None));
    };
    if let Some((&newest, _)) = listed.last_key_value()
        && newest > latest
    {
        warn!(root = %store.describe(), latest, newest, missing = latest + 1, "the snapshot log has a gap: readers see the entry before it");
    }
    Ok(Some(listed.remove(&latest).map(|info| (latest, info))))
}

/// Like [`latest_listed`], for a publisher: a gap in the log
/// (confirmed by a HEAD, since a listing taken during another commit may lag) is refused
/// with [`Error::LogGap`] rather than published over.
pub(crate) async fn latest_entry_for_commit(
    store: &dyn RootStore,
) -> Result<Option<(u64, ObjectInfo)>> {
    if !store.capabilities().list {
        return probe_latest(store).await;
    }
    // A local listing can miss an entry created while it ran (directory order is not
    // creation order): a gap is believed only after a HEAD confirms the missing entry.
    for _ in 0..3 {
        let listed = listed(store).await?;
        let latest = LatestSearch::over(&listed)?.unwrap_or(0);
        let newest = listed.last_key_value().map_or(0, |(&s, _)| s);
        if newest <= latest {
            return Ok(listed.get(&latest).cloned().map(|info| (latest, info)));
        }
        if head(store, latest + 1).await?.is_none() {
            return Err(Error::LogGap {
                missing: latest + 1,
                newest,
            });
        }
    }
    // The missing entry keeps appearing by HEAD but not in listings: the store's listing
    // is inconsistent with its reads. Probe by HEAD alone, as readers without listings do.
    probe_latest(store).await
}

/// HEADs `log/<seq>`: its metadata, or `None` if absent.
pub(crate) async fn head(store: &dyn RootStore, seq: u64) -> Result<Option<ObjectInfo>> {
    match store.head(&log_key(seq)).await {
        Ok(info) => Ok(Some(info)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The latest log entry without listing, by HEAD requests only ([`LatestSearch`]):
/// `2 * (floor(log2 n) + 1)` HEADs for latest `n`, 1 HEAD when nothing is published.
pub(crate) async fn probe_latest(store: &dyn RootStore) -> Result<Option<(u64, ObjectInfo)>> {
    let span = info_span!("probe_log", root = %store.describe(), heads = tracing::field::Empty);
    async {
        let mut search = LatestSearch::new();
        let mut found: Option<(u64, ObjectInfo)> = None;
        while let Some(seq) = search.next()? {
            let info = head(store, seq).await?;
            search.observe(seq, info.is_some());
            if let Some(info) = info {
                found = Some((seq, info));
            }
        }
        tracing::Span::current().record("heads", search.tests());
        debug!(latest = ?search.latest(), heads = search.tests(), "probed the log");
        // The last entry observed present is the one the search settled on.
        Ok(found.filter(|(seq, _)| Some(*seq) == search.latest()))
    }
    .instrument(span)
    .await
}

/// What a GET probe of a log entry reads at most: a manifest of up to a few hundred shards
/// arrives whole, a larger one only proves that the entry exists (and gives its size).
const PROBE_BYTES: u64 = 64 << 10;

/// The latest log entry without listing, by GET probes of at most [`PROBE_BYTES`] (the
/// search of [`probe_latest`], one request per tested number): its sequence number, size
/// (when the store tells it) and, when it fit in the probe, its bytes.
async fn probe_latest_by_get(
    store: &dyn RootStore,
) -> Result<Option<(u64, Option<u64>, Option<Bytes>)>> {
    let span = info_span!("probe_log_get", root = %store.describe(), gets = tracing::field::Empty);
    async {
        let mut search = LatestSearch::new();
        let mut found = None;
        while let Some(seq) = search.next()? {
            let seen = match store.get(&log_key(seq), PROBE_BYTES).await {
                Ok(obj) => Some((Some(obj.body.len() as u64), Some(obj.body))),
                Err(Error::TooLarge { size, .. }) => Some((size, None)),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e),
            };
            search.observe(seq, seen.is_some());
            if let Some((size, body)) = seen {
                found = Some((seq, size, body));
            }
        }
        tracing::Span::current().record("gets", search.tests());
        Ok(found.filter(|(seq, ..)| Some(*seq) == search.latest()))
    }
    .instrument(span)
    .await
}

/// GETs and validates log entry `seq`; its size must be `expected_size` when known (from
/// a listing, a HEAD or a pointer), and at most [`MAX_MANIFEST_BYTES`] always; the read is
/// bounded by that size before it is made.
pub(crate) async fn read_entry(
    store: &dyn RootStore,
    identity: &Identity,
    seq: u64,
    expected_size: Option<u64>,
) -> Result<Snapshot> {
    let key = log_key(seq);
    if expected_size.is_some_and(|s| s > MAX_MANIFEST_BYTES) {
        return Err(Error::TooLarge {
            key,
            limit: MAX_MANIFEST_BYTES,
            size: expected_size,
        });
    }
    // Bounded by the size the reference gives (a listing, a HEAD, a pointer): an entry
    // that grew or lies is refused without reading past it.
    let limit = expected_size.unwrap_or(MAX_MANIFEST_BYTES);
    let obj = match store.get(&key, limit).await {
        Err(Error::TooLarge { size, .. }) if expected_size.is_some() => {
            return Err(Error::Verification {
                key,
                what: "size",
                expected: limit.to_string(),
                actual: size.map_or_else(|| format!("more than {limit}"), |s| s.to_string()),
            });
        }
        other => other?,
    };
    entry_from_body(identity, seq, expected_size, obj.body)
}

/// Validates the bytes of log entry `seq` (read by [`read_entry`] or by a GET probe): size
/// against the reference, every field, and the dataset id against `dataset.json` when this
/// root has read it (readers do not spend a request on it: the log is create-only and
/// written only by publishers that checked it; `guideloom verify` checks every entry).
fn entry_from_body(
    identity: &Identity,
    seq: u64,
    expected_size: Option<u64>,
    body: Bytes,
) -> Result<Snapshot> {
    let key = log_key(seq);
    let size = body.len() as u64;
    if let Some(expected) = expected_size
        && size != expected
    {
        return Err(Error::Verification {
            key,
            what: "size",
            expected: expected.to_string(),
            actual: size.to_string(),
        });
    }
    let dataset_id = identity.cached().map(|id| id.dataset_id.as_str());
    let manifest = Manifest::parse_for(&key, &body, dataset_id)?;
    Ok(Snapshot {
        manifest,
        log_key: key,
        log_size: size,
        log_sha256: sha256_hex(&body),
    })
}
