//! Constants of shard format v1 (see `docs/format.md`) and the checksum function.

/// The 8-byte magic at the start (header) and the end (footer) of every shard: `GLMSHARD`.
pub const MAGIC: [u8; 8] = *b"GLMSHARD";

/// The major version this crate writes and reads. Other majors are `Unsupported`.
pub const MAJOR: u16 = 1;

/// The minor version this crate writes. Readers accept every minor of [`MAJOR`].
pub const MINOR: u16 = 0;

/// Length of the header; the data region starts here (a multiple of 8, so stream elements
/// are aligned in the file).
pub const HEADER_LEN: u64 = 16;

/// Length of the fixed-size footer at the end of every shard.
pub const FOOTER_LEN: u64 = 64;

/// Length of one index entry: record end offset (`u64`) + record CRC32C (`u32`).
pub const INDEX_ENTRY_LEN: u64 = 12;

/// [`HEADER_LEN`] as a `usize`.
pub(crate) const HEADER_USIZE: usize = 16;
/// [`FOOTER_LEN`] as a `usize`.
pub(crate) const FOOTER_USIZE: usize = 64;
/// [`INDEX_ENTRY_LEN`] as a `usize`.
pub(crate) const INDEX_ENTRY_USIZE: usize = 12;

/// The smallest possible shard: header + footer, no records, empty metadata.
pub const MIN_SHARD_LEN: u64 = HEADER_LEN + FOOTER_LEN;

/// Most records a reader accepts in one shard (and a writer puts in one): 2²⁴.
pub const MAX_RECORDS: u64 = 1 << 24;

/// Largest index a reader accepts, implied by [`MAX_RECORDS`] (192 MiB).
pub const MAX_INDEX_LEN: u64 = MAX_RECORDS * INDEX_ENTRY_LEN;

/// Largest CBOR metadata block a reader accepts (and a writer writes): 16 MiB.
pub const MAX_METADATA_LEN: u64 = 16 << 20;

/// Default length of the speculative tail read that opens a shard: 64 KiB.
pub const DEFAULT_SPECULATIVE_TAIL: u64 = 64 << 10;

/// File extension of shards.
pub const SHARD_EXTENSION: &str = "glm";

/// The CRC32C (Castagnoli) checksum used everywhere in the format.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Reads a little-endian `u64` at `at` in `buf` (caller guarantees bounds).
#[inline]
pub(crate) fn le_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Reads a little-endian `u32` at `at` in `buf` (caller guarantees bounds).
#[inline]
pub(crate) fn le_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

/// Reads a little-endian `u16` at `at` in `buf` (caller guarantees bounds).
pub(crate) fn le_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([buf[at], buf[at + 1]])
}

/// The 16-byte header written at offset 0.
pub(crate) fn header_bytes() -> [u8; HEADER_USIZE] {
    let mut h = [0u8; HEADER_USIZE];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&MAJOR.to_le_bytes());
    h[10..12].copy_from_slice(&MINOR.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn header_layout() {
        let h = header_bytes();
        assert_eq!(&h[..8], b"GLMSHARD");
        assert_eq!(le_u16(&h, 8), MAJOR);
        assert_eq!(le_u32(&h, 12), 0);
    }
}
