//! Reading records of a published snapshot by index, through byte ranges.
//!
//! Each shard is opened lazily with one tail read (guideloom-format's [`AsyncShard`]); a
//! record then costs one ranged read. On object stores the reads go through guideloom-io's
//! `ObjectStoreIo` — no whole-shard download.

use bytes::Bytes;
use guideloom_format::{AsyncShard, ReadOptions};
use guideloom_io::AsyncReader;
use tokio::sync::OnceCell;
use tracing::{Instrument, info_span};

use crate::error::{Error, Result};
use crate::manifest::ShardRef;
use crate::publish::{Root, Snapshot};
use crate::staging::Scan;

/// Random access to the records of one snapshot.
#[derive(Debug)]
pub struct SnapshotReader {
    root: Root,
    snapshot: Snapshot,
    /// `starts[i]`: index of shard `i`'s first record; one extra entry = the total.
    starts: Vec<u64>,
    shards: Vec<OnceCell<AsyncShard>>,
    options: ReadOptions,
}

fn format_error(key: &str, source: guideloom_format::Error) -> Error {
    Error::Shard {
        key: key.to_owned(),
        source: Box::new(source),
    }
}

/// Opens a shard over `reader` with one tail read and checks it against the manifest's
/// reference: the object's size and the footer's record count. Shared by random access
/// ([`SnapshotReader`]) and staging ([`crate::staging`]).
pub(crate) async fn open_checked(
    reader: Box<dyn AsyncReader>,
    reference: &ShardRef,
    options: &ReadOptions,
) -> Result<AsyncShard> {
    let shard = AsyncShard::open(reader, options)
        .await
        .map_err(|e| format_error(&reference.key, e))?;
    let size = shard.reader().size().await.map_err(|source| Error::Read {
        key: reference.key.clone(),
        source,
    })?;
    if size != reference.size {
        return Err(Error::Verification {
            key: reference.key.clone(),
            what: "size",
            expected: reference.size.to_string(),
            actual: size.to_string(),
        });
    }
    if shard.len() != reference.record_count {
        return Err(Error::Verification {
            key: reference.key.clone(),
            what: "record count",
            expected: reference.record_count.to_string(),
            actual: shard.len().to_string(),
        });
    }
    Ok(shard)
}

impl SnapshotReader {
    /// The snapshot read.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.snapshot.total_records()
    }

    /// Whether the snapshot has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn locate(&self, index: u64) -> Result<(usize, u64)> {
        if index >= self.len() {
            return Err(Error::invalid(format!(
                "record {index} out of range for snapshot {} of {} records",
                self.snapshot.id(),
                self.len()
            )));
        }
        // The last shard whose first record is <= index (empty shards are skipped over).
        let shard = self.starts.partition_point(|s| *s <= index) - 1;
        Ok((shard, index - self.starts[shard]))
    }

    async fn shard(&self, i: usize) -> Result<&AsyncShard> {
        let reference: &ShardRef = &self.snapshot.shards()[i];
        self.shards[i]
            .get_or_try_init(|| async {
                let reader = self
                    .root
                    .store()
                    .open_reader(&reference.key, reference.size)
                    .await?;
                open_checked(reader, reference, &self.options).await
            })
            .instrument(info_span!("open_shard", key = %reference.key))
            .await
    }

    /// The payload of record `index` (one ranged read; the first read of a shard also opens
    /// it with one tail read).
    pub async fn get(&self, index: u64) -> Result<Bytes> {
        let (i, local) = self.locate(index)?;
        let shard = self.shard(i).await?;
        shard
            .read(local)
            .await
            .map_err(|e| format_error(&self.snapshot.shards()[i].key, e))
    }

    /// The payloads of many records, in the order given (one batched read per shard touched).
    pub async fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let mut by_shard: Vec<(usize, Vec<(usize, u64)>)> = Vec::new();
        for (pos, index) in indices.iter().enumerate() {
            let (i, local) = self.locate(*index)?;
            match by_shard.iter_mut().find(|(s, _)| *s == i) {
                Some((_, v)) => v.push((pos, local)),
                None => by_shard.push((i, vec![(pos, local)])),
            }
        }
        // Shards are read concurrently (each one batched read).
        let reads = by_shard.iter().map(|(i, wanted)| async move {
            let shard = self.shard(*i).await?;
            let locals: Vec<u64> = wanted.iter().map(|(_, l)| *l).collect();
            shard
                .read_many(&locals)
                .await
                .map_err(|e| format_error(&self.snapshot.shards()[*i].key, e))
        });
        let results = futures::future::try_join_all(reads).await?;
        let mut out = vec![Bytes::new(); indices.len()];
        for ((_, wanted), got) in by_shard.into_iter().zip(results) {
            for ((pos, _), bytes) in wanted.into_iter().zip(got) {
                out[pos] = bytes;
            }
        }
        Ok(out)
    }
}

