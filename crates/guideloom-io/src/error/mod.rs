//! The crate's one error type.

pub(crate) mod cause;
mod kind;

pub use kind::ErrorKind;

use std::error::Error as StdError;

/// A boxed error source, `Send + Sync` so errors cross threads and tasks.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// `Result` with this crate's [`enum@Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while opening or reading an object.
///
/// Every variant names the object (`location`, as the backend displays it) so an error
/// read in a log says which file, key or URL was at fault. Match on [`kind`](Error::kind)
/// or on variants, never on message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object does not exist. Shard discovery stops at the first of these.
    #[error("not found: {location}")]
    NotFound {
        /// The missing object.
        location: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The backend returned fewer bytes than asked for. Never returned as a short buffer.
    #[error("short read of {location}: asked for {requested} bytes at offset {offset}, got {got}")]
    ShortRead {
        /// The object read.
        location: String,
        /// Start of the requested range.
        offset: u64,
        /// Bytes requested.
        requested: u64,
        /// Bytes actually received.
        got: u64,
    },
    /// The backend sent more bytes than the range asked for: a protocol violation (never
    /// retried), and not a short read.
    #[error(
        "overlong read of {location}: the backend sent {} for a range of {requested} bytes at offset {offset}",
        sent_text(*got)
    )]
    LongRead {
        /// The object read.
        location: String,
        /// Start of the requested range (of the first range, for a multi-range request).
        offset: u64,
        /// Bytes requested (for a multi-range request: the most its multipart answer may
        /// hold, part headers included).
        requested: u64,
        /// Bytes sent, when known (`None`: the body went on past `requested`).
        got: Option<u64>,
    },
    /// A remote operation ran out of time: its last attempt hit the request or connect
    /// timeout, or the operation's deadline across retries passed. Retry-counted; the
    /// details are boxed to keep `Result`s small.
    #[error(transparent)]
    Timeout(Box<TimeoutError>),
    /// The requested range does not lie inside the object.
    #[error("range {offset}+{len} is out of range for {location} of size {size}")]
    OutOfRange {
        /// The object read.
        location: String,
        /// Start of the requested range.
        offset: u64,
        /// Length of the requested range.
        len: u64,
        /// The object's size, as the backend knows it (`u64::MAX` when unknown).
        size: u64,
    },
    /// The backend cannot do this operation (on this platform, or at all).
    #[error("{backend} does not support {operation}: {reason}")]
    Unsupported {
        /// The backend's name, e.g. `"PreadIo"`.
        backend: &'static str,
        /// The operation asked for, e.g. `"sync reader"`.
        operation: &'static str,
        /// Why, and what to use instead.
        reason: String,
    },
    /// The reader was closed; no more reads are possible.
    #[error("reader for {location} is closed")]
    Closed {
        /// The object whose reader was closed.
        location: String,
    },
    /// A local backend found something other than a regular file at the location: a
    /// directory, a FIFO, a device or a socket. Refused at once, without waiting on it (a
    /// FIFO would block the open until a writer appeared, a device read forever): local
    /// backends read regular files only (symbolic links are followed to their target, which
    /// must be one).
    #[error("refusing {location}: it is {kind}, and local backends read regular files only")]
    NotRegularFile {
        /// The entry refused.
        location: String,
        /// What it is (`"a directory"`, `"a FIFO (named pipe)"`, `"a socket"`, ...).
        kind: &'static str,
    },
    /// An operating-system I/O error.
    #[error("I/O error on {location}: {source}")]
    Io {
        /// The object being read.
        location: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A remote backend's request failed (status, transport or protocol error). Displayed
    /// with its cause first when the source chain tells one ([`cause_of`](crate::cause_of):
    /// `connection refused: <location>: <message>`); an object store's `message` is the
    /// failed request in short ([`brief`](crate::brief)).
    #[error("{}", remote_text(.location, .message, .source.as_deref()))]
    Remote {
        /// The object being read.
        location: String,
        /// What happened, e.g. `"HTTP 503 after 4 attempts"`.
        message: String,
        /// Whether retrying the same request might succeed.
        retryable: bool,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The object changed after this reader's first read of it: a later request sent the
    /// entity tag seen then (`If-Match`) and the store refused it (HTTP 412), or the store
    /// answered with another entity tag. A remote reader serves bytes of one version of an
    /// object, never of two: after a swap its reads fail with this (never retried) instead of
    /// returning the new object's bytes.
    #[error(
        "{location} changed since this reader first read it: it no longer has entity tag \
         {pinned} ({})",
        changed_text(found.as_deref())
    )]
    Changed {
        /// The object read.
        location: String,
        /// The entity tag of the version the reader's first response carried.
        pinned: String,
        /// The entity tag the store answered with instead, when it sent one (`None`: it
        /// refused `If-Match` with 412). Boxed to keep the error small.
        found: Option<Box<str>>,
    },
    /// An invalid argument or configuration (e.g. a malformed base URL).
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
}

