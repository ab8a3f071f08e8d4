//! Seeded fixtures: random file contents and the random sequences benches cycle through.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

use rand::{Rng, RngCore};

/// `len` bytes from `rng`.
pub fn random_bytes(rng: &mut impl RngCore, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    rng.fill_bytes(&mut out);
    out
}

/// Creates (or truncates) `path` with `size` bytes from `rng`, written 1 MiB at a time, and
/// syncs it. The bytes equal [`random_bytes`]`(rng, size)` from the same state whenever `size`
/// is a multiple of 4 (block RNGs hand out whole words per `fill_bytes` call), and `rng` is
/// left where a bench goes on to draw its sequences from it.
///
/// # Panics
/// If the file cannot be created, written or synced.
pub fn write_random_file(path: &Path, size: u64, rng: &mut impl RngCore) {
    let fail = |what: &str, e: std::io::Error| -> ! {
        panic!("{what} bench file {}: {e}", path.display())
    };
    let mut file = File::create(path).unwrap_or_else(|e| fail("create", e));
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = crate::us(left.min(chunk.len() as u64));
        rng.fill_bytes(&mut chunk[..n]);
        file.write_all(&chunk[..n])
            .unwrap_or_else(|e| fail("write", e));
        left -= n as u64;
    }
    file.sync_all().unwrap_or_else(|e| fail("sync", e));
}

/// The byte range of record `i` among fixed-size records of `record` bytes after a
/// `header`-byte header.
///
/// ```
/// assert_eq!(guideloom_benchkit::record_range(16, 1024, 2), 2064..3088);
/// ```
pub fn record_range(header: u64, record: u64, i: u64) -> Range<u64> {
    let start = header + i * record;
    start..start + record
}

/// `n` random record ranges ([`record_range`]) among `count` records, drawn from `rng`.
///
/// # Panics
/// If `count` is zero and `n` is not.
pub fn random_records(
    rng: &mut impl Rng,
    header: u64,
    record: u64,
    count: u64,
    n: usize,
) -> Vec<Range<u64>> {
    (0..n)
        .map(|_| record_range(header, record, rng.random_range(0..count)))
        .collect()
}

/// `n` random indices in `0..upper`, drawn from `rng`.
///
/// # Panics
/// If `upper` is zero and `n` is not.
pub fn random_indices(rng: &mut impl Rng, upper: u64, n: usize) -> Vec<u64> {
    (0..n).map(|_| rng.random_range(0..upper)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn random_file_matches_random_bytes_and_leaves_the_rng_in_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let size = (1u64 << 20) + 4100;
        let mut a = StdRng::seed_from_u64(7);
        write_random_file(&path, size, &mut a);
        let mut b = StdRng::seed_from_u64(7);
        let want = random_bytes(&mut b, crate::us(size));
        assert_eq!(std::fs::read(&path).unwrap(), want);
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(
            want,
            random_bytes(&mut StdRng::seed_from_u64(8), want.len())
        );
    }

    #[test]
    fn random_records_are_seeded_and_lie_on_record_boundaries() {
        let draw = || random_records(&mut StdRng::seed_from_u64(11), 16, 1024, 4096, 500);
        let ranges = draw();
        assert_eq!(ranges, draw(), "the same seed gives the same sequence");
        assert_eq!(ranges.len(), 500);
        for r in &ranges {
            assert_eq!(r.end - r.start, 1024);
            assert_eq!((r.start - 16) % 1024, 0);
            assert!(r.end <= 16 + 4096 * 1024);
        }
        assert!(
            ranges.iter().any(|r| *r != ranges[0]),
            "not one record over and over"
        );
    }

    #[test]
    fn random_indices_stay_below_the_bound() {
        let idx = random_indices(&mut StdRng::seed_from_u64(17), 10, 1000);
        assert_eq!(idx.len(), 1000);
        assert!(idx.iter().all(|&i| i < 10));
        assert!((0..10).all(|i| idx.contains(&i)));
        assert_eq!(
            idx,
            random_indices(&mut StdRng::seed_from_u64(17), 10, 1000)
        );
    }
}
