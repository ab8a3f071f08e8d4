//! Step 4 of a publication: the claim of a snapshot id (`claims/<id>.json`, create-only).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tracing::debug;

use super::PublishRequest;
use crate::error::{Error, Result};
use crate::gc::CLAIM_LEASE;
use crate::key::{nonce, sha256_hex};
use crate::manifest::{CLAIM_FORMAT, CONTROL_VERSION, Claim, MAX_CLAIM_BYTES, claim_key, to_json};
use crate::store::{CreateOutcome, RootStore};

/// The claim a publication commits under.
#[derive(Debug)]
pub(super) struct ClaimOutcome {
    /// The claim's nonce (recorded in the manifest).
    pub(super) nonce: String,
    /// The latest log sequence number when the claim was made: no entry of this claim lies
    /// at or below it.
    pub(super) base: u64,
    /// This call created the claim (rather than taking over an identical request's).
    pub(super) created: bool,
    /// When this call created or took over the claim (its lease runs from here).
    pub(super) obtained: std::time::Instant,
}

/// The claim key of `request`.
pub(super) fn claim_key_of(request: &PublishRequest) -> String {
    claim_key(&request.snapshot_id)
}

/// A publisher commits on a claim for at most this long after obtaining it (half the lease:
/// garbage collection deletes claims without an entry once they are a lease old).
pub(super) const MAX_HOLD: std::time::Duration = Duration::from_secs(CLAIM_LEASE.as_secs() / 2);

/// A claim older than this (its `created_at`, by this machine's clock) is not taken over:
/// with a day and a half of clock skew allowed, it may be collected before the commit.
const MAX_RESUME_AGE: Duration = Duration::from_secs(CLAIM_LEASE.as_secs() / 4);

/// The error of a claim whose lease ran out (see [`CLAIM_LEASE`]).
pub(super) fn lease_expired(key: &str) -> Error {
    Error::Collected {
        key: key.to_owned(),
        by: format!(
            "the claim lease (a claim is committed on within {} h of being obtained and taken              over within {} h of its creation; collections delete claims without an entry              after {} h): publish under a new snapshot id",
            MAX_HOLD.as_secs() / 3600,
            MAX_RESUME_AGE.as_secs() / 3600,
            CLAIM_LEASE.as_secs() / 3600
        ),
    }
}

/// Waits between reads of a claim that is still being written (a declared mount shows an
/// object before its bytes are complete): about 2.5 s in all, then it is taken as damaged.
const SETTLE_WAITS_MS: [u64; 8] = [10, 20, 40, 80, 160, 320, 640, 1280];

/// Claims the snapshot id for `request` (`claims/<id>.json`, create-only), recording `base`,
/// the latest log sequence number the caller listed before. An existing claim by the same
/// request (same digest: a retry after a failure, an identical request running at once, or
/// our own write behind an ambiguous error) is taken over, with its nonce and base; a claim
/// by any other request is [`Error::PublicationCollision`].
pub(super) async fn claim(
    store: &dyn RootStore,
    request: &PublishRequest,
    base: u64,
) -> Result<ClaimOutcome> {
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
        log_base: Some(base),
        prefixes: prefixes(request),
    };
    let original = match store.put_create(&key, Bytes::from(to_json(&claim))).await {
        Ok(CreateOutcome::Created) => {
            return Ok(ClaimOutcome {
                nonce,
                base,
                created: true,
                obtained: std::time::Instant::now(),
            });
        }
        Ok(CreateOutcome::AlreadyExists) => None,
        Err(e) if e.is_ambiguous() => Some(e),
        Err(e) => return Err(e),
    };
    let existing = read_existing(store, &key, &request.snapshot_id, original).await?;
    if existing.dataset_id == request.dataset_id
        && existing.request_sha256.as_deref() == Some(digest.as_str())
    {
        debug!(
            key,
            "the snapshot id is claimed by this same request: taking the claim over"
        );
        let age = SystemTime::now()
            .duration_since(UNIX_EPOCH + Duration::from_millis(existing.created_at_unix_ms))
            .unwrap_or_default();
        if age > MAX_RESUME_AGE {
            return Err(lease_expired(&key));
        }
        Ok(ClaimOutcome {
            nonce: existing.nonce,
            base: existing.log_base.unwrap_or(0),
            created: false,
            obtained: std::time::Instant::now(),
        })
    } else {
        Err(Error::PublicationCollision { key })
    }
}

