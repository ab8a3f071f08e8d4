//! One CBOR item → JSON text, exactly, or a refusal naming what JSON cannot carry.
//!
//! Map entries keep their stored order; floats print in the shortest form that reads back to
//! the same bits; bignums (tags 2 and 3) print as their digits; byte strings print as
//! `{"hex": "..."}`. NaN, ±infinity, other tags, non-text or repeated map keys, `undefined`
//! and other simple values are refused: printing them as something else would change the
//! record without a word.

use std::borrow::Cow;
use std::fmt;

use ciborium_ll::{simple, tag};

use super::cbor::{Item, Malformed, Reader};
use super::number::{self, MAX_BIGNUM_BYTES};
use super::out::Out;
use super::{KeySet, MAX_DEPTH, hex_into, json_string_to};

/// What a record holds that JSON cannot carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrepresentable {
    /// A float NaN.
    Nan,
    /// A float ±infinity.
    Infinity {
        /// Whether it is −infinity.
        negative: bool,
    },
    /// A tag other than the bignums 2 and 3.
    Tag(u64),
    /// Tag 2 or 3 around something other than a byte string.
    BadBignum(u64),
    /// A bignum too long to print (see [`MAX_BIGNUM_BYTES`]).
    LongBignum {
        /// Its magnitude's length.
        bytes: usize,
    },
    /// A map key that is not a text string.
    NonTextKey(&'static str),
    /// The same key twice in one map.
    DuplicateKey(String),
    /// `undefined`.
    Undefined,
    /// A simple value other than false, true, null and undefined.
    Simple(u8),
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for Unrepresentable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nan => f.write_str("a NaN float"),
            Self::Infinity { negative: false } => f.write_str("an infinite float (+inf)"),
            Self::Infinity { negative: true } => f.write_str("an infinite float (-inf)"),
            Self::Tag(t) => write!(f, "CBOR tag {t}"),
            Self::BadBignum(t) => {
                write!(f, "CBOR tag {t} (bignum) around something other than bytes")
            }
            Self::LongBignum { bytes } => write!(
                f,
                "a bignum of {bytes} bytes (more than {MAX_BIGNUM_BYTES}, the size of {} digits)",
                number::MAX_INTEGER_DIGITS
            ),
            Self::NonTextKey(kind) => write!(f, "a map key that is {kind}, not text"),
            Self::DuplicateKey(k) => write!(f, "the key {k:?} twice in one map"),
            Self::Undefined => f.write_str("the CBOR value undefined"),
            Self::Simple(v) => write!(f, "the CBOR simple value {v}"),
            Self::TooDeep => write!(f, "arrays and maps nested more than {MAX_DEPTH} deep"),
        }
    }
}

/// Why a record cannot be printed as JSON.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// The bytes are not one well-formed CBOR item.
    #[error("does not decode as CBOR: {source}")]
    Malformed {
        /// What is wrong, and where.
        #[from]
        source: Malformed,
    },
    /// Bytes follow the item.
    #[error("does not decode as CBOR: {extra} byte(s) after the item at byte {offset}")]
    Trailing {
        /// Where the item ends.
        offset: usize,
        /// How many bytes follow.
        extra: usize,
    },
    /// A value JSON cannot carry.
    #[error("holds {what} at {}, which JSON cannot carry: refused rather than changed", Pointer(.at))]
    NotJson {
        /// What it is.
        what: Unrepresentable,
        /// Where (a JSON Pointer, RFC 6901; empty: the whole record).
        at: String,
    },
    /// A record format without a JSON view.
    #[error("record format {0:?} has no JSON view (this tool reads cbor and raw)")]
    Format(String),
}

struct Pointer<'a>(&'a String);

impl fmt::Display for Pointer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("the top level")
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

/// A step of the path to the current item, for messages.
enum Step<'a> {
    Key(Cow<'a, str>),
    Index(u64),
}

struct Emitter<'a, 'o, O: Out + ?Sized> {
    reader: Reader<'a>,
    out: &'o mut O,
    path: Vec<Step<'a>>,
}

