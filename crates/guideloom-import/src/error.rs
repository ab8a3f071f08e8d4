//! The importers' and exporters' error: one kind per cause, each with the input it names.

use std::path::PathBuf;

/// What went wrong reading an input or writing an output. Every variant names the file (and
/// where it helps, the member, row or line) so that a caller can report it and match the kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input could not be read (or the output written).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The input is damaged or is not what its format says (a bad index, a truncated
    /// sample, a count that does not add up, a size past a limit).
    #[error("{path}: corrupt: {detail}")]
    Corrupt {
        /// The file (for a member of an archive, `archive.tar/member`).
        path: PathBuf,
        /// What is wrong, naming the field, row or member.
        detail: String,
    },
    /// The input uses something this importer does not support (an encoding, a type, a
    /// compression), named.
    #[error("{path}: unsupported: {detail}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported.
        detail: String,
    },
    /// An Arrow operation failed (a column that does not match its schema).
    #[error("{path}: {source}")]
    Arrow {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// A line of a text input (a CSV record, a JSON Lines line) that does not parse under the
    /// import's schema: a value of another type, a missing or extra column, a field the
    /// schema does not have, malformed text.
    #[error("{}:{line}: {detail}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line the record starts on (a CSV header is line 1).
        line: u64,
        /// What is wrong, as the parser says it.
        detail: String,
    },
    /// An input whose schema is not the import's (every input of one import must have the
    /// same schema once dictionaries, large and view types are normalised).
    #[error("{}: schema differs from the import's ({first}): {detail}", path.display())]
    SchemaDiffers {
        /// The input (or, for a batch handed to an `ImportSink`, the import's work id).
        path: PathBuf,
        /// Where the import's schema came from (the first input).
        first: String,
        /// The first field that differs.
        detail: String,
    },
    /// A row that does not encode as a record of the import's schema, or a record of a
    /// snapshot that does not decode under the snapshot's schema (export).
    #[error("{what} record {record}: {source}")]
    Record {
        /// The import's work id, or the snapshot exported.
        what: String,
        /// The record's number: among the records the import wrote, or in the snapshot.
        record: u64,
        /// The field and what is wrong with it.
        #[source]
        source: guideloom_arrow::Error,
    },
    /// Writing shards into the dataset root, or publishing them, failed.
    #[error("{root}: {source}")]
    Publish {
        /// The root (its store's description).
        root: String,
        /// The facade's error (`guideloom::Error::Publish(SchemaChange { .. })` for a schema
        /// that may not follow the latest snapshot's).
        #[source]
        source: Box<guideloom::Error>,
    },
    /// Reading a snapshot's records failed (export).
    #[error("snapshot {snapshot}: {source}")]
    Read {
        /// The snapshot.
        snapshot: String,
        /// The facade's error.
        #[source]
        source: Box<guideloom::Error>,
    },
}

impl Error {
    /// A [`Error::Corrupt`] for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// An [`Error::Unsupported`] for `path`.
    pub fn unsupported(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Unsupported {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
