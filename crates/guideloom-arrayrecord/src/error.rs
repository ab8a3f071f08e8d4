//! The crate's one error type.

use guideloom_io::ErrorKind;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong reading or writing an ArrayRecord file.
///
/// Every variant about a file names it (`location`, as its reader reports it) and, where it
/// applies, the byte offset in the file the problem was found at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes do not form a valid ArrayRecord file: a hash mismatch, a field out of range,
    /// a truncated chunk, inconsistent footer entries.
    #[error("{location}: corrupt ArrayRecord file at byte {offset}: {what}")]
    Corrupt {
        /// The file, as its reader names it.
        location: String,
        /// Where in the file the problem was found.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A valid Riegeli/ArrayRecord construct this crate does not implement, such as a
    /// transposed chunk (`'t'`, written by the `transpose` option) or a footer version other
    /// than 1.
    #[error("{location}: unsupported at byte {offset}: {what}")]
    Unsupported {
        /// The file, as its reader names it.
        location: String,
        /// Where in the file the construct begins.
        offset: u64,
        /// What is not supported.
        what: String,
    },
    /// A size read from the file exceeds a limit of [`ArrayRecordReadOptions`](crate::ArrayRecordReadOptions); the
    /// reader refuses it before allocating.
    #[error(
        "{location}: {what} of {size} bytes at byte {offset} exceeds the limit of {limit} bytes"
    )]
    TooLarge {
        /// The file, as its reader names it.
        location: String,
        /// Where in the file the size was found.
        offset: u64,
        /// What is too large.
        what: &'static str,
        /// The size the file claims.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
    /// A record index at or past the number of records.
    #[error("{location}: record {index} is out of range (the file has {len} records)")]
    IndexOutOfRange {
        /// The file, as its reader names it.
        location: String,
        /// The index asked for.
        index: u64,
        /// The number of records in the file.
        len: u64,
    },
    /// A compressed buffer the codec refused (zstd, Brotli or Snappy), or a compressor that
    /// failed while writing.
    #[error("{location}: {codec} {op} failed at byte {offset}")]
    Codec {
        /// The file (or the writer's name).
        location: String,
        /// The chunk the buffer belongs to.
        offset: u64,
        /// `zstd`, `brotli` or `snappy`.
        codec: &'static str,
        /// `decompression` or `compression`.
        op: &'static str,
        /// What the codec reported.
        #[source]
        source: std::io::Error,
    },
    /// An invalid writer option string (see [`ArrayRecordWriterOptions`](crate::ArrayRecordWriterOptions)).
    #[error("invalid ArrayRecord writer options `{options}`: {what}")]
    Options {
        /// The option string given.
        options: String,
        /// What is wrong with it.
        what: String,
    },
    /// Reading through the byte-range IO layer failed.
    #[error(transparent)]
    Io {
        /// The IO error, which names the object and range.
        #[from]
        source: guideloom_io::Error,
    },
    /// Writing to the destination failed.
    #[error("{location}: writing failed at byte {offset}")]
    Write {
        /// The writer's name (its path, when created from one).
        location: String,
        /// The file position the write started at.
        offset: u64,
        /// The destination's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// What went wrong, in one word ([`ErrorKind`], whose docs give the rule): damaged bytes
    /// ([`Error::Corrupt`], a compressed buffer the codec refused) are
    /// [`Corrupt`](ErrorKind::Corrupt), a size past a limit [`TooLarge`](ErrorKind::TooLarge),
    /// bad writer options [`InvalidArgument`](ErrorKind::InvalidArgument); the IO layer's error
    /// and a destination's OS error keep their own kind. A compressor that failed while
    /// writing is [`Other`](ErrorKind::Other).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Codec { op, .. } if *op == "compression" => ErrorKind::Other,
            Error::Codec { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::TooLarge { .. } => ErrorKind::TooLarge,
            Error::IndexOutOfRange { .. } => ErrorKind::OutOfRange,
            Error::Options { .. } => ErrorKind::InvalidArgument,
            Error::Io { source } => source.kind(),
            Error::Write { source, .. } => source.kind().into(),
        }
    }

    /// `true` when the file's bytes are damaged: [`Error::Corrupt`] (a hash, a field, a
    /// truncated chunk) or [`Error::Codec`] (a compressed buffer the codec refused), as
    /// opposed to transport failures, limits and unsupported constructs.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. } | Error::Codec { .. })
    }

    /// `true` when the error means "this object does not exist" (from the backend).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { .. }) && self.kind() == ErrorKind::NotFound
    }

    pub(crate) fn corrupt(location: &str, offset: u64, what: impl Into<String>) -> Error {
        Error::Corrupt {
            location: location.to_owned(),
            offset,
            what: what.into(),
        }
    }

    pub(crate) fn unsupported(location: &str, offset: u64, what: impl Into<String>) -> Error {
        Error::Unsupported {
            location: location.to_owned(),
            offset,
            what: what.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One representative of every variant, and the kind it has.
    #[test]
    fn every_variant_has_its_kind() {
        let codec = |op| Error::Codec {
            location: "a".into(),
            offset: 0,
            codec: "zstd",
            op,
            source: std::io::Error::other("bad frame"),
        };
        let cases = [
            (Error::corrupt("a", 0, "hash"), ErrorKind::Corrupt),
            (codec("decompression"), ErrorKind::Corrupt),
            (codec("compression"), ErrorKind::Other),
            (
                Error::unsupported("a", 0, "transposed chunk"),
                ErrorKind::Unsupported,
            ),
            (
                Error::TooLarge {
                    location: "a".into(),
                    offset: 0,
                    what: "chunk",
                    size: 9,
                    limit: 1,
                },
                ErrorKind::TooLarge,
            ),
            (
                Error::IndexOutOfRange {
                    location: "a".into(),
                    index: 3,
                    len: 3,
                },
                ErrorKind::OutOfRange,
            ),
            (
                Error::Options {
                    options: "x".into(),
                    what: "unknown".into(),
                },
                ErrorKind::InvalidArgument,
            ),
            (
                Error::Io {
                    source: guideloom_io::Error::io("a", std::io::ErrorKind::NotFound.into()),
                },
                ErrorKind::NotFound,
            ),
            (
                Error::Write {
                    location: "a".into(),
                    offset: 0,
                    source: std::io::ErrorKind::StorageFull.into(),
                },
                ErrorKind::DiskFull,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
        }
        // The predicates agree with the kinds.
        assert!(codec("decompression").is_corrupt());
        assert!(
            Error::Io {
                source: guideloom_io::Error::io("a", std::io::ErrorKind::NotFound.into())
            }
            .is_not_found()
        );
    }
}
