//! guideloom: sharded datasets of records for training and evaluating ML models, in one
//! dependency.
//!
//! Everything a dataset user needs is at this crate's root, each item at one path:
//!
//! - **Read**: [`Dataset`] opens any root URI ([`DatasetOptions`]: snapshot,
//!   [`StoreOptions`], [`RootOptions`], [`ReadOptions`], [`Registry`]) and reads records by
//!   index, in order ([`Records`]), by range, typed through serde, as tokens, with
//!   annotations ([`AnnotationSet`]) and snapshot selection ([`Snapshot`]): every read in a
//!   synchronous form (`get`) and an async twin (`get_async`), on one type.
//! - **Write**: [`Publisher`] (sync) writes shards of serde records
//!   ([`ShardRef`]), publishes snapshots ([`PublishMode`], [`PublishRequest`],
//!   [`PublicationOptions`]) and annotation sets ([`AnnotationEntry`], [`RetryPolicy`])
//!   without async code; in async code, [`resolve_root`] gives the [`Root`] and
//!   [`write_cbor_shard`] / [`publish_cbor`] write serde records to it.
//! - **Train**: [`Loader`] ([`LoaderOptions`], [`ShuffleMode`], [`Equalize`]) yields
//!   [`Batch`]es of an [`Epoch`] — deterministic shuffle from `(seed, epoch)`, worker threads,
//!   bounded prefetch, ranks, O(1) resume from a [`LoaderState`] — from any [`RecordSource`]
//!   (a [`Dataset`], a [`MemorySource`], a storage's reader). The order itself, specified bit
//!   for bit in `docs/loader.md`, is the [`order`] module.
//! - **Records and storages**: the record [`Format`]s ([`CborFormat`], [`RawFormat`]),
//!   [`ShardMetadata`], and plain storage directories ([`DocumentStorage`],
//!   [`StreamStorage`], [`StreamWithMetaStorage`], [`WriterOptions`]).
//! - **IO**: the traits a backend implements ([`Backend`], [`Location`], [`SyncReader`],
//!   [`AsyncReader`]) and the local backends ([`SeekIo`], [`PreadIo`], [`MmapIo`]).
//! - **Errors**: one [`enum@Error`] ([`Result`], [`BoxError`]) wrapping the lower crates'
//!   errors unchanged; [`Error::kind`] says what went wrong in one word ([`ErrorKind`]).
//!
//! # The lower layers: escape hatches
//!
//! [`io`], [`format`](mod@format), [`publish`] and [`storage`] are the crates this one is
//! built on (`guideloom-io`, `guideloom-format`, `guideloom-publish`, `guideloom-storage`),
//! re-exported whole and as they are, for backend authors and advanced use: the conformance
//! kit, HTTP and object-store backends, shard readers and writers, the root store trait, the
//! storages' readers and writers and their migration into a root (`storage::convert`), the
//! lower crates' error enums for matching. They are not this crate's documented API: what the root re-exports from
//! them is the everyday part, and where an item is at the root, use it from there.
//!
//! Features: `http` for `io::http::HttpIo` and read-only `http(s)://` dataset roots; `s3`,
//! `gcs`, `azure` for `s3://`, `gs://`, `az://` roots (`aws-profile` for the full AWS
//! credential chain); `blocking` for `io::blocking::BlockingIo`; `conformance` for the IO
//! conformance kit. Memory-mapped local reads ([`MmapIo`]) and the object-store backend
//! (`io::objstore::ObjectStoreIo`) are always built: dataset roots read through them.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod error;
mod loader;
mod publisher;

/// The user guide (`docs/guide.md`); its code blocks run as doctests.
#[doc = include_str!("../../../docs/guide.md")]
pub mod guide {
    /// The loader specification (`docs/loader.md`); its code blocks run as doctests.
    #[doc = include_str!("../../../docs/loader.md")]
    pub mod loader {}
}

pub mod order {
    //! The [`Loader`](crate::Loader)'s sample order, specified bit for bit in `docs/loader.md`
    //! (the [`guide::loader`](crate::guide::loader) page), for reproducing it elsewhere or
    //! planning an epoch without IO.
    //!
    //! The order of an epoch is a pure function of `(seed, epoch, position)`: [`EpochOrder`]
    //! maps a global position to a record index (a keyed [`Permutation`] built from [`mix64`]
    //! and [`derive_key`], shard-aware for [`ShuffleMode::ShardWindow`]); [`EpochPlan`] cuts
    //! the positions of an epoch ([`epoch_len`]) into one rank's batches.
    //!
    //! ```
    //! use guideloom::ShuffleMode;
    //! use guideloom::order::EpochOrder;
    //!
    //! let order = EpochOrder::new(ShuffleMode::Full, 0, 0, 10, None);
    //! let records: Vec<u64> = (0..10).map(|p| order.record(p)).collect();
    //! assert_eq!(records, [2, 9, 7, 8, 3, 0, 4, 5, 1, 6]); // the same on every machine
    //! ```

