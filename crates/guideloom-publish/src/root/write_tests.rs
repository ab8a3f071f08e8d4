//! Shard writes off the async executor (`shard_pipe`): the same bytes and references
//! under either runtime flavour and on every kind of store, the records pulled on the
//! writing task and the encoder's writes made on another thread.
#![allow(clippy::cast_possible_truncation)] // test sizes are small

use std::collections::HashSet;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::{ShardEncoder, ShardMetadata};
use guideloom_io::AsyncReader;

use super::*;
use crate::error::Error;
use crate::store::{
    CasOutcome, Committed, CreateOutcome, Etag, Object, ObjectInfo, PendingObject,
    StoreCapabilities,
};

/// The threads that wrote into the pending objects of a [`Watched`] store.
type Threads = Arc<Mutex<HashSet<ThreadId>>>;

/// Forwards to an inner store; its pending objects note the thread of every write.
#[derive(Debug)]
struct Watched {
    inner: Arc<dyn RootStore>,
    writers: Threads,
}

#[derive(Debug)]
struct WatchedPending<P> {
    inner: P,
    writers: Threads,
}

impl<P: Write> Write for WatchedPending<P> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writers
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[async_trait]
impl<P: PendingObject> PendingObject for WatchedPending<Box<P>>
where
    P: ?Sized,
{
    async fn commit(self: Box<Self>) -> Result<Committed> {
        self.inner.commit().await
    }
    fn take_write_error(&mut self) -> Option<Error> {
        self.inner.take_write_error()
    }
}

#[async_trait]
impl RootStore for Watched {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        self.inner.capabilities()
    }
    async fn put_create(&self, key: &str, body: Bytes) -> Result<CreateOutcome> {
        self.inner.put_create(key, body).await
    }
    fn begin_create(&self, key: &str, spool_dir: &Path) -> Result<Box<dyn PendingObject + '_>> {
        Ok(Box::new(WatchedPending {
            inner: self.inner.begin_create(key, spool_dir)?,
            writers: Arc::clone(&self.writers),
        }))
    }
    fn begin_create_owned(
        &self,
        key: &str,
        spool_dir: &Path,
    ) -> Result<Option<Box<dyn PendingObject>>> {
        let Some(inner) = self.inner.begin_create_owned(key, spool_dir)? else {
            return Ok(None);
        };
        Ok(Some(Box::new(WatchedPending {
            inner,
            writers: Arc::clone(&self.writers),
        })))
    }
    async fn put_cas(&self, key: &str, body: Bytes, expected: Option<&Etag>) -> Result<CasOutcome> {
        self.inner.put_cas(key, body, expected).await
    }
    async fn get(&self, key: &str, limit: u64) -> Result<Object> {
        self.inner.get(key, limit).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        self.inner.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn open_reader(&self, key: &str, size: u64) -> Result<Box<dyn AsyncReader>> {
        self.inner.open_reader(key, size).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
}

/// `n` records of `len` bytes, each different.
fn records(n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut r = vec![(i % 251) as u8; len];
            r[..8].copy_from_slice(&(i as u64).to_le_bytes());
            r
        })
        .collect()
}

fn meta() -> ShardMetadata {
    ShardMetadata::new("raw", "documents")
}

/// The shard one record at a time, in memory.
fn encoded(recs: &[Vec<u8>]) -> Vec<u8> {
    let mut encoder = ShardEncoder::new(Vec::new(), meta()).unwrap();
    for r in recs {
        encoder.append(r).unwrap();
    }
    encoder.finish().unwrap().0
}

fn runtimes() -> Vec<(&'static str, tokio::runtime::Runtime)> {
    vec![
        (
            "current_thread",
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        ),
        (
            "multi_thread",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ),
    ]
}

/// Local, memory (spooled) and a store without owned pending objects (written on the
/// task): every flavour of runtime writes the bytes the encoder makes one record at a time,
/// with the same reference, and writes them again idempotently.
#[test]
fn write_shard_works_in_current_thread_and_multi_thread_runtimes() {
    // Three batches and a bit: the channel fills, batches are recycled.
    let recs = records(10 * 1024 + 7, 1024);
    let want = encoded(&recs);
    for (flavour, rt) in runtimes() {
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let local = Registry::new()
                .resolve(dir.path().to_str().unwrap(), &StoreOptions::default())
                .unwrap();
            let memory = Registry::new()
                .resolve(
                    &format!("memory://write-{flavour}"),
                    &StoreOptions::default(),
                )
                .unwrap();
            #[allow(unused_mut)] // without `testing`, no on-task store to add
            let mut stores = vec![local, memory];
            // A store without owned pending objects: written on the task.
            #[cfg(feature = "testing")]
            stores.push(Arc::new(crate::store::faulty::FaultyStore::new(
                Registry::new()
                    .resolve(
                        &format!("memory://write-faulty-{flavour}"),
                        &StoreOptions::default(),
                    )
                    .unwrap(),
            )));
            for store in stores {
                let root = Root::new(Arc::clone(&store), RootOptions::default());
                let shard = root.write_shard("w", 0, meta(), &recs).await.unwrap();
                let got = store.get(&shard.key, u64::MAX).await.unwrap().body;
                assert!(got[..] == want[..], "{flavour} {}", store.describe());
                assert_eq!(shard.size, want.len() as u64);
                assert_eq!(shard.record_count, recs.len() as u64);
                let again = root.write_shard("w", 0, meta(), &recs).await.unwrap();
                assert_eq!(again, shard, "{flavour}: idempotent");
                let ar = root
                    .write_array_record_shard("w", 1, Default::default(), &recs[..100])
                    .await
                    .unwrap();
                assert_eq!(ar.record_count, 100);
            }
        });
    }
}

