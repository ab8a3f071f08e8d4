//! The stream part of a shard reference (`ShardRef::stream`): a stream shard's element type
//! and count and its metadata companion, and their validation (see `stream.rs` at the crate
//! root for what a stream shard is).

use std::collections::HashSet;

use guideloom_format::element_width;
use serde::{Deserialize, Serialize};

use super::{Checksum, MAX_SHARD_BYTES, ShardFormat, ShardRef};
use crate::key::key_problem;

/// What a stream shard's reference says of it (the manifest field `stream`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRef {
    /// Element type name, one of guideloom-format's
    /// [`ELEMENT_TYPES`](guideloom_format::ELEMENT_TYPES) (`"u16"`, `"u32"`, ...).
    pub element: String,
    /// Elements (tokens) in the shard: the sum of its documents' lengths.
    pub elements: u64,
    /// The shard of per-document metadata written beside it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<CompanionRef>,
}

/// A stream shard's metadata companion: a native shard of CBOR records, one per document of
/// the stream shard, at `shards/<work_id>/<n>.meta.glm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompanionRef {
    /// Key relative to the root.
    pub key: String,
    /// Size in bytes; checked by `publish` and when opened.
    pub size: u64,
    /// Integrity check value, when known.
    pub checksum: Option<Checksum>,
}

/// Key of the metadata companion of stream shard `index` of worker `work_id`.
pub(crate) fn stream_meta_key(work_id: &str, index: u64) -> String {
    format!("shards/{work_id}/{index:08}.meta.glm")
}

/// Checks the stream part of reference `s` (for [`check_shards`](crate::manifest)): a
/// native shard, a known element type, an element count its size can hold, a companion key
/// inside the root and not listed twice.
pub(crate) fn check_stream<'a>(
    s: &'a ShardRef,
    stream: &'a StreamRef,
    seen: &mut HashSet<&'a str>,
) -> std::result::Result<(), String> {
    if s.format != ShardFormat::Native {
        return Err(format!(
            "stream shard {:?} is an {} shard (streams are native shards)",
            s.key, s.format
        ));
    }
    let Some(width) = element_width(&stream.element) else {
        return Err(format!(
            "stream shard {:?} names element type {:?}, not one of the format's",
            s.key, stream.element
        ));
    };
    if stream
        .elements
        .checked_mul(width)
        .is_none_or(|b| b > s.size)
    {
        return Err(format!(
            "stream shard {:?} claims {} {} elements, more than its {} bytes hold",
            s.key, stream.elements, stream.element, s.size
        ));
    }
    if let Some(meta) = &stream.meta {
        if let Some(problem) = key_problem(&meta.key) {
            return Err(format!("companion key {:?} rejected: {problem}", meta.key));
        }
        if !seen.insert(meta.key.as_str()) {
            return Err(format!("companion {:?} listed twice", meta.key));
        }
        if meta.size > MAX_SHARD_BYTES {
            return Err(format!(
                "companion {:?} claims {} bytes (at most {MAX_SHARD_BYTES})",
                meta.key, meta.size
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::check_shards;

    fn stream_shard(key: &str, element: &str, elements: u64) -> ShardRef {
        ShardRef {
            key: key.into(),
            size: 1000,
            record_count: 3,
            checksum: None,
            tail: None,
            format: ShardFormat::Native,
            stream: Some(StreamRef {
                element: element.into(),
                elements,
                meta: None,
            }),
        }
    }

    #[test]
    fn stream_references_round_trip_and_hostile_ones_are_refused() {
        let mut s = stream_shard("shards/w/00000000.glm", "u16", 400);
        s.stream.as_mut().unwrap().meta = Some(CompanionRef {
            key: stream_meta_key("w", 0),
            size: 50,
            checksum: None,
        });
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.contains(r#""stream":{"element":"u16","elements":400"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<ShardRef>(&text).unwrap(), s);
        assert_eq!(check_shards(std::slice::from_ref(&s)), Ok(3));

        let refused = |s: ShardRef, needle: &str| {
            let err = check_shards(&[s]).unwrap_err();
            assert!(err.contains(needle), "{err}");
        };
        refused(stream_shard("a", "u128", 1), "element type");
        // 501 u16 elements need 1002 bytes: more than the 1000 the shard has.
        refused(stream_shard("a", "u16", 501), "more than its 1000 bytes");
        refused(stream_shard("a", "u64", u64::MAX), "more than");
        let mut ar = stream_shard("a", "u8", 1);
        ar.format = ShardFormat::ArrayRecord;
        refused(ar, "native");
        let mut escape = stream_shard("a", "u8", 1);
        escape.stream.as_mut().unwrap().meta = Some(CompanionRef {
            key: "../elsewhere".into(),
            size: 1,
            checksum: None,
        });
        refused(escape, "companion key");
        let mut twice = stream_shard("a", "u8", 1);
        twice.stream.as_mut().unwrap().meta = Some(CompanionRef {
            key: "a".into(),
            size: 1,
            checksum: None,
        });
        refused(twice, "listed twice");
    }
}
