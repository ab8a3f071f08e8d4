//! The CBOR data items (RFC 8949 §3) the JSON conversions need: heads written in preferred
//! serialization (shortest argument, floats in the shortest of binary16/32/64 that keeps the
//! bits), and a reader over a record's bytes that borrows definite-length strings.
//!
//! `ciborium`'s `Value` decoder is not used for output because it changes values on the way
//! (undefined becomes null, bignums of up to 16 bytes become integers or fail); reading heads
//! ourselves gives every item exactly as stored.

use std::borrow::Cow;

use half::f16;

/// Major type 0: unsigned integer.
pub(crate) const UNSIGNED: u8 = 0;
/// Major type 1: negative integer `-1 - n`.
pub(crate) const NEGATIVE: u8 = 1;
/// Major type 2: byte string.
pub(crate) const BYTES: u8 = 2;
/// Major type 3: text string.
pub(crate) const TEXT: u8 = 3;
/// Major type 4: array.
pub(crate) const ARRAY: u8 = 4;
/// Major type 5: map.
pub(crate) const MAP: u8 = 5;
/// Major type 6: tag.
pub(crate) const TAG: u8 = 6;
/// Tag 2: unsigned bignum (RFC 8949 §3.4.3).
pub(crate) const TAG_BIGNUM: u64 = 2;
/// Tag 3: negative bignum `-1 - n`.
pub(crate) const TAG_NEGATIVE_BIGNUM: u64 = 3;
/// `false`, `true`, `null` and `undefined` (major type 7).
pub(crate) const FALSE: u8 = 0xf4;
pub(crate) const TRUE: u8 = 0xf5;
pub(crate) const NULL: u8 = 0xf6;

/// A head: major type and argument, shortest form. At most 9 bytes.
pub(crate) fn head(major: u8, arg: u64) -> ([u8; 9], usize) {
    let mut out = [0u8; 9];
    let m = major << 5;
    let len = if let Ok(a) = u8::try_from(arg)
        && a < 24
    {
        out[0] = m | a;
        1
    } else if let Ok(a) = u8::try_from(arg) {
        out[0] = m | 24;
        out[1] = a;
        2
    } else if let Ok(a) = u16::try_from(arg) {
        out[0] = m | 25;
        out[1..3].copy_from_slice(&a.to_be_bytes());
        3
    } else if let Ok(a) = u32::try_from(arg) {
        out[0] = m | 26;
        out[1..5].copy_from_slice(&a.to_be_bytes());
        5
    } else {
        out[0] = m | 27;
        out[1..9].copy_from_slice(&arg.to_be_bytes());
        9
    };
    (out, len)
}

/// A float in the shortest of binary16, binary32 and binary64 that holds exactly its bits
/// (so `-0.0`, subnormals and every payload survive). At most 9 bytes.
pub(crate) fn float(value: f64) -> ([u8; 9], usize) {
    let mut out = [0u8; 9];
    let half = f16::from_f64(value);
    #[allow(clippy::cast_possible_truncation)] // checked: kept only when the bits come back
    let single = value as f32;
    if half.to_f64().to_bits() == value.to_bits() {
        out[0] = 0xf9;
        out[1..3].copy_from_slice(&half.to_be_bytes());
        (out, 3)
    } else if f64::from(single).to_bits() == value.to_bits() {
        out[0] = 0xfa;
        out[1..5].copy_from_slice(&single.to_be_bytes());
        (out, 5)
    } else {
        out[0] = 0xfb;
        out[1..9].copy_from_slice(&value.to_be_bytes());
        (out, 9)
    }
}

