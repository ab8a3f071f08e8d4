//! Records as JSON, exactly.
//!
//! JSON Lines in ([`json_to_cbor`]) and JSON out ([`record_json`]) keep every number, string
//! and key order JSON can carry, or refuse with a reason; nothing is changed silently:
//!
//! - integers of any size up to 4096 digits (CBOR integers, bignums beyond ±2^64);
//! - floats to the bit (correctly rounded in, shortest round-trip form out; `-0.0` and
//!   subnormals kept; literals that would become ±infinity or 0 refused);
//! - object keys in input order, a key twice in one object refused;
//! - strings as UTF-8 (a lone surrogate escape refused).
//!
//! Out, byte strings print as `{"hex": "..."}` and raw records as a JSON string when they
//! are UTF-8; what JSON cannot carry (NaN, ±infinity, tags other than bignums, non-text map
//! keys, undefined, other simple values) is refused naming where it is. See docs/cli.md,
//! "Exact JSON".

mod cbor;
mod emit;
mod number;
mod parse;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashSet;

pub use cbor::Malformed;
pub use emit::{EmitError, Unrepresentable, cbor_to_json};
pub use number::{MAX_BIGNUM_BYTES, MAX_INTEGER_DIGITS, NumberError};
pub use parse::{MAX_DEPTH, ParseError, check_json, json_to_cbor};

/// Appends the JSON text of a record of shard format `format` to `out`: CBOR records as
/// their value, raw records as a JSON string when UTF-8, else `{"hex": "..."}`.
pub fn record_json(format: &str, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EmitError> {
    let start = out.len();
    let result = match format {
        "cbor" => cbor_to_json(bytes, out),
        "raw" => {
            match std::str::from_utf8(bytes) {
                Ok(s) => json_string(s, out),
                Err(_) => {
                    out.extend_from_slice(b"{\"hex\":\"");
                    hex_into(bytes, out);
                    out.extend_from_slice(b"\"}");
                }
            }
            Ok(())
        }
        other => Err(EmitError::Format(other.to_owned())),
    };
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// A record as a `serde_json::Value`, for checking a few fields (the quickstart checks ids).
/// Made from the exact text, but `serde_json::Value` itself rounds some floats and cannot
/// hold integers beyond 64 bits: never print this, print [`record_json`]'s text.
pub fn record_to_json(format: &str, bytes: &[u8]) -> Result<serde_json::Value, String> {
    let mut text = Vec::new();
    record_json(format, bytes, &mut text).map_err(|e| e.to_string())?;
    serde_json::from_slice(&text).map_err(|e| format!("its JSON text does not parse back: {e}"))
}

/// Appends `s` as a JSON string (serde_json's escaping: `"`, `\\` and control characters).
pub fn json_string(s: &str, out: &mut Vec<u8>) {
    // Serializing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Lower-case hex digits of `bytes`.
pub(crate) fn hex_into(bytes: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// The keys seen in one object: a list while small, a hash set beyond.
#[derive(Debug, Default)]
pub(crate) struct KeySet<'a> {
    small: Vec<Cow<'a, str>>,
    large: HashSet<Cow<'a, str>>,
}

impl<'a> KeySet<'a> {
    const SMALL: usize = 16;

    /// Whether `key` is in the set.
    pub(crate) fn contains(&self, key: &str) -> bool {
        if self.large.is_empty() {
            self.small.iter().any(|k| k == key)
        } else {
            self.large.contains(key)
        }
    }

    /// Adds `key` (known not to be in the set).
    pub(crate) fn insert(&mut self, key: Cow<'a, str>) {
        if self.large.is_empty() && self.small.len() < Self::SMALL {
            self.small.push(key);
            return;
        }
        if self.large.is_empty() {
            self.large.extend(self.small.drain(..));
        }
        self.large.insert(key);
    }
}
