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
mod out;
mod parse;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashSet;

pub use cbor::Malformed;
pub use emit::{EmitError, Unrepresentable, cbor_to_json, cbor_to_json_into};
pub use number::{MAX_BIGNUM_BYTES, MAX_INTEGER_DIGITS, NumberError};
pub use out::{Discard, Out, STREAM_CHUNK, Stream};
pub use parse::{MAX_DEPTH, ParseError, check_json, json_to_cbor};

/// Appends the JSON text of a record of shard format `format` to `out`: CBOR records as
/// their value, raw records as a JSON string when UTF-8, else `{"hex": "..."}`.
pub fn record_json(format: &str, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EmitError> {
    let start = out.len();
    let result = RecordJson::of(format, bytes).and_then(|r| r.emit(out));
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Records of at most this many bytes are rendered whole by [`RecordJson::check`] (one
/// pass); longer ones are checked first and then streamed (two passes, memory bounded).
pub const RENDER_WHOLE_MAX: usize = 256 << 10;

/// A record's JSON view, as the shard's record format decides it.
#[derive(Debug, Clone, Copy)]
enum View<'a> {
    /// A CBOR record: its value.
    Cbor(&'a [u8]),
    /// A raw record that is UTF-8: a JSON string.
    Text(&'a str),
    /// A raw record that is not UTF-8: `{"hex": "..."}`.
    Hex(&'a [u8]),
}

/// A record whose JSON text is known to exist (every refusal happened in
/// [`check`](Self::check)), ready to be written in full or streamed: printing it never
/// stops half way for a reason of the record's (only for the writer's).
///
/// Memory: a record of at most [`RENDER_WHOLE_MAX`] bytes is rendered once into the
/// caller's scratch buffer; a longer one is written by [`write_to`](Self::write_to) in
/// chunks of [`STREAM_CHUNK`] bytes, so printing a record of any size takes the record's
/// own bytes plus a bounded buffer (a 1 GiB record of zeros is 6 GiB of JSON text).
#[derive(Debug)]
pub struct RecordJson<'a> {
    view: View<'a>,
    /// The whole text, when rendered by `check`.
    text: Option<&'a [u8]>,
}

impl<'a> RecordJson<'a> {
    fn of(format: &str, bytes: &'a [u8]) -> Result<Self, EmitError> {
        let view = match format {
            "cbor" => View::Cbor(bytes),
            "raw" => match std::str::from_utf8(bytes) {
                Ok(s) => View::Text(s),
                Err(_) => View::Hex(bytes),
            },
            other => return Err(EmitError::Format(other.to_owned())),
        };
        Ok(RecordJson { view, text: None })
    }

    /// Checks that the record of shard format `format` has a JSON text (see
    /// [`record_json`]), rendering it into `scratch` (cleared first) when it is at most
    /// [`RENDER_WHOLE_MAX`] bytes, else running the emitter without output.
    pub fn check(
        format: &str,
        bytes: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<Self, EmitError> {
        Self::check_with(format, bytes, scratch, RENDER_WHOLE_MAX)
    }

    fn check_with(
        format: &str,
        bytes: &'a [u8],
        scratch: &'a mut Vec<u8>,
        whole_max: usize,
    ) -> Result<Self, EmitError> {
        let mut record = Self::of(format, bytes)?;
        if bytes.len() <= whole_max {
            scratch.clear();
            record.emit(scratch)?;
            let text: &'a Vec<u8> = scratch;
            record.text = Some(text);
        } else if let View::Cbor(_) = record.view {
            record.emit(&mut Discard)?;
        }
        Ok(record)
    }

    fn emit<O: Out + ?Sized>(&self, out: &mut O) -> Result<(), EmitError> {
        match self.view {
            View::Cbor(bytes) => cbor_to_json_into(bytes, out),
            View::Text(s) => {
                json_string_to(s, out);
                Ok(())
            }
            View::Hex(bytes) => {
                out.put(b"{\"hex\":\"");
                hex_into(bytes, out);
                out.put(b"\"}");
                Ok(())
            }
        }
    }

    /// Writes the record's JSON text to `out`: the rendered text at once, or the text
    /// streamed in chunks of [`STREAM_CHUNK`] bytes. Errors are `out`'s.
    pub fn write_to<W: std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        self.write_chunked(out, STREAM_CHUNK)
    }

    fn write_chunked<W: std::io::Write>(&self, out: &mut W, chunk: usize) -> std::io::Result<()> {
        if let Some(text) = self.text {
            return out.write_all(text);
        }
        let mut stream = Stream::with_chunk(out, chunk);
        // `check` ran the same emitter over the same bytes: it cannot refuse now.
        self.emit(&mut stream).map_err(std::io::Error::other)?;
        stream.finish().map(|_| ())
    }
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
    json_string_to(s, out);
}

/// [`json_string`] into any [`Out`]: serde_json writes the runs between escapes as they
/// come, so a [`Stream`] never holds more than its chunk of a long string.
pub(crate) fn json_string_to<O: Out + ?Sized>(s: &str, out: &mut O) {
    // An `Out` never fails, so neither does serializing a str into it.
    let _ = serde_json::to_writer(out::Writer(out), s);
}

/// Lower-case hex digits of `bytes`, 4 KiB of input at a time.
pub(crate) fn hex_into<O: Out + ?Sized>(bytes: &[u8], out: &mut O) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 8 << 10];
    for piece in bytes.chunks(digits.len() / 2) {
        for (pair, b) in digits.chunks_exact_mut(2).zip(piece) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 15)];
        }
        out.put(&digits[..piece.len() * 2]);
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
