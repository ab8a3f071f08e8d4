//! [`MemReader`]: shards held in memory (tests, fuzzing, data embedded in a binary).
//!
//! Built with the `testing` feature only (outside semver): a test or fuzz target enables it
//! in its dev-dependencies.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::check_range;
use guideloom_io::{AsyncReader, Error as IoError, Result as IoResult, SyncReader};

/// A reader over bytes in memory (tests, fuzzing, data embedded in a binary); implements
/// both [`SyncReader`] and [`AsyncReader`]. Reads are zero-copy slices of the buffer.
///
/// Built with the `testing` feature only (outside semver): a test or fuzz target enables it
/// in its dev-dependencies.
#[derive(Debug)]
pub struct MemReader {
    name: String,
    bytes: Bytes,
    closed: AtomicBool,
}

impl MemReader {
    /// A reader named `name` (shown in errors) over `bytes`.
    pub fn new(name: impl Into<String>, bytes: impl Into<Bytes>) -> Self {
        MemReader {
            name: name.into(),
            bytes: bytes.into(),
            closed: AtomicBool::new(false),
        }
    }

    fn get(&self, offset: u64, len: u64) -> IoResult<Bytes> {
        if self.closed.load(Ordering::Acquire) {
            return Err(IoError::Closed {
                location: self.name.clone(),
            });
        }
        check_range(&self.name, offset, len, self.bytes.len() as u64)?;
        // In range, so both fit in usize.
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = usize::try_from(offset + len).unwrap_or(usize::MAX);
        Ok(self.bytes.slice(start..end))
    }
}

impl SyncReader for MemReader {
    fn location(&self) -> &str {
        &self.name
    }
    fn size(&self) -> IoResult<u64> {
        Ok(self.bytes.len() as u64)
    }
    fn read(&self, offset: u64, len: u64) -> IoResult<Bytes> {
        self.get(offset, len)
    }
    fn close(&self) -> IoResult<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}

#[async_trait]
impl AsyncReader for MemReader {
    fn location(&self) -> &str {
        &self.name
    }
    async fn size(&self) -> IoResult<u64> {
        Ok(self.bytes.len() as u64)
    }
    async fn read(&self, offset: u64, len: u64) -> IoResult<Bytes> {
        self.get(offset, len)
    }
    async fn close(&self) -> IoResult<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
    fn close_sync(&self) {
        self.closed.store(true, Ordering::Release);
    }
    // Bytes in memory never need the executor.
    fn as_sync(&self) -> Option<&dyn SyncReader> {
        Some(self)
    }
}
