//! The facade's error type: wraps the lower crates' errors (match through them) and adds the
//! dataset and loader failures.

pub use guideloom_io::ErrorKind;

/// A boxed error source, `Send + Sync` so errors cross threads.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with the facade's [`enum@Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the facade can fail with.
///
/// The lower crates' errors are wrapped unchanged ([`Error::Io`], [`Error::Format`],
/// [`Error::Publish`]): a dataset read fails with [`guideloom_publish::Error`] (a record past
/// the end is its `OutOfRange`, damaged shard bytes its `Shard` or `ArrayRecordShard`, a token
/// read of a snapshot that is not a stream its `NotAStream`), and arrives here as
/// `Error::Publish(..)`, variant kept. The facade's own variants are the loader's and the
/// publisher's. [`Error::kind`] says what went wrong in one word, whichever crate's error it
/// is: match the kind, or the lower crate's variant when a field is needed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A byte-range IO error (`guideloom-io`).
    #[error(transparent)]
    Io(#[from] guideloom_io::Error),
    /// A shard format or storage error (`guideloom-format`; the storages of
    /// `guideloom-storage` fail with it too).
    #[error(transparent)]
    Format(#[from] guideloom_format::Error),
    /// A dataset root or dataset read error (`guideloom-publish`), unchanged.
    #[error(transparent)]
    Publish(#[from] guideloom_publish::Error),
    /// A token window (plus its label token, if asked for) longer than the whole stream:
    /// not one window fits.
    #[error("a window of {span} tokens does not fit a stream of {tokens} tokens")]
    WindowTooLarge {
        /// Tokens one window reads (`window`, + 1 with next-token labels).
        span: u64,
        /// Tokens in the stream.
        tokens: u64,
    },
    /// A record could not be encoded (serde → CBOR) while writing a shard.
    #[error("cannot encode record {index} of shard {work_id}/{shard}: {source}")]
    Encode {
        /// The writer's work id.
        work_id: String,
        /// The shard number.
        shard: u64,
        /// The record's index inside the shard.
        index: u64,
        /// The encoder's error.
        #[source]
        source: BoxError,
    },
    /// A record source (the loader's [`RecordSource`](crate::RecordSource)) failed
    /// to fetch records.
    #[error("cannot fetch records from {source_name}: {source}")]
    Fetch {
        /// The source's name.
        source_name: String,
        /// What went wrong.
        #[source]
        source: BoxError,
    },
    /// A loader worker panicked while fetching or decoding a batch; the panic was caught.
    #[error("loader worker panicked on batch {batch}: {message}")]
    WorkerPanic {
        /// The rank-local batch number being built.
        batch: u64,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The loader's workers stopped before delivering every batch (they cannot run).
    #[error("loader workers stopped before batch {batch} was delivered")]
    WorkersGone {
        /// The batch that was expected next.
        batch: u64,
    },
    /// A resume state does not fit this loader (another seed, or a position past the end).
    #[error("cannot resume: {reason}")]
    Resume {
        /// What does not match.
        reason: String,
    },
    /// Invalid options (zero batch size, rank outside the world...).
    #[error("invalid options: {reason}")]
    InvalidOptions {
        /// What is wrong.
        reason: String,
    },
    /// The operation or root kind is not available (in this build, or at all yet).
    #[error("unsupported: {what}")]
    Unsupported {
        /// What, and what to do instead.
        what: String,
    },
}

impl Error {
    /// An [`Error::Fetch`] from any error.
    pub fn fetch(source_name: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Fetch {
            source_name: source_name.into(),
            source: source.into(),
        }
    }

    /// Record (or window) `index` of `len` asked of `what`: the publish crate's
    /// `OutOfRange`, the one variant for an index past the end.
    pub(crate) fn out_of_range(index: u64, len: u64, what: impl Into<String>) -> Self {
        Error::Publish(guideloom_publish::Error::OutOfRange {
            index,
            len,
            what: what.into(),
        })
    }

    /// Record `index` could not be decoded: the publish crate's `Decode`, as for a
    /// dataset's own typed reads.
    pub(crate) fn decode(index: u64, source: BoxError) -> Self {
        Error::Publish(guideloom_publish::Error::Decode { index, source })
    }

    /// A thread or runtime could not start: the publish crate's `Runtime`.
    pub(crate) fn runtime(source: std::io::Error) -> Self {
        Error::Publish(guideloom_publish::Error::Runtime { source })
    }

    /// What went wrong, in one word ([`ErrorKind`], whose docs give the rule). The lower
    /// crates' errors ([`Error::Io`], [`Error::Format`], [`Error::Publish`]) have their own kind, and so does a record source's failure
    /// ([`Error::Fetch`]) when it is one of the workspace's errors or an OS error; the
    /// facade's own variants have theirs (a token window longer than the stream is
    /// [`InvalidArgument`](ErrorKind::InvalidArgument), a loader worker that panicked or
    /// stopped [`Other`](ErrorKind::Other)).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io(e) => e.kind(),
            Error::Format(e) => e.kind(),
            Error::Publish(e) => e.kind(),
            Error::WindowTooLarge { .. } | Error::Resume { .. } | Error::InvalidOptions { .. } => {
                ErrorKind::InvalidArgument
            }
            Error::Encode { .. } => ErrorKind::Encode,
            Error::Fetch { source, .. } => kind_of(&**source).unwrap_or(ErrorKind::Other),
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::WorkerPanic { .. } | Error::WorkersGone { .. } => ErrorKind::Other,
        }
    }

    /// `true` when the object or record does not exist: kind [`ErrorKind::NotFound`], or a
    /// record index or token range past the end (kind [`ErrorKind::OutOfRange`]).
    pub fn is_not_found(&self) -> bool {
        matches!(self.kind(), ErrorKind::NotFound | ErrorKind::OutOfRange)
    }
}

/// The kind of `e` when it is one of the workspace's errors (or an OS error).
fn kind_of(e: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    if let Some(e) = e.downcast_ref::<Error>() {
        return Some(e.kind());
    }
    if let Some(e) = e.downcast_ref::<guideloom_publish::Error>() {
        return Some(e.kind());
    }
    if let Some(e) = e.downcast_ref::<guideloom_format::Error>() {
        return Some(e.kind());
    }
    if let Some(e) = e.downcast_ref::<guideloom_arrayrecord::Error>() {
        return Some(e.kind());
    }
    if let Some(e) = e.downcast_ref::<guideloom_io::Error>() {
        return Some(e.kind());
    }
    e.downcast_ref::<std::io::Error>().map(|e| e.kind().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> String {
        text.to_owned()
    }

    /// One representative of every facade variant, and the kind it has.
    #[test]
    fn every_variant_has_its_kind() {
        let cases = [
            (
                Error::Io(guideloom_io::Error::Closed { location: s("f") }),
                ErrorKind::Io,
            ),
            (
                Error::Format(guideloom_format::Error::IndexOutOfRange { index: 1, len: 1 }),
                ErrorKind::OutOfRange,
            ),
            (
                Error::Publish(guideloom_publish::Error::ReadOnlyRoot {
                    root: s("http://h"),
                }),
                ErrorKind::ReadOnly,
            ),
            (
                Error::WindowTooLarge { span: 9, tokens: 3 },
                ErrorKind::InvalidArgument,
            ),
            (
                Error::Encode {
                    work_id: s("w"),
                    shard: 0,
                    index: 0,
                    source: "nan".into(),
                },
                ErrorKind::Encode,
            ),
            (Error::fetch("src", "opaque"), ErrorKind::Other),
            (
                Error::WorkerPanic {
                    batch: 0,
                    message: s("boom"),
                },
                ErrorKind::Other,
            ),
            (Error::WorkersGone { batch: 0 }, ErrorKind::Other),
            (
                Error::Resume { reason: s("seed") },
                ErrorKind::InvalidArgument,
            ),
            (
                Error::InvalidOptions {
                    reason: s("batch 0"),
                },
                ErrorKind::InvalidArgument,
            ),
            (Error::Unsupported { what: s("x") }, ErrorKind::Unsupported),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
        }
    }

    /// A record source's failure has the kind of the workspace error (or OS error) it is.
    #[test]
    fn a_fetch_error_has_its_sources_kind() {
        let timeout = guideloom_io::Error::timeout(
            "k",
            "GET",
            guideloom_io::TimeoutKind::Client,
            None,
            std::time::Duration::ZERO,
            None,
        );
        assert_eq!(Error::fetch("src", timeout).kind(), ErrorKind::Timeout);
        let inner = Error::WindowTooLarge { span: 9, tokens: 3 };
        assert_eq!(
            Error::fetch("src", inner).kind(),
            ErrorKind::InvalidArgument
        );
        let os = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(Error::fetch("src", os).kind(), ErrorKind::PermissionDenied);
        // The publish crate's errors arrive wrapped, variant and kind kept.
        let publish = guideloom_publish::Error::OutOfRange {
            index: 1,
            len: 1,
            what: s("snapshot s"),
        };
        let facade = Error::from(publish);
        assert!(matches!(
            facade,
            Error::Publish(guideloom_publish::Error::OutOfRange { index: 1, .. })
        ));
        assert_eq!(facade.kind(), ErrorKind::OutOfRange);
        assert!(facade.is_not_found());
    }
}
