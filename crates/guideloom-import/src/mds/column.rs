//! Decoding one MDS column's values into an Arrow array, value by value, exactly.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int64Builder, ListBuilder, StringBuilder};
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    ArrayRef, FixedSizeListArray, Float64Array, Int64Array, ListArray, PrimitiveArray, StructArray,
    UInt32Array,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, FieldRef};
use half::f16;

use super::encoding::{
    Dtype, Element, Encoding, IntError, is_py_decimal, list_item, ndarray_fields, parse_py_float,
    parse_py_int, pil_fields, pil_row_bytes, shape_item, tensor_item,
};

/// Why a value was refused.
#[derive(Debug)]
pub(crate) enum ValueError {
    /// The bytes are not a value of the encoding (as `streaming`'s writer writes it).
    Corrupt(String),
    /// A valid value that the Arrow type cannot hold (an `str_int` past Int64).
    Unsupported(String),
}

type ValueResult = Result<(), ValueError>;

fn corrupt(detail: impl Into<String>) -> ValueError {
    ValueError::Corrupt(detail.into())
}

macro_rules! prim_vec {
    ($($var:ident($native:ty, $arrow:ty)),* $(,)?) => {
        /// Values of one primitive dtype, decoded from little-endian bytes.
        #[derive(Debug)]
        pub(crate) enum PrimVec { $($var(Vec<$native>)),* }

        impl PrimVec {
            pub(crate) fn new(dtype: Dtype) -> PrimVec {
                match dtype { $(Dtype::$var => PrimVec::$var(Vec::new())),* }
            }

            /// Appends the values of `bytes` (a whole number of elements, little-endian).
            pub(crate) fn push_le(&mut self, bytes: &[u8]) {
                match self {
                    $(PrimVec::$var(v) => {
                        const N: usize = std::mem::size_of::<$native>();
                        v.extend(bytes.chunks_exact(N).filter_map(|c| {
                            <[u8; N]>::try_from(c).ok().map(<$native>::from_le_bytes)
                        }));
                    })*
                }
            }

            pub(crate) fn finish(&mut self) -> ArrayRef {
                match self {
                    $(PrimVec::$var(v) => Arc::new(PrimitiveArray::<$arrow>::new(
                        ScalarBuffer::from(std::mem::take(v)),
                        None,
                    ))),*
                }
            }
        }
    };
}

prim_vec!(
    U8(u8, UInt8Type),
    I8(i8, Int8Type),
    U16(u16, UInt16Type),
    I16(i16, Int16Type),
    F16(f16, Float16Type),
    U32(u32, UInt32Type),
    I32(i32, Int32Type),
    F32(f32, Float32Type),
    U64(u64, UInt64Type),
    I64(i64, Int64Type),
    F64(f64, Float64Type),
);

/// A little-endian u32 at `at`.
fn raw_u32_at(data: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let bytes: [u8; 4] = data.get(at..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// A little-endian u32 at `at`, as a usize.
fn u32_at(data: &[u8], at: usize) -> Option<usize> {
    usize::try_from(raw_u32_at(data, at)?).ok()
}

/// The columns of `pil` values.
#[derive(Debug, Default)]
pub(crate) struct PilCols {
    width: Vec<u32>,
    height: Vec<u32>,
    mode: StringBuilder,
    data: BinaryBuilder,
}

impl PilCols {
    /// `[width u32][height u32][mode size u32][mode][raw]`, the raw size checked for the
    /// modes whose layout is known.
    fn push(&mut self, v: &[u8]) -> ValueResult {
        let (Some(width), Some(height), Some(mode_len)) =
            (raw_u32_at(v, 0), raw_u32_at(v, 4), u32_at(v, 8))
        else {
            return Err(corrupt(format!(
                "pil value of {} bytes has no header",
                v.len()
            )));
        };
        let mode = 12usize.checked_add(mode_len).and_then(|end| v.get(12..end));
        let Some(mode) = mode else {
            return Err(corrupt(format!(
                "pil mode of {mode_len} bytes past the value's end"
            )));
        };
        let mode = std::str::from_utf8(mode).map_err(|_| corrupt("pil mode is not UTF-8"))?;
        let raw = &v[12 + mode.len()..];
        if let Some(row) = pil_row_bytes(mode, u64::from(width)) {
            let expected = row.checked_mul(u64::from(height));
            if expected != u64::try_from(raw.len()).ok() {
                return Err(corrupt(format!(
                    "pil {mode} image of {width}x{height} has {} bytes of pixels, not {}",
                    raw.len(),
                    expected.map_or_else(|| "that many".to_owned(), |e| e.to_string())
                )));
            }
        }
        self.width.push(width);
        self.height.push(height);
        self.mode.append_value(mode);
        self.data.append_value(raw);
        Ok(())
    }

    fn finish(&mut self) -> Result<StructArray, ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(std::mem::take(&mut self.width))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.height))),
            Arc::new(self.mode.finish()),
            Arc::new(self.data.finish()),
        ];
        StructArray::try_new(pil_fields(), columns, None)
    }
}

