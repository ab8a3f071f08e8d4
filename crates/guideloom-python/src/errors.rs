//! The crate's one error type and its mapping onto the Python exceptions of
//! `guideloom.exceptions`: the class from the error's [`ErrorKind`] in one table ([`class`]),
//! the attributes from the object the error names.
//!
//! The exception classes are pure Python (`python/guideloom/exceptions.py`), so that one class
//! can derive from both `guideloom.GuideloomError` and a builtin (`NotFoundError` is also a
//! `FileNotFoundError`, `IndexOutOfRangeError` an `IndexError`, `InvalidArgumentError` a
//! `ValueError`). Each carries the object at fault as attributes (`key`, `path`, `index`,
//! `len`, `uri`, `root`) and in its message.

use std::any::Any;

use guideloom::ErrorKind;
use guideloom::format::Error as FormatError;
use guideloom::io::Error as IoError;
use guideloom::publish::Error as PublishError;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// `Result` with this crate's [`enum@Error`].
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a binding can fail with before it becomes a Python exception.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The facade's error (lower crates' errors are wrapped in it unchanged).
    #[error(transparent)]
    Guideloom(#[from] guideloom::Error),
    /// A Python exception raised while Rust called back into Python (encoding a record,
    /// iterating the caller's records), passed on unchanged.
    #[error(transparent)]
    Python(#[from] PyErr),
    /// An error of an operation on the root `root`, which the Python exception names (in its
    /// message and as its `root` attribute) even where the facade's error names only a key
    /// relative to the root (`not found: log/` for a root where nothing was published).
    #[error("{root}: {source}")]
    InRoot {
        /// The root as its store describes it (credentials redacted).
        root: String,
        /// What failed.
        source: Box<Error>,
    },
}

impl Error {
    /// `self`, naming `root` (the store's redacted description) unless it is a Python
    /// exception passed through or already names a root.
    pub(crate) fn in_root(self, root: String) -> Self {
        match self {
            Error::Guideloom(_) => Error::InRoot {
                root,
                source: Box::new(self),
            },
            other => other,
        }
    }
}

impl From<PublishError> for Error {
    fn from(e: PublishError) -> Self {
        Error::Guideloom(e.into())
    }
}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        Error::Guideloom(e.into())
    }
}

impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        Error::Guideloom(e.into())
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Python(err) => err,
            Error::Guideloom(err) => Python::attach(|py| to_pyerr(py, &err)),
            Error::InRoot { root, source } => match *source {
                Error::Guideloom(err) => Python::attach(|py| to_pyerr_in(py, &err, Some(&root))),
                other => other.into(),
            },
        }
    }
}

/// The exception class of `guideloom.exceptions` for an error of kind `kind`: the one table
/// (docs/python.md, "Exceptions"). Three kinds have more than one class, chosen by what the
/// object at fault is ([`Subject`]): damage of a root's control object is
/// `CorruptObjectError` (of a shard `CorruptShardError`), a local storage writer's taken name
/// `ShardExistsError` (a root's `PublicationCollisionError`), and a mismatch names what did
/// not match (the dataset or snapshot, a count, else the format).
fn class(kind: ErrorKind, subject: Subject) -> &'static str {
    match kind {
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::OutOfRange => "IndexOutOfRangeError",
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::Unsupported => "UnsupportedError",
        ErrorKind::Corrupt if subject == Subject::ControlObject => "CorruptObjectError",
        ErrorKind::Corrupt => "CorruptShardError",
        ErrorKind::VerificationFailed => "VerificationError",
        ErrorKind::Collision if subject == Subject::LocalFile => "ShardExistsError",
        ErrorKind::Collision => "PublicationCollisionError",
        ErrorKind::Conflict => "ConcurrentUpdateError",
        ErrorKind::Mismatch if subject == Subject::Dataset => "DatasetMismatchError",
        ErrorKind::Mismatch if subject == Subject::Count => "CountMismatchError",
        ErrorKind::Mismatch if subject == Subject::Schema => "SchemaError",
        ErrorKind::Mismatch => "FormatMismatchError",
        ErrorKind::ReadOnly => "ReadOnlyRootError",
        ErrorKind::TooLarge => "TooLargeError",
        ErrorKind::RefusedFile => "RefusedFileError",
        ErrorKind::DiskFull
        | ErrorKind::PermissionDenied
        | ErrorKind::Remote
        | ErrorKind::Timeout
        | ErrorKind::Interrupted
        | ErrorKind::Io => "StorageError",
        ErrorKind::Encode => "EncodeError",
        ErrorKind::Decode => "DecodeError",
        // `Other`, and any kind added later until this table names it (a test holds it to
        // `ErrorKind::ALL`).
        _ => "GuideloomError",
    }
}

