//! JSON number text ↔ CBOR numbers, exactly.
//!
//! - An integer literal (no fraction, no exponent) is an integer of any size up to
//!   [`MAX_INTEGER_DIGITS`] digits: a CBOR integer from −2^64 to 2^64−1 (major types 0/1), a
//!   bignum beyond (tag 2 / tag 3, RFC 8949 §3.4.3). `-0` has no integer form and becomes the
//!   float `-0.0`, as JavaScript and serde_json read it.
//! - A literal with a fraction or exponent is the binary64 nearest to the decimal it denotes
//!   (`str::parse::<f64>` is correctly rounded); one that would become ±infinity, or a
//!   non-zero one that would become 0, is refused.

use num_bigint::BigUint;

/// The most digits an integer literal may have (JSON has no limit; CBOR bignums neither, but
/// converting decimal text costs time quadratic in its length).
pub const MAX_INTEGER_DIGITS: usize = 4096;

/// The most bytes of a bignum's magnitude turned into digits on output: enough for every
/// integer of [`MAX_INTEGER_DIGITS`] digits (⌈4096 · log2(10) / 8⌉ = 1701).
pub const MAX_BIGNUM_BYTES: usize = 1701;

/// A JSON number as CBOR holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Number {
    /// 0 ..= 2^64−1 (major type 0).
    Unsigned(u64),
    /// −2^64 ..= −1 as `n` with value `−1 − n` (major type 1).
    Negative(u64),
    /// Tag 2: the big-endian magnitude, no leading zero byte.
    BigPositive(Vec<u8>),
    /// Tag 3: big-endian `n` of the value `−1 − n`.
    BigNegative(Vec<u8>),
    /// A finite binary64.
    Float(f64),
}

/// Why a number literal is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    /// An integer literal with more than [`MAX_INTEGER_DIGITS`] digits.
    #[error(
        "integer literal of {digits} digits: more than {MAX_INTEGER_DIGITS} digits are refused"
    )]
    TooManyDigits {
        /// How many digits it has.
        digits: usize,
    },
    /// The literal's value is beyond binary64's range.
    #[error(
        "number {literal} is too large for a 64-bit float (it would become infinity): refused \
         rather than changed"
    )]
    Overflow {
        /// The literal (shortened if long).
        literal: String,
    },
    /// A non-zero literal whose nearest binary64 is zero.
    #[error(
        "number {literal} is too small for a 64-bit float (it would become 0): refused rather \
         than changed"
    )]
    Underflow {
        /// The literal (shortened if long).
        literal: String,
    },
    /// Not a JSON number (the tokenizer lets none through; kept so nothing is assumed).
    #[error("{literal} is not a JSON number")]
    Invalid {
        /// The literal (shortened if long).
        literal: String,
    },
}

/// The literal for a message: at most 40 characters.
fn shown(text: &str) -> String {
    if text.len() <= 40 {
        text.to_owned()
    } else {
        format!("{}… ({} characters)", &text[..32], text.len())
    }
}

/// Reads a JSON number literal (as validated by the tokenizer).
pub(crate) fn from_json(text: &str) -> Result<Number, NumberError> {
    if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return float(text);
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NumberError::Invalid {
            literal: shown(text),
        });
    }
    if digits.len() > MAX_INTEGER_DIGITS {
        return Err(NumberError::TooManyDigits {
            digits: digits.len(),
        });
    }
    if negative && digits.bytes().all(|b| b == b'0') {
        return Ok(Number::Float(-0.0));
    }
    if digits.len() <= 19 {
        let m: u64 = digits.parse().map_err(|_| NumberError::Invalid {
            literal: shown(text),
        })?;
        return Ok(if negative {
            Number::Negative(m - 1)
        } else {
            Number::Unsigned(m)
        });
    }
    let magnitude =
        BigUint::parse_bytes(digits.as_bytes(), 10).ok_or_else(|| NumberError::Invalid {
            literal: shown(text),
        })?;
    Ok(if negative {
        // −m = −1 − (m − 1); m ≥ 10^19 here, so m − 1 does not underflow.
        let n = magnitude - 1u32;
        match u64::try_from(&n) {
            Ok(n) => Number::Negative(n),
            Err(_) => Number::BigNegative(n.to_bytes_be()),
        }
    } else {
        match u64::try_from(&magnitude) {
            Ok(m) => Number::Unsigned(m),
            Err(_) => Number::BigPositive(magnitude.to_bytes_be()),
        }
    })
}

fn float(text: &str) -> Result<Number, NumberError> {
    let value: f64 = text.parse().map_err(|_| NumberError::Invalid {
        literal: shown(text),
    })?;
    if value.is_infinite() {
        return Err(NumberError::Overflow {
            literal: shown(text),
        });
    }
    if value == 0.0 {
        let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
        if mantissa.bytes().any(|b| matches!(b, b'1'..=b'9')) {
            return Err(NumberError::Underflow {
                literal: shown(text),
            });
        }
    }
    Ok(Number::Float(value))
}

/// The decimal digits of a bignum: tag 2 (`negative` false) is the magnitude, tag 3 is
/// `−1 − n`. `None` when the magnitude has more than [`MAX_BIGNUM_BYTES`] significant bytes.
pub(crate) fn bignum_digits(negative: bool, be: &[u8]) -> Option<String> {
    let significant = be
        .iter()
        .position(|b| *b != 0)
        .map_or(&[][..], |i| &be[i..]);
    if significant.len() > MAX_BIGNUM_BYTES {
        return None;
    }
    let n = BigUint::from_bytes_be(significant);
    Some(if negative {
        format!("-{}", n + 1u32)
    } else {
        n.to_string()
    })
}

