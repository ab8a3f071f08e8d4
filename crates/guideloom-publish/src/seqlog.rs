//! The snapshot log (`log/<seq>.json`): finding the latest entry, by LIST or by HEAD probing
//! on stores that cannot list (`http(s)://` roots), auditing it for gaps, and reading one
//! entry with its checks.
//!
//! **One rule for the latest entry.** Sequence numbers are dense from 1 (an entry `n + 1` is
//! created only after `n` was read), so the latest is the entry whose successor does not
//! exist. Both ways of reaching a root find it with the same search ([`LatestSearch`]: HEAD
//! 1, 2, 4, … until one is absent, then bisect), fed by HEAD requests or by membership in one
//! listing. A log damaged by hand (an entry deleted: a *gap*) therefore gives every reader the
//! same answer however it reaches the root — an entry that exists and has no successor — and
//! the damage is reported by [`Root::audit_log`] (`guideloom verify`) and refused by
//! publication ([`Error::LogGap`]) instead of being papered over.

use std::collections::BTreeMap;
use std::ops::Range;

use tracing::{Instrument, debug, info_span, warn};

use crate::error::{Error, Result};
use crate::key::sha256_hex;
use crate::manifest::{LOG_PREFIX, MAX_MANIFEST_BYTES, Manifest, log_key, parse_log_key};
use crate::publish::{Root, Snapshot};
use crate::store::ObjectInfo;

/// The sans-IO search for the latest log entry: ask [`next`](Self::next) which sequence
/// number to test, tell [`observe`](Self::observe) whether it exists, until `next` is `None`;
/// then [`latest`](Self::latest) is the answer.
///
/// For a dense log of latest `n` it tests `2 * (floor(log2 n) + 1)` numbers (2 for `n = 1`,
/// 14 for `n = 100`), 1 when nothing is published. Whatever the existence pattern, the answer
/// is `0` (nothing) or an entry that exists and whose successor does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LatestSearch {
    /// Highest number known to exist (0: none).
    lo: u64,
    /// Lowest number above `lo` known to be absent.
    hi: Option<u64>,
    tests: u32,
}

impl LatestSearch {
    pub(crate) fn new() -> Self {
        LatestSearch {
            lo: 0,
            hi: None,
            tests: 0,
        }
    }

    /// The next sequence number to test, or `None` when the search is over.
    pub(crate) fn next(&self) -> Result<Option<u64>> {
        match self.hi {
            None if self.lo == 0 => Ok(Some(1)),
            None => self
                .lo
                .checked_mul(2)
                .map(Some)
                .ok_or_else(|| Error::corrupt(LOG_PREFIX, "sequence numbers exhausted")),
            Some(hi) if hi - self.lo > 1 => Ok(Some(self.lo + (hi - self.lo) / 2)),
            Some(_) => Ok(None),
        }
    }

    /// Records whether entry `seq` (the last [`next`](Self::next)) exists.
    pub(crate) fn observe(&mut self, seq: u64, exists: bool) {
        self.tests += 1;
        if exists {
            self.lo = seq;
        } else {
            self.hi = Some(seq);
        }
    }

    /// The latest entry found (`None`: nothing published).
    pub(crate) fn latest(&self) -> Option<u64> {
        (self.lo > 0).then_some(self.lo)
    }

    /// How many numbers were tested.
    pub(crate) fn tests(&self) -> u32 {
        self.tests
    }

    /// Runs the search over a known set of entries (one listing).
    pub(crate) fn over<V>(entries: &BTreeMap<u64, V>) -> Result<Option<u64>> {
        let mut search = LatestSearch::new();
        while let Some(seq) = search.next()? {
            search.observe(seq, entries.contains_key(&seq));
        }
        Ok(search.latest())
    }
}

/// How many sequence numbers right after the latest [`Root::audit_log`] HEADs on a store
/// that cannot list, looking for entries a gap hides (then it tries latest + 2^k for k ≥ 5).
pub(crate) const AUDIT_WINDOW: u64 = 16;

/// What [`Root::audit_log`] found in a root's snapshot log.
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

impl Root {
    /// Every log entry the store lists, by sequence number (stores that can list).
    async fn listed_log(&self) -> Result<BTreeMap<u64, ObjectInfo>> {
        Ok(self
            .store()
            .list(LOG_PREFIX)
            .await?
            .into_iter()
            .filter_map(|info| parse_log_key(&info.key).map(|seq| (seq, info)))
            .collect())
    }

