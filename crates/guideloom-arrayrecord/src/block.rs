//! Riegeli's block structure: the 24-byte block header at every 64 KiB boundary, and the
//! position arithmetic of the spec's "Implementation notes" (chunk ends, padding).
//!
//! All functions take file positions. Those fed by a file's bytes use checked arithmetic and
//! return `None` on overflow, so a hostile size cannot wrap around.

use crate::hash::hash;

/// Block size: a block header interrupts the file at every multiple of it.
pub const BLOCK_SIZE: u64 = 1 << 16;
/// Size of a block header.
pub const BLOCK_HEADER_SIZE: u64 = 24;
/// Bytes of a block that are not its header.
pub(crate) const USABLE_BLOCK_SIZE: u64 = BLOCK_SIZE - BLOCK_HEADER_SIZE;
/// Size of a chunk header.
pub const CHUNK_HEADER_SIZE: u64 = 40;

/// `true` at a multiple of [`BLOCK_SIZE`].
pub(crate) fn is_block_boundary(pos: u64) -> bool {
    pos.is_multiple_of(BLOCK_SIZE)
}

/// Bytes from `pos` to the next block boundary (0 on a boundary).
pub(crate) fn remaining_in_block(pos: u64) -> u64 {
    pos.wrapping_neg() % BLOCK_SIZE
}

/// `true` where a chunk may begin or end: not inside nor immediately after a block header.
pub(crate) fn is_possible_chunk_boundary(pos: u64) -> bool {
    remaining_in_block(pos) < USABLE_BLOCK_SIZE
}

/// The nearest possible chunk boundary at or after `pos`.
pub(crate) fn round_up_to_possible_chunk_boundary(pos: u64) -> Option<u64> {
    pos.checked_add(remaining_in_block(pos).saturating_sub(USABLE_BLOCK_SIZE - 1))
}

/// The position `length` chunk bytes after `chunk_begin`, counting the block headers met.
/// `chunk_begin` must be a possible chunk boundary.
pub(crate) fn add_with_overhead(chunk_begin: u64, length: u64) -> Option<u64> {
    let phase = (chunk_begin % BLOCK_SIZE + USABLE_BLOCK_SIZE - 1) % BLOCK_SIZE;
    let blocks = length.checked_add(phase)? / USABLE_BLOCK_SIZE;
    chunk_begin
        .checked_add(length)?
        .checked_add(blocks.checked_mul(BLOCK_HEADER_SIZE)?)
}

/// The chunk bytes between `chunk_begin` and `pos` (`chunk_begin <= pos`), not counting the
/// block headers in between.
pub(crate) fn distance_without_overhead(chunk_begin: u64, pos: u64) -> u64 {
    let headers = pos / BLOCK_SIZE - chunk_begin / BLOCK_SIZE;
    (pos - (pos % BLOCK_SIZE).min(BLOCK_HEADER_SIZE))
        - (chunk_begin - (chunk_begin % BLOCK_SIZE).min(BLOCK_HEADER_SIZE))
        - headers * BLOCK_HEADER_SIZE
}

/// The end of a chunk beginning at `chunk_begin` with `data_size` bytes of data and
/// `num_records` records: after its header, data and the padding that makes it at least
/// `num_records` bytes long and keeps it from ending inside or just after a block header.
pub(crate) fn chunk_end(chunk_begin: u64, data_size: u64, num_records: u64) -> Option<u64> {
    let by_size = add_with_overhead(chunk_begin, data_size.checked_add(CHUNK_HEADER_SIZE)?)?;
    let by_records = round_up_to_possible_chunk_boundary(chunk_begin.checked_add(num_records)?)?;
    Some(by_size.max(by_records))
}

/// Where a padding chunk written at `pos` to align to `padding` ends (Riegeli's
/// `PosAfterPadding`): the next multiple of `padding` leaving room for a chunk header and not
/// inside a block header; `pos` itself when already aligned.
pub(crate) fn pos_after_padding(pos: u64, padding: u64) -> u64 {
    if padding <= 1 || pos.is_multiple_of(padding) {
        return pos;
    }
    let mut length = padding - pos % padding;
    while length < CHUNK_HEADER_SIZE {
        length += padding;
    }
    let mut end = pos + length;
    while !is_possible_chunk_boundary(end) {
        end += padding;
    }
    end
}

/// A decoded block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    /// Distance from the beginning of the interrupted chunk to the block boundary.
    pub(crate) previous_chunk: u64,
    /// Distance from the block boundary to the end of the interrupted chunk.
    pub(crate) next_chunk: u64,
}

