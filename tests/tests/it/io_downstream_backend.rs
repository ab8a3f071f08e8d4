//! Plays a downstream backend author: a backend written outside `guideloom-io` passes the
//! conformance kit, and deliberately broken backends fail it, each at the check that names
//! its bug. (A kit that cannot fail is worthless.)
//!
//! The in-memory backend here is the one `docs/io.md` shows in "Write a custom backend".
//! The backends that break only on multi-MiB objects are in [`chunked`].

#[path = "io_downstream_backend/chunked.rs"]
mod chunked;

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::check_range;
use guideloom_io::conformance::{
    self, ConformanceError, ConformanceOptions, DirFixture, Flavour, FnFixture,
};
use guideloom_io::{
    AsyncReader, Backend, BoxError, Capabilities, Error, Location, Result, SyncReader,
};

// ---------------------------------------------------------------------------------------------
// A correct in-memory backend, as a downstream author would write it.

/// Keys of the in-memory store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MemKey(String);

impl Location for MemKey {
    fn child(&self, name: &str) -> Self {
        MemKey(format!("{}/{name}", self.0))
    }
    fn describe(&self) -> String {
        format!("mem://{}", self.0)
    }
}

/// A backend over a shared `HashMap` of immutable objects.
#[derive(Debug, Clone, Default)]
struct MemIo {
    objects: Arc<RwLock<HashMap<MemKey, Bytes>>>,
}

impl MemIo {
    fn put(&self, key: MemKey, bytes: Bytes) {
        self.objects.write().unwrap().insert(key, bytes);
    }

    fn reader(&self, key: &MemKey) -> Result<MemReader> {
        let data = self.objects.read().unwrap().get(key).cloned();
        let data = data.ok_or_else(|| Error::NotFound {
            location: key.describe(),
            source: None,
        })?;
        Ok(MemReader {
            location: key.describe(),
            data: RwLock::new(Some(data)),
        })
    }
}

#[async_trait]
impl Backend for MemIo {
    type Location = MemKey;

    fn name(&self) -> &'static str {
        "MemIo"
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.sync = true;
        caps.r#async = true;
        caps.zero_copy = true;
        caps
    }

    fn open(&self, key: &MemKey) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(self.reader(key)?))
    }

    async fn open_async(&self, key: &MemKey) -> Result<Box<dyn AsyncReader>> {
        Ok(Box::new(self.reader(key)?))
    }
}

/// One object; `None` once closed.
#[derive(Debug)]
struct MemReader {
    location: String,
    data: RwLock<Option<Bytes>>,
}

impl MemReader {
    fn data(&self) -> Result<Bytes> {
        self.data
            .read()
            .unwrap()
            .clone()
            .ok_or_else(|| Error::Closed {
                location: self.location.clone(),
            })
    }
}

impl SyncReader for MemReader {
    fn location(&self) -> &str {
        &self.location
    }
    fn size(&self) -> Result<u64> {
        Ok(self.data()?.len() as u64)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let data = self.data()?;
        check_range(&self.location, offset, len, data.len() as u64)?;
        let start = usize::try_from(offset).expect("in range of an in-memory object");
        let end = usize::try_from(offset + len).expect("in range of an in-memory object");
        Ok(data.slice(start..end))
    }
    fn close(&self) -> Result<()> {
        self.data.write().unwrap().take();
        Ok(())
    }
}

#[async_trait]
impl AsyncReader for MemReader {
    fn location(&self) -> &str {
        &self.location
    }
    async fn size(&self) -> Result<u64> {
        SyncReader::size(self)
    }
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        SyncReader::read(self, offset, len)
    }
    async fn close(&self) -> Result<()> {
        SyncReader::close(self)
    }
    fn close_sync(&self) {
        let _ = SyncReader::close(self);
    }
}

/// The fixture for a `MemIo`: objects are inserted into its map.
fn mem_fixture(
    io: &MemIo,
) -> FnFixture<MemKey, impl Fn(&str, &[u8]) -> std::result::Result<MemKey, BoxError> + Send + Sync>
{
    let io = io.clone();
    FnFixture::new(
        move |name: &str, bytes: &[u8]| {
            let key = MemKey(name.to_owned());
            io.put(key.clone(), Bytes::copy_from_slice(bytes));
            Ok(key)
        },
        MemKey("no-such-object".to_owned()),
    )
}

