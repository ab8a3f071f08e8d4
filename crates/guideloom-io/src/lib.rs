//! Byte-range IO for guideloom.
//!
//! This crate is the bottom layer: everything above reads bytes through it. It defines
//! - the reader traits, [`SyncReader`] and [`AsyncReader`], whose contract is exact-length
//!   reads of `(offset, len)` returning [`bytes::Bytes`];
//! - the [`Backend`] trait, which opens readers for locations of its own type;
//! - range [coalescing](coalesce), [request accounting](RequestStats) and the
//!   [retry policy](RetryPolicy) shared by backends and by every remote client above them;
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
//! system calls on tokio's blocking pool. See [Local backends](#local-backends) for the
//! details and `MmapIo` for its truncation risk.
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
//!
//! # Local backends
//!
//! `SeekIo`, `PreadIo` and `MmapIo` open readers for a [`PathBuf`](std::path::PathBuf), learn the file's size once at
//! open (files are immutable objects under the IO contract), and check every range against
//! it: a range past the end is [`Error::OutOfRange`]; a file that shrank under an open reader
//! gives [`Error::ShortRead`] (or, for `MmapIo`, see its `# Risks` section).
//!
//! | backend     | read path                                | concurrent reads            | zero-copy | platform |
//! |-------------|------------------------------------------|-----------------------------|-----------|----------|
//! | [`SeekIo`]  | `seek` + `read` under a `Mutex<File>`    | serialised per reader       | no        | all      |
//! | [`PreadIo`] | `pread(2)` (`FileExt::read_at`)          | parallel, no lock per read  | no        | unix     |
//! | `MmapIo`    | slice of a shared mapping                | parallel, no syscall        | yes       | unix, windows |
//!
//! ## Async readers
//!
//! The async readers of `SeekIo` and `PreadIo` run file system calls (open, read, close)
//! under [`tokio::task::spawn_blocking`], so they never block an executor thread; `size` is
//! answered from the value cached at open. One exception: `PreadIo` first tries a small read
//! (at most [`PreadIo::inline_reads`] bytes) on the calling thread with Linux's
//! `preadv2(RWF_NOWAIT)`, which copies from the page cache or refuses at once rather than wait
//! for I/O; only a refusal goes to the blocking pool. `MmapIo` opens under `spawn_blocking` and then
//! answers reads inline: a read only bumps a reference count and slices, it touches no page
//! (see `MmapIo` for where page faults happen instead).
//!
//! # Why a request failed
//!
//! In words: the cause an error message of a failed remote request leads with.
//!
//! A failed request's own error (object_store's, hyper's) says what happened in the order it
//! was built: the request, the URL, the timing, the status, and last the server's reason (an
//! S3 error document, as raw XML). An error message of the layers above reads the other way
//! round — `<cause>: <what>: <details>`, on one line, each name once:
//!
//! ```text
//! bucket does not exist (NoSuchBucket): s3://bkt/data: get dataset.json: GET http://127.0.0.1:9000/bkt/data/dataset.json: 404 Not Found
//! connection refused: s3://bkt/data: list log: GET http://127.0.0.1:9/bkt?list-type=2&prefix=data%2Flog%2F, after 4 retries in 1.1 s
//! ```
//!
//! - [`cause_of`] finds the reason in an error's source chain, as a typed [`CauseKind`]:
//!   from the types where they say it (object_store's `PermissionDenied`, a transport
//!   error's kind, an OS error's kind), else from the error document's `<Code>` (the S3
//!   protocol's machine-readable reason), else from the HTTP status. Callers match the kind,
//!   never the text.
//! - [`request_of`] finds the failed request ([`Request`]: method, URL, status, retries and
//!   time) in object_store's error, and [`brief`] is the short text of a remote failure for a
//!   message: that request, never the server's raw response body.
//! - [`mentions`] tells whether a message already names an object, so that a context leaves
//!   its own prefix out and each name appears once.
//!
//! [`Error::Remote`] displays itself this way; guideloom-publish's
//! storage errors and the command line's one-line messages build on the same functions.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backend;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
pub mod bridge;
pub mod coalesce;
#[cfg(any(test, feature = "conformance"))]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod error;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
mod local;
#[cfg(feature = "object-store")]
#[cfg_attr(docsrs, doc(cfg(feature = "object-store")))]
pub mod objstore;
#[cfg(any(feature = "http", feature = "object-store"))]
mod pin;
mod reader;
mod retry;
mod stats;
#[cfg(feature = "cloud-tls")]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "s3", feature = "gcs", feature = "azure")))
)]
pub mod tls;

pub use backend::{Backend, Capabilities, DynBackend, Location};
// The policy is everyday API (set on a backend's options); its module holds the planner for
// backend authors.
pub use coalesce::CoalescePolicy;
pub use error::cause::{Cause, CauseKind, Request, brief, cause_of, mentions, request_of};
pub use error::{
    BoxError, Error, ErrorKind, Result, TimeoutError, TimeoutKind, check_len, check_range,
};
#[cfg(feature = "mmap")]
pub use local::MmapIo;
pub use local::{
    DEFAULT_BATCH_ARENA, DEFAULT_INLINE_READS, LOCAL_COALESCE, LOCAL_MAX_GAP, LOCAL_MAX_SPAN,
    PreadIo, SeekIo,
};
#[cfg(all(feature = "uring", target_os = "linux"))]
pub use local::{DEFAULT_QUEUE_DEPTH, UringIo};
pub use reader::{AsyncReader, AsyncReaderExt, SyncReader, SyncReaderExt, Tail};
pub use retry::{
    REMOTE_REQUEST_ATTEMPTS, REMOTE_REQUEST_INITIAL_BACKOFF, REMOTE_REQUEST_MAX_BACKOFF,
    RetryPolicy,
};
pub use stats::{CountingReader, RequestStats, StatsSnapshot};
