//! Locations for [`HttpIo`](super::HttpIo): paths relative to a base URL, and the base URL
//! itself (validated, with credentials split off so they are never displayed).

use std::fmt;

use http::{HeaderValue, Uri};

use crate::backend::Location;
use crate::error::{Error, Result};

/// A path relative to an [`HttpIo`](super::HttpIo) base URL, such as `shards/0/3.glm`.
///
/// The path is stored unencoded and percent-encoded when the request URL is built, so a name
/// like `a b.bin` is requested as `a%20b.bin`. It must stay below the base URL: absolute
/// paths (`/x`), `.`/`..` segments, empty segments (`a//b`) and scheme-bearing strings
/// (`http://…`, `c:x`) are rejected by [`HttpPath::new`]. [`Location::child`] cannot
/// return an error, so an invalid child name yields a path that fails with
/// [`Error::InvalidArgument`] when it is opened.
///
/// ```
/// use guideloom_io::Location;
/// use guideloom_io::http::HttpPath;
///
/// let dir = HttpPath::new("datasets/demo").unwrap();
/// assert_eq!(dir.child("shards/0.glm").as_str(), "datasets/demo/shards/0.glm");
/// assert!(HttpPath::new("../etc/passwd").is_err());
/// assert!(HttpPath::new("https://elsewhere.example/x").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HttpPath {
    path: String,
    /// Why this path is invalid, when a bad name was joined with [`Location::child`].
    invalid: Option<String>,
}

impl HttpPath {
    /// The base URL itself (the empty relative path), the usual dataset directory.
    pub fn root() -> Self {
        HttpPath {
            path: String::new(),
            invalid: None,
        }
    }

    /// A validated relative path. A trailing `/` is dropped.
    pub fn new(path: &str) -> Result<Self> {
        let trimmed = path.strip_suffix('/').unwrap_or(path);
        if trimmed.is_empty() {
            return Ok(Self::root());
        }
        validate(trimmed).map_err(|reason| Error::InvalidArgument {
            message: format!("invalid HTTP relative path {path:?}: {reason}"),
        })?;
        Ok(HttpPath {
            path: trimmed.to_owned(),
            invalid: None,
        })
    }

    /// The unencoded relative path (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.path
    }

    /// Fails with [`Error::InvalidArgument`] when an invalid name was joined onto this path.
    pub fn check(&self) -> Result<()> {
        match &self.invalid {
            None => Ok(()),
            Some(reason) => Err(Error::InvalidArgument {
                message: reason.clone(),
            }),
        }
    }

    /// The percent-encoded path, as appended to the base URL.
    pub(crate) fn encoded(&self) -> String {
        let mut out = String::with_capacity(self.path.len());
        for b in self.path.bytes() {
            if b == b'/' || is_path_char(b) {
                out.push(char::from(b));
            } else {
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// RFC 3986 `pchar` minus `%` (which we always encode): unreserved, sub-delims, `:` and `@`.
fn is_path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b)
}

fn validate(path: &str) -> std::result::Result<(), String> {
    if path.starts_with('/') {
        return Err("absolute paths are not allowed; give a path relative to the base URL".into());
    }
    let first = path.split('/').next().unwrap_or_default();
    if first.contains(':') {
        return Err("a scheme or drive prefix is not allowed in a relative path".into());
    }
    for seg in path.split('/') {
        match seg {
            "" => return Err("empty path segment".into()),
            "." | ".." => return Err("`.` and `..` segments are not allowed".into()),
            _ => {}
        }
        if seg.contains('\\') {
            return Err("backslashes are not allowed".into());
        }
    }
    Ok(())
}

impl fmt::Debug for HttpPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.invalid {
            None => write!(f, "HttpPath({:?})", self.path),
            Some(reason) => write!(f, "HttpPath({:?}, invalid: {reason})", self.path),
        }
    }
}

impl fmt::Display for HttpPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)
    }
}

impl Location for HttpPath {
    fn child(&self, name: &str) -> Self {
        let name = name.strip_suffix('/').unwrap_or(name);
        let path = if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.path)
        };
        let invalid = self.invalid.clone().or_else(|| {
            validate(name)
                .err()
                .map(|reason| format!("invalid HTTP path component {name:?}: {reason}"))
        });
        HttpPath { path, invalid }
    }

    fn describe(&self) -> String {
        self.path.clone()
    }
}

/// A validated base URL: `http(s)://host[:port]/prefix/` with an optional query, and
/// userinfo (if any) moved into a sensitive `Authorization: Basic` header.
#[derive(Clone)]
pub(crate) struct BaseUrl {
    scheme: String,
    /// Host and port, without userinfo.
    authority: String,
    /// Path prefix; starts and ends with `/`.
    prefix: String,
    /// Query string (without `?`) appended to every object URL, e.g. a signed token.
    query: Option<String>,
    /// `Authorization` built from the URL's userinfo.
    pub(crate) basic_auth: Option<HeaderValue>,
}

impl fmt::Debug for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted(""))
    }
}

