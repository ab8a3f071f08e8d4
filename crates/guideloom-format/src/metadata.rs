//! The CBOR metadata block of a shard.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Corruption, Error, Result};
use crate::footer::Footer;
use crate::spec::{MAX_METADATA_LEN, crc32c};

/// A CBOR value of user metadata (re-exported from `ciborium`).
pub use ciborium::Value;

use crate::schema::Schema;

/// `kind` of a shard whose records are encoded documents.
pub const KIND_DOCUMENTS: &str = "documents";

/// `kind` of a shard whose records are runs of fixed-width elements.
pub const KIND_STREAM: &str = "stream";

/// What this crate writes as `writer`.
pub const WRITER: &str = concat!("guideloom-format/", env!("CARGO_PKG_VERSION"));

/// The decoded metadata block (see `docs/format.md` for the keys). Unknown keys are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ShardMetadata {
    /// Stable name of the record format (`"cbor"`, `"raw"`, ...).
    pub format: String,
    /// Record count; equal to the footer's.
    pub records: u64,
    /// [`KIND_DOCUMENTS`] or [`KIND_STREAM`].
    pub kind: String,
    /// Element type of a stream (`"u32"`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    /// The writing library and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    /// User metadata, as written.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user: BTreeMap<String, Value>,
    /// The schema every record of the shard matches (`format` is then `"cbor"`); see
    /// [`crate::schema`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
}

impl ShardMetadata {
    /// Metadata for a shard of `kind` holding records of `format`; `records` is filled in
    /// by the writer at finish.
    pub fn new(format: impl Into<String>, kind: impl Into<String>) -> Self {
        ShardMetadata {
            format: format.into(),
            records: 0,
            kind: kind.into(),
            element: None,
            writer: Some(WRITER.to_owned()),
            user: BTreeMap::new(),
            schema: None,
        }
    }

    /// Declares the schema every record matches (a writer then checks each record).
    pub fn with_schema(mut self, schema: Schema) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Sets the stream element type name.
    pub fn with_element(mut self, element: impl Into<String>) -> Self {
        self.element = Some(element.into());
        self
    }

    /// Sets the user metadata map.
    pub fn with_user(mut self, user: BTreeMap<String, Value>) -> Self {
        self.user = user;
        self
    }

    /// What this shard holds, as shown in [`Error::FormatMismatch`]: `format` for documents,
    /// `stream<element>` for streams.
    pub fn describe(&self) -> String {
        match &self.element {
            Some(e) if self.kind == KIND_STREAM => format!("stream<{e}>"),
            _ if self.kind == KIND_DOCUMENTS => self.format.clone(),
            _ => format!("{}:{}", self.kind, self.format),
        }
    }

    /// Why `kind` and `element` do not form a valid pair (`documents` with no element, or
    /// `stream` with one of the format's element types), or `None` when they do.
    fn kind_problem(&self) -> Option<String> {
        if self.schema.is_some() && (self.format != "cbor" || self.kind != KIND_DOCUMENTS) {
            return Some(format!(
                "a schema is declared for a {:?} shard of format {:?} (only CBOR documents \
                 carry one)",
                self.kind, self.format
            ));
        }
        match (self.kind.as_str(), self.element.as_deref()) {
            (KIND_DOCUMENTS, None) => None,
            (KIND_DOCUMENTS, Some(e)) => Some(format!(
                "a documents shard names a stream element type ({e:?})"
            )),
            (KIND_STREAM, Some(e)) if crate::element::element_width(e).is_some() => None,
            (KIND_STREAM, Some(e)) => Some(format!(
                "stream element type {e:?} is not one of the format's (u8 u16 u32 u64 i32 i64 \
                 f32 f64)"
            )),
            (KIND_STREAM, None) => Some("a stream shard names no element type".to_owned()),
            (other, _) => Some(format!(
                "kind {other:?} is neither \"documents\" nor \"stream\""
            )),
        }
    }

    /// Refuses an invalid kind/element pair (see `docs/format.md`): `documents` without an
    /// element type, or `stream` with one of [`ELEMENT_TYPES`](crate::ELEMENT_TYPES).
    pub fn validate(&self) -> Result<()> {
        match self.kind_problem() {
            None => Ok(()),
            Some(problem) => Err(Error::InvalidArgument {
                message: format!("shard metadata: {problem}"),
            }),
        }
    }

