//! CBOR items decoded and encoded with `ciborium-ll`, independently of the CLI's own CBOR
//! code, and their JSON view (docs/cli.md, "Exact JSON").

use ciborium_ll::{Decoder, Encoder, Header};
use num_bigint::{BigInt, Sign};

use crate::json_model::Json;

/// One CBOR data item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cbor {
    /// Major types 0 and 1.
    Int(BigInt),
    /// Major type 2 (chunks joined).
    Bytes(Vec<u8>),
    /// Major type 3 (chunks joined).
    Text(String),
    /// Major type 4.
    Array(Vec<Cbor>),
    /// Major type 5, entries in order.
    Map(Vec<(Cbor, Cbor)>),
    /// Major type 6.
    Tag(u64, Box<Cbor>),
    /// Simple values (20 false, 21 true, 22 null, 23 undefined, ...).
    Simple(u8),
    /// A float, widened exactly to binary64: its bits.
    Float(u64),
}

/// Deepest nesting decoded (the CLI accepts 128 levels of arrays and maps).
const MAX_DEPTH: usize = 256;
/// The most bytes of a bignum's magnitude the CLI prints (`MAX_BIGNUM_BYTES`).
const MAX_BIGNUM_BYTES: usize = 1701;
/// The deepest nesting of arrays and objects the CLI accepts (`MAX_DEPTH`).
const JSON_MAX_DEPTH: usize = 128;

type Dec<'a> = Decoder<&'a [u8]>;

/// Decodes exactly one item from `bytes` (nothing may follow it).
pub fn decode(bytes: &[u8]) -> Result<Cbor, String> {
    let mut d: Dec<'_> = Decoder::from(bytes);
    let item = item(&mut d, 0)?;
    if d.offset() != bytes.len() {
        return Err(format!("{} bytes after the item", bytes.len() - d.offset()));
    }
    Ok(item)
}

fn pull(d: &mut Dec<'_>) -> Result<Header, String> {
    d.pull().map_err(|e| format!("{e:?}"))
}

fn item(d: &mut Dec<'_>, depth: usize) -> Result<Cbor, String> {
    if depth > MAX_DEPTH {
        return Err("too deep".into());
    }
    let h = pull(d)?;
    Ok(match h {
        Header::Positive(n) => Cbor::Int(n.into()),
        Header::Negative(n) => Cbor::Int(-1 - BigInt::from(n)),
        Header::Float(f) => Cbor::Float(f.to_bits()),
        Header::Simple(s) => Cbor::Simple(s),
        Header::Tag(t) => Cbor::Tag(t, Box::new(item(d, depth + 1)?)),
        Header::Break => return Err("unexpected break".into()),
        Header::Bytes(len) => {
            let mut out = Vec::new();
            let mut segments = d.bytes(len);
            let mut buf = [0u8; 4096];
            while let Some(mut seg) = segments.pull().map_err(|e| format!("{e:?}"))? {
                while let Some(chunk) = seg.pull(&mut buf).map_err(|e| format!("{e:?}"))? {
                    out.extend_from_slice(chunk);
                }
            }
            Cbor::Bytes(out)
        }
        Header::Text(len) => {
            let mut out = String::new();
            let mut segments = d.text(len);
            let mut buf = [0u8; 4096];
            while let Some(mut seg) = segments.pull().map_err(|e| format!("{e:?}"))? {
                while let Some(chunk) = seg.pull(&mut buf).map_err(|e| format!("{e:?}"))? {
                    out.push_str(chunk);
                }
            }
            Cbor::Text(out)
        }
        Header::Array(len) => {
            let mut items = Vec::new();
            match len {
                Some(n) => {
                    for _ in 0..n {
                        items.push(item(d, depth + 1)?);
                    }
                }
                None => loop {
                    match pull(d)? {
                        Header::Break => break,
                        h => {
                            d.push(h);
                            items.push(item(d, depth + 1)?);
                        }
                    }
                },
            }
            Cbor::Array(items)
        }
        Header::Map(len) => {
            let mut entries = Vec::new();
            match len {
                Some(n) => {
                    for _ in 0..n {
                        let k = item(d, depth + 1)?;
                        entries.push((k, item(d, depth + 1)?));
                    }
                }
                None => loop {
                    match pull(d)? {
                        Header::Break => break,
                        h => {
                            d.push(h);
                            let k = item(d, depth + 1)?;
                            entries.push((k, item(d, depth + 1)?));
                        }
                    }
                },
            }
            Cbor::Map(entries)
        }
    })
}

/// The JSON the CLI prints for `item`, or why it must refuse it: bignums (tags 2 and 3 on
/// bytes, magnitude of at most 1701 significant bytes) as integers, byte strings as
/// `{"hex": "..."}`, finite floats, text keys without repeats, false/true/null, nesting of
/// at most 128 arrays and maps; anything else is refused.
pub fn json_view(item: &Cbor) -> Result<Json, String> {
    view(item, 0)
}

