//! MDS column encodings (the names of `streaming`'s `_encodings` table) and their Arrow fields,
//! plus the parsers of the text encodings (`str_int`, `str_float`, `str_decimal`) with the
//! grammar of Python's `int()`, `float()` and `Decimal()`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, FieldRef, Fields};

use super::{DECIMAL_MEDIA, ENCODING_KEY, NDARRAY_MEDIA, PICKLE_MEDIA, PIL_MEDIA};
use crate::MEDIA_KEY;

/// A NumPy dtype of an MDS `ndarray` (the `_int2value_dtype` table) or a scalar encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    U8,
    I8,
    U16,
    I16,
    F16,
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl Dtype {
    const ALL: [Dtype; 11] = [
        Dtype::U8,
        Dtype::I8,
        Dtype::U16,
        Dtype::I16,
        Dtype::F16,
        Dtype::U32,
        Dtype::I32,
        Dtype::F32,
        Dtype::U64,
        Dtype::I64,
        Dtype::F64,
    ];

    /// NumPy's name of the dtype (`uint8`, ..., `float64`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::I8 => "int8",
            Dtype::U16 => "uint16",
            Dtype::I16 => "int16",
            Dtype::F16 => "float16",
            Dtype::U32 => "uint32",
            Dtype::I32 => "int32",
            Dtype::F32 => "float32",
            Dtype::U64 => "uint64",
            Dtype::I64 => "int64",
            Dtype::F64 => "float64",
        }
    }

    /// The byte that a dynamic-dtype `ndarray` value starts with.
    fn code(self) -> u8 {
        match self {
            Dtype::U8 => 8,
            Dtype::I8 => 9,
            Dtype::U16 => 16,
            Dtype::I16 => 17,
            Dtype::F16 => 18,
            Dtype::U32 => 32,
            Dtype::I32 => 33,
            Dtype::F32 => 34,
            Dtype::U64 => 64,
            Dtype::I64 => 65,
            Dtype::F64 => 66,
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    pub(crate) fn from_code(code: u8) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Bytes of one element.
    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::U8 | Dtype::I8 => 1,
            Dtype::U16 | Dtype::I16 | Dtype::F16 => 2,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 | Dtype::F64 => 8,
        }
    }

    pub(crate) fn data_type(self) -> DataType {
        match self {
            Dtype::U8 => DataType::UInt8,
            Dtype::I8 => DataType::Int8,
            Dtype::U16 => DataType::UInt16,
            Dtype::I16 => DataType::Int16,
            Dtype::F16 => DataType::Float16,
            Dtype::U32 => DataType::UInt32,
            Dtype::I32 => DataType::Int32,
            Dtype::F32 => DataType::Float32,
            Dtype::U64 => DataType::UInt64,
            Dtype::I64 => DataType::Int64,
            Dtype::F64 => DataType::Float64,
        }
    }
}

/// What a list element is (the `list[...]` encodings and `jpeg_array`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Element {
    Jpeg,
    Png,
    Pil,
}

/// One parsed MDS encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// `bytes`, `pkl`, `jpeg`, `png`: the stored bytes, with the media type if any.
    Binary(Option<&'static str>),
    /// `str`, `json`: UTF-8 text, with the media type if any.
    Utf8(Option<&'static str>),
    /// `str_decimal`: the decimal's text, checked against `Decimal()`'s grammar.
    StrDecimal,
    /// `int` and the `int8` ... `float64` scalars: little-endian fixed-size values.
    Scalar(Dtype),
    /// `str_int`: digits parsed as Python's `int()` does, into an Int64.
    StrInt,
    /// `str_float`: digits parsed as Python's `float()` does, into a Float64.
    StrFloat,
    /// `pil`: `[width u32][height u32][mode size u32][mode][raw pixels]`.
    Pil,
    /// `jpeg_array` / `jpegarray`: `[n u32][n sizes u32][images]`, n >= 1.
    JpegArray,
    /// `list[pil]`, `list[jpeg]`, `list[png]`: `[0u32][n u32][n sizes u32][elements]`.
    List(Element),
    /// `ndarray:DTYPE:SHAPE`: fixed dtype and shape, raw element bytes only.
    Tensor {
        dtype: Dtype,
        shape: Vec<u64>,
        elements: usize,
    },
    /// `ndarray` or `ndarray:DTYPE`: dtype byte (unless fixed), shape header, elements.
    NdArray(Option<Dtype>),
}

/// Why an encoding string was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EncodingError {
    /// Not an encoding this reader knows (by name): `Error::Unsupported`.
    Unsupported(String),
    /// A known encoding with arguments that `streaming` itself would refuse: `Error::Corrupt`.
    Invalid(String),
}

