//! A [`RootStore`] wrapper that fails the N-th call of an operation, for testing every call
//! site of a protocol (the root-level counterpart of Mountpoint's `FailureClient`). Built with
//! the `testing` feature only (outside semver), which the tests enable in their dev-dependencies.
//!
//! Faults are planned per [`Operation`] and call number (1-based, counted per operation):
//! - [`Fault::Fail`] fails the call before it reaches the store (nothing happens), with a
//!   transport error (ambiguous, like a dropped connection) or a full disk;
//! - [`Fault::LoseReply`] lets the call take effect and then reports an ambiguous failure:
//!   the "the write landed but the reply was lost" case that create-only and
//!   compare-and-swap protocols must resolve by reading back.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> guideloom_publish::Result<()> {
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use guideloom_publish::faulty::{Fault, FaultyStore, Operation};
//! use guideloom_publish::{Registry, Root, RootOptions, RootStore, StoreOptions};
//!
//! let store = Registry::new().resolve("memory://faulty", &StoreOptions::default())?;
//! let faulty = Arc::new(FaultyStore::new(store));
//! faulty.plan(Operation::PutCreate, 1, Fault::LoseReply);
//! let root = Root::new(faulty.clone(), RootOptions::default());
//! // The upload lands, its reply is lost, and create_object reads it back: success.
//! root.upload_shard("w", 0, Bytes::from_static(b"shard"), 1).await?;
//! assert_eq!(faulty.calls(Operation::PutCreate), 1);
//! assert_eq!(faulty.injected(), 1);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_io::AsyncReader;

use super::{CasOutcome, CreateOutcome, Etag, Object, ObjectInfo, RootStore, StoreCapabilities};
use crate::error::{Error, Result};

/// The operations of [`RootStore`] a fault can be planned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// [`RootStore::put_create`].
    PutCreate,
    /// [`RootStore::put_cas`].
    PutCas,
    /// [`RootStore::get`].
    Get,
    /// [`RootStore::get_range`] and [`RootStore::get_range_tagged`].
    GetRange,
    /// [`RootStore::head`].
    Head,
    /// [`RootStore::list`].
    List,
    /// [`RootStore::open_reader`].
    OpenReader,
    /// [`RootStore::delete_many`].
    Delete,
}

impl Operation {
    /// Every operation, in a fixed order.
    pub const ALL: [Operation; 8] = [
        Operation::PutCreate,
        Operation::PutCas,
        Operation::Get,
        Operation::GetRange,
        Operation::Head,
        Operation::List,
        Operation::OpenReader,
        Operation::Delete,
    ];

    fn name(self) -> &'static str {
        match self {
            Operation::PutCreate => "put_create",
            Operation::PutCas => "put_cas",
            Operation::Get => "get",
            Operation::GetRange => "get_range",
            Operation::Head => "head",
            Operation::List => "list",
            Operation::OpenReader => "open_reader",
            Operation::Delete => "delete",
        }
    }

    fn index(self) -> usize {
        Operation::ALL
            .iter()
            .position(|o| *o == self)
            .unwrap_or_default()
    }

    fn is_write(self) -> bool {
        matches!(
            self,
            Operation::PutCreate | Operation::PutCas | Operation::Delete
        )
    }
}

/// What a planned fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Fail before the store sees the call.
    Fail(FaultKind),
    /// Perform the call, then report an ambiguous transport failure (for reads, the result
    /// is dropped: the same as a reply lost on the way back).
    LoseReply,
}

/// The error a [`Fault::Fail`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// A transport failure ([`Error::Storage`], ambiguous: the outcome is unknown).
    Transport,
    /// A full disk ([`Error::DiskFull`], not ambiguous: nothing was written).
    DiskFull,
}

/// Fails planned calls of an inner store; everything else passes through. Counts every call
/// per operation and the faults injected.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn RootStore>,
    calls: [AtomicU64; 8],
    injected: AtomicU64,
    plan: Mutex<HashMap<(Operation, u64), Fault>>,
}

