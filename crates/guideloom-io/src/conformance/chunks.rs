//! Reads where chunked backends break: at and across the power-of-two boundaries they split
//! objects and requests at ([`CHUNK_BOUNDARIES`]), and reads, batches and tails of several
//! MiB. Every generator here only uses the boundaries inside the object, so a small large
//! object gets fewer (and cheaper) reads.

use std::ops::Range;

use bytes::Bytes;
use rand::Rng;
use rand::rngs::StdRng;

use super::CHUNK_BOUNDARIES;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// The boundaries strictly inside an object of `size` bytes, in increasing order.
fn inside(size: u64) -> impl DoubleEndedIterator<Item = u64> + Clone {
    CHUNK_BOUNDARIES.iter().copied().filter(move |&b| b < size)
}

/// `n` bytes that look random, drawn from `seed`, generated cheaply even unoptimised.
///
/// SplitMix64 over a counter: every 8-byte word is a different hash of its index, so the
/// bytes have no period a backend could hit by reading from the wrong chunk (a read served
/// from `offset ± 2^k` never matches). About 20× faster than `StdRng` in a debug build,
/// which matters for a 10 MiB object generated on every run.
pub(super) fn pseudo_random(seed: u64, n: usize) -> Bytes {
    let mut v = vec![0u8; n];
    let mut x = seed;
    for word in v.chunks_mut(8) {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let len = word.len();
        word.copy_from_slice(&z.to_le_bytes()[..len]);
    }
    Bytes::from(v)
}

/// Single in-range reads at and across every boundary `b` inside an object of `size` bytes:
/// two bytes straddling `b`; 4 KiB ending exactly at, starting exactly at, and across `b`;
/// 2 MiB ending at and starting at `b`; ~3 MiB from `b - 1 MiB - 7` across it; and one
/// unaligned read across every boundary at once.
pub(super) fn boundary_reads(size: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for b in inside(size) {
        let after = size - b;
        v.push((b - 1, 2));
        let (k, j) = (b.min(4097), after.min(4099));
        v.push((b - k, k));
        v.push((b, j));
        v.push((b - k, k + j));
        let (k, j) = (b.min(2 * MIB), after.min(2 * MIB));
        v.push((b - k, k));
        v.push((b, j));
        let (k, j) = (b.min(MIB + 7), after.min(2 * MIB + 13));
        v.push((b - k, k + j));
    }
    let mut all = inside(size);
    if let (Some(first), Some(last)) = (all.next(), all.next_back()) {
        let end = (last + 5).min(size);
        v.push((first - 5, end - (first - 5)));
    }
    v
}

/// Batches (all in range) whose ranges cross the boundaries inside the object: multi-MiB
/// ranges across each boundary, unsorted and overlapping their neighbours (merged spans
/// past the usual 1 and 4 MiB caps); neighbours meeting exactly at each boundary; small
/// ranges just before, just after and across each boundary.
pub(super) fn boundary_range_lists(size: u64) -> Vec<Vec<Range<u64>>> {
    let c = |v: u64| v.min(size);
    let across: Vec<Range<u64>> = inside(size)
        .rev()
        .map(|b| b - b.min(MIB + 7)..c(b + 2 * MIB + 13))
        .collect();
    if across.is_empty() {
        return Vec::new();
    }
    let meeting = inside(size)
        .flat_map(|b| [b - b.min(MIB)..b, b..c(b + 4099)])
        .collect();
    let around = inside(size)
        .flat_map(|b| [b - 100..b - 1, c(b + 1)..c(b + 100), b - 1..c(b + 1)])
        .collect();
    vec![across, meeting, around]
}

/// Tail lengths of just over each boundary inside the object (a suffix read capped at one
/// chunk must go on), to add to the generic ones.
pub(super) fn boundary_tail_lens(size: u64) -> impl Iterator<Item = u64> {
    inside(size).map(|b| b + 1)
}

/// How far a [`crossing_read`] reaches on either side of its boundary: enough to cover a
/// few pages of both chunks, small enough to keep thousands of them cheap.
pub(super) const CROSSING_REACH: u64 = 16 * KIB;

