//! Riegeli's hash: 64-bit HighwayHash keyed with "Riegeli/", "records\n" twice.

use highway::{HighwayHash, HighwayHasher, Key};

/// The key: the ASCII of `Riegeli/` and `records\n`, each read as a little-endian `u64`, twice.
const KEY: [u64; 4] = [
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
];

/// The Riegeli hash of `data`.
pub(crate) fn hash(data: &[u8]) -> u64 {
    let mut h = HighwayHasher::new(Key(KEY));
    h.append(data);
    h.finalize64()
}

#[cfg(test)]
mod tests {
    use super::hash;

    /// The three hashes the Riegeli spec's constant file signature spells out.
    #[test]
    fn matches_the_spec_signature() {
        assert_eq!(hash(&[]), 0x72c3_b1e9_c013_9fe1);
        let mut block_tail = [0u8; 16];
        block_tail[8] = 0x40; // previous_chunk 0, next_chunk 64
        assert_eq!(hash(&block_tail), 0x3f4a_880d_d170_af83);
        let mut chunk_tail = [0u8; 32];
        chunk_tail[8..16].copy_from_slice(&0x72c3_b1e9_c013_9fe1u64.to_le_bytes());
        chunk_tail[16] = b's';
        assert_eq!(hash(&chunk_tail), 0xa9e1_8792_3cc2_ba91);
    }
}