#[test]
fn a_downstream_backend_passes_the_kit() {
    let io = MemIo::default();
    let report = conformance::run_all(&io, &mem_fixture(&io)).unwrap();
    assert!(report.skipped.is_empty(), "{report}");
    for flavour in [Flavour::Sync, Flavour::Async] {
        for check in conformance::CHECKS {
            assert!(
                report.passed.contains(&(flavour, *check)),
                "{check}: {report}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstream_backend_passes_the_kit_from_tokio_test() {
    // Also as a trait object, the way storages hold backends.
    let io = MemIo::default();
    let dynamic: Arc<dyn Backend<Location = MemKey>> = Arc::new(io.clone());
    conformance::run_async(&dynamic, &mem_fixture(&io))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Broken backend 1: short buffers.

/// How [`ShortIo`] gets it wrong.
#[derive(Debug, Clone, Copy)]
enum Shortness {
    /// Clamps a range that runs past the end to the bytes that exist (what S3 does with an
    /// overlapping `Range` header), instead of failing with `OutOfRange`.
    ClampAtEnd,
    /// Returns what one underlying call gave (at most 64 KiB), like a socket `read` that is
    /// never looped.
    OneChunk,
}

/// A `MemIo` whose reads return short buffers instead of errors.
#[derive(Debug, Clone)]
struct ShortIo {
    inner: MemIo,
    how: Shortness,
}

#[derive(Debug)]
struct ShortReader {
    inner: MemReader,
    how: Shortness,
}

#[async_trait]
impl Backend for ShortIo {
    type Location = MemKey;
    fn name(&self) -> &'static str {
        "ShortIo"
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.sync = true;
        caps
    }
    fn open(&self, key: &MemKey) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(ShortReader {
            inner: self.inner.reader(key)?,
            how: self.how,
        }))
    }
    async fn open_async(&self, _: &MemKey) -> Result<Box<dyn AsyncReader>> {
        Err(Error::unsupported(
            "ShortIo",
            "async reader",
            "this test backend is sync-only",
        ))
    }
}

impl SyncReader for ShortReader {
    fn location(&self) -> &str {
        &self.inner.location
    }
    fn size(&self) -> Result<u64> {
        SyncReader::size(&self.inner)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let data = self.inner.data()?;
        let size = data.len() as u64;
        let end = match self.how {
            Shortness::ClampAtEnd => offset.saturating_add(len).min(size),
            Shortness::OneChunk => offset.saturating_add(len.min(64 * 1024)).min(size),
        };
        let start = offset.min(end);
        Ok(data.slice(usize::try_from(start).unwrap()..usize::try_from(end).unwrap()))
    }
    fn close(&self) -> Result<()> {
        SyncReader::close(&self.inner)
    }
}

fn expect_failure(
    result: std::result::Result<impl std::fmt::Debug, ConformanceError>,
) -> ConformanceError {
    match result {
        Ok(report) => panic!("a broken backend passed the conformance kit: {report:?}"),
        Err(e) => e,
    }
}

#[test]
fn a_backend_clamping_reads_at_the_end_fails_past_end() {
    let inner = MemIo::default();
    let io = ShortIo {
        inner: inner.clone(),
        how: Shortness::ClampAtEnd,
    };
    let err = expect_failure(conformance::run_sync(&io, &mem_fixture(&inner)));
    assert_eq!(
        (err.check, err.flavour, err.backend),
        ("past_end", Flavour::Sync, "ShortIo")
    );
    assert!(
        err.message.contains("must fail with Error::OutOfRange"),
        "{err}"
    );
    // The message names the check, so a failing `.unwrap()` says what is wrong.
    assert!(err.to_string().contains("`past_end`"), "{err}");
}

#[test]
fn a_backend_returning_one_chunk_fails_whole_object() {
    let inner = MemIo::default();
    let io = ShortIo {
        inner: inner.clone(),
        how: Shortness::OneChunk,
    };
    let err = expect_failure(conformance::run_sync(&io, &mem_fixture(&inner)));
    assert_eq!(
        (err.check, err.flavour),
        ("whole_object", Flavour::Sync),
        "{err}"
    );
    let large = ConformanceOptions::default().large_size;
    assert!(
        err.message.contains(&format!("expected exactly {large}")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Broken backend 2: a seek cursor shared without synchronisation.

/// Files read with `seek` then `read` on one shared `File`, with no lock around the pair:
/// two threads interleave their seeks and reads and get each other's bytes.
#[derive(Debug, Clone, Copy, Default)]
struct CursorIo;

#[derive(Debug)]
struct CursorReader {
    location: String,
    size: u64,
    file: RwLock<Option<Arc<File>>>,
}

#[async_trait]
impl Backend for CursorIo {
    type Location = PathBuf;
    fn name(&self) -> &'static str {
        "CursorIo"
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.sync = true;
        caps
    }
    fn open(&self, path: &PathBuf) -> Result<Box<dyn SyncReader>> {
        let location = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(&location, e))?;
        let size = file.metadata().map_err(|e| Error::io(&location, e))?.len();
        Ok(Box::new(CursorReader {
            location,
            size,
            file: RwLock::new(Some(Arc::new(file))),
        }))
    }
    async fn open_async(&self, _: &PathBuf) -> Result<Box<dyn AsyncReader>> {
        Err(Error::unsupported(
            "CursorIo",
            "async reader",
            "this test backend is sync-only",
        ))
    }
}

impl SyncReader for CursorReader {
    fn location(&self) -> &str {
        &self.location
    }
    fn size(&self) -> Result<u64> {
        Ok(self.size)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let file = self
            .file
            .read()
            .unwrap()
            .clone()
            .ok_or_else(|| Error::Closed {
                location: self.location.clone(),
            })?;
        check_range(&self.location, offset, len, self.size)?;
        // The bug: the cursor is shared by every thread using this reader, and nothing keeps
        // another thread from moving it between our seek and our read.
        let mut f = &*file;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(&self.location, e))?;
        let mut buf = vec![0u8; usize::try_from(len).unwrap()];
        f.read_exact(&mut buf)
            .map_err(|e| Error::io(&self.location, e))?;
        Ok(Bytes::from(buf))
    }
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        ranges
            .iter()
            .map(|r| self.read(r.start, r.end.saturating_sub(r.start)))
            .collect()
    }
    fn close(&self) -> Result<()> {
        self.file.write().unwrap().take();
        Ok(())
    }
}

