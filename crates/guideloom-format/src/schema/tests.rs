use ciborium::{Value, cbor};

use super::*;

fn cbor(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).unwrap();
    out
}

fn sample() -> Schema {
    Schema::new(vec![
        Field::new("label", DataType::Int64, false),
        Field::new("caption", DataType::Utf8, true),
        Field::new("image", DataType::Binary, false).with_media("image/png"),
        Field::new("score", DataType::Float32, true),
        Field::new(
            "boxes",
            DataType::List(Box::new(Field::new("item", DataType::Float32, false))),
            true,
        ),
        Field::tensor("pixels", DataType::UInt8, &[2, 2]),
        Field::new(
            "meta",
            DataType::Struct(vec![
                Field::new("source", DataType::Utf8, false),
                Field::new("ok", DataType::Bool, true),
            ]),
            true,
        ),
    ])
}

/// Records every event, to check order and content.
#[derive(Default)]
struct Log(Vec<(NodeId, String)>);

impl Visitor for Log {
    fn visit(&mut self, node: NodeId, event: Event<'_>) {
        self.0.push((node, format!("{event:?}")));
    }
}

#[test]
fn json_and_cbor_round_trip() {
    let schema = sample();
    schema.check().unwrap();
    let json = serde_json::to_string(&schema).unwrap();
    assert_eq!(serde_json::from_str::<Schema>(&json).unwrap(), schema);
    let mut bytes = Vec::new();
    ciborium::into_writer(&schema, &mut bytes).unwrap();
    assert_eq!(
        ciborium::from_reader::<Schema, _>(&bytes[..]).unwrap(),
        schema
    );
    assert!(json.contains(r#""type":{"fixed_size_list":{"item":{"name":"item","type":"uint8","nullable":false},"size":4}}"#), "{json}");
}

#[test]
fn display_names_types_and_media() {
    let text = sample().to_string();
    assert!(text.contains("image: binary [image/png]"), "{text}");
    assert!(text.contains("boxes: list<float32>?"), "{text}");
    assert!(
        text.contains(r#"pixels: fixed_size_list<uint8>[4] [tensor {"shape":[2,2]}]"#),
        "{text}"
    );
}

#[test]
fn check_refuses_bad_schemas_by_path() {
    let dup = Schema::new(vec![
        Field::new("a", DataType::Int8, false),
        Field::new("a", DataType::Int8, false),
    ]);
    assert_eq!(dup.check().unwrap_err().path, "a");
    let nested = Schema::new(vec![Field::new(
        "s",
        DataType::Struct(vec![Field::new("", DataType::Int8, false)]),
        false,
    )]);
    assert_eq!(nested.check().unwrap_err().detail, "empty field name");
    let mut deep = Field::new("x", DataType::Int8, false);
    for _ in 0..MAX_DEPTH + 1 {
        deep = Field::new("x", DataType::List(Box::new(deep)), false);
    }
    assert!(
        Schema::new(vec![deep])
            .check()
            .unwrap_err()
            .detail
            .contains("deeper")
    );
    let mut tensor = Field::tensor("t", DataType::Float32, &[3, 3]);
    tensor
        .metadata
        .insert(EXTENSION_METADATA_KEY.into(), r#"{"shape":[2,2]}"#.into());
    assert!(
        Schema::new(vec![tensor])
            .check()
            .unwrap_err()
            .detail
            .contains("does not hold 9")
    );
    let zero = Schema::new(vec![Field::new("z", DataType::FixedSizeBinary(0), false)]);
    assert!(zero.check().is_err());
    let wide: Vec<Field> = (0..=MAX_FIELDS)
        .map(|i| Field::new(format!("f{i}"), DataType::Int8, true))
        .collect();
    assert!(
        Schema::new(wide)
            .check()
            .unwrap_err()
            .detail
            .contains("more than")
    );
}

#[test]
fn a_good_record_walks_in_schema_order() {
    let schema = sample().compile().unwrap();
    // Keys out of order, `caption` absent, `score` null, tensor packed with its RFC 8746 tag.
    let record = cbor(
        &cbor!({
            "pixels" => Value::Tag(64, Box::new(Value::Bytes(vec![1, 2, 3, 4]))),
            "label" => -5,
            "image" => Value::Bytes(b"png".to_vec()),
            "score" => null,
            "boxes" => [0.5, 1.5],
            "meta" => { "ok" => true, "source" => "x" },
        })
        .unwrap(),
    );
    let mut log = Log::default();
    schema.walk(&record, &mut log).unwrap();
    let events: Vec<String> = log
        .0
        .iter()
        .map(|(n, e)| format!("{}={e}", schema.path(*n)))
        .collect();
    assert_eq!(
        events,
        [
            "label=Int(-5)",
            "caption=Null",
            r#"image=Bytes([112, 110, 103])"#,
            "score=Null",
            "boxes=ListStart",
            "boxes.item=Float(0.5)",
            "boxes.item=Float(1.5)",
            "boxes=ListEnd",
            "pixels=ListStart",
            "pixels.item=Packed([1, 2, 3, 4])",
            "pixels=ListEnd",
            "meta=StructStart",
            r#"meta.source=Text("x")"#,
            "meta.ok=Bool(true)",
        ]
    );
}

#[test]
fn a_null_struct_fills_its_members() {
    let schema = sample().compile().unwrap();
    let record = cbor(
        &cbor!({
            "label" => 1, "image" => Value::Bytes(vec![]), "pixels" => [1, 2, 3, 4], "meta" => null,
        })
        .unwrap(),
    );
    let mut log = Log::default();
    schema.walk(&record, &mut log).unwrap();
    let tail: Vec<String> = log.0[log.0.len() - 3..]
        .iter()
        .map(|(n, e)| format!("{}={e}", schema.path(*n)))
        .collect();
    assert_eq!(tail, ["meta=Null", "meta.source=Null", "meta.ok=Null"]);
}

fn refused(record: Value) -> Mismatch {
    sample()
        .compile()
        .unwrap()
        .check(&cbor(&record))
        .unwrap_err()
}

#[test]
fn mismatches_name_the_field() {
    let base = |k: &str, v: Value| {
        let mut m = vec![
            (Value::Text("label".into()), Value::Integer(1.into())),
            (Value::Text("image".into()), Value::Bytes(vec![])),
            (Value::Text("pixels".into()), Value::Bytes(vec![0; 4])),
        ];
        m.retain(|(key, _)| key.as_text() != Some(k));
        m.push((Value::Text(k.into()), v));
        Value::Map(m)
    };
    let cases = [
        (
            base("label", Value::Text("1".into())),
            "label",
            "text where int64 was declared",
        ),
        (
            base("label", Value::Null),
            "label",
            "null (the field is not nullable)",
        ),
        (
            base("score", Value::Float(0.1)),
            "score",
            "the float 0.1 where float32 was declared",
        ),
        (
            base("pixels", Value::Bytes(vec![0; 5])),
            "pixels",
            "5 packed bytes are not 4 items of 1 bytes",
        ),
        (
            base("pixels", cbor!([1, 2, 3]).unwrap()),
            "pixels",
            "3 items, not 4",
        ),
        (
            base("pixels", cbor!([1, 2, 3, 256]).unwrap()),
            "pixels.item",
            "256 is out of the range of uint8",
        ),
        (
            base("extra", Value::Bool(true)),
            "extra",
            "not a field of the schema",
        ),
        (
            base("meta", cbor!({"ok" => true}).unwrap()),
            "meta.source",
            "missing (the field is not nullable)",
        ),
        (
            base("boxes", Value::Tag(85, Box::new(Value::Bytes(vec![0; 3])))),
            "boxes",
            "3 packed bytes are not whole items of 4 bytes",
        ),
        (
            base("boxes", Value::Tag(86, Box::new(Value::Bytes(vec![0; 8])))),
            "boxes",
            "tag 86 on a list of float32",
        ),
    ];
    for (record, path, detail) in cases {
        let m = refused(record);
        assert_eq!((m.path.as_str(), m.detail.as_str()), (path, detail));
    }
    let mut missing = base("label", Value::Null);
    if let Value::Map(m) = &mut missing {
        m.retain(|(k, _)| k.as_text() != Some("label"));
    }
    assert_eq!(
        refused(missing).detail,
        "missing (the field is not nullable)"
    );
    assert_eq!(
        refused(cbor!([1]).unwrap()).detail,
        "the record is an array, not a map"
    );
}

#[test]
fn hostile_bytes_are_refused_not_trusted() {
    let schema = sample().compile().unwrap();
    // A map claiming 2^32 entries, a byte string claiming 2^60 bytes, trailing bytes, a
    // truncated record, a duplicate key.
    for bytes in [
        vec![0xBA, 0xFF, 0xFF, 0xFF, 0xFF],
        vec![
            0xA1, 0x65, b'i', b'm', b'a', b'g', b'e', 0x5B, 0x10, 0, 0, 0, 0, 0, 0, 0,
        ],
        {
            let mut b = cbor(&cbor!({"label" => 1, "image" => Value::Bytes(vec![]), "pixels" => Value::Bytes(vec![0; 4])}).unwrap());
            b.push(0);
            b
        },
        vec![0xA1, 0x65, b'l', b'a', b'b'],
        vec![],
        vec![
            0xA2, 0x65, b'l', b'a', b'b', b'e', b'l', 1, 0x65, b'l', b'a', b'b', b'e', b'l', 2,
        ],
    ] {
        assert!(schema.check(&bytes).is_err(), "{bytes:?} accepted");
    }
}

#[test]
fn floats_and_integers_are_exact() {
    let schema = Schema::new(vec![
        Field::new("h", DataType::Float16, true),
        Field::new("d", DataType::Float64, true),
        Field::new("u", DataType::UInt64, true),
        Field::new("i", DataType::Int64, true),
    ])
    .compile()
    .unwrap();
    let ok = |v: Value| schema.check(&cbor(&v)).is_ok();
    assert!(ok(
        cbor!({"h" => 0.5, "d" => 0.1, "u" => u64::MAX, "i" => i64::MIN}).unwrap()
    ));
    assert!(
        ok(cbor!({"h" => 2048}).unwrap()),
        "an integer exact in half precision"
    );
    assert!(!ok(cbor!({"h" => 2049}).unwrap()), "2049 is not a half");
    assert!(!ok(cbor!({"h" => 0.1}).unwrap()));
    assert!(!ok(cbor!({"u" => -1}).unwrap()));
    assert!(!ok(Value::Map(vec![(
        Value::Text("i".into()),
        Value::Integer((i128::from(i64::MAX) + 1).try_into().unwrap())
    )])));
    assert!(ok(cbor!({"d" => f64::NAN}).unwrap()));
}

#[test]
fn evolution_rules() {
    let v1 = sample();
    let mut v2 = v1.clone();
    v2.fields.push(Field::new("new", DataType::Utf8, true));
    assert!(v2.evolves_from(&v1).is_ok());
    let mut required = v1.clone();
    required
        .fields
        .push(Field::new("new", DataType::Utf8, false));
    assert_eq!(required.evolves_from(&v1).unwrap_err().path, "new");
    let mut dropped = v1.clone();
    dropped.fields.remove(1);
    assert_eq!(dropped.evolves_from(&v1).unwrap_err().path, "caption");
    let mut retyped = v1.clone();
    retyped.fields[0].data_type = DataType::Int32;
    assert!(
        retyped
            .evolves_from(&v1)
            .unwrap_err()
            .detail
            .contains("int64 to int32")
    );
    let mut relaxed = v1.clone();
    relaxed.fields[0].nullable = true;
    assert!(relaxed.evolves_from(&v1).is_ok());
    assert!(v1.evolves_from(&relaxed).is_err(), "required again");
    let mut member = v1.clone();
    if let DataType::Struct(fields) = &mut member.fields[6].data_type {
        fields.push(Field::new("added", DataType::Int8, true));
    }
    assert!(member.evolves_from(&v1).is_ok());
    let mut reshaped = v1.clone();
    reshaped.fields[5] = Field::tensor("pixels", DataType::UInt8, &[4, 1]);
    assert!(
        reshaped
            .evolves_from(&v1)
            .unwrap_err()
            .detail
            .contains("extension metadata")
    );
    let mut swapped = v1.clone();
    swapped.fields.swap(0, 1);
    assert_eq!(
        swapped.evolves_from(&v1).unwrap_err().detail,
        "field moved from its place"
    );
}

#[test]
fn many_members_use_the_lookup() {
    let fields: Vec<Field> = (0..40)
        .map(|i| Field::new(format!("f{i}"), DataType::Int32, true))
        .collect();
    let schema = Schema::new(fields).compile().unwrap();
    let record = cbor(&Value::Map(
        (0..40)
            .rev()
            .map(|i| (Value::Text(format!("f{i}")), Value::Integer(i.into())))
            .collect(),
    ));
    let mut log = Log::default();
    schema.walk(&record, &mut log).unwrap();
    let values: Vec<String> = log.0.iter().map(|(_, e)| e.clone()).collect();
    let expected: Vec<String> = (0..40).map(|i| format!("Int({i})")).collect();
    assert_eq!(values, expected);
}

#[test]
fn names_with_dots_are_names() {
    let schema = Schema::new(vec![
        Field::new("seg.png", DataType::Binary, true),
        Field::new(
            "a",
            DataType::Struct(vec![Field::new("b.c", DataType::Int8, false)]),
            false,
        ),
    ])
    .compile()
    .unwrap();
    let record = cbor(&cbor!({"seg.png" => Value::Bytes(vec![1]), "a" => {"b.c" => 1}}).unwrap());
    schema.check(&record).unwrap();
}

#[test]
fn heads_of_every_width_and_the_malformed_ones() {
    let schema = Schema::new(vec![
        Field::new("f", DataType::Float64, true),
        Field::new("u", DataType::UInt64, true),
    ])
    .compile()
    .unwrap();
    let record = |value: &[u8]| {
        let mut out = vec![0xA1, 0x61, b'f'];
        out.extend_from_slice(value);
        out
    };
    let mut log = Log::default();
    // Half, single and double floats: 1.5 each.
    for head in [
        &[0xF9, 0x3E, 0x00][..],
        &[0xFA, 0x3F, 0xC0, 0, 0],
        &[0xFB, 0x3F, 0xF8, 0, 0, 0, 0, 0, 0],
    ] {
        log.0.clear();
        schema.walk(&record(head), &mut log).unwrap();
        assert_eq!(log.0[0].1, "Float(1.5)");
    }
    // Integers in 1, 2, 4 and 8 bytes of argument; u64::MAX.
    let int = |head: &[u8]| {
        let mut out = vec![0xA1, 0x61, b'u'];
        out.extend_from_slice(head);
        let mut log = Log::default();
        schema.walk(&out, &mut log).map(|_| log.0[1].1.clone())
    };
    assert_eq!(int(&[0x18, 200]).unwrap(), "UInt(200)");
    assert_eq!(int(&[0x19, 1, 0]).unwrap(), "UInt(256)");
    assert_eq!(int(&[0x1A, 0, 1, 0, 0]).unwrap(), "UInt(65536)");
    assert_eq!(
        int(&[0x1B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).unwrap(),
        format!("UInt({})", u64::MAX)
    );
    // Reserved additional information, an argument cut short, an indefinite integer, a
    // two-byte simple value under 32.
    for bad in [&[0x1C][..], &[0x1A, 0, 1], &[0x1F], &[0xF8, 0x14]] {
        assert!(int(bad).is_err(), "{bad:x?} accepted");
    }
}
