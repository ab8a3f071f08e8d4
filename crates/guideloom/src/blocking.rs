//! The runtime behind the synchronous API ([`Dataset`](crate::Dataset),
//! [`Publisher`](crate::Publisher)), and how a blocking call runs wherever it is made.
//!
//! tokio's `Runtime::block_on` panics when the calling thread already drives a runtime (an
//! async task, the future of `#[tokio::main]`), and dropping a runtime there panics too. A
//! synchronous call must not panic because of where it was made, so:
//!
//! - every call first polls its future once with this runtime entered: a read of an open local
//!   shard is ready there (an mmap slice, a cached pread), so it pays for no executor at all;
//! - a future still pending, on a thread outside any runtime (the everyday case: training
//!   loops, loader workers), is driven on by `Runtime::block_on`;
//! - on a thread inside a runtime context, a pending future is polled on the calling thread by
//!   a plain thread-parking executor (`futures::executor::block_on`) with this runtime entered,
//!   so its IO, timers and blocking work are driven by this runtime's own workers, never by the
//!   caller's. The call then blocks the caller's thread, as any blocking call does: inside an
//!   async task, prefer [`AsyncDataset`](crate::AsyncDataset);
//! - dropping the last handle inside a runtime context shuts the runtime down in the background
//!   instead of waiting for its threads.
//!
//! Why not a typed error for a call made inside a runtime: tokio's public API cannot tell a
//! `spawn_blocking` thread (where a blocking call is right, and `block_on` works) from an async
//! task (where it panics): both are inside a runtime context with a task id. An error would
//! refuse the first to protect the second; running the call serves both.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use crate::error::{Error, Result};

/// A multi-threaded runtime owned by the synchronous API (shared by clones through an `Arc`).
#[derive(Debug)]
pub(crate) struct SyncRuntime {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl SyncRuntime {
    /// Two workers (IO is mostly waiting), all drivers enabled.
    pub(crate) fn new() -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("guideloom-dataset")
            .enable_all()
            .build()
            .map_err(|source| Error::Runtime { source })?;
        Ok(SyncRuntime {
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime is taken only by drop")
    }

    /// Runs `future` to completion on this runtime, from any thread (see the module docs).
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        let runtime = self.runtime();
        let outside = tokio::runtime::Handle::try_current().is_err();
        let mut future = std::pin::pin!(future);
        {
            // Most calls on a local root finish at their first poll (an mmap read, a cached
            // shard): poll once with this runtime entered, before paying for a blocking
            // executor. A pending future keeps its state and is driven on below.
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

impl Drop for SyncRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Work that needs this runtime's timer and blocking pool, as a dataset read does.
    async fn work(runtime_name: &str) -> String {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let name = tokio::task::spawn_blocking(|| {
            std::thread::current().name().unwrap_or_default().to_owned()
        })
        .await
        .unwrap();
        format!("{runtime_name}:{name}")
    }

    #[test]
    fn a_call_from_a_plain_thread_runs() {
        let rt = SyncRuntime::new().unwrap();
        assert_eq!(rt.block_on(work("plain")), "plain:guideloom-dataset");
    }

    #[test]
    fn calls_inside_a_current_thread_runtime_run_and_the_drop_does_not_panic() {
        let user = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        user.block_on(async {
            // The root future of the user's runtime (as under `#[tokio::main]`).
            let rt = SyncRuntime::new().unwrap();
            assert_eq!(rt.block_on(work("root")), "root:guideloom-dataset");
            // An async task of the user's runtime.
            let task = tokio::spawn(async move {
                let out = rt.block_on(work("task"));
                drop(rt); // the last handle, dropped inside a runtime
                out
            });
            assert_eq!(task.await.unwrap(), "task:guideloom-dataset");
        });
    }

    #[test]
    fn calls_from_workers_and_blocking_threads_of_a_multi_thread_runtime_run() {
        let user = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let rt = Arc::new(SyncRuntime::new().unwrap());
        user.block_on(async {
            let on_worker = Arc::clone(&rt);
            let a = tokio::spawn(async move { on_worker.block_on(work("worker")) });
            let on_pool = Arc::clone(&rt);
            let b = tokio::task::spawn_blocking(move || on_pool.block_on(work("pool")));
            assert_eq!(a.await.unwrap(), "worker:guideloom-dataset");
            assert_eq!(b.await.unwrap(), "pool:guideloom-dataset");
        });
        drop(user);
        assert_eq!(rt.block_on(work("after")), "after:guideloom-dataset");
    }
}
