//! Compaction: a snapshot's many small shards rewritten into fewer shards of about a target
//! size, published as a new **full** snapshot through [`Root::publish`] (claims,
//! collisions and resumption as for any publication).
//!
//! The new snapshot holds the same records in the same order, byte for byte, under the same
//! manifest schema, so an annotation set of the source aligns index for index with it.
//!
//! Plan: the source's shards are walked in order. A shard that is already at least the
//! target size, or is not native (an ArrayRecord file), is **kept**: referenced as it is,
//! not rewritten. Consecutive native shards whose metadata is equal (record format, kind,
//! element type, writer, user metadata and schema; the record count aside) and which agree
//! on having a stream metadata companion are **grouped** until the next would take the
//! group past the target; a group of two or more is rewritten as one shard
//! `shards/<work_id>/<n:08>.glm` (`n` counts the rewritten shards from 0), with the first
//! shard's metadata, a group of one is kept. A stream group's documents are concatenated
//! (its reference's element count is the sum), and its companions, when the shards have
//! them, are concatenated into `shards/<work_id>/<n:08>.meta.glm`.
//!
//! ArrayRecord shards are kept, not rewritten as native shards: their point in a root is
//! that the `array_record` package, TFDS and Grain read the very files, which a native
//! rewrite would take away; and they are usually large already (see `docs/publication.md`,
//! "Compaction").
//!
//! Reading is sequential, by the snapshot reader's in-order runs
//! ([`Dataset::read_in_order`]), handed over a two-run channel to the shard writer
//! ([`Root::try_write_shard`]'s path) on a blocking thread: memory is two runs of about 1
//! MiB, the writer's batches and the indexes of the shards opened, never an output shard of
//! records. The writes are create-only and deterministic (the same plan writes the same
//! bytes), so running the same compaction again finds identical objects and the identical
//! publication request already published.

use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::Bytes;
use guideloom_format::{AsyncShard, Run, RunBudget, ShardMetadata};
use tokio::sync::mpsc;

use super::Root;
use crate::error::{Error, Result};
use crate::key::check_name;
use crate::manifest::{
    Checksum, CompanionRef, PublishMode, ShardFormat, ShardRef, StreamRef, shard_key,
    stream_meta_key,
};
use crate::opened::OpenedShard;
use crate::publication::{PublicationOptions, PublishOutcome, PublishRequest};
use crate::root::Dataset;
use crate::shards;
use crate::snapshot_log::Snapshot;

/// Default [`CompactRequest::target_shard_bytes`]: 256 MiB.
pub const DEFAULT_TARGET_SHARD_BYTES: u64 = 256 << 20;

/// Runs of records in flight between the reader and the writer's thread.
const RUNS_IN_FLIGHT: usize = 2;

/// What to compact into: the new snapshot's id, the target shard size, the work id of the
/// rewritten shards, and whether to write at all.
///
/// ```
/// use guideloom_publish::{CompactRequest, DEFAULT_TARGET_SHARD_BYTES};
///
/// let request = CompactRequest::new("run-001-compact").with_target_shard_bytes(64 << 20);
/// assert_eq!(request.work_id(), "compact-run-001-compact");
/// assert_eq!(CompactRequest::new("x").target_shard_bytes, DEFAULT_TARGET_SHARD_BYTES);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompactRequest {
    /// The id of the new (full) snapshot.
    pub snapshot_id: String,
    /// The size shards are grouped up to (and kept from, when already that large).
    pub target_shard_bytes: u64,
    /// The work id of the rewritten shards; `None`: `compact-<snapshot_id>`.
    pub work_id: Option<String>,
    /// Plan only: open the small shards to group them, write nothing.
    pub dry_run: bool,
    /// How the new snapshot is published.
    pub publication: PublicationOptions,
}

impl CompactRequest {
    /// A compaction into snapshot `snapshot_id` with the defaults.
    pub fn new(snapshot_id: impl Into<String>) -> Self {
        CompactRequest {
            snapshot_id: snapshot_id.into(),
            target_shard_bytes: DEFAULT_TARGET_SHARD_BYTES,
            work_id: None,
            dry_run: false,
            publication: PublicationOptions::default(),
        }
    }

    /// Groups shards up to `bytes`.
    pub fn with_target_shard_bytes(mut self, bytes: u64) -> Self {
        self.target_shard_bytes = bytes;
        self
    }

