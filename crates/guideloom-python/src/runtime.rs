//! The one tokio runtime of the process, and how Rust work is run from Python.
//!
//! The runtime is created lazily on first use and belongs to the process that created it: a
//! child made by `fork` inherits the parent's memory but not its worker threads, so a runtime
//! started in the parent would never drive a future in the child (the call would hang). Each
//! use compares the current process id with the creator's and builds a fresh runtime in a
//! forked child; the parent's runtime is leaked there (dropping it would wait for threads that
//! do not exist in the child).
//!
//! [`block_on`] is the one way a binding waits for Rust work: it releases the GIL
//! (`py.detach`), drives the future on the runtime, and turns a panic into a Python exception
//! rather than letting it unwind into the interpreter.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::{self, Result};

/// The runtime and the process that built it.
struct Owned {
    pid: u32,
    runtime: Arc<Runtime>,
}

static RUNTIME: Mutex<Option<Owned>> = Mutex::new(None);

/// The process's runtime, built on first use and rebuilt in a forked child.
pub(crate) fn runtime() -> PyResult<Arc<Runtime>> {
    let pid = std::process::id();
    // A poisoned lock only means a panic happened while it was held; the slot is still valid.
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(owned) = slot.as_ref()
        && owned.pid == pid
    {
        return Ok(Arc::clone(&owned.runtime));
    }
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("guideloom-python")
            .enable_all()
            .build()
            .map_err(|e| errors::runtime_error(&e))?,
    );
    if let Some(stale) = slot.replace(Owned {
        pid,
        runtime: Arc::clone(&runtime),
    }) {
        // Inherited from the parent through fork: its threads are gone, never drop it here.
        std::mem::forget(stale);
    }
    Ok(runtime)
}

/// The id of the current process (what objects compare to know they crossed a fork).
pub(crate) fn pid() -> u32 {
    std::process::id()
}

/// Runs `f` without the GIL; its error becomes a Python exception once the GIL is back, and
/// a panic an `InternalError`.
pub(crate) fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> Result<T> + Send,
    T: Send,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(err.into()),
        Err(payload) => Err(errors::panic_error(payload.as_ref())),
    }
}

/// Drives `future` to completion on the process runtime with the GIL released; an error
/// becomes a Python exception, a panic an `InternalError`.
pub(crate) fn block_on<T, F>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = Result<T>> + Send,
    T: Send,
{
    let runtime = runtime()?;
    detached(py, || runtime.block_on(future))
}
