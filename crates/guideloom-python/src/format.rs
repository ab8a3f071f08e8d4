//! Record formats seen from Python: CBOR (JSON-compatible values, the same bytes as the Rust
//! `CborFormat`), pickle (protocol 5) and raw bytes.
//!
//! Encoding runs with the GIL held (it reads Python objects); the bytes then go to Rust
//! without a copy where Python allows it (`bytes` from pickle are kept alive inside a
//! [`Bytes`]). Decoding a raw record hands Python a buffer over the read bytes
//! (`pyo3_bytes::PyBytes`, buffer protocol, no copy); pickle reads its records through the
//! same buffer; CBOR decodes from the bytes in place.

use bytes::Bytes;
use guideloom::format::Value;
use guideloom::format::cbor;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::raise;

/// Nesting deeper than this is refused when encoding (a cycle would otherwise recurse
/// without end); ciborium bounds decoding the same way.
const MAX_DEPTH: usize = 256;

/// How the records of a shard are encoded; its name is stored in the shard's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordFormat {
    /// JSON-compatible values as CBOR: the Rust `CborFormat`'s bytes and name (`"cbor"`).
    Cbor,
    /// Any picklable object, pickle protocol 5 (`"pickle"`).
    Pickle,
    /// Bytes-like objects stored as they are (`"raw"`).
    Raw,
}

impl RecordFormat {
    /// The name stored in shard metadata.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RecordFormat::Cbor => "cbor",
            RecordFormat::Pickle => "pickle",
            RecordFormat::Raw => "raw",
        }
    }

    /// The format of a stored name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        match name {
            "cbor" => Some(RecordFormat::Cbor),
            "pickle" => Some(RecordFormat::Pickle),
            "raw" => Some(RecordFormat::Raw),
            _ => None,
        }
    }

    /// The format a Python argument names: `None` (then `default`), a name, or one of the
    /// format classes.
    pub(crate) fn extract(
        obj: Option<&Bound<'_, PyAny>>,
        default: RecordFormat,
    ) -> PyResult<RecordFormat> {
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(default);
        };
        if let Ok(name) = obj.cast::<PyString>() {
            let name = name.to_str()?;
            return RecordFormat::from_name(name).ok_or_else(|| {
                raise(
                    "InvalidArgumentError",
                    format!("unknown record format {name:?}: use \"cbor\", \"pickle\" or \"raw\""),
                )
            });
        }
        if obj.is_instance_of::<CborFormat>() {
            Ok(RecordFormat::Cbor)
        } else if obj.is_instance_of::<DocumentPickleFormat>() {
            Ok(RecordFormat::Pickle)
        } else if obj.is_instance_of::<RawFormat>() {
            Ok(RecordFormat::Raw)
        } else {
            Err(PyTypeError::new_err(format!(
                "format must be CborFormat(), DocumentPickleFormat(), RawFormat() or a name, not {}",
                obj.get_type().name()?
            )))
        }
    }

    /// Encodes one record.
    pub(crate) fn encode(self, record: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        match self {
            RecordFormat::Cbor => {
                let value = to_value(record, 0)?;
                let mut out = Vec::new();
                cbor::encode_into(&value, &mut out)
                    .map_err(|e| PyValueError::new_err(format!("cannot encode as CBOR: {e}")))?;
                Ok(Bytes::from(out))
            }
            RecordFormat::Pickle => {
                let py = record.py();
                let dumped = py
                    .import("pickle")?
                    .getattr("dumps")?
                    .call1((record, 5))?
                    .extract::<PyBackedBytes>()?;
                Ok(Bytes::from_owner(dumped))
            }
            RecordFormat::Raw => raw_bytes(record),
        }
    }

    /// Decodes one record.
    pub(crate) fn decode<'py>(self, py: Python<'py>, bytes: Bytes) -> PyResult<Bound<'py, PyAny>> {
        match self {
            RecordFormat::Cbor => {
                let value: Value = cbor::decode_one(&bytes)
                    .map_err(|e| raise("DecodeError", format!("not a CBOR record: {e}")))?;
                from_value(py, &value)
            }
            RecordFormat::Pickle => {
                let buffer = Bound::new(py, pyo3_bytes::PyBytes::new(bytes))?;
                py.import("pickle")?.getattr("loads")?.call1((buffer,))
            }
            RecordFormat::Raw => Ok(Bound::new(py, pyo3_bytes::PyBytes::new(bytes))?.into_any()),
        }
    }
}