/// The snapshot `request` committed, when it did: its claim exists with the request's
/// digest and the pointer names an entry of that claim (`None` otherwise, or when either
/// cannot be read).
pub(super) async fn committed(
    store: &dyn RootStore,
    identity: &crate::identity::Identity,
    request: &PublishRequest,
) -> Result<Option<crate::snapshot_log::Snapshot>> {
    let key = claim_key(&request.snapshot_id);
    let claim = match store.get(&key, MAX_CLAIM_BYTES).await {
        Ok(obj) => match Claim::parse(&key, &obj.body, &request.snapshot_id) {
            Ok(c) => c,
            Err(_) => return Ok(None),
        },
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    if claim.request_sha256.as_deref() != Some(request_digest(request).as_str()) {
        return Ok(None);
    }
    // The pointer, or (a publisher stopped before writing it) a scan of the log.
    match crate::snapshot_log::by_id(store, identity, &request.snapshot_id).await {
        Ok(s) if s.manifest.claim_nonce == claim.nonce => Ok(Some(s)),
        Ok(_) => Ok(None),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads the claim found under `key`. Only "is it ours?" matters: a claim that does not
/// parse (or is too large to be one of ours) is held by someone else — except on a store
/// without atomic writes, where it may still be being written: it is read again for a
/// while, and one that stays incomplete is [`Error::Corrupt`] (its writer was killed; no
/// request can tell whose it was).
async fn read_existing(
    store: &dyn RootStore,
    key: &str,
    snapshot_id: &str,
    original: Option<Error>,
) -> Result<Claim> {
    let collision = || Error::PublicationCollision {
        key: key.to_owned(),
    };
    let settles = !store.capabilities().atomic_writes;
    let mut waits = SETTLE_WAITS_MS.iter();
    loop {
        let body = match store.get(key, MAX_CLAIM_BYTES).await {
            Ok(obj) => obj.body,
            Err(Error::TooLarge { .. }) => return Err(collision()),
            Err(e) if e.is_not_found() => {
                return Err(original.unwrap_or_else(|| {
                    Error::corrupt(key, "reported to exist, but cannot be read back")
                }));
            }
            Err(e) => return Err(original.unwrap_or(e)),
        };
        match Claim::parse(key, &body, snapshot_id) {
            Ok(claim) => return Ok(claim),
            Err(_) if !settles => return Err(collision()),
            Err(e) => match waits.next() {
                Some(ms) => {
                    debug!(key, wait_ms = ms, "claim incomplete; reading again");
                    tokio::time::sleep(std::time::Duration::from_millis(*ms)).await;
                }
                None if body.is_empty()
                    || serde_json::from_slice::<serde_json::Value>(&body).is_err() =>
                {
                    return Err(Error::corrupt(
                        key,
                        format!(
                            "incomplete: its writer stopped while writing it (a declared mount \
                             writes objects in place), so no request can resume it ({e})"
                        ),
                    ));
                }
                None => return Err(collision()),
            },
        }
    }
}

/// Most bytes of a claim's prefixes: past this the claim names none (and covers every shard).
const MAX_PREFIX_BYTES: usize = 32 << 10;

/// The directories of `request`'s shards and stream companions, for the claim.
pub(super) fn prefixes(request: &PublishRequest) -> Option<Vec<String>> {
    let mut dirs = std::collections::BTreeSet::new();
    for s in &request.shards {
        let meta = s
            .stream
            .as_ref()
            .and_then(|st| st.meta.as_ref())
            .map(|m| &m.key);
        for key in std::iter::once(&s.key).chain(meta) {
            dirs.insert(key.rsplit_once('/').map_or("", |(d, _)| d).to_owned());
        }
    }
    let bytes: usize = dirs.iter().map(|d| d.len() + 3).sum();
    (bytes <= MAX_PREFIX_BYTES && !dirs.contains("")).then(|| dirs.into_iter().collect())
}

/// SHA-256 of what identifies a publication request: dataset, snapshot id, mode, shards.
pub(super) fn request_digest(request: &PublishRequest) -> String {
    let mut identity = serde_json::json!({
        "dataset_id": request.dataset_id,
        "snapshot_id": request.snapshot_id,
        "mode": request.mode,
        "shards": request.shards,
    });
    // Only when declared: a schemaless request keeps the digest it always had (a claim taken
    // by an earlier version is still taken over by its retry).
    if let Some(schema) = &request.schema {
        identity["schema"] = serde_json::json!(schema);
    }
    sha256_hex(identity.to_string().as_bytes())
}
