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
//!
//! A runtime thread that calls into Python on its own (the completion of an asyncio
//! awaitable, [`crate::aio`]) does so through [`attach_from_runtime`]. The interpreter's exit
//! would otherwise race it: Python makes a thread that waits for the GIL during finalization
//! call `pthread_exit`, whose forced unwind through the runtime's Rust frames aborts the
//! process (seen as a rare `SIGABRT` after `asyncio.run` returned). [`before_exit`], run by
//! `atexit` before finalization starts, closes that door and waits for the calls already
//! inside.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

/// Set once the interpreter is exiting: runtime threads no longer call into Python.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Runtime-thread calls into Python under way.
static INSIDE: AtomicUsize = AtomicUsize::new(0);
/// How long [`before_exit`] waits for those calls (each is a short callback).
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Runs `f` with the GIL from a runtime thread, unless the interpreter is exiting: then `f`
/// is dropped unrun and `None` returned (nothing is waiting for its result any more).
pub(crate) fn attach_from_runtime<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    // Counted before the flag is read, and `before_exit` sets the flag before it reads the
    // count (both sequentially consistent): either this call sees the flag, or
    // `before_exit` sees this call and waits for it.
    INSIDE.fetch_add(1, Ordering::SeqCst);
    let out = if EXITING.load(Ordering::SeqCst) {
        std::mem::forget(f); // its Python objects may not be released without the GIL now
        None
    } else {
        Some(Python::attach(f))
    };
    INSIDE.fetch_sub(1, Ordering::SeqCst);
    out
}

/// Registered with `atexit` when the module loads: stops runtime threads from calling into
/// Python and waits (GIL released, at most [`EXIT_WAIT`]) for those already inside.
pub(crate) fn before_exit(py: Python<'_>) {
    EXITING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let start = Instant::now();
        while INSIDE.load(Ordering::SeqCst) > 0 && start.elapsed() < EXIT_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Registers [`before_exit`] with Python's `atexit` (an unnamed closure: not part of the
/// module's API).
pub(crate) fn register_exit_hook(py: Python<'_>) -> PyResult<()> {
    let hook = pyo3::types::PyCFunction::new_closure(
        py,
        Some(c"_guideloom_before_exit"),
        None,
        |args, _kwargs| before_exit(args.py()),
    )?;
    py.import("atexit")?.call_method1("register", (hook,))?;
    Ok(())
}
