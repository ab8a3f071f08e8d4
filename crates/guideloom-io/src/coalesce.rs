//! Coalescing of byte ranges for batched reads.
//!
//! Neighbouring ranges are merged into one request when the gap between them is at most
//! [`CoalescePolicy::max_gap`] **and** the merged span stays within
//! [`CoalescePolicy::max_span`]. After the merged read, each requested range is handed out
//! either as a zero-copy slice of the merged buffer (when it covers most of it) or as a
//! copy (when it is small), so a few small results never pin a large merged buffer.

use std::ops::Range;

use bytes::Bytes;

/// Default largest gap (bytes) between two ranges that are still merged: 64 KiB.
pub const DEFAULT_MAX_GAP: u64 = 64 * 1024;

/// Default largest span (bytes) of one merged read: 4 MiB.
pub const DEFAULT_MAX_SPAN: u64 = 4 * 1024 * 1024;

/// A result smaller than `merged_len / COPY_OUT_DIVISOR` is copied out of the merged buffer.
pub const COPY_OUT_DIVISOR: usize = 2;

/// When to merge neighbouring ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalescePolicy {
    /// Largest gap between two ranges that are merged.
    pub max_gap: u64,
    /// Largest span of one merged read. A single range longer than this is read alone.
    pub max_span: u64,
}

impl Default for CoalescePolicy {
    fn default() -> Self {
        CoalescePolicy {
            max_gap: DEFAULT_MAX_GAP,
            max_span: DEFAULT_MAX_SPAN,
        }
    }
}

impl CoalescePolicy {
    /// A policy that never merges (every range is its own read).
    pub const NEVER: CoalescePolicy = CoalescePolicy {
        max_gap: 0,
        max_span: 0,
    };
}

/// One merged read and the requested ranges it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedRange {
    /// The byte range to read.
    pub range: Range<u64>,
    /// Indices into the caller's range list that this read serves.
    pub members: Vec<usize>,
}

/// Plans merged reads for `ranges` (which may be unsorted, overlapping or repeated).
///
/// Every input index appears in exactly one [`MergedRange`]. Empty ranges are served by the
/// merged read they fall in, or by an empty read of their own.
pub fn plan(ranges: &[Range<u64>], policy: CoalescePolicy) -> Vec<MergedRange> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].start, ranges[i].end));
    let mut out: Vec<MergedRange> = Vec::new();
    for i in order {
        let r = ranges[i].start..ranges[i].end.max(ranges[i].start);
        if let Some(last) = out.last_mut() {
            let gap_ok = r.start <= last.range.end.saturating_add(policy.max_gap);
            let new_end = last.range.end.max(r.end);
            let span_ok = new_end - last.range.start <= policy.max_span;
            // Fully contained ranges always merge: they cost nothing extra.
            if r.end <= last.range.end || (gap_ok && span_ok) {
                last.range.end = new_end;
                last.members.push(i);
                continue;
            }
        }
        out.push(MergedRange {
            range: r,
            members: vec![i],
        });
    }
    out
}

/// Hands out the member ranges of `merged` from its buffer `buf` into `out`.
///
/// `buf` must hold exactly `merged.range`. Large members are zero-copy slices; small ones are
/// copied so they do not pin the merged buffer (see [`COPY_OUT_DIVISOR`]).
pub fn split(merged: &MergedRange, buf: &Bytes, ranges: &[Range<u64>], out: &mut [Option<Bytes>]) {
    let base = merged.range.start;
    for &i in &merged.members {
        let r = &ranges[i];
        let start = usize::try_from(r.start - base).unwrap_or(usize::MAX);
        let end = usize::try_from(r.end.max(r.start) - base).unwrap_or(usize::MAX);
        let piece = match buf.get(start..end) {
            Some(slice) if slice.len() * COPY_OUT_DIVISOR >= buf.len() => buf.slice(start..end),
            Some(slice) => Bytes::copy_from_slice(slice),
            None => Bytes::new(), // unreachable when `buf` holds the merged range; checked by callers
        };
        out[i] = Some(piece);
    }
}

/// Like [`split`], but takes the merged buffer by value: when the merged read serves exactly one
/// range covering all of it, the buffer is moved into place with no slicing (slicing a
/// `Vec`-backed [`Bytes`] allocates a shared header; moving it does not).
pub fn split_owned(
    merged: &MergedRange,
    buf: Bytes,
    ranges: &[Range<u64>],
    out: &mut [Option<Bytes>],
) {
    if let [only] = merged.members[..] {
        let r = &ranges[only];
        if r.start == merged.range.start && r.end.max(r.start) - r.start == buf.len() as u64 {
            out[only] = Some(buf);
            return;
        }
    }
    split(merged, &buf, ranges, out);
}