impl BaseUrl {
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let bad = |why: &str| Error::InvalidArgument {
            message: format!("invalid HTTP base URL {}: {why}", redact_url(url)),
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let scheme = match uri.scheme_str() {
            Some(s @ ("http" | "https")) => s.to_owned(),
            Some(_) => return Err(bad("the scheme must be http or https")),
            None => return Err(bad("a scheme (http:// or https://) is required")),
        };
        let full_authority = uri
            .authority()
            .ok_or_else(|| bad("a host is required"))?
            .as_str();
        let (userinfo, authority) = match full_authority.rsplit_once('@') {
            Some((u, a)) => (Some(u), a),
            None => (None, full_authority),
        };
        if authority.is_empty() {
            return Err(bad("a host is required"));
        }
        let prefix = uri.path().to_owned();
        if !prefix.ends_with('/') {
            return Err(bad("the base URL must end with '/' (it names a directory)"));
        }
        if url.contains('#') {
            return Err(bad("fragments are not allowed"));
        }
        let basic_auth = userinfo
            .map(|u| {
                let decoded = percent_decode(u);
                let mut v = HeaderValue::try_from(format!("Basic {}", base64(&decoded)))
                    .map_err(|_| bad("the credentials in the URL are not valid in a header"))?;
                v.set_sensitive(true);
                Ok::<_, Error>(v)
            })
            .transpose()?;
        Ok(BaseUrl {
            scheme,
            authority: authority.to_owned(),
            prefix,
            query: uri.query().map(str::to_owned),
            basic_auth,
        })
    }

    /// The request URI of `path` (credentials excluded; the query is included).
    pub(crate) fn uri(&self, path: &HttpPath) -> Result<Uri> {
        let mut s = format!(
            "{}://{}{}{}",
            self.scheme,
            self.authority,
            self.prefix,
            path.encoded()
        );
        if let Some(q) = &self.query {
            s.push('?');
            s.push_str(q);
        }
        s.parse().map_err(|e| Error::InvalidArgument {
            message: format!(
                "cannot build a URL for {}: {e}",
                self.redacted(&path.encoded())
            ),
        })
    }

    /// The request URI of the directory `path` (its URL with a trailing `/`, as directory
    /// listings are served).
    pub(crate) fn dir_uri(&self, path: &HttpPath) -> Result<Uri> {
        let dir = HttpPath {
            path: if path.path.is_empty() {
                String::new()
            } else {
                format!("{}/", path.path)
            },
            invalid: None,
        };
        self.uri(&dir)
    }

    /// The URL of `encoded_path` for display: no userinfo, query replaced by `?<redacted>`.
    pub(crate) fn redacted(&self, encoded_path: &str) -> String {
        let q = if self.query.is_some() {
            "?<redacted>"
        } else {
            ""
        };
        format!(
            "{}://{}{}{encoded_path}{q}",
            self.scheme, self.authority, self.prefix
        )
    }

    /// The host (and port) requests go to.
    pub(crate) fn authority(&self) -> &str {
        &self.authority
    }
}

/// Removes userinfo and replaces the query of a URL-like string, for errors and logs.
pub(crate) fn redact_url(url: &str) -> String {
    let (without_fragment, _) = url.split_once('#').unwrap_or((url, ""));
    let (before_query, query) = match without_fragment.split_once('?') {
        Some((b, _)) => (b, "?<redacted>"),
        None => (without_fragment, ""),
    };
    let redacted = match before_query.split_once("://") {
        Some((scheme, rest)) => {
            let (auth, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            let host = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => before_query.to_owned(),
    };
    format!("{redacted}{query}")
}

fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |c: u8| char::from(c).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if k <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_rules() {
        assert!(BaseUrl::parse("http://127.0.0.1:8080/").is_ok());
        assert!(BaseUrl::parse("https://example.com/data/").is_ok());
        assert!(BaseUrl::parse("http://example.com/data").is_err());
        assert!(BaseUrl::parse("ftp://example.com/").is_err());
        assert!(BaseUrl::parse("example.com/").is_err());
    }

    #[test]
    fn credentials_never_displayed() {
        let b = BaseUrl::parse("https://alice:s3cr%40t@example.com/d/?sig=TOKEN").unwrap();
        let shown = b.redacted("x.bin");
        assert_eq!(shown, "https://example.com/d/x.bin?<redacted>");
        assert!(!format!("{b:?}").contains("s3cr"));
        let auth = b.basic_auth.clone().unwrap();
        assert!(auth.is_sensitive());
        // "alice:s3cr@t" in base64.
        assert_eq!(auth.to_str().unwrap(), "Basic YWxpY2U6czNjckB0");
        let uri = b.uri(&HttpPath::new("x.bin").unwrap()).unwrap();
        assert_eq!(uri.to_string(), "https://example.com/d/x.bin?sig=TOKEN");
        assert_eq!(
            redact_url("https://u:p@h.example/a?tok=1"),
            "https://h.example/a?<redacted>"
        );
    }

    #[test]
    fn paths_are_encoded_and_validated() {
        let p = HttpPath::new("a b/c%d.bin").unwrap();
        assert_eq!(p.encoded(), "a%20b/c%25d.bin");
        for bad in ["/abs", "a/../b", "./a", "a//b", "http://x/y", "c:x", "a\\b"] {
            assert!(HttpPath::new(bad).is_err(), "{bad} should be rejected");
        }
        let child = HttpPath::root().child("../up");
        assert!(child.check().is_err());
        assert!(child.child("more").check().is_err());
        assert!(HttpPath::root().child("ok/name").check().is_ok());
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }
}
