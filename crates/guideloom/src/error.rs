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
/// [`Error::Publish`]) so callers match on their variants, e.g.
/// `Error::Publish(publish::Error::NotFound { .. })`, with exceptions that
/// make the everyday failures one variant each however they arise: a record index past the
/// end is always [`Error::OutOfRange`], a token read of a snapshot that is not a stream
/// always [`Error::NotAStream`], and damaged shard bytes (footer, index, metadata or
/// a record) are always [`Error::Shard`] ([`Error::ArrayRecordShard`] for an ArrayRecord
/// shard). [`Error::kind`] says what went wrong in one word, whichever crate's error it is.
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
    /// A dataset root error (`guideloom-publish`; its `Shard`, `ArrayRecordShard` and
    /// `OutOfRange` variants arrive as [`Error::Shard`], [`Error::ArrayRecordShard`] and
    /// [`Error::OutOfRange`]).
    #[error(transparent)]
    Publish(guideloom_publish::Error),
    /// A shard of the dataset is damaged or not a shard: its footer, index, metadata or a
    /// record failed the format crate's checks (whichever part it was, this variant).
    #[error("{}", named_once(format_args!("shard {key}"), .key, .source))]
    Shard {
        /// The shard's key in the root.
        key: String,
        /// What the format crate found.
        #[source]
        source: Box<guideloom_format::Error>,
    },
    /// An ArrayRecord shard of the dataset is damaged or not an ArrayRecord file: its
    /// postscript, footer or a chunk failed the arrayrecord crate's checks (hashes, codec,
    /// layout), or the transport beneath failed. The sibling of [`Error::Shard`].
    #[error("{}", named_once(format_args!("ArrayRecord shard {key}"), .key, .source))]
    ArrayRecordShard {
        /// The shard's key in the root.
        key: String,
        /// What the arrayrecord crate found.
        #[source]
        source: Box<guideloom_arrayrecord::Error>,
    },
    /// A record index outside the dataset.
    #[error("record {index} is out of range for a dataset of {len} records")]
    OutOfRange {
        /// The index asked for.
        index: u64,
        /// The number of records.
        len: u64,
    },
    /// A token read of a dataset that is not one token stream (a shard of records, shards of
    /// different element types, no shards). See [`Dataset::tokens`](crate::Dataset::tokens).
    #[error("snapshot {snapshot} is not a token stream: {reason}")]
    NotAStream {
        /// The snapshot's id.
        snapshot: String,
        /// Why (naming the first shard at fault).
        reason: String,
    },
    /// Tokens read as another element type than the stream's (`u32` from a `u16` stream).
    #[error("the stream holds {stream} elements, read as {requested}")]
    ElementMismatch {
        /// The stream's element type, from its manifest.
        stream: String,
        /// The element type asked for.
        requested: &'static str,
    },
    /// A token range outside the stream.
    #[error("tokens {start}..{end} are out of range for a stream of {len} tokens")]
    TokensOutOfRange {
        /// The range's start.
        start: u64,
        /// The range's end (exclusive).
        end: u64,
        /// Tokens in the stream.
        len: u64,
    },
    /// A token window (plus its label token, if asked for) longer than the whole stream:
    /// not one window fits.
    #[error("a window of {span} tokens does not fit a stream of {tokens} tokens")]
    WindowTooLarge {
        /// Tokens one window reads (`window`, + 1 with next-token labels).
        span: u64,
        /// Tokens in the stream.
        tokens: u64,
    },
    /// A record's bytes could not be decoded (serde, or the loader's decode function).
    #[error("cannot decode record {index}: {source}")]
    Decode {
        /// The record index.
        index: u64,
        /// The decoder's error.
        #[source]
        source: BoxError,
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
    /// The internal tokio runtime of a synchronous [`Dataset`](crate::Dataset) could not start.
    #[error("cannot start the dataset runtime: {source}")]
    Runtime {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl From<guideloom_publish::Error> for Error {
    fn from(e: guideloom_publish::Error) -> Self {
        match e {
            guideloom_publish::Error::Shard { key, source } => Error::Shard { key, source },
            guideloom_publish::Error::ArrayRecordShard { key, source } => {
                Error::ArrayRecordShard { key, source }
            }
            guideloom_publish::Error::OutOfRange { index, len, .. } => {
                Error::OutOfRange { index, len }
            }
            guideloom_publish::Error::NotAStream { snapshot, reason } => {
                Error::NotAStream { snapshot, reason }
            }
            guideloom_publish::Error::ElementMismatch { stream, requested } => {
                Error::ElementMismatch { stream, requested }
            }
            guideloom_publish::Error::TokensOutOfRange { start, end, len } => {
                Error::TokensOutOfRange { start, end, len }
            }
            guideloom_publish::Error::Decode { index, source } => Error::Decode { index, source },
            guideloom_publish::Error::Runtime { source } => Error::Runtime { source },
            other => Error::Publish(other),
        }
    }
}

impl Error {
    /// An [`Error::Fetch`] from any error.
    pub fn fetch(source_name: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Fetch {
            source_name: source_name.into(),
            source: source.into(),
        }
    }

    /// What went wrong, in one word ([`ErrorKind`], whose docs give the rule). The lower
    /// crates' errors ([`Error::Io`], [`Error::Format`], [`Error::Publish`], [`Error::Shard`],
    /// [`Error::ArrayRecordShard`]) have their own kind, and so does a record source's failure
    /// ([`Error::Fetch`]) when it is one of the workspace's errors or an OS error; the
    /// facade's own variants have theirs (a token window longer than the stream is
    /// [`InvalidArgument`](ErrorKind::InvalidArgument), a loader worker that panicked or
    /// stopped [`Other`](ErrorKind::Other)).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io(e) => e.kind(),
            Error::Format(e) => e.kind(),
            Error::Publish(e) => e.kind(),
            Error::Shard { source, .. } => source.kind(),
            Error::ArrayRecordShard { source, .. } => source.kind(),
            Error::OutOfRange { .. } | Error::TokensOutOfRange { .. } => ErrorKind::OutOfRange,
            Error::NotAStream { .. } | Error::ElementMismatch { .. } => ErrorKind::Mismatch,
            Error::WindowTooLarge { .. } | Error::Resume { .. } | Error::InvalidOptions { .. } => {
                ErrorKind::InvalidArgument
            }
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Encode { .. } => ErrorKind::Encode,
            Error::Fetch { source, .. } => kind_of(&**source).unwrap_or(ErrorKind::Other),
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::WorkerPanic { .. } | Error::WorkersGone { .. } | Error::Runtime { .. } => {
                ErrorKind::Other
            }
        }
    }

    /// `true` when the object or record does not exist: kind [`ErrorKind::NotFound`], or a
    /// record index past the end ([`Error::OutOfRange`]).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::OutOfRange { .. }) || self.kind() == ErrorKind::NotFound
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

/// `context: source`, or only `source` when it already names `key` (the format and
/// arrayrecord crates name the object they read by its full location): each name once.
fn named_once(
    context: std::fmt::Arguments<'_>,
    key: &str,
    source: &dyn std::error::Error,
) -> String {
    let text = source.to_string();
    if guideloom_io::mentions(&text, key) {
        text
    } else {
        format!("{context}: {text}")
    }
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
        let corrupt = guideloom_format::Error::Corrupt {
            shard: s("k"),
            what: guideloom_format::Corruption::IndexChecksum,
        };
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
                Error::Shard {
                    key: s("k"),
                    source: Box::new(corrupt),
                },
                ErrorKind::Corrupt,
            ),
            (
                Error::ArrayRecordShard {
                    key: s("k"),
                    source: Box::new(guideloom_arrayrecord::Error::Unsupported {
                        location: s("k"),
                        offset: 0,
                        what: s("transposed chunk"),
                    }),
                },
                ErrorKind::Unsupported,
            ),
            (
                Error::OutOfRange { index: 5, len: 5 },
                ErrorKind::OutOfRange,
            ),
            (
                Error::NotAStream {
                    snapshot: s("s"),
                    reason: s("records"),
                },
                ErrorKind::Mismatch,
            ),
            (
                Error::ElementMismatch {
                    stream: s("u16"),
                    requested: "u32",
                },
                ErrorKind::Mismatch,
            ),
            (
                Error::TokensOutOfRange {
                    start: 0,
                    end: 9,
                    len: 3,
                },
                ErrorKind::OutOfRange,
            ),
            (
                Error::WindowTooLarge { span: 9, tokens: 3 },
                ErrorKind::InvalidArgument,
            ),
            (
                Error::Decode {
                    index: 0,
                    source: "eof".into(),
                },
                ErrorKind::Decode,
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
            (
                Error::Runtime {
                    source: std::io::Error::other("no threads"),
                },
                ErrorKind::Other,
            ),
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
        let inner = Error::OutOfRange { index: 3, len: 3 };
        assert_eq!(Error::fetch("src", inner).kind(), ErrorKind::OutOfRange);
        let os = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(Error::fetch("src", os).kind(), ErrorKind::PermissionDenied);
        // The publish crate's shard errors arrive as the facade's own variants, kinds kept.
        let publish = guideloom_publish::Error::OutOfRange {
            index: 1,
            len: 1,
            what: s("snapshot s"),
        };
        let facade = Error::from(publish);
        assert!(matches!(facade, Error::OutOfRange { .. }));
        assert_eq!(facade.kind(), ErrorKind::OutOfRange);
        assert!(facade.is_not_found());
    }
}
