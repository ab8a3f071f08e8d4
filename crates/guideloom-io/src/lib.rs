//! Byte-range IO for guideloom.
//!
//! This crate is the bottom layer: everything above reads bytes through it. It defines
//! - the reader traits, [`SyncReader`] and [`AsyncReader`], whose contract is exact-length
//!   reads of `(offset, len)` returning [`bytes::Bytes`];
//! - the [`Backend`] trait, which opens readers for locations of its own type;
//! - range [coalescing](coalesce) and [request accounting](stats) shared by backends;
//! - the local backends (see the `backends` section below) and, behind the `conformance`
//!   feature, a conformance kit for backend authors.
//!
//! See `docs/io.md` in the repository for how to choose a backend and write your own.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
pub mod coalesce;
#[cfg(any(test, feature = "conformance"))]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
pub mod error;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod local;
#[cfg(feature = "object-store")]
#[cfg_attr(docsrs, doc(cfg(feature = "object-store")))]
pub mod objstore;
pub mod reader;
pub mod stats;

pub use backend::{Backend, Capabilities, DynBackend, Location};
pub use coalesce::CoalescePolicy;
pub use error::{BoxError, Error, Result};
#[cfg(feature = "mmap")]
pub use local::MmapIo;
pub use local::{PreadIo, SeekIo};
pub use reader::{AsyncReader, AsyncReaderExt, SyncReader, SyncReaderExt, Tail};
pub use stats::{CountingReader, RequestStats, StatsSnapshot};
