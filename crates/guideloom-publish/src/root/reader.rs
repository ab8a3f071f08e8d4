//! The one reader of a published snapshot: every record read of the workspace (the
//! facade's `Dataset` (this type, re-exported), the CLI's `get`, `cat`, `verify`, `bench`, the loader
//! and the benchmarks) goes through [`Dataset`].
//!
//! - Shards are opened lazily, once each, with one tail read (guideloom-format's
//!   [`AsyncShard`](guideloom_format::AsyncShard), or guideloom-arrayrecord's reader), their
//!   size, record count and footer or tail checksum checked against the manifest: a shard
//!   replaced by another object, even of the same size, is [`Error::Verification`] before
//!   any of its records is served. On a remote root the opened object's version (its entity
//!   tag) is pinned, so a replacement after the open fails the next read the same way
//!   (guideloom-io's `If-Match`).
//! - On a remote root, the first [`get`](Dataset::get) of a native shard whose index
//!   is larger than the 64 KiB tail is a point read instead (guideloom-format's
//!   [`ShardProbe`](guideloom_format::ShardProbe): footer, metadata and the record's index
//!   entries, then the record), and the shard is opened whole at its next read (`probe.rs`).
//! - Record `i` ([`get`](Dataset::get)) is one ranged read; a batch
//!   ([`get_many`](Dataset::get_many)) one coalescing read per shard touched, shards
//!   read concurrently; where a record lives is the format crate's [`ShardTable`].
//! - In-order reads ([`read_in_order`](Dataset::read_in_order),
//!   [`get_range`](Dataset::get_range)) are split by [`ShardTable::runs`] and
//!   [`plan_runs`](guideloom_format::plan_runs) into reads of at most one [`RunBudget`] each.
//! - Annotation sets are opened once per reader ([`annotations`](Dataset::annotations)).
//! - Whole-shard staging is the other in-order strategy: each shard fetched whole into a
//!   local file, then read locally. [`read_in_order`](Dataset::read_in_order) uses it
//!   by itself where it is cheaper — on stores whose reads are network requests, for a piece
//!   of at least half a shard (measured: 4 requests instead of 40 and 2.4 × the throughput
//!   on moto; 8 × slower on a local root, where it is never used) — and
//!   [`scan`](Dataset::scan) asks for it explicitly. Both fetch the next shards they
//!   will stage while reading the current one, with up to
//!   [`StagingOptions::parallel_requests`](crate::StagingOptions::parallel_requests) ranged
//!   requests in flight (see [`Stager`](crate::Stager)).
//!
//! Shards are native guideloom shards or ArrayRecord files, as each reference's
//! [`ShardFormat`](crate::ShardFormat) says, read the same way through [`OpenedShard`].
//! Every failure of a native shard's bytes — its footer, index, metadata or a record — is
//! the same [`Error::Shard`] carrying the key and the format crate's error; an ArrayRecord
//! shard's is [`Error::ArrayRecordShard`] carrying the key and the arrayrecord crate's.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use std::ops::Range;

use bytes::Bytes;
use guideloom_format::{ReadOptions, Run, RunBudget, Runs, ShardTable};
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;
use tracing::{Instrument, info_span};

use super::Root;
use crate::annotations::AnnotationSet;
use crate::error::{Error, Result};
use crate::manifest::ShardRef;
use crate::opened::{OpenedShard, open_checked};
use crate::snapshot_log::Snapshot;
use crate::staging::{Prefetcher, Scan, StagedShard};
use crate::stream::StreamState;

mod ahead;
mod cached;
mod capped;
mod lookahead;
mod probe;
mod sync;

pub use ahead::{
    DEFAULT_READ_AHEAD_BATCHES, DEFAULT_READ_AHEAD_BYTES, ReadAhead, ReadAheadOptions,
};
pub use capped::{Capped, CappedRun, PROBE_WINDOW_BEFORE, PROBE_WINDOW_RECORDS};
pub use sync::{DatasetOptions, Records, resolve_root};
pub(crate) use sync::{block_on, decode_cbor};

