//! The publication protocol: verify the shards, claim the snapshot id, commit the manifest
//! to the log, write the pointer. Free functions over the store trait;
//! [`Root::publish`](crate::Root::publish) delegates to [`publish`].
//!
//! ```text
//! claims/<snapshot_id>.json     create-only claim: the loser of a same-id race stops here
//! log/<seq:020>.json            create-only manifest: THE commit point, totally ordered
//! snapshots/<snapshot_id>.json  create-only pointer to the log entry (size + sha256)
//! ```

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use tracing::{Instrument, debug, info, info_span};

use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::key::{check_key, check_name, nonce, sha256_hex};
use crate::manifest::{
    CLAIM_FORMAT, CONTROL_VERSION, Claim, LOG_PREFIX, MANIFEST_FORMAT, MAX_CLAIM_BYTES,
    MAX_CONTROL_OBJECT_BYTES, MAX_SHARDS, Manifest, POINTER_FORMAT, PublishMode, ShardRef,
    SnapshotPointer, check_shards, claim_key, log_key, pointer_key, to_json,
};
use crate::shards::ShardInspector;
use crate::snapshot_log::{self, Snapshot};
use crate::store::{CreateOutcome, RootStore, Written, create_object};
use guideloom_io::RetryPolicy;

/// Concurrent HEADs (and inspections) while verifying shards.
pub(crate) const VERIFY_CONCURRENCY: usize = 16;

/// Options of one publication.
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
}

/// Publishes a snapshot.
///
/// 1. validate the request and `dataset.json` (written if absent);
/// 2. verify shards: one HEAD each, sizes must match (and, with `verify_record_counts`,
///    the inspector's record counts and checksums) — nothing is written before this;
/// 3. claim the snapshot id (`claims/<id>.json`, create-only): the loser of a same-id race
///    gets [`Error::PublicationCollision`] here;
/// 4. commit: list `log/`, build the manifest on the latest entry, create
///    `log/<latest+1>`; if another publisher took that number, re-read and retry
///    (bounded, jittered backoff) — an appender re-bases on the winner;
/// 5. write the pointer `snapshots/<id>.json`.
pub(crate) async fn publish(
    store: &dyn RootStore,
    identity: &Identity,
    max_shard_bytes: u64,
    request: &PublishRequest,
    options: &PublicationOptions,
) -> Result<Snapshot> {
    let span = info_span!(
        "publish",
        root = %store.describe(),
        snapshot_id = %request.snapshot_id,
        mode = ?request.mode,
        shards = request.shards.len()
    );
    async {
        check_name("snapshot id", &request.snapshot_id)?;
        store.check_writable()?;
        check_request(request, max_shard_bytes)?;
        identity.init(store, &request.dataset_id).await?;
        verify_shards(store, &request.shards, options)
            .instrument(info_span!("verify_shards"))
            .await?;
        let claim = claim(store, request)
            .instrument(info_span!("claim"))
            .await?;
        // A retry of this same request (after a failure between claim and pointer, or an
        // ambiguous error) resumes where the first attempt stopped.
        let committed = if claim.resumed {
            committed_by(store, identity, request, &claim.nonce)
                .instrument(info_span!("resume"))
                .await?
        } else {
            None
        };
        let snapshot = match committed {
            Some(snapshot) => snapshot,
            None => {
                commit(store, identity, request, &claim.nonce, options)
                    .instrument(info_span!("commit"))
                    .await?
            }
        };
        write_pointer(store, &snapshot)
            .instrument(info_span!("pointer"))
            .await?;
        info!(
            seq = snapshot.seq(),
            records = snapshot.total_records(),
            "published"
        );
        Ok(snapshot)
    }
    .instrument(span)
    .await
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

/// Claims the snapshot id for `request` (`claims/<id>.json`, create-only). An existing
/// claim by the same request (same digest: a retry after a failure, or our own write
/// behind an ambiguous error) is taken over, with its nonce; a claim by any other request
/// is [`Error::PublicationCollision`].
async fn claim(store: &dyn RootStore, request: &PublishRequest) -> Result<ClaimOutcome> {
    let key = claim_key(&request.snapshot_id);
    let digest = request_digest(request);
    let nonce = nonce();
    let claim = Claim {
        format: CLAIM_FORMAT.to_owned(),
        version: CONTROL_VERSION,
        snapshot_id: request.snapshot_id.clone(),
        dataset_id: request.dataset_id.clone(),
        nonce: nonce.clone(),
        created_at_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0),
        request_sha256: Some(digest.clone()),
    };
    let original = match store.put_create(&key, Bytes::from(to_json(&claim))).await {
        Ok(CreateOutcome::Created) => {
            return Ok(ClaimOutcome {
                nonce,
                resumed: false,
            });
        }
        Ok(CreateOutcome::AlreadyExists) => None,
        Err(e) if e.is_ambiguous() => Some(e),
        Err(e) => return Err(e),
    };
    let existing = match store.get(&key, MAX_CLAIM_BYTES).await {
        // Only "is it ours?" matters: a claim that does not parse (or is too large to be
        // one of ours) is held by someone else.
        Ok(obj) => match Claim::parse(&key, &obj.body, &request.snapshot_id) {
            Ok(claim) => claim,
            Err(_) => return Err(Error::PublicationCollision { key }),
        },
        Err(Error::TooLarge { .. }) => return Err(Error::PublicationCollision { key }),
        Err(e) if e.is_not_found() => {
            return Err(original.unwrap_or_else(|| {
                Error::corrupt(&key, "reported to exist, but cannot be read back")
            }));
        }
        Err(e) => return Err(original.unwrap_or(e)),
    };
    if existing.dataset_id == request.dataset_id
        && existing.request_sha256.as_deref() == Some(digest.as_str())
    {
        debug!(
            key,
            "the snapshot id is claimed by this same request: resuming"
        );
        Ok(ClaimOutcome {
            nonce: existing.nonce,
            resumed: true,
        })
    } else {
        Err(Error::PublicationCollision { key })
    }
}

