//! Parsing of `Content-Range` headers and `multipart/byteranges` bodies (RFC 9110 §14.4,
//! §14.6).
//!
//! The parser is length-driven: each part's payload length comes from its own
//! `Content-Range`, so payload bytes that happen to contain the boundary string cannot
//! confuse it. It accepts a preamble before the first boundary, an epilogue after the
//! closing one, bare `LF` line ends as well as `CRLF`, transport padding after a boundary,
//! and parts in any order.

use std::ops::Range;

use bytes::Bytes;

/// A parsed `Content-Range: bytes first-last/total` (or `bytes */total`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentRange {
    /// The byte range carried, as a half-open range; `None` for `bytes */total`.
    pub(crate) range: Option<Range<u64>>,
    /// The complete length, when the origin states it.
    pub(crate) total: Option<u64>,
}

/// Parses a `Content-Range` header value.
pub(crate) fn parse_content_range(value: &str) -> Option<ContentRange> {
    let rest = value.trim().strip_prefix("bytes")?;
    let rest = rest.trim_start();
    let (range, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse::<u64>().ok()?),
    };
    let range = match range.trim() {
        "*" => None,
        r => {
            let (a, b) = r.split_once('-')?;
            let a: u64 = a.trim().parse().ok()?;
            let b: u64 = b.trim().parse().ok()?;
            if b < a || total.is_some_and(|t| b >= t) {
                return None;
            }
            Some(a..b.checked_add(1)?)
        }
    };
    if range.is_none() && total.is_none() {
        return None;
    }
    Some(ContentRange { range, total })
}

/// The boundary of a `multipart/byteranges` content type, or `None` for other types.
pub(crate) fn byteranges_boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let mime = params.next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/byteranges") {
        return None;
    }
    for p in params {
        let Some((k, v)) = p.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case("boundary") {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            if v.is_empty() || v.len() > 200 {
                return None;
            }
            return Some(v.to_owned());
        }
    }
    None
}

/// One part of a multipart/byteranges body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Part {
    /// The bytes of the object this part carries (half-open).
    pub(crate) range: Range<u64>,
    /// The complete length stated by the part, if any.
    pub(crate) total: Option<u64>,
    /// The payload; a zero-copy slice of the body.
    pub(crate) data: Bytes,
}

/// Why a multipart body could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MultipartError(pub(crate) String);