    /// The log entries readers see, sorted: those of `1..=latest` that exist (on a store that
    /// cannot list, `1..=latest` as probed, sizes unknown: `None`; a missing one then reads as
    /// [`Error::NotFound`]).
    pub(crate) async fn log_entries(&self) -> Result<Vec<(u64, Option<u64>)>> {
        if !self.store().capabilities().list {
            return Ok(match self.probe_latest().await? {
                None => Vec::new(),
                Some((latest, info)) => (1..latest)
                    .map(|seq| (seq, None))
                    .chain(std::iter::once((latest, Some(info.size))))
                    .collect(),
            });
        }
        let listed = self.listed_log().await?;
        let latest = LatestSearch::over(&listed)?.unwrap_or(0);
        Ok(listed
            .into_iter()
            .take_while(|(seq, _)| *seq <= latest)
            .map(|(seq, info)| (seq, Some(info.size)))
            .collect())
    }

    /// The latest log entry by the one rule (see the module docs), from one listing or by
    /// HEAD probing. A listing that shows entries above it (a gap) is logged as a warning.
    pub(crate) async fn latest_log_entry(&self) -> Result<Option<(u64, ObjectInfo)>> {
        if !self.store().capabilities().list {
            return self.probe_latest().await;
        }
        let mut listed = self.listed_log().await?;
        let Some(latest) = LatestSearch::over(&listed)? else {
            if let Some((&newest, _)) = listed.last_key_value() {
                warn!(root = %self.store().describe(), newest, "log/1 is missing: readers see no snapshot (the log is damaged)");
            }
            return Ok(None);
        };
        if let Some((&newest, _)) = listed.last_key_value()
            && newest > latest
        {
            warn!(root = %self.store().describe(), latest, newest, missing = latest + 1, "the snapshot log has a gap: readers see the entry before it");
        }
        Ok(listed.remove(&latest).map(|info| (latest, info)))
    }

    /// Like [`latest_log_entry`](Self::latest_log_entry), for a publisher: a gap in the log
    /// (confirmed by a HEAD, since a listing taken during another commit may lag) is refused
    /// with [`Error::LogGap`] rather than published over.
    pub(crate) async fn latest_log_entry_for_commit(&self) -> Result<Option<(u64, ObjectInfo)>> {
        if !self.store().capabilities().list {
            return self.probe_latest().await;
        }
        // A local listing can miss an entry created while it ran (directory order is not
        // creation order): a gap is believed only after a HEAD confirms the missing entry.
        for _ in 0..3 {
            let listed = self.listed_log().await?;
            let latest = LatestSearch::over(&listed)?.unwrap_or(0);
            let newest = listed.last_key_value().map_or(0, |(&s, _)| s);
            if newest <= latest {
                return Ok(listed.get(&latest).cloned().map(|info| (latest, info)));
            }
            if self.head_log(latest + 1).await?.is_none() {
                return Err(Error::LogGap {
                    missing: latest + 1,
                    newest,
                });
            }
        }
        // The missing entry keeps appearing by HEAD but not in listings: the store's listing
        // is inconsistent with its reads. Probe by HEAD alone, as readers without listings do.
        self.probe_latest().await
    }

