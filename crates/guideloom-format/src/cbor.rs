//! CBOR via ciborium, with errors a person can read: ciborium's own `Display` prints its
//! `Debug` form (`Io(Error { kind: UnexpectedEof, .. })`), which must never reach a message.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A CBOR encoding or decoding failure, described in words (where in the input, and what).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CborError(String);

impl fmt::Display for CborError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CborError {}

impl<E: fmt::Display> From<ciborium::de::Error<E>> for CborError {
    fn from(e: ciborium::de::Error<E>) -> Self {
        use ciborium::de::Error as De;
        CborError(match e {
            De::Io(io) => format!("truncated or unreadable CBOR ({io})"),
            De::Syntax(at) => format!("invalid CBOR syntax at byte {at}"),
            De::Semantic(Some(at), what) => format!("{what} (CBOR item at byte {at})"),
            De::Semantic(None, what) => what,
            De::RecursionLimitExceeded => "CBOR nested too deeply".to_owned(),
        })
    }
}

impl<E: fmt::Display> From<ciborium::ser::Error<E>> for CborError {
    fn from(e: ciborium::ser::Error<E>) -> Self {
        use ciborium::ser::Error as Ser;
        CborError(match e {
            Ser::Io(io) => format!("cannot write CBOR ({io})"),
            Ser::Value(what) => format!("cannot encode as CBOR: {what}"),
        })
    }
}

/// Decodes exactly one CBOR item from `bytes` (trailing bytes are an error).
///
/// ```
/// let v: u32 = guideloom_format::cbor::decode_one(&[0x18, 0x2a]).unwrap();
/// assert_eq!(v, 42);
/// let err = guideloom_format::cbor::decode_one::<u32>(&[0x18]).unwrap_err();
/// assert!(err.to_string().starts_with("truncated"), "{err}");
/// ```
pub fn decode_one<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CborError> {
    let mut rest = bytes;
    let value = ciborium::from_reader(&mut rest)?;
    if !rest.is_empty() {
        return Err(CborError(format!(
            "{} trailing bytes after the CBOR item",
            rest.len()
        )));
    }
    Ok(value)
}

/// Appends the CBOR encoding of `value` to `out`.
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), CborError> {
    ciborium::into_writer(value, out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_no_debug_text() {
        for bytes in [&[0x18][..], &[0xff], &[0x61, 0xff], &[0x82, 0x01]] {
            let err = decode_one::<ciborium::Value>(bytes)
                .unwrap_err()
                .to_string();
            assert!(
                !err.contains("Error {") && !err.contains("Some(") && !err.contains("kind:"),
                "{err}"
            );
        }
        let err = decode_one::<String>(&[0x01]).unwrap_err().to_string();
        assert!(err.contains("expected string"), "{err}");
        assert!(
            decode_one::<u8>(&[0x01, 0x02])
                .unwrap_err()
                .to_string()
                .contains("trailing")
        );
    }
}