impl BlockHeader {
    /// The 24 bytes: hash, `previous_chunk`, `next_chunk`.
    pub(crate) fn encode(&self) -> [u8; 24] {
        let mut out = [0u8; 24];
        out[8..16].copy_from_slice(&self.previous_chunk.to_le_bytes());
        out[16..24].copy_from_slice(&self.next_chunk.to_le_bytes());
        let h = hash(&out[8..]);
        out[..8].copy_from_slice(&h.to_le_bytes());
        out
    }

    /// Decodes 24 bytes, or `None` when the hash does not match.
    pub(crate) fn decode(bytes: &[u8; 24]) -> Option<BlockHeader> {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        (word(0) == hash(&bytes[8..])).then(|| BlockHeader {
            previous_chunk: word(8),
            next_chunk: word(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn spec_examples() {
        // The file signature: a 40-byte chunk at 0 ends at 64, after the first block header.
        assert_eq!(chunk_end(0, 0, 0), Some(64));
        // "0 -> 0, 1..25 -> 25, 26 -> 26, ..., 64K -> 64K, 64K+1..64K+25 -> 64K+25".
        for (pos, up) in [
            (0, 0),
            (1, 25),
            (25, 25),
            (26, 26),
            (65536, 65536),
            (65537, 65561),
        ] {
            assert_eq!(round_up_to_possible_chunk_boundary(pos), Some(up), "{pos}");
        }
        assert_eq!(add_with_overhead(u64::MAX - 100, 1000), None);
        assert_eq!(chunk_end(64, u64::MAX - 10, 0), None);
        // The signature block header the spec prints.
        let bh = BlockHeader {
            previous_chunk: 0,
            next_chunk: 64,
        }
        .encode();
        assert_eq!(&bh[..8], &[0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f]);
        let mut bad = bh;
        bad[20] ^= 1;
        assert_eq!(BlockHeader::decode(&bad), None);
        assert_eq!(
            BlockHeader::decode(&bh),
            Some(BlockHeader {
                previous_chunk: 0,
                next_chunk: 64
            })
        );
        assert_eq!(pos_after_padding(65536, BLOCK_SIZE), 65536);
        assert_eq!(pos_after_padding(65536 + 108, BLOCK_SIZE), 2 * 65536);
        assert_eq!(pos_after_padding(2 * 65536 - 10, BLOCK_SIZE), 3 * 65536);
    }

    /// Walks `length` chunk bytes from `begin` one block at a time, skipping headers.
    fn walk(begin: u64, length: u64) -> u64 {
        let mut pos = begin;
        let mut left = length;
        loop {
            if is_block_boundary(pos) && left > 0 {
                pos += BLOCK_HEADER_SIZE;
            }
            if left == 0 {
                return pos;
            }
            let n = left.min(BLOCK_SIZE - pos % BLOCK_SIZE);
            pos += n;
            left -= n;
        }
    }

    fn possible_begin() -> impl Strategy<Value = u64> {
        (0u64..64, 0u64..BLOCK_SIZE).prop_map(|(block, off)| {
            let pos = block * BLOCK_SIZE + off;
            round_up_to_possible_chunk_boundary(pos).unwrap()
        })
    }

    proptest! {
        /// `add_with_overhead` agrees with walking the bytes block by block, and
        /// `distance_without_overhead` inverts it.
        #[test]
        fn overhead_arithmetic(begin in possible_begin(), length in 0u64..(5 * BLOCK_SIZE)) {
            let end = add_with_overhead(begin, length).unwrap();
            prop_assert_eq!(end, walk(begin, length));
            prop_assert_eq!(distance_without_overhead(begin, end), length);
        }

        /// A chunk's end is a possible chunk boundary, covers its header and data, and is at
        /// least `num_records` bytes after its beginning.
        #[test]
        fn chunk_ends_are_valid(
            begin in possible_begin(),
            data in 0u64..(3 * BLOCK_SIZE),
            records in 0u64..(3 * BLOCK_SIZE),
        ) {
            let end = chunk_end(begin, data, records).unwrap();
            prop_assert!(is_possible_chunk_boundary(end));
            prop_assert!(end - begin >= records);
            prop_assert!(distance_without_overhead(begin, end) >= CHUNK_HEADER_SIZE + data);
        }

        /// Padding lands on a block boundary with room for a padding chunk's header.
        #[test]
        fn padding_aligns(pos in possible_begin()) {
            let end = pos_after_padding(pos, BLOCK_SIZE);
            prop_assert!(is_block_boundary(end));
            prop_assert!(end == pos || distance_without_overhead(pos, end) >= CHUNK_HEADER_SIZE);
            prop_assert!(end - pos < 2 * BLOCK_SIZE);
        }
    }
}