/// One data item's head as read, with string contents.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item<'a> {
    /// Major type 0.
    Unsigned(u64),
    /// Major type 1: the value is `-1 - n`.
    Negative(u64),
    /// Major type 2 (chunks of an indefinite-length string joined).
    Bytes(Cow<'a, [u8]>),
    /// Major type 3, checked to be UTF-8.
    Text(Cow<'a, str>),
    /// Major type 4; `None`: indefinite length (ends with [`Item::Break`]).
    Array(Option<u64>),
    /// Major type 5; `None`: indefinite length.
    Map(Option<u64>),
    /// Major type 6; the tagged item follows.
    Tag(u64),
    /// Major type 7, simple values (20 false, 21 true, 22 null, 23 undefined, others).
    Simple(u8),
    /// Major type 7, binary16/32/64, widened exactly.
    Float(f64),
    /// The "break" stop code of an indefinite-length item.
    Break,
}

/// Why bytes are not a well-formed CBOR item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// The bytes end inside an item.
    #[error("the bytes end inside an item at byte {offset}")]
    Truncated {
        /// Where the item starts.
        offset: usize,
    },
    /// Additional information 28-30 is reserved, or 31 where no indefinite length exists.
    #[error("reserved or invalid head byte {byte:#04x} at byte {offset}")]
    InvalidHead {
        /// The head's first byte.
        byte: u8,
        /// Where it is.
        offset: usize,
    },
    /// A chunk of an indefinite-length string is not a definite string of the same type.
    #[error("bad chunk in an indefinite-length string at byte {offset}")]
    BadChunk {
        /// Where the chunk starts.
        offset: usize,
    },
    /// A text string is not UTF-8.
    #[error("text string at byte {offset} is not UTF-8")]
    NotUtf8 {
        /// Where the string starts.
        offset: usize,
    },
    /// Simple value below 32 encoded with a one-byte argument (RFC 8949 §3.3).
    #[error("simple value encoded in two bytes below 32 at byte {offset}")]
    BadSimple {
        /// Where it is.
        offset: usize,
    },
}