/// A read for the concurrency checks that crosses a chunk boundary: a random multiple of a
/// random boundary inside the object, from up to [`CROSSING_REACH`] before it to up to
/// [`CROSSING_REACH`] after it. `None` when no boundary is inside the object.
pub(super) fn crossing_read(rng: &mut StdRng, size: u64) -> Option<(u64, u64)> {
    let n = inside(size).count();
    if n == 0 {
        return None;
    }
    let base = inside(size).nth(rng.random_range(0..n))?;
    let b = base * rng.random_range(1..=(size - 1) / base);
    let offset = b - rng.random_range(1..=b.min(CROSSING_REACH));
    let end = (b + rng.random_range(1..=CROSSING_REACH)).min(size);
    Some((offset, end - offset))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    const SIZE: u64 = 10 * MIB + 13;

    fn crosses(offset: u64, len: u64, b: u64) -> bool {
        offset < b && offset + len > b
    }

    #[test]
    fn every_boundary_is_crossed_ended_at_and_started_at_by_multi_mib_reads() {
        let reads = boundary_reads(SIZE);
        for &(o, l) in &reads {
            assert!(o + l <= SIZE, "({o}, {l}) out of range");
        }
        for b in CHUNK_BOUNDARIES.iter().copied().filter(|&b| b < SIZE) {
            assert!(reads.iter().any(|&(o, l)| crosses(o, l, b) && l > 2 * MIB));
            assert!(
                reads
                    .iter()
                    .any(|&(o, l)| o + l == b && l >= b.min(2 * MIB))
            );
            assert!(reads.iter().any(|&(o, l)| o == b && l == 2 * MIB));
            assert!(reads.iter().any(|&(o, l)| (o, l) == (b - 1, 2)));
        }
        assert!(reads.contains(&(64 * KIB - 5, 8 * MIB + 5 - (64 * KIB - 5))));
    }

    #[test]
    fn batches_hold_multi_mib_ranges_across_boundaries() {
        let lists = boundary_range_lists(SIZE);
        assert_eq!(lists.len(), 3);
        for r in lists.iter().flatten() {
            assert!(r.start <= r.end && r.end <= SIZE, "{r:?}");
        }
        for b in [MIB, 4 * MIB, 8 * MIB] {
            assert!(
                lists[0]
                    .iter()
                    .any(|r| r.start < b && r.end > b && r.end - r.start > 2 * MIB)
            );
        }
        assert!(boundary_range_lists(60 * KIB).is_empty());
    }

    #[test]
    fn small_objects_get_only_their_boundaries() {
        assert!(boundary_reads(64 * KIB).is_empty());
        assert!(
            boundary_reads(256 * KIB + 13)
                .iter()
                .all(|&(o, l)| o + l <= 256 * KIB + 13)
        );
        assert_eq!(
            boundary_tail_lens(2 * MIB).collect::<Vec<_>>(),
            [64 * KIB + 1, MIB + 1]
        );
        assert_eq!(crossing_read(&mut StdRng::seed_from_u64(1), 4096), None);
    }

    #[test]
    fn crossing_reads_cross_a_boundary_and_stay_in_range() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..10_000 {
            let (o, l) = crossing_read(&mut rng, SIZE).unwrap();
            assert!(o + l <= SIZE && l <= 2 * CROSSING_REACH);
            // Every boundary is a multiple of 64 KiB: some multiple lies in `o + 1..o + l`.
            assert!((o + l - 1) / (64 * KIB) > o / (64 * KIB), "({o}, {l})");
        }
    }

    #[test]
    fn pseudo_random_bytes_differ_at_every_power_of_two_shift() {
        let b = pseudo_random(3, usize::try_from(SIZE).unwrap());
        assert_eq!(b.len() as u64, SIZE);
        assert_eq!(b, pseudo_random(3, b.len()));
        assert_ne!(b.slice(..64), pseudo_random(4, 64));
        for shift in (3..24).map(|k| 1usize << k) {
            assert_ne!(b.slice(..4096), b.slice(shift..shift + 4096), "{shift}");
        }
    }
}
