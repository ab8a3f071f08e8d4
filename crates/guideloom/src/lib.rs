//! guideloom: sharded datasets of records for training and evaluating ML models, in one
//! dependency.
//!
//! - [`io`], [`format`](mod@format), [`publish`]: the lower crates, re-exported whole
//!   (`guideloom-io`, `guideloom-format`, `guideloom-publish`); their common types are also
//!   at this crate's root.
//! - [`Dataset`] (sync; owns a tokio runtime) and [`AsyncDataset`]: open any root URI and
//!   read records by index, in order, by range, typed through serde, with annotations and
//!   snapshot selection.
//! - [`Publisher`] (sync; owns a tokio runtime): write shards of serde records, publish
//!   snapshots and annotation sets without async code.
//! - [`Loader`]: the training-loop reader — deterministic shuffle from `(seed, epoch)`,
//!   batches, worker threads, bounded prefetch, ranks, O(1) resume. See [`loader`] and
//!   `docs/loader.md`.
//!
//! Features: `mmap` (default) for [`io::MmapIo`]; `http` for `io::http::HttpIo` and read-only
//! `http(s)://` dataset roots;
//! `object-store` for `io::objstore::ObjectStoreIo`; `s3` for `s3://` roots; `blocking` for
//! `io::blocking::BlockingIo`; `conformance` for the IO conformance kit.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

pub mod dataset;

/// The user guide (`docs/guide.md`); its code blocks run as doctests.
#[doc = include_str!("../../../docs/guide.md")]
pub mod guide {
    /// The loader specification (`docs/loader.md`); its code blocks run as doctests.
    #[doc = include_str!("../../../docs/loader.md")]
    pub mod loader {}
}
pub mod error;
pub mod loader;

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
pub mod order;
pub mod publisher;

/// Byte-range IO (`guideloom-io`): reader and backend traits, local backends and, behind
/// features, HTTP and object-store backends and the conformance kit.
pub mod io {
    pub use guideloom_io::*;
}

/// The shard format, record formats and storages (`guideloom-format`).
pub mod format {
    pub use guideloom_format::*;
}

/// Dataset roots: publication, snapshots, annotations, the scheme registry
/// (`guideloom-publish`).
pub mod publish {
    pub use guideloom_publish::*;
}

/// Record buffers (re-exported so users need no direct `bytes` dependency).
pub use bytes::{self, Bytes};
pub use dataset::{AsyncDataset, Dataset, DatasetOptions};
pub use error::{BoxError, Error, Result};
pub use loader::{
    Batch, Epoch, EpochPlan, Equalize, Loader, LoaderOptions, LoaderState, MemorySource,
    RecordSource,
};
pub use order::ShuffleMode;
pub use publisher::Publisher;

pub use guideloom_format::{
    CborFormat, DocumentStorage, Format, RawFormat, ReadOptions, ShardMetadata, StreamStorage,
    StreamWithMetaStorage, WriterOptions,
};
#[cfg(feature = "mmap")]
pub use guideloom_io::MmapIo;
pub use guideloom_io::{AsyncReader, Backend, Location, PreadIo, RetryPolicy, SeekIo, SyncReader};
pub use guideloom_publish::{
    AnnotationEntry, AnnotationSet, PublicationOptions, PublishMode, PublishRequest, Registry,
    Root, RootOptions, ShardRef, Snapshot, StoreOptions,
};
