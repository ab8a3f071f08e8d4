//! The loader's source trait; documented on [`RecordSource`].

use std::sync::Arc;

use bytes::Bytes;

/// Anything whose records can be fetched by global index, in batches: a source for the
/// loader.
///
/// The trait the facade's loader (`guideloom::Loader`) reads from. It lives here, in the
/// codec crate below every reader, so that every layer's readers implement it: a published
/// snapshot (`guideloom::Dataset`, guideloom-publish), the storages' sync readers
/// (`DocumentReader`, `StreamReader`, `StreamWithMetaReader`, in guideloom-storage),
/// in-memory sources in tests. The loader then reads a plain storage directory as well as a
/// published root.
///
/// Record indices are global, `0 .. len()`. Implementations are called from the loader's
/// worker threads, one [`get_many`](Self::get_many) per batch.
///
/// ```
/// use bytes::Bytes;
/// use guideloom_format::RecordSource;
///
/// /// Records `"0"`, `"1"`, ... computed on demand.
/// struct Numbers(u64);
///
/// impl RecordSource for Numbers {
///     type Error = std::io::Error;
///     fn len(&self) -> u64 {
///         self.0
///     }
///     fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>, std::io::Error> {
///         Ok(indices.iter().map(|i| Bytes::from(i.to_string())).collect())
///     }
/// }
///
/// let source = Numbers(10);
/// assert_eq!(source.get_many(&[3, 7])?, ["3", "7"]);
/// assert_eq!(source.shard_bounds(), None);
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait RecordSource: Send + Sync + 'static {
    /// What [`get_many`](Self::get_many) fails with. The facade's loader hands it to the
    /// caller as `guideloom::Error`: this crate's [`Error`](crate::Error) as
    /// `guideloom::Error::Format`, a `guideloom::Error` unchanged, any other error as
    /// `guideloom::Error::Fetch` with the error as its source.
    type Error: std::error::Error + Send + Sync + 'static;

    /// A short name for error messages.
    fn name(&self) -> String {
        "record source".to_owned()
    }

    /// The number of records.
    fn len(&self) -> u64;

    /// `true` when there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw bytes of records `indices` (any order, repeats allowed, each `< len()`), in
    /// the same order. One call per batch: implementations should batch their reads (one
    /// request per shard touched).
    fn get_many(&self, indices: &[u64]) -> std::result::Result<Vec<Bytes>, Self::Error>;

    /// Cumulative record starts of the shards, `[0, len(shard 0), ..., len()]` (a
    /// [`ShardTable::starts`](crate::ShardTable::starts)), when the source is sharded. The
    /// loader's shard-window shuffle reads it.
    fn shard_bounds(&self) -> Option<&[u64]> {
        None
    }

    /// `true` for sources where each read is a network request (object stores, HTTP): then
    /// the loader's automatic shuffle mode picks the shard-window shuffle.
    fn is_remote(&self) -> bool {
        false
    }

    /// `batches` read ahead of their taker, for a source whose reads wait on a network: an
    /// iterator of each batch's records (as [`get_many`](Self::get_many) would give them),
    /// in order, keeping up to `depth` batches in flight or waiting and about `bytes` of
    /// payload fetched and not yet taken. `None` (the default) when the source reads each
    /// batch as it is asked; the loader then calls `get_many` per batch.
    fn read_ahead(
        &self,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<ReadAheadBatches<Self::Error>> {
        let _ = (batches, depth, bytes);
        None
    }
}

/// What [`RecordSource::read_ahead`] returns: each batch's records, in order.
pub type ReadAheadBatches<E> = Box<dyn Iterator<Item = std::result::Result<Vec<Bytes>, E>> + Send>;

impl<S: RecordSource + ?Sized> RecordSource for Arc<S> {
    type Error = S::Error;

    fn name(&self) -> String {
        (**self).name()
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn get_many(&self, indices: &[u64]) -> std::result::Result<Vec<Bytes>, S::Error> {
        (**self).get_many(indices)
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        (**self).shard_bounds()
    }
    fn is_remote(&self) -> bool {
        (**self).is_remote()
    }
    fn read_ahead(
        &self,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<ReadAheadBatches<S::Error>> {
        (**self).read_ahead(batches, depth, bytes)
    }
}
