//! The CBOR data items (RFC 8949 §3) the JSON conversions need, through `ciborium-ll`.
//!
//! - Writing: [`Head`] is `ciborium_ll::Encoder::push` into 9 bytes on the stack. It writes
//!   preferred serialization: the shortest argument, and a float in the shortest of
//!   binary16/32/64 that gives back exactly its bits (so `-0.0` and subnormals survive).
//! - Reading: [`Reader`] pulls each head with `ciborium_ll::Decoder::pull` and adds what the
//!   decoder leaves to its caller or does differently, each in one place below: string
//!   contents borrowed from the record (`Decoder::bytes`/`text` copy them through a scratch
//!   buffer), indefinite-length strings whose chunks must be definite strings of the same
//!   type (those readers also accept nested indefinite chunks, `5f 5f 41 00 ff ff`), a
//!   two-byte simple value below 32 refused (RFC 8949 §3.3; the decoder accepts `f8 10`), and
//!   errors that say what is wrong as well as where.
//!
//! `ciborium`'s `Value` decoder is not used for output because it changes values on the way
//! (undefined becomes null, bignums of up to 16 bytes become integers or fail); reading heads
//! gives every item exactly as stored.

use std::borrow::Cow;

use ciborium_ll::{Decoder, Encoder, Error, Header};

/// One head as written by `ciborium-ll`: at most 9 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    bytes: [u8; 9],
    len: usize,
}

impl Head {
    /// The preferred serialization of `header`. Only simple values 0–23 and 32–255 are
    /// well-formed (the encoder would write 24–31 in a form readers refuse); the JSON side
    /// writes only false, true and null.
    pub(crate) fn new(header: Header) -> Self {
        let mut bytes = [0u8; 9];
        let mut free = &mut bytes[..];
        let written = Encoder::from(&mut free).push(header).is_ok();
        debug_assert!(written, "a CBOR head is at most 9 bytes");
        let len = 9 - free.len();
        Self { bytes, len }
    }

    /// The head's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
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
    Array(Option<usize>),
    /// Major type 5; `None`: indefinite length.
    Map(Option<usize>),
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
    /// What is not read yet: the decoder reads heads from it, strings are borrowed from it.
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, rest: bytes }
    }

    /// The offset of the next item.
    pub(crate) fn offset(&self) -> usize {
        self.bytes.len() - self.rest.len()
    }

    /// Whether every byte has been read.
    pub(crate) fn at_end(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next byte without consuming it.
    pub(crate) fn peek_byte(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next head, decoded by `ciborium-ll` (a decoder costs three words: one per head
    /// keeps `rest` ours to borrow strings from).
    fn pull(&mut self) -> Result<Header, Malformed> {
        let offset = self.offset();
        let byte = self.peek_byte();
        Decoder::from(Rest(&mut self.rest))
            .pull()
            .map_err(|e| match e {
                Error::Io(_) => Malformed::Truncated { offset },
                Error::Syntax(_) => syntax(byte, offset),
            })
    }

    /// The next `len` bytes, borrowed; the string they belong to starts at `start`.
    fn take(&mut self, len: usize, start: usize) -> Result<&'a [u8], Malformed> {
        if len > self.rest.len() {
            return Err(Malformed::Truncated { offset: start });
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    /// A string's contents after its head at `start`: borrowed when of definite length,
    /// else its chunks (each a definite string of the same type, text chunks each UTF-8)
    /// joined up to the break.
    fn string(
        &mut self,
        len: Option<usize>,
        text: bool,
        start: usize,
    ) -> Result<Cow<'a, [u8]>, Malformed> {
        if let Some(len) = len {
            return self.take(len, start).map(Cow::Borrowed);
        }
        let mut joined = Vec::new();
        loop {
            let chunk_at = self.offset();
            match (self.pull()?, text) {
                (Header::Break, _) => return Ok(Cow::Owned(joined)),
                (Header::Bytes(Some(n)), false) | (Header::Text(Some(n)), true) => {
                    let chunk = self.take(n, chunk_at)?;
                    if text && std::str::from_utf8(chunk).is_err() {
                        return Err(Malformed::NotUtf8 { offset: chunk_at });
                    }
                    joined.extend_from_slice(chunk);
                }
                _ => return Err(Malformed::BadChunk { offset: chunk_at }),
            }
        }
    }

    /// The next item.
    pub(crate) fn next(&mut self) -> Result<Item<'a>, Malformed> {
        let start = self.offset();
        let not_utf8 = |_| Malformed::NotUtf8 { offset: start };
        Ok(match self.pull()? {
            Header::Positive(n) => Item::Unsigned(n),
            Header::Negative(n) => Item::Negative(n),
            Header::Bytes(len) => Item::Bytes(self.string(len, false, start)?),
            Header::Text(len) => Item::Text(match self.string(len, true, start)? {
                Cow::Borrowed(b) => Cow::Borrowed(std::str::from_utf8(b).map_err(not_utf8)?),
                Cow::Owned(b) => {
                    Cow::Owned(String::from_utf8(b).map_err(|e| not_utf8(e.utf8_error()))?)
                }
            }),
            Header::Array(len) => Item::Array(len),
            Header::Map(len) => Item::Map(len),
            Header::Tag(t) => Item::Tag(t),
            // Values 0-23 fit the head byte; the two-byte form (`f8 xx`) starts at 32.
            Header::Simple(v) if v < 32 && self.offset() - start == 2 => {
                return Err(Malformed::BadSimple { offset: start });
            }
            Header::Simple(v) => Item::Simple(v),
            Header::Float(f) => Item::Float(f),
            Header::Break => Item::Break,
        })
    }
}

struct Rest<'r, 'a>(&'r mut &'a [u8]);

impl std::io::Read for Rest<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::io::Read::read(self.0, buf)
    }
    #[inline(always)]
    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        let n = buf.len();
        if n > self.0.len() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        match n {
            0 => {}
            1 => buf[0] = self.0[0],
            2 => buf.copy_from_slice(&self.0[..2]),
            4 => buf.copy_from_slice(&self.0[..4]),
            8 => buf.copy_from_slice(&self.0[..8]),
            _ => buf.copy_from_slice(&self.0[..n]),
        }
        *self.0 = &self.0[n..];
        Ok(())
    }
}