#[test]
fn a_backend_sharing_a_seek_cursor_fails_concurrent_reads() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = DirFixture::new(dir.path());
    // Every single-threaded check passes: the bug only shows under concurrency ...
    let err = expect_failure(conformance::run_sync(&CursorIo, &fixture));
    // ... and the kit catches it there, every run (many threads × many interleaved reads).
    assert_eq!(
        (err.check, err.flavour),
        ("concurrent_reads", Flavour::Sync),
        "{err}"
    );
    assert!(err.message.contains("shared cursor"), "{err}");
}

#[test]
fn the_cursor_bug_is_caught_on_every_one_of_several_seeds() {
    // Not a lucky seed: different reference bytes and read patterns, same verdict.
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=5u64 {
        let sub = dir.path().join(seed.to_string());
        std::fs::create_dir(&sub).unwrap();
        let mut options = ConformanceOptions::default();
        options.seed = seed;
        let err = expect_failure(conformance::run_sync_with(
            &CursorIo,
            &DirFixture::new(&sub),
            &options,
        ));
        assert_eq!(err.check, "concurrent_reads", "seed {seed}: {err}");
    }
}

#[test]
fn sync_only_backends_are_skipped_for_async_with_the_reason() {
    // The broken-cursor backend honestly says it has no async flavour: skipped, not failed.
    let dir = tempfile::tempdir().unwrap();
    let report = block_on(conformance::run_async(
        &CursorIo,
        &DirFixture::new(dir.path()),
    ));
    let report = report.unwrap();
    assert_eq!(report.skipped.len(), 1, "{report}");
    assert_eq!(report.skipped[0].0, Flavour::Async);
    assert!(report.skipped[0].1.contains("sync-only"), "{report}");
}

/// Runs a future on a small runtime (the kit's async entry point wants a tokio context).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
        .block_on(fut)
}

#[test]
fn a_backend_lying_about_capabilities_fails_the_capabilities_check() {
    /// Claims async readers but refuses them.
    #[derive(Debug)]
    struct Liar(MemIo);
    #[async_trait]
    impl Backend for Liar {
        type Location = MemKey;
        fn name(&self) -> &'static str {
            "Liar"
        }
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities()
        }
        fn open(&self, key: &MemKey) -> Result<Box<dyn SyncReader>> {
            self.0.open(key)
        }
        async fn open_async(&self, _: &MemKey) -> Result<Box<dyn AsyncReader>> {
            Err(Error::unsupported("Liar", "async reader", "not today"))
        }
    }
    let inner = MemIo::default();
    let err = expect_failure(conformance::run_all(
        &Liar(inner.clone()),
        &mem_fixture(&inner),
    ));
    assert_eq!(
        (err.check, err.flavour),
        ("capabilities", Flavour::Async),
        "{err}"
    );
}