/// What the object at fault is, where a kind's class depends on it ([`class`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Subject {
    /// A shard, a record, or nothing that decides a class.
    #[default]
    Other,
    /// A control object of a root (identity, log entry, manifest, pointer, catalog).
    ControlObject,
    /// A local file of a storage writer.
    LocalFile,
    /// The dataset or snapshot a root or annotation set holds.
    Dataset,
    /// A count given by the caller.
    Count,
    /// A dataset's schema (a record that does not match it, a change it cannot take).
    Schema,
}

/// The exception's attributes: the object at fault, as the error names it.
#[derive(Debug, Default)]
struct Mapped {
    subject: Subject,
    key: Option<String>,
    path: Option<String>,
    index: Option<u64>,
    len: Option<u64>,
    uri: Option<String>,
    root: Option<String>,
}

impl Mapped {
    fn key(key: &str) -> Self {
        Mapped {
            key: Some(key.to_owned()),
            ..Mapped::default()
        }
    }
    fn path(path: &std::path::Path) -> Self {
        Mapped {
            path: Some(path.display().to_string()),
            ..Mapped::default()
        }
    }
    fn index(index: u64, len: Option<u64>) -> Self {
        Mapped {
            index: Some(index),
            len,
            ..Mapped::default()
        }
    }
    fn subject(mut self, subject: Subject) -> Self {
        self.subject = subject;
        self
    }
}

fn map_io(e: &IoError) -> Mapped {
    match e {
        IoError::NotRegularFile { location, .. } => Mapped {
            path: Some(location.clone()),
            ..Mapped::default()
        },
        IoError::NotFound { location, .. }
        | IoError::ShortRead { location, .. }
        | IoError::LongRead { location, .. }
        | IoError::OutOfRange { location, .. }
        | IoError::Closed { location }
        | IoError::Io { location, .. }
        | IoError::Remote { location, .. } => Mapped::key(location),
        _ => Mapped::default(),
    }
}

fn map_format(e: &FormatError) -> Mapped {
    match e {
        FormatError::SchemaMismatch { label, index, .. } => Mapped {
            path: Some(label.display().to_string()),
            index: Some(*index),
            ..Mapped::default()
        }
        .subject(Subject::Schema),
        FormatError::Corrupt { shard, .. }
        | FormatError::Unsupported { shard, .. }
        | FormatError::FormatMismatch { shard, .. }
        | FormatError::NotFound {
            location: shard, ..
        } => Mapped::key(shard),
        FormatError::IndexOutOfRange { index, len } => Mapped::index(*index, Some(*len)),
        FormatError::SliceOutOfRange { offset, total, .. } => Mapped::index(*offset, Some(*total)),
        FormatError::AlreadyExists { path } | FormatError::Write { path, .. } => {
            Mapped::path(path).subject(Subject::LocalFile)
        }
        FormatError::WriterFailed { dir } => Mapped::path(dir),
        FormatError::NonDenseIndex { got: index, .. } | FormatError::Encode { index, .. } => {
            Mapped::index(*index, None)
        }
        FormatError::Decode { shard, index, .. } => Mapped {
            key: Some(shard.clone()),
            ..Mapped::index(*index, None)
        },
        FormatError::Io(io) => map_io(io),
        _ => Mapped::default(),
    }
}

