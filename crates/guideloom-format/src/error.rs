//! The crate's one error type.

use std::path::PathBuf;

use guideloom_io::{BoxError, ErrorKind};

/// `Result` with this crate's [`enum@Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What exactly is wrong with a corrupt shard (the `what` of [`Error::Corrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// The file is smaller than a header plus a footer.
    #[error("file of {size} bytes is too small to be a shard")]
    TooSmall {
        /// The file's size.
        size: u64,
    },
    /// The footer's magic is not `GLMSHARD`.
    #[error("bad magic in footer")]
    BadFooterMagic,
    /// The header's magic or major version does not match the footer.
    #[error("bad header (magic or version differs from the footer)")]
    BadHeader,
    /// The footer's own checksum does not match.
    #[error("footer checksum mismatch")]
    FooterChecksum,
    /// The footer describes sections that do not tile the file.
    #[error("inconsistent layout: {detail}")]
    Layout {
        /// Which check failed.
        detail: String,
    },
    /// The record count exceeds [`MAX_RECORDS`](crate::spec::MAX_RECORDS).
    #[error("record count {count} exceeds the limit")]
    TooManyRecords {
        /// The count found in the footer.
        count: u64,
    },
    /// The metadata length exceeds [`MAX_METADATA_LEN`](crate::spec::MAX_METADATA_LEN).
    #[error("metadata length {len} exceeds the limit")]
    MetadataTooLarge {
        /// The length found in the footer.
        len: u64,
    },
    /// The index checksum does not match.
    #[error("index checksum mismatch")]
    IndexChecksum,
    /// The metadata checksum does not match.
    #[error("metadata checksum mismatch")]
    MetadataChecksum,
    /// An index entry is out of order or outside the data region.
    #[error("index entry {index} has an invalid end offset {end}")]
    IndexOffset {
        /// The local record number.
        index: u64,
        /// The offending end offset.
        end: u64,
    },
    /// The metadata is not valid CBOR of the expected shape, or contradicts the footer.
    #[error("bad metadata: {detail}")]
    Metadata {
        /// What is wrong.
        detail: String,
    },
    /// A record's payload does not match its checksum.
    #[error("checksum mismatch in record {index}")]
    RecordChecksum {
        /// The local record number.
        index: u64,
    },
    /// Two shards that must agree (a stream shard and its metadata shard) do not.
    #[error("inconsistent with its companion shard: {detail}")]
    Companion {
        /// What differs.
        detail: String,
    },
}