/// The details of an [`Error::Timeout`].
#[derive(Debug, thiserror::Error)]
#[error(
    "timed out: {operation} {location}: {limit} ({}, {} in all)",
    attempts_text(*attempts),
    secs_text(*elapsed)
)]
#[non_exhaustive]
pub struct TimeoutError {
    /// The object read (redacted URL or key).
    pub location: String,
    /// The request, e.g. `"GET bytes=0-99"` or `"HEAD"`.
    pub operation: String,
    /// Which bound ran out.
    pub limit: TimeoutKind,
    /// Attempts made, the first included (`None`: the client retried internally and did not
    /// say; object_store's clients).
    pub attempts: Option<u32>,
    /// Time from the first attempt to giving up.
    pub elapsed: std::time::Duration,
    /// The last attempt's own failure, when the deadline cut the retries short after a
    /// failure that was not itself a timeout (a 503, a reset).
    #[source]
    pub source: Option<Error>,
}

/// Which time bound an [`Error::Timeout`] ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// The per-attempt request timeout (connect, head and whole body).
    Request(std::time::Duration),
    /// The connect timeout.
    Connect(std::time::Duration),
    /// The deadline of the whole operation across its attempts.
    Deadline(std::time::Duration),
    /// The store client's own timeout (object_store's `ClientOptions`, after its retries).
    Client,
}

impl std::fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeoutKind::Request(d) => {
                write!(
                    f,
                    "no complete answer within the {} request timeout",
                    secs_text(*d)
                )
            }
            TimeoutKind::Connect(d) => {
                write!(
                    f,
                    "no connection within the {} connect timeout",
                    secs_text(*d)
                )
            }
            TimeoutKind::Deadline(d) => {
                write!(f, "the {} operation deadline passed", secs_text(*d))
            }
            TimeoutKind::Client => f.write_str("the store client's request timeout ran out"),
        }
    }
}

/// `1.5 s`, `30 s`, `250 ms`.
fn secs_text(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn attempts_text(attempts: Option<u32>) -> String {
    match attempts {
        Some(1) => "1 attempt".to_owned(),
        Some(n) => format!("{n} attempts"),
        None => "after the client's retries".to_owned(),
    }
}

fn changed_text(found: Option<&str>) -> String {
    match found {
        Some(etag) => format!("the store answered with {etag}"),
        None => "the store refused If-Match with 412 Precondition Failed".to_owned(),
    }
}

/// [`Error::Remote`]'s text: the cause first when the chain tells one.
fn remote_text(
    location: &str,
    message: &str,
    source: Option<&(dyn StdError + Send + Sync + 'static)>,
) -> String {
    match source.and_then(|s| crate::cause_of(s)) {
        Some(cause) => format!("{cause}: {location}: {message}"),
        None => format!("remote error on {location}: {message}"),
    }
}

fn sent_text(got: Option<u64>) -> String {
    match got {
        Some(n) => format!("{n} bytes"),
        None => "more bytes than that".to_owned(),
    }
}

impl Error {
    /// Builds an [`Error::Io`], mapping `NotFound` OS errors to [`Error::NotFound`].
    pub fn io(location: impl Into<String>, source: std::io::Error) -> Self {
        let location = location.into();
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::NotFound {
                location,
                source: Some(Box::new(source)),
            }
        } else {
            Error::Io { location, source }
        }
    }

    /// Builds an [`Error::Timeout`].
    pub fn timeout(
        location: impl Into<String>,
        operation: impl Into<String>,
        limit: TimeoutKind,
        attempts: Option<u32>,
        elapsed: std::time::Duration,
        source: Option<Error>,
    ) -> Self {
        Error::Timeout(Box::new(TimeoutError {
            location: location.into(),
            operation: operation.into(),
            limit,
            attempts,
            elapsed,
            source,
        }))
    }

    /// Builds an [`Error::Unsupported`].
    pub fn unsupported(
        backend: &'static str,
        operation: &'static str,
        reason: impl Into<String>,
    ) -> Self {
        Error::Unsupported {
            backend,
            operation,
            reason: reason.into(),
        }
    }

    /// `true` when the object does not exist: kind [`ErrorKind::NotFound`] ([`Error::NotFound`],
    /// or an [`Error::Io`] whose OS error is `NotFound`).
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// `true` for [`Error::Changed`]: the object was replaced after the reader's first read.
    pub fn is_changed(&self) -> bool {
        matches!(self, Error::Changed { .. })
    }

    /// `true` for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// Whether retrying the same operation might succeed (transient remote failures,
    /// timeouts).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Remote { retryable, .. } => *retryable,
            Error::Timeout(_) => true,
            Error::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::Interrupted
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
            ),
            _ => false,
        }
    }
}

