//! [`ErrorKind`]: what went wrong, in one word, for every error type of the workspace.

use std::fmt;

use super::Error;
use crate::{CauseKind, cause_of};

/// What went wrong, in one word: the kind of every error of the workspace.
///
/// Every error type (this crate's [`Error`], guideloom-format's, guideloom-arrayrecord's,
/// guideloom-publish's and the facade's) has `kind()`. A caller decides what to do from the
/// kind and reads the details (which object, which check) from the typed error itself, whose
/// source chain is unchanged; the Python exceptions and the command line's `--json` kind and
/// exit status are chosen from the kind, each in one table (docs/python.md, "Exceptions";
/// docs/cli.md, "Error kinds").
///
/// # How a kind is chosen
///
/// - A variant that says **what** is wrong has its own kind, whatever its source: a shard's
///   `Corrupt` is [`Corrupt`](Self::Corrupt), a record's `Decode` is [`Decode`](Self::Decode),
///   a log entry's verification failure [`VerificationFailed`](Self::VerificationFailed).
/// - A variant that only says **where** it went wrong (which shard, object or root, which
///   crate it crossed: guideloom-publish's `Shard`, `ArrayRecordShard` and `Read`,
///   guideloom-format's and guideloom-arrayrecord's `Io`, the facade's `Io`, `Format` and
///   `Publish`, the command line's wrappers) has the kind of its **source**. So a timeout
///   beneath a shard read is [`Timeout`](Self::Timeout), a missing shard
///   [`NotFound`](Self::NotFound), and damage found in it [`Corrupt`](Self::Corrupt).
/// - A variant whose meaning is "a remote request failed" (this crate's `Remote`,
///   guideloom-publish's `Storage`) is [`Remote`](Self::Remote), whatever its source, except
///   for a cause of the transport class ([`of_remote`](Self::of_remote), from the typed
///   errors of its chain or [`cause_of`]): refused credentials or access are
///   [`PermissionDenied`](Self::PermissionDenied), a timeout [`Timeout`](Self::Timeout), an
///   interruption [`Interrupted`](Self::Interrupted). No connection, a server error,
///   throttling, a missing bucket or a refusal by code stay `Remote`; the cause tells which.
/// - An operating-system error (`std::io::Error`) is classified by its
///   [`std::io::ErrorKind`] (`From`).
///
/// The name ([`name`](Self::name), also its `Display`) is stable: match the kind, never the
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The object (shard, snapshot, annotation set, file, root) does not exist. Check the name;
    /// for a root where nothing was published yet, publish first. A missing *bucket* is
    /// [`Remote`](Self::Remote) (its cause says so), not this: it is not an empty root.
    NotFound,
    /// A record index, token range or byte range outside the sequence or object. Ask for an
    /// index below the length the error names.
    OutOfRange,
    /// An invalid argument, option, name, URI or configuration, found before any work. Fix the
    /// argument; retrying the same call fails the same way.
    InvalidArgument,
    /// The operation, root kind or file construct is not available in this build, on this
    /// store or in this version (a shard of a newer format version, a transposed ArrayRecord
    /// chunk, a cargo feature left out, a store without conditional writes). Use another build,
    /// store or operation; the message says which.
    Unsupported,
    /// Bytes are damaged or not what they claim to be: a shard's footer, index, metadata or a
    /// record failed its checks, an ArrayRecord chunk its hash, a control object (identity,
    /// log entry, manifest, pointer, catalog) is malformed, the snapshot log has a gap. Do not
    /// retry: restore the object from a good copy (`guideloom verify` names them all).
    Corrupt,
    /// An object differs from the reference that points at it: its size, hash, record count,
    /// footer or tail checksum, or (remote) entity tag. The object was replaced or damaged
    /// after it was published. Reopen the root's latest snapshot, or restore the object.
    VerificationFailed,
    /// A create-only write found the name taken by other content: another writer got there
    /// first, and nothing was overwritten. Write under another name (work id), or check who
    /// wrote it.
    Collision,
    /// The object changed under the operation: a compare-and-swap kept losing to concurrent
    /// writers, or a remote object was replaced after the reader first read it. Retry the
    /// whole operation (with a fresh reader) later.
    Conflict,
    /// The object is sound but not the one, or not the kind, asked for: a root of another
    /// dataset, annotations of another snapshot, a shard of another record format or element
    /// type, a snapshot that is not a token stream, a count that differs from the one it must
    /// equal. Fix what was asked for (or opt in, where the message says how).
    Mismatch,
    /// The root is read-only (an `http(s)://` root is served, not written). Write to the
    /// directory or bucket behind it.
    ReadOnly,
    /// An object or request is larger than a limit: a shard above the single-PUT limit, a
    /// control object or an ArrayRecord chunk above its cap, a shard above the staging budget,
    /// a table past its record limit. Write smaller shards, or raise the limit the message
    /// names.
    TooLarge,
    /// A local root or backend found something other than a regular file (or a real
    /// directory) where it reads or writes: a symbolic link, a FIFO, a device, a socket, a
    /// directory. Refused at once, without opening it. Replace the entry, or (links) opt in to
    /// following them.
    RefusedFile,
    /// The file system is full or over quota. Nothing was published under a final name: free
    /// space and retry the same request.
    DiskFull,
    /// The operating system, or the store, refused access: file permissions, refused or
    /// expired credentials, a policy denying the request. Fix the permissions or credentials.
    PermissionDenied,
    /// A request to a remote store failed: no connection (refused, unreachable, DNS), a reset,
    /// a server error, throttling, a protocol violation, a missing bucket or another refusal the
    /// server gave by code. [`cause_of`] tells which; `guideloom_io::Error::is_retryable` (and
    /// the retry policy) whether the same request may succeed later.
    Remote,
    /// A request or operation ran out of time (a request, connect or deadline bound). Retry
    /// later, or raise the timeout the message names.
    Timeout,
    /// The operation was interrupted (a signal, a cancelled task) before it finished. Retry it.
    Interrupted,
    /// An operating-system I/O error on a local file without a kind of its own, a backend that
    /// returned fewer bytes than asked for, or a closed reader. Check the file or backend the
    /// message names; retrying rarely helps.
    Io,
    /// A record could not be encoded in the format asked for (a value CBOR or JSON cannot
    /// carry, a failing `Serialize`). Fix the record, or write it in another format.
    Encode,
    /// A record's bytes (intact: their checksum passed) could not be decoded in the format
    /// asked for. Read it with the format it was written in.
    Decode,
    /// Anything else: a failed writer refusing further use, a loader worker that panicked or
    /// stopped, a runtime that could not start. The message says what.
    Other,
}

