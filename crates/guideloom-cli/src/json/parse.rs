//! One JSON text → one CBOR item, exactly, or a refusal saying why.
//!
//! The text is tokenized by `jiter`, which hands numbers over as their text, so nothing is
//! rounded before [`super::number`] decides; CBOR is written directly (heads by
//! `ciborium-ll`, see [`super::cbor`]), containers in input order with definite lengths
//! (preferred serialization, RFC 8949 §4.1).

use std::collections::TryReserveError;

use ciborium_ll::{Header, simple, tag};
use jiter::{Jiter, JiterError, JiterErrorType, JsonErrorType, Peek};

use super::KeySet;
use super::cbor::Head;
use super::number::{self, Number, NumberError};
use crate::grow::grow_within;

/// The deepest nesting of arrays and objects accepted (and written back): the same as
/// serde_json's, so every accepted text is also accepted by serde_json.
pub const MAX_DEPTH: usize = 128;

/// Why a JSON text is refused. Columns are 1-based byte offsets into the line.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON.
    #[error("malformed JSON at column {column}: {kind}")]
    Syntax {
        /// Where the tokenizer stopped.
        column: usize,
        /// What it found.
        kind: JiterErrorType,
    },
    /// A `\uD800`–`\uDFFF` escape without its other half: no UTF-8 string holds it.
    #[error("lone surrogate escape {escape} at column {column}: no UTF-8 string can hold it")]
    LoneSurrogate {
        /// The escape as written (`\ud800`).
        escape: String,
        /// Where it starts.
        column: usize,
    },
    /// A number that cannot be kept exactly.
    #[error("{source} (column {column})")]
    Number {
        /// Where the number starts.
        column: usize,
        /// Why.
        source: NumberError,
    },
    /// A key twice in one object: which value is meant is not defined (RFC 8259 §4).
    #[error("duplicate key {key:?} in one object at column {column}")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where its second occurrence starts.
        column: usize,
    },
    /// Nested more deeply than [`MAX_DEPTH`].
    #[error("arrays and objects nested more than {MAX_DEPTH} deep at column {column}")]
    TooDeep {
        /// Where the level past the limit opens.
        column: usize,
    },
    /// The CBOR form would exceed the caller's bound.
    #[error("the record would exceed {limit} bytes as CBOR")]
    TooLarge {
        /// The bound.
        limit: usize,
    },
    /// Memory for the CBOR form could not be had.
    #[error("cannot allocate memory for the record's CBOR form")]
    Alloc {
        /// The allocator's refusal.
        #[source]
        source: TryReserveError,
    },
}

/// CBOR output bounded by `limit` bytes; with `discard`, nothing is kept (a check only).
struct Out<'a> {
    buf: &'a mut Vec<u8>,
    limit: usize,
    discard: bool,
}

impl Out<'_> {
    fn room(&mut self, additional: usize) -> Result<(), ParseError> {
        if self.discard {
            return Ok(());
        }
        if self.buf.len().saturating_add(additional) > self.limit {
            return Err(ParseError::TooLarge { limit: self.limit });
        }
        grow_within(self.buf, additional, self.limit).map_err(|source| ParseError::Alloc { source })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), ParseError> {
        if self.discard {
            return Ok(());
        }
        self.room(bytes.len())?;
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn head(&mut self, header: Header) -> Result<(), ParseError> {
        self.put(Head::new(header).as_bytes())
    }

    fn text(&mut self, s: &str) -> Result<(), ParseError> {
        self.head(Header::Text(Some(s.len())))?;
        self.put(s.as_bytes())
    }

    /// Replaces the one-byte placeholder head at `at` (that of an empty array or map) with
    /// `header`.
    fn fix_head(&mut self, at: usize, header: Header) -> Result<(), ParseError> {
        if self.discard {
            return Ok(());
        }
        let head = Head::new(header);
        let bytes = head.as_bytes();
        if bytes.len() > 1 {
            self.room(bytes.len() - 1)?;
        }
        self.buf.splice(at..=at, bytes.iter().copied());
        Ok(())
    }
}

struct Encoder<'j, 'o> {
    jiter: Jiter<'j>,
    text: &'j [u8],
    out: Out<'o>,
}

impl Encoder<'_, '_> {
    fn column(&self) -> usize {
        self.jiter.current_index() + 1
    }

    fn value(&mut self, peek: Peek, depth: usize) -> Result<(), ParseError> {
        let text = self.text;
        match peek {
            Peek::Null => {
                self.jiter.known_null().map_err(|e| syntax(text, e))?;
                self.out.head(Header::Simple(simple::NULL))
            }
            Peek::True | Peek::False => {
                let b = self.jiter.known_bool(peek).map_err(|e| syntax(text, e))?;
                self.out
                    .head(Header::Simple(if b { simple::TRUE } else { simple::FALSE }))
            }
            Peek::String => {
                let s = self.jiter.known_str().map_err(|e| syntax(text, e))?;
                self.out.text(s)
            }
            Peek::Array => self.array(depth),
            Peek::Object => self.object(depth),
            _ => self.number(peek),
        }
    }