    /// Writes the rewritten shards under `work_id`.
    pub fn with_work_id(mut self, work_id: impl Into<String>) -> Self {
        self.work_id = Some(work_id.into());
        self
    }

    /// Plans without writing.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The work id of the rewritten shards: the one given, else `compact-<snapshot_id>`.
    pub fn work_id(&self) -> String {
        self.work_id
            .clone()
            .unwrap_or_else(|| format!("compact-{}", self.snapshot_id))
    }
}

/// One shard of a compacted snapshot, as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlannedShard {
    /// Source shard `source` referenced as it is.
    Kept {
        /// Its position in the source snapshot.
        source: usize,
        /// Its key.
        key: String,
        /// Its size.
        bytes: u64,
        /// Its records.
        records: u64,
    },
    /// Source shards `sources` rewritten as one shard at `key`.
    Rewritten {
        /// Their positions in the source snapshot (consecutive).
        sources: Range<usize>,
        /// The key of the new shard.
        key: String,
        /// The source shards' bytes (the new shard is about as large, less their
        /// per-shard overhead).
        input_bytes: u64,
        /// Their records.
        records: u64,
    },
}

impl PlannedShard {
    /// The source shards it comes from.
    pub fn sources(&self) -> Range<usize> {
        match self {
            PlannedShard::Kept { source, .. } => *source..*source + 1,
            PlannedShard::Rewritten { sources, .. } => sources.clone(),
        }
    }

    /// Its key in the new snapshot.
    pub fn key(&self) -> &str {
        match self {
            PlannedShard::Kept { key, .. } | PlannedShard::Rewritten { key, .. } => key,
        }
    }
}

/// What [`Root::compact`] did (or, for a dry run, would do).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Compacted {
    /// The source snapshot's id.
    pub source: String,
    /// The new snapshot's id.
    pub snapshot_id: String,
    /// The new snapshot (`None` for a dry run).
    pub snapshot: Option<Snapshot>,
    /// Whether this call committed it or an identical request had (`None` for a dry run).
    pub outcome: Option<PublishOutcome>,
    /// The plan, one entry per shard of the new snapshot.
    pub plan: Vec<PlannedShard>,
    /// Shards in the source snapshot.
    pub input_shards: usize,
    /// Their bytes.
    pub input_bytes: u64,
    /// Shards in the new snapshot.
    pub output_shards: usize,
    /// Their bytes (for a dry run: the source bytes they come from).
    pub output_bytes: u64,
    /// Bytes of the rewritten shards written by this call (0 for a dry run; identical
    /// objects found from an earlier run count too).
    pub written_bytes: u64,
    /// Records (the same in both snapshots).
    pub records: u64,
    /// Wall time of the call.
    pub elapsed: Duration,
}

/// Equal for shards that may share one rewritten shard: the metadata but its record count,
/// and whether a stream companion comes along.
#[derive(Debug, Clone, PartialEq)]
struct GroupKey {
    metadata: ShardMetadata,
    companion: bool,
}

