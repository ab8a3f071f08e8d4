//! Read-ahead: the batches a reader will ask for next, fetched while it works on this one.
//!
//! A training loop asks for batch *k*, waits one round trip, then asks for *k + 1*: on a
//! store 20 ms away that is 50 batches a second whatever the bandwidth. [`ReadAhead`] takes
//! the whole list of batches up front and keeps up to [`ReadAheadOptions::batches`] of them
//! in flight (or fetched and waiting), so throughput is set by bandwidth and request
//! concurrency instead. Batches come back in the order given. Memory is bounded twice: by the
//! number of batches, and by [`ReadAheadOptions::bytes`]: a new batch is asked for only while
//! the payload fetched and not yet taken, plus the batches in flight counted at the mean size
//! of those fetched so far, stays within it (the first batch goes alone, to learn that size;
//! a batch larger than the bound still goes, alone). Batches of very uneven sizes can pass
//! the bound by the difference.
//!
//! With a node cache, the read-ahead also fills the shards of batches further down the list
//! before it reaches them (`lookahead.rs`): the next shard window's, under the window
//! shuffle.
//!
//! On a local root there is nothing to hide: each batch is read when it is taken, on the
//! taker's thread, through the dataset's synchronous fast path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use super::Dataset;
use super::lookahead::ShardLookahead;
use crate::error::{Error, Result};

/// How far a [`ReadAhead`] reads ahead.
///
/// ```
/// use guideloom_publish::ReadAheadOptions;
///
/// let ahead = ReadAheadOptions::default().with_batches(32).with_bytes(256 << 20);
/// assert_eq!((ahead.batches(), ahead.bytes()), (32, 256 << 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadAheadOptions {
    batches: usize,
    bytes: u64,
}

/// [`ReadAheadOptions::batches`] by default.
pub const DEFAULT_READ_AHEAD_BATCHES: usize = 16;

/// [`ReadAheadOptions::bytes`] by default: 64 MiB.
pub const DEFAULT_READ_AHEAD_BYTES: u64 = 64 << 20;

impl Default for ReadAheadOptions {
    fn default() -> Self {
        ReadAheadOptions {
            batches: DEFAULT_READ_AHEAD_BATCHES,
            bytes: DEFAULT_READ_AHEAD_BYTES,
        }
    }
}

impl ReadAheadOptions {
    /// Batches in flight or fetched and not yet taken, at most (at least 1).
    #[must_use]
    pub fn with_batches(mut self, batches: usize) -> Self {
        self.batches = batches.max(1);
        self
    }

    /// Payload bytes fetched and not yet taken past which no new batch is asked for.
    #[must_use]
    pub fn with_bytes(mut self, bytes: u64) -> Self {
        self.bytes = bytes;
        self
    }

    /// The batch bound.
    pub fn batches(&self) -> usize {
        self.batches
    }

    /// The byte bound.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// The batches of a [`Dataset::read_ahead`], in the order asked; an iterator (each `next`
/// blocks until its batch is there) and [`next_async`](ReadAhead::next_async) for async
/// code. A failed batch is an `Err` in its place; the batches after it still come. Dropping
/// it cancels what is in flight.
pub struct ReadAhead {
    mode: Mode,
}

enum Mode {
    /// A remote root: a task on the shared runtime fetches ahead.
    Ahead {
        rx: mpsc::Receiver<(Result<Vec<Bytes>>, u64)>,
        held: Arc<Held>,
        task: JoinHandle<()>,
    },
    /// A local root, or a remote one whose shards are all in the node cache: each batch
    /// read when taken, on the taker's thread.
    Here {
        dataset: Dataset,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
    },
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match &self.mode {
            Mode::Ahead { held, .. } => format!("ahead, {} bytes held", held.bytes()),
            Mode::Here { .. } => "here".to_owned(),
        };
        f.debug_struct("ReadAhead").field("mode", &mode).finish()
    }
}

/// Payload fetched and not yet taken, and the wake-up of a driver waiting for it to fall.
#[derive(Debug, Default)]
struct Held {
    bytes: AtomicU64,
    fell: Notify,
}

impl Held {
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    fn taken(&self, n: u64) {
        self.bytes.fetch_sub(n, Ordering::AcqRel);
        self.fell.notify_one();
    }
}

