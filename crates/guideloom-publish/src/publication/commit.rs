//! Steps 5 and 6 of a publication: the commit of the manifest to the log (`log/<seq>.json`,
//! THE commit point) and the pointer (`snapshots/<id>.json`).
//!
//! Several publishers may commit under one claim at once: identical requests share it (see
//! [`claim`](super::claim::claim)). Two rules keep the log at one entry per snapshot id:
//! - every committer of a claim writes the same bytes at a given sequence number (the
//!   manifest is a function of the claim, the request and the parent entry), so two of them
//!   racing for one number both succeed on one entry ([`Written::AlreadyIdentical`]);
//! - before writing at `n + 1`, a committer reads every entry after the highest it has
//!   checked (at first the claim's base, below which no entry of the claim can lie) up to
//!   `n`: an entry of the claim found there is the commit, and nothing more is written.

use bytes::Bytes;
use tracing::debug;

use super::claim::ClaimOutcome;
use super::{PublicationOptions, PublishOutcome, PublishRequest};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::key::sha256_hex;
use crate::manifest::{
    CONTROL_VERSION, LOG_PREFIX, MANIFEST_FORMAT, MAX_CONTROL_OBJECT_BYTES, Manifest,
    POINTER_FORMAT, PublishMode, SnapshotPointer, check_shards, claim_key, log_key, pointer_key,
    to_json,
};
use crate::snapshot_log::{self, Snapshot};
use crate::store::{ObjectInfo, RootStore, Written, create_object};
use guideloom_io::RetryPolicy;