impl Encoding {
    /// Parses an encoding as `streaming`'s `_get_coder` does: a name, or `ndarray:` followed by
    /// `DTYPE` or `DTYPE:D0,D1,...` (only `ndarray` takes arguments).
    pub(crate) fn parse(text: &str) -> Result<Encoding, EncodingError> {
        let unsupported = || EncodingError::Unsupported(format!("MDS encoding {text:?}"));
        let (name, args) = match text.split_once(':') {
            Some((name, args)) => (name, Some(args)),
            None => (text, None),
        };
        if let Some(args) = args {
            if name != "ndarray" {
                return Err(unsupported());
            }
            return parse_ndarray_args(text, args);
        }
        Ok(match name {
            "bytes" => Encoding::Binary(None),
            "pkl" => Encoding::Binary(Some(PICKLE_MEDIA)),
            "jpeg" => Encoding::Binary(Some("image/jpeg")),
            "png" => Encoding::Binary(Some("image/png")),
            "str" => Encoding::Utf8(None),
            "json" => Encoding::Utf8(Some("application/json")),
            "str_decimal" => Encoding::StrDecimal,
            "int" => Encoding::Scalar(Dtype::I64),
            "str_int" => Encoding::StrInt,
            "str_float" => Encoding::StrFloat,
            "pil" => Encoding::Pil,
            "jpeg_array" | "jpegarray" => Encoding::JpegArray,
            "list[pil]" => Encoding::List(Element::Pil),
            "list[jpeg]" => Encoding::List(Element::Jpeg),
            "list[png]" => Encoding::List(Element::Png),
            "ndarray" => Encoding::NdArray(None),
            other => Encoding::Scalar(Dtype::from_name(other).ok_or_else(unsupported)?),
        })
    }

    /// The fixed size in bytes of every value (`column_sizes`), or `None` if variable.
    pub(crate) fn fixed_size(&self) -> Option<usize> {
        match self {
            Encoding::Scalar(dtype) => Some(dtype.size()),
            Encoding::Tensor {
                dtype, elements, ..
            } => elements.checked_mul(dtype.size()),
            _ => None,
        }
    }

    /// The Arrow field of a column named `name` stored with encoding `text` (this, parsed).
    pub(crate) fn field(&self, name: &str, text: &str) -> Field {
        let mut meta = HashMap::from([(ENCODING_KEY.to_owned(), text.to_owned())]);
        let data_type = match self {
            Encoding::Binary(media) => {
                if let Some(media) = media {
                    meta.insert(MEDIA_KEY.to_owned(), (*media).to_owned());
                }
                DataType::Binary
            }
            Encoding::Utf8(media) => {
                if let Some(media) = media {
                    meta.insert(MEDIA_KEY.to_owned(), (*media).to_owned());
                }
                DataType::Utf8
            }
            Encoding::StrDecimal => {
                meta.insert(MEDIA_KEY.to_owned(), DECIMAL_MEDIA.to_owned());
                DataType::Utf8
            }
            Encoding::Scalar(dtype) => dtype.data_type(),
            Encoding::StrInt => DataType::Int64,
            Encoding::StrFloat => DataType::Float64,
            Encoding::Pil => {
                meta.insert(MEDIA_KEY.to_owned(), PIL_MEDIA.to_owned());
                DataType::Struct(pil_fields())
            }
            Encoding::JpegArray => DataType::List(list_item(Element::Jpeg)),
            Encoding::List(element) => DataType::List(list_item(*element)),
            Encoding::Tensor {
                dtype,
                shape,
                elements,
            } => {
                let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
                meta.insert(
                    "ARROW:extension:name".to_owned(),
                    "arrow.fixed_shape_tensor".to_owned(),
                );
                meta.insert(
                    "ARROW:extension:metadata".to_owned(),
                    format!("{{\"shape\":[{}]}}", dims.join(",")),
                );
                // `parse` made sure the element count fits an i32.
                let size = i32::try_from(*elements).unwrap_or(i32::MAX);
                DataType::FixedSizeList(tensor_item(*dtype), size)
            }
            Encoding::NdArray(_) => {
                meta.insert(MEDIA_KEY.to_owned(), NDARRAY_MEDIA.to_owned());
                DataType::Struct(ndarray_fields())
            }
        };
        Field::new(name, data_type, false).with_metadata(meta)
    }
}

