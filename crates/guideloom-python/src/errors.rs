//! The crate's one error type and its mapping onto the Python exceptions of
//! `guideloom.exceptions`.
//!
//! The exception classes are pure Python (`python/guideloom/exceptions.py`), so that one class
//! can derive from both `guideloom.GuideloomError` and a builtin (`NotFoundError` is also a
//! `FileNotFoundError`, `IndexOutOfRangeError` an `IndexError`, `InvalidArgumentError` a
//! `ValueError`). Each carries the object at fault as attributes (`key`, `path`, `index`,
//! `len`, `uri`, `root`) and in its message.

use std::any::Any;

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

/// The exception class of `guideloom.exceptions` for an error, and its attributes.
#[derive(Debug, Default)]
struct Mapped {
    class: &'static str,
    key: Option<String>,
    path: Option<String>,
    index: Option<u64>,
    len: Option<u64>,
    uri: Option<String>,
    root: Option<String>,
}

impl Mapped {
    fn new(class: &'static str) -> Self {
        Mapped {
            class,
            ..Mapped::default()
        }
    }
    fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }
    fn path(mut self, path: &std::path::Path) -> Self {
        self.path = Some(path.display().to_string());
        self
    }
}

fn map_io(e: &IoError) -> Mapped {
    match e {
        IoError::NotFound { location, .. } => Mapped::new("NotFoundError").key(location),
        IoError::InvalidArgument { .. } => Mapped::new("InvalidArgumentError"),
        IoError::Unsupported { .. } => Mapped::new("UnsupportedError"),
        IoError::NotRegularFile { location, .. } => Mapped {
            path: Some(location.clone()),
            ..Mapped::new("RefusedFileError")
        },
        IoError::ShortRead { location, .. }
        | IoError::LongRead { location, .. }
        | IoError::OutOfRange { location, .. }
        | IoError::Closed { location }
        | IoError::Io { location, .. }
        | IoError::Remote { location, .. } => Mapped::new("StorageError").key(location),
        _ => Mapped::new("StorageError"),
    }
}

fn map_format(e: &FormatError) -> Mapped {
    match e {
        FormatError::Corrupt { shard, .. } | FormatError::Unsupported { shard, .. } => {
            Mapped::new("CorruptShardError").key(shard)
        }
        FormatError::FormatMismatch { shard, .. } => Mapped::new("FormatMismatchError").key(shard),
        FormatError::IndexOutOfRange { index, len } => Mapped {
            index: Some(*index),
            len: Some(*len),
            ..Mapped::new("IndexOutOfRangeError")
        },
        FormatError::SliceOutOfRange { offset, total, .. } => Mapped {
            index: Some(*offset),
            len: Some(*total),
            ..Mapped::new("IndexOutOfRangeError")
        },
        FormatError::NotFound { location } => Mapped::new("NotFoundError").key(location),
        FormatError::AlreadyExists { path } => Mapped::new("ShardExistsError").path(path),
        FormatError::NonDenseIndex { got, .. } => Mapped {
            index: Some(*got),
            ..Mapped::new("InvalidArgumentError")
        },
        FormatError::InvalidArgument { .. } => Mapped::new("InvalidArgumentError"),
        FormatError::Encode { index, .. } => Mapped {
            index: Some(*index),
            ..Mapped::new("EncodeError")
        },
        FormatError::Decode { shard, index, .. } => Mapped {
            index: Some(*index),
            ..Mapped::new("DecodeError").key(shard)
        },
        FormatError::Write { path, .. } => Mapped::new("StorageError").path(path),
        FormatError::WriterFailed { dir } => Mapped::new("GuideloomError").path(dir),
        FormatError::Io(io) => map_io(io),
        _ => Mapped::new("GuideloomError"),
    }
}

/// A shard's failure: damage, a missing object or a transport failure beneath it.
fn map_shard(key: &str, source: &FormatError) -> Mapped {
    let inner = map_format(source);
    let class = match inner.class {
        "NotFoundError"
        | "StorageError"
        | "FormatMismatchError"
        | "DecodeError"
        | "RefusedFileError" => inner.class,
        _ if source.is_corrupt() => "CorruptShardError",
        "CorruptShardError" => "CorruptShardError",
        _ => "StorageError",
    };
    Mapped {
        index: inner.index,
        path: inner.path,
        ..Mapped::new(class).key(key)
    }
}

/// An ArrayRecord shard's error: damaged bytes are `CorruptShardError`, a missing object
/// `NotFoundError`, anything else (transport, limits, unsupported chunks) `StorageError`.
fn map_array_record_shard(key: &str, source: &guideloom::arrayrecord::Error) -> Mapped {
    let class = if source.is_corrupt() {
        "CorruptShardError"
    } else if source.is_not_found() {
        "NotFoundError"
    } else {
        "StorageError"
    };
    Mapped::new(class).key(key)
}

