//! The one bridge from synchronous code to the async IO stack: a process-wide tokio runtime
//! and the rule for blocking on a future wherever the caller is.
//!
//! Every synchronous door of the workspace goes through [`Bridge`]: the facade's `Dataset` and
//! `Publisher`, [`BlockingIo`](crate::blocking::BlockingIo), the `guideloom` binary and the
//! Python package. There is one runtime per process ([`Bridge::shared`]), built on first use
//! with [`WORKER_THREADS`] workers, never dropped.
//!
//! # Blocking wherever the call is made
//!
//! tokio's `Runtime::block_on` panics when the calling thread already drives a runtime (an
//! async task, the future of `#[tokio::main]`). A synchronous call must not panic because of
//! where it was made, so [`Bridge::block_on`]:
//!
//! - first polls the future once with the runtime entered: a read of an open local shard is
//!   ready there (an mmap slice, a cached pread), so it pays for no executor at all;
//! - drives a still-pending future with `Runtime::block_on` on a thread outside any runtime
//!   (the everyday case: training loops, loader workers, the CLI's main thread);
//! - on a thread inside a runtime context, polls it on the calling thread with a plain
//!   thread-parking executor (`futures::executor::block_on`) and the runtime entered, so its
//!   IO, timers and blocking work are driven by this runtime's workers, never the caller's.
//!   The call blocks the caller's thread, as any blocking call does: inside an async task,
//!   call the `_async` twin instead.
//!
//! Why not a typed error inside a runtime: tokio's public API cannot tell a `spawn_blocking`
//! thread (where blocking is right) from an async task (where it is not); an error would
//! refuse the first to protect the second.
//!
//! # Fork
//!
//! A child made by `fork` (Python's DataLoader workers) inherits the parent's memory but not
//! its worker threads: a runtime built in the parent would never drive a future there. The
//! shared bridge remembers the process that built it, and [`Bridge::shared`] builds a fresh
//! one in a forked child; the parent's is leaked there (dropping it would wait for threads
//! that do not exist). Hold the result of `shared()` only for the duration of a call.
//!
//! ```
//! use guideloom_io::bridge::Bridge;
//!
//! let bridge = Bridge::shared()?;
//! let answer = bridge.block_on(async {
//!     tokio::task::spawn_blocking(|| 6 * 7).await.unwrap()
//! });
//! assert_eq!(answer, 42);
//! # Ok::<(), std::io::Error>(())
//! ```

use std::cell::Cell;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::runtime::{Handle, Runtime};

/// Worker threads of the shared runtime: IO is mostly waiting, and CPU work (shard encoding,
/// hashing) goes to the blocking pool.
pub const WORKER_THREADS: usize = 2;

/// The name of the shared runtime's threads (seen in `top -H`, panics and tracing).
pub const THREAD_NAME: &str = "guideloom";

/// A tokio runtime and the rule for blocking on it from any thread (see the module docs).
#[derive(Debug)]
pub struct Bridge {
    /// `None` only while a bridge built by [`Bridge::new`] is dropped.
    runtime: Option<Runtime>,
}

/// The shared bridge and the process that built it.
struct Owned {
    pid: u32,
    bridge: Arc<Bridge>,
}

static SHARED: Mutex<Option<Owned>> = Mutex::new(None);

impl Bridge {
    /// The process's bridge, built on first use (and again in a forked child).
    ///
    /// # Errors
    /// The OS refused the runtime's threads or its IO driver.
    pub fn shared() -> std::io::Result<Arc<Bridge>> {
        let pid = std::process::id();
        // A poisoned lock only means a panic while it was held; the slot stays valid.
        let mut slot = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(owned) = slot.as_ref()
            && owned.pid == pid
        {
            return Ok(Arc::clone(&owned.bridge));
        }
        let bridge = Arc::new(Bridge::new()?);
        if let Some(stale) = slot.replace(Owned {
            pid,
            bridge: Arc::clone(&bridge),
        }) {
            // Inherited through fork: its threads are gone, never drop (join) it here.
            std::mem::forget(stale);
        }
        Ok(bridge)
    }

