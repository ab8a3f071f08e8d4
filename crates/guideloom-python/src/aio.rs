//! asyncio awaitables over Rust futures, on the process runtime.
//!
//! [`awaitable`] creates an `asyncio.Future` on the caller's running loop, spawns the Rust
//! future on the process runtime (no GIL held while it runs), and resolves the asyncio future
//! from the loop's thread (`call_soon_threadsafe`) when it is done. A panic of the Rust future
//! becomes `InternalError`; a cancelled asyncio future is left alone
//! (`guideloom._aio.resolve` checks `done()` first). No `await` on the Python side ever blocks
//! the event loop. The resolution goes through [`attach_from_runtime`], so an interpreter
//! that exits while a completion is under way waits for it instead of aborting.

use std::future::Future;

use pyo3::prelude::*;

use crate::errors::{self, Result};
use crate::runtime::{attach_from_runtime, bridge};

/// An awaitable for `future`, whose output `convert` turns into the Python result (with the
/// GIL) once done.
pub(crate) fn awaitable<'py, T, F, C>(
    py: Python<'py>,
    future: F,
    convert: C,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
    C: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let py_future = event_loop.call_method0("create_future")?;
    let resolve = py.import("guideloom._aio")?.getattr("resolve")?.unbind();
    let (loop_ref, future_ref) = (event_loop.unbind(), py_future.clone().unbind());
    let bridge = bridge()?;
    let task = bridge.handle().spawn(future);
    bridge.handle().spawn(async move {
        let outcome = task.await;
        // Not when the interpreter is exiting: nothing awaits the future then.
        attach_from_runtime(|py| {
            let (ok, value) = match outcome {
                Ok(Ok(value)) => match convert(py, value) {
                    Ok(v) => (true, v),
                    Err(e) => (false, e.into_value(py).into_any()),
                },
                Ok(Err(err)) => (false, PyErr::from(err).into_value(py).into_any()),
                Err(join) => {
                    let err = match join.try_into_panic() {
                        Ok(payload) => errors::panic_error(payload.as_ref()),
                        Err(_) => errors::raise("InternalError", "the Rust task was cancelled"),
                    };
                    (false, err.into_value(py).into_any())
                }
            };
            // The loop may be closed by now; nothing is waiting then.
            let _ = loop_ref.bind(py).call_method1(
                "call_soon_threadsafe",
                (resolve.bind(py), future_ref.bind(py), ok, value),
            );
        });
    });
    Ok(py_future)
}
