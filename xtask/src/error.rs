//! The one error type of the xtask.

use std::fmt;
use std::path::PathBuf;

/// `Result` with the xtask's [`Error`].
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop an xtask command.
#[derive(Debug)]
pub(crate) enum Error {
    /// The command line was wrong.
    Usage { msg: String },
    /// A file or directory operation failed.
    Io {
        what: String,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A program could not be started.
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// A program ran and exited unsuccessfully.
    Command { command: String, status: String },
    /// A test server could not be installed, started, reached or stopped.
    Server {
        server: &'static str,
        msg: String,
        /// The end of the server's log, when there is one worth showing.
        log_tail: String,
    },
    /// A project check (tidy, a CI step's own verdict) found problems.
    Check {
        check: String,
        problems: Vec<String>,
    },
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(
        what: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Error {
        Error::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Server`] with no log to show.
    pub(crate) fn server(server: &'static str, msg: impl Into<String>) -> Error {
        Error::Server {
            server,
            msg: msg.into(),
            log_tail: String::new(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage { msg } => write!(f, "{msg}"),
            Error::Io { what, path, source } => {
                write!(f, "{what} `{}`: {source}", path.display())
            }
            Error::Spawn { program, source } => write!(f, "cannot run `{program}`: {source}"),
            Error::Command { command, status } => write!(f, "`{command}` failed: {status}"),
            Error::Server {
                server,
                msg,
                log_tail,
            } => {
                write!(f, "{server}: {msg}")?;
                if !log_tail.is_empty() {
                    write!(f, "\n--- end of {server} log ---\n{log_tail}")?;
                }
                Ok(())
            }
            Error::Check { check, problems } => {
                write!(f, "{check}: {} problem(s)", problems.len())?;
                for problem in problems {
                    write!(f, "\n  - {problem}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}
