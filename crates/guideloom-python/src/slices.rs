//! What the readers' Python methods share: Python index arithmetic (negative indices count
//! from the end, slices with steps) and the slot that holds a reader's engine until
//! `close()`.

use std::sync::Mutex;

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PySlice};

use crate::errors::raise;

/// A Python index argument: any integer (an `int`, a numpy integer, anything with
/// `__index__`), however large. Values past the 128-bit range keep their sign and are past
/// every length, so an out-of-range index is an `IndexOutOfRangeError` and never the
/// `OverflowError` of a fixed-width conversion; a non-integer is a `TypeError`.
#[derive(Debug)]
pub(crate) struct PyIndex {
    /// The value, saturated at `i128::MIN` / `i128::MAX`.
    pub(crate) value: i128,
    /// The caller's object when `value` is saturated (for the error's message and `index`).
    original: Option<Py<PyAny>>,
}

impl<'a, 'py> FromPyObject<'a, 'py> for PyIndex {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        // The common case first: one C-long conversion (it calls `__index__`).
        let err = match obj.extract::<i64>() {
            Ok(i) => {
                return Ok(PyIndex {
                    value: i128::from(i),
                    original: None,
                });
            }
            Err(err) => err,
        };
        if !err.is_instance_of::<PyOverflowError>(obj.py()) {
            return Err(err);
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(PyIndex {
                value: i128::from(u),
                original: None,
            });
        }
        let negative = obj.lt(0)?;
        Ok(PyIndex {
            value: if negative { i128::MIN } else { i128::MAX },
            original: Some(obj.to_owned().unbind()),
        })
    }
}

impl PyIndex {
    /// The index as Python wrote it, for messages.
    pub(crate) fn shown(&self, py: Python<'_>) -> String {
        match &self.original {
            Some(obj) => obj
                .bind(py)
                .str()
                .map_or_else(|_| self.value.to_string(), |s| s.to_string()),
            None => self.value.to_string(),
        }
    }

    /// The index as a Python `int` (the caller's value, even past 128 bits).
    pub(crate) fn to_object(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.original {
            Some(obj) => Ok(obj.clone_ref(py)),
            None => Ok(self.value.into_pyobject(py)?.into_any().unbind()),
        }
    }

    /// This index resolved against `len` ([`resolve`]).
    pub(crate) fn resolve(&self, len: u64) -> Option<u64> {
        resolve(self.value, len)
    }
}

/// Python index `i` (negative from the end) as an index into `0..len`, `None` out of range.
pub(crate) fn resolve(i: i128, len: u64) -> Option<u64> {
    let resolved = if i < 0 {
        i.checked_add(i128::from(len))?
    } else {
        i
    };
    u64::try_from(resolved).ok().filter(|&index| index < len)
}

/// The `IndexOutOfRangeError` of `index` in a sequence of `len` `item`s (`"record"`,
/// `"document"`) called `sequence` (`"dataset"`, `"storage"`), with `index` and `len` as
/// attributes.
pub(crate) fn index_error(
    py: Python<'_>,
    index: &PyIndex,
    len: u64,
    item: &str,
    sequence: &str,
) -> PyErr {
    let err = raise(
        "IndexOutOfRangeError",
        format!(
            "{item} {} is out of range for a {sequence} of {len} {item}s",
            index.shown(py)
        ),
    );
    let value = err.value(py);
    if let Ok(i) = index.to_object(py) {
        let _ = value.setattr("index", i);
    }
    let _ = value.setattr("len", len);
    err
}

/// Each index of the iterable `indices`, resolved by `one`.
pub(crate) fn resolve_each(
    indices: &Bound<'_, PyAny>,
    mut one: impl FnMut(&PyIndex) -> PyResult<u64>,
) -> PyResult<Vec<u64>> {
    PyIterator::from_object(indices)?
        .map(|i| one(&i?.extract::<PyIndex>()?))
        .collect()
}

/// The indices `slice` picks out of a sequence of `len` (`what`: the sequence, for the
/// error of one too long to slice on this platform).
pub(crate) fn slice_indices(
    slice: &Bound<'_, PySlice>,
    len: u64,
    what: &str,
) -> PyResult<SliceIndices> {
    let len = isize::try_from(len)
        .map_err(|_| raise("GuideloomError", format!("the {what} is too long to slice")))?;
    let ix = slice.indices(len)?;
    Ok(SliceIndices {
        start: ix.start,
        stop: ix.stop,
        step: ix.step,
        count: ix.slicelength,
    })
}

/// A slice resolved against a length: `count` indices from `start` by `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SliceIndices {
    pub(crate) start: isize,
    pub(crate) stop: isize,
    pub(crate) step: isize,
    pub(crate) count: usize,
}

impl SliceIndices {
    /// The indices in slice order.
    pub(crate) fn to_vec(self) -> Vec<u64> {
        (0..self.count)
            .map(|k| (self.start + k as isize * self.step) as u64)
            .collect()
    }
}

/// A reader's engine until `close()`; later reads raise `GuideloomError`.
pub(crate) struct Slot<T>(Mutex<Option<T>>);

impl<T: Clone> Slot<T> {
    /// A slot holding `engine`.
    pub(crate) fn new(engine: T) -> Self {
        Slot(Mutex::new(Some(engine)))
    }

    /// The engine, or the error of a closed reader.
    pub(crate) fn get(&self) -> PyResult<T> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| raise("GuideloomError", "the reader is closed"))
    }

    /// Drops the engine (and the shards it holds).
    pub(crate) fn close(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        f.write_str(if open { "Slot(open)" } else { "Slot(closed)" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_indices_count_from_the_end_and_the_end_is_refused() {
        assert_eq!(resolve(-1, 10), Some(9));
        assert_eq!(resolve(0, 10), Some(0));
        assert_eq!(resolve(10, 10), None);
        assert_eq!(resolve(-11, 10), None);
        assert_eq!(resolve(0, 0), None);
        // The arithmetic never wraps, whatever the size of the index.
        assert_eq!(
            resolve(i128::from(i64::MIN) + 1, u64::MAX),
            Some(u64::MAX - (1 << 63) + 1)
        );
        assert_eq!(resolve(i128::from(i64::MIN), 0), None);
        assert_eq!(resolve(1 << 64, u64::MAX), None);
        assert_eq!(resolve(-(1 << 64), u64::MAX), None);
        assert_eq!(resolve(i128::MIN, u64::MAX), None);
        assert_eq!(resolve(i128::MAX, u64::MAX), None);
        assert_eq!(
            resolve(i128::from(u64::MAX) - 1, u64::MAX),
            Some(u64::MAX - 1)
        );
    }

    #[test]
    fn a_slice_walks_its_step() {
        let forward = SliceIndices {
            start: 1,
            stop: 8,
            step: 3,
            count: 3,
        };
        assert_eq!(forward.to_vec(), vec![1, 4, 7]);
        let backward = SliceIndices {
            start: 4,
            stop: -1,
            step: -2,
            count: 3,
        };
        assert_eq!(backward.to_vec(), vec![4, 2, 0]);
    }

    #[test]
    fn a_closed_slot_stays_closed() {
        let slot = Slot::new(7_u8);
        assert!(format!("{slot:?}").contains("open"));
        slot.close();
        assert_eq!(format!("{slot:?}"), "Slot(closed)");
    }
}
