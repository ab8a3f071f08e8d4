//! The HTTP backend's parsers of multi-range responses (guideloom-io `http::fuzzing`,
//! feature `fuzzing`): `parse_content_range`, `byteranges_boundary`, `parse_byteranges`
//! and `extract`, which turn an origin's (untrusted) 206 answer into record bytes.
//!
//! Input: the first line is a header value, given both to `parse_content_range` and to
//! `byteranges_boundary` (as the `Content-Type`); the rest is the response body, parsed
//! with that boundary when there is one.
//!
//! Oracles, beyond "no panic":
//! - a `Content-Range` that parses is a non-empty range inside its stated total (or a bare
//!   total), and its canonical spelling parses to the same value;
//! - every part returned lies inside the body (a slice of it, at increasing, disjoint
//!   offsets), holds exactly its range's length, and ends within its stated total;
//! - the parts, written back as a canonical `multipart/byteranges` body with the same
//!   boundary, parse to the same parts;
//! - `extract` of a wanted range returns exactly that many bytes — the bytes of the first
//!   part covering it — or `None` when no part covers it whole (wanted ranges: each part's
//!   range, pieces of it, ranges straddling its ends, and ranges spelled by the input).
#![no_main]

use std::ops::Range;

use bytes::Bytes;
use guideloom_io::http::fuzzing::{
    ContentRange, Part, byteranges_boundary, extract, parse_byteranges, parse_content_range,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (line, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(header) = std::str::from_utf8(line) else {
        return;
    };
    content_range(header);
    let Some(boundary) = byteranges_boundary(header) else {
        return;
    };
    assert!(!boundary.is_empty() && boundary.len() <= 200);
    let body = Bytes::copy_from_slice(body);
    let Ok(parts) = parse_byteranges(&body, &boundary) else {
        return;
    };
    assert!(!parts.is_empty());
    inside(&body, &parts);
    let again = parse_byteranges(&canonical(&parts, &boundary), &boundary)
        .expect("the canonical form of parsed parts does not parse");
    assert_eq!(again, parts, "parts changed through their canonical form");
    for want in wanted(&parts, &body) {
        let got = extract(&parts, &want);
        let expected = parts
            .iter()
            .find(|p| p.range.start <= want.start && want.end <= p.range.end)
            .map(|p| {
                let a = (want.start - p.range.start) as usize;
                let b = (want.end - p.range.start) as usize;
                &p.data[a..b]
            });
        assert_eq!(got.as_deref(), expected, "extract {want:?}");
        if let Some(got) = got {
            assert_eq!(got.len() as u64, want.end - want.start);
        }
    }
});

fn content_range(value: &str) {
    let Some(c) = parse_content_range(value) else {
        return;
    };
    match &c.range {
        Some(r) => {
            assert!(r.start < r.end);
            assert!(c.total.is_none_or(|t| r.end <= t));
        }
        None => assert!(c.total.is_some()),
    }
    assert_eq!(parse_content_range(&spell(&c)), Some(c));
}

/// `bytes a-b/t`, `bytes a-b/*` or `bytes */t`.
fn spell(c: &ContentRange) -> String {
    let range = c
        .range
        .as_ref()
        .map_or_else(|| "*".to_owned(), |r| format!("{}-{}", r.start, r.end - 1));
    let total = c.total.map_or_else(|| "*".to_owned(), |t| t.to_string());
    format!("bytes {range}/{total}")
}

/// Every part is a slice of `body`, in order and disjoint, of its range's length.
fn inside(body: &Bytes, parts: &[Part]) {
    let base = body.as_ptr() as usize;
    let mut next = 0usize;
    let mut sum = 0usize;
    for p in parts {
        assert_eq!(p.data.len() as u64, p.range.end - p.range.start);
        assert!(p.range.start < p.range.end);
        assert!(p.total.is_none_or(|t| p.range.end <= t));
        sum += p.data.len();
        if p.data.is_empty() {
            continue;
        }
        let at = (p.data.as_ptr() as usize)
            .checked_sub(base)
            .expect("part data before the body");
        assert!(at >= next, "parts overlap or go backwards");
        assert!(at + p.data.len() <= body.len(), "part data past the body");
        assert_eq!(&body[at..at + p.data.len()], &p.data[..]);
        next = at + p.data.len();
    }
    assert!(sum <= body.len());
}

fn canonical(parts: &[Part], boundary: &str) -> Bytes {
    let mut b = Vec::new();
    for p in parts {
        let total = p.total.map_or_else(|| "*".to_owned(), |t| t.to_string());
        b.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        b.extend_from_slice(b"Content-Type: application/octet-stream\r\n");
        b.extend_from_slice(
            format!(
                "Content-Range: bytes {}-{}/{total}\r\n\r\n",
                p.range.start,
                p.range.end - 1
            )
            .as_bytes(),
        );
        b.extend_from_slice(&p.data);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Bytes::from(b)
}

fn wanted(parts: &[Part], body: &[u8]) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    for p in parts {
        let (a, e) = (p.range.start, p.range.end);
        let mid = a + (e - a) / 2;
        out.extend([a..e, a..a, e..e, a..mid, mid..e]);
        if a > 0 {
            out.push(a - 1..e);
        }
        if e < u64::MAX {
            out.push(a..e + 1);
        }
    }
    // A few ranges spelled by the body's last bytes, around one part's range.
    for chunk in body.rchunks_exact(8).take(4) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let p = &parts[(x % parts.len() as u64) as usize];
        let span = (p.range.end - p.range.start).saturating_add(2);
        let start = p
            .range
            .start
            .saturating_add(((x >> 16) & 0xffff) % span)
            .saturating_sub(1);
        let len = (x >> 32) % span;
        out.push(start..start.saturating_add(len));
    }
    out
}