/// The element slices of a list value: `[n u32][n sizes u32][elements]`, after `skip` bytes.
fn list_elements(v: &[u8], skip: usize) -> Result<Vec<&[u8]>, ValueError> {
    let n = u32_at(v, skip).ok_or_else(|| corrupt("list value has no element count"))?;
    let mut at = n
        .checked_mul(4)
        .and_then(|t| t.checked_add(skip + 4))
        .filter(|&end| end <= v.len())
        .ok_or_else(|| {
            corrupt(format!(
                "list of {n} elements: size table past the value's end"
            ))
        })?;
    // The table fits in the value, so `n` is at most a quarter of its length.
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let size = u32_at(v, skip + 4 + 4 * i).unwrap_or(usize::MAX);
        let end = at
            .checked_add(size)
            .filter(|&end| end <= v.len())
            .ok_or_else(|| {
                corrupt(format!(
                    "list element {i} of {size} bytes past the value's end"
                ))
            })?;
        out.push(&v[at..end]);
        at = end;
    }
    if at != v.len() {
        return Err(corrupt(format!(
            "list value has {} bytes after its elements",
            v.len() - at
        )));
    }
    Ok(out)
}

/// The columns of dynamic `ndarray` values.
#[derive(Debug)]
pub(crate) struct NdCols {
    fixed: Option<Dtype>,
    dtype: StringBuilder,
    shape: ListBuilder<Int64Builder>,
    data: BinaryBuilder,
}

/// The decoder and builder of one column.
#[derive(Debug)]
pub(crate) enum Column {
    Binary(BinaryBuilder),
    Utf8(StringBuilder),
    Decimal(StringBuilder),
    Scalar(PrimVec),
    StrInt(Vec<i64>),
    StrFloat(Vec<f64>),
    Pil(Box<PilCols>),
    BinaryList {
        builder: ListBuilder<BinaryBuilder>,
        placeholder: bool,
    },
    PilList {
        offsets: Vec<i32>,
        items: Box<PilCols>,
        field: FieldRef,
    },
    Tensor {
        values: PrimVec,
        field: FieldRef,
        size: i32,
        bytes: usize,
        rows: usize,
    },
    NdArray(Box<NdCols>),
}

impl Column {
    /// An empty column of values of `encoding`.
    pub(crate) fn new(encoding: &Encoding) -> Column {
        match encoding {
            Encoding::Binary(_) => Column::Binary(BinaryBuilder::new()),
            Encoding::Utf8(_) => Column::Utf8(StringBuilder::new()),
            Encoding::StrDecimal => Column::Decimal(StringBuilder::new()),
            Encoding::Scalar(dtype) => Column::Scalar(PrimVec::new(*dtype)),
            Encoding::StrInt => Column::StrInt(Vec::new()),
            Encoding::StrFloat => Column::StrFloat(Vec::new()),
            Encoding::Pil => Column::Pil(Box::default()),
            Encoding::JpegArray => Column::BinaryList {
                builder: ListBuilder::new(BinaryBuilder::new())
                    .with_field(list_item(Element::Jpeg)),
                placeholder: false,
            },
            Encoding::List(Element::Pil) => Column::PilList {
                offsets: vec![0],
                items: Box::default(),
                field: list_item(Element::Pil),
            },
            Encoding::List(element) => Column::BinaryList {
                builder: ListBuilder::new(BinaryBuilder::new()).with_field(list_item(*element)),
                placeholder: true,
            },
            Encoding::Tensor {
                dtype, elements, ..
            } => Column::Tensor {
                values: PrimVec::new(*dtype),
                field: tensor_item(*dtype),
                size: i32::try_from(*elements).unwrap_or(i32::MAX),
                bytes: elements.saturating_mul(dtype.size()),
                rows: 0,
            },
            Encoding::NdArray(fixed) => Column::NdArray(Box::new(NdCols {
                fixed: *fixed,
                dtype: StringBuilder::new(),
                shape: ListBuilder::new(Int64Builder::new()).with_field(shape_item()),
                data: BinaryBuilder::new(),
            })),
        }
    }