fn parse_ndarray_args(text: &str, args: &str) -> Result<Encoding, EncodingError> {
    // `ndarray:` is `ndarray` (Python splits an empty argument string into no arguments).
    if args.is_empty() {
        return Ok(Encoding::NdArray(None));
    }
    let invalid = |why: &str| EncodingError::Invalid(format!("MDS encoding {text:?}: {why}"));
    let mut parts = args.split(':');
    let dtype_name = parts.next().unwrap_or_default();
    let dtype = Dtype::from_name(dtype_name).ok_or_else(|| {
        EncodingError::Unsupported(format!("MDS encoding {text:?}: dtype {dtype_name:?}"))
    })?;
    let Some(shape_text) = parts.next() else {
        return Ok(Encoding::NdArray(Some(dtype)));
    };
    if parts.next().is_some() {
        return Err(invalid("more than two arguments"));
    }
    let mut shape = Vec::new();
    let mut elements: usize = 1;
    for dim in shape_text.split(',') {
        let dim = match parse_py_int(dim) {
            Ok(d) if d >= 1 => d.unsigned_abs(),
            _ => return Err(invalid("a dimension is not an integer >= 1")),
        };
        elements = usize::try_from(dim)
            .ok()
            .and_then(|d| elements.checked_mul(d))
            .filter(|&n| i32::try_from(n).is_ok() && n.checked_mul(dtype.size()).is_some())
            .ok_or_else(|| invalid("too many elements"))?;
        shape.push(dim);
    }
    Ok(Encoding::Tensor {
        dtype,
        shape,
        elements,
    })
}

/// The fields of a `pil` value: `{width: UInt32, height: UInt32, mode: Utf8, data: Binary}`.
pub(crate) fn pil_fields() -> Fields {
    Fields::from(vec![
        Field::new("width", DataType::UInt32, false),
        Field::new("height", DataType::UInt32, false),
        Field::new("mode", DataType::Utf8, false),
        Field::new("data", DataType::Binary, false),
    ])
}

/// The fields of a dynamic `ndarray` value: `{dtype: Utf8, shape: List<Int64>, data: Binary}`.
pub(crate) fn ndarray_fields() -> Fields {
    Fields::from(vec![
        Field::new("dtype", DataType::Utf8, false),
        Field::new("shape", DataType::List(shape_item()), false),
        Field::new("data", DataType::Binary, false),
    ])
}

/// The item field of a dynamic `ndarray`'s shape list.
pub(crate) fn shape_item() -> FieldRef {
    Arc::new(Field::new("item", DataType::Int64, false))
}

/// The item field of a fixed-shape tensor.
pub(crate) fn tensor_item(dtype: Dtype) -> FieldRef {
    Arc::new(Field::new("item", dtype.data_type(), false))
}

/// The item field of a list of images: Binary with the media type, or a `pil` Struct.
pub(crate) fn list_item(element: Element) -> FieldRef {
    let (data_type, media) = match element {
        Element::Jpeg => (DataType::Binary, "image/jpeg"),
        Element::Png => (DataType::Binary, "image/png"),
        Element::Pil => (DataType::Struct(pil_fields()), PIL_MEDIA),
    };
    let meta = HashMap::from([(MEDIA_KEY.to_owned(), media.to_owned())]);
    Arc::new(Field::new("item", data_type, false).with_metadata(meta))
}

