//! The publication protocol: verify the shards, claim the snapshot id, commit the manifest
//! to the log, write the pointer. Free functions over the store trait;
//! [`Root::publish`](crate::Root::publish) delegates to [`publish`].
//!
//! ```text
//! claims/<snapshot_id>.json     create-only claim: the loser of a same-id race stops here;
//!                               an identical request takes it over (a retry resumes)
//! log/<seq:020>.json            create-only manifest: THE commit point, totally ordered
//! snapshots/<snapshot_id>.json  create-only pointer to the log entry (size + sha256)
//! ```
//!
//! Identical requests may run at once (every rank of a job calling `publish`, an orchestrator
//! retrying a job that still runs): all of them succeed, and exactly one log entry is
//! written. The claim records the latest sequence number before it (its *base*); no entry of
//! the claim can lie at or below it, so every committer of the claim reads the entries after
//! it before writing one, and writes the same bytes as every other committer of the claim at
//! a given sequence number. The protocol is checked exhaustively by a model
//! (`model/publication.pml`, `cargo xtask model`; docs/publication.md maps its steps here).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use tracing::{Instrument, info, info_span};

use crate::error::{Error, Result};
use crate::gc;
use crate::identity::Identity;
use crate::key::check_key;
use crate::manifest::{MAX_SHARDS, PublishMode, ShardRef, check_shards};
use crate::shards::ShardInspector;
use crate::snapshot_log::{self, Snapshot};
use crate::store::RootStore;
use guideloom_format::schema::Schema;
use guideloom_io::RetryPolicy;

mod claim;
mod commit;

/// Concurrent HEADs (and inspections) while verifying shards.
pub(crate) const VERIFY_CONCURRENCY: usize = 16;

/// Options of one publication (the publication concern's one options type).
#[derive(Debug, Clone)]
pub struct PublicationOptions {
    /// Also check each shard's record count and checksum with `inspector`.
    pub verify_record_counts: bool,
    /// The inspector for `verify_record_counts` (required when it is set).
    pub inspector: Option<Arc<dyn ShardInspector>>,
    /// Bounds of the commit loop (log sequence races): [`RetryPolicy::contended_update`].
    pub commit_retry: RetryPolicy,
}

impl Default for PublicationOptions {
    fn default() -> Self {
        PublicationOptions {
            verify_record_counts: false,
            inspector: None,
            commit_retry: RetryPolicy::contended_update(),
        }
    }
}

impl PublicationOptions {
    /// Also checks each shard's record count and checksum with `inspector`
    /// ([`PublicationOptions::verify_record_counts`]).
    #[must_use]
    pub fn with_record_count_check(mut self, inspector: Arc<dyn ShardInspector>) -> Self {
        self.verify_record_counts = true;
        self.inspector = Some(inspector);
        self
    }

    /// Sets the bounds of the commit loop ([`PublicationOptions::commit_retry`]).
    #[must_use]
    pub fn with_commit_retry(mut self, retry: RetryPolicy) -> Self {
        self.commit_retry = retry;
        self
    }
}

/// What to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRequest {
    /// The dataset (must match the root's `dataset.json`; written on first publication).
    pub dataset_id: String,
    /// The new snapshot's id (unique in the root).
    pub snapshot_id: String,
    /// The shards: all of them ([`PublishMode::Full`]) or the new ones
    /// ([`PublishMode::Append`]).
    pub shards: Vec<ShardRef>,
    /// Full or append.
    pub mode: PublishMode,
    /// The schema every record of the snapshot matches, or `None` (schemaless). It must
    /// evolve from the latest snapshot's ([`Schema::evolves_from`]): a schemaless snapshot
    /// may be followed by one with a schema only in full mode, and a schema is never dropped.
    pub schema: Option<Schema>,
}

/// How a publication ended: which snapshot, and whether this call committed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The snapshot, as its log entry holds it.
    pub snapshot: Snapshot,
    /// Whether this call wrote the log entry.
    pub outcome: PublishOutcome,
}

impl Published {
    /// The snapshot (dropping the outcome).
    pub fn into_snapshot(self) -> Snapshot {
        self.snapshot
    }
}

/// Whether a publication wrote the snapshot's log entry or found it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PublishOutcome {
    /// This call wrote the log entry: the snapshot became visible by it.
    Committed,
    /// The log entry was already there, written under this request's claim by an identical
    /// request (another process running the same publication, an earlier attempt of this
    /// one, or this call's own write behind an error that left its outcome unknown).
    /// Nothing new was committed; the snapshot is the one that entry holds.
    AlreadyPublished,
}

