//! Why a remote request failed, in words: the cause an error message leads with.
//!
//! A failed request's own error (object_store's, hyper's) says what happened in the order it
//! was built: the request, the URL, the timing, the status, and last the server's reason (an
//! S3 error document). [`cause_of`] finds the reason in that chain — typed where the type
//! says it (object_store's `PermissionDenied`, a transport error's kind, an OS error's kind),
//! else from the error document's `<Code>` (the S3 protocol's machine-readable reason) — so
//! that [`Error::Remote`](crate::Error::Remote) and the layers above can put it first:
//! `bucket does not exist (NoSuchBucket): list shards/: <the details>`.

use std::error::Error as StdError;
use std::fmt;

/// What kind of failure a [`Cause`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CauseKind {
    /// The bucket (container) does not exist.
    BucketNotFound,
    /// The credentials are valid but not allowed this request.
    AccessDenied,
    /// The credentials were refused (unknown key, bad signature, expired token).
    BadCredentials,
    /// Nothing listens at the endpoint.
    ConnectionRefused,
    /// The endpoint could not be reached (no route, DNS, a failed connect of another kind).
    Unreachable,
    /// A request or connect timed out.
    TimedOut,
    /// The server asked the client to slow down.
    Throttled,
    /// The server failed (an internal error, unavailable).
    ServerError,
    /// Another reason the server gave by code (see [`Cause::code`]).
    Refused,
}

/// The reason a remote request failed, with the server's own code when it gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The kind of failure.
    pub kind: CauseKind,
    /// The server's error code (S3: `NoSuchBucket`, `AccessDenied`, ...), when known.
    pub code: Option<String>,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            CauseKind::BucketNotFound => "bucket does not exist",
            CauseKind::AccessDenied => "access denied",
            CauseKind::BadCredentials => "credentials refused",
            CauseKind::ConnectionRefused => "connection refused",
            CauseKind::Unreachable => "endpoint unreachable",
            CauseKind::TimedOut => "timed out",
            CauseKind::Throttled => "throttled by the server",
            CauseKind::ServerError => "server error",
            CauseKind::Refused => "request refused",
        })?;
        match &self.code {
            Some(code) => write!(f, " ({code})"),
            None => Ok(()),
        }
    }
}

impl Cause {
    fn new(kind: CauseKind) -> Self {
        Cause { kind, code: None }
    }

    /// The cause an S3-style error code names.
    #[cfg(feature = "object-store")]
    fn of_code(code: &str) -> Self {
        let kind = match code {
            "NoSuchBucket" => CauseKind::BucketNotFound,
            "AccessDenied" | "AllAccessDisabled" | "AccountProblem" => CauseKind::AccessDenied,
            "InvalidAccessKeyId"
            | "SignatureDoesNotMatch"
            | "ExpiredToken"
            | "InvalidToken"
            | "TokenRefreshRequired"
            | "AuthorizationHeaderMalformed" => CauseKind::BadCredentials,
            "SlowDown"
            | "Throttling"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "TooManyRequests" => CauseKind::Throttled,
            "InternalError" | "ServiceUnavailable" => CauseKind::ServerError,
            _ => CauseKind::Refused,
        };
        Cause {
            kind,
            code: Some(code.to_owned()),
        }
    }
}

/// The cause of `error`, found in its source chain; `None` when nothing in it says (a
/// local error, a protocol violation, an unknown failure).
pub fn cause_of(error: &(dyn StdError + 'static)) -> Option<Cause> {
    let mut found: Option<Cause> = None;
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(cause) = own_cause(e) {
            // A server's code is the most specific reason: it wins over everything else.
            if cause.code.is_some() {
                return Some(cause);
            }
            // Else the deepest cause: the error nearest the root says most (a transport's
            // "connect failed" over it, the OS's "connection refused" beneath it).
            found = Some(cause);
        }
        current = e.source();
    }
    found
}

/// Whether the message `text` names `name` (a key, path, root or URL) as a whole: not inside
/// a longer name (`shards/a.glm` is not named by `shards/a.glm.tmp`), though a name that
/// begins or ends with a separator (`http://host/root/`) may run on into a path. The layers
/// above use it to name each object once: a context whose error message beneath already
/// names the object (by its key, or its full location ending in the key) leaves its own
/// prefix out.
pub fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '-');
    let (Some(first), Some(last)) = (name.chars().next(), name.chars().next_back()) else {
        return false;
    };
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        (!word(first) || before.is_none_or(|c| !word(c)))
            && (!word(last) || after.is_none_or(|c| !word(c)))
    })
}