/// A root in `dir` whose pending objects note their writers' threads, and its inner store.
fn watched_root(dir: &Path) -> (Root, Arc<dyn RootStore>, Threads) {
    let writers = Threads::default();
    let local = Registry::new()
        .resolve(dir.to_str().unwrap(), &StoreOptions::default())
        .unwrap();
    let store = Arc::new(Watched {
        inner: Arc::clone(&local),
        writers: Arc::clone(&writers),
    });
    (Root::new(store, RootOptions::default()), local, writers)
}

/// On a `current_thread` runtime, whose one thread runs the writing task, the records are
/// pulled on that thread and every write of the encoder is made on another (the blocking
/// pool's): the executor's thread encodes and writes nothing.
#[test]
fn shard_encoding_and_writes_run_off_the_executor_thread() {
    let recs = records(6 * 1024, 1024);
    for (flavour, rt) in runtimes() {
        let dir = tempfile::tempdir().unwrap();
        let (root, _, writers) = watched_root(dir.path());
        let pullers = Mutex::new(HashSet::new());
        let pulled = recs.iter().inspect(|_| {
            pullers.lock().unwrap().insert(std::thread::current().id());
        });
        let shard = rt
            .block_on(root.write_shard("w", 0, meta(), pulled))
            .unwrap();
        assert_eq!(shard.record_count, recs.len() as u64);
        let pullers = pullers.into_inner().unwrap();
        let writers = writers.lock().unwrap().clone();
        assert_eq!(pullers.len(), 1, "{flavour}: one task pulls");
        assert!(!writers.is_empty());
        assert!(
            pullers.is_disjoint(&writers),
            "{flavour}: pulled on {pullers:?}, written on {writers:?}"
        );
        if flavour == "current_thread" {
            // The runtime's only thread is this one.
            assert!(pullers.contains(&std::thread::current().id()));
        }
    }
}

/// A synchronous caller blocked in `Bridge::block_on` (the facade's `Publisher`, the CLI,
/// Python) is no executor's worker: it pulls, encodes and writes on its own thread, with
/// the bytes of the piped write; a task spawned on the bridge's runtime still pipes.
#[test]
fn a_blocking_caller_encodes_in_place_and_a_task_pipes() {
    let recs = records(6 * 1024, 1024);
    let want = encoded(&recs);
    let bridge = guideloom_io::bridge::Bridge::shared().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (root, local, writers) = watched_root(dir.path());
    let root = Arc::new(root);
    let here = bridge
        .block_on(root.write_shard("w", 0, meta(), &recs))
        .unwrap();
    let got = bridge
        .block_on(local.get(&here.key, u64::MAX))
        .unwrap()
        .body;
    assert!(got[..] == want[..]);
    let in_place = std::mem::take(&mut *writers.lock().unwrap());
    assert_eq!(in_place, HashSet::from([std::thread::current().id()]));

    let task_root = Arc::clone(&root);
    let task_recs = recs.clone();
    let (piped, puller) = bridge.block_on(async move {
        tokio::spawn(async move {
            let shard = task_root.write_shard("w", 1, meta(), task_recs).await;
            (shard, std::thread::current().id())
        })
        .await
        .unwrap()
    });
    assert_eq!(piped.unwrap().size, here.size);
    let piped_writers = writers.lock().unwrap().clone();
    assert!(!piped_writers.is_empty());
    assert!(
        !piped_writers.contains(&puller) && !piped_writers.contains(&std::thread::current().id()),
        "pulled on {puller:?}, written on {piped_writers:?}"
    );
}

/// The records of a fallible write pulled on the task stop at the first `Err`: nothing
/// appears and the temporary file is gone when the write returns, on either runtime.
#[test]
fn a_failed_record_stops_the_piped_write_and_leaves_nothing() {
    for (flavour, rt) in runtimes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Registry::new()
            .resolve(dir.path().to_str().unwrap(), &StoreOptions::default())
            .unwrap();
        let root = Root::new(store, RootOptions::default());
        let produced = (0..12_000usize).map(|i| {
            if i == 9_000 {
                Err(format!("record {i} failed"))
            } else {
                Ok(vec![(i % 7) as u8; 1024])
            }
        });
        let err = rt
            .block_on(root.try_write_shard("w", 0, meta(), produced))
            .unwrap()
            .unwrap_err();
        assert_eq!(err, "record 9000 failed", "{flavour}");
        let left: Vec<_> = walk(dir.path());
        assert!(left.is_empty(), "{flavour}: {left:?}");
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
