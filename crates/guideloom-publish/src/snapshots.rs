//! Opening published snapshots: the latest, one by id, or all of them, with the checks
//! that make a reader trust what it opens (sizes and hashes against the references that point
//! at each control object).

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tracing::{Instrument, debug, info_span};

use crate::error::{Error, Result};
use crate::key::check_name;
use crate::manifest::{LOG_PREFIX, MAX_POINTER_BYTES, SnapshotPointer, pointer_key};
use crate::publish::{Root, Snapshot};

/// How many incomplete newest log entries [`Root::latest`] skips on a store without atomic
/// writes before it reports the newest one's error.
pub(crate) const MAX_INCOMPLETE_SKIPPED: u64 = 16;

impl Root {
    /// Opens the latest snapshot: LIST `log/`, GET the highest entry (size checked against
    /// the listing), validate. [`Error::NotFound`] (`log/`) if nothing is published.
    ///
    /// On a store that cannot list (`http(s)://` roots, [`StoreCapabilities::list`]
    /// `false`), the highest entry is found with HEAD requests instead: for latest sequence
    /// number `n`, `2 * (floor(log2 n) + 1)` HEADs, then the GET of `dataset.json` (once per
    /// root) and of the entry.
    ///
    /// [`StoreCapabilities::list`]: crate::StoreCapabilities::list
    pub async fn latest(&self) -> Result<Snapshot> {
        async {
            let (seq, info) = self
                .latest_log_entry()
                .await?
                .ok_or_else(|| Error::NotFound {
                    key: format!("{LOG_PREFIX}/"),
                })?;
            match self.read_log_entry(seq, Some(info.size)).await {
                Err(e @ (Error::Corrupt { .. } | Error::Verification { .. }))
                    if !self.store().capabilities().atomic_writes =>
                {
                    self.latest_complete_before(seq, e).await
                }
                other => other,
            }
        }
        .instrument(info_span!("open_latest", root = %self.store().describe()))
        .await
    }

    /// On a store without atomic writes (a declared mount), the newest log entry can be
    /// incomplete: still being written, or left by a killed writer. Such an entry is not
    /// committed, so the latest snapshot is the newest complete entry below it (at most
    /// [`MAX_INCOMPLETE_SKIPPED`] entries are skipped; then the first error stands).
    async fn latest_complete_before(&self, seq: u64, first: Error) -> Result<Snapshot> {
        let lowest = seq.saturating_sub(MAX_INCOMPLETE_SKIPPED).max(1);
        for older in (lowest..seq).rev() {
            let Some(info) = self.head_log(older).await? else {
                continue;
            };
            match self.read_log_entry(older, Some(info.size)).await {
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
    /// store that cannot list, the newest is found by probing, as in [`latest`](Self::latest)).
    pub async fn snapshot(&self, snapshot_id: &str) -> Result<Snapshot> {
        check_name("snapshot id", snapshot_id)?;
        async {
            let pkey = pointer_key(snapshot_id);
            let pointer = match self.store().get(&pkey, MAX_POINTER_BYTES).await {
                Ok(obj) => match SnapshotPointer::parse(&pkey, &obj.body, snapshot_id) {
                    Ok(pointer) => pointer,
                    // On a declared mount a killed publisher can leave the pointer partial;
                    // the log entry it would name is the commit point, so scan for it.
                    Err(Error::Corrupt { .. }) if !self.store().capabilities().atomic_writes => {
                        return self.scan_for(snapshot_id).await;
                    }
                    Err(e) => return Err(e),
                },
                Err(e) if e.is_not_found() => return self.scan_for(snapshot_id).await,
                Err(e) => return Err(e),
            };
            let snapshot = self
                .read_log_entry(pointer.seq, Some(pointer.log_size))
                .await?;
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
            Ok(snapshot)
        }
        .instrument(info_span!("open_snapshot", root = %self.store().describe(), snapshot_id))
        .await
    }

    async fn scan_for(&self, snapshot_id: &str) -> Result<Snapshot> {
        debug!(snapshot_id, "no pointer; scanning the log");
        for (seq, size) in self.log_entries().await?.into_iter().rev() {
            let snapshot = self.read_log_entry(seq, size).await?;
            if snapshot.id() == snapshot_id {
                return Ok(snapshot);
            }
        }
        Err(Error::NotFound {
            key: pointer_key(snapshot_id),
        })
    }

    /// Every snapshot, in order (one LIST plus one GET per snapshot; on a store that cannot
    /// list, the probe of [`latest`](Self::latest) instead of the LIST).
    pub async fn snapshots(&self) -> Result<Vec<Snapshot>> {
        let reads: Vec<BoxFuture<'_, Result<Snapshot>>> = self
            .log_entries()
            .await?
            .into_iter()
            .map(|(seq, size)| self.read_log_entry(seq, size).boxed())
            .collect();
        let read: Vec<Result<Snapshot>> = futures::stream::iter(reads).buffered(8).collect().await;
        // On a store without atomic writes (a declared mount) an incomplete entry is one still
        // being written or left by a killed writer: not committed, so not listed.
        let skip_incomplete = !self.store().capabilities().atomic_writes;
        let listed = self.store().capabilities().list;
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
}
