//! Migrating a stream storage into a dataset root: [`stream_to_root`].
//!
//! guideloom has **one token-stream encoding**: the stream snapshot of a dataset root
//! (guideloom-publish: `Root::write_stream_shard`, read with `Dataset::tokens`, `document`,
//! `document_meta`). The chunked [`StreamStorage`] and [`StreamWithMetaStorage`]
//! directories stay readable through their own API, unchanged; this module moves one into a
//! root, once:
//!
//! - a [`StreamWithMetaStorage`] (`shard-N.glm` + `meta-N.glm` pairs): each document becomes
//!   one document of the snapshot with its metadata (re-encoded from its CBOR as a
//!   `ciborium::Value`, so any metadata type reads back as it was written);
//! - a plain [`StreamStorage`] (`shard-N.glm` only) has no document boundaries: each of its
//!   checksummed chunks ([`WriterOptions::stream_chunk_bytes`](crate::WriterOptions::stream_chunk_bytes))
//!   becomes one document of the snapshot — the records its
//!   [`RecordSource`](guideloom_format::RecordSource) reader hands the loader — and it has
//!   no metadata.
//!
//! Either way the tokens are exactly the same, in the same order; source shard `N` becomes
//! shard `shards/<work_id>/N.glm` of the root (and `N.meta.glm`), and the snapshot is
//! published in full. Refused by name, before anything is written
//! ([`ConvertError::Refused`]): a missing or empty directory, a directory of document
//! shards, and shards carrying user metadata (`WriterOptions::user_metadata`), which a
//! stream snapshot's shards do not hold. A read or write failure part-way publishes nothing
//! (shards already written stay unreferenced under `shards/<work_id>/`).
//!
//! The CLI runs it as `guideloom convert --stream-storage DIR ROOT --dataset-id D
//! --snapshot-id S`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use guideloom_publish::Root;
//! use guideloom_storage::StreamWithMetaStorage;
//! use guideloom_storage::convert::{ConvertRequest, stream_to_root};
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path().join("corpus");
//! let storage = StreamWithMetaStorage::<u16, String>::local(&dir);
//! let mut w = storage.sync_writer()?;
//! w.append(&[1, 2, 3], &"a".to_owned())?;
//! w.append(&[], &"empty".to_owned())?;
//! w.append(&[9], &"b".to_owned())?;
//! w.finish()?;
//!
//! let root = Root::open("memory://convert-doc", &Default::default(), Default::default())?;
//! let converted = stream_to_root(&dir, &root, &ConvertRequest::new("corpus", "v1")).await?;
//! assert_eq!((converted.documents, converted.tokens), (3, 4));
//!
//! let dataset = root.open_latest().await?;
//! assert_eq!(&*dataset.tokens_async::<u16>(1..4).await?, &[2, 3, 9]);
//! assert_eq!(&*dataset.document_async::<u16>(2).await?, &[9]);
//! assert_eq!(dataset.document_meta_async::<String>(1).await?, "empty");
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use guideloom_format::KIND_STREAM;
use guideloom_format::{
    Element, Elements, ReadOptions, Run, RunBudget, ShardMetadata, SyncShard, plan_runs,
};
use guideloom_io::{Backend, ErrorKind, SeekIo};
use guideloom_publish::{
    PublicationOptions, PublishMode, PublishRequest, Published, Root, ShardRef,
};

use crate::discovery::{META_PREFIX, SHARD_PREFIX, shard_name};
use crate::{StreamStorage, StreamWithMetaStorage};

/// Documents of a stream-with-meta storage read per batch.
const DOC_BATCH: u64 = 256;

/// What [`stream_to_root`] publishes: the snapshot's ids and the worker id its shards are
/// written under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertRequest {
    /// The dataset (must match the root's `dataset.json`; written on first publication).
    pub dataset_id: String,
    /// The new snapshot's id (unique in the root).
    pub snapshot_id: String,
    /// The worker id the shards are written under: `shards/<work_id>/N.glm`. Default
    /// `"convert"`.
    pub work_id: String,
}

impl ConvertRequest {
    /// Snapshot `snapshot_id` of dataset `dataset_id`, shards under work id `convert`.
    pub fn new(dataset_id: impl Into<String>, snapshot_id: impl Into<String>) -> Self {
        ConvertRequest {
            dataset_id: dataset_id.into(),
            snapshot_id: snapshot_id.into(),
            work_id: "convert".to_owned(),
        }
    }

