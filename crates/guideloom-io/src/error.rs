//! The crate's one error type.

use std::error::Error as StdError;

/// A boxed error source, `Send + Sync` so errors cross threads and tasks.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// `Result` with this crate's [`enum@Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while opening or reading an object.
///
/// Every variant names the object (`location`, as the backend displays it) so an error
/// read in a log says which file, key or URL was at fault. Match on variants, never on
/// message text.
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
    /// An operating-system I/O error.
    #[error("I/O error on {location}: {source}")]
    Io {
        /// The object being read.
        location: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A remote backend's request failed (status, transport or protocol error).
    #[error("remote error on {location}: {message}")]
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
    /// An invalid argument or configuration (e.g. a malformed base URL).
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
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

    /// `true` for [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether retrying the same operation might succeed (transient remote failures).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Remote { retryable, .. } => *retryable,
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
pub fn check_range(location: &str, offset: u64, len: u64, size: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::OutOfRange {
            location: location.to_owned(),
            offset,
            len,
            size,
        }),
    }
}

/// Checks that a buffer returned for a read holds exactly `requested` bytes.
pub fn check_len(location: &str, offset: u64, requested: u64, got: usize) -> Result<()> {
    if got as u64 == requested {
        Ok(())
    } else {
        Err(Error::ShortRead {
            location: location.to_owned(),
            offset,
            requested,
            got: got as u64,
        })
    }
}
