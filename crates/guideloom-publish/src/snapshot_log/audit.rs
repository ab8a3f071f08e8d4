//! Auditing the snapshot log for gaps: entries deleted by hand, and the entries past a gap
//! that readers never see.

use std::collections::BTreeMap;
use std::ops::Range;

use tracing::{Instrument, info_span};

use super::search::LatestSearch;
use crate::error::Result;
use crate::store::RootStore;

/// How many sequence numbers right after the latest [`Root::audit_log`](crate::Root::audit_log) HEADs on a store
/// that cannot list, looking for entries a gap hides (then it tries latest + 2^k for k ≥ 5).
pub(crate) const AUDIT_WINDOW: u64 = 16;

/// What [`Root::audit_log`](crate::Root::audit_log) found in a root's snapshot log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogAudit {
    /// The latest entry every reader opens (`None`: nothing published).
    pub latest: Option<u64>,
    /// Entries that exist, in order (on a store that cannot list: those of `1..=latest`).
    pub entries: Vec<u64>,
    /// Missing runs of sequence numbers below the newest entry that exists: the log was
    /// damaged (entries deleted by hand). Empty for a sound log.
    pub gaps: Vec<Range<u64>>,
    /// Entries above `latest` that readers never see because of a gap. A store that can list
    /// shows them all; on one that cannot (HTTP roots) only those at the 16
    /// numbers after the latest and at latest + 2^k are found.
    pub unreachable: Vec<u64>,
}

impl LogAudit {
    /// Whether the log has no gap.
    pub fn is_sound(&self) -> bool {
        self.gaps.is_empty()
    }
}

fn gaps_of<V>(entries: &BTreeMap<u64, V>) -> Vec<Range<u64>> {
    let mut gaps = Vec::new();
    let mut expect = 1u64;
    for &seq in entries.keys() {
        if seq > expect {
            gaps.push(expect..seq);
        }
        expect = seq.saturating_add(1);
    }
    gaps
}

/// Audits the log for gaps (see [`LogAudit`]): one LIST, or on a store that cannot list,
/// the probe, one HEAD per entry below the latest, and about 75 HEADs above it (a gap
/// whose later entries all avoid those numbers stays invisible without a listing).
pub(crate) async fn audit(store: &dyn RootStore) -> Result<LogAudit> {
    let span = info_span!("audit_log", root = %store.describe());
    async {
        if store.capabilities().list {
            let listed = super::listed(store).await?;
            let latest = LatestSearch::over(&listed)?;
            let cut = latest.unwrap_or(0);
            return Ok(LogAudit {
                latest,
                gaps: gaps_of(&listed),
                unreachable: listed.keys().copied().filter(|&s| s > cut).collect(),
                entries: listed.into_keys().collect(),
            });
        }
        let Some((latest, _)) = super::probe_latest(store).await? else {
            return Ok(LogAudit::default());
        };
        let mut present = BTreeMap::new();
        for seq in 1..=latest {
            if super::head(store, seq).await?.is_some() {
                present.insert(seq, ());
            }
        }
        // Entries beyond a gap right after the latest cannot be listed: look for them at
        // the next AUDIT_WINDOW numbers and at latest + 2^k beyond.
        let mut beyond = Vec::new();
        let window = (2..=AUDIT_WINDOW + 1).filter_map(|d| latest.checked_add(d));
        let far = (5..=62u32).filter_map(|k| latest.checked_add(1u64 << k));
        let mut probes: Vec<u64> = window.chain(far).collect();
        probes.dedup();
        for seq in probes {
            if super::head(store, seq).await?.is_some() {
                beyond.push(seq);
            }
        }
        let mut gaps = gaps_of(&present);
        if let Some(&first) = beyond.first() {
            gaps.push(latest + 1..first);
        }
        Ok(LogAudit {
            latest: Some(latest),
            gaps,
            unreachable: beyond,
            entries: present.into_keys().collect(),
        })
    }
    .instrument(span)
    .await
}
