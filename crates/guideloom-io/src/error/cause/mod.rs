//! Why a remote request failed; documented in the crate root's "Why a request failed" section.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

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
    /// Another reason the server gave by code (see [`Cause::code`] and [`Cause::message`]).
    Refused,
}

/// The reason a remote request failed, with the server's own code when it gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cause {
    /// The kind of failure.
    pub kind: CauseKind,
    /// The server's error code (S3: `NoSuchBucket`, `AccessDenied`, ...), when known.
    pub code: Option<String>,
    /// The server's own words for a code this module does not know (the error document's
    /// `<Message>`, at most 160 characters), shown after it: `request refused (Code: ...)`.
    pub message: Option<String>,
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
        match (&self.code, &self.message) {
            (Some(code), Some(message)) => write!(f, " ({code}: {message})"),
            (Some(code), None) => write!(f, " ({code})"),
            (None, _) => Ok(()),
        }
    }
}

impl CauseKind {
    /// The cause's stable snake_case name (`bucket_not_found`, `bad_credentials`, ...): the
    /// command line's `--json` `cause`, beside the error's [`ErrorKind`](crate::ErrorKind).
    pub const fn name(self) -> &'static str {
        match self {
            CauseKind::BucketNotFound => "bucket_not_found",
            CauseKind::AccessDenied => "access_denied",
            CauseKind::BadCredentials => "bad_credentials",
            CauseKind::ConnectionRefused => "connection_refused",
            CauseKind::Unreachable => "unreachable",
            CauseKind::TimedOut => "timed_out",
            CauseKind::Throttled => "throttled",
            CauseKind::ServerError => "server_error",
            CauseKind::Refused => "refused",
        }
    }
}

impl Cause {
    fn new(kind: CauseKind) -> Self {
        Cause {
            kind,
            code: None,
            message: None,
        }
    }

    /// The cause an S3-style error code names; `message` is kept for an unknown code only.
    #[cfg(feature = "object-store")]
    fn of_code(code: &str, message: Option<&str>) -> Self {
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
            message: (kind == CauseKind::Refused)
                .then_some(message)
                .flatten()
                .map(str::to_owned),
        }
    }

    /// The cause an HTTP status says by itself (no error document). A 404 is none: a missing
    /// object is not a failure's cause but an answer.
    #[cfg(feature = "object-store")]
    fn of_status(status: u16) -> Option<Self> {
        match status {
            401 => Some(Cause::new(CauseKind::BadCredentials)),
            403 => Some(Cause::new(CauseKind::AccessDenied)),
            429 | 503 => Some(Cause::new(CauseKind::Throttled)),
            500..=599 => Some(Cause::new(CauseKind::ServerError)),
            _ => None,
        }
    }
}

/// The cause of `error`, found in its source chain; `None` when nothing in it says (a
/// local error, a protocol violation, a missing object, an unknown failure).
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

/// A failed HTTP request, as object_store's error describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The method (`GET`, `PUT`, ...).
    pub method: String,
    /// The URL (object_store's, credentials never in it; `REDACTED` when it hid it).
    pub url: String,
    /// The status and its reason phrase (`404`, `Not Found`), when a response came.
    pub status: Option<(u16, String)>,
    /// The retries made after the first attempt.
    pub retries: u32,
    /// The time from the first attempt to giving up, when known.
    pub elapsed: Option<Duration>,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.url)?;
        if let Some((code, reason)) = &self.status {
            write!(f, ": {code} {reason}")?;
        }
        match (self.retries, self.elapsed) {
            (0, _) => Ok(()),
            (1, Some(t)) => write!(f, ", after 1 retry in {}", secs(t)),
            (n, Some(t)) => write!(f, ", after {n} retries in {}", secs(t)),
            (1, None) => f.write_str(", after 1 retry"),
            (n, None) => write!(f, ", after {n} retries"),
        }
    }
}

/// The failed request object_store's error in `error`'s chain describes, if there is one.
///
/// object_store does not export the type of its request error, so this reads its text, which
/// has one shape: `Error performing <METHOD> <URL> in <time>[, after <n> retries, ...] -
/// <reason>`, the reason being its source's text (`Server returned non-2xx status code:
/// <status>: <body>` or a transport error). The tests hold it to the object_store version in
/// use, against real responses.
pub fn request_of(error: &(dyn StdError + 'static)) -> Option<Request> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(request) = e.source().and_then(|inner| parse_request(e, inner)) {
            return Some(request);
        }
        current = e.source();
    }
    None
}