/// One snapshot of a dataset root, read by record index, by range, in order, as tokens, with
/// its annotations: every read has a synchronous form (`get`) and an async twin
/// (`get_async`). Cheap to clone (clones share opened shards and annotation sets).
#[derive(Debug, Clone)]
pub struct Dataset {
    inner: Arc<Shared>,
}

/// The state clones of a [`Dataset`] share.
#[derive(Debug)]
struct Shared {
    root: Root,
    snapshot: Snapshot,
    /// Where each record lives: the shards' cumulative record counts.
    table: ShardTable,
    shards: Vec<OnceCell<OpenedShard>>,
    /// Whether each shard's first record was read by a probe (`probe.rs`).
    probed: Vec<AtomicBool>,
    /// Each shard's probe for ranges (`capped.rs`): footer, metadata and a window of index
    /// entries, kept so that the next range near the first costs only its records' read.
    range_probes: Vec<OnceCell<guideloom_format::ShardProbe>>,
    /// For each shard opened from the node cache: its entry's name and file, to remove the
    /// entry when its records fail their checks.
    cached: Vec<OnceLock<(String, std::fs::File)>>,
    options: ReadOptions,
    /// Annotation sets opened through this reader, by set name (their latest version for
    /// this snapshot, downloaded and verified once).
    annotations: Mutex<HashMap<String, Arc<OnceCell<Arc<AnnotationSet>>>>>,
    /// The token layout and metadata companions of a stream snapshot (`stream/read.rs`).
    stream: StreamState,
}

impl Dataset {
    /// A reader of `snapshot` of `root` with shard read `options`: no request until the
    /// first read ([`Root::reader_with`]).
    pub(super) fn new(root: Root, snapshot: Snapshot, options: ReadOptions) -> Self {
        // Validated manifests keep the total within 2^48, far below the table's bound.
        let table = ShardTable::from_counts(snapshot.shards().iter().map(|s| s.record_count))
            .unwrap_or_default();
        let shards = snapshot.shards().iter().map(|_| OnceCell::new()).collect();
        let probed = snapshot
            .shards()
            .iter()
            .map(|_| AtomicBool::new(false))
            .collect();
        let stream = StreamState::new(&snapshot);
        let cached = snapshot.shards().iter().map(|_| OnceLock::new()).collect();
        let range_probes = snapshot.shards().iter().map(|_| OnceCell::new()).collect();
        Dataset {
            inner: Arc::new(Shared {
                root,
                snapshot,
                table,
                shards,
                probed,
                range_probes,
                cached,
                options,
                annotations: Mutex::default(),
                stream,
            }),
        }
    }

    pub(crate) fn stream_state(&self) -> &StreamState {
        &self.inner.stream
    }

    /// The snapshot read.
    pub fn snapshot(&self) -> &Snapshot {
        &self.inner.snapshot
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.inner.snapshot.total_records()
    }

    /// Whether the snapshot has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cold]
    #[inline(never)]
    fn out_of_range(&self, index: u64) -> Error {
        Error::OutOfRange {
            index,
            len: self.len(),
            what: format!("snapshot {}", self.inner.snapshot.id()),
        }
    }

    /// (shard, record within it) of record `index`, or [`Error::OutOfRange`].
    #[inline]
    pub(super) fn locate(&self, index: u64) -> Result<(usize, u64)> {
        let located = self
            .inner
            .table
            .locate(index)
            .ok_or_else(|| self.out_of_range(index))?;
        Ok((located.shard, located.local))
    }

    async fn shard(&self, i: usize) -> Result<&OpenedShard> {
        // The common case, an open shard, without building the opening future: it holds the
        // open and tail-read futures (hundreds of bytes, copied on every call) and a span.
        if let Some(shard) = self.inner.shards[i].get() {
            return Ok(shard);
        }
        Box::pin(self.open_shard_once(i)).await
    }