/// The digits of a finite float in the shortest form that reads back to the same bits
/// (`1.0`, `-0.0`, `1e300`, `5e-324`); always with a `.` or an exponent, so it reads back as
/// a float and never as an integer.
pub(crate) fn float_text<O: super::Out + ?Sized>(value: f64, out: &mut O) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value);
    out.put(text.as_bytes());
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        out.put(b".0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big(text: &str) -> Vec<u8> {
        BigUint::parse_bytes(text.as_bytes(), 10)
            .unwrap()
            .to_bytes_be()
    }

    #[test]
    fn integers_take_the_smallest_exact_form() {
        assert_eq!(from_json("0"), Ok(Number::Unsigned(0)));
        assert_eq!(
            from_json("9007199254740991"),
            Ok(Number::Unsigned((1 << 53) - 1))
        );
        assert_eq!(from_json("9007199254740992"), Ok(Number::Unsigned(1 << 53)));
        assert_eq!(
            from_json("9007199254740993"),
            Ok(Number::Unsigned((1 << 53) + 1))
        );
        assert_eq!(
            from_json("18446744073709551615"),
            Ok(Number::Unsigned(u64::MAX))
        );
        assert_eq!(
            from_json("18446744073709551616"),
            Ok(Number::BigPositive(vec![1, 0, 0, 0, 0, 0, 0, 0, 0]))
        );
        assert_eq!(from_json("-1"), Ok(Number::Negative(0)));
        assert_eq!(
            from_json("-9223372036854775808"),
            Ok(Number::Negative(i64::MAX as u64))
        );
        assert_eq!(
            from_json("-18446744073709551616"),
            Ok(Number::Negative(u64::MAX))
        );
        // −2^64 − 1 = −1 − 2^64: tag 3 of 2^64.
        assert_eq!(
            from_json("-18446744073709551617"),
            Ok(Number::BigNegative(vec![1, 0, 0, 0, 0, 0, 0, 0, 0]))
        );
        assert_eq!(
            from_json("1000000000000000000000000000000"),
            Ok(Number::BigPositive(big("1000000000000000000000000000000")))
        );
        assert_eq!(from_json("-0"), Ok(Number::Float(-0.0)));
    }

    #[test]
    fn integer_digits_are_bounded() {
        let ok = "9".repeat(MAX_INTEGER_DIGITS);
        assert!(matches!(from_json(&ok), Ok(Number::BigPositive(_))));
        let long = "9".repeat(MAX_INTEGER_DIGITS + 1);
        assert_eq!(
            from_json(&long),
            Err(NumberError::TooManyDigits {
                digits: MAX_INTEGER_DIGITS + 1
            })
        );
        // The output bound covers every accepted literal.
        let Ok(Number::BigPositive(bytes)) = from_json(&ok) else {
            unreachable!()
        };
        assert_eq!(bytes.len(), MAX_BIGNUM_BYTES);
        assert_eq!(bignum_digits(false, &bytes), Some(ok.clone()));
        assert_eq!(
            bignum_digits(true, &bytes).unwrap(),
            format!("-1{}", "0".repeat(4096))
        );
        assert_eq!(bignum_digits(false, &vec![1; MAX_BIGNUM_BYTES + 1]), None);
        // Leading zero bytes (not preferred, but valid) do not count.
        assert_eq!(bignum_digits(false, &[0, 0, 1, 0]), Some("256".into()));
    }

    #[test]
    fn floats_are_the_nearest_double_or_refused() {
        let f = |t: &str| match from_json(t) {
            Ok(Number::Float(v)) => v.to_bits(),
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(f("5e-324"), 1);
        assert_eq!(f("2.2250738585072014e-308"), f64::MIN_POSITIVE.to_bits());
        assert_eq!(f("0.30000000000000004"), (0.1f64 + 0.2).to_bits());
        assert_eq!(f("1.7976931348623157e308"), f64::MAX.to_bits());
        assert_eq!(f("1e30"), 1e30f64.to_bits());
        assert_eq!(f("-0.0"), (-0.0f64).to_bits());
        assert_eq!(f("0e-999999"), 0);
        assert_eq!(f("1.0"), 1f64.to_bits());
        // Halfway between two doubles (2^53 + 1): ties to even.
        assert_eq!(f("9007199254740993.0"), (9007199254740992f64).to_bits());
        assert!(matches!(
            from_json("1e400"),
            Err(NumberError::Overflow { .. })
        ));
        assert!(matches!(
            from_json("-1e400"),
            Err(NumberError::Overflow { .. })
        ));
        assert!(matches!(
            from_json("1e-400"),
            Err(NumberError::Underflow { .. })
        ));
        assert!(matches!(
            from_json("-0.0001e-330"),
            Err(NumberError::Underflow { .. })
        ));
        assert_eq!(
            from_json("1e400").unwrap_err().to_string(),
            "number 1e400 is too large for a 64-bit float (it would become infinity): refused \
             rather than changed"
        );
    }

    #[test]
    fn float_text_is_shortest_and_reads_back_as_a_float() {
        let t = |v: f64| {
            let mut out = Vec::new();
            float_text(v, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(t(1.0), "1.0");
        assert_eq!(t(-0.0), "-0.0");
        assert_eq!(t(1e300), "1e300");
        assert_eq!(t(5e-324), "5e-324");
        assert_eq!(t(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(t(f64::MAX), "1.7976931348623157e308");
        assert_eq!(t(1e30), "1e30");
    }
}
