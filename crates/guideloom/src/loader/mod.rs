//! The training-loop reader, [`Loader`], and what it hands out (re-exported at the crate
//! root); its order is the crate's public [`order`](crate::order) namespace.
//!
//! Layout: the loader itself here; [`MemorySource`] (`source.rs`); the options and the
//! values the loader hands out (`options.rs`); the global sample order (`order.rs`); the
//! pure per-rank plan of an epoch (`plan.rs`); the worker pool with its bounded prefetch
//! behind an [`Epoch`] (`epoch.rs`); token windows over a stream dataset as records
//! ([`TokenWindows`], `windows.rs`); whole documents packed best-fit into windows
//! ([`Packing`], `packing.rs`) and those windows as records ([`PackedWindows`], `packed.rs`).

mod epoch;
mod mixture;
mod options;
pub(crate) mod order;
mod packed;
mod packing;
mod plan;
mod source;
mod windows;

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{Format, RecordSource};

use crate::error::{BoxError, Error, Result};

pub use epoch::Epoch;
pub use mixture::{MAX_PHASES, Mixture, Ramp, SALT_SOURCES, Take, WeightSchedule};
pub use options::{Batch, Equalize, LoaderOptions, LoaderState};
pub use packed::{PackedWindow, PackedWindows};
pub use packing::{DEFAULT_PACK_BUFFER, PackOptions, Packing, SALT_PACK};
pub use plan::{EpochPlan, epoch_len};
pub use source::MemorySource;
pub use windows::TokenWindows;

type DecodeFn<T> = dyn Fn(u64, Bytes) -> std::result::Result<T, BoxError> + Send + Sync;

/// A source as the loader holds it: its errors already the facade's [`Error`].
type DynSource = dyn RecordSource<Error = Error>;

/// A source with its errors turned into the facade's [`Error`] (see [`fetch_error`]).
struct Adapted<S>(S);

/// The facade's [`Error`] for a source's error: the facade's and the lower crates' errors
/// keep their variant ([`Error::Format`], [`Error::Publish`], [`Error::Io`]); any other
/// error becomes [`Error::Fetch`] naming the source, with the error as its source.
fn fetch_error<E>(source_name: impl FnOnce() -> String, error: E) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    let boxed: BoxError = Box::new(error);
    let boxed = match boxed.downcast::<Error>() {
        Ok(e) => return *e,
        Err(other) => other,
    };
    let boxed = match boxed.downcast::<guideloom_format::Error>() {
        Ok(e) => return Error::Format(*e),
        Err(other) => other,
    };
    let boxed = match boxed.downcast::<guideloom_publish::Error>() {
        Ok(e) => return Error::Publish(*e),
        Err(other) => other,
    };
    match boxed.downcast::<guideloom_io::Error>() {
        Ok(e) => Error::Io(*e),
        Err(other) => Error::fetch(source_name(), other),
    }
}

impl<S: RecordSource> RecordSource for Adapted<S> {
    type Error = Error;

    fn name(&self) -> String {
        self.0.name()
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        self.0
            .get_many(indices)
            .map_err(|e| fetch_error(|| self.0.name(), e))
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        self.0.shard_bounds()
    }
    fn is_remote(&self) -> bool {
        self.0.is_remote()
    }
    fn read_ahead(
        &self,
        batches: Box<dyn Iterator<Item = Vec<u64>> + Send>,
        depth: usize,
        bytes: u64,
    ) -> Option<guideloom_format::ReadAheadBatches<Error>> {
        let ahead = self.0.read_ahead(batches, depth, bytes)?;
        let name = self.0.name();
        Some(Box::new(ahead.map(move |got| {
            got.map_err(|e| fetch_error(|| name.clone(), e))
        })))
    }
}

/// The training-loop reader: shuffled, batched, multi-threaded, multi-rank and resumable.
///
/// A loader reads a [`RecordSource`] (a [`Dataset`](crate::Dataset), or anything that can
/// fetch records by index) and yields [`Batch`]es of decoded records for one epoch at a time
/// ([`Loader::epoch`], [`Loader::resume`]). The order is a pure function of
/// `(seed, epoch, position)` ([`crate::order`]), the same on every machine and whatever the
/// number of ranks or workers; ranks take a deterministic interleave of it. `docs/loader.md`
/// specifies the order, the rank split, equalisation, resume and the memory bound.
///
/// Cheap to keep; each epoch starts its own workers.
///
/// ```
/// use guideloom::{Bytes, Loader, LoaderOptions, MemorySource};
///
/// let records: Vec<Bytes> = (0..10u8).map(|i| Bytes::from(vec![i])).collect();
/// let source = MemorySource::new(records);
/// let options = LoaderOptions::new(4).with_seed(7).with_workers(2);
/// // The decode function gets (record index, bytes); any error type converting to BoxError.
/// let loader = Loader::new(source, options, |_index, bytes: Bytes| {
///     Ok::<u8, guideloom::Error>(bytes[0])
/// })?;
///
/// let mut seen = Vec::new();
/// for batch in loader.epoch(0)? {
///     seen.extend(batch?.records);
/// }
/// seen.sort_unstable();
/// assert_eq!(seen, (0..10).collect::<Vec<u8>>()); // every record once, shuffled
/// # Ok::<(), guideloom::Error>(())
/// ```
pub struct Loader<T> {
    source: Arc<DynSource>,
    decode: Arc<DecodeFn<T>>,
    options: LoaderOptions,
    /// A mixture's order ([`Loader::mixture`]): positions go to its sources by weight.
    mixture: Option<Arc<mixture::MixOrder>>,
}