    /// Opens shard `i` once (concurrent callers share the open), under an `open_shard` span.
    async fn open_shard_once(&self, i: usize) -> Result<&OpenedShard> {
        let reference: &ShardRef = &self.inner.snapshot.shards()[i];
        let opened = self.inner.shards[i]
            .get_or_try_init(|| async {
                if let Some(shard) = self.open_cached(i, reference).await? {
                    return Ok(shard);
                }
                let reader = self
                    .inner
                    .root
                    .store()
                    .open_reader(&reference.key, reference.size)
                    .await?;
                open_checked(reader, reference, &self.inner.options).await
            })
            .instrument(info_span!("open_shard", key = %reference.key))
            .await;
        match opened {
            Ok(shard) => Ok(shard),
            Err(e) => Err(self.expired_or(e).await),
        }
    }

    /// A shard that is not found may belong to a snapshot garbage collection expired: then
    /// that is the error ([`Error::SnapshotExpired`](crate::Error::SnapshotExpired)), found
    /// by one read of the catalog and the collection records; otherwise `e` as it was.
    pub(super) async fn expired_or(&self, e: crate::Error) -> crate::Error {
        if e.kind() != guideloom_io::ErrorKind::NotFound
            || !self.inner.root.store().capabilities().list
        {
            return e;
        }
        let id = self.inner.snapshot.id();
        match self.inner.root.expired().await {
            Ok(expired) => match expired.into_iter().find(|x| x.snapshot_id == id) {
                Some(x) => crate::Error::SnapshotExpired {
                    snapshot_id: x.snapshot_id,
                    seq: x.seq,
                },
                None => e,
            },
            Err(_) => e,
        }
    }

    /// The payload of record `index` (one ranged read; the first read of a shard also opens
    /// it with one tail read). On a remote root, the first read of a native shard whose
    /// index is larger than 64 KiB reads only the index entries it needs, with the footer
    /// and metadata, and checks the record's CRC32C whatever the read options say
    /// (guideloom-format's [`ShardProbe`](guideloom_format::ShardProbe)); the shard's next
    /// read opens it whole.
    pub async fn get_async(&self, index: u64) -> Result<Bytes> {
        let (i, local) = self.locate(index)?;
        if self.inner.shards[i].get().is_none() && self.probes(i) {
            return Box::pin(self.probe_read(i, local)).await;
        }
        let shard = self.shard(i).await?;
        shard
            .read(&self.inner.snapshot.shards()[i].key, local)
            .await
            .map_err(|e| self.forget_damaged(i, e))
    }