/// A shard's failure: its key, and the record index or local path the format crate names.
fn map_shard(key: &str, source: &FormatError) -> Mapped {
    let inner = map_format(source);
    Mapped {
        index: inner.index,
        path: inner.path,
        subject: inner.subject,
        ..Mapped::key(key)
    }
}

fn map_publish(e: &PublishError) -> Mapped {
    match e {
        PublishError::PublicationCollision { key }
        | PublishError::NotFound { key }
        | PublishError::Verification { key, .. }
        | PublishError::CasExhausted { key, .. }
        | PublishError::ShardTooLarge { key, .. }
        | PublishError::TooLarge { key, .. }
        | PublishError::StagingBudget { key, .. }
        | PublishError::Storage { key, .. }
        | PublishError::ArrayRecordShard { key, .. }
        | PublishError::Read { key, .. } => Mapped::key(key),
        PublishError::Corrupt { key, .. } => Mapped::key(key).subject(Subject::ControlObject),
        PublishError::LogGap { .. } => Mapped::default().subject(Subject::ControlObject),
        PublishError::DatasetMismatch { .. } => Mapped::default().subject(Subject::Dataset),
        PublishError::AnnotationSnapshotMismatch { set, .. } => {
            Mapped::key(set).subject(Subject::Dataset)
        }
        PublishError::CountMismatch { .. } => Mapped::default().subject(Subject::Count),
        PublishError::SchemaChange { .. } => Mapped::default().subject(Subject::Schema),
        PublishError::MountedBucketCannotAnnotate { root }
        | PublishError::ReadOnlyRoot { root } => Mapped {
            root: Some(root.clone()),
            ..Mapped::default()
        },
        PublishError::RefusedFile { path, .. }
        | PublishError::DiskFull { path, .. }
        | PublishError::Io { path, .. } => Mapped::path(path),
        PublishError::InvalidUri { uri, .. } => Mapped {
            uri: Some(uri.clone()),
            ..Mapped::default()
        },
        PublishError::OutOfRange { index, len, .. } => Mapped::index(*index, Some(*len)),
        PublishError::Shard { key, source } => map_shard(key, source),
        PublishError::Decode { index, .. } => Mapped::index(*index, None),
        _ => Mapped::default(),
    }
}

/// The exception's attributes for a facade error ([`to_pyerr`] takes the class from its kind).
fn map(e: &guideloom::Error) -> Mapped {
    use guideloom::Error as E;
    match e {
        E::Io(io) => map_io(io),
        E::Format(f) => map_format(f),
        E::Publish(p) => map_publish(p),
        E::Encode { index, .. } => Mapped::index(*index, None),
        _ => Mapped::default(),
    }
}

/// The message: the error and each source not already part of it.
fn message(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Builds `guideloom.exceptions.<class>(message, **attrs)`.
fn build(py: Python<'_>, class: &str, mapped: &Mapped, text: &str) -> PyResult<PyErr> {
    let module = py.import("guideloom.exceptions")?;
    let class = module.getattr(class)?;
    let kwargs = PyDict::new(py);
    for (name, value) in [
        ("key", &mapped.key),
        ("path", &mapped.path),
        ("uri", &mapped.uri),
        ("root", &mapped.root),
    ] {
        if let Some(v) = value {
            kwargs.set_item(name, v)?;
        }
    }
    for (name, value) in [("index", mapped.index), ("len", mapped.len)] {
        if let Some(v) = value {
            kwargs.set_item(name, v)?;
        }
    }
    let value = class.call((PyString::new(py, text),), Some(&kwargs))?;
    Ok(PyErr::from_value(value))
}

/// The Python exception for a facade error; a Python exception in its source chain (raised
/// by a backend written in Python) becomes its `__cause__`, except one that is not an
/// `Exception` (`KeyboardInterrupt`, `SystemExit`, `GeneratorExit`): that one is raised as
/// itself, so Ctrl-C inside a backend's `read` stops the program as anywhere else and no
/// `except Exception` (nor `except StorageError`) swallows it.
pub(crate) fn to_pyerr(py: Python<'_>, e: &guideloom::Error) -> PyErr {
    to_pyerr_in(py, e, None)
}

/// [`to_pyerr`] for an error of an operation on `root`: unless the error names a root of its
/// own (a mounted bucket refusing annotations), `root` becomes the `root` attribute and
/// starts the message (where the message does not name it already).
fn to_pyerr_in(py: Python<'_>, e: &guideloom::Error, root: Option<&str>) -> PyErr {
    let mut mapped = map(e);
    let mut text = message(e);
    if let Some(root) = root
        && mapped.root.is_none()
    {
        mapped.root = Some(root.to_owned());
        if !text.contains(root) {
            text = format!("{root}: {text}");
        }
    }
    let cause = python_cause(e);
    if let Some(cause) = cause
        && !cause.is_instance_of::<PyException>(py)
    {
        return cause.clone_ref(py);
    }
    let err = build(py, class(e.kind(), mapped.subject), &mapped, &text).unwrap_or_else(|err| err);
    if let Some(cause) = cause {
        err.set_cause(py, Some(cause.clone_ref(py)));
    }
    err
}

/// The first Python exception in `e`'s source chain (one raised by a backend written in
/// Python, carried as the typed source of the IO error it caused).
fn python_cause<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e PyErr> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(cause) = s.downcast_ref::<PyErr>() {
            return Some(cause);
        }
        source = s.source();
    }
    None
}