fn map_publish(e: &PublishError) -> Mapped {
    match e {
        PublishError::PublicationCollision { key } => {
            Mapped::new("PublicationCollisionError").key(key)
        }
        PublishError::NotFound { key } => Mapped::new("NotFoundError").key(key),
        PublishError::Corrupt { key, .. } => Mapped::new("CorruptObjectError").key(key),
        PublishError::LogGap { .. } => Mapped::new("CorruptObjectError"),
        PublishError::Verification { key, .. } => Mapped::new("VerificationError").key(key),
        PublishError::DatasetMismatch { .. } => Mapped::new("DatasetMismatchError"),
        PublishError::AnnotationSnapshotMismatch { set, .. } => {
            Mapped::new("DatasetMismatchError").key(set)
        }
        PublishError::CountMismatch { .. } => Mapped::new("CountMismatchError"),
        PublishError::CasExhausted { key, .. } => Mapped::new("ConcurrentUpdateError").key(key),
        PublishError::ConditionalWritesUnsupported { .. } | PublishError::Unsupported { .. } => {
            Mapped::new("UnsupportedError")
        }
        PublishError::MountedBucketCannotAnnotate { root } => Mapped {
            root: Some(root.clone()),
            ..Mapped::new("UnsupportedError")
        },
        PublishError::ShardTooLarge { key, .. }
        | PublishError::TooLarge { key, .. }
        | PublishError::StagingBudget { key, .. } => Mapped::new("TooLargeError").key(key),
        PublishError::ReadOnlyRoot { root } => Mapped {
            root: Some(root.clone()),
            ..Mapped::new("ReadOnlyRootError")
        },
        PublishError::RefusedFile { path, .. } => Mapped::new("RefusedFileError").path(path),
        PublishError::DiskFull { path, .. } => Mapped::new("StorageError").path(path),
        PublishError::AwsProfile { .. } | PublishError::InvalidArgument { .. } => {
            Mapped::new("InvalidArgumentError")
        }
        PublishError::InvalidUri { uri, .. } => Mapped {
            uri: Some(uri.clone()),
            ..Mapped::new("InvalidArgumentError")
        },
        PublishError::OutOfRange { index, len, .. } => Mapped {
            index: Some(*index),
            len: Some(*len),
            ..Mapped::new("IndexOutOfRangeError")
        },
        PublishError::Storage { key, .. } => Mapped::new("StorageError").key(key),
        PublishError::Io { path, source } => {
            let class = if source.kind() == std::io::ErrorKind::NotFound {
                "NotFoundError"
            } else {
                "StorageError"
            };
            Mapped::new(class).path(path)
        }
        PublishError::Shard { key, source } => map_shard(key, source),
        PublishError::ArrayRecordShard { key, source } => map_array_record_shard(key, source),
        PublishError::Read { key, source } => Mapped {
            class: map_io(source).class,
            ..Mapped::new("StorageError").key(key)
        },
        _ => Mapped::new("GuideloomError"),
    }
}

fn map(e: &guideloom::Error) -> Mapped {
    use guideloom::Error as E;
    match e {
        E::Io(io) => map_io(io),
        E::Format(f) => map_format(f),
        E::Publish(p) => map_publish(p),
        E::Shard { key, source } => map_shard(key, source),
        E::ArrayRecordShard { key, source } => map_array_record_shard(key, source),
        E::OutOfRange { index, len } => Mapped {
            index: Some(*index),
            len: Some(*len),
            ..Mapped::new("IndexOutOfRangeError")
        },
        E::Decode { index, .. } => Mapped {
            index: Some(*index),
            ..Mapped::new("DecodeError")
        },
        E::Encode { index, .. } => Mapped {
            index: Some(*index),
            ..Mapped::new("EncodeError")
        },
        E::InvalidOptions { .. } | E::Resume { .. } => Mapped::new("InvalidArgumentError"),
        E::Unsupported { .. } => Mapped::new("UnsupportedError"),
        _ => Mapped::new("GuideloomError"),
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
fn build(py: Python<'_>, mapped: &Mapped, text: &str) -> PyResult<PyErr> {
    let module = py.import("guideloom.exceptions")?;
    let class = module.getattr(mapped.class)?;
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
    let err = build(py, &mapped, &text).unwrap_or_else(|err| err);
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
    Python::attach(|py| build(py, &Mapped::new(class), text.as_ref()).unwrap_or_else(|err| err))
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