    /// Decodes one value (the column's bytes of one sample) and appends it.
    pub(crate) fn push(&mut self, v: &[u8]) -> ValueResult {
        let utf8 = |v| std::str::from_utf8(v).map_err(|e| corrupt(format!("not UTF-8: {e}")));
        match self {
            Column::Binary(b) => b.append_value(v),
            Column::Utf8(b) => b.append_value(utf8(v)?),
            Column::Decimal(b) => {
                let text = utf8(v)?;
                if !is_py_decimal(text) {
                    return Err(corrupt(format!("{text:?} is not a decimal")));
                }
                b.append_value(text);
            }
            Column::Scalar(values) => values.push_le(v),
            Column::StrInt(values) => {
                let text = utf8(v)?;
                values.push(parse_py_int(text).map_err(|e| match e {
                    IntError::Syntax => corrupt(format!("{text:?} is not an integer")),
                    IntError::Overflow => {
                        ValueError::Unsupported(format!("integer {text} is outside Int64"))
                    }
                })?);
            }
            Column::StrFloat(values) => {
                let text = utf8(v)?;
                let x = parse_py_float(text);
                values.push(x.ok_or_else(|| corrupt(format!("{text:?} is not a float")))?);
            }
            Column::Pil(cols) => cols.push(v)?,
            Column::BinaryList {
                builder,
                placeholder,
            } => {
                let skip = if *placeholder {
                    match u32_at(v, 0) {
                        Some(0) => 4,
                        Some(p) => {
                            let d =
                                format!("list placeholder word is {p}, not 0 (a newer format?)");
                            return Err(ValueError::Unsupported(d));
                        }
                        None => return Err(corrupt("list value has no header")),
                    }
                } else {
                    0
                };
                let elements = list_elements(v, skip)?;
                if !*placeholder && elements.is_empty() {
                    return Err(corrupt("jpeg_array of no images (streaming refuses it)"));
                }
                for element in elements {
                    builder.values().append_value(element);
                }
                builder.append(true);
            }
            Column::PilList { offsets, items, .. } => {
                match u32_at(v, 0) {
                    Some(0) => {}
                    Some(p) => {
                        let d = format!("list placeholder word is {p}, not 0 (a newer format?)");
                        return Err(ValueError::Unsupported(d));
                    }
                    None => return Err(corrupt("list value has no header")),
                }
                for element in list_elements(v, 4)? {
                    items.push(element)?;
                }
                let count = i32::try_from(items.width.len())
                    .map_err(|_| ValueError::Unsupported("too many list elements".into()))?;
                offsets.push(count);
            }
            Column::Tensor {
                values,
                bytes,
                rows,
                ..
            } => {
                if v.len() != *bytes {
                    return Err(corrupt(format!("tensor of {} bytes, not {bytes}", v.len())));
                }
                values.push_le(v);
                *rows += 1;
            }
            Column::NdArray(nd) => {
                let NdCols {
                    fixed,
                    dtype,
                    shape,
                    data,
                } = nd.as_mut();
                let (d, shape_values, values) = split_ndarray(*fixed, v)?;
                dtype.append_value(d.name());
                for dim in shape_values {
                    shape.values().append_value(dim);
                }
                shape.append(true);
                data.append_value(values);
            }
        }
        Ok(())
    }

    /// The array of the values pushed since the last `finish`.
    pub(crate) fn finish(&mut self) -> Result<ArrayRef, ArrowError> {
        Ok(match self {
            Column::Binary(b) => Arc::new(b.finish()),
            Column::Utf8(b) | Column::Decimal(b) => Arc::new(b.finish()),
            Column::Scalar(values) => values.finish(),
            Column::StrInt(values) => Arc::new(Int64Array::from(std::mem::take(values))),
            Column::StrFloat(values) => Arc::new(Float64Array::from(std::mem::take(values))),
            Column::Pil(cols) => Arc::new(cols.finish()?),
            Column::BinaryList { builder, .. } => Arc::new(builder.finish()),
            Column::PilList {
                offsets,
                items,
                field,
            } => {
                let offsets =
                    OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, vec![0])));
                let values = Arc::new(items.finish()?);
                Arc::new(ListArray::try_new(field.clone(), offsets, values, None)?)
            }
            Column::Tensor {
                values,
                field,
                size,
                rows,
                ..
            } => {
                let len = std::mem::take(rows);
                let values = values.finish();
                Arc::new(FixedSizeListArray::try_new_with_length(
                    field.clone(),
                    *size,
                    values,
                    None,
                    len,
                )?)
            }
            Column::NdArray(nd) => {
                let NdCols {
                    dtype, shape, data, ..
                } = nd.as_mut();
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(dtype.finish()),
                    Arc::new(shape.finish()),
                    Arc::new(data.finish()),
                ];
                Arc::new(StructArray::try_new(ndarray_fields(), columns, None)?)
            }
        })
    }
}

