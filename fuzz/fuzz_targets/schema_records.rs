//! Walks arbitrary bytes as a record of a schema with every kind of type (scalars, bytes,
//! text, a packed tensor, a list, a struct with a list inside) and decodes them into Arrow:
//! typed errors only, no panic, no allocation from a count in the bytes. A record the walker
//! accepts is valid CBOR to an independent decoder (ciborium), a map whose keys are all
//! fields, and decodes into a one-row batch. The bytes are also read as a schema (JSON and
//! CBOR), which `Schema::check` bounds before compiling.
#![no_main]

use std::sync::OnceLock;

use guideloom_arrow::BatchDecoder;
use guideloom_format::schema::{CompiledSchema, DataType, Field, Schema};
use libfuzzer_sys::fuzz_target;

fn schema() -> &'static (Schema, CompiledSchema) {
    static SCHEMA: OnceLock<(Schema, CompiledSchema)> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let item = |t| Box::new(Field::new("item", t, true));
        let schema = Schema::new(vec![
            Field::new("label", DataType::Int8, true),
            Field::new("big", DataType::UInt64, true),
            Field::new("h", DataType::Float16, true),
            Field::new("f", DataType::Float32, true),
            Field::new("text", DataType::Utf8, true),
            Field::new("raw", DataType::Binary, true),
            Field::new("fixed", DataType::FixedSizeBinary(2), true),
            Field::tensor("tensor", DataType::UInt16, &[2, 2]),
            Field::new("list", DataType::List(item(DataType::Int32)), true),
            Field::new(
                "s",
                DataType::Struct(vec![
                    Field::new("a", DataType::Bool, false),
                    Field::new("l", DataType::List(item(DataType::Utf8)), true),
                ]),
                true,
            ),
        ]);
        let compiled = schema.compile().expect("the fuzz schema compiles");
        (schema, compiled)
    })
}

fuzz_target!(|data: &[u8]| {
    let (schema, compiled) = schema();
    if compiled.check(data).is_ok() {
        let value: ciborium::Value =
            ciborium::from_reader(data).expect("an accepted record is valid CBOR");
        let map = value.as_map().expect("an accepted record is a map");
        for (k, _) in map {
            let name = k.as_text().expect("keys are text");
            assert!(schema.field(name).is_some(), "{name} is not a field");
        }
        let mut decoder = BatchDecoder::new(schema).expect("decoder");
        decoder.push(data).expect("an accepted record decodes");
        assert_eq!(decoder.finish().expect("a batch").num_rows(), 1);
    } else {
        let mut decoder = BatchDecoder::new(schema).expect("decoder");
        assert!(decoder.push(data).is_err(), "the decoder accepts what the walker refuses");
    }
    for parsed in [
        serde_json::from_slice::<Schema>(data).ok(),
        ciborium::from_reader::<Schema, _>(data).ok(),
    ]
    .into_iter()
    .flatten()
    {
        if let Ok(compiled) = parsed.compile() {
            let _ = compiled.check(data);
        }
    }
});
