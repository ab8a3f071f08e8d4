//! Object keys relative to a root, names, and content hashes.

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Longest key accepted (S3 allows 1024 bytes for the full key including the root prefix).
pub(crate) const MAX_KEY_LEN: usize = 768;

/// Why `key` is not a safe key relative to a root, or `None` when it is.
///
/// A safe key stays inside the root: it is relative (no leading `/`), has no scheme
/// (`s3://other-bucket/...`), no `.` or `..` segment, no empty segment, no backslash, no
/// control character, no segment starting with `.` (reserved for temporary and lock files
/// of local roots) and is at most [`MAX_KEY_LEN`] bytes.
pub(crate) fn key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        return Some("empty key");
    }
    if key.len() > MAX_KEY_LEN {
        return Some("key too long");
    }
    if key.contains("://") || key.contains(':') {
        return Some("key has a scheme or a colon (it must be relative to the root)");
    }
    if key.starts_with('/') {
        return Some("absolute key");
    }
    if key.contains('\\') {
        return Some("backslash in key");
    }
    if key.chars().any(char::is_control) {
        return Some("control character in key");
    }
    for segment in key.split('/') {
        match segment {
            "" => return Some("empty path segment"),
            "." | ".." => return Some("`.` or `..` segment escapes the root"),
            s if s.starts_with('.') => {
                return Some("segment starting with `.` (reserved for temporary files)");
            }
            _ => {}
        }
    }
    None
}

/// Checks that `key` is a safe key (see [`key_problem`]).
pub(crate) fn check_key(key: &str) -> Result<()> {
    match key_problem(key) {
        None => Ok(()),
        Some(problem) => Err(Error::invalid(format!("key {key:?}: {problem}"))),
    }
}

/// Checks a name used as one key segment (snapshot id, work id, annotation set, version):
/// 1 to 128 bytes of `[A-Za-z0-9._-]`, not starting with `.` or `-`.
pub fn check_name(kind: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{kind} {name:?}: use 1-128 characters of [A-Za-z0-9._-], not starting with `.` or `-`"
        )))
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex of a digest (or any bytes).
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A random 128-bit hex token (claims, temporary names, probe keys).
pub(crate) fn nonce() -> String {
    format!("{:032x}", rand::random::<u128>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_escape_are_rejected() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a/./b",
            "a//b",
            "a/",
            "s3://other/x",
            "c:\\x",
            "a\\b",
            "a/.tmp",
            "a\nb",
        ] {
            assert!(key_problem(bad).is_some(), "{bad:?} accepted");
        }
        for good in [
            "dataset.json",
            "shards/w-0/00000001.glm",
            "log/00000000000000000001.json",
        ] {
            assert_eq!(key_problem(good), None, "{good:?} rejected");
        }
        assert!(key_problem(&"a".repeat(MAX_KEY_LEN + 1)).is_some());
    }

    #[test]
    fn names() {
        assert!(check_name("id", "run-001").is_ok());
        assert!(check_name("id", "a.b_c").is_ok());
        for bad in ["", ".x", "-x", "a/b", "a b", "é"] {
            assert!(check_name("id", bad).is_err(), "{bad:?}");
        }
        assert!(check_name("id", &"x".repeat(129)).is_err());
    }

    #[test]
    fn sha256_known_value() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