    /// Sets the work id.
    pub fn work_id(mut self, work_id: impl Into<String>) -> Self {
        self.work_id = work_id.into();
        self
    }
}

/// Which stream storage a directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A [`StreamStorage`]: stream shards only; its chunks become documents.
    Stream,
    /// A [`StreamWithMetaStorage`]: stream shards with `meta-N.glm` companions.
    StreamWithMeta,
}

/// A stream storage directory, as [`inspect`] finds it (from its first shard; every shard
/// is checked again as it is converted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Plain stream or stream with metadata.
    pub kind: SourceKind,
    /// The element type's name (`"u16"`, `"u32"`, ...).
    pub element: String,
}

/// What [`stream_to_root`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The storage converted.
    pub source: Source,
    /// The publication (the snapshot, and whether this call committed it).
    pub published: Published,
    /// Shards written (one per source shard).
    pub shards: u64,
    /// Documents in the snapshot (a plain stream's chunks).
    pub documents: u64,
    /// Tokens (elements) in the snapshot: those of the storage.
    pub tokens: u64,
}

/// Why a conversion failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The directory holds something a stream snapshot cannot represent (or nothing).
    /// Nothing was written.
    #[error("cannot convert {}: {reason}", dir.display())]
    Refused {
        /// The storage directory.
        dir: PathBuf,
        /// What cannot be represented.
        reason: String,
    },
    /// Reading the storage failed.
    #[error(transparent)]
    Source(#[from] guideloom_format::Error),
    /// Writing or publishing into the root failed.
    #[error(transparent)]
    Publish(#[from] guideloom_publish::Error),
}

impl ConvertError {
    /// What went wrong, in one word: [`Refused`](Self::Refused) is
    /// [`Unsupported`](ErrorKind::Unsupported), the others by their own kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConvertError::Refused { .. } => ErrorKind::Unsupported,
            ConvertError::Source(e) => e.kind(),
            ConvertError::Publish(e) => e.kind(),
        }
    }
}

fn refused(dir: &Path, reason: impl Into<String>) -> ConvertError {
    ConvertError::Refused {
        dir: dir.to_owned(),
        reason: reason.into(),
    }
}

/// Opens local shard `name` of `dir`; `None` when it does not exist.
fn open_local(dir: &Path, name: &str) -> Result<Option<SyncShard>, ConvertError> {
    let path = dir.join(name);
    let reader = match SeekIo::new().open(&path) {
        Ok(r) => r,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(guideloom_format::Error::from(e).into()),
    };
    Ok(Some(SyncShard::open(reader, &ReadOptions::default())?))
}

/// Refuses a shard with user metadata: a stream snapshot's shards carry none.
fn check_no_user(dir: &Path, name: &str, metadata: &ShardMetadata) -> Result<(), ConvertError> {
    if metadata.user.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = metadata.user.keys().map(String::as_str).collect();
    Err(refused(
        dir,
        format!(
            "{name} carries user metadata (keys {keys:?}), which a stream snapshot's shards \
             do not hold"
        ),
    ))
}

/// What `dir` holds, from its first shard (one tail read each of `shard-000000.glm` and,
/// if present, `meta-000000.glm`), or [`ConvertError::Refused`] naming why it is not a
/// stream storage that converts.
pub fn inspect(dir: &Path) -> Result<Source, ConvertError> {
    let first = shard_name(SHARD_PREFIX, 0);
    let Some(shard) = open_local(dir, &first)? else {
        return Err(refused(
            dir,
            format!("no {first}: not a stream storage, or an empty one (nothing to convert)"),
        ));
    };
    let metadata = shard.metadata();
    let element = match (&metadata.element, metadata.kind == KIND_STREAM) {
        (Some(element), true) => element.clone(),
        _ => {
            return Err(refused(
                dir,
                format!(
                    "{first} holds {}, not a token stream (a document storage is published \
                     with `guideloom write` or the Publisher, not converted)",
                    metadata.describe()
                ),
            ));
        }
    };
    let kind = if dir.join(shard_name(META_PREFIX, 0)).exists() {
        SourceKind::StreamWithMeta
    } else {
        SourceKind::Stream
    };
    Ok(Source { kind, element })
}