/// Reads `ranges` through `read(offset, len)` with merging; one result per range, in order.
///
/// The generic engine behind synchronous `read_ranges` overrides. `read` must return exactly
/// `len` bytes (readers check this) and is called once per merged range.
pub fn read_coalesced<E>(
    ranges: &[Range<u64>],
    policy: CoalescePolicy,
    read: impl FnMut(u64, u64) -> Result<Bytes, E>,
) -> Result<Vec<Bytes>, E> {
    read_planned(&plan(ranges, policy), ranges, read)
}

/// [`read_coalesced`] of a plan already made (by [`plan`] for the same `ranges`), for
/// readers that size a buffer from the plan first.
pub(crate) fn read_planned<E>(
    plan: &[MergedRange],
    ranges: &[Range<u64>],
    mut read: impl FnMut(u64, u64) -> Result<Bytes, E>,
) -> Result<Vec<Bytes>, E> {
    let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
    for m in plan {
        let buf = read(m.range.start, m.range.end - m.range.start)?;
        split_owned(m, buf, ranges, &mut out);
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// Total bytes the merged reads of `plan` read.
pub(crate) fn planned_bytes(plan: &[MergedRange]) -> u64 {
    plan.iter()
        .map(|m| m.range.end.saturating_sub(m.range.start))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_neighbours_within_gap_and_span() {
        let p = CoalescePolicy {
            max_gap: 10,
            max_span: 100,
        };
        let plan = plan(&[0..10, 15..20, 200..210, 205..206], p);
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[0].range, 0..20);
        assert_eq!(plan[0].members, vec![0, 1]);
        assert_eq!(plan[1].range, 200..210);
        assert_eq!(plan[1].members, vec![2, 3]);
    }

    #[test]
    fn span_cap_splits_long_runs() {
        let p = CoalescePolicy {
            max_gap: 10,
            max_span: 25,
        };
        let plan = plan(&[0..10, 10..20, 20..30, 30..40], p);
        assert_eq!(
            plan.iter().map(|m| m.range.clone()).collect::<Vec<_>>(),
            vec![0..20, 20..40]
        );
    }

    #[test]
    fn never_policy_keeps_every_range_apart() {
        let plan = plan(&[0..10, 10..20], CoalescePolicy::NEVER);
        assert_eq!(plan.len(), 2);
    }

    #[test]
    fn read_coalesced_returns_exact_bytes_in_order() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let ranges = vec![900..1000, 0..5, 3..4, 5000..5000, 4000..4100];
        let mut calls = 0;
        let got = read_coalesced::<()>(&ranges, CoalescePolicy::default(), |o, l| {
            calls += 1;
            let (o, l) = (usize::try_from(o).unwrap(), usize::try_from(l).unwrap());
            Ok(Bytes::copy_from_slice(&data[o..o + l]))
        })
        .unwrap();
        assert_eq!(calls, 1);
        for (r, b) in ranges.iter().zip(&got) {
            let (s, e) = (
                usize::try_from(r.start).unwrap(),
                usize::try_from(r.end).unwrap(),
            );
            assert_eq!(&b[..], &data[s..e]);
        }
    }

    #[test]
    fn a_lone_member_takes_the_buffer_without_slicing() {
        let buf = Bytes::from(vec![1u8; 64]);
        let ptr = buf.as_ptr();
        let m = MergedRange {
            range: 100..164,
            members: vec![0],
        };
        let mut out = vec![None, None];
        let ranges = [100..164, 0..0];
        split_owned(&m, buf, &ranges, &mut out);
        assert_eq!(out[0].as_ref().map(|b| b.as_ptr()), Some(ptr));
        assert_eq!(out[0].as_ref().map(Bytes::len), Some(64));
    }

    #[test]
    fn small_members_are_copied_out() {
        let buf = Bytes::from(vec![7u8; 1000]);
        let m = MergedRange {
            range: 0..1000,
            members: vec![0, 1],
        };
        let ranges = vec![0..10, 0..900];
        let mut out = vec![None, None];
        split(&m, &buf, &ranges, &mut out);
        let small = out[0].take().unwrap();
        let big = out[1].take().unwrap();
        // The big one shares the allocation, the small one does not.
        assert_eq!(big.as_ptr(), buf.as_ptr());
        assert_ne!(small.as_ptr(), buf.as_ptr());
    }
}
