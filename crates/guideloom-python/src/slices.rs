//! What the readers' Python methods share: Python index arithmetic (negative indices count
//! from the end, slices with steps) and the slot that holds a reader's engine until
//! `close()`.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyIterator, PySlice};

use crate::errors::raise;

/// Python index `i` (negative from the end) as an index into `0..len`, `None` out of range.
pub(crate) fn resolve(i: i64, len: u64) -> Option<u64> {
    let resolved = if i < 0 {
        i128::from(i) + i128::from(len)
    } else {
        i128::from(i)
    };
    u64::try_from(resolved).ok().filter(|&index| index < len)
}

/// Each index of the iterable `indices`, resolved by `one`.
pub(crate) fn resolve_each(
    indices: &Bound<'_, PyAny>,
    mut one: impl FnMut(i64) -> PyResult<u64>,
) -> PyResult<Vec<u64>> {
    PyIterator::from_object(indices)?
        .map(|i| one(i?.extract::<i64>()?))
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
        // The arithmetic never wraps.
        assert_eq!(
            resolve(i64::MIN + 1, u64::MAX),
            Some(u64::MAX - (1 << 63) + 1)
        );
        assert_eq!(resolve(i64::MIN, 0), None);
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