/// The snapshot a first attempt of `request` (claim nonce `nonce`) already committed to
/// the log, if it got that far: by its pointer, else by scanning the log from the newest
/// entry.
async fn committed_by(
    store: &dyn RootStore,
    identity: &Identity,
    request: &PublishRequest,
    nonce: &str,
) -> Result<Option<Snapshot>> {
    match snapshot_log::by_id(store, identity, &request.snapshot_id).await {
        Ok(snapshot) if snapshot.manifest.claim_nonce == nonce => Ok(Some(snapshot)),
        Ok(snapshot) => Err(Error::corrupt(
            &snapshot.log_key,
            format!(
                "holds snapshot {:?} under another claim than the one in {}",
                request.snapshot_id,
                claim_key(&request.snapshot_id)
            ),
        )),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

async fn commit(
    store: &dyn RootStore,
    identity: &Identity,
    request: &PublishRequest,
    nonce: &str,
    options: &PublicationOptions,
) -> Result<Snapshot> {
    let policy = &options.commit_retry;
    let attempts = policy.max_attempts.max(1);
    for attempt in 1..=attempts {
        let latest = snapshot_log::latest_entry_for_commit(store).await?;
        let (parent_seq, mut shards) = match (&latest, request.mode) {
            (None, _) => (None, Vec::new()),
            (Some(info), PublishMode::Full) => (Some(info.0), Vec::new()),
            (Some(info), PublishMode::Append) => {
                match snapshot_log::read_entry(store, identity, info.0, Some(info.1.size)).await {
                    Ok(parent) => (Some(info.0), parent.manifest.shards),
                    // On a mount that is a plain directory, another writer's entry is
                    // visible while it is being written: read it again after a backoff.
                    Err(e @ (Error::Corrupt { .. } | Error::Verification { .. }))
                        if !store.capabilities().create_only_across_hosts && attempt < attempts =>
                    {
                        debug!(attempt, error = %e, "latest entry in flight; re-reading");
                        policy.sleep_backoff(attempt).await;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let base = shards.len();
        shards.extend(request.shards.iter().cloned());
        let total_records = check_shards(&shards).map_err(|what| {
            let parent =
                parent_seq.map_or_else(|| "nothing".to_owned(), |p| format!("snapshot #{p}"));
            Error::invalid(format!("appending to {parent}: {what}"))
        })?;
        let seq = parent_seq
            .map_or(Some(1), |p| p.checked_add(1))
            .ok_or_else(|| Error::corrupt(LOG_PREFIX, "sequence numbers exhausted"))?;
        let manifest = Manifest {
            format: MANIFEST_FORMAT.to_owned(),
            version: CONTROL_VERSION,
            seq,
            snapshot_id: request.snapshot_id.clone(),
            dataset_id: request.dataset_id.clone(),
            parent_seq,
            mode: request.mode,
            shards,
            total_records,
            claim_nonce: nonce.to_owned(),
        };
        let body = to_json(&manifest);
        if body.len() as u64 > MAX_CONTROL_OBJECT_BYTES {
            return Err(Error::invalid("manifest too large"));
        }
        let key = log_key(seq);
        let log_size = body.len() as u64;
        let log_sha256 = sha256_hex(&body);
        match create_object(store, &key, Bytes::from(body)).await {
            Ok(written) => {
                debug!(seq, base_shards = base, ?written, "committed");
                return Ok(Snapshot {
                    manifest,
                    log_key: key,
                    log_size,
                    log_sha256,
                });
            }
            Err(Error::PublicationCollision { .. }) => {
                debug!(seq, attempt, "sequence number taken; re-basing");
            }
            Err(e) => return Err(e),
        }
        if attempt < attempts {
            policy.sleep_backoff(attempt).await;
        }
    }
    Err(Error::CasExhausted {
        key: format!("{LOG_PREFIX}/"),
        attempts,
    })
}

async fn write_pointer(store: &dyn RootStore, snapshot: &Snapshot) -> Result<Written> {
    let pointer = SnapshotPointer {
        format: POINTER_FORMAT.to_owned(),
        version: CONTROL_VERSION,
        snapshot_id: snapshot.id().to_owned(),
        seq: snapshot.seq(),
        log_key: snapshot.log_key.clone(),
        log_size: snapshot.log_size,
        log_sha256: snapshot.log_sha256.clone(),
    };
    create_object(
        store,
        &pointer_key(snapshot.id()),
        Bytes::from(to_json(&pointer)),
    )
    .await
}

/// What [`claim`] found.
#[derive(Debug)]
struct ClaimOutcome {
    /// The claim's nonce (recorded in the manifest).
    nonce: String,
    /// The claim existed already, made by this same request.
    resumed: bool,
}

/// SHA-256 of what identifies a publication request: dataset, snapshot id, mode, shards.
fn request_digest(request: &PublishRequest) -> String {
    let identity = serde_json::json!({
        "dataset_id": request.dataset_id,
        "snapshot_id": request.snapshot_id,
        "mode": request.mode,
        "shards": request.shards,
    });
    sha256_hex(identity.to_string().as_bytes())
}