/// Converts the stream storage in local directory `dir` (a [`StreamStorage`] or a
/// [`StreamWithMetaStorage`], of any element type) into a stream snapshot of `root`, and
/// publishes it (see the [module docs](self) for what is kept and what is refused).
///
/// The storage is read with its sync readers on the calling task (local files); each
/// source shard is streamed into its root shard (memory: one read of at most 1 MiB or 256
/// documents, and a shard's encoded metadata).
pub async fn stream_to_root(
    dir: &Path,
    root: &Root,
    request: &ConvertRequest,
) -> Result<Converted, ConvertError> {
    let source = inspect(dir)?;
    macro_rules! dispatch {
        ($($t:ty),*) => {
            match source.element.as_str() {
                $(name if name == <$t as Element>::NAME => {
                    convert_typed::<$t>(dir, root, request, source).await
                })*
                other => Err(refused(dir, format!("unknown element type {other:?}"))),
            }
        };
    }
    dispatch!(u8, u16, u32, u64, i32, i64, f32, f64)
}

/// A document's elements, as the root's stream writer takes them.
struct Doc<E: Element>(Elements<E>);

impl<E: Element> AsRef<[E]> for Doc<E> {
    fn as_ref(&self) -> &[E] {
        &self.0
    }
}

async fn convert_typed<E: Element>(
    dir: &Path,
    root: &Root,
    request: &ConvertRequest,
    source: Source,
) -> Result<Converted, ConvertError> {
    let work_id = request.work_id.as_str();
    let mut shards: Vec<ShardRef> = Vec::new();
    let (mut documents, mut tokens) = (0u64, 0u64);
    match source.kind {
        SourceKind::Stream => {
            let reader = StreamStorage::<E>::local(dir).sync_reader()?;
            for shard in reader.shards() {
                check_no_user(dir, shard.name(), shard.metadata())?;
            }
            for (n, shard) in reader.shards().iter().enumerate() {
                let whole = Run {
                    shard: n,
                    first: 0,
                    count: shard.len(),
                };
                let chunks = plan_runs(shard.index(), whole, RunBudget::default()).flat_map(
                    |run| match shard.read_run(run.first, run.count) {
                        Ok(bufs) => bufs
                            .into_iter()
                            .map(|b| Ok(Doc(Elements::<E>::from_le_bytes(b))))
                            .collect::<Vec<_>>(),
                        Err(e) => vec![Err(e)],
                    },
                );
                let written = root
                    .try_write_stream_shard(work_id, n as u64, chunks)
                    .await??;
                documents += written.record_count;
                tokens += written.stream.as_ref().map_or(0, |s| s.elements);
                shards.push(written);
            }
        }
        SourceKind::StreamWithMeta => {
            let storage = StreamWithMetaStorage::<E, ciborium::Value>::local(dir);
            let reader = storage.sync_reader()?;
            for (n, shard) in reader.stream().shards().iter().enumerate() {
                check_no_user(dir, shard.name(), shard.metadata())?;
                let meta = open_local(dir, &shard_name(META_PREFIX, n as u64))?;
                if let Some(meta) = meta {
                    check_no_user(dir, meta.name(), meta.metadata())?;
                }
            }
            for n in 0..reader.docs().shard_count() {
                let range = reader.docs().bounds(n);
                let firsts =
                    (range.start..range.end).filter(|i| (i - range.start) % DOC_BATCH == 0);
                let batches = firsts.flat_map(|first| {
                    let indices: Vec<u64> = (first..(first + DOC_BATCH).min(range.end)).collect();
                    match reader.read_docs(&indices) {
                        Ok(docs) => docs
                            .into_iter()
                            .map(|(d, m)| Ok((Doc(d), m)))
                            .collect::<Vec<_>>(),
                        Err(e) => vec![Err(e)],
                    }
                });
                let written = root
                    .try_write_stream_shard_with_meta(work_id, n as u64, batches)
                    .await??;
                documents += written.record_count;
                tokens += written.stream.as_ref().map_or(0, |s| s.elements);
                shards.push(written);
            }
        }
    }
    let count = shards.len() as u64;
    let publish = PublishRequest {
        dataset_id: request.dataset_id.clone(),
        snapshot_id: request.snapshot_id.clone(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    let published = root
        .publish(&publish, &PublicationOptions::default())
        .await?;
    Ok(Converted {
        source,
        published,
        shards: count,
        documents,
        tokens,
    })
}