/// Publishes a snapshot.
///
/// 1. validate the request and `dataset.json` (written if absent);
/// 2. verify shards: one HEAD each, sizes must match (and, with `verify_record_counts`,
///    the inspector's record counts and checksums) — nothing is written before this;
/// 3. list `log/`: the latest entry is the claim's *base*;
/// 4. claim the snapshot id (`claims/<id>.json`, create-only, recording the base): the loser
///    of a same-id race gets [`Error::PublicationCollision`] here, unless its request is
///    identical, in which case it takes the claim over;
/// 5. commit: read the entries after the base (a committer of the same claim may have
///    committed it), then create `log/<latest+1>`; if another publisher took that number,
///    re-list and repeat (bounded, jittered backoff) — an appender re-bases on the winner;
/// 6. write the pointer `snapshots/<id>.json`.
pub(crate) async fn publish(
    store: &dyn RootStore,
    identity: &Identity,
    max_shard_bytes: u64,
    request: &PublishRequest,
    options: &PublicationOptions,
) -> Result<Published> {
    let span = info_span!(
        "publish",
        root = %store.describe(),
        snapshot_id = %request.snapshot_id,
        mode = ?request.mode,
        shards = request.shards.len()
    );
    async {
        crate::key::check_name("snapshot id", &request.snapshot_id)?;
        store.check_writable()?;
        check_request(request, max_shard_bytes)?;
        identity.init(store, &request.dataset_id).await?;
        // The collections under way before the shards are verified (see gc::record).
        let collections = gc::record::snapshot_records(store)
            .instrument(info_span!("gc_records"))
            .await?;
        if let Err(e) = verify_shards(store, &request.shards, options)
            .instrument(info_span!("verify_shards"))
            .await
        {
            // A retry of a publication that committed, whose snapshot a collection expired
            // since (its shards gone): it was published, and says so.
            if e.is_not_found()
                && let Some(snapshot) = claim::committed(store, identity, request).await?
            {
                return Ok(Published {
                    snapshot,
                    outcome: PublishOutcome::AlreadyPublished,
                });
            }
            return Err(e);
        }
        let latest = snapshot_log::latest_entry_for_commit(store)
            .instrument(info_span!("base"))
            .await?;
        let claim = claim::claim(store, request, latest.as_ref().map_or(0, |(seq, _)| *seq))
            .instrument(info_span!("claim"))
            .await?;
        // The claim is in the store: a collection that records after this spares its
        // shards; one that recorded before is read now.
        gc::record::check_after_claim(
            store,
            &collections,
            &request.dataset_id,
            &request_keys(request, &claim::claim_key_of(request)),
        )
        .instrument(info_span!("gc_check"))
        .await?;
        let (snapshot, outcome) = commit::commit(store, identity, request, &claim, latest, options)
            .instrument(info_span!("commit"))
            .await?;
        commit::write_pointer(store, &snapshot, &options.commit_retry)
            .instrument(info_span!("pointer"))
            .await?;
        info!(
            seq = snapshot.seq(),
            records = snapshot.total_records(),
            ?outcome,
            "published"
        );
        Ok(Published { snapshot, outcome })
    }
    .instrument(span)
    .await
}

/// The keys a publication needs to stay: its shards, their stream companions, its claim.
fn request_keys(request: &PublishRequest, claim: &str) -> std::collections::BTreeSet<String> {
    let mut keys = std::collections::BTreeSet::from([claim.to_owned()]);
    for s in &request.shards {
        keys.insert(s.key.clone());
        if let Some(meta) = s.stream.as_ref().and_then(|st| st.meta.as_ref()) {
            keys.insert(meta.key.clone());
        }
    }
    keys
}

fn check_request(request: &PublishRequest, max_shard_bytes: u64) -> Result<()> {
    if request.shards.len() > MAX_SHARDS {
        return Err(Error::invalid(format!(
            "{} shards (at most {MAX_SHARDS})",
            request.shards.len()
        )));
    }
    for s in &request.shards {
        check_key(&s.key)?;
        if s.size > max_shard_bytes {
            return Err(Error::ShardTooLarge {
                key: s.key.clone(),
                size: s.size,
                limit: max_shard_bytes,
            });
        }
    }
    check_shards(&request.shards).map_err(Error::invalid)?;
    Ok(())
}

async fn verify_shards(
    store: &dyn RootStore,
    shards: &[ShardRef],
    options: &PublicationOptions,
) -> Result<()> {
    let inspector = if options.verify_record_counts {
        Some(options.inspector.clone().ok_or_else(|| {
            Error::Unsupported {
                what: "verify_record_counts needs a shard inspector (the format crate's footer \
                   reader, or Sha256Inspector); none was configured"
                    .into(),
            }
        })?)
    } else {
        None
    };
    // Boxed futures (not a closure over a stream) so the publish future is provably Send.
    let checks: Vec<BoxFuture<'_, Result<()>>> = shards
        .iter()
        .map(|shard| verify_one(store, shard, inspector.clone()).boxed())
        .collect();
    futures::stream::iter(checks)
        .buffer_unordered(VERIFY_CONCURRENCY)
        .try_collect::<()>()
        .await
}

async fn verify_one(
    store: &dyn RootStore,
    shard: &ShardRef,
    inspector: Option<Arc<dyn ShardInspector>>,
) -> Result<()> {
    let info = store.head(&shard.key).await?;
    if info.size != shard.size {
        return Err(Error::Verification {
            key: shard.key.clone(),
            what: "size",
            expected: shard.size.to_string(),
            actual: info.size.to_string(),
        });
    }
    if let Some(meta) = shard.stream.as_ref().and_then(|s| s.meta.as_ref()) {
        let info = store.head(&meta.key).await?;
        if info.size != meta.size {
            return Err(Error::Verification {
                key: meta.key.clone(),
                what: "size",
                expected: meta.size.to_string(),
                actual: info.size.to_string(),
            });
        }
    }
    if let Some(inspector) = inspector {
        let facts = inspector.inspect(store, shard).await?;
        if facts.record_count != shard.record_count {
            return Err(Error::Verification {
                key: shard.key.clone(),
                what: "record count",
                expected: shard.record_count.to_string(),
                actual: facts.record_count.to_string(),
            });
        }
        if let (Some(want), Some(got)) = (&shard.checksum, &facts.checksum)
            && std::mem::discriminant(want) == std::mem::discriminant(got)
            && want != got
        {
            return Err(Error::Verification {
                key: shard.key.clone(),
                what: "checksum",
                expected: want.to_string(),
                actual: got.to_string(),
            });
        }
    }
    Ok(())
}