/// What a `ciborium-ll` syntax error at the head `byte` (at `offset`) is: additional
/// information 28-30, or 31 (indefinite) on an integer or a tag; else a length beyond
/// `usize` (32-bit targets only), which no slice of bytes can hold.
fn syntax(byte: Option<u8>, offset: usize) -> Malformed {
    match byte {
        Some(byte) if matches!((byte >> 5, byte & 31), (_, 28..=30) | (0 | 1 | 6, 31)) => {
            Malformed::InvalidHead { byte, offset }
        }
        _ => Malformed::Truncated { offset },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(bytes: &[u8]) -> Result<Item<'_>, Malformed> {
        Reader::new(bytes).next()
    }

    #[test]
    fn heads_are_shortest() {
        let enc = |h| Head::new(h).as_bytes().to_vec();
        assert_eq!(enc(Header::Positive(23)), [0x17]);
        assert_eq!(enc(Header::Positive(24)), [0x18, 24]);
        assert_eq!(enc(Header::Negative(255)), [0x38, 255]);
        assert_eq!(enc(Header::Array(Some(256))), [0x99, 1, 0]);
        assert_eq!(enc(Header::Map(Some(65536))), [0xba, 0, 1, 0, 0]);
        assert_eq!(
            enc(Header::Positive(u64::MAX)),
            [0x1b, 255, 255, 255, 255, 255, 255, 255, 255]
        );
        assert_eq!(enc(Header::Simple(ciborium_ll::simple::NULL)), [0xf6]);
    }

    #[test]
    fn floats_keep_their_bits_in_the_shortest_width() {
        for (v, len) in [
            (0.0, 3),
            (-0.0, 3),
            (1.5, 3),
            (65504.0, 3),
            (5.960_464_477_539_063e-8, 3), // smallest binary16 subnormal
            (6.097_555_160_522_461e-5, 3), // largest binary16 subnormal
            (65520.0, 5),                  // rounds to binary16 infinity: not kept there
            (0.1f32 as f64, 5),
            (1.401_298_464_324_817e-45, 5), // smallest binary32 subnormal
            (0.1, 9),
            (5e-324, 9),
            (-f64::MIN_POSITIVE, 9),
            (f64::MAX, 9),
        ] {
            let head = Head::new(Header::Float(v));
            assert_eq!(head.as_bytes().len(), len, "{v}");
            match Reader::new(head.as_bytes()).next().unwrap() {
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
            first(&[0x62, b'a']),
            Err(Malformed::Truncated { offset: 0 })
        );
        assert_eq!(first(&[0x19, 1]), Err(Malformed::Truncated { offset: 0 }));
        assert_eq!(
            first(&[0x1c]),
            Err(Malformed::InvalidHead {
                byte: 0x1c,
                offset: 0
            })
        );
        // Indefinite length on an integer or a tag.
        for byte in [0x1f, 0x3f, 0xdf] {
            assert_eq!(
                first(&[byte, 0]),
                Err(Malformed::InvalidHead { byte, offset: 0 })
            );
        }
        assert_eq!(first(&[0x61, 0xff]), Err(Malformed::NotUtf8 { offset: 0 }));
        assert_eq!(
            first(&[0x7f, 0x41, 0]),
            Err(Malformed::BadChunk { offset: 1 })
        );
        // A length far past the end does not allocate: it is truncated.
        assert_eq!(
            first(&[0x5b, 0x7f, 255, 255, 255, 255, 255, 255, 255]),
            Err(Malformed::Truncated { offset: 0 })
        );
    }

    #[test]
    fn what_the_decoder_accepts_but_cbor_forbids_is_refused() {
        // A nested indefinite-length chunk (ciborium-ll's segment readers accept it).
        assert_eq!(
            first(&[0x5f, 0x5f, 0x41, 0, 0xff, 0xff]),
            Err(Malformed::BadChunk { offset: 1 })
        );
        // A text chunk in bytes, a byte chunk in text, a simple value as a chunk.
        assert_eq!(
            first(&[0x5f, 0x61, b'a', 0xff]),
            Err(Malformed::BadChunk { offset: 1 })
        );
        assert_eq!(
            first(&[0x7f, 0x41, b'a', 0xff]),
            Err(Malformed::BadChunk { offset: 1 })
        );
        assert_eq!(
            first(&[0x7f, 0xf8, 0x10, 0xff]),
            Err(Malformed::BadChunk { offset: 1 })
        );
        // Each text chunk is UTF-8 on its own: "é" split across two chunks is not.
        assert_eq!(
            first(&[0x7f, 0x61, 0xc3, 0x61, 0xa9, 0xff]),
            Err(Malformed::NotUtf8 { offset: 1 })
        );
        // Two-byte simple values below 32 (the decoder gives `Simple(16)` for `f8 10`).
        for v in [0, 16, 23, 24, 31] {
            assert_eq!(first(&[0xf8, v]), Err(Malformed::BadSimple { offset: 0 }));
        }
        assert_eq!(first(&[0xf8, 32]), Ok(Item::Simple(32)));
        assert_eq!(first(&[0xf0]), Ok(Item::Simple(16)));
    }
}
