//! A conformance kit for [`Backend`] implementations (feature `conformance`).
//!
//! **Outside semver:** the kit grows stricter as the contract is clarified; a new check may
//! fail a backend that passed before, and its API may change in a minor release. The
//! contract it checks is [`SyncReader`](crate::SyncReader)'s (and `docs/io.md`).
//!
//! # How to use it
//! Give the kit a backend and a [`Fixture`]: something that creates an object holding given
//! bytes and returns its location, and names a location where nothing exists. Then call
//! - [`run_sync`] from a `#[test]` (or any thread) for the synchronous readers,
//! - [`run_async`] from a `#[tokio::test]` for the asynchronous readers,
//! - [`run_all`] from either for both (it runs the async half on a runtime of its own).
//!
//! Each returns a [`ConformanceReport`] (checks passed, flavours skipped and why) or the
//! first [`ConformanceError`], which names the backend, the flavour, the check and what was
//! wrong; `.unwrap()` it in a test. A flavour the backend does not offer (its constructor
//! answers [`Error::Unsupported`](crate::Error::Unsupported) and its
//! [`Capabilities`](crate::Capabilities) say so) is skipped with that reason; a backend that
//! claims a flavour and then refuses it fails the `capabilities` check.
//!
//! ```
//! use guideloom_io::SeekIo;
//! use guideloom_io::conformance::{DirFixture, run_all};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let report = run_all(&SeekIo::new(), &DirFixture::new(dir.path())).unwrap();
//! assert!(report.skipped.is_empty(), "{report}");
//! ```
//!
//! # What is checked
//! The oracle is four reference objects of random bytes (0 bytes, 1 byte, ~4 KiB, and
//! [`ConformanceOptions::large_size`], by default 10 MiB + 13), drawn from
//! [`ConformanceOptions::seed`]; every read is compared byte for byte with them, and a
//! failure names the object offsets where the bytes differ or the buffer stops. The large
//! object is big enough to reach past the power-of-two boundaries where chunked backends
//! split objects and requests ([`CHUNK_BOUNDARIES`]: 64 KiB, 1 MiB, 4 MiB, 8 MiB); the
//! reads that target a boundary `b` are made for each one inside it. The checks, in order,
//! per flavour (see [`CHECKS`]):
//!
//! | check | what must hold |
//! |---|---|
//! | `capabilities` | a flavour is offered exactly when `capabilities()` says so; an unsupported platform refuses with `Unsupported` |
//! | `open_missing` | a missing object gives `NotFound` (from open, or from the first `size` of a lazy reader) naming a location |
//! | `size` | `size()` is each object's exact length; `location()` is not empty |
//! | `first_last_byte` | `read(0, 1)` and `read(size - 1, 1)` |
//! | `zero_length` | `read(o, 0)` is empty for `o` in `0`, `size / 2`, `size` |
//! | `whole_object` | `read(0, size)`, the large object's 10 MiB included |
//! | `chunk_boundaries` | on the large object, for each `b`: `read(b - 1, 2)`; 4 KiB ending exactly at, starting exactly at, and across `b`; 2 MiB ending at and starting at `b`; ~3 MiB from `b - 1 MiB - 7` across `b`; plus one unaligned read across every boundary at once |
//! | `random_ranges` | random `(offset, len)` pairs (tiny, medium, large up to 256 KiB, ending at the end) |
//! | `past_end` | reads ending past the end, or overflowing `u64`, fail with `OutOfRange`, never a short buffer |
//! | `read_ranges` | batched reads equal single reads: empty list, neighbours, unsorted, overlapping, repeated and empty ranges, the whole object; and across the boundaries: multi-MiB ranges across each `b`, unsorted and overlapping (merged spans past 1 and 4 MiB caps), neighbours meeting exactly at `b`, small ranges either side of it; a batch with one bad range fails with `OutOfRange` |
//! | `read_tail` | size and bytes for lengths `0`, `1`, `b + 1` for each boundary (multi-MiB tails), `size / 2`, `size - 1`, `size`, `size + 1`, `u64::MAX` |
//! | `concurrent_reads` | one large-object reader shared by [`threads`](ConformanceOptions::threads) threads (sync) or tasks (async), each doing at least [`iterations`](ConformanceOptions::iterations) random reads and small batches, one operation in four across a chunk boundary (up to 16 KiB either side of a multiple of a `b`), and going on until all have and at least 200 reads overlapped another read in flight: every byte right (catches a shared seek cursor, or a chunk buffer shared between reads, even on a loaded machine) |
//! | `close` | close twice is fine (also on a reader that never read); `read`, `read_ranges`, `read_tail` afterwards fail with `Closed`; for async, `close_sync` too |
//! | `buffers_outlive_close` | buffers read before `close` keep their bytes after it |
//!
//! An async reader that offers a synchronous view of itself ([`AsyncReader::as_sync`](crate::AsyncReader::as_sync)) has
//! it checked beside its async reads: in `size` (the same size and location), `random_ranges`,
//! `past_end`, `read_ranges`, `read_tail` (the same bytes and errors) and `close` (its reads
//! fail with `Closed` once the reader is closed).
//!
//! Cost: one flavour reads about 200 MiB at the default `iterations` (150 MiB at 100, 40),
//! and the large object is generated once per run (a counter-based hash, not `StdRng`: fast
//! in unoptimised builds). `run_all` (both flavours), median wall time of 10 runs of each
//! test in an unoptimised build on a shared, loaded 2-core machine, before (256 KiB + 13
//! large object) → after (10 MiB + 13):
//!
//! | backend (test) | before | after |
//! |---|---|---|
//! | `SeekIo` (`local::tests::seek_io_passes_the_kit`) | 0.35 s | 0.55 s |
//! | `PreadIo` (`local::tests::pread_io_passes_the_kit`) | 0.21 s | 0.33 s |
//! | `MmapIo` (`local::tests::mmap_io_passes_the_kit`) | 0.17 s | 0.24 s |
//! | in-memory `ObjectStoreIo` via `BlockingIo` (`in_memory_conformance_kit`) | 0.19 s | 0.22 s |
//! | `HttpIo` via `BlockingIo`, nginx on loopback, `iterations` 100 (`nginx_conformance_kit`) | 0.52 s | 0.96 s |
//! | `ObjectStoreIo` via `BlockingIo`, moto on loopback, `iterations` 40 (`moto_conformance_kit`) | 6.1 s | 9.5 s |
//!
//! Remote runs are dominated by requests (about 2 000 of them, as before); moto answers
//! each a little slower for a 10 MiB object than for a 256 KiB one. A slow medium can lower
//! [`large_size`](ConformanceOptions::large_size), at the price of the boundaries past it.
//!
//! A panic inside a synchronous check is caught and reported as that check's failure.