    /// Encodes as CBOR, refusing an invalid kind/element pair and results over
    /// [`MAX_METADATA_LEN`].
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let mut out = Vec::new();
        crate::cbor::encode_into(self, &mut out).map_err(|e| Error::InvalidArgument {
            message: format!("cannot encode shard metadata: {e}"),
        })?;
        if out.len() as u64 > MAX_METADATA_LEN {
            return Err(Error::InvalidArgument {
                message: format!(
                    "shard metadata of {} bytes exceeds the {MAX_METADATA_LEN}-byte limit",
                    out.len()
                ),
            });
        }
        Ok(out)
    }

    /// Decodes the metadata section `bytes` of a shard whose footer is `footer` (read from
    /// `footer.metadata_offset`, `footer.metadata_len` bytes): its length and CRC32C checked
    /// against the footer, then [`decode`](Self::decode). What a reader needs to learn a
    /// shard's kind without its index.
    ///
    /// ```
    /// use guideloom_format::KIND_DOCUMENTS;
    /// use guideloom_format::{Footer, ShardEncoder, ShardMetadata};
    ///
    /// let mut encoder = ShardEncoder::new(Vec::new(), ShardMetadata::new("raw", KIND_DOCUMENTS))?;
    /// encoder.append(b"record")?;
    /// let (bytes, _) = encoder.finish()?;
    /// let (size, tail) = (bytes.len() as u64, bytes.len() - 64);
    /// let footer = Footer::decode("s", &bytes[tail..], size)?;
    /// let at = footer.metadata_offset as usize..tail;
    /// let meta = ShardMetadata::decode_section("s", &bytes[at], &footer)?;
    /// assert_eq!((meta.kind.as_str(), meta.records), (KIND_DOCUMENTS, 1));
    /// # Ok::<(), guideloom_format::Error>(())
    /// ```
    pub fn decode_section(shard: &str, bytes: &[u8], footer: &Footer) -> Result<Self> {
        if bytes.len() as u64 != footer.metadata_len {
            return Err(Error::layout(shard, "metadata read has the wrong length"));
        }
        if crc32c(bytes) != footer.metadata_crc {
            return Err(Error::corrupt(shard, Corruption::MetadataChecksum));
        }
        Self::decode(shard, bytes, footer.record_count)
    }

    /// Decodes one CBOR map (no trailing bytes) and checks it against the footer's count.
    pub fn decode(shard: &str, bytes: &[u8], record_count: u64) -> Result<Self> {
        let meta: ShardMetadata = crate::cbor::decode_one(bytes)
            .map_err(|e| Error::metadata(shard, format!("metadata block: {e}")))?;
        if let Some(problem) = meta.kind_problem() {
            return Err(Error::metadata(shard, problem));
        }
        if let Some(schema) = &meta.schema {
            schema
                .check()
                .map_err(|e| Error::metadata(shard, e.to_string()))?;
        }
        if meta.records != record_count {
            return Err(Error::metadata(
                shard,
                format!(
                    "records = {} but the footer says {record_count}",
                    meta.records
                ),
            ));
        }
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_unknown_keys_ignored() {
        let mut user = BTreeMap::new();
        user.insert("lang".to_owned(), Value::Text("en".into()));
        let mut m = ShardMetadata::new("cbor", KIND_DOCUMENTS).with_user(user);
        m.records = 3;
        let bytes = m.encode().unwrap();
        assert_eq!(ShardMetadata::decode("s", &bytes, 3).unwrap(), m);

        // A newer writer's extra key is ignored.
        let extended = Value::Map(vec![
            (Value::Text("format".into()), Value::Text("raw".into())),
            (Value::Text("records".into()), Value::Integer(0.into())),
            (Value::Text("kind".into()), Value::Text("documents".into())),
            (Value::Text("future".into()), Value::Bool(true)),
        ]);
        let mut buf = Vec::new();
        ciborium::into_writer(&extended, &mut buf).unwrap();
        let got = ShardMetadata::decode("s", &buf, 0).unwrap();
        assert_eq!(got.format, "raw");
    }

    #[test]
    fn count_mismatch_and_garbage_are_corrupt() {
        let bytes = ShardMetadata::new("raw", KIND_DOCUMENTS).encode().unwrap();
        assert!(
            ShardMetadata::decode("s", &bytes, 1)
                .unwrap_err()
                .is_corrupt()
        );
        assert!(
            ShardMetadata::decode("s", &[0xff, 0x00], 0)
                .unwrap_err()
                .is_corrupt()
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(
            ShardMetadata::decode("s", &trailing, 0)
                .unwrap_err()
                .is_corrupt()
        );
    }
}
