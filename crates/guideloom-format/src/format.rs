//! Record formats: how one record becomes bytes in a shard and back.

use std::fmt;
use std::marker::PhantomData;

use bytes::Bytes;
use guideloom_io::BoxError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A record format: encodes records to bytes and decodes them back.
///
/// Its [`name`](Format::name) is stored in every shard's metadata; a reader configured with a
/// format of another name refuses the shard with
/// [`Error::FormatMismatch`](crate::Error::FormatMismatch). Keep names stable: they are part of
/// the data.
///
/// Implement it for your own encoding:
/// ```
/// use bytes::Bytes;
/// use guideloom_format::Format;
///
/// /// UTF-8 strings, stored as their bytes.
/// #[derive(Debug, Clone, Copy)]
/// struct Utf8;
///
/// impl Format for Utf8 {
///     type Record = String;
///     fn name(&self) -> &str { "utf8" }
///     fn encode(&self, r: &String, out: &mut Vec<u8>) -> Result<(), guideloom_io::BoxError> {
///         out.extend_from_slice(r.as_bytes());
///         Ok(())
///     }
///     fn decode(&self, b: Bytes) -> Result<String, guideloom_io::BoxError> {
///         Ok(String::from_utf8(b.to_vec())?)
///     }
/// }
/// let mut buf = Vec::new();
/// Utf8.encode(&"héllo".to_owned(), &mut buf).unwrap();
/// assert_eq!(Utf8.decode(buf.into()).unwrap(), "héllo");
/// ```
pub trait Format: Send + Sync + fmt::Debug + 'static {
    /// The record type.
    type Record: Send + 'static;

    /// The stable name stored in shard metadata.
    fn name(&self) -> &str;

    /// Appends the encoding of `record` to `out`.
    fn encode(&self, record: &Self::Record, out: &mut Vec<u8>) -> Result<(), BoxError>;

    /// Decodes one record from exactly its bytes.
    fn decode(&self, bytes: Bytes) -> Result<Self::Record, BoxError>;

    /// The record's encoding borrowed from the record itself, for formats that store
    /// records as they are (like [`RawFormat`]): writers then skip the copy into an encode
    /// buffer. The default, `None`, means "call [`encode`](Format::encode)".
    fn encoded_ref<'a>(&self, record: &'a Self::Record) -> Option<&'a [u8]> {
        let _ = record;
        None
    }
}

/// CBOR (RFC 8949) via `ciborium` for any serde type; the default format for documents.
/// Its name is `"cbor"`.
pub struct CborFormat<T>(PhantomData<fn() -> T>);

impl<T> CborFormat<T> {
    /// The CBOR format for `T`.
    pub fn new() -> Self {
        CborFormat(PhantomData)
    }
}

impl<T> Default for CborFormat<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for CborFormat<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for CborFormat<T> {}

impl<T> fmt::Debug for CborFormat<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CborFormat<{}>", std::any::type_name::<T>())
    }
}

impl<T> Format for CborFormat<T>
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    type Record = T;

    fn name(&self) -> &str {
        "cbor"
    }

    fn encode(&self, record: &T, out: &mut Vec<u8>) -> Result<(), BoxError> {
        Ok(crate::cbor::encode_into(record, out)?)
    }

    fn decode(&self, bytes: Bytes) -> Result<T, BoxError> {
        Ok(crate::cbor::decode_one(&bytes)?)
    }
}

/// Raw bytes in, the same bytes out; decoding is zero-copy (a slice of the read buffer).
/// Its name is `"raw"`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawFormat;

impl Format for RawFormat {
    type Record = Bytes;

    fn name(&self) -> &str {
        "raw"
    }

    fn encode(&self, record: &Bytes, out: &mut Vec<u8>) -> Result<(), BoxError> {
        out.extend_from_slice(record);
        Ok(())
    }

    fn decode(&self, bytes: Bytes) -> Result<Bytes, BoxError> {
        Ok(bytes)
    }

    fn encoded_ref<'a>(&self, record: &'a Bytes) -> Option<&'a [u8]> {
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbor_round_trip_and_trailing_bytes() {
        let f = CborFormat::<(u32, String)>::new();
        let mut buf = Vec::new();
        f.encode(&(7, "x".into()), &mut buf).unwrap();
        assert_eq!(f.decode(buf.clone().into()).unwrap(), (7, "x".to_owned()));
        buf.push(0);
        assert!(f.decode(buf.into()).is_err());
    }

    #[test]
    fn raw_is_zero_copy() {
        let b = Bytes::from_static(b"abc");
        let got = RawFormat.decode(b.clone()).unwrap();
        assert_eq!(got.as_ptr(), b.as_ptr());
    }
}