impl ErrorKind {
    /// Every kind, in declaration order (for tables and their tests).
    pub const ALL: [ErrorKind; 21] = [
        ErrorKind::NotFound,
        ErrorKind::OutOfRange,
        ErrorKind::InvalidArgument,
        ErrorKind::Unsupported,
        ErrorKind::Corrupt,
        ErrorKind::VerificationFailed,
        ErrorKind::Collision,
        ErrorKind::Conflict,
        ErrorKind::Mismatch,
        ErrorKind::ReadOnly,
        ErrorKind::TooLarge,
        ErrorKind::RefusedFile,
        ErrorKind::DiskFull,
        ErrorKind::PermissionDenied,
        ErrorKind::Remote,
        ErrorKind::Timeout,
        ErrorKind::Interrupted,
        ErrorKind::Io,
        ErrorKind::Encode,
        ErrorKind::Decode,
        ErrorKind::Other,
    ];

    /// The kind's stable snake_case name (`not_found`, `verification_failed`, ...): the
    /// command line's `--json` `kind`.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::OutOfRange => "out_of_range",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::VerificationFailed => "verification_failed",
            ErrorKind::Collision => "collision",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Mismatch => "mismatch",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::RefusedFile => "refused_file",
            ErrorKind::DiskFull => "disk_full",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Remote => "remote",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Io => "io",
            ErrorKind::Encode => "encode",
            ErrorKind::Decode => "decode",
            ErrorKind::Other => "other",
        }
    }

    /// The kind of a failed remote request whose cause is `cause` (see [`cause_of`]).
    pub const fn of_cause(cause: CauseKind) -> Self {
        match cause {
            CauseKind::AccessDenied | CauseKind::BadCredentials => ErrorKind::PermissionDenied,
            CauseKind::TimedOut => ErrorKind::Timeout,
            _ => ErrorKind::Remote,
        }
    }

    /// The kind of a remote request that failed with `source` (an error from a store client,
    /// a transport or a caller's backend): [`Remote`](Self::Remote), unless the typed errors in
    /// its chain (this crate's [`Error`], an OS error) or its cause ([`cause_of`]) tell one of
    /// the transport class: [`PermissionDenied`](Self::PermissionDenied) (refused credentials
    /// or access), [`Timeout`](Self::Timeout), [`Interrupted`](Self::Interrupted). A "not
    /// found" beneath a failed request (a missing bucket) is no missing object: `Remote`.
    pub fn of_remote(source: &(dyn std::error::Error + 'static)) -> Self {
        let told = if let Some(e) = source.downcast_ref::<Error>() {
            e.kind()
        } else if let Some(e) = source.downcast_ref::<std::io::Error>() {
            e.kind().into()
        } else {
            cause_of(source).map_or(ErrorKind::Remote, |c| ErrorKind::of_cause(c.kind))
        };
        match told {
            ErrorKind::PermissionDenied | ErrorKind::Timeout | ErrorKind::Interrupted => told,
            _ => ErrorKind::Remote,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<std::io::ErrorKind> for ErrorKind {
    /// An operating-system error's kind: not found, permission denied, a full disk, a timeout,
    /// an interruption, a name taken, a directory where a file was expected (or the reverse), a
    /// file too large, an unsupported operation and a network failure have their own; the rest
    /// (`EIO`, `EINVAL`, ...) is [`Io`](ErrorKind::Io).
    fn from(kind: std::io::ErrorKind) -> Self {
        use std::io::ErrorKind as K;
        match kind {
            K::NotFound => ErrorKind::NotFound,
            K::PermissionDenied | K::ReadOnlyFilesystem => ErrorKind::PermissionDenied,
            K::StorageFull | K::QuotaExceeded => ErrorKind::DiskFull,
            K::TimedOut => ErrorKind::Timeout,
            K::Interrupted => ErrorKind::Interrupted,
            K::AlreadyExists => ErrorKind::Collision,
            K::IsADirectory | K::NotADirectory => ErrorKind::RefusedFile,
            K::Unsupported => ErrorKind::Unsupported,
            K::FileTooLarge => ErrorKind::TooLarge,
            K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::HostUnreachable
            | K::NetworkUnreachable
            | K::NetworkDown
            | K::AddrNotAvailable
            | K::BrokenPipe => ErrorKind::Remote,
            _ => ErrorKind::Io,
        }
    }
}

impl Error {
    /// What went wrong, in one word (see [`ErrorKind`]): a [`Error::Remote`] by its cause, an
    /// [`Error::Io`] by its OS error's kind, a replaced object ([`Error::Changed`])
    /// [`Conflict`](ErrorKind::Conflict).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::ShortRead { .. } | Error::Closed { .. } => ErrorKind::Io,
            // A protocol violation of the backend.
            Error::LongRead { .. } => ErrorKind::Remote,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::OutOfRange { .. } => ErrorKind::OutOfRange,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::NotRegularFile { .. } => ErrorKind::RefusedFile,
            Error::Io { source, .. } => source.kind().into(),
            Error::Remote { source, .. } => source
                .as_deref()
                .map_or(ErrorKind::Remote, |s| ErrorKind::of_remote(s)),
            Error::Changed { .. } => ErrorKind::Conflict,
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::io;
    use std::time::Duration;

    use super::*;
    use crate::TimeoutKind;

    fn os(kind: io::ErrorKind) -> Error {
        Error::Io {
            location: "f".into(),
            source: io::Error::from(kind),
        }
    }

    fn remote(source: Option<crate::BoxError>) -> Error {
        Error::Remote {
            location: "http://h/a".into(),
            message: "GET failed".into(),
            retryable: false,
            source,
        }
    }

    #[test]
    fn names_are_unique_snake_case_and_displayed() {
        let names: HashSet<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        for kind in ErrorKind::ALL {
            let name = kind.name();
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            assert_eq!(kind.to_string(), name);
        }
        let mut sorted = ErrorKind::ALL;
        sorted.sort();
        assert_eq!(sorted, ErrorKind::ALL, "ALL is in declaration order");
    }

    #[test]
    fn every_io_variant_has_its_kind() {
        let loc = || "f".to_owned();
        let cases = [
            (
                Error::io("f", io::ErrorKind::NotFound.into()),
                ErrorKind::NotFound,
            ),
            (
                Error::ShortRead {
                    location: loc(),
                    offset: 0,
                    requested: 2,
                    got: 1,
                },
                ErrorKind::Io,
            ),
            (
                Error::LongRead {
                    location: loc(),
                    offset: 0,
                    requested: 2,
                    got: None,
                },
                ErrorKind::Remote,
            ),
            (
                Error::timeout("f", "GET", TimeoutKind::Client, None, Duration::ZERO, None),
                ErrorKind::Timeout,
            ),
            (
                Error::OutOfRange {
                    location: loc(),
                    offset: 9,
                    len: 1,
                    size: 3,
                },
                ErrorKind::OutOfRange,
            ),
            (
                Error::unsupported("B", "sync reader", "no"),
                ErrorKind::Unsupported,
            ),
            (Error::Closed { location: loc() }, ErrorKind::Io),
            (
                Error::NotRegularFile {
                    location: loc(),
                    kind: "a FIFO",
                },
                ErrorKind::RefusedFile,
            ),
            (os(io::ErrorKind::Other), ErrorKind::Io),
            (remote(None), ErrorKind::Remote),
            (
                Error::Changed {
                    location: loc(),
                    pinned: "\"a\"".into(),
                    found: None,
                },
                ErrorKind::Conflict,
            ),
            (
                Error::InvalidArgument {
                    message: "x".into(),
                },
                ErrorKind::InvalidArgument,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
        }
    }

    #[test]
    fn os_errors_are_classified_by_their_kind() {
        for (os_kind, kind) in [
            (io::ErrorKind::NotFound, ErrorKind::NotFound),
            (io::ErrorKind::PermissionDenied, ErrorKind::PermissionDenied),
            (io::ErrorKind::StorageFull, ErrorKind::DiskFull),
            (io::ErrorKind::QuotaExceeded, ErrorKind::DiskFull),
            (io::ErrorKind::TimedOut, ErrorKind::Timeout),
            (io::ErrorKind::Interrupted, ErrorKind::Interrupted),
            (io::ErrorKind::AlreadyExists, ErrorKind::Collision),
            (io::ErrorKind::IsADirectory, ErrorKind::RefusedFile),
            (io::ErrorKind::ConnectionReset, ErrorKind::Remote),
            (io::ErrorKind::InvalidInput, ErrorKind::Io),
            (io::ErrorKind::UnexpectedEof, ErrorKind::Io),
        ] {
            assert_eq!(os(os_kind).kind(), kind, "{os_kind:?}");
        }
        assert!(os(io::ErrorKind::NotFound).is_not_found());
    }

    /// A remote failure is `Remote` whatever its source says, except for a cause of the
    /// transport class: refused credentials, a timeout, an interruption.
    #[test]
    fn remote_failures_are_remote_unless_the_cause_is_credentials_or_time() {
        let boxed = |e: io::Error| Some(Box::new(e) as crate::BoxError);
        assert_eq!(
            remote(boxed(io::ErrorKind::TimedOut.into())).kind(),
            ErrorKind::Timeout
        );
        assert_eq!(
            remote(boxed(io::ErrorKind::PermissionDenied.into())).kind(),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            remote(boxed(io::ErrorKind::ConnectionRefused.into())).kind(),
            ErrorKind::Remote
        );
        // A backend's own "not found" beneath a failed request is no missing object.
        assert_eq!(
            remote(boxed(io::ErrorKind::NotFound.into())).kind(),
            ErrorKind::Remote
        );
        let not_an_io_error: crate::BoxError = "a backend's exception".into();
        assert_eq!(remote(Some(not_an_io_error)).kind(), ErrorKind::Remote);
        assert_eq!(
            ErrorKind::of_cause(CauseKind::BadCredentials),
            ErrorKind::PermissionDenied
        );
        assert_eq!(
            ErrorKind::of_cause(CauseKind::AccessDenied),
            ErrorKind::PermissionDenied
        );
        assert_eq!(ErrorKind::of_cause(CauseKind::TimedOut), ErrorKind::Timeout);
        for cause in [
            CauseKind::BucketNotFound,
            CauseKind::ConnectionRefused,
            CauseKind::Unreachable,
            CauseKind::Throttled,
            CauseKind::ServerError,
            CauseKind::Refused,
        ] {
            assert_eq!(ErrorKind::of_cause(cause), ErrorKind::Remote, "{cause:?}");
        }
    }
}
