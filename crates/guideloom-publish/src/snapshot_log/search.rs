//! The sans-IO search for the latest log entry, fed by HEAD requests or by one listing.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::manifest::LOG_PREFIX;

/// The sans-IO search for the latest log entry: ask [`next`](Self::next) which sequence
/// number to test, tell [`observe`](Self::observe) whether it exists, until `next` is `None`;
/// then [`latest`](Self::latest) is the answer.
///
/// For a dense log of latest `n` it tests `2 * (floor(log2 n) + 1)` numbers (2 for `n = 1`,
/// 14 for `n = 100`), 1 when nothing is published. Whatever the existence pattern, the answer
/// is `0` (nothing) or an entry that exists and whose successor does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LatestSearch {
    /// Highest number known to exist (0: none).
    lo: u64,
    /// Lowest number above `lo` known to be absent.
    hi: Option<u64>,
    tests: u32,
}

impl LatestSearch {
    pub(crate) fn new() -> Self {
        LatestSearch {
            lo: 0,
            hi: None,
            tests: 0,
        }
    }

    /// The next sequence number to test, or `None` when the search is over.
    pub(crate) fn next(&self) -> Result<Option<u64>> {
        match self.hi {
            None if self.lo == 0 => Ok(Some(1)),
            None => self
                .lo
                .checked_mul(2)
                .map(Some)
                .ok_or_else(|| Error::corrupt(LOG_PREFIX, "sequence numbers exhausted")),
            Some(hi) if hi - self.lo > 1 => Ok(Some(self.lo + (hi - self.lo) / 2)),
            Some(_) => Ok(None),
        }
    }

    /// Records whether entry `seq` (the last [`next`](Self::next)) exists.
    pub(crate) fn observe(&mut self, seq: u64, exists: bool) {
        self.tests += 1;
        if exists {
            self.lo = seq;
        } else {
            self.hi = Some(seq);
        }
    }

    /// The latest entry found (`None`: nothing published).
    pub(crate) fn latest(&self) -> Option<u64> {
        (self.lo > 0).then_some(self.lo)
    }

    /// How many numbers were tested.
    pub(crate) fn tests(&self) -> u32 {
        self.tests
    }

    /// Runs the search over a known set of entries (one listing).
    pub(crate) fn over<V>(entries: &BTreeMap<u64, V>) -> Result<Option<u64>> {
        let mut search = LatestSearch::new();
        while let Some(seq) = search.next()? {
            search.observe(seq, entries.contains_key(&seq));
        }
        Ok(search.latest())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search's answer, for any existence pattern, is 0 with entry 1 absent, or an entry
    /// that exists and whose successor does not; for a dense log it is the newest entry.
    #[test]
    fn the_search_settles_on_an_entry_without_a_successor() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for case in 0..2_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let n = rng % 300;
            let density = (rng >> 20) % 100;
            let mut entries = BTreeMap::new();
            let mut x = rng;
            for seq in 1..=n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if case % 3 == 0 || (x >> 33) % 100 < density {
                    entries.insert(seq, ());
                }
            }
            let got = LatestSearch::over(&entries).unwrap();
            match got {
                None => assert!(!entries.contains_key(&1), "{entries:?}"),
                Some(s) => {
                    assert!(entries.contains_key(&s) && !entries.contains_key(&(s + 1)));
                }
            }
            if case % 3 == 0 {
                assert_eq!(got, (n > 0).then_some(n), "dense log of {n}");
            }
        }
    }
}
