//! `Dataset.read_ahead`, `Mixture.read_ahead` and their iterator (a module of its own: it
//! takes an `EpochPlan` of `order`, which itself takes a `Dataset` or a `Mixture`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use guideloom::publish::{
    DEFAULT_READ_AHEAD_BATCHES, DEFAULT_READ_AHEAD_BYTES, ReadAhead, ReadAheadOptions,
};
use pyo3::prelude::*;

use crate::dataset::Dataset;
use crate::errors::raise;
use crate::mixture::Mixture;
use crate::runtime;

/// The batches a `read_ahead` reads: an `EpochPlan`'s `start, start + step, ...`, or the
/// lists given (taken whole). `indices` checks one list.
fn batch_list(
    batches: &Bound<'_, PyAny>,
    start: u64,
    step: u64,
    batches_ahead: usize,
    indices: impl Fn(&Bound<'_, PyAny>) -> PyResult<Vec<u64>>,
) -> PyResult<Box<dyn Iterator<Item = Vec<u64>> + Send>> {
    if batches_ahead == 0 || step == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "batches_ahead and step must be at least 1",
        ));
    }
    if let Ok(plan) = batches.cast::<crate::order::EpochPlan>() {
        return Ok(plan.get().batches(start, step));
    }
    if start != 0 || step != 1 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "start= and step= choose batches of an EpochPlan; give the batches themselves \
             otherwise",
        ));
    }
    let mut all = Vec::new();
    for batch in batches.try_iter()? {
        all.push(indices(&batch?)?);
    }
    Ok(Box::new(all.into_iter()))
}

#[pymethods]
impl Dataset {
    /// Reads `batches` ahead of the caller: up to `batches_ahead` batches in flight or
    /// waiting, and no new one asked for past `bytes_ahead` bytes fetched and not taken. An
    /// iterator of the batches, in order: lists of decoded records, or of read-only buffers
    /// with `raw=True`. On a local root each batch is read when taken.
    ///
    /// `batches` is an iterable of lists of record indices (taken whole, at once), or an
    /// `EpochPlan`, whose batches `start`, `start + step`, ... are computed as they are
    /// fetched (a DataLoader worker's share of an epoch, in constant memory).
    #[pyo3(signature = (
        batches,
        *,
        start = 0,
        step = 1,
        batches_ahead = DEFAULT_READ_AHEAD_BATCHES,
        bytes_ahead = DEFAULT_READ_AHEAD_BYTES,
        raw = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn read_ahead(
        slf: &Bound<'_, Self>,
        batches: &Bound<'_, PyAny>,
        start: u64,
        step: u64,
        batches_ahead: usize,
        bytes_ahead: u64,
        raw: bool,
    ) -> PyResult<ReadAheadIter> {
        let this: &Dataset = slf.get();
        let batches = batch_list(batches, start, step, batches_ahead, |b| this.indices(b))?;
        let dataset = this.current(slf.py())?;
        let options = ReadAheadOptions::default()
            .with_batches(batches_ahead)
            .with_bytes(bytes_ahead);
        let ahead = runtime::detached(slf.py(), move || Ok(dataset.read_ahead(batches, options)?))?;
        Ok(ReadAheadIter {
            owner: Owner::Dataset(slf.clone().unbind()),
            ahead: Mutex::new(Some(Ahead::Dataset(ahead))),
            raw,
            pid: runtime::pid(),
        })
    }
}