/// Python's `str.strip()` whitespace (Unicode whitespace plus the ASCII separators).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Removes the underscores that Python allows in numeric literals (one between two ASCII
/// digits); `None` if one is elsewhere.
fn strip_underscores(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        if c == '_' {
            let before = i.checked_sub(1).and_then(|j| bytes.get(j));
            let after = bytes.get(i + 1);
            if !(before.is_some_and(u8::is_ascii_digit) && after.is_some_and(u8::is_ascii_digit)) {
                return None;
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Why a `str_int` text was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum IntError {
    /// Python's `int()` would refuse it too.
    Syntax,
    /// A valid integer outside Int64.
    Overflow,
}

/// Parses a base-10 integer as Python's `int(text)` does (surrounding whitespace, a sign,
/// underscores between digits), for ASCII digits.
pub(crate) fn parse_py_int(text: &str) -> Result<i64, IntError> {
    let t = text.trim_matches(py_space);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = strip_underscores(digits).ok_or(IntError::Syntax)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IntError::Syntax);
    }
    let mut acc: Option<i64> = Some(0);
    for b in digits.bytes() {
        let d = i64::from(b - b'0');
        acc = acc.and_then(|a| a.checked_mul(10)).and_then(|a| {
            if negative {
                a.checked_sub(d)
            } else {
                a.checked_add(d)
            }
        });
    }
    acc.ok_or(IntError::Overflow)
}

/// Parses a float as Python's `float(text)` does (surrounding whitespace, underscores between
/// digits, `inf`/`infinity`/`nan` in any case), correctly rounded; `None` where Python raises.
pub(crate) fn parse_py_float(text: &str) -> Option<f64> {
    let t = strip_underscores(text.trim_matches(py_space))?;
    let body = t.strip_prefix(['+', '-']).unwrap_or(&t);
    let special = ["inf", "infinity", "nan"]
        .iter()
        .any(|s| body.eq_ignore_ascii_case(s));
    // Rust's parser also takes forms Python refuses? Only the specials differ in spelling, and
    // both accept exactly `inf`, `infinity`, `nan` case-insensitively; require a digit otherwise.
    if !special && !body.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    if !special
        && !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    t.parse::<f64>().ok()
}

/// Whether `text` is a string Python's `Decimal(text)` accepts (ASCII digits).
pub(crate) fn is_py_decimal(text: &str) -> bool {
    let Some(t) = strip_underscores(text.trim_matches(py_space)) else {
        return false;
    };
    let body = t.strip_prefix(['+', '-']).unwrap_or(&t);
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return true;
    }
    if let Some(payload) = lower
        .strip_prefix("snan")
        .or_else(|| lower.strip_prefix("nan"))
    {
        return payload.bytes().all(|b| b.is_ascii_digit());
    }
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits_ok(int_part) || !digits_ok(frac_part) || int_part.len() + frac_part.len() == 0 {
        return false;
    }
    match exponent {
        None => true,
        Some(e) => {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && digits_ok(e)
        }
    }
}