    /// [`get`](Self::get) on the calling thread, for a caller that may block it (a
    /// synchronous API): `Some` with the same bytes or error when the record's shard is
    /// already open and has a synchronous view ([`OpenedShard::as_sync`]: a local file or
    /// mapping), `None` when the read needs the executor (the shard's first open, a remote or
    /// ArrayRecord shard); then await `get`. No future, no runtime, no allocation: the
    /// per-call cost of a local read is the look-up and the read.
    #[inline]
    pub(crate) fn try_get_here(&self, index: u64) -> Option<Result<Bytes>> {
        let (i, local) = match self.locate(index) {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        let shard = self.inner.shards[i].get()?.as_sync()?;
        Some(shard.read(local).map_err(|e| {
            self.forget_damaged(i, Error::shard(&self.inner.snapshot.shards()[i].key, e))
        }))
    }

    /// [`get_many`](Self::get_many) on the calling thread, as
    /// [`try_get_here`](Self::try_get_here): `Some` only when every shard touched is open
    /// and has a synchronous view (one batched read per shard, one after another). Every
    /// view is taken before the first read, so a `None` has read nothing and the async path
    /// that follows repeats no read.
    pub(crate) fn try_get_many_here(&self, indices: &[u64]) -> Option<Result<Vec<Bytes>>> {
        let groups = match self.inner.table.group(indices) {
            Ok(groups) => groups,
            Err(index) => return Some(Err(self.out_of_range(index))),
        };
        let mut shards = Vec::with_capacity(groups.len());
        for group in &groups {
            shards.push(self.inner.shards[group.shard].get()?.as_sync()?);
        }
        let mut out = vec![Bytes::new(); indices.len()];
        for (group, shard) in groups.iter().zip(shards) {
            let got = match shard.read_many(&group.locals) {
                Ok(got) => got,
                Err(e) => {
                    let key = &self.inner.snapshot.shards()[group.shard].key;
                    return Some(Err(self.forget_damaged(group.shard, Error::shard(key, e))));
                }
            };
            for (&pos, bytes) in group.positions.iter().zip(got) {
                out[pos] = bytes;
            }
        }
        Some(Ok(out))
    }

    /// The payloads of many records, in the order given, repeats included: one batched
    /// (coalescing) read per shard touched, shards read concurrently. An index past the end
    /// is [`Error::OutOfRange`] before any read.
    pub async fn get_many_async(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let groups = self
            .inner
            .table
            .group(indices)
            .map_err(|index| self.out_of_range(index))?;
        let reads = groups.iter().map(|group| async move {
            let shard = self.shard(group.shard).await?;
            let key = &self.inner.snapshot.shards()[group.shard].key;
            shard
                .read_many(key, &group.locals)
                .await
                .map_err(|e| self.forget_damaged(group.shard, e))
        });
        let results = futures::future::try_join_all(reads).await?;
        let mut out = vec![Bytes::new(); indices.len()];
        for (group, got) in groups.iter().zip(results) {
            for (&pos, bytes) in group.positions.iter().zip(got) {
                out[pos] = bytes;
            }
        }
        Ok(out)
    }

    /// The payloads of records `range`, in order (see [`read_in_order`](Self::read_in_order)
    /// for the reads made). A range reaching past the end is [`Error::OutOfRange`].
    pub async fn get_range_async(&self, range: Range<u64>) -> Result<Vec<Bytes>> {
        let mut out =
            Vec::with_capacity(usize::try_from(range.end.saturating_sub(range.start)).unwrap_or(0));
        let mut runs = self.read_in_order(range, RunBudget::default())?;
        while let Some(run) = runs.next_run().await {
            out.extend(run?.records);
        }
        Ok(out)
    }

    /// Reads records `range` in order, one run at a time: the range is split by shard
    /// ([`ShardTable::runs`]), each piece into reads of at most `budget`
    /// ([`plan_runs`](guideloom_format::plan_runs) for a native shard; whole chunks of an
    /// ArrayRecord shard, see [`OpenedShard`]); each read is one ranged request of
    /// consecutive records (the first read of a shard also opens it). Shards are opened as
    /// the reads reach them, so a reader can stop early. A range reaching past the end is
    /// [`Error::OutOfRange`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::{RunBudget, ShardMetadata};
    /// use guideloom_publish::{
    ///     PublicationOptions, PublishMode, PublishRequest, Root, RootOptions, StoreOptions,
    /// };
    ///
    /// let root = Root::open("memory://in-order-doc", &StoreOptions::default(), RootOptions::default())?;
    /// let mut shards = Vec::new();
    /// for (n, records) in [[b"a".as_slice(), b"b"], [b"c", b"d"]].into_iter().enumerate() {
    ///     let meta = ShardMetadata::new("raw", "documents");
    ///     shards.push(root.write_shard("w", n as u64, meta, records).await?);
    /// }
    /// let request = PublishRequest {
    ///     dataset_id: "d".into(),
    ///     snapshot_id: "s".into(),
    ///     shards,
    ///     mode: PublishMode::Full,
    ///     schema: None,
    /// };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    /// let reader = root.open_latest().await?;
    /// let mut runs = reader.read_in_order(1..4, RunBudget::default())?;
    /// let mut got = Vec::new();
    /// while let Some(run) = runs.next_run().await {
    ///     let run = run?; // consecutive records of one shard, from global index run.first
    ///     got.push((run.first, run.records));
    /// }
    /// assert_eq!(got, [(1, vec![bytes::Bytes::from("b")]), (2, vec!["c".into(), "d".into()])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_in_order(&self, range: Range<u64>, budget: RunBudget) -> Result<InOrder<'_>> {
        if range.start > range.end || range.end > self.len() {
            // The first index asked for that does not exist.
            let index = if range.start > range.end {
                range.start
            } else {
                range.end - 1
            };
            return Err(self.out_of_range(index));
        }
        Ok(InOrder {
            reader: self,
            pieces: self.inner.table.runs(range),
            piece: None,
            staged: None,
            prefetcher: Prefetcher::default(),
            budget,
            failed: false,
        })
    }