    #[cfg(doc)]
    use crate::ShuffleMode;

    pub use crate::loader::order::{
        DEFAULT_WINDOW, EpochOrder, FEISTEL_ROUNDS, GOLDEN, Permutation, SALT_RECORDS, SALT_SHARDS,
        derive_key, mix64,
    };
    pub use crate::loader::{EpochPlan, MAX_PHASES, SALT_PACK, SALT_SOURCES, epoch_len};
}

/// `guideloom-io`, the byte-range IO layer, whole: for backend authors (the conformance kit,
/// `error::check_range`) and advanced use (HTTP and object-store backends, `BlockingIo`,
/// request counters). Not the documented everyday API: its traits and local backends are at
/// this crate's root.
pub use guideloom_io as io;

/// `guideloom-format`, the shard format layer (the codec), whole: for advanced use (shard
/// readers and writers, the footer and index, the shard table and run planner, its `Error`
/// for matching). Not the documented everyday API: the record formats are at this crate's
/// root.
pub use guideloom_format as format;

/// `guideloom-storage`, the storages — directories of numbered shards — whole: their
/// readers and writers (`DocumentReader`, `StreamReader`, ...), `FileSystemDocument` /
/// `FileSystemStream`, shard discovery through any backend, and `convert`, the migration of
/// a stream storage into a root's stream snapshot. Not the documented everyday API: the
/// storages and [`WriterOptions`] are at this crate's root. Their errors are
/// `format::Error` ([`Error::Format`]).
pub use guideloom_storage as storage;

/// `guideloom-publish`, the dataset-root layer, whole: for advanced use (the root store
/// trait and its implementations, the snapshot reader, per-store options, its `Error` for
/// matching, e.g. `publish::Error::NotFound`). Not the documented everyday API: roots,
/// snapshots and publication types are at this crate's root.
pub use guideloom_publish as publish;

/// `guideloom-arrayrecord`, ArrayRecord (Riegeli) files, whole: for reading and writing
/// single ArrayRecord files and matching on its `Error` (the source of
/// `publish::Error::ArrayRecordShard`). Snapshots whose shards are ArrayRecord files are read through
/// [`Dataset`] like any other.
pub use guideloom_arrayrecord as arrayrecord;

/// Record buffers (re-exported so users need no direct `bytes` dependency).
pub use bytes::{self, Bytes};

pub use error::{BoxError, Error, ErrorKind, Result};
pub use loader::order::ShuffleMode;
pub use loader::{
    Batch, DEFAULT_PACK_BUFFER, Epoch, Equalize, Loader, LoaderOptions, LoaderState, MemorySource,
    Mixture, PackOptions, PackedWindow, PackedWindows, Packing, Ramp, Take, TokenWindows,
    WeightSchedule,
};
pub use publisher::{Publisher, publish_cbor, write_cbor_shard};

/// Anything the [`Loader`] can read records from, by index: defined in `guideloom-format`
/// (so the storages' readers implement it too) and re-exported here.
///
/// [`Dataset`] implements it (with `Error = guideloom::Error`), as do the storages' sync
/// readers ([`DocumentReader`](storage::DocumentReader),
/// [`StreamReader`](storage::StreamReader),
/// [`StreamWithMetaReader`](storage::StreamWithMetaReader), with `Error = format::Error`) and
/// [`MemorySource`]. The loader takes any source whose `Error` converts into [`enum@Error`];
/// the shard-window shuffle ([`ShuffleMode::ShardWindow`]) reads its shard bounds.
pub use guideloom_format::RecordSource;
pub use guideloom_format::{
    CborFormat, Element, Elements, Format, RawFormat, ReadOptions, ShardMetadata,
};
pub use guideloom_io::{
    AsyncReader, Backend, Location, MmapIo, PreadIo, RetryPolicy, SeekIo, SyncReader,
};
pub use guideloom_publish::{
    AnnotationEntry, AnnotationSet, Card, CompactRequest, Compacted, Dataset, DatasetOptions,
    GcReport, LocalReads, PublicationOptions, PublishMode, PublishOutcome, PublishRequest,
    Published, ReadAhead, ReadAheadOptions, Records, Registry, RetentionPolicy, Root, RootOptions,
    S3Options, ShardFormat, ShardRef, Snapshot, Split, StorageReport, StoreOptions, StreamLayout,
    StreamRef, TagEntry, resolve_root,
};
pub use guideloom_storage::{DocumentStorage, StreamStorage, StreamWithMetaStorage, WriterOptions};

/// The repository README's Rust example, run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
/// `docs/http.md`'s Rust examples, run (or, where they need a server, compiled) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/http.md")]
pub struct HttpDoctests;
/// `docs/object-store.md`'s Rust examples, run (or, where they need S3, compiled) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/object-store.md")]
pub struct ObjectStoreDoctests;
/// `docs/publication.md`'s Rust examples, run (or, where they need S3, compiled) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/publication.md")]
pub struct PublicationDoctests;
