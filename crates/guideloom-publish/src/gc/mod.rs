//! Retention and garbage collection ([`Root::gc`](crate::Root::gc)): a policy decides which
//! snapshots expire; the collector then deletes what no kept snapshot, tag, annotation set
//! or in-flight publication references, safely while publishers, annotators and taggers
//! run. Free functions over the store trait.
//!
//! One run:
//! 1. **plan**: read the catalog, every log entry, and list `claims/`, `shards/`,
//!    `annotations/`, `_probe/` and `gc/`; finish any earlier run that stopped before its
//!    done marker (its record is the plan);
//! 2. **expire** (compare-and-swap of the catalog): the snapshots the policy does not keep
//!    and that no tag or annotation set names in the catalog *as written*, and the
//!    annotation values no entry names, are recorded as `expired` / `collected`; taggers
//!    and annotators read the same object, so none of them can name them afterwards;
//! 3. **record**: `gc/<run>.json` (create-only) lists every object that may go: shards no
//!    kept snapshot references and no in-flight claim covers, stale claims, old probes,
//!    collected values — each at least `grace` old by the store's clock;
//! 4. **recheck**: list the claims and the log again; spare what a claim made since covers
//!    or an entry committed since references (a publisher claims before it reads the
//!    records, [`record::check_after_claim`]);
//! 5. **sweep**: delete (batch deletes on object stores), then `gc/<run>.done`.
//!
//! The log is never shortened: expired entries stay readable (no gap), their snapshots are
//! marked expired.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use tracing::{Instrument, info, info_span};

use crate::annotations::{CATALOG_KEY, Catalog, ExpiredEntry, catalog_of};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::key::nonce;
use crate::manifest::{
    CONTROL_VERSION, Claim, LOG_PREFIX, MAX_CATALOG_BYTES, MAX_CLAIM_BYTES, parse_log_key,
};
use crate::snapshot_log::{self, Snapshot};
use crate::store::{ObjectInfo, RootStore, cas_update};
use guideloom_io::RetryPolicy;

pub(crate) mod record;

pub use record::Doomed;
use record::{Done, Record};

/// A claim younger than this is never collected, whatever the grace: the publication
/// protocol's one timing assumption. A publisher never commits on a claim it has held for
/// more than half of it, and never resumes a claim older than a quarter of it (by its
/// clock): so a claim this old has no live holder.
pub const CLAIM_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Objects deleted per `delete_many` call (S3's `DeleteObjects` takes 1 000).
const DELETE_BATCH: usize = 1000;

/// Which snapshots a collection keeps, and how old an unreferenced object must be before it
/// goes. The latest snapshot is always kept, and so is every snapshot a tag names (and,
/// with `keep_annotated`, every snapshot an annotation set annotates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Keep the newest `keep_last` snapshots (at least 1: the latest).
    pub keep_last: usize,
    /// Also keep every snapshot committed less than this long ago (store clock).
    pub keep_younger_than: Option<Duration>,
    /// Keep every snapshot an annotation set annotates (default `true`: its labels stay
    /// readable against their records).
    pub keep_annotated: bool,
    /// An unreferenced object younger than this is left alone (default 7 days): shards a
    /// worker wrote and has not published yet, a publisher's probe. Like Delta's VACUUM
    /// retention, but safety does not rest on it: a publication racing the collection is
    /// stopped by the handshake, not by the clock.
    pub grace: Duration,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            keep_last: 1,
            keep_younger_than: None,
            keep_annotated: true,
            grace: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// What a collection found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcReport {
    /// The run (`gc/<run>.json`); empty for a dry run.
    pub run: String,
    /// `true`: nothing was written or deleted.
    pub dry_run: bool,
    /// Snapshots kept, by id.
    pub kept: Vec<String>,
    /// Snapshots this run expired.
    pub expired: Vec<ExpiredEntry>,
    /// What it deleted (or would delete), by key.
    pub deleted: Vec<Doomed>,
    /// Bytes of `deleted`.
    pub bytes: u64,
    /// What the recheck spared (claimed or committed meanwhile).
    pub spared: u64,
    /// Earlier runs this one finished (they stopped before their done marker).
    pub resumed: Vec<String>,
    /// Temporary files of crashed writers removed (local roots).
    pub temporaries: u64,
}

