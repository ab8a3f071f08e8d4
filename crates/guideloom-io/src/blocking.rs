//! [`BlockingIo`]: synchronous readers over an async-first backend.
//!
//! Remote backends (`http::HttpIo`, feature `http`;
//! `objstore::ObjectStoreIo`, feature `object-store`) are async; their own sync `open`
//! answers [`Error::Unsupported`]. `BlockingIo` wraps such a backend together with a tokio
//! runtime (the process's shared [`Bridge`], or a handle) and implements [`Backend::open`] by driving `open_async` on it; every call on the
//! returned [`SyncReader`] blocks the calling thread on the runtime. Many threads may read
//! through one `BlockingIo` at once: each call runs on its caller's thread, while connection
//! tasks run on the runtime's workers.
//!
//! Blocking inside an async task would stall (or, in tokio, panic), so a sync call made from
//! a thread that is already inside a tokio runtime fails with [`Error::Unsupported`] instead:
//! use `open_async` there, or `tokio::task::spawn_blocking`. A reader with a synchronous
//! view of its own ([`AsyncReader::as_sync`]: a local file or mapping) is read through it,
//! on the calling thread and from anywhere.
//!
//! ```no_run
//! # #[cfg(feature = "http")] {
//! use guideloom_io::blocking::BlockingIo;
//! use guideloom_io::http::{HttpIo, HttpPath};
//! use guideloom_io::{Backend, SyncReader};
//!
//! let io = BlockingIo::new(HttpIo::new("http://127.0.0.1:8080/data/")?)?;
//! let reader = io.open(&HttpPath::new("shards/0.glm")?)?; // a Box<dyn SyncReader>
//! let bytes = reader.read(0, 16)?;
//! # let _ = bytes;
//! # }
//! # Ok::<(), guideloom_io::Error>(())
//! ```

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::runtime::Handle;

use crate::backend::{Backend, Capabilities};
use crate::bridge::Bridge;
use crate::error::{Error, Result};
use crate::reader::{AsyncReader, SyncReader, Tail};

/// The process's shared runtime ([`Bridge::shared`]), or one borrowed through a handle.
enum Driver {
    Bridge(Arc<Bridge>),
    Shared(Handle),
}

impl Driver {
    fn handle(&self) -> Option<&Handle> {
        match self {
            Driver::Bridge(bridge) => Some(bridge.handle()),
            Driver::Shared(h) => Some(h),
        }
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Driver::Bridge(_) => f.write_str("shared bridge"),
            Driver::Shared(_) => f.write_str("runtime handle"),
        }
    }
}

impl Driver {
    /// Runs `fut` to completion on the runtime, from a thread outside any runtime.
    fn block_on<F: Future>(&self, operation: &'static str, fut: F) -> Result<F::Output> {
        if Handle::try_current().is_ok() {
            return Err(Error::unsupported(
                "BlockingIo",
                operation,
                "a synchronous read was called from inside a tokio runtime, where blocking \
                 would stall the executor; use the backend's async reader (open_async) there, \
                 or call from tokio::task::spawn_blocking",
            ));
        }
        let handle = self.handle().ok_or_else(|| {
            Error::unsupported("BlockingIo", operation, "the runtime has been shut down")
        })?;
        Ok(handle.block_on(fut))
    }
}

/// A synchronous [`Backend`] over an async-first backend `B`, driven on a tokio runtime.
///
/// Cheap to clone (clones share the backend and the runtime).
pub struct BlockingIo<B> {
    inner: Arc<B>,
    driver: Arc<Driver>,
}

impl<B> Clone for BlockingIo<B> {
    fn clone(&self) -> Self {
        BlockingIo {
            inner: Arc::clone(&self.inner),
            driver: Arc::clone(&self.driver),
        }
    }
}

impl<B: fmt::Debug> fmt::Debug for BlockingIo<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingIo")
            .field("inner", &self.inner)
            .field("driver", &self.driver)
            .finish()
    }
}

impl<B: Backend> BlockingIo<B> {
    /// Wraps `backend`, driving it on the process's shared runtime ([`Bridge::shared`]).
    pub fn new(backend: B) -> Result<Self> {
        let bridge = Bridge::shared().map_err(|e| Error::Io {
            location: "<tokio runtime>".into(),
            source: e,
        })?;
        Ok(BlockingIo {
            inner: Arc::new(backend),
            driver: Arc::new(Driver::Bridge(bridge)),
        })
    }

