//! Decodes arbitrary bytes as a shard's CBOR metadata block, as a footer, and as a CBOR
//! record: typed errors only, no panic, no unbounded allocation.
#![no_main]

use bytes::Bytes;
use guideloom_format::{CborFormat, Footer, Format, ShardMetadata, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(meta) = ShardMetadata::decode("fuzz", data, 0) {
        // Whatever decodes must re-encode, and re-encoding is a fixed point (compared as
        // bytes: user values may hold NaN).
        let once = meta.encode().expect("re-encode");
        let twice = ShardMetadata::decode("fuzz", &once, 0)
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
