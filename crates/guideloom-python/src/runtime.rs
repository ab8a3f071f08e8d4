//! How Rust work is run from Python, on the process's one runtime: guideloom-io's
//! [`Bridge`](guideloom::io::bridge::Bridge), shared with the facade and the CLI.
//!
//! The bridge is built lazily on first use and belongs to the process that built it: a child
//! made by `fork` gets a fresh one (see `guideloom::io::bridge`), so a DataLoader worker never
//! waits on threads that only existed in its parent.
//!
//! [`block_on`] is the one way a binding waits for Rust work: it releases the GIL
//! (`py.detach`), drives the future on the bridge, and turns a panic into a Python exception
//! rather than letting it unwind into the interpreter. [`detached`] runs synchronous Rust
//! work the same way (a `Dataset::get` that reads an open local shard on this thread, with
//! no runtime hop).

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use guideloom::io::bridge::Bridge;
use pyo3::prelude::*;

use crate::errors::{self, Result};

/// The process's bridge (rebuilt in a forked child).
pub(crate) fn bridge() -> PyResult<Arc<Bridge>> {
    Bridge::shared().map_err(|e| errors::runtime_error(&e))
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
    let bridge = bridge()?;
    detached(py, || bridge.block_on(future))
}