/// Everything that can go wrong while writing or reading shards and storages.
///
/// Hostile or damaged input always gives one of these, never a panic. [`Error::kind`] says
/// what went wrong in one word.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The shard is damaged or not a shard.
    #[error("corrupt shard {shard}: {what}")]
    Corrupt {
        /// The shard, as its backend displays it.
        shard: String,
        /// What is wrong.
        what: Corruption,
    },
    /// The shard was written by an incompatible (newer major) version of the format.
    #[error(
        "shard {shard} has format version {major}.{minor}; this reader supports major {}",
        crate::spec::MAJOR
    )]
    Unsupported {
        /// The shard.
        shard: String,
        /// Its major version.
        major: u16,
        /// Its minor version.
        minor: u16,
    },
    /// The shard holds another record format, storage kind or element type than asked for.
    #[error("shard {shard} holds {found}, expected {expected}")]
    FormatMismatch {
        /// The shard.
        shard: String,
        /// What the caller asked for (e.g. `cbor`, `stream<u32>`).
        expected: String,
        /// What the shard holds.
        found: String,
    },
    /// A record index past the end.
    #[error("record index {index} out of range (length {len})")]
    IndexOutOfRange {
        /// The index asked for.
        index: u64,
        /// The number of records.
        len: u64,
    },
    /// A stream slice past the end.
    #[error("slice {offset}+{len} out of range (stream length {total})")]
    SliceOutOfRange {
        /// First element asked for.
        offset: u64,
        /// Number of elements asked for.
        len: u64,
        /// Elements in the stream.
        total: u64,
    },
    /// `append(index, ..)` was called with an index other than the next one.
    #[error("non-dense append: expected index {expected}, got {got}")]
    NonDenseIndex {
        /// The index the writer expected.
        expected: u64,
        /// The index it was given.
        got: u64,
    },
    /// A directory or file required to exist does not.
    #[error("not found: {location}")]
    NotFound {
        /// What is missing.
        location: String,
    },
    /// A shard already exists at the name a writer was about to publish.
    #[error("shard already exists: {}", path.display())]
    AlreadyExists {
        /// The final name that is taken.
        path: PathBuf,
    },
    /// A record could not be encoded by its format.
    #[error("cannot encode record {index} with format {format}")]
    Encode {
        /// The record's index (global for storages, local for shard writers).
        index: u64,
        /// The format's name.
        format: String,
        /// The format's error.
        #[source]
        source: BoxError,
    },
    /// A record does not match the schema its shard declares (the field and what is wrong).
    #[error("record {index} written to {}: {source}", label.display())]
    SchemaMismatch {
        /// The shard being written.
        label: PathBuf,
        /// The record's local index in that shard.
        index: u64,
        /// The field and what is wrong.
        #[source]
        source: crate::schema::Mismatch,
    },
    /// A record's bytes could not be decoded by its format.
    #[error("cannot decode record {index} of {shard} with format {format}")]
    Decode {
        /// The shard.
        shard: String,
        /// The local record index.
        index: u64,
        /// The format's name.
        format: String,
        /// The format's error.
        #[source]
        source: BoxError,
    },
    /// A local file-system operation of a writer failed.
    #[error("cannot {operation} {}: {source}", path.display())]
    Write {
        /// What was being done (`"create temp file in"`, `"fsync"`, ...).
        operation: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A writer failed earlier and refuses further use (its unfinished shard was discarded).
    #[error("writer for {} failed earlier and cannot be used", dir.display())]
    WriterFailed {
        /// The writer's directory.
        dir: PathBuf,
    },
    /// An invalid argument or option.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },
    /// An I/O error from the read backend (names its location).
    #[error(transparent)]
    Io(#[from] guideloom_io::Error),
    /// The record counts of a [`ShardTable`](crate::ShardTable) add up to more than
    /// [`ShardTable::MAX_LEN`](crate::ShardTable::MAX_LEN).
    #[error("the records through shard {shard} exceed the table limit of {limit}")]
    TableOverflow {
        /// The first shard (position in the table) past the limit.
        shard: usize,
        /// The limit.
        limit: u64,
    },
}

impl Error {
    pub(crate) fn corrupt(shard: &str, what: Corruption) -> Self {
        Error::Corrupt {
            shard: shard.to_owned(),
            what,
        }
    }

    pub(crate) fn layout(shard: &str, detail: impl Into<String>) -> Self {
        Self::corrupt(
            shard,
            Corruption::Layout {
                detail: detail.into(),
            },
        )
    }

    pub(crate) fn metadata(shard: &str, detail: impl Into<String>) -> Self {
        Self::corrupt(
            shard,
            Corruption::Metadata {
                detail: detail.into(),
            },
        )
    }

    pub(crate) fn write(
        operation: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Write {
            operation,
            path: path.into(),
            source,
        }
    }

    /// What went wrong, in one word ([`ErrorKind`], whose docs give the rule): a backend's
    /// error ([`Error::Io`]) and a writer's OS error ([`Error::Write`]) by their own kind, every
    /// other variant by what it says (a shard of a newer format version is
    /// [`Unsupported`](ErrorKind::Unsupported), not corrupt).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::FormatMismatch { .. } | Error::SchemaMismatch { .. } => ErrorKind::Mismatch,
            Error::IndexOutOfRange { .. } | Error::SliceOutOfRange { .. } => ErrorKind::OutOfRange,
            Error::NonDenseIndex { .. } | Error::InvalidArgument { .. } => {
                ErrorKind::InvalidArgument
            }
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::Collision,
            Error::Encode { .. } => ErrorKind::Encode,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Write { source, .. } => source.kind().into(),
            Error::WriterFailed { .. } => ErrorKind::Other,
            Error::Io(e) => e.kind(),
            Error::TableOverflow { .. } => ErrorKind::TooLarge,
        }
    }

    /// `true` for [`Error::Corrupt`] (the only variant of kind [`ErrorKind::Corrupt`]).
    pub fn is_corrupt(&self) -> bool {
        self.kind() == ErrorKind::Corrupt
    }

    /// `true` when the error means "this object does not exist" (from the backend or ours):
    /// kind [`ErrorKind::NotFound`].
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(text: &str) -> BoxError {
        text.into()
    }

    /// One representative of every variant, and the kind it has.
    #[test]
    fn every_variant_has_its_kind() {
        let os = |kind: std::io::ErrorKind| Error::write("fsync", "d/x.glm", kind.into());
        let cases = [
            (Error::layout("s.glm", "gap"), ErrorKind::Corrupt),
            (
                Error::Unsupported {
                    shard: "s".into(),
                    major: 9,
                    minor: 0,
                },
                ErrorKind::Unsupported,
            ),
            (
                Error::FormatMismatch {
                    shard: "s".into(),
                    expected: "cbor".into(),
                    found: "raw".into(),
                },
                ErrorKind::Mismatch,
            ),
            (
                Error::IndexOutOfRange { index: 5, len: 5 },
                ErrorKind::OutOfRange,
            ),
            (
                Error::SliceOutOfRange {
                    offset: 1,
                    len: 9,
                    total: 3,
                },
                ErrorKind::OutOfRange,
            ),
            (
                Error::NonDenseIndex {
                    expected: 1,
                    got: 5,
                },
                ErrorKind::InvalidArgument,
            ),
            (
                Error::NotFound {
                    location: "d".into(),
                },
                ErrorKind::NotFound,
            ),
            (
                Error::AlreadyExists {
                    path: "d/x.glm".into(),
                },
                ErrorKind::Collision,
            ),
            (
                Error::Encode {
                    index: 0,
                    format: "cbor".into(),
                    source: boxed("nan"),
                },
                ErrorKind::Encode,
            ),
            (
                Error::Decode {
                    shard: "s".into(),
                    index: 0,
                    format: "cbor".into(),
                    source: boxed("eof"),
                },
                ErrorKind::Decode,
            ),
            (os(std::io::ErrorKind::StorageFull), ErrorKind::DiskFull),
            (
                os(std::io::ErrorKind::PermissionDenied),
                ErrorKind::PermissionDenied,
            ),
            (os(std::io::ErrorKind::Other), ErrorKind::Io),
            (Error::WriterFailed { dir: "d".into() }, ErrorKind::Other),
            (
                Error::InvalidArgument {
                    message: "x".into(),
                },
                ErrorKind::InvalidArgument,
            ),
            (
                Error::TableOverflow { shard: 3, limit: 9 },
                ErrorKind::TooLarge,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
        }
    }

    /// The backend's error beneath [`Error::Io`] keeps its kind: a wrapper that only says
    /// where takes its source's kind.
    #[test]
    fn a_backend_error_keeps_its_kind() {
        for (io, kind) in [
            (
                guideloom_io::Error::io("s", std::io::ErrorKind::NotFound.into()),
                ErrorKind::NotFound,
            ),
            (
                guideloom_io::Error::timeout(
                    "s",
                    "GET",
                    guideloom_io::TimeoutKind::Client,
                    None,
                    std::time::Duration::ZERO,
                    None,
                ),
                ErrorKind::Timeout,
            ),
            (
                guideloom_io::Error::OutOfRange {
                    location: "s".into(),
                    offset: 9,
                    len: 1,
                    size: 3,
                },
                ErrorKind::OutOfRange,
            ),
        ] {
            let error = Error::Io(io);
            assert_eq!(error.kind(), kind, "{error:?}");
        }
        assert!(
            Error::Io(guideloom_io::Error::io(
                "s",
                std::io::ErrorKind::NotFound.into()
            ))
            .is_not_found()
        );
        assert!(Error::layout("s", "gap").is_corrupt());
    }
}