impl SnapshotReader {
    /// An in-order scan of records `range` through whole-shard staging: each shard the range
    /// touches is fetched whole (one request per 64 MiB chunk) into an unnamed local file under the root's
    /// [`StagingOptions`](crate::StagingOptions) budget, then read locally in runs (see
    /// [`crate::staging`]). Use it for sequential passes over remote roots; random access
    /// ([`get`](Self::get), [`get_many`](Self::get_many)) reads ranges instead.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::ShardMetadata;
    /// use guideloom_publish::{PublicationOptions, PublishMode, PublishRequest, Registry, StorageOptions};
    ///
    /// let root = Registry::new().resolve("memory://scan-doc", &StorageOptions::default())?;
    /// let tmp = tempfile::tempdir().unwrap();
    /// let records = [b"a".as_slice(), b"bb", b"ccc"];
    /// let shard = root.write_shard("w", 0, ShardMetadata::new("raw", "documents"), records, tmp.path()).await?;
    /// let request = PublishRequest {
    ///     dataset_id: "d".into(),
    ///     snapshot_id: "s".into(),
    ///     shards: vec![shard],
    ///     mode: PublishMode::Full,
    /// };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    /// let reader = root.open_latest().await?;
    /// let mut scan = reader.scan(1..3)?;
    /// let mut got = Vec::new();
    /// while let Some(record) = scan.next_record().await {
    ///     got.push(record?);
    /// }
    /// assert_eq!(got, [&b"bb"[..], b"ccc"]);
    /// assert_eq!(root.stager().stats().downloads, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan(&self, range: std::ops::Range<u64>) -> Result<Scan<'_>> {
        if range.start > range.end || range.end > self.len() {
            return Err(Error::invalid(format!(
                "scan range {range:?} out of bounds for snapshot {} of {} records",
                self.snapshot.id(),
                self.len()
            )));
        }
        Ok(Scan::new(
            self.root.stager(),
            self.snapshot.shards(),
            &self.starts,
            range,
        ))
    }
}

impl Root {
    /// A reader of `snapshot`'s records (no request until the first read).
    pub fn reader(&self, snapshot: Snapshot) -> SnapshotReader {
        let mut starts = Vec::with_capacity(snapshot.shards().len() + 1);
        let mut total = 0u64;
        for s in snapshot.shards() {
            starts.push(total);
            // Validated manifests keep the sum within 2^48.
            total = total.saturating_add(s.record_count);
        }
        starts.push(total);
        let shards = snapshot.shards().iter().map(|_| OnceCell::new()).collect();
        SnapshotReader {
            root: self.clone(),
            snapshot,
            starts,
            shards,
            options: ReadOptions::default(),
        }
    }

    /// Opens the latest snapshot for reading.
    pub async fn open_latest(&self) -> Result<SnapshotReader> {
        Ok(self.reader(self.latest().await?))
    }
}

impl SnapshotReader {
    /// The root read.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The shard read options in use.
    pub fn read_options(&self) -> &ReadOptions {
        &self.options
    }

    /// Cumulative record starts of the shards: `[0, n0, n0 + n1, ..., len()]` (one entry
    /// per shard plus the total).
    pub fn shard_starts(&self) -> &[u64] {
        &self.starts
    }

    /// The shard holding record `index` and the record's index inside it, or `None` when
    /// `index` is past the end.
    pub fn position(&self, index: u64) -> Option<(usize, u64)> {
        self.locate(index).ok()
    }

    /// Shard number `i` of the snapshot, opened (once: one tail read, its size and record
    /// count checked against the manifest). For per-shard work such as in-order runs
    /// ([`AsyncShard::read_run`]) or reading every record's checksum. An `i` past the last
    /// shard is [`Error::InvalidArgument`].
    pub async fn open_shard(&self, i: usize) -> Result<&AsyncShard> {
        if i >= self.shards.len() {
            return Err(Error::invalid(format!(
                "shard {i} out of range for snapshot {} of {} shards",
                self.snapshot.id(),
                self.shards.len()
            )));
        }
        self.shard(i).await
    }
}

impl Root {
    /// A reader of `snapshot`'s records with shard read `options` (record CRC
    /// verification, speculative tail); no request until the first read.
    pub fn reader_with(&self, snapshot: Snapshot, options: ReadOptions) -> SnapshotReader {
        let mut reader = self.reader(snapshot);
        reader.options = options;
        reader
    }
}