    /// Whether an in-order read of `piece` goes through whole-shard staging: on a store whose
    /// reads are network requests ([`StoreCapabilities::remote_reads`](crate::StoreCapabilities::remote_reads)),
    /// for a piece of at least half of its shard, when the shard fits the staging budget.
    /// Measured on moto (`publish/s3/in_order_32MiB`): 4 requests instead of 40 and about
    /// 2.4 × the throughput of 1 MiB ranged runs; on a local root staging only adds a copy
    /// (about 8 × slower), so local, mounted and memory roots always read ranged runs.
    fn stages(&self, piece: &Run) -> bool {
        let reference = &self.inner.snapshot.shards()[piece.shard];
        self.inner.root.store().capabilities().remote_reads
            && self.inner.root.read_cache().is_none()
            && piece.count.saturating_mul(2) >= self.inner.table.shard_len(piece.shard)
            && reference.size <= self.inner.root.stager().options().budget_bytes
    }
}

/// Consecutive records of one shard, read by one request of an in-order read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRun {
    /// The shard's position in the snapshot.
    pub shard: usize,
    /// The global index of the first record.
    pub first: u64,
    /// The records' payloads, in order.
    pub records: Vec<Bytes>,
}

/// An in-order read of a range of a snapshot ([`Dataset::read_in_order`]). After an
/// error it ends.
#[derive(Debug)]
pub struct InOrder<'r> {
    reader: &'r Dataset,
    pieces: Runs<'r>,
    /// The shard piece being read: its remaining local records.
    piece: Option<Run>,
    /// The staged copy of the piece's shard, when the piece is read from one
    /// ([`Dataset::stages`]), held so it is not evicted mid-piece.
    staged: Option<(usize, Arc<StagedShard>)>,
    /// Downloads of the next shards the read will stage, started while it reads this one.
    prefetcher: Prefetcher,
    budget: RunBudget,
    failed: bool,
}

