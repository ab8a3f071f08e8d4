//! The snapshot log (`log/<seq>.json`): finding entries by LIST, or by HEAD probing on stores
//! that cannot list (`http(s)://` roots), and reading one entry with its checks.

use tracing::{Instrument, debug, info_span};

use crate::error::{Error, Result};
use crate::key::sha256_hex;
use crate::manifest::{LOG_PREFIX, MAX_MANIFEST_BYTES, Manifest, log_key, parse_log_key};
use crate::publish::{Root, Snapshot};
use crate::store::ObjectInfo;

impl Root {
    /// All log entries, sorted by sequence number (keys in `log/` that are not log entries
    /// are ignored). On a store that cannot list, the entries `1..=latest` found by
    /// [`probe_latest`](Self::probe_latest) (sizes unknown: `None`).
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
        let mut entries: Vec<(u64, Option<u64>)> = self
            .store()
            .list(LOG_PREFIX)
            .await?
            .into_iter()
            .filter_map(|info| parse_log_key(&info.key).map(|seq| (seq, Some(info.size))))
            .collect();
        entries.sort_by_key(|(seq, _)| *seq);
        Ok(entries)
    }

    pub(crate) async fn latest_log_entry(&self) -> Result<Option<(u64, ObjectInfo)>> {
        if !self.store().capabilities().list {
            return self.probe_latest().await;
        }
        Ok(self
            .store()
            .list(LOG_PREFIX)
            .await?
            .into_iter()
            .filter_map(|info| parse_log_key(&info.key).map(|seq| (seq, info)))
            .max_by_key(|(seq, _)| *seq))
    }

    /// HEADs `log/<seq>`: its metadata, or `None` if absent.
    pub(crate) async fn head_log(&self, seq: u64) -> Result<Option<ObjectInfo>> {
        match self.store().head(&log_key(seq)).await {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The latest log entry without listing, by HEAD requests only.
    ///
    /// Log sequence numbers are dense from 1: `commit` creates `log/<n+1>` only after
    /// reading that `log/<n>` exists, entries are create-only and never deleted, and a
    /// publisher that crashes after its claim has taken no number (the number is chosen at
    /// the commit, which is the one create of the log entry). So "entry `s` exists" is true
    /// for `s <= latest` and false above, and the latest is found by exponential probing
    /// (HEAD 1, 2, 4, ... until one is absent) and a binary search between the last present
    /// and the first absent power of two: `2 * (floor(log2 n) + 1)` HEADs for latest `n`
    /// (2 for `n = 1`, 14 for `n = 100`), 1 HEAD when nothing is published.
    ///
    /// If entries were deleted by hand (a gap), the answer is still an entry that exists and
    /// whose successor does not — possibly one before the gap — never a missing one.
    pub(crate) async fn probe_latest(&self) -> Result<Option<(u64, ObjectInfo)>> {
        let span =
            info_span!("probe_log", root = %self.store().describe(), heads = tracing::field::Empty);
        async {
            let mut heads = 1u32;
            let Some(first) = self.head_log(1).await? else {
                tracing::Span::current().record("heads", heads);
                return Ok(None);
            };
            // Invariant: `lo` exists (with `lo_info`), `hi` does not.
            let (mut lo, mut lo_info) = (1u64, first);
            let mut hi = loop {
                let Some(next) = lo.checked_mul(2) else {
                    return Err(Error::corrupt(LOG_PREFIX, "sequence numbers exhausted"));
                };
                heads += 1;
                match self.head_log(next).await? {
                    Some(info) => (lo, lo_info) = (next, info),
                    None => break next,
                }
            };
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                heads += 1;
                match self.head_log(mid).await? {
                    Some(info) => (lo, lo_info) = (mid, info),
                    None => hi = mid,
                }
            }
            tracing::Span::current().record("heads", heads);
            debug!(latest = lo, heads, "probed the log");
            Ok(Some((lo, lo_info)))
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
    async fn a_hand_made_gap_yields_an_existing_entry_without_a_successor() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn RootStore> = Arc::new(crate::store::LocalStore::new(dir.path()));
        let probing = Arc::new(NoList {
            inner: Arc::clone(&local),
            heads: AtomicU64::new(0),
            list: false,
        });
        let root = Root::new(probing, StorageOptions::default());
        for n in 1..=6u64 {
            let request = PublishRequest {
                dataset_id: "d".into(),
                snapshot_id: format!("s{n}"),
                shards: vec![],
                mode: PublishMode::Full,
            };
            root.publish(&request, &PublicationOptions::default())
                .await
                .unwrap();
        }
        // Deleting entry 3 by hand: the probe (1, 2, 4, 8 absent, 6, 7 absent) still sees 6.
        std::fs::remove_file(dir.path().join(log_key(3))).unwrap();
        assert_eq!(root.latest().await.unwrap().seq(), 6);
        // Deleting entry 2 too: the probe stops at 1, which exists and has no successor.
        std::fs::remove_file(dir.path().join(log_key(2))).unwrap();
        assert_eq!(root.latest().await.unwrap().seq(), 1);
    }
}