/// Splits a dynamic `ndarray` value into its dtype, shape and element bytes:
/// `[dtype code, unless fixed][ndim << 2 | shape dtype][shape][elements]`.
fn split_ndarray(fixed: Option<Dtype>, v: &[u8]) -> Result<(Dtype, Vec<i64>, &[u8]), ValueError> {
    let mut at = 0;
    let dtype = match fixed {
        Some(d) => d,
        None => {
            let code = *v.first().ok_or_else(|| corrupt("empty ndarray value"))?;
            at = 1;
            Dtype::from_code(code).ok_or_else(|| corrupt(format!("ndarray dtype code {code}")))?
        }
    };
    let head = *v
        .get(at)
        .ok_or_else(|| corrupt("ndarray value has no shape header"))?;
    at += 1;
    let ndim = usize::from(head >> 2);
    let dim_size = 1usize << (head & 3);
    if ndim == 0 {
        return Err(corrupt(
            "ndarray of no dimensions (streaming refuses scalars)",
        ));
    }
    let mut shape = Vec::with_capacity(ndim);
    let mut elements: u64 = 1;
    for _ in 0..ndim {
        let bytes = v
            .get(at..at + dim_size)
            .ok_or_else(|| corrupt("ndarray shape past the value's end"))?;
        at += dim_size;
        let mut le = [0u8; 8];
        le[..dim_size].copy_from_slice(bytes);
        let dim = u64::from_le_bytes(le);
        if dim == 0 {
            return Err(corrupt("ndarray dimension of 0 (streaming refuses it)"));
        }
        elements = elements.saturating_mul(dim);
        shape.push(i64::try_from(dim).map_err(|_| corrupt(format!("ndarray dimension {dim}")))?);
    }
    let values = &v[at..];
    let expected = elements.saturating_mul(dtype.size() as u64);
    if u64::try_from(values.len()).ok() != Some(expected) {
        return Err(corrupt(format!(
            "ndarray {} {shape:?} has {} bytes of elements, not {expected}",
            dtype.name(),
            values.len()
        )));
    }
    Ok((dtype, shape, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, BinaryArray};

    #[test]
    fn lists_split_exactly() {
        let v = [2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 7, 8, 9];
        assert_eq!(list_elements(&v, 0).unwrap(), vec![&[7][..], &[8, 9][..]]);
        assert!(list_elements(&v[..14], 0).is_err());
        let huge = [0xff, 0xff, 0xff, 0xff, 1];
        assert!(list_elements(&huge, 0).is_err());
        let mut trailing = v.to_vec();
        trailing.push(0);
        assert!(list_elements(&trailing, 0).is_err());
    }

    #[test]
    fn ndarrays_split_exactly() {
        // int16 (code 17), 2 dims of uint8 sizes: 1 x 2.
        let v = [17, 2 << 2, 1, 2, 1, 0, 2, 0];
        let (d, shape, values) = split_ndarray(None, &v).unwrap();
        assert_eq!(
            (d, shape, values),
            (Dtype::I16, vec![1, 2], &[1, 0, 2, 0][..])
        );
        assert!(split_ndarray(None, &v[..7]).is_err());
        assert!(split_ndarray(None, &[3, 4, 1, 0]).is_err());
        assert!(split_ndarray(Some(Dtype::U8), &[0]).is_err());
        // 1 dim of uint64 size u64::MAX: the product saturates and is refused.
        let big = [8, (1 << 2) | 3, 255, 255, 255, 255, 255, 255, 255, 255, 0];
        assert!(split_ndarray(None, &big).is_err());
    }

    #[test]
    fn pil_values() {
        let mut c = Column::new(&Encoding::Pil);
        let mut v = vec![2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, b'L', 5, 6];
        c.push(&v).unwrap();
        v.push(0);
        assert!(c.push(&v).is_err());
        assert!(c.push(&[1, 0, 0, 0, 1, 0, 0, 0, 200, 0, 0, 0]).is_err());
        let a = c.finish().unwrap();
        assert_eq!(a.len(), 1);
        let s = a.as_any().downcast_ref::<StructArray>().unwrap();
        let data = s.column(3).as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(data.value(0), &[5, 6]);
    }

    #[test]
    fn placeholder_must_be_zero() {
        let mut c = Column::new(&Encoding::List(Element::Png));
        assert!(c.push(&[0, 0, 0, 0, 0, 0, 0, 0]).is_ok());
        assert!(matches!(
            c.push(&[1, 0, 0, 0, 0, 0, 0, 0]),
            Err(ValueError::Unsupported(_))
        ));
        let mut j = Column::new(&Encoding::JpegArray);
        assert!(matches!(j.push(&[0, 0, 0, 0]), Err(ValueError::Corrupt(_))));
    }
}