    /// Wraps `backend`, driving it on an existing **multi-thread** runtime (with IO and time
    /// drivers enabled; it must outlive the readers). A current-thread runtime cannot make
    /// progress while its own thread is not inside `block_on`, so it is refused with
    /// [`Error::Unsupported`].
    pub fn with_handle(backend: B, handle: Handle) -> Result<Self> {
        if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread {
            return Err(Error::unsupported(
                "BlockingIo",
                "current-thread runtime",
                "BlockingIo needs a multi-thread runtime to drive its readers; \
                 use BlockingIo::new to drive it on the shared runtime",
            ));
        }
        Ok(BlockingIo {
            inner: Arc::new(backend),
            driver: Arc::new(Driver::Shared(handle)),
        })
    }

    /// The wrapped async backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

#[async_trait]
impl<B: Backend> Backend for BlockingIo<B> {
    type Location = B::Location;

    fn name(&self) -> &'static str {
        "BlockingIo"
    }

    fn capabilities(&self) -> Capabilities {
        let mut c = self.inner.capabilities();
        c.sync = true;
        c
    }

    fn is_supported(&self) -> bool {
        self.inner.is_supported()
    }

    fn open(&self, location: &Self::Location) -> Result<Box<dyn SyncReader>> {
        let reader = self
            .driver
            .block_on("sync open", self.inner.open_async(location))??;
        Ok(Box::new(BlockingReader {
            location: reader.location().to_owned(),
            inner: reader,
            driver: Arc::clone(&self.driver),
        }))
    }

    async fn open_async(&self, location: &Self::Location) -> Result<Box<dyn AsyncReader>> {
        self.inner.open_async(location).await
    }
}

/// The synchronous reader [`BlockingIo::open`] returns.
pub struct BlockingReader {
    inner: Box<dyn AsyncReader>,
    location: String,
    driver: Arc<Driver>,
}

impl fmt::Debug for BlockingReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingReader")
            .field("inner", &self.inner)
            .finish()
    }
}

/// Each call reads through the inner reader's own synchronous view when it has one
/// ([`AsyncReader::as_sync`]: a local file or mapping wrapped for uniformity), without a
/// trip through the runtime and from any thread; otherwise it blocks on the runtime.
impl SyncReader for BlockingReader {
    fn location(&self) -> &str {
        &self.location
    }

    fn size(&self) -> Result<u64> {
        if let Some(here) = self.inner.as_sync() {
            return here.size();
        }
        self.driver.block_on("sync size", self.inner.size())?
    }

    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        if let Some(here) = self.inner.as_sync() {
            return here.read(offset, len);
        }
        self.driver
            .block_on("sync read", self.inner.read(offset, len))?
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if let Some(here) = self.inner.as_sync() {
            return here.read_ranges(ranges);
        }
        self.driver
            .block_on("sync read_ranges", self.inner.read_ranges(ranges))?
    }

    fn read_tail(&self, len: u64) -> Result<Tail> {
        if let Some(here) = self.inner.as_sync() {
            return here.read_tail(len);
        }
        self.driver
            .block_on("sync read_tail", self.inner.read_tail(len))?
    }

    fn close(&self) -> Result<()> {
        if let Some(here) = self.inner.as_sync() {
            return here.close();
        }
        if Handle::try_current().is_ok() {
            // Closing must work anywhere (e.g. from Drop inside a task).
            self.inner.close_sync();
            return Ok(());
        }
        self.driver.block_on("sync close", self.inner.close())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PreadIo;

    /// A reader with a synchronous view reads through it: no runtime hop, so even a call
    /// from inside a runtime (refused for a remote reader) answers.
    #[test]
    fn a_reader_with_a_sync_view_reads_on_the_calling_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello world").unwrap();
        let io = BlockingIo::new(PreadIo::new()).unwrap();
        let reader = io.open(&path).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(&reader.read(6, 5).unwrap()[..], b"world");
            let parts = reader.read_ranges(&[0..5, 6..11]).unwrap();
            assert_eq!(
                (&parts[0][..], &parts[1][..]),
                (&b"hello"[..], &b"world"[..])
            );
            assert_eq!(reader.read_tail(5).unwrap().bytes, &b"world"[..]);
            assert_eq!(reader.size().unwrap(), 11);
            reader.close().unwrap();
            assert!(matches!(reader.read(0, 1), Err(Error::Closed { .. })));
        });
    }
}
