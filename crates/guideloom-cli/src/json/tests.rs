//! The extremes: each accepted value comes back as the same text, each refusal says why.

use ciborium::Value;

use super::*;

/// JSON text → CBOR → JSON text.
fn round_trip(text: &str) -> Result<String, String> {
    let mut cbor = Vec::new();
    json_to_cbor(text.as_bytes(), &mut cbor, usize::MAX).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    record_json("cbor", &cbor, &mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out).unwrap())
}

fn cbor_of(text: &str) -> Vec<u8> {
    let mut cbor = Vec::new();
    json_to_cbor(text.as_bytes(), &mut cbor, usize::MAX).unwrap();
    cbor
}

fn refused(text: &str) -> String {
    let mut cbor = Vec::new();
    match json_to_cbor(text.as_bytes(), &mut cbor, usize::MAX) {
        Ok(()) => panic!("{text} was accepted"),
        Err(e) => e.to_string(),
    }
}

fn emitted(value: &Value) -> Result<String, String> {
    let mut cbor = Vec::new();
    ciborium::into_writer(value, &mut cbor).unwrap();
    let mut out = Vec::new();
    record_json("cbor", &cbor, &mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn extremes_come_back_as_the_same_text() {
    for text in [
        "5e-324",
        "2.2250738585072014e-308",
        "2.225073858507201e-308", // largest subnormal
        "9007199254740991",       // 2^53 − 1
        "9007199254740992",       // 2^53
        "9007199254740993",       // 2^53 + 1: no double holds it, an integer does
        "18446744073709551615",
        "18446744073709551616", // 2^64
        "-18446744073709551616",
        "-18446744073709551617", // −2^64 − 1
        "-9223372036854775809",
        "1000000000000000000000000000000", // 10^30 as an integer
        "1e30",
        "0.30000000000000004",
        "1.7976931348623157e308",
        "-1.7976931348623157e308",
        "-0.0",
        "0.0",
        "1.0",
        "1e300",
        "0.1",
        "1.2345678901234568e20",
        "123456.0",
        "true",
        "false",
        "null",
        "\"\"",
        "\"\\u0000\\n\\\"\\\\é😀\"",
        "[]",
        "{}",
        "[[],[{}],{\"\":[]}]",
        r#"{"z":1,"a":2,"m":{"y":[1,2.5,"x"],"b":null}}"#,
    ] {
        assert_eq!(round_trip(text).as_deref(), Ok(text), "{text}");
    }
}

#[test]
fn other_spellings_come_back_canonical() {
    for (text, canonical) in [
        (" [ 1 , 2 ] ", "[1,2]"),
        ("1E2", "100.0"),
        ("1e+2", "100.0"),
        ("-0", "-0.0"),
        ("-0e0", "-0.0"),
        ("0.100", "0.1"),
        ("4.9406564584124654e-324", "5e-324"),
        (r#""\u00e9\/\ud83d\ude00""#, "\"é/😀\""),
        ("{\"a\" :\t1}", r#"{"a":1}"#),
    ] {
        assert_eq!(round_trip(text).as_deref(), Ok(canonical), "{text}");
    }
}

#[test]
fn big_integers_are_cbor_bignums() {
    // 2^64 is tag 2 of nine bytes; −2^64 − 1 is tag 3 of 2^64.
    assert_eq!(
        cbor_of("18446744073709551616"),
        [0xc2, 0x49, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        cbor_of("-18446744073709551617"),
        [0xc3, 0x49, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    // −2^64 still fits major type 1.
    assert_eq!(
        cbor_of("-18446744073709551616"),
        [0x3b, 255, 255, 255, 255, 255, 255, 255, 255]
    );
    let digits = "7".repeat(4096);
    assert_eq!(round_trip(&digits), Ok(digits.clone()));
    assert_eq!(round_trip(&format!("-{digits}")), Ok(format!("-{digits}")));
}

#[test]
fn cbor_is_in_input_order_and_what_ciborium_reads() {
    let cbor = cbor_of(r#"{"b":[1,-2,0.5],"a":"x"}"#);
    let value: Value = ciborium::from_reader(&cbor[..]).unwrap();
    assert_eq!(
        value,
        Value::Map(vec![
            (
                Value::Text("b".into()),
                Value::Array(vec![
                    Value::Integer(1.into()),
                    Value::Integer((-2).into()),
                    Value::Float(0.5)
                ])
            ),
            (Value::Text("a".into()), Value::Text("x".into())),
        ])
    );
    // Definite lengths past one head byte are fixed up in place.
    let long: Vec<String> = (0..300).map(|i| i.to_string()).collect();
    let text = format!("[{}]", long.join(","));
    let cbor = cbor_of(&text);
    assert_eq!(&cbor[..3], [0x99, 1, 44]);
    assert_eq!(round_trip(&text), Ok(text));
}

#[test]
fn inexpressible_inputs_are_refused_by_name() {
    let cases = [
        (
            "1e400",
            "number 1e400 is too large for a 64-bit float (it would become infinity): refused \
             rather than changed (column 1)",
        ),
        (
            "[1e-400]",
            "number 1e-400 is too small for a 64-bit float (it would become 0): refused rather \
             than changed (column 2)",
        ),
        (
            r#""\ud800""#,
            "lone surrogate escape \\ud800 at column 2: no UTF-8 string can hold it",
        ),
        (
            r#"["\udc00x"]"#,
            "lone surrogate escape \\udc00 at column 3: no UTF-8 string can hold it",
        ),
        (
            r#""\ud800\u0041""#,
            "lone surrogate escape \\ud800 at column 2: no UTF-8 string can hold it",
        ),
        (
            r#"{"a":1,"a":2}"#,
            "duplicate key \"a\" in one object at column 8",
        ),
        ("[1,]", "malformed JSON at column 4: trailing comma"),
        ("NaN", "malformed JSON at column 1: expected value"),
        ("[1] x", "malformed JSON at column 5: trailing characters"),
        ("", "malformed JSON at column 1: EOF while parsing a value"),
    ];
    for (text, message) in cases {
        assert_eq!(refused(text), message, "{text}");
    }
    let long = "1".repeat(4097);
    assert_eq!(
        refused(&long),
        "integer literal of 4097 digits: more than 4096 digits are refused (column 1)"
    );
    let very_long = format!("[{}]", "1".repeat(5000));
    assert_eq!(
        refused(&very_long),
        "integer literal of 5000 digits: more than 4096 digits are refused (column 2)"
    );
    // Duplicates are per object: the same key in sibling objects is fine.
    assert!(round_trip(r#"[{"a":1},{"a":2},{"b":{"a":3}}]"#).is_ok());
    // Many keys (the hash set beyond 16) still catch a duplicate.
    let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    assert!(round_trip(&format!("{{{}}}", keys.join(","))).is_ok());
    assert!(refused(&format!("{{{},\"k3\":0}}", keys.join(","))).contains("\"k3\""));
}

#[test]
fn nesting_is_bounded_the_same_way_as_serde_json() {
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert_eq!(round_trip(&ok), Ok(ok.clone()));
    // serde_json (which annotate's raw values go through) accepts the same depth.
    assert!(serde_json::value::RawValue::from_string(ok.clone()).is_ok());
    let deep = format!("[{ok}]");
    assert!(refused(&deep).starts_with("arrays and objects nested more than 128 deep"));
}

#[test]
fn the_cbor_bound_is_kept() {
    let mut cbor = Vec::new();
    let err = json_to_cbor(b"[0.1,0.1,0.1]", &mut cbor, 20).unwrap_err();
    assert_eq!(err.to_string(), "the record would exceed 20 bytes as CBOR");
    assert!(cbor.len() <= 20);
    let mut cbor = Vec::new();
    json_to_cbor(b"[0.1,0.1]", &mut cbor, 19).unwrap();
    assert_eq!(cbor.len(), 19);
    check_json(b"[0.1,0.1,0.1]").unwrap();
    assert!(check_json(b"[1e999]").is_err());
}

#[test]
fn what_json_cannot_carry_is_refused_naming_where() {
    let map = |entries: Vec<(Value, Value)>| Value::Map(entries);
    let t = |s: &str| Value::Text(s.into());
    let cases = [
        (
            map(vec![(t("f"), Value::Float(f64::NAN))]),
            "holds a NaN float at \"/f\", which JSON cannot carry: refused rather than changed",
        ),
        (
            Value::Array(vec![Value::Null, Value::Float(f64::NEG_INFINITY)]),
            "holds an infinite float (-inf) at \"/1\", which JSON cannot carry: refused rather \
             than changed",
        ),
        (
            Value::Tag(1, Box::new(Value::Integer(0.into()))),
            "holds CBOR tag 1 at the top level, which JSON cannot carry: refused rather than \
             changed",
        ),
        (
            map(vec![(Value::Integer(1.into()), t("x"))]),
            "holds a map key that is an integer, not text at the top level, which JSON cannot \
             carry: refused rather than changed",
        ),
        (
            map(vec![(
                t("a/b~"),
                map(vec![(t("k"), t("v")), (t("k"), t("w"))]),
            )]),
            "holds the key \"k\" twice in one map at \"/a~1b~0\", which JSON cannot carry: \
             refused rather than changed",
        ),
        (
            Value::Tag(2, Box::new(t("12"))),
            "holds CBOR tag 2 (bignum) around something other than bytes at the top level, which \
             JSON cannot carry: refused rather than changed",
        ),
    ];
    for (value, message) in cases {
        assert_eq!(emitted(&value), Err(message.to_owned()), "{value:?}");
    }
    // undefined and other simple values, written by hand (ciborium's Value has neither).
    let emit = |bytes: &[u8]| {
        let mut out = Vec::new();
        record_json("cbor", bytes, &mut out).map_err(|e| e.to_string())
    };
    assert_eq!(
        emit(&[0x81, 0xf7]),
        Err(
            "holds the CBOR value undefined at \"/0\", which JSON cannot carry: refused rather \
             than changed"
                .to_owned()
        )
    );
    assert!(emit(&[0xf0]).unwrap_err().contains("simple value 16"));
    assert!(
        emit(&[0xf8, 0xff])
            .unwrap_err()
            .contains("simple value 255")
    );
    assert_eq!(
        emit(&[0x01, 0x02]),
        Err("does not decode as CBOR: 1 byte(s) after the item at byte 1".to_owned())
    );
    assert_eq!(
        emit(&[0x82, 0x01]),
        Err("does not decode as CBOR: the bytes end inside an item at byte 2".to_owned())
    );
    assert!(
        emit(&[0xff])
            .unwrap_err()
            .starts_with("does not decode as CBOR")
    );
    // Nothing of a refused record is left in the output.
    let mut out = b"kept".to_vec();
    assert!(record_json("cbor", &[0x82, 0x01, 0xf7], &mut out).is_err());
    assert_eq!(out, b"kept");
}

#[test]
fn odd_but_exact_cbor_prints() {
    // Indefinite-length containers and strings, non-preferred bignums, binary16/32 floats.
    let bytes = [
        0xbf, // map (indefinite)
        0x7f, 0x61, b'k', 0x61, b'2', 0xff, // key "k2" in two chunks
        0x9f, 0xf9, 0x3c, 0x00, 0xfa, 0x3d, 0xcc, 0xcc, 0xcd, 0xff, // [1.0, 0.1f32]
        0x61, b'b', 0xc2, 0x42, 0x00, 0x05, // "b": tag 2 of 00 05 = 5
        0x61, b'n', 0xc3, 0x41, 0x00, // "n": tag 3 of 0 = -1
        0x61, b'h', 0x5f, 0x41, 0xab, 0x41, 0xcd, 0xff, // "h": bytes ab cd in two chunks
        0xff,
    ];
    let mut out = Vec::new();
    record_json("cbor", &bytes, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"k2":[1.0,0.10000000149011612],"b":5,"n":-1,"h":{"hex":"abcd"}}"#
    );
}

#[test]
fn raw_records_are_strings_or_hex() {
    let raw = |bytes: &[u8]| {
        let mut out = Vec::new();
        record_json("raw", bytes, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(raw(b"abc\n\"q\""), r#""abc\n\"q\"""#);
    assert_eq!(raw(&[0xff, 0x01]), r#"{"hex":"ff01"}"#);
    let mut out = Vec::new();
    assert_eq!(
        record_json("u32", b"", &mut out).unwrap_err().to_string(),
        "record format \"u32\" has no JSON view (this tool reads cbor and raw)"
    );
    assert_eq!(
        record_to_json("cbor", &cbor_of(r#"{"id":"x","n":[1]}"#)).unwrap(),
        serde_json::json!({"id": "x", "n": [1]})
    );
}
