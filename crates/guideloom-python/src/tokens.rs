//! Published token streams from Python: the reads of a snapshot of stream shards
//! (`Root.write_stream_shard`, or the Rust `Publisher::write_stream_shard`) as methods of
//! `guideloom.Dataset` (`num_tokens`, `stream_element`, `tokens`, `document`,
//! `document_range`, `document_meta`), the facade's `Dataset` stream reads typed by the
//! stream's element type and handed to Python as read-only numpy arrays.
//!
//! A second `#[pymethods]` block of `Dataset` (pyo3's `multiple-pymethods`), so that the
//! stream reads live beside the stream writes rather than in `dataset.rs`.

use guideloom::bytes::Bytes;
use guideloom::format::{ELEMENT_TYPES, Value};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyRange;

use crate::dataset::Dataset;
use crate::errors::{Error, raise};
use crate::format::from_value;
use crate::runtime::block_on;
use crate::slices::{PyIndex, index_error};

/// `dtype` (anything `numpy.dtype` takes) as a stream element type: its name (`"u16"`), its
/// width in bytes, and the little-endian numpy dtype documents are converted to.
pub(crate) fn element_dtype<'py>(
    dtype: &Bound<'py, PyAny>,
) -> PyResult<(&'static str, u64, Bound<'py, PyAny>)> {
    let dt = dtype
        .py()
        .import("numpy")?
        .getattr("dtype")?
        .call1((dtype,))?;
    let kind: String = dt.getattr("kind")?.extract()?;
    let width: u64 = dt.getattr("itemsize")?.extract()?;
    let name = format!("{kind}{}", width * 8);
    match ELEMENT_TYPES.iter().find(|(n, _)| *n == name) {
        Some((element, _)) if "uif".contains(kind.as_str()) => {
            Ok((element, width, dt.call_method1("newbyteorder", ("<",))?))
        }
        _ => Err(PyTypeError::new_err(format!(
            "unsupported stream dtype {}: use uint8, uint16, uint32, uint64, int32, int64, \
             float32 or float64",
            dt.str()?
        ))),
    }
}

/// The numpy dtype of decoded elements of type `element` (native byte order: the facade's
/// `Elements` are native values).
fn numpy_dtype(element: &str) -> String {
    let (kind, bits) = element.split_at(1);
    let bytes = bits.parse::<u32>().unwrap_or(8) / 8;
    format!("={kind}{bytes}")
}

/// Runs `$body` with `$E` the Rust element type named `$name`.
macro_rules! with_element {
    ($name:expr, |$E:ident| $body:expr) => {
        match $name {
            "u8" => {
                type $E = u8;
                $body
            }
            "u16" => {
                type $E = u16;
                $body
            }
            "u32" => {
                type $E = u32;
                $body
            }
            "u64" => {
                type $E = u64;
                $body
            }
            "i32" => {
                type $E = i32;
                $body
            }
            "i64" => {
                type $E = i64;
                $body
            }
            "f32" => {
                type $E = f32;
                $body
            }
            "f64" => {
                type $E = f64;
                $body
            }
            other => {
                return Err(raise(
                    "UnsupportedError",
                    format!("unknown stream element type {other:?}"),
                ));
            }
        }
    };
}

/// A facade error of a stream read as a Python exception: a dataset that is not one token
/// stream is an `UnsupportedError`, the rest map as every error does.
pub(crate) fn stream_error(e: impl Into<guideloom::Error>) -> PyErr {
    match e.into() {
        e @ guideloom::Error::Publish(guideloom::publish::Error::NotAStream { .. }) => {
            raise("UnsupportedError", e.to_string())
        }
        other => Error::from(other).into(),
    }
}

/// Element bytes as a read-only numpy array of `element`s (a view, no copy).
fn array<'py>(py: Python<'py>, bytes: Bytes, element: &str) -> PyResult<Bound<'py, PyAny>> {
    let buffer = Bound::new(py, pyo3_bytes::PyBytes::new(bytes))?;
    py.import("numpy")?
        .getattr("frombuffer")?
        .call1((buffer, numpy_dtype(element)))
}