use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::backend::{Backend, Location};
use crate::error::BoxError;

mod asynchronous;
mod chunks;
mod oracle;
mod synchronous;

/// The names of the checks, in the order they run (see the [module docs](self)).
pub const CHECKS: &[&str] = &[
    "capabilities",
    "open_missing",
    "size",
    "first_last_byte",
    "zero_length",
    "whole_object",
    "chunk_boundaries",
    "random_ranges",
    "past_end",
    "read_ranges",
    "read_tail",
    "concurrent_reads",
    "close",
    "buffers_outlive_close",
];

/// The power-of-two offsets where chunked backends split objects and requests (64 KiB,
/// 1 MiB, 4 MiB, 8 MiB): the kit reads at, up to, from and across each one inside the large
/// reference object (see the [module docs](self)).
pub const CHUNK_BOUNDARIES: &[u64] = &[64 << 10, 1 << 20, 4 << 20, 8 << 20];

/// The default [`ConformanceOptions::large_size`]: 10 MiB + 13, past every
/// [`CHUNK_BOUNDARIES`] entry, and no multiple of any chunk size.
pub const DEFAULT_LARGE_SIZE: usize = (10 << 20) + 13;

/// Creates the objects the kit reads.
///
/// `create` is async so remote fixtures can upload; it is always polled inside a tokio
/// runtime (for [`run_sync`], one the kit provides when the caller has none).
#[async_trait]
pub trait Fixture: Send + Sync {
    /// The location type of the backend under test.
    type Location: Location;

    /// Creates an object holding exactly `bytes` and returns its location. `name` is a short
    /// file-name-safe word, unique within one run (`"sync-large"`).
    async fn create(&self, name: &str, bytes: &[u8]) -> Result<Self::Location, BoxError>;

    /// A location where no object exists (and none will be created).
    fn missing(&self) -> Self::Location;
}

/// A [`Fixture`] for path-located backends: writes each object as a file in a directory.
///
/// The directory must exist; use a fresh (temporary) one per test.
#[derive(Debug, Clone)]
pub struct DirFixture {
    dir: PathBuf,
}

impl DirFixture {
    /// A fixture writing into `dir`.
    pub fn new(dir: impl AsRef<Path>) -> Self {
        DirFixture {
            dir: dir.as_ref().to_path_buf(),
        }
    }
}

#[async_trait]
impl Fixture for DirFixture {
    type Location = PathBuf;