impl Root {
    /// Rewrites snapshot `source` (`None`: the latest) into shards of about
    /// `request.target_shard_bytes` and publishes them as the **full** snapshot
    /// `request.snapshot_id`, record for record identical (order, bytes, count, schema,
    /// record format and kind). Shards already that large, ArrayRecord files and groups of
    /// one are referenced as they are; consecutive native shards of equal metadata are
    /// concatenated (stream shards' documents and companions too). See the module
    /// documentation of `root/compact.rs` and `docs/publication.md`, "Compaction".
    ///
    /// Running the same compaction again (same source, id, target and work id) is idempotent:
    /// the create-only writes find identical bytes and the publication finds its identical
    /// request ([`PublishOutcome::AlreadyPublished`]). A missing source is
    /// [`Error::NotFound`]; with `source` `None`, a latest snapshot that is the target id
    /// already is [`Error::InvalidArgument`] (name the source to run again).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::ShardMetadata;
    /// use guideloom_publish::{CompactRequest, PublicationOptions, PublishMode, PublishRequest, Root};
    ///
    /// let root = Root::open("memory://compact-doc", &Default::default(), Default::default())?;
    /// let mut shards = Vec::new();
    /// for n in 0..10u8 {
    ///     let records = [vec![n; 3], vec![n; 5]];
    ///     shards.push(root.write_shard("w", n.into(), ShardMetadata::new("raw", "documents"), records).await?);
    /// }
    /// let request = PublishRequest { dataset_id: "d".into(), snapshot_id: "s1".into(), shards,
    ///                                mode: PublishMode::Full, schema: None };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    ///
    /// let done = root.compact(Some("s1"), &CompactRequest::new("s1-compact")).await?;
    /// assert_eq!((done.input_shards, done.output_shards, done.records), (10, 1, 20));
    /// let reader = root.open_latest().await?;
    /// assert_eq!(&reader.get_async(19).await?[..], &[9u8; 5]);
    /// # Ok(()) }
    /// ```
    pub async fn compact(
        &self,
        source: Option<&str>,
        request: &CompactRequest,
    ) -> Result<Compacted> {
        let started = Instant::now();
        check_name("snapshot id", &request.snapshot_id)?;
        let work_id = request.work_id();
        check_name("work id", &work_id)?;
        let target = request.target_shard_bytes;
        let limit = self.options.max_encoded_shard_bytes;
        if target == 0 || target > limit {
            return Err(Error::invalid(format!(
                "target shard size {target} bytes: it must be 1 to {limit} (the root's \
                 largest encoded shard)"
            )));
        }
        let snapshot = match source {
            Some(id) => self.snapshot(id).await?,
            None => {
                let latest = self.latest().await?;
                if latest.id() == request.snapshot_id {
                    return Err(Error::invalid(format!(
                        "the latest snapshot is {} already, the compaction's own id; name the \
                         source snapshot to run the compaction again",
                        latest.id()
                    )));
                }
                latest
            }
        };
        let reader = self.reader(snapshot.clone());
        let plan = plan(&reader, target, &work_id).await?;
        let shards = snapshot.shards();
        let input_bytes = shards.iter().map(|s| s.size).sum();
        let mut result = Compacted {
            source: snapshot.id().to_owned(),
            snapshot_id: request.snapshot_id.clone(),
            snapshot: None,
            outcome: None,
            output_shards: plan.len(),
            output_bytes: 0,
            written_bytes: 0,
            input_shards: shards.len(),
            input_bytes,
            records: snapshot.total_records(),
            plan,
            elapsed: Duration::ZERO,
        };
        if request.dry_run {
            result.output_bytes = input_bytes;
            result.elapsed = started.elapsed();
            return Ok(result);
        }
        let mut refs = Vec::with_capacity(result.plan.len());
        let mut n = 0u64;
        for planned in &result.plan {
            match planned {
                PlannedShard::Kept { source, .. } => refs.push(shards[*source].clone()),
                PlannedShard::Rewritten { sources, .. } => {
                    let written = self.rewrite(&reader, sources.clone(), &work_id, n).await?;
                    n += 1;
                    result.written_bytes += written.size;
                    result.written_bytes += written
                        .stream
                        .as_ref()
                        .and_then(|s| s.meta.as_ref())
                        .map_or(0, |m| m.size);
                    refs.push(written);
                }
            }
        }
        result.output_bytes = refs.iter().map(|r| r.size).sum();
        let identity = self.identity().await?;
        let publish = PublishRequest {
            dataset_id: identity.dataset_id,
            snapshot_id: request.snapshot_id.clone(),
            shards: refs,
            mode: PublishMode::Full,
            schema: snapshot.manifest.schema.clone(),
        };
        let published = self.publish(&publish, &request.publication).await?;
        result.snapshot = Some(published.snapshot);
        result.outcome = Some(published.outcome);
        result.elapsed = started.elapsed();
        Ok(result)
    }

