//! Records as JSON: CBOR records are converted value by value; raw records print as a JSON
//! string when they are UTF-8 and as `{"hex": "..."}` otherwise.

use ciborium::Value;
use serde_json::{Map, Number, Value as Json};

/// Encodes a JSON value as a CBOR record.
pub(crate) fn json_to_cbor(value: &Json, out: &mut Vec<u8>) -> Result<(), String> {
    ciborium::into_writer(value, out).map_err(|e| format!("cannot encode as CBOR: {e}"))
}

/// Decodes a record of shard format `format` into JSON.
pub(crate) fn record_to_json(format: &str, bytes: &[u8]) -> Result<Json, String> {
    match format {
        "cbor" => {
            let value: Value = ciborium::from_reader(bytes)
                .map_err(|e| format!("does not decode as CBOR: {e}"))?;
            Ok(cbor_to_json(value))
        }
        "raw" => Ok(match std::str::from_utf8(bytes) {
            Ok(s) => Json::String(s.to_owned()),
            Err(_) => {
                let mut m = Map::new();
                m.insert("hex".into(), Json::String(hex(bytes)));
                Json::Object(m)
            }
        }),
        other => Err(format!(
            "record format {other:?} has no JSON view (this tool reads cbor and raw)"
        )),
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// CBOR to JSON: byte strings become `{"hex": ...}`, tags are dropped, non-string map keys
/// are written as their JSON text, non-finite floats become `null`.
pub(crate) fn cbor_to_json(value: Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(b),
        Value::Integer(i) => {
            let i = i128::from(i);
            if let Ok(v) = i64::try_from(i) {
                Json::Number(v.into())
            } else if let Ok(v) = u64::try_from(i) {
                Json::Number(v.into())
            } else {
                Json::String(i.to_string())
            }
        }
        Value::Float(f) => Number::from_f64(f).map_or(Json::Null, Json::Number),
        Value::Text(s) => Json::String(s),
        Value::Bytes(b) => {
            let mut m = Map::new();
            m.insert("hex".into(), Json::String(hex(&b)));
            Json::Object(m)
        }
        Value::Array(a) => Json::Array(a.into_iter().map(cbor_to_json).collect()),
        Value::Map(entries) => {
            let mut m = Map::new();
            for (k, v) in entries {
                let key = match k {
                    Value::Text(s) => s,
                    other => cbor_to_json(other).to_string(),
                };
                m.insert(key, cbor_to_json(v));
            }
            Json::Object(m)
        }
        Value::Tag(_, inner) => cbor_to_json(*inner),
        _ => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_through_cbor() {
        let v: Json = serde_json::json!({
            "id": 7, "text": "héllo", "tokens": [1, 2, 300000], "score": 0.5,
            "neg": -4, "big": u64::MAX, "nested": {"a": [true, null]}
        });
        let mut buf = Vec::new();
        json_to_cbor(&v, &mut buf).unwrap();
        assert_eq!(record_to_json("cbor", &buf).unwrap(), v);
    }

    #[test]
    fn raw_records_are_strings_or_hex() {
        assert_eq!(
            record_to_json("raw", b"abc").unwrap(),
            Json::String("abc".into())
        );
        assert_eq!(
            record_to_json("raw", &[0xff, 0x01]).unwrap(),
            serde_json::json!({"hex": "ff01"})
        );
        assert!(record_to_json("u32", b"").is_err());
        assert!(record_to_json("cbor", &[0xff]).is_err());
    }

    #[test]
    fn cbor_bytes_and_odd_keys_map_to_json() {
        let v = Value::Map(vec![
            (Value::Integer(1.into()), Value::Bytes(vec![0xab])),
            (Value::Text("f".into()), Value::Float(f64::NAN)),
        ]);
        assert_eq!(
            cbor_to_json(v),
            serde_json::json!({"1": {"hex": "ab"}, "f": null})
        );
    }
}
