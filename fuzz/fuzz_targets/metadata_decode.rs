//! Decodes arbitrary bytes as a shard's CBOR metadata block, as a footer, and as a CBOR
//! record: typed errors only, no panic, no unbounded allocation. Metadata that decodes
//! validates (a `documents` shard without an element type, or a `stream` of one of the
//! format's element types) and re-encodes to a fixed point.
#![no_main]

use bytes::Bytes;
use guideloom_format::{CborFormat, Footer, Format, ShardMetadata, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The footer's record count a reader would compare with: the metadata's own (so the
    // fuzzer gets past that check), or 0.
    let records = ciborium::from_reader::<ciborium::Value, _>(data)
        .ok()
        .and_then(|v| {
            v.as_map()?
                .iter()
                .find(|(k, _)| k.as_text() == Some("records"))
                .and_then(|(_, n)| u64::try_from(n.as_integer()?).ok())
        })
        .unwrap_or(0);
    if let Ok(meta) = ShardMetadata::decode("fuzz", data, records) {
        // Decoding refuses what `validate` refuses (the kind/element pair).
        meta.validate().expect("decoded metadata validates");
        // Whatever decodes must re-encode, and re-encoding is a fixed point (compared as
        // bytes: user values may hold NaN).
        let once = meta.encode().expect("re-encode");
        let twice = ShardMetadata::decode("fuzz", &once, records)
            .expect("re-decode")
            .encode()
            .expect("re-encode twice");
        assert_eq!(once, twice);
    }
    if data.len() >= 64 {
        let _ = Footer::decode("fuzz", &data[data.len() - 64..], data.len() as u64);
    }
    let _ = CborFormat::<Value>::new().decode(Bytes::copy_from_slice(data));
});
