//! In-memory and plain-file readers: shards held in a buffer (tests, fuzzing, embedded data)
//! and the file reader the on-disk discovery uses.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::error::check_range;
use guideloom_io::{AsyncReader, Error as IoError, Result as IoResult, SyncReader};

/// A reader over bytes in memory; implements both [`SyncReader`] and [`AsyncReader`].
/// Reads are zero-copy slices of the buffer.
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
}

/// A minimal local-file [`SyncReader`] (seek + read under a lock), used by the on-disk
/// discovery of [`FileSystemDocument`](crate::FileSystemDocument). For reading datasets,
/// prefer the backends of `guideloom-io`.
#[derive(Debug)]
pub struct FileReader {
    name: String,
    size: u64,
    file: Mutex<Option<File>>,
}

impl FileReader {
    /// Opens `path`; a missing file is [`guideloom_io::Error::NotFound`].
    pub fn open(path: impl AsRef<Path>) -> IoResult<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| IoError::io(&name, e))?;
        let size = file.metadata().map_err(|e| IoError::io(&name, e))?.len();
        Ok(FileReader {
            name,
            size,
            file: Mutex::new(Some(file)),
        })
    }
}

impl SyncReader for FileReader {
    fn location(&self) -> &str {
        &self.name
    }
    fn size(&self) -> IoResult<u64> {
        Ok(self.size)
    }
    fn read(&self, offset: u64, len: u64) -> IoResult<Bytes> {
        check_range(&self.name, offset, len, self.size)?;
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let file = guard.as_mut().ok_or_else(|| IoError::Closed {
            location: self.name.clone(),
        })?;
        let n = usize::try_from(len).map_err(|_| IoError::InvalidArgument {
            message: format!("read of {len} bytes does not fit in memory"),
        })?;
        let mut buf = vec![0u8; n];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut buf))
            .map_err(|e| IoError::io(&self.name, e))?;
        Ok(buf.into())
    }
    fn close(&self) -> IoResult<()> {
        self.file.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }
}

/// A test backend for local paths that loads each whole file into a [`MemReader`] when
/// opened (both flavours). Not for production: it reads every byte up front.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default)]
pub struct WholeFileIo;

impl WholeFileIo {
    fn load(location: &std::path::Path) -> IoResult<MemReader> {
        let name = location.display().to_string();
        let bytes = std::fs::read(location).map_err(|e| IoError::io(&name, e))?;
        Ok(MemReader::new(name, bytes))
    }
}

#[async_trait]
impl guideloom_io::Backend for WholeFileIo {
    type Location = std::path::PathBuf;

    fn name(&self) -> &'static str {
        "WholeFileIo"
    }

    fn capabilities(&self) -> guideloom_io::Capabilities {
        let mut c = guideloom_io::Capabilities::default();
        c.sync = true;
        c.r#async = true;
        c
    }

    fn open(&self, location: &std::path::PathBuf) -> IoResult<Box<dyn SyncReader>> {
        Ok(Box::new(Self::load(location)?))
    }

    async fn open_async(&self, location: &std::path::PathBuf) -> IoResult<Box<dyn AsyncReader>> {
        Ok(Box::new(Self::load(location)?))
    }
}