/// A Python exception of `guideloom.exceptions` by class name (for the bindings' own checks).
pub(crate) fn raise(class: &'static str, text: impl AsRef<str>) -> PyErr {
    Python::attach(|py| {
        build(py, class, &Mapped::default(), text.as_ref()).unwrap_or_else(|err| err)
    })
}

/// The runtime could not start (threads or the IO driver).
pub(crate) fn runtime_error(e: &std::io::Error) -> PyErr {
    raise(
        "GuideloomError",
        format!("cannot start the guideloom runtime: {e}"),
    )
}

/// A Rust panic, caught before it reached the interpreter.
pub(crate) fn panic_error(payload: &(dyn Any + Send)) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    raise(
        "InternalError",
        format!("internal error in guideloom (a Rust panic was caught): {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBJECTS: [Subject; 6] = [
        Subject::Other,
        Subject::ControlObject,
        Subject::LocalFile,
        Subject::Dataset,
        Subject::Count,
        Subject::Schema,
    ];

    /// Every kind has a class of its own row (only `Other` is the base class), and every class
    /// the table names exists in `guideloom.exceptions`.
    #[test]
    fn every_kind_has_a_class_that_exists() {
        let module = include_str!("../../../python/guideloom/exceptions.py");
        for kind in ErrorKind::ALL {
            for subject in SUBJECTS {
                let name = class(kind, subject);
                assert!(
                    module.contains(&format!("class {name}(")),
                    "{kind}: {name} is not a class of guideloom.exceptions"
                );
                assert_eq!(
                    name == "GuideloomError",
                    kind == ErrorKind::Other,
                    "{kind} has no row of its own"
                );
            }
        }
    }

    /// The table as docs/python.md shows it (`| `kind` | `Class` |` rows after the
    /// `<!-- kind table -->` marker), one row per kind and class.
    #[test]
    fn the_table_is_documented() {
        let docs = include_str!("../../../docs/python.md");
        let table = docs
            .split("<!-- kind table -->")
            .nth(1)
            .expect("docs/python.md has the kind table");
        let mut rows = Vec::new();
        for line in table.lines().skip_while(|l| !l.starts_with('|')) {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if let [kind, classes, ..] = cells[..]
                && kind.starts_with('`')
            {
                rows.push((kind.trim_matches('`').to_owned(), classes.to_owned()));
            }
        }
        let names: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        let all: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, all, "one row per kind, in ErrorKind::ALL's order");
        for ((_, classes), kind) in rows.iter().zip(ErrorKind::ALL) {
            for subject in SUBJECTS {
                let name = class(kind, subject);
                assert!(
                    classes.contains(&format!("`{name}`")),
                    "{kind}: the docs do not name {name}"
                );
            }
        }
    }
}