#[test]
fn async_only_backends_are_skipped_for_sync_and_pass_async() {
    /// Like the HTTP backend: no sync readers, and says so.
    #[derive(Debug)]
    struct AsyncOnly(MemIo);
    #[async_trait]
    impl Backend for AsyncOnly {
        type Location = MemKey;
        fn name(&self) -> &'static str {
            "AsyncOnly"
        }
        fn capabilities(&self) -> Capabilities {
            let mut caps = self.0.capabilities();
            caps.sync = false;
            caps
        }
        fn open(&self, _: &MemKey) -> Result<Box<dyn SyncReader>> {
            Err(Error::unsupported(
                "AsyncOnly",
                "sync reader",
                "async-only: wrap it in BlockingIo",
            ))
        }
        async fn open_async(&self, key: &MemKey) -> Result<Box<dyn AsyncReader>> {
            self.0.open_async(key).await
        }
    }
    let inner = MemIo::default();
    let report = conformance::run_all(&AsyncOnly(inner.clone()), &mem_fixture(&inner)).unwrap();
    assert_eq!(report.skipped.len(), 1, "{report}");
    assert_eq!(report.skipped[0].0, Flavour::Sync);
    assert!(report.skipped[0].1.contains("BlockingIo"), "{report}");
    assert!(
        report
            .passed
            .contains(&(Flavour::Async, "concurrent_reads")),
        "{report}"
    );
}

// ---------------------------------------------------------------------------------------------
// A reader whose synchronous view is not a view: a copy that outlives `close`.

/// `MemIo`'s objects, through readers whose `as_sync` answers with a copy of the bytes.
#[derive(Debug)]
struct CopyViewIo {
    inner: MemIo,
}

#[derive(Debug)]
struct CopyViewReader {
    inner: MemReader,
    copy: CopyView,
}

/// A `SyncReader` over its own copy of the bytes: right until the reader is closed.
#[derive(Debug)]
struct CopyView {
    location: String,
    bytes: Bytes,
}

impl SyncReader for CopyView {
    fn location(&self) -> &str {
        &self.location
    }
    fn size(&self) -> Result<u64> {
        Ok(self.bytes.len() as u64)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        check_range(&self.location, offset, len, self.bytes.len() as u64)?;
        let start = usize::try_from(offset).expect("in range");
        Ok(self
            .bytes
            .slice(start..start + usize::try_from(len).expect("in range")))
    }
    fn close(&self) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl Backend for CopyViewIo {
    type Location = MemKey;

    fn name(&self) -> &'static str {
        "CopyViewIo"
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.r#async = true;
        caps
    }
    fn open(&self, _: &MemKey) -> Result<Box<dyn SyncReader>> {
        Err(Error::unsupported("CopyViewIo", "sync open", "async only"))
    }
    async fn open_async(&self, key: &MemKey) -> Result<Box<dyn AsyncReader>> {
        let inner = self.inner.reader(key)?;
        let copy = CopyView {
            location: inner.location.clone(),
            bytes: inner.data()?,
        };
        Ok(Box::new(CopyViewReader { inner, copy }))
    }
}

#[async_trait]
impl AsyncReader for CopyViewReader {
    fn location(&self) -> &str {
        &self.inner.location
    }
    async fn size(&self) -> Result<u64> {
        SyncReader::size(&self.inner)
    }
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        SyncReader::read(&self.inner, offset, len)
    }
    async fn close(&self) -> Result<()> {
        SyncReader::close(&self.inner)
    }
    fn close_sync(&self) {
        let _ = SyncReader::close(&self.inner);
    }
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        Some(&self.copy)
    }
}

/// The kit checks an async reader's synchronous view beside it: every read agrees here, but
/// the view still reads once the reader is closed, and the kit says so at `close`.
#[test]
fn a_sync_view_that_outlives_close_fails_close() {
    let inner = MemIo::default();
    let io = CopyViewIo {
        inner: inner.clone(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let err = expect_failure(rt.block_on(conformance::run_async(&io, &mem_fixture(&inner))));
    assert_eq!(
        (err.check, err.flavour, err.backend),
        ("close", Flavour::Async, "CopyViewIo")
    );
    assert!(err.message.contains("as_sync().read(0, 1)"), "{err}");
}