    async fn create(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, BoxError> {
        let path = self.dir.join(name);
        // Small test files: a blocking write is acceptable here.
        std::fs::write(&path, bytes)?;
        Ok(path)
    }

    fn missing(&self) -> PathBuf {
        self.dir.join("guideloom-conformance-missing-object")
    }
}

/// A [`Fixture`] from a synchronous closure and a missing location (handy for in-memory
/// backends).
///
/// ```
/// use std::path::PathBuf;
/// use guideloom_io::conformance::FnFixture;
///
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().to_path_buf();
/// let fixture = FnFixture::new(
///     move |name: &str, bytes: &[u8]| {
///         let path = root.join(name);
///         std::fs::write(&path, bytes)?;
///         Ok(path)
///     },
///     dir.path().join("missing"),
/// );
/// # let _ = fixture;
/// ```
pub struct FnFixture<L, C> {
    create: C,
    missing: L,
}

impl<L, C> FnFixture<L, C>
where
    L: Location,
    C: Fn(&str, &[u8]) -> Result<L, BoxError> + Send + Sync,
{
    /// A fixture calling `create(name, bytes)`, with `missing` as the missing location.
    pub fn new(create: C, missing: L) -> Self {
        FnFixture { create, missing }
    }
}

impl<L: fmt::Debug, C> fmt::Debug for FnFixture<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnFixture")
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<L, C> Fixture for FnFixture<L, C>
where
    L: Location,
    C: Fn(&str, &[u8]) -> Result<L, BoxError> + Send + Sync,
{
    type Location = L;

    async fn create(&self, name: &str, bytes: &[u8]) -> Result<L, BoxError> {
        (self.create)(name, bytes)
    }

    fn missing(&self) -> L {
        self.missing.clone()
    }
}

/// Knobs of a run. Start from [`ConformanceOptions::default`] and change fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConformanceOptions {
    /// Seed of the reference bytes and of every random choice. Default: the value of the
    /// `GUIDELOOM_CONFORMANCE_SEED` environment variable if set, else a fixed seed. Failures
    /// print it, so a failing run can be repeated exactly.
    pub seed: u64,
    /// Random single reads per non-empty object (`random_ranges`). Default 200.
    pub random_reads: usize,
    /// Threads (sync) or tasks (async) sharing one reader in `concurrent_reads`. Default 8.
    pub threads: usize,
    /// Reads per thread or task in `concurrent_reads`. Default 400; lower it for slow
    /// remote backends.
    pub iterations: usize,
    /// Size in bytes of the large reference object. Default [`DEFAULT_LARGE_SIZE`]
    /// (10 MiB + 13). The reads that target [`CHUNK_BOUNDARIES`] are made only for the
    /// boundaries inside the object, so a smaller value checks less: below 8 MiB + 1 the
    /// 8 MiB boundary goes unchecked, and at the 256 KiB + 13 of earlier versions only the
    /// 64 KiB one is, and nothing past 256 KiB.
    pub large_size: usize,
}

/// The seed used when `GUIDELOOM_CONFORMANCE_SEED` is not set.
pub const DEFAULT_SEED: u64 = 0x6775_6964_656c_6f6f;

impl Default for ConformanceOptions {
    fn default() -> Self {
        let seed = std::env::var("GUIDELOOM_CONFORMANCE_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(DEFAULT_SEED);
        ConformanceOptions {
            seed,
            random_reads: 200,
            threads: 8,
            iterations: 400,
            large_size: DEFAULT_LARGE_SIZE,
        }
    }
}

/// Which reader flavour a check ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// [`SyncReader`](crate::SyncReader) via [`Backend::open`].
    Sync,
    /// [`AsyncReader`](crate::AsyncReader) via [`Backend::open_async`].
    Async,
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flavour::Sync => "sync",
            Flavour::Async => "async",
        })
    }
}

/// A failed check: which backend, flavour and check, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "conformance check `{check}` ({flavour}) failed for backend {backend}: {message} \
     [seed {seed}; repeat with GUIDELOOM_CONFORMANCE_SEED={seed}]"
)]
#[non_exhaustive]
pub struct ConformanceError {
    /// The backend's [`name`](Backend::name).
    pub backend: &'static str,
    /// The flavour under test.
    pub flavour: Flavour,
    /// The check that failed, one of [`CHECKS`] (or `"fixture"` when creating the test
    /// objects failed).
    pub check: &'static str,
    /// What was wrong.
    pub message: String,
    /// The seed of the run.
    pub seed: u64,
}

/// What a successful run did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConformanceReport {
    /// The backend's [`name`](Backend::name).
    pub backend: &'static str,
    /// Checks that ran and passed.
    pub passed: Vec<(Flavour, &'static str)>,
    /// Flavours not checked, with the reason (the backend's `Unsupported` message).
    pub skipped: Vec<(Flavour, String)>,
    /// The seed of the run.
    pub seed: u64,
}