impl<T> fmt::Debug for Loader<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader")
            .field("source", &self.source.name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Loader<T> {
    /// A loader decoding each record with `decode(index, bytes)`.
    ///
    /// `source` is any [`RecordSource`]: a [`Dataset`](crate::Dataset), a [`MemorySource`],
    /// a storage's sync reader ([`DocumentReader`](crate::storage::DocumentReader), the
    /// stream readers), or your own. Its errors reach the batches as the facade's
    /// [`Error`]: an [`Error`] as it is, the lower crates' errors as [`Error::Format`],
    /// [`Error::Publish`] or [`Error::Io`], any other as [`Error::Fetch`] naming the source.
    pub fn new<S, D, E>(source: S, options: LoaderOptions, decode: D) -> Result<Self>
    where
        S: RecordSource,
        D: Fn(u64, Bytes) -> std::result::Result<T, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        options.validate()?;
        Ok(Loader {
            source: Arc::new(Adapted(source)),
            decode: Arc::new(move |i, b| decode(i, b).map_err(Into::into)),
            options,
            mixture: None,
        })
    }

    /// A loader over a weighted [`Mixture`] of sources, decoding each record with
    /// `decode(id, bytes)` (`mixture.locate(id)` tells which source and record an id is).
    ///
    /// An epoch is the mixture's epoch size in positions; each position is one source's next
    /// sample, placed by weight (docs/loader.md, "Weighted mixtures"); within a source,
    /// samples walk through shuffled passes over its records, each pass the single-source
    /// order of [`LoaderOptions::shuffle`] (shard windows for a remote source under
    /// [`ShuffleMode::Auto`](crate::ShuffleMode::Auto)). Batches, ranks, workers, equalisation and
    /// [`resume`](Self::resume) are the single-source loader's, so a state is still three
    /// integers and resumes with any worker count or world size.
    ///
    /// # Errors
    /// [`Error::InvalidOptions`] for a mixture with no source, a bad weight, count or
    /// schedule, a range outside its source, or a source with no records but a weight.
    pub fn mixture<D, E>(mixture: Mixture, options: LoaderOptions, decode: D) -> Result<Self>
    where
        D: Fn(u64, Bytes) -> std::result::Result<T, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        options.validate()?;
        let order = mixture.build(options.seed, options.shuffle, options.batch_size)?;
        Ok(Loader {
            source: Arc::new(mixture::MixtureReads::new(&mixture)),
            decode: Arc::new(move |i, b| decode(i, b).map_err(Into::into)),
            options,
            mixture: Some(Arc::new(order)),
        })
    }

    /// A loader decoding records with a record [`Format`] (e.g. `CborFormat::<T>::new()`).
    pub fn with_format<S, F>(source: S, options: LoaderOptions, format: F) -> Result<Self>
    where
        S: RecordSource,
        F: Format<Record = T>,
    {
        Loader::new(source, options, move |_i, b| format.decode(b))
    }

    /// The options.
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// The plan of `epoch` for this rank from position `start` (no IO).
    pub fn plan(&self, epoch: u64, start: u64) -> EpochPlan {
        EpochPlan::new(
            &self.options,
            &*self.source,
            self.mixture.as_ref(),
            epoch,
            start,
        )
    }

    /// Starts `epoch` from its beginning.
    pub fn epoch(&self, epoch: u64) -> Result<Epoch<T>> {
        self.start(self.plan(epoch, 0))
    }

    /// Continues from `state` (taken from [`Epoch::state`], possibly by a run with another
    /// worker count or world size): delivers exactly the batches not yet delivered, in the
    /// same order, without replaying the epoch. The seed must match and `consumed` must be a
    /// multiple of the batch size (or the end of the epoch).
    pub fn resume(&self, state: &LoaderState) -> Result<Epoch<T>> {
        if state.seed != self.options.seed {
            return Err(Error::Resume {
                reason: format!(
                    "state has seed {}, loader has seed {}",
                    state.seed, self.options.seed
                ),
            });
        }
        let plan = self.plan(state.epoch, state.consumed);
        if !state.consumed.is_multiple_of(self.options.batch_size) && state.consumed < plan.total {
            return Err(Error::Resume {
                reason: format!(
                    "consumed {} is not a multiple of the batch size {}",
                    state.consumed, self.options.batch_size
                ),
            });
        }
        self.start(plan)
    }
}