/// Reads items one head at a time from a byte slice.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// The offset of the next item.
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// Whether every byte has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// The next byte without consuming it.
    pub(crate) fn peek_byte(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn take(&mut self, n: u64, start: usize) -> Result<&'a [u8], Malformed> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|end| *end <= self.bytes.len())
            .ok_or(Malformed::Truncated { offset: start })?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// Major type, additional information and argument (`None`: indefinite, info 31).
    fn head(&mut self) -> Result<(u8, u8, Option<u64>), Malformed> {
        let start = self.pos;
        let byte = *self
            .bytes
            .get(self.pos)
            .ok_or(Malformed::Truncated { offset: start })?;
        self.pos += 1;
        let (major, info) = (byte >> 5, byte & 31);
        let arg = match info {
            0..=23 => Some(u64::from(info)),
            24..=27 => {
                let n = 1u64 << (info - 24);
                let raw = self.take(n, start)?;
                let mut be = [0u8; 8];
                be[8 - raw.len()..].copy_from_slice(raw);
                Some(u64::from_be_bytes(be))
            }
            31 if matches!(major, BYTES | TEXT | ARRAY | MAP) || byte == 0xff => None,
            _ => {
                return Err(Malformed::InvalidHead {
                    byte,
                    offset: start,
                });
            }
        };
        Ok((major, info, arg))
    }

    fn string(
        &mut self,
        major: u8,
        arg: Option<u64>,
        start: usize,
    ) -> Result<Cow<'a, [u8]>, Malformed> {
        let Some(len) = arg else {
            let mut joined = Vec::new();
            loop {
                let chunk_at = self.pos;
                match self.head()? {
                    (7, 31, None) => return Ok(Cow::Owned(joined)),
                    (m, _, Some(n)) if m == major => {
                        let chunk = self.take(n, chunk_at)?;
                        if major == TEXT && std::str::from_utf8(chunk).is_err() {
                            return Err(Malformed::NotUtf8 { offset: chunk_at });
                        }
                        joined.extend_from_slice(chunk);
                    }
                    _ => return Err(Malformed::BadChunk { offset: chunk_at }),
                }
            }
        };
        self.take(len, start).map(Cow::Borrowed)
    }

    /// The next item.
    pub(crate) fn next(&mut self) -> Result<Item<'a>, Malformed> {
        let start = self.pos;
        let (major, info, arg) = self.head()?;
        Ok(match major {
            UNSIGNED => Item::Unsigned(arg.unwrap_or_default()),
            NEGATIVE => Item::Negative(arg.unwrap_or_default()),
            BYTES => Item::Bytes(self.string(BYTES, arg, start)?),
            TEXT => match self.string(TEXT, arg, start)? {
                Cow::Borrowed(b) => Item::Text(Cow::Borrowed(
                    std::str::from_utf8(b).map_err(|_| Malformed::NotUtf8 { offset: start })?,
                )),
                Cow::Owned(b) => Item::Text(Cow::Owned(
                    String::from_utf8(b).map_err(|_| Malformed::NotUtf8 { offset: start })?,
                )),
            },
            ARRAY => Item::Array(arg),
            MAP => Item::Map(arg),
            TAG => Item::Tag(arg.unwrap_or_default()),
            _ => match (info, arg) {
                (31, None) => Item::Break,
                (0..=23, Some(_)) => Item::Simple(info),
                (24, Some(v)) if v < 32 => return Err(Malformed::BadSimple { offset: start }),
                #[allow(clippy::cast_possible_truncation)] // one-byte argument
                (24, Some(v)) => Item::Simple(v as u8),
                #[allow(clippy::cast_possible_truncation)] // two-byte argument
                (25, Some(v)) => Item::Float(f16::from_bits(v as u16).to_f64()),
                #[allow(clippy::cast_possible_truncation)] // four-byte argument
                (26, Some(v)) => Item::Float(f64::from(f32::from_bits(v as u32))),
                (_, Some(v)) => Item::Float(f64::from_bits(v)),
                (_, None) => {
                    return Err(Malformed::InvalidHead {
                        byte: 0xff,
                        offset: start,
                    });
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_shortest() {
        let enc = |m, a| {
            let (b, n) = head(m, a);
            b[..n].to_vec()
        };
        assert_eq!(enc(UNSIGNED, 23), [0x17]);
        assert_eq!(enc(UNSIGNED, 24), [0x18, 24]);
        assert_eq!(enc(NEGATIVE, 255), [0x38, 255]);
        assert_eq!(enc(ARRAY, 256), [0x99, 1, 0]);
        assert_eq!(enc(MAP, 65536), [0xba, 0, 1, 0, 0]);
        assert_eq!(
            enc(UNSIGNED, u64::MAX),
            [0x1b, 255, 255, 255, 255, 255, 255, 255, 255]
        );
    }

    #[test]
    fn floats_keep_their_bits_in_the_shortest_width() {
        for (v, len) in [
            (0.0, 3),
            (-0.0, 3),
            (1.5, 3),
            (65504.0, 3),
            (5.960_464_477_539_063e-8, 3), // smallest binary16 subnormal
            (0.1f32 as f64, 5),
            (0.1, 9),
            (5e-324, 9),
            (f64::MAX, 9),
        ] {
            let (b, n) = float(v);
            assert_eq!(n, len, "{v}");
            match Reader::new(&b[..n]).next().unwrap() {
                Item::Float(back) => assert_eq!(back.to_bits(), f64::to_bits(v)),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn reader_reads_what_ciborium_writes() {
        let value = ciborium::Value::Map(vec![
            (
                ciborium::Value::Text("k".into()),
                ciborium::Value::Bytes(vec![1, 2]),
            ),
            (
                ciborium::Value::Integer((-5).into()),
                ciborium::Value::Float(-0.0),
            ),
        ]);
        let mut buf = Vec::new();
        ciborium::into_writer(&value, &mut buf).unwrap();
        let mut r = Reader::new(&buf);
        assert_eq!(r.next().unwrap(), Item::Map(Some(2)));
        assert_eq!(r.next().unwrap(), Item::Text(Cow::Borrowed("k")));
        assert_eq!(r.next().unwrap(), Item::Bytes(Cow::Borrowed(&[1, 2][..])));
        assert_eq!(r.next().unwrap(), Item::Negative(4));
        match r.next().unwrap() {
            Item::Float(f) => assert_eq!(f.to_bits(), (-0.0f64).to_bits()),
            other => panic!("{other:?}"),
        }
        assert!(r.at_end());
    }

    #[test]
    fn indefinite_strings_join_and_bad_bytes_are_named() {
        // (_ "ab" "c") as text, then undefined, then break.
        let bytes = [0x7f, 0x62, b'a', b'b', 0x61, b'c', 0xff, 0xf7, 0xff];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.next().unwrap(), Item::Text(Cow::Owned("abc".into())));
        assert_eq!(r.next().unwrap(), Item::Simple(23));
        assert_eq!(r.next().unwrap(), Item::Break);
        assert_eq!(
            Reader::new(&[0x62, b'a']).next(),
            Err(Malformed::Truncated { offset: 0 })
        );
        assert_eq!(
            Reader::new(&[0x1c]).next(),
            Err(Malformed::InvalidHead {
                byte: 0x1c,
                offset: 0
            })
        );
        assert_eq!(
            Reader::new(&[0x61, 0xff]).next(),
            Err(Malformed::NotUtf8 { offset: 0 })
        );
        assert_eq!(
            Reader::new(&[0x7f, 0x41, 0]).next(),
            Err(Malformed::BadChunk { offset: 1 })
        );
        // A length far past the end does not allocate: it is truncated.
        assert_eq!(
            Reader::new(&[0x5b, 0x7f, 255, 255, 255, 255, 255, 255, 255]).next(),
            Err(Malformed::Truncated { offset: 0 })
        );
    }
}
