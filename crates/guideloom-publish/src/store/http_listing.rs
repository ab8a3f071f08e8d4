//! [`RootStore::list`](super::RootStore::list) for HTTP roots whose origin lists directories
//! (opt-in: [`HttpRootStore::with_listing`](super::HttpRootStore::with_listing),
//! `StoreOptions::http_listing`): one `GET` of `<dir>/` per directory, answered as a JSON
//! array of entries — nginx's `autoindex on; autoindex_format json;` (`name`, `type`,
//! `size`) or Caddy's `file_server browse` asked for JSON (`name`, `is_dir`, `size`).
//!
//! A listing is the origin's word, read as hostile input: at most [`MAX_LISTING_BYTES`] per
//! directory and [`MAX_LISTED_DIRS`] directories per call; a body that is not such an array
//! is [`Error::Unsupported`] (the origin does not list); an entry whose name would not be a
//! valid key below the directory (`..`, a `/`, a dot-prefixed name) is skipped; a file
//! entry without a size is refused. What a listing names is then read with the sizes it
//! gave, so an origin that lies about a size fails that read's checks.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::key::key_problem;
#[cfg(feature = "http")]
pub(crate) use walk::list;

/// Most bytes read of one directory listing: 16 MiB (about 150 000 entries of nginx's JSON).
#[cfg(feature = "http")]
const MAX_LISTING_BYTES: u64 = 16 << 20;

/// Most directories one `list` call reads.
#[cfg(feature = "http")]
const MAX_LISTED_DIRS: usize = 10_000;

/// One entry of a JSON directory listing, in either server's spelling.
#[derive(Debug, Deserialize)]
struct Entry {
    name: String,
    #[serde(default)]
    size: Option<u64>,
    /// nginx: `"file"`, `"directory"` or `"other"`.
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// Caddy.
    #[serde(default)]
    is_dir: Option<bool>,
}

/// What one listing holds below its directory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Listed {
    /// A file and its size.
    File(String, u64),
    /// A subdirectory.
    Dir(String),
}

/// Parses the listing body of `dir` (a key prefix, `""` for the root).
pub(crate) fn parse(dir: &str, body: &[u8]) -> Result<Vec<Listed>> {
    let shown = if dir.is_empty() { "/" } else { dir };
    let entries: Vec<Entry> = serde_json::from_slice(body).map_err(|e| Error::Unsupported {
        what: format!(
            "the listing of {shown}/ is not a JSON directory listing (nginx `autoindex_format \
             json`, Caddy browse): {e}"
        ),
    })?;
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let is_dir = entry.kind.as_deref() == Some("directory")
            || entry.is_dir == Some(true)
            || entry.name.ends_with('/');
        let name = entry.name.strip_suffix('/').unwrap_or(&entry.name);
        let key = if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        };
        if name.contains('/') || key_problem(&key).is_some() {
            continue;
        }
        if is_dir {
            out.push(Listed::Dir(key));
        } else if entry.kind.as_deref().is_none_or(|k| k == "file") {
            let size = entry.size.ok_or_else(|| Error::Unsupported {
                what: format!("the listing of {shown}/ gives no size for {name:?}"),
            })?;
            out.push(Listed::File(key, size));
        }
    }
    Ok(out)
}

#[cfg(feature = "http")]
mod walk {
    use std::collections::VecDeque;

    use guideloom_io::http::{HttpIo, HttpPath};
    use tracing::{Instrument, info_span};

    use super::{Listed, MAX_LISTED_DIRS, MAX_LISTING_BYTES, parse};
    use crate::error::{Error, Result};
    use crate::store::ObjectInfo;

    /// Every file below `prefix`, walking the directory listings breadth first.
    pub(crate) async fn list(io: &HttpIo, describe: &str, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let prefix = prefix.trim_end_matches('/');
        let span = info_span!("http_root_list", root = %describe, prefix);
        async {
            let mut out = Vec::new();
            let mut dirs = VecDeque::from([prefix.to_owned()]);
            let mut read = 0usize;
            while let Some(dir) = dirs.pop_front() {
                read += 1;
                if read > MAX_LISTED_DIRS {
                    return Err(Error::Unsupported {
                        what: format!(
                            "listing {prefix}/ on {describe}: more than {MAX_LISTED_DIRS} directories"
                        ),
                    });
                }
                let path = HttpPath::new(&dir).map_err(|e| Error::invalid(e.to_string()))?;
                let body = match io.get_listing(&path, MAX_LISTING_BYTES).await {
                    Ok(body) => body,
                    // A subdirectory a listing named and that is gone holds nothing. The
                    // directory asked for is another matter: many origins answer 404 for
                    // every directory when they do not list, and "no objects" would then be
                    // a wrong answer where probing finds the right one.
                    Err(guideloom_io::Error::NotFound { .. }) if read > 1 => continue,
                    Err(e @ guideloom_io::Error::NotFound { .. }) => {
                        return Err(Error::Unsupported {
                            what: format!("the origin {describe} did not list {dir}/: {e}"),
                        });
                    }
                    Err(guideloom_io::Error::LongRead { got, .. }) => {
                        return Err(Error::TooLarge {
                            key: format!("{dir}/"),
                            limit: MAX_LISTING_BYTES,
                            size: got,
                        });
                    }
                    Err(e) => {
                        return Err(Error::Unsupported {
                            what: format!("the origin {describe} did not list {dir}/: {e}"),
                        });
                    }
                };
                for listed in parse(&dir, &body)? {
                    match listed {
                        Listed::File(key, size) => out.push(ObjectInfo {
                            key,
                            size,
                            etag: None,
                            modified: None,
                        }),
                        Listed::Dir(key) => dirs.push_back(key),
                    }
                }
            }
            Ok(out)
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_and_caddy_listings_parse_and_hostile_names_are_skipped() {
        let nginx = br#"[
            {"name":"00000000000000000001.json","type":"file","mtime":"x","size":812},
            {"name":"sub","type":"directory","mtime":"x"},
            {"name":"sock","type":"other","mtime":"x"},
            {"name":"..","type":"directory"},
            {"name":".hidden.tmp","type":"file","size":3},
            {"name":"a/b","type":"file","size":3}
        ]"#;
        assert_eq!(
            parse("log", nginx).unwrap(),
            [
                Listed::File("log/00000000000000000001.json".into(), 812),
                Listed::Dir("log/sub".into()),
            ]
        );
        let caddy = br#"[
            {"name":"w/","size":4096,"url":"./w/","mod_time":"x","mode":2147484141,"is_dir":true,"is_symlink":false},
            {"name":"0.glm","size":150148,"url":"./0.glm","mod_time":"x","mode":420,"is_dir":false,"is_symlink":false}
        ]"#;
        assert_eq!(
            parse("", caddy).unwrap(),
            [
                Listed::Dir("w".into()),
                Listed::File("0.glm".into(), 150_148)
            ]
        );
        for bad in [&b"<html>Index of /log/</html>"[..], b"{}", b"[1]"] {
            let err = parse("log", bad).unwrap_err();
            assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        }
        let sizeless = br#"[{"name":"x.json","type":"file"}]"#;
        assert!(matches!(
            parse("log", sizeless),
            Err(Error::Unsupported { .. })
        ));
    }
}
