//! The fixed-size footer: encoding, decoding and layout validation.

use crate::error::{Corruption, Error, Result};
use crate::spec::{
    FOOTER_LEN, FOOTER_USIZE, HEADER_LEN, INDEX_ENTRY_LEN, MAGIC, MAJOR, MAX_METADATA_LEN,
    MAX_RECORDS, MIN_SHARD_LEN, MINOR, crc32c, le_u16, le_u32, le_u64,
};

/// Bytes of the footer covered by its own checksum.
const FOOTER_CRC_COVERS: usize = 52;

/// The decoded footer of a shard (see `docs/format.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Absolute offset of the index (= end of the data region).
    pub index_offset: u64,
    /// Length of the index: `12 · record_count`.
    pub index_len: u64,
    /// Absolute offset of the CBOR metadata (= end of the index).
    pub metadata_offset: u64,
    /// Length of the CBOR metadata.
    pub metadata_len: u64,
    /// Number of records.
    pub record_count: u64,
    /// CRC32C of the index bytes.
    pub index_crc: u32,
    /// CRC32C of the metadata bytes.
    pub metadata_crc: u32,
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

impl Footer {
    /// Encodes the footer (current version) including its checksum and magic.
    pub fn encode(&self) -> [u8; FOOTER_USIZE] {
        let mut f = [0u8; FOOTER_USIZE];
        f[0..8].copy_from_slice(&self.index_offset.to_le_bytes());
        f[8..16].copy_from_slice(&self.index_len.to_le_bytes());
        f[16..24].copy_from_slice(&self.metadata_offset.to_le_bytes());
        f[24..32].copy_from_slice(&self.metadata_len.to_le_bytes());
        f[32..40].copy_from_slice(&self.record_count.to_le_bytes());
        f[40..44].copy_from_slice(&self.index_crc.to_le_bytes());
        f[44..48].copy_from_slice(&self.metadata_crc.to_le_bytes());
        f[48..50].copy_from_slice(&self.major.to_le_bytes());
        f[50..52].copy_from_slice(&self.minor.to_le_bytes());
        let crc = crc32c(&f[..FOOTER_CRC_COVERS]);
        f[52..56].copy_from_slice(&crc.to_le_bytes());
        f[56..64].copy_from_slice(&MAGIC);
        f
    }

    /// The footer's own CRC32C (over its first 52 bytes), as [`encode`](Self::encode)
    /// stores it: one number covering the index and metadata checksums, the layout and the
    /// record count.
    pub fn checksum(&self) -> u32 {
        crc32c(&self.encode()[..FOOTER_CRC_COVERS])
    }

    /// A footer of the current version for the given sections.
    pub(crate) fn new(
        index_offset: u64,
        index: &[u8],
        metadata: &[u8],
        record_count: u64,
    ) -> Footer {
        let index_len = index.len() as u64;
        Footer {
            index_offset,
            index_len,
            metadata_offset: index_offset + index_len,
            metadata_len: metadata.len() as u64,
            record_count,
            index_crc: crc32c(index),
            metadata_crc: crc32c(metadata),
            major: MAJOR,
            minor: MINOR,
        }
    }

    /// Decodes and validates the last [`FOOTER_LEN`] bytes of a shard of `size` bytes.
    ///
    /// Checks, in order: size, magic (`Corrupt`), major (`Unsupported`), footer checksum
    /// (`Corrupt`), then the layout (every section inside the file, no gaps, within limits).
    pub fn decode(shard: &str, bytes: &[u8], size: u64) -> Result<Footer> {
        if size < MIN_SHARD_LEN || bytes.len() != FOOTER_USIZE {
            return Err(Error::corrupt(shard, Corruption::TooSmall { size }));
        }
        if bytes[56..64] != MAGIC {
            return Err(Error::corrupt(shard, Corruption::BadFooterMagic));
        }
        let major = le_u16(bytes, 48);
        let minor = le_u16(bytes, 50);
        if major != MAJOR {
            return Err(Error::Unsupported {
                shard: shard.to_owned(),
                major,
                minor,
            });
        }
        if crc32c(&bytes[..FOOTER_CRC_COVERS]) != le_u32(bytes, 52) {
            return Err(Error::corrupt(shard, Corruption::FooterChecksum));
        }
        let footer = Footer {
            index_offset: le_u64(bytes, 0),
            index_len: le_u64(bytes, 8),
            metadata_offset: le_u64(bytes, 16),
            metadata_len: le_u64(bytes, 24),
            record_count: le_u64(bytes, 32),
            index_crc: le_u32(bytes, 40),
            metadata_crc: le_u32(bytes, 44),
            major,
            minor,
        };
        footer.validate(shard, size)?;
        Ok(footer)
    }

    fn validate(&self, shard: &str, size: u64) -> Result<()> {
        if self.record_count > MAX_RECORDS {
            return Err(Error::corrupt(
                shard,
                Corruption::TooManyRecords {
                    count: self.record_count,
                },
            ));
        }
        if self.metadata_len > MAX_METADATA_LEN {
            return Err(Error::corrupt(
                shard,
                Corruption::MetadataTooLarge {
                    len: self.metadata_len,
                },
            ));
        }
        if self.index_offset < HEADER_LEN {
            return Err(Error::layout(shard, "index starts inside the header"));
        }
        // Cannot overflow: record_count <= 2^24.
        if self.index_len != self.record_count * INDEX_ENTRY_LEN {
            return Err(Error::layout(
                shard,
                "index length is not 12 x record count",
            ));
        }
        if self.index_offset.checked_add(self.index_len) != Some(self.metadata_offset) {
            return Err(Error::layout(shard, "metadata does not follow the index"));
        }
        let end = self
            .metadata_offset
            .checked_add(self.metadata_len)
            .and_then(|e| e.checked_add(FOOTER_LEN));
        if end != Some(size) {
            let end = end.map_or_else(|| "beyond 2^64".to_owned(), |e| format!("byte {e}"));
            return Err(Error::layout(
                shard,
                format!("sections end at {end} but the file has {size} bytes"),
            ));
        }
        Ok(())
    }

    /// Length of the data region (all record payloads).
    pub fn data_len(&self) -> u64 {
        self.index_offset - HEADER_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Footer, u64) {
        let f = Footer::new(HEADER_LEN + 10, &[0u8; 24], &[1u8; 5], 2);
        (f, HEADER_LEN + 10 + 24 + 5 + FOOTER_LEN)
    }

    #[test]
    fn round_trip() {
        let (f, size) = sample();
        assert_eq!(Footer::decode("s", &f.encode(), size).unwrap(), f);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let (f, size) = sample();
        let good = f.encode();
        for bit in 0..good.len() * 8 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(Footer::decode("s", &b, size).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn unknown_major_is_unsupported_newer_minor_is_fine() {
        let (mut f, size) = sample();
        f.minor = 7;
        assert!(Footer::decode("s", &f.encode(), size).is_ok());
        f.major = 2;
        let err = Footer::decode("s", &f.encode(), size).unwrap_err();
        assert!(matches!(
            err,
            Error::Unsupported {
                major: 2,
                minor: 7,
                ..
            }
        ));
    }

    #[test]
    fn wrong_size_is_layout_error() {
        let (f, size) = sample();
        let err = Footer::decode("s", &f.encode(), size + 1).unwrap_err();
        assert!(matches!(
            err,
            Error::Corrupt {
                what: Corruption::Layout { .. },
                ..
            }
        ));
    }
}