/// The short text of a remote failure for a message: the failed [`Request`] when the chain
/// holds one, else `error`'s own text without a server's raw response document (cut where
/// an XML document begins).
pub fn brief(error: &(dyn StdError + 'static)) -> String {
    if let Some(request) = request_of(error) {
        return request.to_string();
    }
    let text = error.to_string();
    let cut = ["<?xml", "<Error>"]
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .unwrap_or(text.len());
    text[..cut]
        .trim_end_matches(|c: char| c == ':' || c.is_whitespace())
        .replace('\n', " ")
}

/// `e` as object_store's request error (its text `Error performing ... - <inner's text>`).
fn parse_request(
    e: &(dyn StdError + 'static),
    inner: &(dyn StdError + 'static),
) -> Option<Request> {
    const HEAD: &str = "Error performing ";
    let text = e.to_string();
    let reason = inner.to_string();
    let head = text
        .strip_prefix(HEAD)?
        .strip_suffix(reason.as_str())?
        .strip_suffix(" - ")?;
    let mut words = head.split(' ');
    let method = words.next()?;
    let url = words.next()?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) || words.next()? != "in"
    {
        return None;
    }
    let elapsed = words
        .next()
        .and_then(|t| debug_duration(t.trim_end_matches(',')));
    let retries = head
        .split_once(", after ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let status = reason
        .strip_prefix("Server returned non-2xx status code: ")
        .and_then(|rest| {
            let (line, _body) = rest.split_once(": ").unwrap_or((rest, ""));
            let (code, phrase) = line.split_once(' ').unwrap_or((line, ""));
            Some((code.parse().ok()?, phrase.trim().to_owned()))
        });
    Some(Request {
        method: method.to_owned(),
        url: url.to_owned(),
        status,
        retries,
        elapsed,
    })
}

/// A `Duration`'s `Debug` text (`56.58ms`, `1.07s`, `473.016µs`).
fn debug_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" | "us" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Duration::try_from_secs_f64(n * scale).ok()
}

/// `1.1 s`, `250 ms`.
fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
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
    #[cfg(feature = "http")]
    if let Some(h) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
        // A failed connect (DNS, no route); the OS error beneath says more when there is one.
        return h.is_connect().then(|| Cause::new(CauseKind::Unreachable));
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

/// An object_store error's cause: the S3 error document's code when its text holds one,
/// else what its variant says, else what the failed request's status says.
#[cfg(feature = "object-store")]
fn object_store_cause(e: &object_store::Error) -> Option<Cause> {
    let text = e.to_string();
    let code = element(&text, "Code").filter(|c| plausible_code(c));
    if let object_store::Error::NotFound { .. } = e {
        // A missing object (`NoSuchKey`) is an answer, not a failure's cause; a missing
        // bucket, which object_store also calls NotFound, is one.
        return (code == Some("NoSuchBucket")).then(|| Cause::of_code("NoSuchBucket", None));
    }
    if let Some(code) = code {
        let message = element(&text, "Message").map(|m| bounded(m, 160));
        return Some(Cause::of_code(code, message.as_deref()));
    }
    match e {
        object_store::Error::PermissionDenied { .. } => Some(Cause::new(CauseKind::AccessDenied)),
        object_store::Error::Unauthenticated { .. } => Some(Cause::new(CauseKind::BadCredentials)),
        _ => request_of(e)?
            .status
            .and_then(|(status, _)| Cause::of_status(status)),
    }
}

/// The text of the first `<name>...</name>` element in `text` (an error document that an
/// error message quotes: object_store passes the response body on as text).
#[cfg(feature = "object-store")]
fn element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + len].trim())
}

/// An S3 error code is one short word of letters and digits.
#[cfg(feature = "object-store")]
fn plausible_code(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= 64
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.')
}

/// `text` on one line, at most `max` characters (an ellipsis marks a cut).
#[cfg(feature = "object-store")]
fn bounded(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests;