    fn number(&mut self, peek: Peek) -> Result<(), ParseError> {
        let text = self.text;
        let start = self.jiter.current_index();
        let column = start + 1;
        let literal = self
            .jiter
            .known_number_bytes(peek)
            .map_err(|e| match e.error_type {
                JiterErrorType::JsonError(JsonErrorType::NumberOutOfRange) => ParseError::Number {
                    column,
                    source: NumberError::TooManyDigits {
                        digits: integer_digits(&text[start..]),
                    },
                },
                _ => syntax(text, e),
            })?;
        // The tokenizer accepted only ASCII digits, '-', '+', '.', 'e' and 'E'.
        let literal = std::str::from_utf8(literal).unwrap_or_default();
        let n =
            number::from_json(literal).map_err(|source| ParseError::Number { column, source })?;
        match n {
            Number::Unsigned(v) => self.out.head(Header::Positive(v)),
            Number::Negative(v) => self.out.head(Header::Negative(v)),
            Number::BigPositive(be) => self.bignum(tag::BIGPOS, &be),
            Number::BigNegative(be) => self.bignum(tag::BIGNEG, &be),
            Number::Float(f) => self.out.head(Header::Float(f)),
        }
    }

    fn bignum(&mut self, which: u64, be: &[u8]) -> Result<(), ParseError> {
        self.out.head(Header::Tag(which))?;
        self.out.head(Header::Bytes(Some(be.len())))?;
        self.out.put(be)
    }

    fn enter(&self, depth: usize) -> Result<usize, ParseError> {
        if depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep {
                column: self.column(),
            });
        }
        Ok(depth + 1)
    }

    fn array(&mut self, depth: usize) -> Result<(), ParseError> {
        let text = self.text;
        let depth = self.enter(depth)?;
        let at = self.out.buf.len();
        self.out.head(Header::Array(Some(0)))?;
        let mut count = 0;
        let mut next = self.jiter.known_array().map_err(|e| syntax(text, e))?;
        while let Some(peek) = next {
            self.value(peek, depth)?;
            count += 1;
            next = self.jiter.array_step().map_err(|e| syntax(text, e))?;
        }
        self.out.fix_head(at, Header::Array(Some(count)))
    }

    fn object(&mut self, depth: usize) -> Result<(), ParseError> {
        let text = self.text;
        let depth = self.enter(depth)?;
        let at = self.out.buf.len();
        self.out.head(Header::Map(Some(0)))?;
        let mut keys = KeySet::default();
        let mut count = 0;
        let mut before = self.jiter.current_index();
        let mut key = self
            .jiter
            .known_object()
            .map_err(|e| syntax(text, e))?
            .map(str::to_owned);
        while let Some(k) = key {
            if keys.contains(&k) {
                // The key's opening quote is the first one after the previous token.
                let at = memchr::memchr(b'"', &text[before..]).map_or(before, |i| before + i);
                return Err(ParseError::DuplicateKey {
                    key: k,
                    column: at + 1,
                });
            }
            self.out.text(&k)?;
            keys.insert(k.into());
            let peek = self.jiter.peek().map_err(|e| syntax(text, e))?;
            self.value(peek, depth)?;
            count += 1;
            before = self.jiter.current_index();
            key = self
                .jiter
                .next_key()
                .map_err(|e| syntax(text, e))?
                .map(str::to_owned);
        }
        self.out.fix_head(at, Header::Map(Some(count)))
    }
}

/// The digits of the integer part of the number at the start of `text`.
fn integer_digits(text: &[u8]) -> usize {
    let text = text.strip_prefix(b"-").unwrap_or(text);
    text.iter().take_while(|b| b.is_ascii_digit()).count()
}

/// A tokenizer error as a refusal; a bad `\u` escape of a surrogate is named as such.
fn syntax(text: &[u8], e: JiterError) -> ParseError {
    if let JiterErrorType::JsonError(
        JsonErrorType::LoneLeadingSurrogateInHexEscape | JsonErrorType::UnexpectedEndOfHexEscape,
    ) = &e.error_type
        && let Some((escape, at)) = surrogate_escape_before(text, e.index)
    {
        return ParseError::LoneSurrogate {
            escape,
            column: at + 1,
        };
    }
    ParseError::Syntax {
        column: e.index + 1,
        kind: e.error_type,
    }
}

/// Where a `\uXXXX` escape of a surrogate ends at or before `index`: the escape and its offset.
/// Looks at the last two escapes: the tokenizer stops on the low half when a high half is
/// followed by another escape, and after the high half otherwise.
fn surrogate_escape_before(text: &[u8], index: usize) -> Option<(String, usize)> {
    let mut end = index.saturating_add(1).min(text.len());
    for _ in 0..2 {
        let start = memchr::memmem::rfind(&text[..end], b"\\u")?;
        let hex = text.get(start + 2..start + 6)?;
        let hex = std::str::from_utf8(hex).ok()?;
        if u16::from_str_radix(hex, 16).is_ok_and(|unit| (0xD800..=0xDFFF).contains(&unit)) {
            return Some((format!("\\u{hex}"), start));
        }
        end = start;
    }
    None
}

/// Encodes the JSON text `text` (one value, surrounding whitespace allowed) as one CBOR item
/// appended to `out`, which may not grow past `limit` bytes. On error `out` holds a partial
/// item: the caller discards it.
pub fn json_to_cbor(text: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), ParseError> {
    run(
        text,
        Out {
            buf: out,
            limit,
            discard: false,
        },
    )
}

/// Checks that `text` is one JSON value [`json_to_cbor`] accepts, keeping nothing.
pub fn check_json(text: &[u8]) -> Result<(), ParseError> {
    let mut nothing = Vec::new();
    run(
        text,
        Out {
            buf: &mut nothing,
            limit: 0,
            discard: true,
        },
    )
}

fn run(text: &[u8], out: Out<'_>) -> Result<(), ParseError> {
    let mut encoder = Encoder {
        jiter: Jiter::new(text),
        text,
        out,
    };
    let peek = encoder.jiter.peek().map_err(|e| syntax(text, e))?;
    encoder.value(peek, 0)?;
    encoder.jiter.finish().map_err(|e| syntax(text, e))
}