impl ConformanceReport {
    fn new(backend: &'static str, seed: u64) -> Self {
        ConformanceReport {
            backend,
            passed: Vec::new(),
            skipped: Vec::new(),
            seed,
        }
    }

    fn merge(&mut self, other: ConformanceReport) {
        self.passed.extend(other.passed);
        self.skipped.extend(other.skipped);
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} checks passed (seed {})",
            self.backend,
            self.passed.len(),
            self.seed
        )?;
        for (flavour, reason) in &self.skipped {
            write!(f, "; {flavour} skipped: {reason}")?;
        }
        Ok(())
    }
}

/// Runs the synchronous checks with default options. See the [module docs](self).
pub fn run_sync<B, F>(backend: &B, fixture: &F) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    run_sync_with(backend, fixture, &ConformanceOptions::default())
}

/// Runs the synchronous checks with `options`.
pub fn run_sync_with<B, F>(
    backend: &B,
    fixture: &F,
    options: &ConformanceOptions,
) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    let contents = oracle::contents(options.seed, options.large_size);
    synchronous::run(backend, fixture, options, &contents)
}

/// Runs the asynchronous checks with default options, inside the caller's tokio runtime
/// (a multi-threaded one exercises real parallelism; a current-thread one works too).
pub async fn run_async<B, F>(
    backend: &B,
    fixture: &F,
) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    run_async_with(backend, fixture, &ConformanceOptions::default()).await
}

/// Runs the asynchronous checks with `options`.
pub async fn run_async_with<B, F>(
    backend: &B,
    fixture: &F,
    options: &ConformanceOptions,
) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    let contents = oracle::contents(options.seed, options.large_size);
    asynchronous::run(backend, fixture, options, &contents).await
}

/// Runs the synchronous then the asynchronous checks with default options.
///
/// Callable from a plain `#[test]` and from inside a tokio runtime: the async half runs on a
/// multi-threaded runtime of its own (on a separate thread when the caller is already
/// inside a runtime).
pub fn run_all<B, F>(backend: &B, fixture: &F) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    run_all_with(backend, fixture, &ConformanceOptions::default())
}

/// [`run_all`] with `options`.
pub fn run_all_with<B, F>(
    backend: &B,
    fixture: &F,
    options: &ConformanceOptions,
) -> Result<ConformanceReport, ConformanceError>
where
    B: Backend + ?Sized,
    F: Fixture<Location = B::Location> + ?Sized,
{
    // The reference bytes are drawn once for both halves.
    let contents = oracle::contents(options.seed, options.large_size);
    let mut report = synchronous::run(backend, fixture, options, &contents)?;
    let run = || -> Result<ConformanceReport, ConformanceError> {
        let rt = multi_thread_runtime().map_err(|e| ConformanceError {
            backend: backend.name(),
            flavour: Flavour::Async,
            check: "fixture",
            message: format!("cannot build a tokio runtime: {e}"),
            seed: options.seed,
        })?;
        rt.block_on(asynchronous::run(backend, fixture, options, &contents))
    };
    let async_report = if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(run).join()).unwrap_or_else(|p| std::panic::resume_unwind(p))
    } else {
        run()
    }?;
    report.merge(async_report);
    Ok(report)
}

fn multi_thread_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
}

/// Drives a fixture future to completion from synchronous code, wherever it is called.
fn block_on<T: Send>(fut: impl std::future::Future<Output = T> + Send) -> std::io::Result<T> {
    use tokio::runtime::{Builder, Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(fut)))
        }
        // Inside a current-thread runtime we may not block it: use a runtime of our own on
        // a thread outside any runtime context.
        Ok(_) => std::thread::scope(|s| {
            s.spawn(|| {
                Ok(Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(fut))
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
        Err(_) => Ok(Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(fut)),
    }
}

/// Creates the reference objects for one flavour through the fixture.
async fn create_objects<F: Fixture + ?Sized>(
    fixture: &F,
    flavour: Flavour,
    contents: &oracle::Contents,
) -> Result<Vec<oracle::Obj<F::Location>>, String> {
    let mut objects = Vec::new();
    for (name, bytes) in contents.iter().cloned() {
        let full = format!("{flavour}-{name}");
        let location = fixture
            .create(&full, &bytes)
            .await
            .map_err(|e| format!("the fixture could not create `{full}`: {e}"))?;
        objects.push(oracle::Obj {
            name,
            bytes,
            location,
        });
    }
    Ok(objects)
}

/// Doctests for `docs/io.md`: its "write a custom backend" example compiles and runs here.
#[cfg(doctest)]
#[doc = include_str!("../../../../docs/io.md")]
struct IoGuideDoctests;