impl FaultyStore {
    /// Wraps `inner` with no faults planned.
    pub fn new(inner: Arc<dyn RootStore>) -> Self {
        FaultyStore {
            inner,
            calls: Default::default(),
            injected: AtomicU64::new(0),
            plan: Mutex::new(HashMap::new()),
        }
    }

    /// Plans `fault` for call number `n` (1-based) of `operation`, counted from the start.
    pub fn plan(&self, operation: Operation, n: u64, fault: Fault) {
        self.plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((operation, n), fault);
    }

    /// Removes every planned fault that has not fired.
    pub fn clear(&self) {
        self.plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Calls of `operation` so far.
    pub fn calls(&self, operation: Operation) -> u64 {
        self.calls[operation.index()].load(Ordering::Relaxed)
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// Counts the call and returns the fault planned for it, if any.
    fn next(&self, operation: Operation) -> Option<Fault> {
        let n = self.calls[operation.index()].fetch_add(1, Ordering::Relaxed) + 1;
        let fault = self
            .plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(operation, n));
        if fault.is_some() {
            self.injected.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(operation = operation.name(), n, ?fault, "injecting a fault");
        }
        fault
    }

    fn error(operation: Operation, key: &str, kind: FaultKind) -> Error {
        match kind {
            FaultKind::Transport => Error::storage(
                key,
                operation.name(),
                format!(
                    "injected fault: connection reset during {}",
                    operation.name()
                ),
            ),
            FaultKind::DiskFull => Error::DiskFull {
                dir: std::path::PathBuf::from("<faulty store>"),
                path: std::path::PathBuf::from(key),
                source: std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "injected fault: no space left on device",
                ),
            },
        }
    }

    /// Runs `call` under the fault planned for this call of `operation`.
    async fn run<T, F>(&self, operation: Operation, key: &str, call: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        match self.next(operation) {
            None => call.await,
            Some(Fault::Fail(kind)) => Err(Self::error(operation, key, kind)),
            Some(Fault::LoseReply) => {
                let outcome = call.await;
                let what = if operation.is_write() {
                    "the write was sent"
                } else {
                    "the request was sent"
                };
                tracing::debug!(ok = outcome.is_ok(), "{what}; losing the reply");
                Err(Self::error(operation, key, FaultKind::Transport))
            }
        }
    }
}

#[async_trait]
impl RootStore for FaultyStore {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn capabilities(&self) -> StoreCapabilities {
        self.inner.capabilities()
    }

    fn check_cas(&self) -> Result<()> {
        self.inner.check_cas()
    }

    fn check_writable(&self) -> Result<()> {
        self.inner.check_writable()
    }

    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        self.run(Operation::PutCreate, key, self.inner.put_create(key, body))
            .await
    }

    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        self.run(
            Operation::PutCas,
            key,
            self.inner.put_cas(key, body, expected),
        )
        .await
    }

    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        self.run(Operation::Get, key, self.inner.get(key, limit))
            .await
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        self.run(Operation::GetRange, key, self.inner.get_range(key, range))
            .await
    }

    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<(Bytes, Option<Etag>)> {
        self.run(
            Operation::GetRange,
            key,
            self.inner.get_range_tagged(key, range),
        )
        .await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.run(Operation::Head, key, self.inner.head(key)).await
    }

    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        self.run(
            Operation::OpenReader,
            key,
            self.inner.open_reader(key, size),
        )
        .await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.run(Operation::List, prefix, self.inner.list(prefix))
            .await
    }

    async fn sweep_temporaries(&self, min_age: Duration) -> Result<super::Sweep> {
        self.inner.sweep_temporaries(min_age).await
    }

    async fn delete_many(&self, keys: &[String]) -> Result<u64> {
        let what = keys.first().map_or("", String::as_str);
        self.run(Operation::Delete, what, self.inner.delete_many(keys))
            .await
    }
}