/// The bytes of a bytes-like record (anything with the buffer protocol: `bytes`, `bytearray`,
/// `memoryview`, numpy arrays...), without a copy: the Python buffer stays alive inside the
/// [`Bytes`] until the record is written.
pub(crate) fn raw_bytes(record: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    match record.extract::<pyo3_bytes::PyBytes>() {
        Ok(buffer) => Ok(buffer.into_inner()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "a raw record must be a bytes-like object (bytes, bytearray, memoryview), not {}",
            record.get_type().name()?
        ))),
    }
}

/// A JSON-compatible Python value as CBOR: `None`, `bool`, `int` (64-bit range), `float`,
/// `str`, `bytes`, `list`/`tuple`, `dict`.
fn to_value(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "cannot encode as CBOR: nested deeper than {MAX_DEPTH} levels (a cycle?)"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        let n: i128 = obj.extract().map_err(|_| out_of_range(obj))?;
        return Ok(Value::Integer(n.try_into().map_err(|_| out_of_range(obj))?));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::Text(s.to_str()?.to_owned()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        return list
            .iter()
            .map(|item| to_value(&item, depth + 1))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return tuple
            .iter()
            .map(|item| to_value(&item, depth + 1))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        return dict
            .iter()
            .map(|(k, v)| Ok((to_value(&k, depth + 1)?, to_value(&v, depth + 1)?)))
            .collect::<PyResult<_>>()
            .map(Value::Map);
    }
    Err(PyTypeError::new_err(format!(
        "cannot encode a {} as CBOR (JSON-compatible values only: None, bool, int, float, str, \
         bytes, list, tuple, dict); use DocumentPickleFormat() for other objects",
        obj.get_type().name()?
    )))
}

fn out_of_range(obj: &Bound<'_, PyAny>) -> PyErr {
    PyValueError::new_err(format!(
        "cannot encode {obj} as CBOR: integers must lie in [-2**64, 2**64 - 1]"
    ))
}

/// A CBOR value as a Python object (tags are dropped: their content is returned).
pub(crate) fn from_value<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Integer(i) => i128::from(*i).into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_value(py, item)?)?;
            }
            list.into_any()
        }
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                dict.set_item(from_value(py, k)?, from_value(py, v)?)?;
            }
            dict.into_any()
        }
        Value::Tag(_, inner) => from_value(py, inner)?,
        _ => {
            return Err(raise(
                "DecodeError",
                "a CBOR value of a kind guideloom does not know",
            ));
        }
    })
}

/// CBOR records: JSON-compatible Python values, the bytes the Rust `CborFormat` writes.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct CborFormat;

#[pymethods]
impl CborFormat {
    #[new]
    fn new() -> Self {
        CborFormat
    }
    /// The name stored in shard metadata.
    #[getter]
    fn name(&self) -> &'static str {
        RecordFormat::Cbor.name()
    }
    fn encode(&self, record: &Bound<'_, PyAny>) -> PyResult<pyo3_bytes::PyBytes> {
        Ok(pyo3_bytes::PyBytes::new(RecordFormat::Cbor.encode(record)?))
    }
    fn decode<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        RecordFormat::Cbor.decode(py, raw_bytes(data)?)
    }
    fn __repr__(&self) -> &'static str {
        "CborFormat()"
    }
}

/// Pickled records (protocol 5): any picklable Python object.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct DocumentPickleFormat;

#[pymethods]
impl DocumentPickleFormat {
    #[new]
    fn new() -> Self {
        DocumentPickleFormat
    }
    /// The name stored in shard metadata.
    #[getter]
    fn name(&self) -> &'static str {
        RecordFormat::Pickle.name()
    }
    fn __repr__(&self) -> &'static str {
        "DocumentPickleFormat()"
    }
}

/// Raw records: bytes-like objects in, zero-copy buffers out.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct RawFormat;

#[pymethods]
impl RawFormat {
    #[new]
    fn new() -> Self {
        RawFormat
    }
    /// The name stored in shard metadata.
    #[getter]
    fn name(&self) -> &'static str {
        RecordFormat::Raw.name()
    }
    fn __repr__(&self) -> &'static str {
        "RawFormat()"
    }
}

/// A JSON-compatible value (an annotation) for serde: CBOR's value model.
pub(crate) fn annotation_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_value(obj, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_rust_formats() {
        for f in [RecordFormat::Cbor, RecordFormat::Pickle, RecordFormat::Raw] {
            assert_eq!(RecordFormat::from_name(f.name()), Some(f));
        }
        use guideloom::format::Format as _;
        assert_eq!(
            RecordFormat::Cbor.name(),
            guideloom::CborFormat::<u8>::new().name()
        );
        assert_eq!(RecordFormat::Raw.name(), guideloom::RawFormat.name());
        assert_eq!(RecordFormat::from_name("json"), None);
    }
}
