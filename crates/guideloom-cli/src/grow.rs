//! Buffers that grow within a bound, with `try_reserve`: a failed allocation is an error,
//! never an abort. Shared by the input reader and the JSON → CBOR encoder.

use std::collections::TryReserveError;

/// Makes room for `additional` more bytes in `buf`, growing geometrically but never past
/// `cap` total capacity (or exactly what is needed, if that is more).
pub fn grow_within(
    buf: &mut Vec<u8>,
    additional: usize,
    cap: usize,
) -> Result<(), TryReserveError> {
    let needed = buf.len().saturating_add(additional);
    if needed <= buf.capacity() {
        return Ok(());
    }
    let target = buf
        .capacity()
        .saturating_mul(2)
        .max(4096)
        .min(cap)
        .max(needed);
    buf.try_reserve_exact(target - buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_stays_within_the_cap() {
        let mut buf = Vec::new();
        grow_within(&mut buf, 10, 100).unwrap();
        assert!(buf.capacity() >= 10 && buf.capacity() <= 4096);
        buf.extend_from_slice(&[0; 10]);
        let mut big = vec![0u8; 3000];
        big.shrink_to_fit();
        grow_within(&mut big, 1, 3001).unwrap();
        assert_eq!(big.capacity(), 3001);
    }
}