impl InOrder<'_> {
    /// The next run, or `None` when the range is read (or after an error).
    pub async fn next_run(&mut self) -> Option<Result<RecordRun>> {
        if self.failed {
            return None;
        }
        let piece = match self.piece.take().filter(|p| p.count > 0) {
            Some(piece) => piece,
            None => self.pieces.next()?,
        };
        let result = self.read(piece).await;
        self.failed = result.is_err();
        Some(result)
    }

    async fn read(&mut self, piece: Run) -> Result<RecordRun> {
        let reader = self.reader;
        if self.staged.as_ref().is_some_and(|(s, _)| *s != piece.shard) {
            self.staged = None;
        }
        if self.staged.is_some() {
            // Still in the staged shard: start the prefetches there was no room for before.
            let upcoming = self
                .pieces
                .clone()
                .filter(|p| reader.stages(p))
                .map(|p| p.shard);
            self.prefetcher.top_up(
                reader.inner.root.stager(),
                reader.inner.snapshot.shards(),
                upcoming,
            );
        }
        if self.staged.is_none() && reader.stages(&piece) {
            let reference = &reader.inner.snapshot.shards()[piece.shard];
            let upcoming = self
                .pieces
                .clone()
                .filter(|p| reader.stages(p))
                .map(|p| p.shard);
            let staged = self
                .prefetcher
                .stage(
                    reader.inner.root.stager(),
                    reader.inner.snapshot.shards(),
                    piece.shard,
                    upcoming,
                )
                .await;
            match staged {
                Ok(staged) => self.staged = Some((piece.shard, staged)),
                // Damaged bytes are damaged whichever way they are read, and an object that
                // is not the reference's (its size, checksum or version) is not read at all.
                Err(e) if e.is_shard_error() || matches!(e, Error::Verification { .. }) => {
                    return Err(e);
                }
                // Anything else (the staging directory full or unwritable, a download cut
                // off): read this piece by ranged runs instead, which report their own error.
                Err(e) => tracing::warn!(
                    key = %reference.key,
                    error = %e,
                    "staging failed; reading the shard by ranged runs"
                ),
            }
        }
        let shard = match &self.staged {
            Some((_, staged)) => staged.shard(),
            None => reader.shard(piece.shard).await?,
        };
        let run = shard.next_run(piece, self.budget);
        let key = &reader.inner.snapshot.shards()[piece.shard].key;
        let records = shard.read_run(key, run.first, run.count).await?;
        self.piece = Some(Run {
            shard: piece.shard,
            first: run.first + run.count,
            count: piece.count - run.count,
        });
        Ok(RecordRun {
            shard: piece.shard,
            first: reader.inner.table.global(&run).start,
            records,
        })
    }
}

impl Dataset {
    /// An in-order scan of records `range` through whole-shard staging: each shard the range
    /// touches is fetched whole (one ranged request per 64 MiB chunk) into an unnamed local
    /// file under the root's [`StagingOptions`](crate::StagingOptions) budget
    /// ([`RootOptions::staging`](crate::RootOptions::staging)), then read locally in runs (see
    /// [`Stager`](crate::Stager)). While one shard is read the next ones download, with up to
    /// [`StagingOptions::parallel_requests`](crate::StagingOptions::parallel_requests)
    /// requests in flight, within the budget. Use it for sequential passes over remote roots; random access
    /// ([`get`](Self::get), [`get_many`](Self::get_many)) reads ranges instead.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::ShardMetadata;
    /// use guideloom_publish::{
    ///     PublicationOptions, PublishMode, PublishRequest, Root, RootOptions, StoreOptions,
    /// };
    ///
    /// let root = Root::open("memory://scan-doc", &StoreOptions::default(), RootOptions::default())?;
    /// let records = [b"a".as_slice(), b"bb", b"ccc"];
    /// let shard = root.write_shard("w", 0, ShardMetadata::new("raw", "documents"), records).await?;
    /// let request = PublishRequest {
    ///     dataset_id: "d".into(),
    ///     snapshot_id: "s".into(),
    ///     shards: vec![shard],
    ///     mode: PublishMode::Full,
    ///     schema: None,
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
                self.inner.snapshot.id(),
                self.len()
            )));
        }
        Ok(Scan::new(
            self.inner.root.stager(),
            self.inner.snapshot.shards(),
            &self.inner.table,
            range,
        ))
    }
}

impl Dataset {
    /// The root read.
    pub fn root(&self) -> &Root {
        &self.inner.root
    }

    /// The shard read options in use.
    pub fn read_options(&self) -> &ReadOptions {
        &self.inner.options
    }

    /// Where each record lives: the shards' cumulative record counts
    /// ([`ShardTable::starts`] is `[0, n0, n0 + n1, ..., len()]`).
    pub fn table(&self) -> &ShardTable {
        &self.inner.table
    }

