//! `Dataset.read_ahead` and its iterator (a module of its own: it takes an `EpochPlan` of
//! `order`, which itself takes a `Dataset`).

use std::sync::Mutex;

use guideloom::publish::{
    DEFAULT_READ_AHEAD_BATCHES, DEFAULT_READ_AHEAD_BYTES, ReadAhead, ReadAheadOptions,
};
use pyo3::prelude::*;

use crate::dataset::Dataset;
use crate::errors::raise;
use crate::runtime;

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
        if batches_ahead == 0 || step == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "batches_ahead and step must be at least 1",
            ));
        }
        let this: &Dataset = slf.get();
        let batches: Box<dyn Iterator<Item = Vec<u64>> + Send> =
            if let Ok(plan) = batches.cast::<crate::order::EpochPlan>() {
                plan.get().batches(start, step)
            } else if start != 0 || step != 1 {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "start= and step= choose batches of an EpochPlan; give the batches themselves \
                     otherwise",
                ));
            } else {
                let mut all = Vec::new();
                for batch in batches.try_iter()? {
                    all.push(this.indices(&batch?)?);
                }
                Box::new(all.into_iter())
            };
        let dataset = this.current(slf.py())?;
        let options = ReadAheadOptions::default()
            .with_batches(batches_ahead)
            .with_bytes(bytes_ahead);
        let ahead = runtime::detached(slf.py(), move || Ok(dataset.read_ahead(batches, options)?))?;
        Ok(ReadAheadIter {
            dataset: slf.clone().unbind(),
            ahead: Mutex::new(Some(ahead)),
            raw,
            pid: runtime::pid(),
        })
    }
}

/// The batches of [`Dataset::read_ahead`], in order; closing it (or dropping it) cancels
/// what is in flight.
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct ReadAheadIter {
    dataset: Py<Dataset>,
    ahead: Mutex<Option<ReadAhead>>,
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
            Ok(next.transpose()?)
        })?;
        let Some(records) = got else {
            return Ok(None);
        };
        if self.raw {
            let buffers: Vec<pyo3_bytes::PyBytes> =
                records.into_iter().map(pyo3_bytes::PyBytes::new).collect();
            return Ok(Some(buffers.into_pyobject(py)?.into_any()));
        }
        let dataset = self.dataset.bind(py).get();
        Ok(Some(dataset.decode_all(py, records)?.into_any()))
    }

    /// Payload bytes fetched ahead and not yet taken.
    #[getter]
    fn held_bytes(&self) -> u64 {
        self.ahead
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, ReadAhead::held_bytes)
    }

    /// Stops reading ahead: what is in flight is cancelled, and the iterator ends.
    fn close(&self) {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
