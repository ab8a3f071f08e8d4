//! Media recognition (declared MIME types and magic numbers) and base64 for `data:` URIs.

/// How a browser can show some bytes inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    /// `<img>`.
    Image,
    /// `<audio controls>`.
    Audio,
}

/// The MIME types the viewer shows inline, and how. Anything else is shown as bytes.
const INLINE: &[(&str, MediaKind)] = &[
    ("image/png", MediaKind::Image),
    ("image/jpeg", MediaKind::Image),
    ("image/gif", MediaKind::Image),
    ("image/webp", MediaKind::Image),
    ("audio/wav", MediaKind::Audio),
    ("audio/x-wav", MediaKind::Audio),
    ("audio/wave", MediaKind::Audio),
    ("audio/mpeg", MediaKind::Audio),
    ("audio/ogg", MediaKind::Audio),
    ("audio/flac", MediaKind::Audio),
];

/// The inline kind of a declared MIME type (`image/png`, ...), with the canonical name to
/// put in a `data:` URI; `None` for types not shown inline (SVG is never inlined: it is a
/// document that could carry script).
pub fn inline_kind(mime: &str) -> Option<(&'static str, MediaKind)> {
    let mime = mime.trim().to_ascii_lowercase();
    INLINE
        .iter()
        .find(|(m, _)| *m == mime)
        .map(|(m, kind)| (*m, *kind))
}

/// The media type of `bytes` by magic number: PNG, JPEG, GIF, WEBP or WAV.
///
/// ```
/// use guideloom_view::html::sniff;
/// assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...").map(|(m, _)| m), Some("image/png"));
/// assert_eq!(sniff(b"hello"), None);
/// ```
pub fn sniff(bytes: &[u8]) -> Option<(&'static str, MediaKind)> {
    let mime = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        "image/jpeg"
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        "image/gif"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "image/webp"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WAVE" {
        "audio/wav"
    } else {
        return None;
    };
    inline_kind(mime)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 (RFC 4648, with padding) of `bytes`, appended to `out`.
pub(crate) fn base64_into(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut out = String::new();
            base64_into(&mut out, input.as_bytes());
            assert_eq!(out, expected, "{input:?}");
        }
    }

    #[test]
    fn magic_numbers_and_declared_types() {
        assert_eq!(sniff(&[0xff, 0xd8, 0xff, 0xe0]).unwrap().0, "image/jpeg");
        assert_eq!(sniff(b"GIF89a..").unwrap().0, "image/gif");
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 ").unwrap().0, "image/webp");
        assert_eq!(sniff(b"RIFF\0\0\0\0WAVEfmt ").unwrap().1, MediaKind::Audio);
        assert_eq!(inline_kind("IMAGE/PNG").unwrap().0, "image/png");
        assert_eq!(inline_kind("image/svg+xml"), None);
        assert_eq!(inline_kind("text/html"), None);
    }
}
