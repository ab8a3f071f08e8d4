//! Property: any JSON document — nested arrays and objects with unicode keys (no duplicates),
//! floats of any finite bit pattern (subnormals and `-0.0` included), integers of any size —
//! written in any JSON spelling, becomes exactly the CBOR an independent encoder (ciborium)
//! writes for the same values, and comes back as the canonical text of the same values:
//! floats by bits, integers by value, keys in order.

use ciborium::Value;
use num_bigint::{BigInt, Sign};
use proptest::prelude::*;

use super::{json_to_cbor, record_json};

/// A JSON document as the values it denotes.
#[derive(Debug, Clone)]
enum Doc {
    Null,
    Bool(bool),
    Int(BigInt),
    /// A finite binary64, by bits.
    Float(u64),
    Str(String),
    Arr(Vec<Doc>),
    Obj(Vec<(String, Doc)>),
}

/// How a document is spelled: canonical (what `cat` prints) or one of the other ways JSON
/// allows (whitespace, `\u` escapes, exponent forms, 17-digit decimals, `E+`).
#[derive(Debug, Clone, Copy)]
struct Style {
    canonical: bool,
    seed: u64,
}

fn int() -> impl Strategy<Value = BigInt> {
    prop_oneof![
        any::<i64>().prop_map(BigInt::from),
        any::<u64>().prop_map(BigInt::from),
        // Around the edges of the native CBOR range.
        (0u64..4, any::<bool>()).prop_map(|(d, neg)| {
            let edge = BigInt::from(u64::MAX) + 1u32;
            let v = edge + d - 2u32;
            if neg { -v } else { v }
        }),
        // Any size: up to 80 digits.
        ("[1-9][0-9]{0,79}", any::<bool>()).prop_map(|(digits, neg)| {
            let v: BigInt = digits.parse().unwrap();
            if neg { -v } else { v }
        }),
    ]
}

fn float() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>().prop_filter("finite", |b| f64::from_bits(*b).is_finite()),
        (1u64..(1 << 52), any::<bool>()).prop_map(|(m, neg)| m | (u64::from(neg) << 63)), // subnormals
        Just((-0.0f64).to_bits()),
        Just(0.0f64.to_bits()),
        Just(f64::MAX.to_bits()),
        Just(f64::MIN_POSITIVE.to_bits()),
        any::<f32>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| f64::from(f).to_bits()),
        (-70_000i32..70_000).prop_map(|i| (f64::from(i) / 64.0).to_bits()), // binary16-sized
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter)
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        int().prop_map(Doc::Int),
        float().prop_map(Doc::Float),
        text().prop_map(Doc::Str),
    ];
    let wide = leaf.clone();
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Doc::Arr),
            // Wide containers: CBOR heads past one byte, key sets past the small list.
            prop::collection::vec(wide.clone(), 20..40).prop_map(Doc::Arr),
            prop::collection::vec((text(), wide.clone()), 17..30).prop_map(|entries| {
                let mut seen = std::collections::HashSet::new();
                Doc::Obj(
                    entries
                        .into_iter()
                        .filter(|(k, _)| seen.insert(k.clone()))
                        .collect(),
                )
            }),
            prop::collection::vec((text(), inner), 0..8).prop_map(|entries| {
                let mut seen = std::collections::HashSet::new();
                Doc::Obj(
                    entries
                        .into_iter()
                        .filter(|(k, _)| seen.insert(k.clone()))
                        .collect(),
                )
            }),
        ]
    })
}

/// A small deterministic generator for spelling choices.
fn pick(seed: &mut u64, n: usize) -> usize {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    usize::try_from(*seed % n as u64).unwrap_or(0)
}

fn space(out: &mut String, style: &mut Style) {
    if !style.canonical {
        out.push_str([" ", "", "\t", "  \r"][pick(&mut style.seed, 4)]);
    }
}

fn string(out: &mut String, s: &str, style: &mut Style) {
    if style.canonical || pick(&mut style.seed, 2) == 0 {
        out.push_str(&serde_json::to_string(s).unwrap());
        return;
    }
    out.push('"');
    for c in s.chars() {
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            out.push_str(&format!("\\u{u:04x}"));
        }
    }
    out.push('"');
}

fn float_text(bits: u64, style: &mut Style) -> String {
    let v = f64::from_bits(bits);
    let shortest = ryu::Buffer::new().format_finite(v).to_owned();
    if style.canonical {
        return shortest;
    }
    match pick(&mut style.seed, 4) {
        0 => shortest,
        1 => format!("{v:e}"),
        2 => format!("{v:.17e}"),
        _ => format!("{v:.20e}").replace("e", "E+").replace("E+-", "E-"),
    }
}

