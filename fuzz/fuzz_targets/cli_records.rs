//! The CLI's exact JSON (crate `guideloom_cli::json`): the JSON → CBOR encoder that `write`
//! runs on every input line, and the CBOR → JSON emitter that `get`/`cat` run on every
//! record read from a (possibly hostile) root.
//!
//! Every input is given to both sides:
//!
//! - **As a JSON text.** If `json_to_cbor` accepts it: `check_json` agrees; serde_json
//!   accepts it too; the CBOR is bounded by the text (at most 3 bytes per byte, + 16); it is
//!   exactly the canonical CBOR of the text's value as an independent strict reader
//!   (`guideloom_fuzz::json_model`: integers of any size, floats by `str::parse`, keys in
//!   order) and an independent encoder (`ciborium-ll`) see it; and it emits back to JSON
//!   that re-encodes to the same CBOR bytes.
//! - **As a CBOR record.** If `cbor_to_json` accepts it: the JSON is UTF-8, accepted by
//!   serde_json, bounded by the record (at most 11 bytes per byte), and means exactly
//!   the record's JSON view as an independent decoder (`ciborium-ll`) sees it (bignums as
//!   integers, byte strings as `{"hex": ...}`, floats by bits, keys in order); re-encoding
//!   it gives the canonical CBOR of that view (the record itself, when it was canonical),
//!   which emits to the same JSON text. If the emitter refuses a well-formed record as
//!   holding something JSON cannot carry, the independent view must refuse it too.
//! - **As a raw record.** `record_json("raw", ..)` prints a JSON string equal to the bytes
//!   when they are UTF-8, else `{"hex": ...}` of them.
#![no_main]

use guideloom_cli::json::{EmitError, check_json, json_to_cbor, record_json};
use guideloom_fuzz::cbor_model::{self, Cbor};
use guideloom_fuzz::json_model::{self, Json};
use libfuzzer_sys::fuzz_target;

/// Bound on the CBOR of one record, as `write` passes the shard limit.
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    as_json(data);
    as_cbor(data);
    as_raw(data);
});

fn emit(cbor: &[u8]) -> Result<Vec<u8>, EmitError> {
    let mut out = Vec::new();
    guideloom_cli::json::cbor_to_json(cbor, &mut out).map(|()| out)
}

fn encode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    json_to_cbor(text, &mut out, LIMIT).ok().map(|()| out)
}

fn as_json(text: &[u8]) {
    let Some(cbor) = encode(text) else {
        return;
    };
    check_json(text).expect("check_json refuses a text json_to_cbor accepts");
    serde_json::from_slice::<serde::de::IgnoredAny>(text)
        .expect("an accepted text is not JSON to serde_json");
    assert!(cbor.len() <= 3 * text.len() + 16, "CBOR out of bounds");
    let model = json_model::parse(text).expect("an accepted text is not strict JSON");
    assert_eq!(
        cbor,
        cbor_model::encode_canonical(&model),
        "the CBOR is not the canonical encoding of the text's value"
    );
    let json = emit(&cbor).expect("CBOR written by json_to_cbor does not emit");
    assert_eq!(
        encode(&json).as_deref(),
        Some(&cbor[..]),
        "JSON -> CBOR -> JSON -> CBOR changed the CBOR"
    );
}

fn as_cbor(record: &[u8]) {
    let decoded = cbor_model::decode(record);
    let json = match emit(record) {
        Ok(json) => json,
        Err(EmitError::NotJson { what, at }) => {
            // Refused at the first thing JSON cannot carry (what follows it is not read, so
            // it may be malformed): when the whole record is well-formed, the independent
            // view must refuse it too.
            if let Ok(item) = decoded {
                assert!(
                    cbor_model::json_view(&item).is_err(),
                    "refused ({what:?} at {at:?}) what JSON can carry: {item:?}"
                );
            }
            return;
        }
        Err(_) => return,
    };
    let item: Cbor = decoded.expect("the emitter accepted CBOR ciborium-ll refuses");
    let view: Json =
        cbor_model::json_view(&item).expect("the emitter printed what JSON cannot carry");
    let text = std::str::from_utf8(&json).expect("emitted JSON is not UTF-8");
    serde_json::from_str::<serde::de::IgnoredAny>(text).expect("emitted JSON is not JSON");
    // The most a byte can cost: an empty byte string (one byte) prints as `{"hex":""}`
    // plus a separator, 11 bytes.
    assert!(json.len() <= 11 * record.len(), "JSON out of bounds");
    assert_eq!(
        json_model::parse(&json).expect("emitted JSON is not strict JSON"),
        view,
        "the emitted JSON does not mean the record's value"
    );
    let again = encode(&json).expect("emitted JSON does not read back");
    let canonical = cbor_model::encode_canonical(&view);
    assert_eq!(again, canonical, "re-read CBOR is not canonical");
    if canonical == record {
        assert_eq!(again, record);
    }
    assert_eq!(
        emit(&again).expect("canonical CBOR does not emit"),
        json,
        "CBOR -> JSON -> CBOR -> JSON changed the JSON"
    );
}

fn as_raw(record: &[u8]) {
    let mut out = Vec::new();
    record_json("raw", record, &mut out).expect("raw records always print");
    let printed: serde_json::Value = serde_json::from_slice(&out).expect("raw JSON is not JSON");
    match std::str::from_utf8(record) {
        Ok(s) => assert_eq!(printed.as_str(), Some(s)),
        Err(_) => {
            let hex: String = record.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(printed, serde_json::json!({ "hex": hex }));
        }
    }
}