impl<'a, O: Out + ?Sized> Emitter<'a, '_, O> {
    fn refuse(&self, what: Unrepresentable) -> EmitError {
        let mut at = String::new();
        for step in &self.path {
            at.push('/');
            match step {
                Step::Key(k) => at.push_str(&k.replace('~', "~0").replace('/', "~1")),
                Step::Index(i) => at.push_str(&i.to_string()),
            }
        }
        EmitError::NotJson { what, at }
    }

    fn string(&mut self, s: &str) {
        json_string_to(s, self.out);
    }

    fn is_break(&self) -> bool {
        self.reader.peek_byte() == Some(0xff)
    }

    fn value(&mut self, depth: usize) -> Result<(), EmitError> {
        let item = self.reader.next()?;
        self.item(item, depth)
    }

    fn item(&mut self, item: Item<'a>, depth: usize) -> Result<(), EmitError> {
        match item {
            Item::Unsigned(u) => self.out.put(u.to_string().as_bytes()),
            Item::Negative(n) => {
                let v = -1 - i128::from(n);
                self.out.put(v.to_string().as_bytes());
            }
            Item::Float(f) if f.is_nan() => return Err(self.refuse(Unrepresentable::Nan)),
            Item::Float(f) if f.is_infinite() => {
                return Err(self.refuse(Unrepresentable::Infinity { negative: f < 0.0 }));
            }
            Item::Float(f) => number::float_text(f, self.out),
            Item::Text(s) => self.string(&s),
            Item::Bytes(b) => {
                self.out.put(b"{\"hex\":\"");
                hex_into(&b, self.out);
                self.out.put(b"\"}");
            }
            Item::Simple(simple::FALSE) => self.out.put(b"false"),
            Item::Simple(simple::TRUE) => self.out.put(b"true"),
            Item::Simple(simple::NULL) => self.out.put(b"null"),
            Item::Simple(simple::UNDEFINED) => return Err(self.refuse(Unrepresentable::Undefined)),
            Item::Simple(v) => return Err(self.refuse(Unrepresentable::Simple(v))),
            Item::Tag(t @ (tag::BIGPOS | tag::BIGNEG)) => match self.reader.next()? {
                Item::Bytes(b) => match number::bignum_digits(t == tag::BIGNEG, &b) {
                    Some(digits) => self.out.put(digits.as_bytes()),
                    None => {
                        return Err(self.refuse(Unrepresentable::LongBignum { bytes: b.len() }));
                    }
                },
                _ => return Err(self.refuse(Unrepresentable::BadBignum(t))),
            },
            Item::Tag(t) => return Err(self.refuse(Unrepresentable::Tag(t))),
            Item::Array(len) => self.array(len, depth)?,
            Item::Map(len) => self.map(len, depth)?,
            Item::Break => {
                return Err(Malformed::InvalidHead {
                    byte: 0xff,
                    offset: self.reader.offset() - 1,
                }
                .into());
            }
        }
        Ok(())
    }

    fn enter(&self, depth: usize) -> Result<usize, EmitError> {
        if depth >= MAX_DEPTH {
            return Err(self.refuse(Unrepresentable::TooDeep));
        }
        Ok(depth + 1)
    }

    /// Whether another element follows: counts down a definite length, or looks for the
    /// break of an indefinite one (and consumes it).
    fn more(&mut self, left: &mut Option<usize>) -> Result<bool, EmitError> {
        match left {
            Some(0) => Ok(false),
            Some(n) => {
                *n -= 1;
                Ok(true)
            }
            None if self.is_break() => {
                self.reader.next()?;
                Ok(false)
            }
            None => Ok(true),
        }
    }

    fn array(&mut self, mut left: Option<usize>, depth: usize) -> Result<(), EmitError> {
        let depth = self.enter(depth)?;
        self.out.put_byte(b'[');
        let mut i = 0u64;
        while self.more(&mut left)? {
            if i > 0 {
                self.out.put_byte(b',');
            }
            self.path.push(Step::Index(i));
            self.value(depth)?;
            self.path.pop();
            i += 1;
        }
        self.out.put_byte(b']');
        Ok(())
    }

    fn map(&mut self, mut left: Option<usize>, depth: usize) -> Result<(), EmitError> {
        let depth = self.enter(depth)?;
        self.out.put_byte(b'{');
        let mut keys = KeySet::default();
        let mut first = true;
        while self.more(&mut left)? {
            let key = match self.reader.next()? {
                Item::Text(k) => k,
                other => return Err(self.refuse(Unrepresentable::NonTextKey(kind(&other)))),
            };
            if keys.contains(&key) {
                return Err(self.refuse(Unrepresentable::DuplicateKey(key.into_owned())));
            }
            if !first {
                self.out.put_byte(b',');
            }
            first = false;
            self.string(&key);
            self.out.put_byte(b':');
            self.path.push(Step::Key(key.clone()));
            self.value(depth)?;
            self.path.pop();
            keys.insert(key);
        }
        self.out.put_byte(b'}');
        Ok(())
    }
}

/// The CBOR type of a non-text key, for messages.
fn kind(item: &Item<'_>) -> &'static str {
    match item {
        Item::Unsigned(_) | Item::Negative(_) => "an integer",
        Item::Bytes(_) => "a byte string",
        Item::Text(_) => "text",
        Item::Array(_) => "an array",
        Item::Map(_) => "a map",
        Item::Tag(_) => "tagged",
        Item::Simple(simple::FALSE | simple::TRUE) => "a boolean",
        Item::Simple(simple::NULL) => "null",
        Item::Simple(_) => "a simple value",
        Item::Float(_) => "a float",
        Item::Break => "a break",
    }
}

/// Appends the JSON text of the CBOR item `bytes` (exactly one item, nothing after it) to
/// `out`. On error `out` holds a partial text: the caller discards it.
pub fn cbor_to_json(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EmitError> {
    cbor_to_json_into(bytes, out)
}

/// [`cbor_to_json`] into any [`Out`]: a `Vec`, a [`Stream`](super::Stream) (the text in
/// bounded chunks) or [`Discard`](super::Discard) (the checks only). On error `out` holds
/// a partial text.
pub fn cbor_to_json_into<O: Out + ?Sized>(bytes: &[u8], out: &mut O) -> Result<(), EmitError> {
    let mut emitter = Emitter {
        reader: Reader::new(bytes),
        out,
        path: Vec::new(),
    };
    emitter.value(0)?;
    if !emitter.reader.at_end() {
        let offset = emitter.reader.offset();
        return Err(EmitError::Trailing {
            offset,
            extra: bytes.len() - offset,
        });
    }
    Ok(())
}