    /// Shard number `i` of the snapshot, opened (once: one tail read, its size and record
    /// count checked against the manifest), in its format ([`OpenedShard::native`] gives a
    /// native shard's metadata and index, [`OpenedShard::array_record`] an ArrayRecord
    /// file's layout). An `i` past the last shard is [`Error::InvalidArgument`].
    pub async fn open_shard_async(&self, i: usize) -> Result<&OpenedShard> {
        if i >= self.inner.shards.len() {
            return Err(Error::invalid(format!(
                "shard {i} out of range for snapshot {} of {} shards",
                self.inner.snapshot.id(),
                self.inner.shards.len()
            )));
        }
        self.shard(i).await
    }
}

impl Dataset {
    /// Annotation set `set` (its latest version in the catalog when first asked for) for
    /// this snapshot, downloaded and verified once per reader: later calls, and
    /// [`annotation`](Self::annotation) in a loop over records, cost no request. A version
    /// published after the first call is seen by a new reader (the same way a reader keeps
    /// reading its snapshot). Errors are those of [`Root::annotations`] and are not cached.
    pub async fn annotations_async(&self, set: &str) -> Result<Arc<AnnotationSet>> {
        let cell = {
            let mut sets = self
                .inner
                .annotations
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(sets.entry(set.to_owned()).or_default())
        };
        cell.get_or_try_init(|| async {
            self.inner
                .root
                .annotations(set, None, &self.inner.snapshot, false)
                .await
                .map(Arc::new)
        })
        .instrument(info_span!("open_annotations", set))
        .await
        .cloned()
    }

    /// The value of annotation set `set` for record `index`, decoded as `T` (the set is
    /// opened once, see [`annotations`](Self::annotations)).
    pub async fn annotation_async<T: DeserializeOwned>(&self, set: &str, index: u64) -> Result<T> {
        self.annotations_async(set).await?.get(index)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use crate::{
        CountingStore, PublicationOptions, PublishMode, PublishRequest, Registry, RetryPolicy,
        Root, RootOptions, StoreOptions,
    };

    /// Reading every value of an annotation set in a loop downloads the catalog and the
    /// values once: two requests for the whole loop, none for a second reader's clone.
    #[tokio::test]
    async fn annotation_values_in_a_loop_cost_one_download() {
        let base = Registry::new()
            .resolve("memory://reader-annotations", &StoreOptions::default())
            .unwrap();
        let counting = Arc::new(CountingStore::new(base));
        let root = Root::new(counting.clone(), RootOptions::default());
        let shard = root
            .upload_shard("w", 0, Bytes::from_static(b"shard bytes"), 40)
            .await
            .unwrap();
        let request = PublishRequest {
            dataset_id: "d".into(),
            snapshot_id: "s".into(),
            shards: vec![shard],
            mode: PublishMode::Full,
            schema: None,
        };
        root.publish(&request, &PublicationOptions::default())
            .await
            .unwrap();
        let snapshot = root.latest().await.unwrap();
        let values: Vec<u64> = (0..40).map(|i| i * 7).collect();
        root.publish_annotations(
            "scores",
            "v1",
            &snapshot,
            &values,
            &RetryPolicy::contended_update(),
        )
        .await
        .unwrap();

        let reader = root.reader(snapshot);
        let before = counting.counts();
        for i in 0..40u64 {
            assert_eq!(
                reader.annotation_async::<u64>("scores", i).await.unwrap(),
                i * 7
            );
        }
        let spent = counting.counts() - before;
        assert_eq!(spent.requests(), 2, "catalog + values once: {spent:?}");
        assert_eq!(reader.annotations_async("scores").await.unwrap().len(), 40);
        // A missing set is an error each time (not cached as absent)...
        assert!(matches!(
            reader.annotations_async("nope").await,
            Err(crate::Error::NotFound { .. })
        ));
        // ...and an index past the end is refused by name.
        let err = reader
            .annotation_async::<u64>("scores", 40)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }
}