/// Bytes per pixel row of `width` pixels in PIL's raw `tobytes()` layout of `mode`, for the
/// modes whose layout is known; `None` for others (not checked).
pub(crate) fn pil_row_bytes(mode: &str, width: u64) -> Option<u64> {
    let per_pixel = match mode {
        "1" => return Some(width.div_ceil(8)),
        "L" | "P" => 1,
        "LA" | "PA" | "La" | "I;16" | "I;16L" | "I;16B" | "I;16N" => 2,
        "RGB" | "YCbCr" | "LAB" | "HSV" => 3,
        "RGBA" | "RGBa" | "RGBX" | "CMYK" | "I" | "F" => 4,
        _ => return None,
    };
    width.checked_mul(per_pixel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_parse_like_streaming() {
        assert_eq!(Encoding::parse("int"), Ok(Encoding::Scalar(Dtype::I64)));
        assert_eq!(Encoding::parse("float16"), Ok(Encoding::Scalar(Dtype::F16)));
        assert_eq!(Encoding::parse("jpegarray"), Ok(Encoding::JpegArray));
        assert_eq!(
            Encoding::parse("list[png]"),
            Ok(Encoding::List(Element::Png))
        );
        assert_eq!(Encoding::parse("ndarray"), Ok(Encoding::NdArray(None)));
        assert_eq!(Encoding::parse("ndarray:"), Ok(Encoding::NdArray(None)));
        assert_eq!(
            Encoding::parse("ndarray:int16"),
            Ok(Encoding::NdArray(Some(Dtype::I16)))
        );
        let t = Encoding::parse("ndarray:float32:2,3").unwrap();
        assert_eq!(
            t,
            Encoding::Tensor {
                dtype: Dtype::F32,
                shape: vec![2, 3],
                elements: 6
            }
        );
        assert_eq!(t.fixed_size(), Some(24));
        assert!(matches!(
            Encoding::parse("int:3"),
            Err(EncodingError::Unsupported(_))
        ));
        assert!(matches!(
            Encoding::parse("list[str]"),
            Err(EncodingError::Unsupported(_))
        ));
        assert!(matches!(
            Encoding::parse("ndarray:bool"),
            Err(EncodingError::Unsupported(_))
        ));
        assert!(matches!(
            Encoding::parse("ndarray:int8:0"),
            Err(EncodingError::Invalid(_))
        ));
        assert!(matches!(
            Encoding::parse("ndarray:int8:2,"),
            Err(EncodingError::Invalid(_))
        ));
        assert!(matches!(
            Encoding::parse("ndarray:int8:2:3"),
            Err(EncodingError::Invalid(_))
        ));
        let huge = Encoding::parse("ndarray:int8:65536,65536");
        assert!(matches!(huge, Err(EncodingError::Invalid(_))));
    }

    #[test]
    fn fields_carry_metadata() {
        let f = Encoding::parse("ndarray:uint8:2,2,3")
            .unwrap()
            .field("x", "ndarray:uint8:2,2,3");
        assert_eq!(
            f.data_type(),
            &DataType::FixedSizeList(tensor_item(Dtype::U8), 12)
        );
        assert_eq!(
            f.metadata()["ARROW:extension:metadata"],
            "{\"shape\":[2,2,3]}"
        );
        assert_eq!(f.metadata()[ENCODING_KEY], "ndarray:uint8:2,2,3");
        let f = Encoding::parse("json").unwrap().field("j", "json");
        assert_eq!(f.metadata()[MEDIA_KEY], "application/json");
        assert!(!f.is_nullable());
    }

    #[test]
    fn python_ints() {
        assert_eq!(parse_py_int("42"), Ok(42));
        assert_eq!(parse_py_int(" -0042\n"), Ok(-42));
        assert_eq!(parse_py_int("+1_000"), Ok(1000));
        assert_eq!(parse_py_int("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_py_int("9223372036854775808"), Err(IntError::Overflow));
        for bad in ["", "-", "1_", "_1", "1__0", "1.0", "True", "0x10", "1 2"] {
            assert_eq!(parse_py_int(bad), Err(IntError::Syntax), "{bad:?}");
        }
    }

    #[test]
    fn python_floats() {
        assert_eq!(parse_py_float("1.5"), Some(1.5));
        assert_eq!(parse_py_float(" 1_0.2_5e1_0 "), Some(10.25e10));
        assert_eq!(parse_py_float("-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_py_float("Infinity"), Some(f64::INFINITY));
        assert!(parse_py_float("nan").is_some_and(f64::is_nan));
        assert_eq!(
            parse_py_float("-0.0").map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        assert_eq!(parse_py_float("1e-320"), Some(1e-320));
        for bad in ["", "e5", "1_", "1._5", "nan1", "0x1p3", "1.5f", "--1", "in"] {
            assert_eq!(parse_py_float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn python_decimals() {
        for good in [
            "1",
            "-0.00",
            "1E+5",
            ".5",
            "5.",
            "NaN",
            "sNaN12",
            "-Infinity",
            "1_0.0",
        ] {
            assert!(is_py_decimal(good), "{good:?}");
        }
        for bad in ["", ".", "e5", "1e", "1e+", "abc", "1.2.3", "NaN.1", "1 2"] {
            assert!(!is_py_decimal(bad), "{bad:?}");
        }
    }

    #[test]
    fn pil_rows() {
        assert_eq!(pil_row_bytes("1", 9), Some(2));
        assert_eq!(pil_row_bytes("RGB", 5), Some(15));
        assert_eq!(pil_row_bytes("I;16", 3), Some(6));
        assert_eq!(pil_row_bytes("BGR;15", 3), None);
    }
}