fn err<T>(msg: impl Into<String>) -> Result<T, MultipartError> {
    Err(MultipartError(msg.into()))
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Skips one line end (`CRLF` or `LF`) at `pos`, if present.
fn skip_eol(body: &[u8], pos: usize) -> Option<usize> {
    if body.get(pos..pos + 2) == Some(b"\r\n") {
        Some(pos + 2)
    } else if body.get(pos) == Some(&b'\n') {
        Some(pos + 1)
    } else {
        None
    }
}

/// Parses a `multipart/byteranges` body with the given boundary.
pub(crate) fn parse_byteranges(body: &Bytes, boundary: &str) -> Result<Vec<Part>, MultipartError> {
    let delim = format!("--{boundary}");
    let delim = delim.as_bytes();
    // The first delimiter: at the very start, or after a line end (the preamble is skipped).
    let mut pos = 0;
    loop {
        let Some(at) = find(body, delim, pos) else {
            return err("no boundary found in the multipart body");
        };
        if at == 0 || body[at - 1] == b'\n' {
            pos = at;
            break;
        }
        pos = at + 1;
    }
    let mut parts = Vec::new();
    loop {
        // `pos` is at a delimiter.
        pos += delim.len();
        if body.get(pos..pos + 2) == Some(b"--") {
            break; // closing delimiter; the epilogue is ignored
        }
        while matches!(body.get(pos), Some(b' ' | b'\t')) {
            pos += 1; // transport padding
        }
        pos = match skip_eol(body, pos) {
            Some(p) => p,
            None => return err("malformed line after a multipart boundary"),
        };
        // Part headers, up to an empty line.
        let mut content_range = None;
        loop {
            let line_end = match body[pos..].iter().position(|&b| b == b'\n') {
                Some(i) => pos + i,
                None => return err("multipart part headers are truncated"),
            };
            let line = &body[pos..line_end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            pos = line_end + 1;
            if line.is_empty() {
                break;
            }
            if line.len() > 8192 {
                return err("a multipart part header line is too long");
            }
            let Ok(line) = std::str::from_utf8(line) else {
                return err("a multipart part header is not text");
            };
            if let Some((name, value)) = line.split_once(':')
                && name.trim().eq_ignore_ascii_case("content-range")
            {
                content_range = Some(parse_content_range(value).ok_or_else(|| {
                    MultipartError(format!("bad Content-Range in a multipart part: {value:?}"))
                })?);
            }
        }
        let Some(ContentRange {
            range: Some(range),
            total,
        }) = content_range
        else {
            return err("a multipart part has no usable Content-Range");
        };
        let Ok(len) = usize::try_from(range.end - range.start) else {
            return err("a multipart part is larger than memory");
        };
        let Some(end) = pos.checked_add(len).filter(|&e| e <= body.len()) else {
            return err(format!(
                "multipart body truncated inside the part for bytes {}-{}",
                range.start,
                range.end - 1
            ));
        };
        parts.push(Part {
            range,
            total,
            data: body.slice(pos..end),
        });
        pos = end;
        // A line end, then the next delimiter.
        pos = match skip_eol(body, pos) {
            Some(p) => p,
            None => return err("a multipart part is longer than its Content-Range"),
        };
        if body.get(pos..pos + delim.len()) != Some(delim) {
            return err("expected a multipart boundary after a part");
        }
    }
    if parts.is_empty() {
        return err("the multipart body has no parts");
    }
    Ok(parts)
}

/// Finds the bytes of `want` in any part that covers it whole (parts may come in any order,
/// and an origin may merge neighbouring ranges into one part).
pub(crate) fn extract(parts: &[Part], want: &Range<u64>) -> Option<Bytes> {
    parts.iter().find_map(|p| {
        if p.range.start <= want.start && want.end <= p.range.end {
            let a = usize::try_from(want.start - p.range.start).ok()?;
            let b = usize::try_from(want.end - p.range.start).ok()?;
            Some(p.data.slice(a..b))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_forms() {
        assert_eq!(
            parse_content_range("bytes 0-9/100"),
            Some(ContentRange {
                range: Some(0..10),
                total: Some(100)
            })
        );
        assert_eq!(
            parse_content_range("bytes 5-5/*"),
            Some(ContentRange {
                range: Some(5..6),
                total: None
            })
        );
        assert_eq!(
            parse_content_range("bytes */42"),
            Some(ContentRange {
                range: None,
                total: Some(42)
            })
        );
        for bad in [
            "bytes 9-0/100",
            "bytes 0-100/100",
            "items 0-1/2",
            "bytes */*",
            "0-1/2",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn boundary_parameter() {
        assert_eq!(
            byteranges_boundary("multipart/byteranges; boundary=00000000000000000001").as_deref(),
            Some("00000000000000000001")
        );
        assert_eq!(
            byteranges_boundary("Multipart/ByteRanges;charset=x; Boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(byteranges_boundary("application/octet-stream"), None);
        assert_eq!(byteranges_boundary("multipart/byteranges"), None);
    }

    fn body(parts: &[(&str, &[u8])], eol: &str, boundary: &str) -> Bytes {
        let mut b = Vec::new();
        b.extend_from_slice(b"this is a preamble");
        b.extend_from_slice(eol.as_bytes());
        for (cr, data) in parts {
            b.extend_from_slice(format!("--{boundary}{eol}").as_bytes());
            b.extend_from_slice(format!("Content-Type: application/octet-stream{eol}").as_bytes());
            b.extend_from_slice(format!("Content-Range: {cr}{eol}{eol}").as_bytes());
            b.extend_from_slice(data);
            b.extend_from_slice(eol.as_bytes());
        }
        b.extend_from_slice(format!("--{boundary}--{eol}epilogue").as_bytes());
        Bytes::from(b)
    }

    #[test]
    fn parses_reordered_parts_with_either_line_end() {
        for eol in ["\r\n", "\n"] {
            // Payload contains the boundary text: the length-driven parser must not care.
            let b = body(
                &[
                    ("bytes 100-109/1000", b"--XYZ\r\n--X"),
                    ("bytes 0-3/1000", b"abcd"),
                ],
                eol,
                "XYZ",
            );
            let parts = parse_byteranges(&b, "XYZ").unwrap();
            assert_eq!(parts.len(), 2);
            assert_eq!(parts[0].range, 100..110);
            assert_eq!(&parts[0].data[..], b"--XYZ\r\n--X");
            assert_eq!(
                extract(&parts, &(0..4)).unwrap(),
                Bytes::from_static(b"abcd")
            );
            assert_eq!(
                extract(&parts, &(102..105)).unwrap(),
                Bytes::from_static(b"XYZ")
            );
            assert_eq!(extract(&parts, &(3..5)), None);
        }
    }

    /// xorshift64*, deterministic.
    fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed | 1;
        move |n| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
        }
    }

    #[test]
    #[allow(clippy::cast_possible_truncation)] // test sizes are tiny
    fn random_bodies_round_trip_and_mutations_never_panic() {
        let mut next = rng(42);
        let object: Vec<u8> = (0..5000)
            .map(|_| u8::try_from(next(256)).unwrap())
            .collect();
        for case in 0..300 {
            let boundary = format!("b{}", next(1_000_000));
            let eol = if next(2) == 0 { "\r\n" } else { "\n" };
            let n = 1 + next(6) as usize;
            let mut ranges = Vec::new();
            for _ in 0..n {
                let a = next(4990);
                let b = a + 1 + next(5000 - a - 1);
                ranges.push((a, b));
            }
            // Parts in random order.
            for i in (1..ranges.len()).rev() {
                ranges.swap(i, next(i as u64 + 1) as usize);
            }
            let specs: Vec<(String, &[u8])> = ranges
                .iter()
                .map(|&(a, b)| {
                    (
                        format!("bytes {a}-{}/5000", b - 1),
                        &object[a as usize..b as usize],
                    )
                })
                .collect();
            let spec_refs: Vec<(&str, &[u8])> =
                specs.iter().map(|(c, d)| (c.as_str(), *d)).collect();
            let b = body(&spec_refs, eol, &boundary);
            let parts = parse_byteranges(&b, &boundary).unwrap();
            assert_eq!(parts.len(), ranges.len(), "case {case}");
            for &(a, e) in &ranges {
                let got = extract(&parts, &(a..e)).unwrap();
                assert_eq!(&got[..], &object[a as usize..e as usize], "case {case}");
            }
            // Corruptions: truncations and flipped bytes give errors or parts, never panics,
            // and every part returned is consistent with its own Content-Range.
            for _ in 0..20 {
                let mut m = b.to_vec();
                if next(2) == 0 {
                    m.truncate(next(m.len() as u64) as usize);
                } else {
                    let i = next(m.len() as u64) as usize;
                    m[i] = u8::try_from(next(256)).unwrap();
                }
                if let Ok(ps) = parse_byteranges(&Bytes::from(m), &boundary) {
                    for p in ps {
                        assert_eq!(p.data.len() as u64, p.range.end - p.range.start);
                    }
                }
            }
        }
    }

    #[test]
    fn rejects_truncated_and_inconsistent_bodies() {
        let good = body(&[("bytes 0-3/10", b"abcd")], "\r\n", "B");
        let cut = good.slice(..good.len() - 30);
        assert!(parse_byteranges(&cut, "B").is_err());
        let longer = body(&[("bytes 0-2/10", b"abcd")], "\r\n", "B");
        assert!(parse_byteranges(&longer, "B").is_err());
        let no_range = Bytes::from_static(b"--B\r\n\r\nabcd\r\n--B--\r\n");
        assert!(parse_byteranges(&no_range, "B").is_err());
        assert!(parse_byteranges(&Bytes::from_static(b"nothing"), "B").is_err());
        assert!(parse_byteranges(&Bytes::from_static(b"--B--\r\n"), "B").is_err());
    }
}
