//! Member names as webdataset reads them: its metadata rule, its key and extension split, and
//! the MIME type guessed from an extension.

/// webdataset's `tar_file_iterator` metadata rule: a member it skips entirely. Two tests, both
/// from `webdataset/tariterators.py` (webdataset 1.0.2): a top-level name that starts and ends
/// with `__` (`"/" not in fname and fname.startswith("__") and fname.endswith("__")`, so
/// `__index__`, `___`, `__`), and `re.match(r"__[^/]*__($|/)", fname)`: a first path segment
/// of at least four characters that starts and ends with `__` (`__meta__/info.json`).
/// `__key__.txt` is no metadata: its first segment ends in `txt`.
pub(super) fn is_meta(name: &str) -> bool {
    let top_level = !name.contains('/') && name.starts_with("__") && name.ends_with("__");
    let first = name.split('/').next().unwrap_or(name);
    let meta_dir = first.len() >= 4 && first.starts_with("__") && first.ends_with("__");
    top_level || meta_dir
}

/// webdataset's `base_plus_ext`: the regular expression `^((?:.*/|)[^.]+)[.]([^/]*)$` as
/// Python's `re.match` applies it, for a name without a newline (newlines change what `.`
/// and `$` match; the caller refuses such names). `None` when it does not match (webdataset
/// then skips the member).
///
/// - `dir/x.seg.png` → (`dir/x`, `seg.png`): the key is everything up to the first dot of the
///   basename, with its directories; the extension is the rest, dots included.
/// - `a.` → (`a`, ``): an empty extension.
/// - `noext`, `x.y/` (no dot in the basename) → `None`.
/// - A basename that starts with a dot makes the regex backtrack into the directories: the key
///   is the directory part itself when its last segment has no dot (`dir/.hidden` →
///   (`dir/`, `hidden`), `a//.x` → (`a//`, `x`)) and `None` otherwise (`a.b/.x`, `.hidden`).
pub(super) fn base_plus_ext(name: &str) -> Option<(&str, &str)> {
    let base_start = name.rfind('/').map_or(0, |slash| slash + 1);
    let base = &name[base_start..];
    let dot = base.find('.')?;
    if dot > 0 {
        return Some((&name[..base_start + dot], &base[dot + 1..]));
    }
    // `[^.]+` cannot be empty, so the key must reach back over the directory part, through
    // its last segment (and its slash), which therefore must hold no dot.
    let dir = &name[..base_start];
    let last_segment = dir
        .strip_suffix('/')?
        .rfind('/')
        .map_or(0, |slash| slash + 1);
    if dir[last_segment..].contains('.') {
        return None;
    }
    Some((dir, &base[1..]))
}

/// The MIME type guessed from a WebDataset extension's last dot-separated part (`seg.png` →
/// `image/png`), as stored under [`MEDIA_KEY`](crate::MEDIA_KEY) in a field's metadata;
/// `application/octet-stream` for an extension it does not know.
pub fn media_type(extension: &str) -> &'static str {
    let last = extension.rsplit('.').next().unwrap_or(extension);
    match last.to_ascii_lowercase().as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "webp" => "image/webp",
        "json" => "application/json",
        "txt" | "cls" | "text" => "text/plain",
        "wav" => "audio/wav",
        "flac" => "audio/flac",
        "mp3" => "audio/mpeg",
        "npy" => "application/x-npy",
        "pyd" | "pickle" | "pkl" => "application/x-python-pickle",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_plus_ext_splits_at_the_first_dot_of_the_basename() {
        // Each case checked against webdataset 1.0.2's base_plus_ext.
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("a.b", Some(("a", "b"))),
            ("sample000001.seg.png", Some(("sample000001", "seg.png"))),
            ("dir/x.seg.png", Some(("dir/x", "seg.png"))),
            ("a.b/c.txt", Some(("a.b/c", "txt"))),
            ("a/b.c/d.e", Some(("a/b.c/d", "e"))),
            ("/x.y", Some(("/x", "y"))),
            ("a.", Some(("a", ""))),
            ("__key__.txt", Some(("__key__", "txt"))),
            ("train/cat.0007.jpg", Some(("train/cat", "0007.jpg"))),
            ("noext", None),
            ("a.b/c", None),
            ("x.y/", None),
            ("", None),
        ];
        for (name, want) in cases {
            assert_eq!(base_plus_ext(name), *want, "{name:?}");
        }
    }

    #[test]
    fn base_plus_ext_backtracks_over_a_leading_dot() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("dir/.hidden", Some(("dir/", "hidden"))),
            ("a/b/.x", Some(("a/b/", "x"))),
            ("a//.x", Some(("a//", "x"))),
            ("d.e/f/.g", Some(("d.e/f/", "g"))),
            ("dir/..x", Some(("dir/", ".x"))),
            ("dir/.", Some(("dir/", ""))),
            (".hidden", None),
            ("a.b/.x", None),
            ("/.x", Some(("/", "x"))),
        ];
        for (name, want) in cases {
            assert_eq!(base_plus_ext(name), *want, "{name:?}");
        }
    }

    #[test]
    fn meta_names_are_webdatasets() {
        for name in [
            "__index__",
            "___",
            "__",
            "__a.b__",
            "__meta__/info.json",
            "__x__/y/z.txt",
        ] {
            assert!(is_meta(name), "{name:?}");
        }
        for name in [
            "__key__.txt",
            "a/__index__",
            "___/x.txt",
            "_a_.txt",
            "__x_/y.txt",
            "x.__",
        ] {
            assert!(!is_meta(name), "{name:?}");
        }
    }

    #[test]
    fn media_types_follow_the_last_extension_part() {
        assert_eq!(media_type("jpg"), "image/jpeg");
        assert_eq!(media_type("seg.png"), "image/png");
        assert_eq!(media_type("cls"), "text/plain");
        assert_eq!(media_type("meta.json"), "application/json");
        assert_eq!(media_type("pkl"), "application/x-python-pickle");
        assert_eq!(media_type("flac"), "audio/flac");
        assert_eq!(media_type("tar"), "application/octet-stream");
        assert_eq!(media_type(""), "application/octet-stream");
    }
}