#[pymethods]
impl Mixture {
    /// Reads `batches` (of ids) ahead of the caller as `Dataset.read_ahead` does: each remote
    /// dataset keeps up to `batches_ahead` of its shares in flight or waiting, within about
    /// `bytes_ahead` bytes shared among them; local datasets read their share when the batch
    /// is taken. Records decode as their dataset decodes (buffers with `raw=True`).
    #[pyo3(signature = (
        batches,
        *,
        start = 0,
        step = 1,
        batches_ahead = DEFAULT_READ_AHEAD_BATCHES,
        bytes_ahead = DEFAULT_READ_AHEAD_BYTES,
        raw = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn read_ahead(
        slf: &Bound<'_, Self>,
        batches: &Bound<'_, PyAny>,
        start: u64,
        step: u64,
        batches_ahead: usize,
        bytes_ahead: u64,
        raw: bool,
    ) -> PyResult<ReadAheadIter> {
        let this: &Mixture = slf.get();
        let batches = batch_list(batches, start, step, batches_ahead, |b| this.ids(b))?;
        // The ids of the batches handed to the read-ahead, in order: each batch's records
        // decode by their own dataset's format.
        let taken: Arc<Mutex<VecDeque<Vec<u64>>>> = Arc::default();
        let log = Arc::clone(&taken);
        let batches = Box::new(batches.inspect(move |b| {
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(b.clone());
        }));
        let mixture = this.facade(slf.py())?;
        let ahead = runtime::detached(slf.py(), move || {
            Ok(mixture.read_ahead(batches, batches_ahead, bytes_ahead))
        })?;
        Ok(ReadAheadIter {
            owner: Owner::Mixture(slf.clone().unbind(), taken),
            ahead: Mutex::new(Some(Ahead::Mixture(ahead))),
            raw,
            pid: runtime::pid(),
        })
    }
}

/// What reads ahead.
enum Ahead {
    Dataset(ReadAhead),
    Mixture(guideloom::format::ReadAheadBatches<guideloom::Error>),
}

impl Ahead {
    fn next(&mut self) -> Option<Result<Vec<Bytes>, crate::errors::Error>> {
        match self {
            Ahead::Dataset(a) => a.next().map(|r| r.map_err(Into::into)),
            Ahead::Mixture(a) => a.next().map(|r| r.map_err(Into::into)),
        }
    }

    fn held_bytes(&self) -> u64 {
        match self {
            Ahead::Dataset(a) => a.held_bytes(),
            // Each remote dataset bounds its own share; the sum is not tracked.
            Ahead::Mixture(_) => 0,
        }
    }
}

/// Who decodes the records.
enum Owner {
    Dataset(Py<Dataset>),
    /// With the ids of the batches handed to the read-ahead and not yet taken.
    Mixture(Py<Mixture>, Arc<Mutex<VecDeque<Vec<u64>>>>),
}

/// The batches of `Dataset.read_ahead` or `Mixture.read_ahead`, in order; closing it (or
/// dropping it) cancels what is in flight.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct ReadAheadIter {
    owner: Owner,
    ahead: Mutex<Option<Ahead>>,
    raw: bool,
    /// The process that made it: its fetching task runs on that process's runtime, which a
    /// forked child does not have.
    pid: u32,
}

#[pymethods]
impl ReadAheadIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if runtime::pid() != self.pid {
            return Err(raise(
                "GuideloomError",
                "a read_ahead iterator cannot cross a fork: call read_ahead in the process that \
                 reads (e.g. inside the DataLoader worker)",
            ));
        }
        let got = runtime::detached(py, || {
            let mut ahead = self.ahead.lock().unwrap_or_else(|p| p.into_inner());
            let Some(reader) = ahead.as_mut() else {
                return Ok(None);
            };
            let next = reader.next();
            if next.is_none() {
                *ahead = None;
            }
            next.transpose()
        })?;
        let ids = match &self.owner {
            Owner::Mixture(_, taken) if got.is_some() => {
                taken.lock().unwrap_or_else(|p| p.into_inner()).pop_front()
            }
            _ => None,
        };
        let Some(records) = got else {
            return Ok(None);
        };
        if self.raw {
            let buffers: Vec<pyo3_bytes::PyBytes> =
                records.into_iter().map(pyo3_bytes::PyBytes::new).collect();
            return Ok(Some(buffers.into_pyobject(py)?.into_any()));
        }
        match &self.owner {
            Owner::Dataset(dataset) => Ok(Some(
                dataset.bind(py).get().decode_all(py, records)?.into_any(),
            )),
            Owner::Mixture(mixture, _) => {
                let ids = ids.unwrap_or_default();
                Ok(Some(
                    mixture
                        .bind(py)
                        .get()
                        .decode_ids(py, &ids, records)?
                        .into_any(),
                ))
            }
        }
    }

    /// Payload bytes fetched ahead and not yet taken.
    #[getter]
    fn held_bytes(&self) -> u64 {
        self.ahead
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, Ahead::held_bytes)
    }

    /// Stops reading ahead: what is in flight is cancelled, and the iterator ends.
    fn close(&self) {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
