//! Varint64 (LEB128), as Riegeli and protocol buffers spell unsigned integers.

/// Appends `v` as a varint.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v.to_le_bytes()[0] | 0x80);
        v >>= 7;
    }
    out.push(v.to_le_bytes()[0]);
}

/// The number of bytes [`put`] writes for `v`.
#[cfg(test)]
pub(crate) fn len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads a varint from the front of `buf`: the value and the bytes it took, or `None` when
/// `buf` ends first or the value does not fit in 64 bits.
pub(crate) fn get(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        let bits = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return None; // more than 64 bits
        }
        v |= bits << (7 * i);
        if b < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn known_values() {
        let mut out = Vec::new();
        put(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        assert_eq!(get(&out), Some((300, 2)));
        assert_eq!(get(&[0x80]), None);
        assert_eq!(get(&[0xff; 10]), None);
        let mut max = vec![0xff; 9];
        max.push(1);
        assert_eq!(get(&max), Some((u64::MAX, 10)));
    }

    proptest! {
        #[test]
        fn round_trips(v: u64, tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            put(&mut out, v);
            prop_assert_eq!(out.len(), len(v));
            out.extend_from_slice(&tail);
            prop_assert_eq!(get(&out), Some((v, len(v))));
        }
    }
}