    /// A bridge of its own (tests, or a caller that wants its runtime torn down): most code
    /// wants [`Bridge::shared`].
    ///
    /// # Errors
    /// The OS refused the runtime's threads or its IO driver.
    pub fn new() -> std::io::Result<Bridge> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()?;
        Ok(Bridge {
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> &Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime is taken only by drop")
    }

    /// A handle of the runtime (to spawn on it, or enter it).
    pub fn handle(&self) -> &Handle {
        self.runtime().handle()
    }

    /// Runs `future` to completion on this bridge's runtime, from any thread (see the module
    /// docs).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let runtime = self.runtime();
        let outside = Handle::try_current().is_err();
        let _here = BlockingCaller::enter();
        let mut future = std::pin::pin!(future);
        {
            // Most calls on a local root finish at their first poll: poll once with the
            // runtime entered before paying for an executor. A pending future keeps its state.
            let _entered = runtime.enter();
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            if !outside {
                return futures::executor::block_on(future);
            }
        }
        runtime.block_on(future)
    }
}

thread_local! {
    /// Set while this thread polls a future in [`Bridge::block_on`].
    static BLOCKING_CALLER: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a [`Bridge::block_on`] caller until dropped (restoring the
/// mark it found: block_on calls nest).
struct BlockingCaller(bool);

impl BlockingCaller {
    fn enter() -> BlockingCaller {
        BlockingCaller(BLOCKING_CALLER.with(|c| c.replace(true)))
    }
}

impl Drop for BlockingCaller {
    fn drop(&mut self) {
        BLOCKING_CALLER.with(|c| c.set(self.0));
    }
}

/// `true` on a thread that is polling a future inside [`Bridge::block_on`]: a synchronous
/// caller that blocks anyway, never an executor's worker. Such a future may do blocking
/// work (encode and write a shard) in place instead of handing it to the blocking pool;
/// a task it spawns runs on a worker and sees `false`.
///
/// ```
/// use guideloom_io::bridge::{Bridge, on_blocking_caller};
///
/// assert!(!on_blocking_caller());
/// let bridge = Bridge::shared()?;
/// assert!(bridge.block_on(async { on_blocking_caller() }));
/// let spawned = bridge.block_on(async {
///     tokio::spawn(async { on_blocking_caller() }).await.unwrap()
/// });
/// assert!(!spawned);
/// assert!(!on_blocking_caller());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn on_blocking_caller() -> bool {
    BLOCKING_CALLER.with(Cell::get)
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Dropping a runtime inside another runtime's context panics: shut it down in the
        // background there instead of waiting for its threads.
        if let Some(runtime) = self.runtime.take()
            && Handle::try_current().is_ok()
        {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Work that needs the runtime's timer and blocking pool, as a dataset read does.
    async fn work(label: &str) -> String {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let name = tokio::task::spawn_blocking(|| {
            std::thread::current().name().unwrap_or_default().to_owned()
        })
        .await
        .unwrap();
        format!("{label}:{name}")
    }

    #[test]
    fn a_call_from_a_plain_thread_runs() {
        let bridge = Bridge::new().unwrap();
        assert_eq!(bridge.block_on(work("plain")), "plain:guideloom");
    }

    #[test]
    fn the_shared_bridge_is_one_per_process() {
        let a = Bridge::shared().unwrap();
        let b = Bridge::shared().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.block_on(work("shared")), "shared:guideloom");
    }

    #[test]
    fn calls_inside_a_current_thread_runtime_run_and_the_drop_does_not_panic() {
        let user = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        user.block_on(async {
            // The root future of the user's runtime (as under `#[tokio::main]`).
            let bridge = Bridge::new().unwrap();
            assert_eq!(bridge.block_on(work("root")), "root:guideloom");
            // An async task of the user's runtime.
            let task = tokio::spawn(async move {
                let out = bridge.block_on(work("task"));
                drop(bridge); // the last handle, dropped inside a runtime
                out
            });
            assert_eq!(task.await.unwrap(), "task:guideloom");
        });
    }

    #[test]
    fn calls_from_workers_and_blocking_threads_of_a_multi_thread_runtime_run() {
        let user = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let bridge = Arc::new(Bridge::new().unwrap());
        user.block_on(async {
            let on_worker = Arc::clone(&bridge);
            let a = tokio::spawn(async move { on_worker.block_on(work("worker")) });
            let on_pool = Arc::clone(&bridge);
            let b = tokio::task::spawn_blocking(move || on_pool.block_on(work("pool")));
            assert_eq!(a.await.unwrap(), "worker:guideloom");
            assert_eq!(b.await.unwrap(), "pool:guideloom");
        });
        drop(user);
        assert_eq!(bridge.block_on(work("after")), "after:guideloom");
    }
}
