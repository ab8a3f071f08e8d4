//! The open file of a positional reader (`PreadIo`, `UringIo`): shared by concurrent reads
//! under a read lock, closed once by taking it under the write lock.

use std::fs::File;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use super::closed;
use crate::error::Result;

/// A file that reads share and `close` takes away (`None` once closed). Reads hold the read
/// lock for their whole duration, so `close` waits for the reads in flight and never closes
/// a descriptor a read is using.
#[derive(Debug)]
pub(super) struct SharedFile {
    file: RwLock<Option<File>>,
    /// Set by `close`, so `size` answers without touching the lock.
    closed: AtomicBool,
}

impl SharedFile {
    pub(super) fn new(file: File) -> Self {
        SharedFile {
            file: RwLock::new(Some(file)),
            closed: AtomicBool::new(false),
        }
    }

    /// Runs `f` on the open file under the read lock, or fails with `Closed` naming
    /// `location`.
    pub(super) fn with<T>(&self, location: &str, f: impl FnOnce(&File) -> Result<T>) -> Result<T> {
        // A poisoned lock only means a reader panicked; the file itself is intact.
        let guard = self.file.read().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(file) => f(file),
            None => Err(closed(location)),
        }
    }

    /// Like [`with`](Self::with), for an attempt that may decline (`None`).
    pub(super) fn try_with<T>(
        &self,
        location: &str,
        f: impl FnOnce(&File) -> Option<Result<T>>,
    ) -> Option<Result<T>> {
        let guard = self.file.read().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(file) => f(file),
            None => Some(Err(closed(location))),
        }
    }

    /// `Closed` naming `location` once [`close`](Self::close) has begun.
    pub(super) fn check_open(&self, location: &str) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(location));
        }
        Ok(())
    }

    /// Marks the file closed, waits for the reads in flight, then drops it (closing its
    /// descriptor). Closing twice is a no-op.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let taken = self.file.write().unwrap_or_else(|p| p.into_inner()).take();
        drop(taken);
    }
}