impl Dataset {
    /// The stream's element type (`UnsupportedError` unless the dataset is a token stream).
    fn element(&self, py: Python<'_>) -> PyResult<(guideloom::Dataset, String)> {
        let dataset = self.current(py)?;
        let element = dataset.stream_element().map_err(stream_error)?.to_owned();
        Ok((dataset, element))
    }

    /// Document `index` (negative from the end) as a position among `len` documents.
    fn document_index(py: Python<'_>, index: &PyIndex, len: u64) -> PyResult<u64> {
        index
            .resolve(len)
            .ok_or_else(|| index_error(py, index, len, "document", "stream"))
    }
}

#[pymethods]
impl Dataset {
    /// The stream's element type name (`"u16"`, ...), from the manifest.
    fn stream_element(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.element(py)?.1)
    }

    /// Tokens in the stream (all documents), from the manifest: no request.
    fn num_tokens(&self, py: Python<'_>) -> PyResult<u64> {
        self.current(py)?.num_tokens().map_err(stream_error)
    }

    /// Tokens `start..stop` of the stream, across document and shard boundaries, as a
    /// read-only numpy array: one ranged read per shard touched, shards concurrently.
    fn tokens<'py>(
        &self,
        py: Python<'py>,
        start: PyIndex,
        stop: PyIndex,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (dataset, element) = self.element(py)?;
        let len = dataset.num_tokens().map_err(stream_error)?;
        let inside = |i: &PyIndex| u64::try_from(i.value).ok().filter(|&i| i <= len);
        let range = match (inside(&start), inside(&stop)) {
            (Some(a), Some(b)) if a <= b => a..b,
            _ => {
                let err = raise(
                    "IndexOutOfRangeError",
                    format!(
                        "tokens {}..{} are out of range for a stream of {len} tokens",
                        start.shown(py),
                        stop.shown(py)
                    ),
                );
                let value = err.value(py);
                let _ = value.setattr("index", start.to_object(py)?);
                let _ = value.setattr("len", len);
                return Err(err);
            }
        };
        let read = with_element!(element.as_str(), |E| block_on(py, async move {
            Ok::<_, Error>(
                dataset
                    .tokens_async::<E>(range)
                    .await
                    .map(|t| t.as_bytes().clone()),
            )
        })?);
        array(py, read.map_err(stream_error)?, &element)
    }

    /// The tokens of document `index` (the dataset's record `index`, negative from the
    /// end) as a read-only numpy array: one ranged read.
    fn document<'py>(&self, py: Python<'py>, index: PyIndex) -> PyResult<Bound<'py, PyAny>> {
        let (dataset, element) = self.element(py)?;
        let index = Dataset::document_index(py, &index, dataset.len())?;
        let read = with_element!(element.as_str(), |E| block_on(py, async move {
            Ok::<_, Error>(
                dataset
                    .document_async::<E>(index)
                    .await
                    .map(|t| t.as_bytes().clone()),
            )
        })?);
        array(py, read.map_err(stream_error)?, &element)
    }

    /// The token range document `index` covers in the stream, as a `range`.
    fn document_range<'py>(
        &self,
        py: Python<'py>,
        index: PyIndex,
    ) -> PyResult<Bound<'py, PyRange>> {
        let (dataset, _) = self.element(py)?;
        let index = Dataset::document_index(py, &index, dataset.len())?;
        let range = block_on(py, async move {
            Ok::<_, Error>(dataset.document_range_async(index).await)
        })?
        .map_err(stream_error)?;
        let bound = |n: u64| {
            isize::try_from(n).map_err(|_| raise("GuideloomError", "a token offset past isize"))
        };
        PyRange::new_with_step(py, bound(range.start)?, bound(range.end)?, 1)
    }

    /// The metadata of document `index` (a stream written with metadata), decoded from CBOR.
    fn document_meta<'py>(&self, py: Python<'py>, index: PyIndex) -> PyResult<Bound<'py, PyAny>> {
        let (dataset, _) = self.element(py)?;
        let index = Dataset::document_index(py, &index, dataset.len())?;
        let value = block_on(py, async move {
            Ok::<_, Error>(dataset.document_meta_async::<Value>(index).await)
        })?
        .map_err(stream_error)?;
        from_value(py, &value)
    }
}
