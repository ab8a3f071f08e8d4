//! The viewer's one error type.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What can go wrong outside a request (a request's failure is an error page).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Accepting connections failed.
    #[error("accepting connections on {addr}: {source}")]
    Accept {
        /// The listening address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading a benchmark file or directory failed.
    #[error("benchmark results {path}: {source}")]
    BenchIo {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A benchmark file is not in a format the viewer reads.
    #[error("benchmark results {path}: {what}")]
    BenchFormat {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl Error {
    /// The error's kind, in the workspace's vocabulary.
    pub fn kind(&self) -> guideloom::ErrorKind {
        match self {
            Error::Bind { .. } | Error::Accept { .. } | Error::BenchIo { .. } => {
                guideloom::ErrorKind::Io
            }
            Error::BenchFormat { .. } => guideloom::ErrorKind::Decode,
        }
    }
}

/// The viewer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
