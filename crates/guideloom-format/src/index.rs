//! The record index: `N` entries of (end offset `u64`, CRC32C `u32`), kept as raw bytes.

use std::ops::Range;

use bytes::Bytes;

use crate::error::{Corruption, Error, Result};
use crate::spec::{HEADER_LEN, INDEX_ENTRY_LEN, INDEX_ENTRY_USIZE, le_u32, le_u64};

/// A validated index. Entries are decoded on demand from the raw bytes: opening a shard
/// allocates nothing per record.
#[derive(Debug, Clone)]
pub struct Index {
    raw: Bytes,
    len: u64,
}

/// Encodes one index entry.
pub(crate) fn encode_entry(end: u64, crc: u32) -> [u8; INDEX_ENTRY_USIZE] {
    let mut e = [0u8; INDEX_ENTRY_USIZE];
    e[..8].copy_from_slice(&end.to_le_bytes());
    e[8..].copy_from_slice(&crc.to_le_bytes());
    e
}

impl Index {
    /// Validates raw index bytes for a data region ending at `index_offset`: ends are
    /// non-decreasing, the first is at least [`HEADER_LEN`], the last equals `index_offset`.
    pub fn parse(shard: &str, raw: Bytes, index_offset: u64) -> Result<Index> {
        if !(raw.len() as u64).is_multiple_of(INDEX_ENTRY_LEN) {
            return Err(Error::layout(shard, "index length is not a multiple of 12"));
        }
        let len = raw.len() as u64 / INDEX_ENTRY_LEN;
        let index = Index { raw, len };
        let mut prev = HEADER_LEN;
        for i in 0..len {
            let end = index.end(i);
            if end < prev || end > index_offset {
                return Err(Error::corrupt(
                    shard,
                    Corruption::IndexOffset { index: i, end },
                ));
            }
            prev = end;
        }
        if prev != index_offset {
            let index = len.saturating_sub(1);
            return Err(Error::corrupt(
                shard,
                Corruption::IndexOffset { index, end: prev },
            ));
        }
        Ok(index)
    }

    /// Number of records.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `true` when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn at(i: u64) -> usize {
        // i < len <= MAX_RECORDS, so this fits in usize on every supported platform.
        usize::try_from(i * INDEX_ENTRY_LEN).unwrap_or(usize::MAX)
    }

    /// End offset of record `i` (`i < len`).
    #[inline]
    fn end(&self, i: u64) -> u64 {
        le_u64(&self.raw, Self::at(i))
    }

    /// CRC32C of record `i` (`i < len`).
    #[inline]
    pub fn crc(&self, i: u64) -> u32 {
        le_u32(&self.raw, Self::at(i) + 8)
    }

    /// Absolute byte range of record `i` (`i < len`).
    #[inline]
    pub fn range(&self, i: u64) -> Range<u64> {
        let start = if i == 0 { HEADER_LEN } else { self.end(i - 1) };
        start..self.end(i)
    }

    /// The first record whose end lies past `offset`, i.e. the record containing the byte
    /// at `offset` (or `len` if none).
    pub fn record_at(&self, offset: u64) -> u64 {
        let (mut lo, mut hi) = (0u64, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.end(mid) <= offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ends: &[u64]) -> Bytes {
        ends.iter()
            .flat_map(|&e| encode_entry(e, 7))
            .collect::<Vec<u8>>()
            .into()
    }

    #[test]
    fn ranges_and_lookup() {
        let idx = Index::parse("s", raw(&[20, 20, 30]), 30).unwrap();
        assert_eq!(idx.range(0), 16..20);
        assert_eq!(idx.range(1), 20..20);
        assert_eq!(idx.range(2), 20..30);
        assert_eq!(idx.record_at(16), 0);
        assert_eq!(idx.record_at(20), 2);
        assert_eq!(idx.record_at(29), 2);
        assert_eq!(idx.crc(2), 7);
    }

    #[test]
    fn rejects_bad_offsets() {
        for (ends, off) in [
            (&[30u64, 20][..], 30u64),
            (&[10], 10),
            (&[20], 30),
            (&[40], 30),
        ] {
            let err = Index::parse("s", raw(ends), off).unwrap_err();
            assert!(matches!(
                err,
                Error::Corrupt {
                    what: Corruption::IndexOffset { .. },
                    ..
                }
            ));
        }
        assert!(Index::parse("s", Bytes::new(), 16).is_ok());
        assert!(Index::parse("s", Bytes::new(), 17).is_err());
    }
}
