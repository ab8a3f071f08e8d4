//! Root URIs: a local path or `file://`, `memory://`, `s3://`, `gs://`, `az://`, and
//! read-only `http://` / `https://` base URLs.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::key::key_problem;

/// A parsed root URI.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootUri {
    /// A local directory (a plain path or `file:///abs/path`).
    Local(PathBuf),
    /// `memory://<name>[/<prefix>]`: an in-process store shared by every root of one
    /// registry with the same name (tests and examples).
    Memory {
        /// Store name (may be empty).
        name: String,
        /// Key prefix inside it.
        prefix: String,
    },
    /// An object-store bucket: `s3://`, `gs://` or `az://` `<bucket>[/<prefix>]`.
    Bucket {
        /// `"s3"`, `"gs"` or `"az"`.
        scheme: String,
        /// Bucket (or container) name.
        bucket: String,
        /// Key prefix inside it (`""` for the top level).
        prefix: String,
    },
    /// A read-only dataset served over HTTP(S): the base URL of the root, as given
    /// (`http://host/datasets/captures`; a trailing `/` is optional). It may carry userinfo
    /// (HTTP Basic authentication) or a query string (a signed token): stores built from it
    /// never display either, but this value's `Debug` shows the URL as given.
    Http(String),
}

impl RootUri {
    /// Parses `uri`.
    ///
    /// ```
    /// use guideloom_publish::RootUri;
    /// let u = RootUri::parse("s3://bucket/data/captures").unwrap();
    /// assert_eq!(
    ///     u,
    ///     RootUri::Bucket { scheme: "s3".into(), bucket: "bucket".into(), prefix: "data/captures".into() }
    /// );
    /// assert!(matches!(RootUri::parse("/tmp/ds").unwrap(), RootUri::Local(_)));
    /// assert!(matches!(RootUri::parse("https://data.example/ds").unwrap(), RootUri::Http(_)));
    /// assert!(RootUri::parse("ftp://x/y").is_err());
    /// ```
    pub fn parse(uri: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidUri {
            uri: uri.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((scheme, rest)) = uri.split_once("://") else {
            if uri.is_empty() {
                return Err(invalid("empty"));
            }
            return Ok(RootUri::Local(PathBuf::from(uri)));
        };
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "file" => {
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                if !path.starts_with('/') {
                    return Err(invalid("file:// URIs need an absolute path (file:///dir)"));
                }
                Ok(RootUri::Local(PathBuf::from(path)))
            }
            "memory" => {
                let (name, prefix) = split_bucket(rest);
                check_prefix(prefix).map_err(|r| invalid(&r))?;
                Ok(RootUri::Memory {
                    name: name.to_owned(),
                    prefix: prefix.to_owned(),
                })
            }
            "s3" | "s3a" | "gs" | "az" | "azure" | "abfs" => {
                let (bucket, prefix) = split_bucket(rest);
                if bucket.is_empty() {
                    return Err(invalid("missing bucket name"));
                }
                if !bucket
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
                {
                    return Err(invalid("bucket names use [A-Za-z0-9.-_] only"));
                }
                check_prefix(prefix).map_err(|r| invalid(&r))?;
                let scheme = match scheme.as_str() {
                    "s3a" => "s3",
                    "azure" | "abfs" => "az",
                    s => s,
                };
                Ok(RootUri::Bucket {
                    scheme: scheme.to_owned(),
                    bucket: bucket.to_owned(),
                    prefix: prefix.to_owned(),
                })
            }
            "http" | "https" => {
                let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                if host.is_empty() {
                    return Err(invalid("missing host"));
                }
                if rest.contains('#') {
                    return Err(invalid("fragments are not allowed in a base URL"));
                }
                Ok(RootUri::Http(format!("{scheme}://{rest}")))
            }
            other => Err(invalid(&format!(
                "unknown scheme {other:?} (use a path, file://, memory://, s3://, gs://, az://, \
                 http:// or https://)"
            ))),
        }
    }
}

fn split_bucket(rest: &str) -> (&str, &str) {
    match rest.split_once('/') {
        Some((b, p)) => (b, p.trim_end_matches('/')),
        None => (rest, ""),
    }
}

fn check_prefix(prefix: &str) -> std::result::Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    match key_problem(prefix) {
        None => Ok(()),
        Some(p) => Err(format!("prefix {prefix:?}: {p}")),
    }
}

/// `scheme://user:secret@host/...` → `scheme://host/...`: endpoints are logged and put in
/// errors, credentials never are.
pub(crate) fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        assert_eq!(
            RootUri::parse("file:///data/x").unwrap(),
            RootUri::Local("/data/x".into())
        );
        assert_eq!(
            RootUri::parse("rel/dir").unwrap(),
            RootUri::Local("rel/dir".into())
        );
        assert_eq!(
            RootUri::parse("memory://t1/p").unwrap(),
            RootUri::Memory {
                name: "t1".into(),
                prefix: "p".into()
            }
        );
        assert_eq!(
            RootUri::parse("gs://b").unwrap(),
            RootUri::Bucket {
                scheme: "gs".into(),
                bucket: "b".into(),
                prefix: String::new()
            }
        );
        assert!(matches!(
            RootUri::parse("az://c/x/").unwrap(),
            RootUri::Bucket { ref scheme, ref prefix, .. } if scheme == "az" && prefix == "x"
        ));
    }

    #[test]
    fn parses_http_base_urls() {
        assert_eq!(
            RootUri::parse("HTTP://127.0.0.1:8080/ds/x").unwrap(),
            RootUri::Http("http://127.0.0.1:8080/ds/x".into())
        );
        assert_eq!(
            RootUri::parse("https://h/ds/?token=t").unwrap(),
            RootUri::Http("https://h/ds/?token=t".into())
        );
    }

    #[test]
    fn endpoints_lose_their_credentials() {
        assert_eq!(
            redact_userinfo("http://key:secret@127.0.0.1:9000/x"),
            "http://127.0.0.1:9000/x"
        );
        assert_eq!(redact_userinfo("https://s3.example"), "https://s3.example");
    }

    #[test]
    fn rejects_bad_uris() {
        for bad in [
            "",
            "file://rel",
            "s3://",
            "s3:///x",
            "s3://b/../x",
            "s3://b/a//c",
            "http://",
            "https:///x",
            "http://u:p@/x",
            "http://h/x#frag",
            "ftp://h/x",
        ] {
            assert!(
                matches!(RootUri::parse(bad), Err(Error::InvalidUri { .. })),
                "{bad:?} accepted"
            );
        }
    }
}