    /// Writes source shards `sources` of `reader`'s snapshot as shard `n` of `work_id`
    /// (and their companions as its companion), returning its reference.
    async fn rewrite(
        &self,
        reader: &Dataset,
        sources: Range<usize>,
        work_id: &str,
        n: u64,
    ) -> Result<ShardRef> {
        let refs = &reader.snapshot().shards()[sources.clone()];
        let metadata = group_key(reader, sources.start).await?.metadata;
        let first: u64 = reader.snapshot().shards()[..sources.start]
            .iter()
            .map(|s| s.record_count)
            .sum();
        let count: u64 = refs.iter().map(|s| s.record_count).sum();
        let key = shard_key(work_id, n);
        let (tx, rx) = mpsc::channel(RUNS_IN_FLIGHT);
        let read = async move {
            let mut runs = match reader.read_in_order(first..first + count, RunBudget::default()) {
                Ok(runs) => runs,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            while let Some(run) = runs.next_run().await {
                if tx.send(run.map(|r| r.records)).await.is_err() {
                    return;
                }
            }
        };
        let mut shard = self.write_from(key, metadata, rx, read).await?;
        if let Some(first_stream) = refs[0].stream.as_ref() {
            let elements = refs
                .iter()
                .map(|r| r.stream.as_ref().map_or(0, |s| s.elements))
                .sum();
            let meta = match first_stream.meta {
                Some(_) => Some(self.rewrite_companions(reader, refs, work_id, n).await?),
                None => None,
            };
            shard.stream = Some(StreamRef {
                element: first_stream.element.clone(),
                elements,
                meta,
            });
        }
        Ok(shard)
    }

    /// Concatenates the metadata companions of stream shards `refs` into the companion of
    /// shard `n` of `work_id`, with the first companion's metadata.
    async fn rewrite_companions(
        &self,
        reader: &Dataset,
        refs: &[ShardRef],
        work_id: &str,
        n: u64,
    ) -> Result<CompanionRef> {
        let metadata = {
            let first = open_companion(reader, &refs[0]).await?;
            let mut metadata = first.metadata().clone();
            metadata.records = 0;
            metadata
        };
        let (tx, rx) = mpsc::channel(RUNS_IN_FLIGHT);
        let read = async move {
            for r in refs {
                if let Err(e) = send_companion(reader, r, &companion_of(r), &tx).await {
                    // The writer stopped (its error is the one returned) or reading failed.
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        };
        let key = stream_meta_key(work_id, n);
        let written = self.write_from(key, metadata, rx, read).await?;
        Ok(CompanionRef {
            key: written.key,
            size: written.size,
            checksum: written.checksum,
        })
    }

    /// Writes the records `rx` receives (sent by `read`, run concurrently) create-only at
    /// `key` with `metadata`: the shard writer's path, on a blocking thread that pulls the
    /// records as they arrive. A read error stops the write (nothing appears under `key`)
    /// and is returned.
    async fn write_from(
        &self,
        key: String,
        metadata: ShardMetadata,
        rx: mpsc::Receiver<Result<Vec<Bytes>>>,
        read: impl Future<Output = ()>,
    ) -> Result<ShardRef> {
        let store = self.store.clone();
        let options = self.shard_write();
        let handle = tokio::runtime::Handle::current();
        let write = tokio::task::spawn_blocking(move || {
            let records = Received {
                rx,
                run: Vec::new().into_iter(),
            };
            handle.block_on(shards::try_write_key(
                &*store, &options, key, metadata, records,
            ))
        });
        let (written, ()) = futures::join!(write, read);
        match written {
            Ok(written) => written.and_then(|read| read),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Runtime {
                source: std::io::Error::other(e),
            }),
        }
    }
}

/// The records a [`mpsc::Receiver`] of runs receives, for a synchronous writer on a thread
/// that may block (a `spawn_blocking` thread; never an executor's worker).
struct Received {
    rx: mpsc::Receiver<Result<Vec<Bytes>>>,
    run: std::vec::IntoIter<Bytes>,
}

impl Iterator for Received {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Result<Bytes>> {
        loop {
            if let Some(record) = self.run.next() {
                return Some(Ok(record));
            }
            // Inside the writer's `Handle::block_on`: tokio's `blocking_recv` refuses a
            // runtime context, so the thread is parked by futures' executor instead.
            match futures::executor::block_on(self.rx.recv())? {
                Ok(run) => self.run = run.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// The companion reference of stream shard `r` (which the plan grouped with companions).
fn companion_of(r: &ShardRef) -> Option<CompanionRef> {
    r.stream.as_ref().and_then(|s| s.meta.clone())
}

/// Sends the records of stream shard `r`'s companion over `tx`, in runs.
async fn send_companion(
    reader: &Dataset,
    r: &ShardRef,
    meta: &Option<CompanionRef>,
    tx: &mpsc::Sender<Result<Vec<Bytes>>>,
) -> Result<()> {
    let Some(meta) = meta else {
        return Err(Error::invalid(format!(
            "stream shard {:?} has no metadata companion, unlike the shards it is grouped with",
            r.key
        )));
    };
    let shard = OpenedShard::Native(open_companion(reader, r).await?);
    let len = shard.len();
    let mut next = 0;
    while next < len {
        let piece = Run {
            shard: 0,
            first: next,
            count: len - next,
        };
        let run = shard.next_run(piece, RunBudget::default());
        let records = shard.read_run(&meta.key, run.first, run.count).await?;
        next = run.first + run.count;
        if tx.send(Ok(records)).await.is_err() {
            // The writer stopped: its own error is the one reported.
            return Ok(());
        }
    }
    Ok(())
}

/// Opens the metadata companion of stream shard `r`, checking its size and record count
/// against the references.
async fn open_companion(reader: &Dataset, r: &ShardRef) -> Result<AsyncShard> {
    let Some(meta) = companion_of(r) else {
        return Err(Error::invalid(format!(
            "stream shard {:?} has no metadata companion",
            r.key
        )));
    };
    let store = reader.root().store();
    let source = store.open_reader(&meta.key, meta.size).await?;
    let shard = AsyncShard::open(source, reader.read_options())
        .await
        .map_err(|e| Error::shard(&meta.key, e))?;
    if shard.len() != r.record_count {
        return Err(Error::Verification {
            key: meta.key.clone(),
            what: "record count",
            expected: r.record_count.to_string(),
            actual: shard.len().to_string(),
        });
    }
    if let Some(Checksum::FooterCrc32c(want)) = meta.checksum {
        let got = shard.footer().checksum();
        if got != want {
            return Err(Error::Verification {
                key: meta.key.clone(),
                what: "footer checksum",
                expected: format!("{want:08x}"),
                actual: format!("{got:08x}"),
            });
        }
    }
    Ok(shard)
}

/// What shard `i` of `reader`'s snapshot may be grouped by (it is opened: one tail read).
async fn group_key(reader: &Dataset, i: usize) -> Result<GroupKey> {
    let reference = &reader.snapshot().shards()[i];
    let opened = reader.open_shard_async(i).await?;
    let Some(native) = opened.native() else {
        return Err(Error::invalid(format!(
            "shard {:?} is not a native shard",
            reference.key
        )));
    };
    let mut metadata = native.metadata().clone();
    metadata.records = 0;
    Ok(GroupKey {
        metadata,
        companion: reference.stream.as_ref().is_some_and(|s| s.meta.is_some()),
    })
}

/// The compaction plan of `reader`'s snapshot (see the module documentation): opens each
/// native shard smaller than `target`, nothing else.
async fn plan(reader: &Dataset, target: u64, work_id: &str) -> Result<Vec<PlannedShard>> {
    let shards = reader.snapshot().shards();
    let mut plan = Vec::new();
    // The open group: its first shard, its key, its bytes.
    let mut group: Option<(usize, GroupKey, u64)> = None;
    let mut rewritten = 0u64;
    let close = |group: Option<(usize, GroupKey, u64)>,
                 end: usize,
                 plan: &mut Vec<PlannedShard>,
                 rewritten: &mut u64| {
        let Some((start, _, bytes)) = group else {
            return;
        };
        let records = shards[start..end].iter().map(|s| s.record_count).sum();
        if end - start == 1 {
            plan.push(PlannedShard::Kept {
                source: start,
                key: shards[start].key.clone(),
                bytes,
                records,
            });
        } else {
            plan.push(PlannedShard::Rewritten {
                sources: start..end,
                key: shard_key(work_id, *rewritten),
                input_bytes: bytes,
                records,
            });
            *rewritten += 1;
        }
    };
    for (i, shard) in shards.iter().enumerate() {
        if shard.format != ShardFormat::Native || shard.size >= target {
            close(group.take(), i, &mut plan, &mut rewritten);
            plan.push(PlannedShard::Kept {
                source: i,
                key: shard.key.clone(),
                bytes: shard.size,
                records: shard.record_count,
            });
            continue;
        }
        let key = group_key(reader, i).await?;
        let joins = group
            .as_ref()
            .is_some_and(|(_, k, bytes)| *k == key && bytes + shard.size <= target);
        if joins {
            if let Some((_, _, bytes)) = group.as_mut() {
                *bytes += shard.size;
            }
        } else {
            close(group.take(), i, &mut plan, &mut rewritten);
            group = Some((i, key, shard.size));
        }
    }
    close(group.take(), shards.len(), &mut plan, &mut rewritten);
    Ok(plan)
}