fn render(doc: &Doc, out: &mut String, style: &mut Style) {
    space(out, style);
    match doc {
        Doc::Null => out.push_str("null"),
        Doc::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Doc::Int(i) => out.push_str(&i.to_string()),
        Doc::Float(bits) => out.push_str(&float_text(*bits, style)),
        Doc::Str(s) => string(out, s, style),
        Doc::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(item, out, style);
            }
            space(out, style);
            out.push(']');
        }
        Doc::Obj(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(out, style);
                string(out, k, style);
                space(out, style);
                out.push(':');
                render(v, out, style);
            }
            space(out, style);
            out.push('}');
        }
    }
    space(out, style);
}

/// The CBOR value an independent encoder is given for the document.
fn value(doc: &Doc) -> Value {
    match doc {
        Doc::Null => Value::Null,
        Doc::Bool(b) => Value::Bool(*b),
        Doc::Int(i) => match i128::try_from(i).ok().and_then(|v| v.try_into().ok()) {
            Some(v) => Value::Integer(v),
            None if i.sign() == Sign::Minus => {
                let n = -i - 1u32;
                Value::Tag(3, Box::new(Value::Bytes(n.to_bytes_be().1)))
            }
            None => Value::Tag(2, Box::new(Value::Bytes(i.to_bytes_be().1))),
        },
        Doc::Float(bits) => Value::Float(f64::from_bits(*bits)),
        Doc::Str(s) => Value::Text(s.clone()),
        Doc::Arr(items) => Value::Array(items.iter().map(value).collect()),
        Doc::Obj(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| (Value::Text(k.clone()), value(v)))
                .collect(),
        ),
    }
}

/// Every float's canonical text reads back to its own bits (the reference is sound).
fn floats_read_back(doc: &Doc) -> bool {
    match doc {
        Doc::Float(bits) => {
            let text = ryu::Buffer::new()
                .format_finite(f64::from_bits(*bits))
                .to_owned();
            text.parse::<f64>().is_ok_and(|v| v.to_bits() == *bits)
        }
        Doc::Arr(items) => items.iter().all(floats_read_back),
        Doc::Obj(entries) => entries.iter().all(|(_, v)| floats_read_back(v)),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_document_comes_back_exactly(doc in doc(), canonical in any::<bool>(), seed in 1u64..) {
        let mut style = Style { canonical, seed };
        let mut input = String::new();
        render(&doc, &mut input, &mut style);
        let mut expected_text = String::new();
        render(&doc, &mut expected_text, &mut Style { canonical: true, seed: 1 });
        prop_assert!(floats_read_back(&doc));

        let mut cbor = Vec::new();
        json_to_cbor(input.as_bytes(), &mut cbor, usize::MAX)
            .map_err(|e| TestCaseError::fail(format!("{input}: {e}")))?;
        let mut expected_cbor = Vec::new();
        ciborium::into_writer(&value(&doc), &mut expected_cbor).unwrap();
        prop_assert_eq!(&cbor, &expected_cbor, "CBOR of {}", input);

        let mut out = Vec::new();
        record_json("cbor", &cbor, &mut out)
            .map_err(|e| TestCaseError::fail(format!("{input}: {e}")))?;
        prop_assert_eq!(streamed("cbor", &cbor).unwrap(), expected_text.as_bytes());
        prop_assert_eq!(String::from_utf8(out).unwrap(), expected_text, "from {}", input);
    }

    /// Streamed in chunks of a few bytes, any bytes as a record of either format give the
    /// text `record_json` gives, or the same refusal, before a byte is written.
    #[test]
    fn streamed_text_is_the_whole_text(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        for format in ["cbor", "raw"] {
            let mut whole = Vec::new();
            let want = record_json(format, &bytes, &mut whole).map(|()| whole);
            let got = streamed(format, &bytes);
            match (want, got) {
                (Ok(w), Ok(g)) => prop_assert_eq!(w, g),
                (Err(w), Err(g)) => prop_assert_eq!(w.to_string(), g.to_string()),
                (w, g) => prop_assert!(false, "{format}: {w:?} vs {g:?}"),
            }
        }
    }

    #[test]
    fn any_float_bits_come_back(bits in float()) {
        let text = ryu::Buffer::new().format_finite(f64::from_bits(bits)).to_owned();
        let mut cbor = Vec::new();
        json_to_cbor(text.as_bytes(), &mut cbor, usize::MAX).unwrap();
        let mut out = Vec::new();
        record_json("cbor", &cbor, &mut out).unwrap();
        let back: f64 = std::str::from_utf8(&out).unwrap().parse().unwrap();
        prop_assert_eq!(back.to_bits(), bits);
    }
}

/// The record's text through [`RecordJson`]: checked without rendering (as a record over
/// [`RENDER_WHOLE_MAX`](super::RENDER_WHOLE_MAX) is), then streamed in chunks of 5 bytes.
fn streamed(format: &str, bytes: &[u8]) -> Result<Vec<u8>, super::EmitError> {
    let mut scratch = Vec::new();
    let record = super::RecordJson::check_with(format, bytes, &mut scratch, 0)?;
    assert_eq!(
        record.text.is_none(),
        !bytes.is_empty(),
        "rendered whole only when empty"
    );
    let mut out = Vec::new();
    record.write_chunked(&mut out, 5).unwrap();
    Ok(out)
}