/// The cause one error of a chain states itself.
fn own_cause(e: &(dyn StdError + 'static)) -> Option<Cause> {
    #[cfg(feature = "object-store")]
    if let Some(os) = e.downcast_ref::<object_store::Error>() {
        return object_store_cause(os);
    }
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
    if let Some(h) = e.downcast_ref::<object_store::client::HttpError>() {
        use object_store::client::HttpErrorKind;
        return match h.kind() {
            HttpErrorKind::Timeout => Some(Cause::new(CauseKind::TimedOut)),
            // The OS error beneath says more (refused, unreachable) when there is one.
            HttpErrorKind::Connect => Some(Cause::new(CauseKind::Unreachable)),
            _ => None,
        };
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        use std::io::ErrorKind;
        return match io.kind() {
            ErrorKind::ConnectionRefused => Some(Cause::new(CauseKind::ConnectionRefused)),
            ErrorKind::TimedOut => Some(Cause::new(CauseKind::TimedOut)),
            ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => {
                Some(Cause::new(CauseKind::Unreachable))
            }
            _ => None,
        };
    }
    if let Some(crate::Error::Timeout(_)) = e.downcast_ref::<crate::Error>() {
        return Some(Cause::new(CauseKind::TimedOut));
    }
    None
}

/// An object_store error's cause: the S3 error document's code when its message holds one,
/// else what its variant says.
#[cfg(feature = "object-store")]
fn object_store_cause(e: &object_store::Error) -> Option<Cause> {
    if let Some(code) = error_code(&e.to_string()) {
        return Some(Cause::of_code(code));
    }
    match e {
        object_store::Error::PermissionDenied { .. } => Some(Cause::new(CauseKind::AccessDenied)),
        object_store::Error::Unauthenticated { .. } => Some(Cause::new(CauseKind::BadCredentials)),
        _ => None,
    }
}

/// The `<Code>` of an S3 error document (`<Error><Code>NoSuchBucket</Code>...`) quoted in
/// an error message: object_store passes the response body on as text.
#[cfg(feature = "object-store")]
fn error_code(message: &str) -> Option<&str> {
    let start = message.find("<Code>")? + "<Code>".len();
    let len = message[start..].find("</Code>")?;
    let code = message[start..start + len].trim();
    let plausible = !code.is_empty()
        && code.len() <= 64
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.');
    plausible.then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrap(&'static str, Option<Box<dyn StdError + Send + Sync>>);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Wrap {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn StdError + 'static))
        }
    }

    #[cfg(feature = "object-store")]
    #[test]
    fn codes_of_error_documents() {
        let body = "404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>\
                    <Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(error_code(body), Some("NoSuchBucket"));
        assert_eq!(error_code("<Code></Code>"), None);
        assert_eq!(error_code("<Code>a b</Code>"), None);
        assert_eq!(error_code("no document"), None);
        let cause = Cause::of_code("NoSuchBucket");
        assert_eq!(cause.kind, CauseKind::BucketNotFound);
        assert_eq!(cause.to_string(), "bucket does not exist (NoSuchBucket)");
        assert_eq!(
            Cause::of_code("SignatureDoesNotMatch").kind,
            CauseKind::BadCredentials
        );
        assert_eq!(
            Cause::of_code("Whatever").to_string(),
            "request refused (Whatever)"
        );
    }

    #[test]
    fn names_are_mentioned_whole() {
        let text = "corrupt shard /tmp/r/shards/w/00000000.glm: footer checksum mismatch";
        assert!(mentions(text, "shards/w/00000000.glm"));
        assert!(mentions(text, "/tmp/r"));
        assert!(mentions(text, "r"), "a path component");
        assert!(!mentions(text, "shards/w/0000"), "inside a longer name");
        assert!(!mentions(text, "w/00000000.gl"));
        assert!(!mentions(text, ""));
        assert!(mentions("http://h/x/dataset.json: refused", "http://h/x/"));
        assert!(!mentions("bad s3://b/xy/k", "s3://b/x"));
    }

    #[test]
    fn os_errors_deep_in_a_chain() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let chain = Wrap(
            "client error",
            Some(Box::new(Wrap("connect", Some(Box::new(refused))))),
        );
        let cause = cause_of(&chain).unwrap();
        assert_eq!(cause.kind, CauseKind::ConnectionRefused);
        assert_eq!(cause.to_string(), "connection refused");
        assert_eq!(cause_of(&Wrap("nothing said", None)), None);
    }

    #[cfg(feature = "object-store")]
    #[test]
    fn object_store_errors() {
        let e = object_store::Error::Generic {
            store: "S3",
            source: Box::new(Wrap(
                "Server returned non-2xx status code: 404 Not Found: <Error><Code>NoSuchBucket\
                 </Code></Error>",
                None,
            )),
        };
        assert_eq!(cause_of(&e).unwrap().kind, CauseKind::BucketNotFound);
        let e = object_store::Error::PermissionDenied {
            path: "k".into(),
            source: Box::new(Wrap("403 Forbidden", None)),
        };
        assert_eq!(cause_of(&e).unwrap().kind, CauseKind::AccessDenied);
        let e = object_store::Error::NotFound {
            path: "k".into(),
            source: Box::new(Wrap("404", None)),
        };
        assert_eq!(
            cause_of(&e),
            None,
            "a missing key is not a cause of failure"
        );
    }
}
