//! The three small protocol-buffer messages of the ArrayRecord footer (array_record's
//! `layout.proto`), encoded and decoded by hand: only varint fields and one string.

use crate::varint;

/// `RiegeliPostscript.magic`.
pub(crate) const MAGIC: u64 = 0x7193_0e70_4fda_e05e;

/// The footer format version this crate reads and writes.
pub(crate) const VERSION: u64 = 1;

/// `ArrayRecordFooter`: one per data chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FooterEntry {
    pub(crate) chunk_offset: u64,
    pub(crate) decoded_data_size: u64,
    pub(crate) num_records: u64,
}

/// `RiegeliFooterMetadata.array_record_metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct FooterMetadata {
    pub(crate) version: u64,
    pub(crate) num_chunks: u64,
    pub(crate) num_records: u64,
    pub(crate) writer_options: String,
}

/// `RiegeliPostscript`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Postscript {
    pub(crate) footer_offset: u64,
    pub(crate) magic: u64,
}

/// A field's value: a varint, or the bytes of a length-delimited field.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

/// Calls `f(field, value)` for each field of `msg`; `None` on malformed input.
fn fields<'a>(mut msg: &'a [u8], mut f: impl FnMut(u64, Value<'a>)) -> Option<()> {
    while !msg.is_empty() {
        let (tag, n) = varint::get(msg)?;
        msg = &msg[n..];
        let value = match tag & 7 {
            0 => {
                let (v, n) = varint::get(msg)?;
                msg = &msg[n..];
                Value::Varint(v)
            }
            1 => {
                msg = msg.get(8..)?;
                Value::Other
            }
            2 => {
                let (len, n) = varint::get(msg)?;
                let len = usize::try_from(len).ok()?;
                let bytes = msg.get(n..n.checked_add(len)?)?;
                msg = &msg[n + len..];
                Value::Bytes(bytes)
            }
            5 => {
                msg = msg.get(4..)?;
                Value::Other
            }
            _ => return None, // groups (3, 4) are not used by these messages
        };
        f(tag >> 3, value);
    }
    Some(())
}

fn put_varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    varint::put(out, field << 3);
    varint::put(out, v);
}

fn put_bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint::put(out, (field << 3) | 2);
    varint::put(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl FooterEntry {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        put_varint_field(&mut out, 1, self.chunk_offset);
        put_varint_field(&mut out, 2, self.decoded_data_size);
        put_varint_field(&mut out, 3, self.num_records);
        out
    }

    pub(crate) fn decode(msg: &[u8]) -> Option<FooterEntry> {
        let mut e = FooterEntry::default();
        fields(msg, |field, v| match (field, v) {
            (1, Value::Varint(v)) => e.chunk_offset = v,
            (2, Value::Varint(v)) => e.decoded_data_size = v,
            (3, Value::Varint(v)) => e.num_records = v,
            _ => {}
        })?;
        Some(e)
    }
}

impl FooterMetadata {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut inner = Vec::with_capacity(32 + self.writer_options.len());
        put_varint_field(&mut inner, 1, self.version);
        put_varint_field(&mut inner, 2, self.num_chunks);
        put_varint_field(&mut inner, 3, self.num_records);
        put_bytes_field(&mut inner, 4, self.writer_options.as_bytes());
        let mut out = Vec::with_capacity(inner.len() + 4);
        put_bytes_field(&mut out, 1, &inner);
        out
    }

    /// Decodes the message; `None` when malformed or without `array_record_metadata`.
    pub(crate) fn decode(msg: &[u8]) -> Option<FooterMetadata> {
        let mut inner = None;
        fields(msg, |field, v| {
            if let (1, Value::Bytes(b)) = (field, v) {
                inner = Some(b);
            }
        })?;
        let mut m = FooterMetadata::default();
        let mut options_ok = true;
        fields(inner?, |field, v| match (field, v) {
            (1, Value::Varint(v)) => m.version = v,
            (2, Value::Varint(v)) => m.num_chunks = v,
            (3, Value::Varint(v)) => m.num_records = v,
            (4, Value::Bytes(b)) => match std::str::from_utf8(b) {
                Ok(s) => m.writer_options = s.to_owned(),
                Err(_) => options_ok = false,
            },
            _ => {}
        })?;
        options_ok.then_some(m)
    }
}

impl Postscript {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        put_varint_field(&mut out, 1, self.footer_offset);
        put_varint_field(&mut out, 2, self.magic);
        out
    }

    pub(crate) fn decode(msg: &[u8]) -> Option<Postscript> {
        let mut p = Postscript::default();
        fields(msg, |field, v| match (field, v) {
            (1, Value::Varint(v)) => p.footer_offset = v,
            (2, Value::Varint(v)) => p.magic = v,
            _ => {}
        })?;
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn postscript_matches_a_python_written_one() {
        // The record the array_record package wrote into a sample's postscript.
        let bytes = [
            0x08, 0xae, 0x06, 0x10, 0xde, 0xc0, 0xeb, 0xfe, 0x84, 0xce, 0xc3, 0xc9, 0x71,
        ];
        let p = Postscript::decode(&bytes).unwrap();
        assert_eq!(
            p,
            Postscript {
                footer_offset: 814,
                magic: MAGIC
            }
        );
        assert_eq!(p.encode(), bytes);
    }

    #[test]
    fn malformed_messages_are_refused() {
        assert_eq!(FooterEntry::decode(&[0x08]), None);
        assert_eq!(FooterEntry::decode(&[0x0a, 0x05, 1]), None);
        assert_eq!(FooterMetadata::decode(&[]), None);
        assert_eq!(FooterMetadata::decode(&[0x0a, 0x02, 0x22, 0x01]), None);
        assert_eq!(
            FooterMetadata::decode(&[0x0a, 0x03, 0x22, 0x01, 0xff]),
            None
        );
        // Unknown fields of every wire type are skipped.
        let mut e = vec![0x21, 1, 2, 3, 4, 5, 6, 7, 8, 0x2d, 1, 2, 3, 4, 0x32, 1, 9];
        e.extend(
            FooterEntry {
                chunk_offset: 5,
                decoded_data_size: 6,
                num_records: 7,
            }
            .encode(),
        );
        assert_eq!(FooterEntry::decode(&e).unwrap().num_records, 7);
    }

    proptest! {
        #[test]
        fn round_trips(a: u64, b: u64, c: u64, d: u64, s in ".{0,40}") {
            let e = FooterEntry { chunk_offset: a, decoded_data_size: b, num_records: c };
            prop_assert_eq!(FooterEntry::decode(&e.encode()), Some(e));
            let m = FooterMetadata { version: a, num_chunks: b, num_records: c, writer_options: s };
            prop_assert_eq!(FooterMetadata::decode(&m.encode()), Some(m));
            let p = Postscript { footer_offset: d, magic: a };
            prop_assert_eq!(Postscript::decode(&p.encode()), Some(p));
        }
    }
}