/// Everything one reading of the root gives the plan.
struct View {
    dataset_id: String,
    catalog: Catalog,
    snapshots: Vec<Snapshot>,
    /// Log entries' modification times, by sequence number.
    committed_at: BTreeMap<u64, SystemTime>,
    objects: Vec<ObjectInfo>,
    claims: Vec<ObjectInfo>,
    runs: record::Runs,
    expired_by_records: Vec<ExpiredEntry>,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn older_than(info: &ObjectInfo, now: SystemTime, age: Duration) -> bool {
    info.modified
        .and_then(|m| now.duration_since(m).ok())
        .is_some_and(|a| a >= age)
}

/// Runs one collection (see the module docs).
pub(crate) async fn collect(
    store: &dyn RootStore,
    identity: &Identity,
    policy: &RetentionPolicy,
    dry_run: bool,
    retry: &RetryPolicy,
) -> Result<GcReport> {
    if policy.keep_last == 0 {
        return Err(Error::invalid(
            "keep_last must be at least 1 (the latest is always kept)",
        ));
    }
    if !dry_run {
        store.check_writable()?;
    }
    if !store.capabilities().list {
        return Err(Error::Unsupported {
            what: format!(
                "garbage collection of {}: it needs listings",
                store.describe()
            ),
        });
    }
    let span = info_span!("gc", root = %store.describe(), dry_run);
    async {
        let mut report = GcReport {
            dry_run,
            ..GcReport::default()
        };
        let view = read_view(store, identity).await?;
        let cas = store.capabilities().compare_and_swap;
        if !dry_run && !cas && (!view.catalog.entries.is_empty() || !view.catalog.tags.is_empty()) {
            return Err(Error::Unsupported {
                what: format!(
                    "garbage collection of {} through a declared mount: the root has \
                     annotation sets or tags, whose writers the collection must order \
                     itself against by compare-and-swap; collect it through its object \
                     store URI",
                    store.describe()
                ),
            });
        }
        // Finish earlier runs first: their records are their plans.
        if !dry_run {
            let expired_ids: BTreeSet<String> = view
                .catalog
                .expired
                .iter()
                .chain(&view.expired_by_records)
                .map(|e| e.snapshot_id.clone())
                .collect();
            for (run, done) in &view.runs {
                if !done {
                    let record = match record::read_record(store, run, &view.dataset_id).await {
                        Ok(record) => record,
                        // A declared mount: a record its collection is still writing, or
                        // one left incomplete by a killed collection (it deleted nothing:
                        // deletes follow the record). Left alone; see docs/publication.md.
                        Err(Error::Corrupt { .. }) if !store.capabilities().atomic_writes => {
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    let spared =
                        finish(store, identity, &record, &expired_ids, &mut report).await?;
                    report.spared += spared;
                    report.resumed.push(run.clone());
                }
            }
        }
        // Ages compare the store's modification times with this machine's clock: the grace
        // only spares unpublished work (safety rests on the handshake, not on this clock).
        let now = SystemTime::now();
        let plan = plan(&view, policy, now);
        report.kept = plan.kept.iter().cloned().collect();
        // 2. expire, by compare-and-swap of the catalog against taggers and annotators.
        let (expired, collected) = if dry_run || !cas {
            (plan.expire.clone(), plan.orphans.clone())
        } else {
            expire(store, &view.dataset_id, &plan, retry).await?
        };
        report.expired = expired.clone();
        let all_expired: BTreeSet<&str> = view
            .catalog
            .expired
            .iter()
            .chain(&view.expired_by_records)
            .chain(&expired)
            .map(|e| e.snapshot_id.as_str())
            .collect();
        let expired_ids: BTreeSet<String> =
            all_expired.iter().map(|s| (*s).to_owned()).collect();
        let planned_spare = spare(store, &view.snapshots, view.claims.clone(), &expired_ids).await?;
        let mut doomed = doomed(&view, &all_expired, &collected, policy, now);
        doomed.retain(|d| !planned_spare.covers(&d.key) || d.key.starts_with("claims/"));
        // A stale claim is recorded with its nonce: the sweep deletes that claim only.
        for d in doomed.iter_mut().filter(|d| d.key.starts_with("claims/")) {
            d.nonce = claim_nonce(store, &d.key).await?;
        }
        doomed.retain(|d| !d.key.starts_with("claims/") || d.nonce.is_some());
        if dry_run {
            report.bytes = doomed.iter().map(|d| d.size).sum();
            report.deleted = doomed;
            return Ok(report);
        }
        // 3. the record, before the second reading of the claims.
        let run = format!("{:013}-{}", unix_ms(SystemTime::now()), nonce());
        let record = Record {
            format: record::RECORD_FORMAT.to_owned(),
            version: CONTROL_VERSION,
            dataset_id: view.dataset_id.clone(),
            run: run.clone(),
            created_at_unix_ms: unix_ms(SystemTime::now()),
            expired,
            delete: std::mem::take(&mut doomed),
        };
        record::write_record(store, &record)
            .instrument(info_span!("gc_record", run))
            .await?;
        report.run = run;
        let spared = finish(store, identity, &record, &expired_ids, &mut report).await?;
        report.spared += spared;
        let swept = store.sweep_temporaries(policy.grace).await?;
        report.temporaries = swept.removed.len() as u64;
        info!(run = %report.run, expired = report.expired.len(), deleted = report.deleted.len(), bytes = report.bytes, spared = report.spared, "collected");
        Ok(report)
    }
    .instrument(span)
    .await
}

/// Steps 4 and 5 for `record`: the recheck, the deletes, the done marker. Returns how many
/// of the record's objects were spared.
async fn finish(
    store: &dyn RootStore,
    identity: &Identity,
    record: &Record,
    expired: &BTreeSet<String>,
    report: &mut GcReport,
) -> Result<u64> {
    let claims = store.list("claims").await?;
    let snapshots = snapshot_log::all(store, identity).await?;
    let spare = spare(store, &snapshots, claims, expired).await?;
    let mut go = Vec::new();
    let mut spared = 0;
    for d in &record.delete {
        let same_claim = match &d.nonce {
            Some(nonce) => claim_nonce(store, &d.key).await?.as_ref() == Some(nonce),
            None => !d.key.starts_with("claims/"),
        };
        if spare.covers(&d.key) || !same_claim {
            spared += 1;
        } else {
            go.push(d.clone());
        }
    }
    let keys: Vec<String> = go.iter().map(|d| d.key.clone()).collect();
    for batch in keys.chunks(DELETE_BATCH) {
        store
            .delete_many(batch)
            .instrument(info_span!("gc_delete", run = %record.run, keys = batch.len()))
            .await?;
    }
    let bytes: u64 = go.iter().map(|d| d.size).sum();
    let done = Done {
        format: record::DONE_FORMAT.to_owned(),
        version: CONTROL_VERSION,
        run: record.run.clone(),
        deleted: go.len() as u64,
        bytes,
    };
    match record::write_done(store, &done).await {
        // Two collections finishing one stopped run both delete, and both write its marker
        // (with their own counts): the first one's says the same thing, "done".
        Ok(_) | Err(Error::PublicationCollision { .. }) => {}
        Err(e) => return Err(e),
    }
    report.bytes += bytes;
    report.deleted.extend(go);
    Ok(spared)
}

/// What the second reading of the claims and the log protects.
struct Spare {
    /// Keys referenced by entries (every entry: an entry committed since the plan is kept by
    /// any policy, being newer than the ones it kept; an older one is in the plan).
    referenced: BTreeSet<String>,
    /// Prefixes covered by in-flight claims (`None` in the set: a claim without prefixes,
    /// written before they existed, covers every shard).
    prefixes: BTreeSet<String>,
    all_shards: bool,
    /// Claims that now have a log entry.
    committed_claims: BTreeSet<String>,
}

impl Spare {
    fn covers(&self, key: &str) -> bool {
        if self.committed_claims.contains(key) || self.referenced.contains(key) {
            return true;
        }
        if key.starts_with("shards/") {
            if self.all_shards {
                return true;
            }
            return self.prefixes.iter().any(|p| {
                key.strip_prefix(p.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            });
        }
        false
    }
}

/// What `snapshots` and the in-flight ones of `claims` protect (their bodies are read:
/// one GET per in-flight claim). Step 4 calls it on a second listing of both; the plan on
/// its own, so that a claim already there is not recorded against.
async fn spare(
    store: &dyn RootStore,
    snapshots: &[Snapshot],
    claims: Vec<ObjectInfo>,
    expired: &BTreeSet<String>,
) -> Result<Spare> {
    let mut spare = Spare {
        referenced: BTreeSet::new(),
        prefixes: BTreeSet::new(),
        all_shards: false,
        committed_claims: BTreeSet::new(),
    };
    let mut committed_ids = BTreeSet::new();
    for s in snapshots {
        committed_ids.insert(s.id().to_owned());
        spare
            .committed_claims
            .insert(crate::manifest::claim_key(s.id()));
        if !expired.contains(s.id()) {
            spare.referenced.extend(referenced_keys(s));
        }
    }
    for c in claims {
        let Some(id) = claim_id(&c.key) else { continue };
        if committed_ids.contains(id) {
            continue;
        }
        match read_claim(store, &c.key, id).await? {
            Covers::Gone => {}
            Covers::Prefixes(p) => spare.prefixes.extend(p),
            Covers::Everything => spare.all_shards = true,
        }
    }
    Ok(spare)
}

/// The nonce of the claim at `key` now (`None`: absent, or not a claim that parses: never
/// deleted on a guess).
async fn claim_nonce(store: &dyn RootStore, key: &str) -> Result<Option<String>> {
    let Some(id) = claim_id(key) else {
        return Ok(None);
    };
    match store.get(key, MAX_CLAIM_BYTES).await {
        Ok(obj) => Ok(Claim::parse(key, &obj.body, id).ok().map(|c| c.nonce)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(Error::TooLarge { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn claim_id(key: &str) -> Option<&str> {
    key.strip_prefix("claims/")?.strip_suffix(".json")
}

/// What an in-flight claim protects.
enum Covers {
    /// It was deleted since the listing (a stale claim collected by another run).
    Gone,
    /// The shard directories of its request.
    Prefixes(Vec<String>),
    /// Every shard: a claim without prefixes (written before they existed), or one that
    /// does not parse (a claim is never guessed at).
    Everything,
}

/// Reads a claim's body, bounded.
async fn read_claim(store: &dyn RootStore, key: &str, id: &str) -> Result<Covers> {
    match store.get(key, MAX_CLAIM_BYTES).await {
        Ok(obj) => Ok(match Claim::parse(key, &obj.body, id) {
            Ok(Claim {
                prefixes: Some(p), ..
            }) => Covers::Prefixes(p),
            _ => Covers::Everything,
        }),
        Err(e) if e.is_not_found() => Ok(Covers::Gone),
        Err(Error::TooLarge { .. }) => Ok(Covers::Everything),
        Err(e) => Err(e),
    }
}

/// Every key a snapshot references: its shards, their stream companions, and the
/// completion markers of the directories they lie in.
pub(crate) fn referenced_keys(s: &Snapshot) -> impl Iterator<Item = String> + '_ {
    s.shards().iter().flat_map(|r| {
        let mut keys = vec![r.key.clone()];
        if let Some(meta) = r.stream.as_ref().and_then(|st| st.meta.as_ref()) {
            keys.push(meta.key.clone());
        }
        if let Some((dir, _)) = r.key.rsplit_once('/') {
            keys.push(format!("{dir}/complete.json"));
        }
        keys
    })
}

/// Step 1: one reading of the root.
async fn read_view(store: &dyn RootStore, identity: &Identity) -> Result<View> {
    let dataset_id = identity.get(store).await?.dataset_id;
    let catalog = catalog_of(store, &dataset_id).await?;
    let snapshots = snapshot_log::all(store, identity).await?;
    let committed_at = store
        .list(LOG_PREFIX)
        .await?
        .into_iter()
        .filter_map(|o| Some((parse_log_key(&o.key)?, o.modified?)))
        .collect();
    let mut objects = Vec::new();
    for prefix in ["shards", "_probe", "annotations"] {
        objects.extend(store.list(prefix).await?);
    }
    let claims = store.list("claims").await?;
    let runs = record::snapshot_records(store).await?;
    let mut expired_by_records = Vec::new();
    for run in runs.keys() {
        match record::read_record(store, run, &dataset_id).await {
            Ok(r) => expired_by_records.extend(r.expired),
            // A record still being written on a declared mount (see `collect`).
            Err(Error::Corrupt { .. }) if !store.capabilities().atomic_writes => {}
            Err(e) => return Err(e),
        }
    }
    Ok(View {
        dataset_id,
        catalog,
        snapshots,
        committed_at,
        objects,
        claims,
        runs,
        expired_by_records,
    })
}

/// The policy's decision on one view.
struct Plan {
    kept: BTreeSet<String>,
    /// Annotated snapshots are kept (the policy's `keep_annotated`).
    keep_annotated: bool,
    expire: Vec<ExpiredEntry>,
    orphans: Vec<String>,
}

fn plan(view: &View, policy: &RetentionPolicy, now: SystemTime) -> Plan {
    let already: BTreeSet<&str> = view
        .catalog
        .expired
        .iter()
        .chain(&view.expired_by_records)
        .map(|e| e.snapshot_id.as_str())
        .collect();
    let kept = kept_by(view, &view.catalog, policy, now);
    let expire = view
        .snapshots
        .iter()
        .filter(|s| !kept.contains(s.id()) && !already.contains(s.id()))
        .map(|s| ExpiredEntry {
            snapshot_id: s.id().to_owned(),
            seq: s.seq(),
        })
        .collect();
    Plan {
        kept,
        keep_annotated: policy.keep_annotated,
        expire,
        orphans: orphans(view, &view.catalog, policy.grace, now),
    }
}

/// The snapshots `policy` keeps given `catalog`'s tags and annotation sets.
fn kept_by(
    view: &View,
    catalog: &Catalog,
    policy: &RetentionPolicy,
    now: SystemTime,
) -> BTreeSet<String> {
    let mut kept = BTreeSet::new();
    for s in view.snapshots.iter().rev().take(policy.keep_last) {
        kept.insert(s.id().to_owned());
    }
    if let Some(young) = policy.keep_younger_than {
        for s in &view.snapshots {
            let recent = view
                .committed_at
                .get(&s.seq())
                .and_then(|m| now.duration_since(*m).ok())
                .is_none_or(|age| age < young);
            if recent {
                kept.insert(s.id().to_owned());
            }
        }
    }
    kept.extend(catalog.tags.values().map(|t| t.snapshot_id.clone()));
    if policy.keep_annotated {
        kept.extend(catalog.entries.iter().map(|e| e.snapshot_id.clone()));
    }
    kept
}

/// Values objects no catalog entry names, at least `grace` old.
fn orphans(view: &View, catalog: &Catalog, grace: Duration, now: SystemTime) -> Vec<String> {
    let named: BTreeSet<&str> = catalog.entries.iter().map(|e| e.key.as_str()).collect();
    view.objects
        .iter()
        .filter(|o| {
            o.key.starts_with("annotations/")
                && o.key.ends_with("/values.jsonl")
                && !named.contains(o.key.as_str())
                && older_than(o, now, grace)
        })
        .map(|o| o.key.clone())
        .filter(|k| !catalog.collected.contains(k))
        .collect()
}

/// Step 2: the catalog CAS. Re-decides against the catalog as read in each attempt (a tag
/// or an annotation set added meanwhile keeps its snapshot), and returns what was
/// recorded: the newly expired snapshots and the collected values.
async fn expire(
    store: &dyn RootStore,
    dataset_id: &str,
    plan: &Plan,
    retry: &RetryPolicy,
) -> Result<(Vec<ExpiredEntry>, Vec<String>)> {
    if plan.expire.is_empty() && plan.orphans.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut decided = (Vec::new(), Vec::new());
    cas_update(store, CATALOG_KEY, MAX_CATALOG_BYTES, retry, |current| {
        let mut catalog = match current {
            Some(body) => Catalog::parse(body, dataset_id)?,
            None => Catalog::empty(dataset_id),
        };
        let annotated = catalog
            .entries
            .iter()
            .filter(|_| plan.keep_annotated)
            .map(|e| e.snapshot_id.as_str());
        let named: BTreeSet<&str> = catalog
            .tags
            .values()
            .map(|t| t.snapshot_id.as_str())
            .chain(annotated)
            .collect();
        let expire: Vec<ExpiredEntry> = plan
            .expire
            .iter()
            .filter(|e| !named.contains(e.snapshot_id.as_str()))
            .filter(|e| catalog.expired(&e.snapshot_id).is_none())
            .cloned()
            .collect();
        let values: BTreeSet<&str> = catalog.entries.iter().map(|e| e.key.as_str()).collect();
        let orphans: Vec<String> = plan
            .orphans
            .iter()
            .filter(|k| !values.contains(k.as_str()) && !catalog.collected.contains(k))
            .cloned()
            .collect();
        decided = (expire.clone(), orphans.clone());
        if expire.is_empty() && orphans.is_empty() {
            return Ok(None);
        }
        catalog.expired.extend(expire);
        catalog.collected.extend(orphans);
        Ok(Some(catalog.to_body()))
    })
    .instrument(info_span!("gc_expire"))
    .await?;
    // Values collected by earlier runs whose objects are still there go too.
    Ok(decided)
}

/// Step 3's list: every object that may go.
fn doomed(
    view: &View,
    expired: &BTreeSet<&str>,
    collected: &[String],
    policy: &RetentionPolicy,
    now: SystemTime,
) -> Vec<Doomed> {
    let mut referenced = BTreeSet::new();
    let mut committed = BTreeSet::new();
    for s in &view.snapshots {
        committed.insert(s.id());
        if !expired.contains(s.id()) {
            referenced.extend(referenced_keys(s));
        }
    }
    // In-flight claims cover their prefixes. The view holds only the listing; its claims'
    // bodies are read in the recheck, which runs after the record: here, every shard
    // directory of an in-flight claim's request is unknown, so the plan is computed without
    // them and the recheck spares what they cover.
    let mut out = Vec::new();
    let collected: BTreeSet<&str> = collected
        .iter()
        .map(String::as_str)
        .chain(view.catalog.collected.iter().map(String::as_str))
        .collect();
    for o in &view.objects {
        let key = o.key.as_str();
        let go = if key.starts_with("shards/") {
            !referenced.contains(key) && older_than(o, now, policy.grace)
        } else if key.starts_with("_probe/") {
            older_than(o, now, policy.grace)
        } else {
            collected.contains(key)
        };
        if go {
            out.push(Doomed {
                key: o.key.clone(),
                size: o.size,
                nonce: None,
            });
        }
    }
    let lease = policy.grace.max(CLAIM_LEASE);
    for c in &view.claims {
        let Some(id) = claim_id(&c.key) else { continue };
        if !committed.contains(id) && older_than(c, now, lease) {
            out.push(Doomed {
                key: c.key.clone(),
                size: c.size,
                nonce: None,
            });
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// Every expired snapshot (the catalog's and the collection records'): one GET of the
/// catalog, one LIST of `gc/` and one GET per record.
pub(crate) async fn expired(
    store: &dyn RootStore,
    identity: &Identity,
) -> Result<Vec<ExpiredEntry>> {
    let dataset_id = identity.get(store).await?.dataset_id;
    let mut out = catalog_of(store, &dataset_id).await?.expired;
    let runs = record::snapshot_records(store).await?;
    let reads: Vec<BoxFuture<'_, Result<Record>>> = runs
        .keys()
        .map(|run| record::read_record(store, run, &dataset_id).boxed())
        .collect();
    let records: Vec<Result<Record>> = futures::stream::iter(reads).buffered(8).collect().await;
    for r in records {
        let r = match r {
            Ok(r) => r,
            Err(Error::Corrupt { .. }) if !store.capabilities().atomic_writes => continue,
            Err(e) => return Err(e),
        };
        for e in r.expired {
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    out.sort_by_key(|e| e.seq);
    Ok(out)
}

/// Storage accounting of a root (see [`Root::storage`](crate::Root::storage)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageReport {
    /// Bytes of every object under `shards/` that a kept snapshot references.
    pub live_bytes: u64,
    /// Bytes a collection with the given policy would delete now (a dry run).
    pub reclaimable_bytes: u64,
    /// Bytes under `shards/` in all.
    pub shard_bytes: u64,
    /// Per snapshot, in log order.
    pub snapshots: Vec<SnapshotBytes>,
    /// Per work id (`shards/<work_id>/`), by name.
    pub work_ids: BTreeMap<String, WorkBytes>,
}

/// One snapshot's share of a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBytes {
    /// The snapshot.
    pub snapshot_id: String,
    /// Its sequence number.
    pub seq: u64,
    /// Bytes of the shards it references (shared shards count in every snapshot).
    pub bytes: u64,
    /// Bytes referenced by no other snapshot.
    pub unique_bytes: u64,
    /// Expired already (by an earlier collection).
    pub expired: bool,
    /// Would expire under the policy given to [`Root::storage`](crate::Root::storage) (a
    /// collection with it now would expire it).
    pub expires: bool,
}

/// One work id's objects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkBytes {
    /// Objects under `shards/<work_id>/`.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes a kept snapshot references.
    pub live_bytes: u64,
    /// Bytes a collection with the policy would delete now.
    pub reclaimable_bytes: u64,
}

/// Storage accounting: one dry-run collection with `policy` plus the listing of `shards/`.
pub(crate) async fn storage(
    store: &dyn RootStore,
    identity: &Identity,
    policy: &RetentionPolicy,
    retry: &RetryPolicy,
) -> Result<StorageReport> {
    let dry = collect(store, identity, policy, true, retry).await?;
    let snapshots = snapshot_log::all(store, identity).await?;
    let already: BTreeSet<String> = expired(store, identity)
        .await?
        .into_iter()
        .map(|e| e.snapshot_id)
        .collect();
    let expires: BTreeSet<&str> = dry.expired.iter().map(|e| e.snapshot_id.as_str()).collect();
    let listed = store.list("shards").await?;
    let sizes: BTreeMap<&str, u64> = listed.iter().map(|o| (o.key.as_str(), o.size)).collect();
    let mut users: BTreeMap<String, u32> = BTreeMap::new();
    for s in &snapshots {
        for k in referenced_keys(s).collect::<BTreeSet<_>>() {
            *users.entry(k).or_default() += 1;
        }
    }
    let mut live = BTreeSet::new();
    let mut out = StorageReport::default();
    for s in &snapshots {
        let keys: BTreeSet<String> = referenced_keys(s).collect();
        let is_expired = already.contains(s.id());
        let size = |k: &String| sizes.get(k.as_str()).copied().unwrap_or(0);
        out.snapshots.push(SnapshotBytes {
            snapshot_id: s.id().to_owned(),
            seq: s.seq(),
            bytes: keys.iter().map(size).sum(),
            unique_bytes: keys
                .iter()
                .filter(|k| users.get(*k) == Some(&1))
                .map(size)
                .sum(),
            expired: is_expired,
            expires: expires.contains(s.id()),
        });
        if !is_expired {
            live.extend(keys);
        }
    }
    let doomed: BTreeSet<&str> = dry.deleted.iter().map(|d| d.key.as_str()).collect();
    for o in &listed {
        let work = o
            .key
            .strip_prefix("shards/")
            .and_then(|k| k.split_once('/'))
            .map_or("", |(w, _)| w);
        let w = out.work_ids.entry(work.to_owned()).or_default();
        w.objects += 1;
        w.bytes += o.size;
        out.shard_bytes += o.size;
        if live.contains(&o.key) {
            w.live_bytes += o.size;
            out.live_bytes += o.size;
        }
        if doomed.contains(o.key.as_str()) {
            w.reclaimable_bytes += o.size;
        }
    }
    out.reclaimable_bytes = dry.bytes;
    Ok(out)
}