    /// Audits the log for gaps (see [`LogAudit`]): one LIST, or on a store that cannot list,
    /// the probe, one HEAD per entry below the latest, and about 75 HEADs above it (a gap
    /// whose later entries all avoid those numbers stays invisible without a listing).
    pub async fn audit_log(&self) -> Result<LogAudit> {
        let span = info_span!("audit_log", root = %self.store().describe());
        async {
            if self.store().capabilities().list {
                let listed = self.listed_log().await?;
                let latest = LatestSearch::over(&listed)?;
                let cut = latest.unwrap_or(0);
                return Ok(LogAudit {
                    latest,
                    gaps: gaps_of(&listed),
                    unreachable: listed.keys().copied().filter(|&s| s > cut).collect(),
                    entries: listed.into_keys().collect(),
                });
            }
            let Some((latest, _)) = self.probe_latest().await? else {
                return Ok(LogAudit::default());
            };
            let mut present = BTreeMap::new();
            for seq in 1..=latest {
                if self.head_log(seq).await?.is_some() {
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
                if self.head_log(seq).await?.is_some() {
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

    /// HEADs `log/<seq>`: its metadata, or `None` if absent.
    pub(crate) async fn head_log(&self, seq: u64) -> Result<Option<ObjectInfo>> {
        match self.store().head(&log_key(seq)).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The latest log entry without listing, by HEAD requests only ([`LatestSearch`]):
    /// `2 * (floor(log2 n) + 1)` HEADs for latest `n`, 1 HEAD when nothing is published.
    pub(crate) async fn probe_latest(&self) -> Result<Option<(u64, ObjectInfo)>> {
        let span =
            info_span!("probe_log", root = %self.store().describe(), heads = tracing::field::Empty);
        async {
            let mut search = LatestSearch::new();
            let mut found: Option<(u64, ObjectInfo)> = None;
            while let Some(seq) = search.next()? {
                let info = self.head_log(seq).await?;
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

    /// GETs and validates log entry `seq`; its size must be `expected_size` when known (from
    /// a listing, a HEAD or a pointer), and at most [`MAX_MANIFEST_BYTES`] always; the read is
    /// bounded by that size before it is made.
    pub(crate) async fn read_log_entry(
        &self,
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
        let dataset_id = self.identity().await?.dataset_id;
        // Bounded by the size the reference gives (a listing, a HEAD, a pointer): an entry
        // that grew or lies is refused without reading past it.
        let limit = expected_size.unwrap_or(MAX_MANIFEST_BYTES);
        let obj = match self.store().get(&key, limit).await {
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
        let size = obj.body.len() as u64;
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
        let manifest = Manifest::parse(&key, &obj.body, &dataset_id)?;
        Ok(Snapshot {
            manifest,
            log_key: key,
            log_size: size,
            log_sha256: sha256_hex(&obj.body),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Range;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use async_trait::async_trait;
    use bytes::Bytes;
    use guideloom_io::AsyncReader;

    use crate::manifest::PublishMode;
    use crate::store::{CasOutcome, CreateOutcome, Etag, Object, RootStore, StoreCapabilities};
    use crate::{PublicationOptions, PublishRequest, Registry, Root, StorageOptions};

    use super::*;

    /// Forwards to a memory root, counts HEADs, and cannot list when `list` is false.
    #[derive(Debug)]
    struct NoList {
        inner: Arc<dyn RootStore>,
        heads: AtomicU64,
        list: bool,
    }

    #[async_trait]
    impl RootStore for NoList {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        fn capabilities(&self) -> StoreCapabilities {
            StoreCapabilities {
                list: self.list,
                ..self.inner.capabilities()
            }
        }
        async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
            self.inner.put_create(key, body).await
        }
        async fn put_cas(
            &self,
            key: &str,
            body: Bytes,
            expected: Option<&Etag>,
        ) -> Result<CasOutcome> {
            self.inner.put_cas(key, body, expected).await
        }
        async fn get(&self, key: &str, limit: u64) -> Result<Object> {
            self.inner.get(key, limit).await
        }
        async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
            self.inner.get_range(key, range).await
        }
        async fn head(&self, key: &str) -> Result<ObjectInfo> {
            self.heads.fetch_add(1, Ordering::Relaxed);
            self.inner.head(key).await
        }
        async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
            self.inner.open_reader(key, size).await
        }
        async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
            if self.list {
                self.inner.list(prefix).await
            } else {
                Err(Error::Unsupported {
                    what: "no listing in this test".into(),
                })
            }
        }
    }

    /// The documented count: `2 * (floor(log2 n) + 1)` HEADs for latest `n >= 1`.
    fn documented_heads(n: u64) -> u64 {
        2 * (u64::from(n.ilog2()) + 1)
    }

    #[tokio::test]
    async fn probing_finds_the_latest_entry_with_logarithmic_heads() {
        let inner = Registry::new()
            .resolve_store("memory://probe", &StorageOptions::default())
            .unwrap();
        let probing = Arc::new(NoList {
            inner: Arc::clone(&inner),
            heads: AtomicU64::new(0),
            list: false,
        });
        // Publishing through the non-listing store exercises the probe in `commit` too.
        let writer = Root::new(probing.clone(), StorageOptions::default());
        let reader = Root::new(probing.clone(), StorageOptions::default());
        let listing = Root::new(inner, StorageOptions::default());
        assert!(reader.latest().await.unwrap_err().is_not_found());
        for n in 1..=37u64 {
            let request = PublishRequest {
                dataset_id: "d".into(),
                snapshot_id: format!("s{n}"),
                shards: vec![],
                mode: PublishMode::Full,
            };
            let published = writer
                .publish(&request, &PublicationOptions::default())
                .await
                .unwrap();
            assert_eq!(published.seq(), n);
            let before = probing.heads.load(Ordering::Relaxed);
            let latest = reader.latest().await.unwrap();
            let heads = probing.heads.load(Ordering::Relaxed) - before;
            assert_eq!((latest.seq(), latest.id()), (n, format!("s{n}").as_str()));
            assert_eq!(latest, listing.latest().await.unwrap());
            assert_eq!(heads, documented_heads(n), "latest seq {n}");
        }
        let all = reader.snapshots().await.unwrap();
        assert_eq!(all, listing.snapshots().await.unwrap());
        assert_eq!(all.len(), 37);
        assert_eq!(documented_heads(100), 14);
    }

    #[tokio::test]
    async fn a_hand_made_gap_gives_every_reader_the_same_latest_and_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn RootStore> = Arc::new(crate::store::LocalStore::new(dir.path()));
        let probing = Arc::new(NoList {
            inner: Arc::clone(&local),
            heads: AtomicU64::new(0),
            list: false,
        });
        let root = Root::new(probing, StorageOptions::default());
        let listing = Root::new(Arc::clone(&local), StorageOptions::default());
        let publish = |n: u64| PublishRequest {
            dataset_id: "d".into(),
            snapshot_id: format!("s{n}"),
            shards: vec![],
            mode: PublishMode::Full,
        };
        for n in 1..=6u64 {
            root.publish(&publish(n), &PublicationOptions::default())
                .await
                .unwrap();
        }
        assert!(listing.audit_log().await.unwrap().is_sound());
        // Deleting entry 3 by hand: the probe (1, 2, 4, 8 absent, 6, 7 absent) still sees 6,
        // and so does the reader that lists.
        std::fs::remove_file(dir.path().join(log_key(3))).unwrap();
        assert_eq!(root.latest().await.unwrap().seq(), 6);
        assert_eq!(listing.latest().await.unwrap().seq(), 6);
        let seqs = |all: Vec<Snapshot>| all.iter().map(Snapshot::seq).collect::<Vec<_>>();
        assert_eq!(seqs(root.snapshots().await.unwrap()), vec![1, 2, 4, 5, 6]);
        assert_eq!(
            seqs(listing.snapshots().await.unwrap()),
            vec![1, 2, 4, 5, 6]
        );
        for r in [&root, &listing] {
            let audit = r.audit_log().await.unwrap();
            assert_eq!(audit.gaps, vec![std::ops::Range { start: 3, end: 4 }]);
            assert!(audit.unreachable.is_empty());
            assert_eq!(audit.latest, Some(6));
            assert!(!audit.is_sound());
        }
        // Deleting entry 2 too: every reader stops at 1, which exists and has no successor;
        // the listing reader knows 4..=6 exist beyond the gap.
        std::fs::remove_file(dir.path().join(log_key(2))).unwrap();
        assert_eq!(root.latest().await.unwrap().seq(), 1);
        assert_eq!(listing.latest().await.unwrap().seq(), 1);
        assert_eq!(seqs(listing.snapshots().await.unwrap()), vec![1]);
        assert_eq!(seqs(root.snapshots().await.unwrap()), vec![1]);
        let audit = listing.audit_log().await.unwrap();
        assert_eq!(
            (audit.gaps, audit.unreachable),
            (vec![std::ops::Range { start: 2, end: 4 }], vec![4, 5, 6])
        );
        // Without a listing the entries past the gap are found by the audit's probes.
        let audit = root.audit_log().await.unwrap();
        assert_eq!(
            (audit.gaps, audit.unreachable),
            (vec![std::ops::Range { start: 2, end: 4 }], vec![4, 5, 6])
        );
        // Open by id still reaches an entry beyond the gap (its pointer names it).
        assert_eq!(listing.snapshot("s5").await.unwrap().seq(), 5);
        // Publication refuses to build on a damaged log, naming the first missing entry.
        let err = listing
            .publish(&publish(7), &PublicationOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::LogGap {
                    missing: 2,
                    newest: 6
                }
            ),
            "{err:?}"
        );
    }

    /// The search's answer, for any existence pattern, is 0 with entry 1 absent, or an entry
    /// that exists and whose successor does not; for a dense log it is the newest entry.
    #[test]
    fn the_search_settles_on_an_entry_without_a_successor() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for case in 0..2_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let n = rng % 300;
            let density = (rng >> 20) % 100;
            let mut entries = BTreeMap::new();
            let mut x = rng;
            for seq in 1..=n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if case % 3 == 0 || (x >> 33) % 100 < density {
                    entries.insert(seq, ());
                }
            }
            let got = LatestSearch::over(&entries).unwrap();
            match got {
                None => assert!(!entries.contains_key(&1), "{entries:?}"),
                Some(s) => {
                    assert!(entries.contains_key(&s) && !entries.contains_key(&(s + 1)));
                }
            }
            if case % 3 == 0 {
                assert_eq!(got, (n > 0).then_some(n), "dense log of {n}");
            }
        }
    }
}
