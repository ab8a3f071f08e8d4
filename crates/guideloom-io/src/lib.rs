//! Byte-range IO for guideloom.
//!
//! This crate is the bottom layer: everything above reads bytes through it. It defines
//! - the reader traits, [`SyncReader`] and [`AsyncReader`], whose contract is exact-length
//!   reads of `(offset, len)` returning [`bytes::Bytes`];
//! - the [`Backend`] trait, which opens readers for locations of its own type;
//! - range [coalescing](coalesce), [request accounting](stats) and the [retry policy](retry)
//!   shared by backends and by every remote client above them;
//! - the local backends (see the `backends` section below) and, behind the `conformance`
//!   feature, a conformance kit for backend authors.
//!
//! See `docs/io.md` in the repository for how to choose a backend and write your own.
//!
//! # Backends
//!
//! | backend | feature | sync | async | zero-copy | platform |
//! |---|---|---|---|---|---|
//! | [`SeekIo`]: `seek` + `read` under a `Mutex<File>` | always | yes | yes | no | all |
//! | [`PreadIo`]: `pread(2)`, parallel reads on one reader | always | yes | yes | no | unix |
//! | `MmapIo`: slices of one shared mapping | `mmap` (default) | yes | yes | yes | unix, Windows |
//! | `UringIo`: batches in flight on an io_uring; `O_DIRECT` cold reads | `uring` | yes | yes | no | Linux |
//! | `HttpIo`: HTTP `Range` requests | `http` | via `BlockingIo` | yes | no | all |
//! | `ObjectStoreIo`: S3, GCS, Azure, any `ObjectStore` | `object-store`, `s3`, … | via `BlockingIo` | yes | no | all |
//!
//! The local backends open a [`PathBuf`](std::path::PathBuf); their async readers run file
//! system calls on tokio's blocking pool. See [`local`] for the details and the `MmapIo`
//! truncation risk.
//!
//! `SeekIo`, the portable default:
//! ```
//! use guideloom_io::{Backend, SeekIo, SyncReader, SyncReaderExt};
//! # fn main() -> guideloom_io::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("shard.bin");
//! # std::fs::write(&path, b"header|record-1|record-2|footer").unwrap();
//! let reader = SeekIo::new().open(&path)?;
//! assert_eq!(&reader.read(7, 8)?[..], b"record-1");
//! assert_eq!(reader.read_all()?.len() as u64, reader.size()?);
//! # Ok(()) }
//! ```
//!
//! `PreadIo`, one reader shared by many threads (unix):
//! ```
//! # #[cfg(unix)] {
//! use std::sync::Arc;
//! use guideloom_io::{Backend, PreadIo, SyncReader};
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("shard.bin");
//! # std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
//! let reader: Arc<dyn SyncReader> = Arc::from(PreadIo::new().open(&path).unwrap());
//! std::thread::scope(|s| {
//!     for t in 0..4u8 {
//!         let reader = Arc::clone(&reader);
//!         s.spawn(move || {
//!             let b = reader.read(u64::from(t) * 64, 64).unwrap();
//!             assert_eq!(b[0], t * 64);
//!         });
//!     }
//! });
//! # }
//! ```
//!
//! `MmapIo`, zero-copy buffers that keep the mapping alive, here from async code:
//! ```
//! # #[cfg(feature = "mmap")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> guideloom_io::Result<()> {
//! use guideloom_io::{AsyncReader, Backend, MmapIo};
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("shard.bin");
//! # std::fs::write(&path, b"header|record-1|record-2|footer").unwrap();
//! let reader = MmapIo::new().open_async(&path).await?;
//! let tail = reader.read_tail(6).await?; // size and last bytes in one call
//! let records = reader.read_ranges(&[7..15, 16..24]).await?;
//! reader.close().await?;
//! assert_eq!((tail.size, &tail.bytes[..]), (31, &b"footer"[..]));
//! assert_eq!(&records[1][..], b"record-2"); // still valid after close
//! # Ok(()) }
//! # #[cfg(not(feature = "mmap"))]
//! # fn main() {}
//! ```
//!
//! Backends are used through trait objects by the layers above:
//! ```
//! use std::path::PathBuf;
//! use guideloom_io::{DynBackend, PreadIo, SeekIo};
//!
//! let backend: DynBackend<PathBuf> =
//!     if cfg!(unix) { std::sync::Arc::new(PreadIo::new()) } else { std::sync::Arc::new(SeekIo::new()) };
//! assert!(backend.is_supported());
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
pub mod bridge;
pub mod coalesce;
#[cfg(any(test, feature = "conformance"))]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
pub mod error;
pub use error::cause;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod local;
#[cfg(feature = "object-store")]
#[cfg_attr(docsrs, doc(cfg(feature = "object-store")))]
pub mod objstore;
#[cfg(any(feature = "http", feature = "object-store"))]
mod pin;
pub mod reader;
pub mod retry;
pub mod stats;
#[cfg(feature = "cloud-tls")]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "s3", feature = "gcs", feature = "azure")))
)]
pub mod tls;

pub use backend::{Backend, Capabilities, DynBackend, Location};
pub use cause::{Cause, CauseKind, Request, brief, cause_of, mentions, request_of};
pub use coalesce::CoalescePolicy;
pub use error::{BoxError, Error, ErrorKind, Result, TimeoutError, TimeoutKind};
#[cfg(feature = "mmap")]
pub use local::MmapIo;
#[cfg(all(feature = "uring", target_os = "linux"))]
pub use local::UringIo;
pub use local::{PreadIo, SeekIo};
pub use reader::{AsyncReader, AsyncReaderExt, SyncReader, SyncReaderExt, Tail};
pub use retry::RetryPolicy;
pub use stats::{CountingReader, RequestStats, StatsSnapshot};