/// Checks that `offset..offset+len` lies within an object of `size` bytes.
#[inline]
pub fn check_range(location: &str, offset: u64, len: u64, size: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(out_of_range(location, offset, len, size)),
    }
}

/// [`check_range`]'s error, out of the read path.
#[cold]
#[inline(never)]
fn out_of_range(location: &str, offset: u64, len: u64, size: u64) -> Error {
    Error::OutOfRange {
        location: location.to_owned(),
        offset,
        len,
        size,
    }
}

/// Checks that a buffer returned for a read holds exactly `requested` bytes: fewer is
/// [`Error::ShortRead`], more is [`Error::LongRead`].
#[inline]
pub fn check_len(location: &str, offset: u64, requested: u64, got: usize) -> Result<()> {
    if got as u64 == requested {
        return Ok(());
    }
    wrong_len(location, offset, requested, got as u64).map_or(Ok(()), Err)
}

/// The error for `got` bytes received where `requested` were asked for, if they differ:
/// [`Error::ShortRead`] for fewer, [`Error::LongRead`] for more.
#[cold]
pub(crate) fn wrong_len(location: &str, offset: u64, requested: u64, got: u64) -> Option<Error> {
    use std::cmp::Ordering;
    match got.cmp(&requested) {
        Ordering::Equal => None,
        Ordering::Less => Some(Error::ShortRead {
            location: location.to_owned(),
            offset,
            requested,
            got,
        }),
        Ordering::Greater => Some(Error::LongRead {
            location: location.to_owned(),
            offset,
            requested,
            got: Some(got),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn errors_stay_small() {
        // Every Result of the crate carries one; the timeout's details are boxed.
        assert!(
            std::mem::size_of::<Error>() <= 72,
            "{}",
            std::mem::size_of::<Error>()
        );
    }

    #[test]
    fn lengths_are_short_or_long_never_confused() {
        assert!(check_len("x", 0, 10, 10).is_ok());
        let short = check_len("x", 5, 10, 3).unwrap_err();
        assert!(matches!(short, Error::ShortRead { got: 3, .. }), "{short}");
        let long = check_len("x", 5, 10, 12).unwrap_err();
        assert!(
            matches!(long, Error::LongRead { got: Some(12), .. }),
            "{long}"
        );
        let text = long.to_string();
        assert!(!text.contains("short"), "{text}");
        assert!(
            text.contains("sent 12 bytes for a range of 10 bytes at offset 5"),
            "{text}"
        );
    }

    #[test]
    fn timeouts_say_which_bound_and_how_many_attempts() {
        let e = Error::timeout(
            "http://h/a",
            "GET bytes=0-9",
            TimeoutKind::Request(Duration::from_millis(1500)),
            Some(3),
            Duration::from_millis(4620),
            None,
        );
        assert!(e.is_timeout() && e.is_retryable());
        assert_eq!(
            e.to_string(),
            "timed out: GET bytes=0-9 http://h/a: no complete answer within the 1.5 s request \
             timeout (3 attempts, 4.6 s in all)"
        );
        let d = TimeoutKind::Deadline(Duration::from_secs(60)).to_string();
        assert_eq!(d, "the 60 s operation deadline passed");
        assert_eq!(
            TimeoutKind::Connect(Duration::from_millis(250)).to_string(),
            "no connection within the 250 ms connect timeout"
        );
    }
}