/// Commits `request` under `claim`: the snapshot and whether this call wrote its log entry.
///
/// `listed` is the latest entry the caller listed before claiming (the claim's base when
/// this call created the claim: it commits on that listing without listing again).
pub(super) async fn commit(
    store: &dyn RootStore,
    identity: &Identity,
    request: &PublishRequest,
    claim: &ClaimOutcome,
    listed: Option<(u64, ObjectInfo)>,
    options: &PublicationOptions,
) -> Result<(Snapshot, PublishOutcome)> {
    if !claim.created
        && let Some(snapshot) = by_pointer(store, identity, request, claim).await?
    {
        return Ok((snapshot, PublishOutcome::AlreadyPublished));
    }
    let policy = &options.commit_retry;
    let attempts = policy.max_attempts.max(1);
    // Entries at or below `checked` hold no entry of this claim.
    let mut checked = claim.base;
    let mut listing = claim.created.then_some(listed);
    for attempt in 1..=attempts {
        let latest = match listing.take() {
            Some(latest) => latest,
            None => snapshot_log::latest_entry_for_commit(store).await?,
        };
        let top = latest.as_ref().map_or(0, |(seq, _)| *seq);
        if top < checked {
            return Err(Error::corrupt(
                claim_key(&request.snapshot_id),
                format!("its log base #{checked} is past the latest log entry #{top}"),
            ));
        }
        let parent = match read_since(store, identity, request, claim, checked, &latest).await {
            Ok(Since::Ours(snapshot)) => return Ok((snapshot, PublishOutcome::AlreadyPublished)),
            Ok(Since::Clear(parent)) => parent,
            // On a store without atomic writes (a declared mount), another writer's entry is
            // visible while it is being written: read it again after a backoff.
            Err(e @ (Error::Corrupt { .. } | Error::Verification { .. }))
                if !store.capabilities().atomic_writes && attempt < attempts =>
            {
                debug!(attempt, error = %e, "a log entry is in flight; reading again");
                policy.sleep_backoff(attempt).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        checked = top;
        let manifest = manifest_on(request, claim, top, parent)?;
        let body = to_json(&manifest);
        if body.len() as u64 > MAX_CONTROL_OBJECT_BYTES {
            return Err(Error::invalid("manifest too large"));
        }
        if claim.obtained.elapsed() > super::claim::MAX_HOLD {
            return Err(super::claim::lease_expired(&claim_key(
                &request.snapshot_id,
            )));
        }
        let key = log_key(manifest.seq);
        let (log_size, log_sha256) = (body.len() as u64, sha256_hex(&body));
        let snapshot = |manifest| Snapshot {
            manifest,
            log_key: key.clone(),
            log_size,
            log_sha256: log_sha256.clone(),
        };
        match create_object(store, &key, Bytes::from(body)).await {
            Ok(Written::Created) => {
                debug!(seq = top + 1, "committed");
                return Ok((snapshot(manifest), PublishOutcome::Committed));
            }
            Ok(Written::AlreadyIdentical) => {
                debug!(
                    seq = top + 1,
                    "an identical request committed the same entry"
                );
                return Ok((snapshot(manifest), PublishOutcome::AlreadyPublished));
            }
            // Another entry took the number (or, on a mount, an entry still being written:
            // the next round reads it whole before deciding).
            Err(Error::PublicationCollision { .. }) => {
                debug!(seq = top + 1, attempt, "sequence number taken; re-basing");
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

/// The entry a publication that took over `claim` finds by the pointer, when the claim's
/// first committer got that far (one GET of the pointer, one of the entry): the fast path
/// of a retry after the publication completed. `None` sends the caller to the log.
async fn by_pointer(
    store: &dyn RootStore,
    identity: &Identity,
    request: &PublishRequest,
    claim: &ClaimOutcome,
) -> Result<Option<Snapshot>> {
    match snapshot_log::by_pointer(store, identity, &request.snapshot_id).await {
        Ok(Some(snapshot)) if snapshot.manifest.claim_nonce == claim.nonce => Ok(Some(snapshot)),
        Ok(Some(snapshot)) => Err(other_claim(&snapshot, request)),
        Ok(None) => Ok(None),
        // A pointer still being written on a mount: the log decides.
        Err(Error::Corrupt { .. }) if !store.capabilities().atomic_writes => Ok(None),
        Err(e) => Err(e),
    }
}

/// What the entries after the checked ones held.
enum Since {
    /// The entry of this claim: an identical request committed it.
    Ours(Snapshot),
    /// None of this claim; the latest one, when it was read (the parent of an append).
    Clear(Option<Snapshot>),
}

/// Reads the entries `checked + 1 ..= latest` for one of `claim`'s (and, for an append,
/// the latest entry, its parent, in any case).
async fn read_since(
    store: &dyn RootStore,
    identity: &Identity,
    request: &PublishRequest,
    claim: &ClaimOutcome,
    checked: u64,
    latest: &Option<(u64, ObjectInfo)>,
) -> Result<Since> {
    let Some((top, info)) = latest else {
        return Ok(Since::Clear(None));
    };
    let mut last = None;
    for seq in checked.saturating_add(1)..=*top {
        let size = (seq == *top).then_some(info.size);
        let entry = snapshot_log::read_entry(store, identity, seq, size).await?;
        if entry.id() == request.snapshot_id {
            if entry.manifest.claim_nonce == claim.nonce {
                return Ok(Since::Ours(entry));
            }
            return Err(other_claim(&entry, request));
        }
        last = Some(entry);
    }
    // An append builds on the latest entry's shards, and every publication's schema (or its
    // absence) is checked against the latest entry's: read it if it was checked before.
    if last.is_none() {
        last = Some(snapshot_log::read_entry(store, identity, *top, Some(info.size)).await?);
    }
    Ok(Since::Clear(last))
}

fn other_claim(snapshot: &Snapshot, request: &PublishRequest) -> Error {
    Error::corrupt(
        &snapshot.log_key,
        format!(
            "holds snapshot {:?} under another claim than the one in {}",
            request.snapshot_id,
            claim_key(&request.snapshot_id)
        ),
    )
}

/// The manifest of `request` under `claim` on top of entry `top` (`parent`, when read):
/// the same bytes for every committer of the claim at that sequence number.
fn manifest_on(
    request: &PublishRequest,
    claim: &ClaimOutcome,
    top: u64,
    parent: Option<Snapshot>,
) -> Result<Manifest> {
    let parent_seq = (top > 0).then_some(top);
    check_schema_change(request, parent.as_ref())?;
    let mut shards = match (parent, request.mode) {
        (Some(parent), PublishMode::Append) => parent.manifest.shards,
        _ => Vec::new(),
    };
    shards.extend(request.shards.iter().cloned());
    let total_records = check_shards(&shards).map_err(|what| {
        let parent = parent_seq.map_or_else(|| "nothing".to_owned(), |p| format!("snapshot #{p}"));
        Error::invalid(format!("appending to {parent}: {what}"))
    })?;
    let seq = top
        .checked_add(1)
        .ok_or_else(|| Error::corrupt(LOG_PREFIX, "sequence numbers exhausted"))?;
    Ok(Manifest {
        format: MANIFEST_FORMAT.to_owned(),
        version: CONTROL_VERSION,
        seq,
        snapshot_id: request.snapshot_id.clone(),
        dataset_id: request.dataset_id.clone(),
        parent_seq,
        mode: request.mode,
        shards,
        total_records,
        claim_nonce: claim.nonce.clone(),
        schema: request.schema.clone(),
    })
}

/// Refuses a schema that does not evolve from the parent's (see [`PublishRequest::schema`]).
fn check_schema_change(request: &PublishRequest, parent: Option<&Snapshot>) -> Result<()> {
    let earlier = parent.and_then(|p| p.manifest.schema.as_ref());
    let refuse = |detail: String| Error::SchemaChange {
        snapshot_id: request.snapshot_id.clone(),
        detail,
    };
    match (earlier, &request.schema) {
        (Some(earlier), Some(schema)) => schema
            .evolves_from(earlier)
            .map_err(|e| refuse(e.to_string())),
        (Some(_), None) => Err(refuse(
            "the latest snapshot declares a schema and this one declares none (a schema is \
             never dropped)"
                .to_owned(),
        )),
        (None, Some(_)) if request.mode == PublishMode::Append && parent.is_some() => Err(refuse(
            "an append cannot declare a schema over a schemaless snapshot's records \
                 (publish all the shards, in full mode)"
                .to_owned(),
        )),
        _ => Ok(()),
    }
}

/// Writes the pointer to `snapshot`'s entry. Every committer of a claim writes the same
/// pointer; on a store without atomic writes (a declared mount) an identical pointer still
/// being written reads as other bytes for a moment, so a collision there is re-checked a few
/// times (with `policy`'s backoff, at most 8 attempts) before it stands.
pub(super) async fn write_pointer(
    store: &dyn RootStore,
    snapshot: &Snapshot,
    policy: &RetryPolicy,
) -> Result<Written> {
    let pointer = SnapshotPointer {
        format: POINTER_FORMAT.to_owned(),
        version: CONTROL_VERSION,
        snapshot_id: snapshot.id().to_owned(),
        seq: snapshot.seq(),
        log_key: snapshot.log_key.clone(),
        log_size: snapshot.log_size,
        log_sha256: snapshot.log_sha256.clone(),
    };
    let key = pointer_key(snapshot.id());
    let body = Bytes::from(to_json(&pointer));
    let attempts = if store.capabilities().atomic_writes {
        1
    } else {
        policy.max_attempts.clamp(1, 8)
    };
    let mut attempt = 1;
    loop {
        match create_object(store, &key, body.clone()).await {
            Err(Error::PublicationCollision { .. }) if attempt < attempts => {
                debug!(attempt, "pointer differs (in flight?); comparing again");
                policy.sleep_backoff(attempt).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}