impl Dataset {
    /// Reads `batches` (each a list of record indices, as [`get_many`](Self::get_many)
    /// takes) ahead of their reader, within `options`; see [`ReadAhead`].
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let uri = dir.path().to_str().unwrap();
    /// use guideloom_publish::{Dataset, ReadAheadOptions};
    /// # use guideloom_publish::{PublicationOptions, PublishMode, PublishRequest, Registry, Root, RootOptions, StoreOptions};
    /// # use guideloom_format::ShardMetadata;
    /// # let bridge = guideloom_io::bridge::Bridge::shared()?;
    /// # bridge.block_on(async {
    /// #     let store = Registry::new().resolve(uri, &StoreOptions::default())?;
    /// #     let root = Root::new(store, RootOptions::default());
    /// #     let records = (0..100u32).map(|i| i.to_le_bytes());
    /// #     let shard = root.write_shard("w", 0, ShardMetadata::new("raw", "documents"), records).await?;
    /// #     let request = PublishRequest { dataset_id: "d".into(), snapshot_id: "s".into(), shards: vec![shard], mode: PublishMode::Full, schema: None, };
    /// #     root.publish(&request, &PublicationOptions::default()).await?;
    /// #     Ok::<_, guideloom_publish::Error>(())
    /// # })?;
    /// let ds = Dataset::open(uri)?;
    /// let batches: Vec<Vec<u64>> = (0..10).map(|k| (k * 10..k * 10 + 10).collect()).collect();
    /// let mut n = 0;
    /// for batch in ds.read_ahead(batches, ReadAheadOptions::default())? {
    ///     let batch = batch?;
    ///     assert_eq!(&batch[0][..], &(n * 10u32).to_le_bytes());
    ///     n += 1;
    /// }
    /// assert_eq!(n, 10);
    /// # Ok(()) }
    /// ```
    pub fn read_ahead<I>(&self, batches: I, options: ReadAheadOptions) -> Result<ReadAhead>
    where
        I: IntoIterator<Item = Vec<u64>>,
        I::IntoIter: Send + 'static,
    {
        let batches = batches.into_iter();
        // A remote root whose every shard is in the node cache (a second epoch) reads as a
        // local one: on the taker's thread, with no hop through a task and a channel.
        if !self.is_remote() || self.reads_locally() {
            return Ok(ReadAhead {
                mode: Mode::Here {
                    dataset: self.clone(),
                    batches: Box::new(batches),
                },
            });
        }
        let bridge =
            guideloom_io::bridge::Bridge::shared().map_err(|source| Error::Runtime { source })?;
        let (tx, rx) = mpsc::channel(options.batches);
        let held = Arc::new(Held::default());
        let task =
            bridge
                .handle()
                .spawn(drive(self.clone(), batches, options, tx, Arc::clone(&held)));
        Ok(ReadAhead {
            mode: Mode::Ahead { rx, held, task },
        })
    }
}

/// Keeps up to `options.batches` batches in flight or queued, in order, until every batch
/// is sent or the taker is gone; within `options.bytes`, counting the batches in flight at
/// the mean size of those fetched so far (the first one goes alone, to learn it).
async fn drive(
    dataset: Dataset,
    mut batches: impl Iterator<Item = Vec<u64>>,
    options: ReadAheadOptions,
    tx: mpsc::Sender<(Result<Vec<Bytes>>, u64)>,
    held: Arc<Held>,
) {
    let mut flight = FuturesOrdered::new();
    let mut more = true;
    let mut lookahead = ShardLookahead::new(&dataset);
    let (mut fetched, mut fetched_bytes) = (0u64, 0u64);
    loop {
        // Batches queued for the taker count against the bound as those in flight do.
        let queued = options.batches - tx.capacity();
        while more && flight.len() + queued < options.batches {
            let room = match fetched_bytes.checked_div(fetched) {
                // Nothing fetched yet: the first batch goes alone, to learn the size.
                None => flight.is_empty(),
                Some(mean) => {
                    let ahead = held.bytes() + (flight.len() as u64 + 1) * mean;
                    // Nothing held and nothing in flight: one batch goes, whatever its size.
                    ahead <= options.bytes || (flight.is_empty() && held.bytes() == 0)
                }
            };
            if !room {
                break;
            }
            let next = match &mut lookahead {
                Some(lookahead) => lookahead.next(&mut batches),
                None => batches.next(),
            };
            match next {
                Some(batch) => {
                    let ds = dataset.clone();
                    flight.push_back(async move {
                        // Shards already local (a node cache's entries) are read here, with
                        // no hop to the blocking pool.
                        match ds.try_get_many_here(&batch) {
                            Some(read) => read,
                            None => ds.get_many_async(&batch).await,
                        }
                    });
                }
                None => more = false,
            }
        }
        if let Some(lookahead) = &mut lookahead {
            lookahead.top_up(&mut batches);
        }
        if flight.is_empty() {
            if !more {
                return;
            }
            if queued >= options.batches {
                // The taker has every batch it may hold: wait for it to take one.
                match tx.reserve().await {
                    Ok(permit) => drop(permit),
                    Err(_) => return,
                }
            } else {
                // At the byte bound (so some bytes are held): wait for the taker.
                held.fell.notified().await;
            }
            continue;
        }
        let Some(got) = flight.next().await else {
            continue;
        };
        let n: u64 = got
            .as_ref()
            .map_or(0, |b| b.iter().map(|r| r.len() as u64).sum());
        fetched += 1;
        fetched_bytes += n;
        held.bytes.fetch_add(n, Ordering::AcqRel);
        if tx.send((got, n)).await.is_err() {
            return; // the ReadAhead was dropped
        }
    }
}

impl ReadAhead {
    /// The next batch, awaited.
    pub async fn next_async(&mut self) -> Option<Result<Vec<Bytes>>> {
        match &mut self.mode {
            Mode::Ahead { rx, held, .. } => {
                let (got, n) = rx.recv().await?;
                held.taken(n);
                Some(got)
            }
            Mode::Here { dataset, batches } => {
                let batch = batches.next()?;
                Some(dataset.get_many_async(&batch).await)
            }
        }
    }

    /// Payload bytes fetched and not yet taken (0 on a local root, which fetches nothing
    /// ahead).
    pub fn held_bytes(&self) -> u64 {
        match &self.mode {
            Mode::Ahead { held, .. } => held.bytes(),
            Mode::Here { .. } => 0,
        }
    }
}

impl Iterator for ReadAhead {
    type Item = Result<Vec<Bytes>>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.mode {
            Mode::Ahead { .. } => match guideloom_io::bridge::Bridge::shared() {
                Ok(bridge) => bridge.block_on(self.next_async()),
                Err(source) => Some(Err(Error::Runtime { source })),
            },
            Mode::Here { dataset, batches } => {
                let batch = batches.next()?;
                Some(dataset.get_many(&batch))
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        if let Mode::Ahead { task, .. } = &self.mode {
            task.abort();
        }
    }
}