fn view(item: &Cbor, depth: usize) -> Result<Json, String> {
    Ok(match item {
        Cbor::Int(n) => Json::Int(n.clone()),
        Cbor::Float(bits) => {
            let f = f64::from_bits(*bits);
            if !f.is_finite() {
                return Err("NaN or infinity".into());
            }
            Json::Float(*bits)
        }
        Cbor::Text(s) => Json::Str(s.clone()),
        Cbor::Bytes(b) => Json::Obj(vec![("hex".into(), Json::Str(hex(b)))]),
        Cbor::Simple(20) => Json::Bool(false),
        Cbor::Simple(21) => Json::Bool(true),
        Cbor::Simple(22) => Json::Null,
        Cbor::Simple(s) => return Err(format!("simple value {s}")),
        Cbor::Tag(t @ (2 | 3), inner) => match &**inner {
            Cbor::Bytes(b) => {
                let significant = b.iter().position(|x| *x != 0).map_or(0, |i| b.len() - i);
                if significant > MAX_BIGNUM_BYTES {
                    return Err("bignum too long".into());
                }
                let n = BigInt::from_bytes_be(Sign::Plus, b);
                Json::Int(if *t == 2 { n } else { -1 - n })
            }
            _ => return Err("bignum tag around something other than bytes".into()),
        },
        Cbor::Tag(t, _) => return Err(format!("tag {t}")),
        Cbor::Array(items) => {
            if depth >= JSON_MAX_DEPTH {
                return Err("too deep".into());
            }
            Json::Arr(
                items
                    .iter()
                    .map(|i| view(i, depth + 1))
                    .collect::<Result<_, _>>()?,
            )
        }
        Cbor::Map(entries) => {
            if depth >= JSON_MAX_DEPTH {
                return Err("too deep".into());
            }
            let mut out: Vec<(String, Json)> = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                let Cbor::Text(k) = k else {
                    return Err("non-text key".into());
                };
                if out.iter().any(|(seen, _)| seen == k) {
                    return Err(format!("duplicate key {k:?}"));
                }
                out.push((k.clone(), view(v, depth + 1)?));
            }
            Json::Obj(out)
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The canonical CBOR of a JSON value, as the CLI's JSON → CBOR encoder must write it
/// (RFC 8949 preferred serialization): shortest heads, definite lengths, integers as major
/// types 0/1 from −2^64 to 2^64−1 and as bignums (no leading zero byte) beyond, floats in the
/// shortest of binary16/32/64 that keeps the bits, keys in order.
pub fn encode_canonical(v: &Json) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = Encoder::from(&mut out);
    encode(&mut e, v);
    out
}

fn encode(e: &mut Encoder<&mut Vec<u8>>, v: &Json) {
    // Writing into a Vec cannot fail.
    match v {
        Json::Null => e.push(Header::Simple(22)).unwrap(),
        Json::Bool(b) => e.push(Header::Simple(if *b { 21 } else { 20 })).unwrap(),
        Json::Float(bits) => e.push(Header::Float(f64::from_bits(*bits))).unwrap(),
        Json::Str(s) => e.text(s, None).unwrap(),
        Json::Int(n) => {
            if let Ok(u) = u64::try_from(n) {
                e.push(Header::Positive(u)).unwrap();
            } else if let Ok(m) = u64::try_from(-1 - n) {
                e.push(Header::Negative(m)).unwrap();
            } else if n.sign() == Sign::Minus {
                let m: BigInt = -1 - n;
                e.push(Header::Tag(3)).unwrap();
                e.bytes(&m.to_bytes_be().1, None).unwrap();
            } else {
                e.push(Header::Tag(2)).unwrap();
                e.bytes(&n.to_bytes_be().1, None).unwrap();
            }
        }
        Json::Arr(items) => {
            e.push(Header::Array(Some(items.len()))).unwrap();
            for i in items {
                encode(e, i);
            }
        }
        Json::Obj(entries) => {
            e.push(Header::Map(Some(entries.len()))).unwrap();
            for (k, v) in entries {
                e.text(k, None).unwrap();
                encode(e, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_round_trip() {
        let v = crate::json_model::parse(
            br#"{"a":[1,-1,18446744073709551616,-18446744073709551617,1.5,-0,1e300]}"#,
        )
        .unwrap();
        let bytes = encode_canonical(&v);
        assert_eq!(json_view(&decode(&bytes).unwrap()).unwrap(), v);
        assert_eq!(bytes[..4], [0xa1, 0x61, b'a', 0x87]);
    }
}
