//! Thin public wrappers over the HTTP backend's internal parsers of untrusted response
//! bytes, for the cargo-fuzz targets in `fuzz/` (feature `fuzzing`).
//!
//! **Internal and unstable**: not part of guideloom-io's API, outside semver, hidden from the
//! docs. Each function calls the parser the backend uses, unchanged; the types are plain
//! copies of the internal ones so that nothing internal becomes public.

use std::ops::Range;

use bytes::Bytes;

use super::multipart;

/// A parsed `Content-Range` header (see [`parse_content_range`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentRange {
    /// The byte range carried, half-open; `None` for `bytes */total`.
    pub range: Option<Range<u64>>,
    /// The complete length, when stated.
    pub total: Option<u64>,
}

/// One part of a `multipart/byteranges` body (see [`parse_byteranges`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The bytes of the object this part carries (half-open).
    pub range: Range<u64>,
    /// The complete length stated by the part, if any.
    pub total: Option<u64>,
    /// The payload: a slice of the body.
    pub data: Bytes,
}

/// Parses a `Content-Range` header value, as the backend does for every 206 response.
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    multipart::parse_content_range(value).map(|c| ContentRange {
        range: c.range,
        total: c.total,
    })
}

/// The boundary of a `multipart/byteranges` content type, or `None` for other types.
pub fn byteranges_boundary(content_type: &str) -> Option<String> {
    multipart::byteranges_boundary(content_type)
}

/// Parses a `multipart/byteranges` body with `boundary`; the error is the parser's message.
pub fn parse_byteranges(body: &Bytes, boundary: &str) -> Result<Vec<Part>, String> {
    match multipart::parse_byteranges(body, boundary) {
        Ok(parts) => Ok(parts
            .into_iter()
            .map(|p| Part {
                range: p.range,
                total: p.total,
                data: p.data,
            })
            .collect()),
        Err(multipart::MultipartError(message)) => Err(message),
    }
}

/// The bytes of `want` from a part that covers it whole, as the backend extracts each
/// range of a batched read; `None` if no part does.
pub fn extract(parts: &[Part], want: &Range<u64>) -> Option<Bytes> {
    let parts: Vec<multipart::Part> = parts
        .iter()
        .map(|p| multipart::Part {
            range: p.range.clone(),
            total: p.total,
            data: p.data.clone(),
        })
        .collect();
    multipart::extract(&parts, want)
}
