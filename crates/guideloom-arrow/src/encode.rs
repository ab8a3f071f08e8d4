//! An Arrow batch's rows → schema-bound CBOR records, exactly.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Date32Type, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::ToByteSlice;
use arrow_schema::{DataType as Arrow, SchemaRef, TimeUnit as ArrowUnit};
use ciborium_ll::{Encoder, Header};
use guideloom_format::schema::{DataType, Field, Schema};

use crate::schema::{from_arrow, to_arrow};
use crate::{Error, Result};

/// Encodes the rows of Arrow batches as the records of a dataset with the batches' schema:
/// one CBOR map per row, keys in schema order, a null as CBOR null, lists of fixed-width
/// numbers packed little-endian under their RFC 8746 tag (`docs/format.md`). Each record
/// passes [`CompiledSchema::check`](guideloom_format::schema::CompiledSchema::check) and
/// reads back through [`BatchDecoder`](crate::BatchDecoder) as the row it came from.
#[derive(Debug)]
pub struct RowEncoder {
    schema: Schema,
    arrow: SchemaRef,
}

impl RowEncoder {
    /// An encoder for batches of `arrow` ([`from_arrow`] decides the stored schema).
    pub fn new(arrow: &arrow_schema::Schema) -> Result<Self> {
        let schema = from_arrow(arrow)?;
        let arrow = Arc::new(to_arrow(&schema));
        Ok(RowEncoder { schema, arrow })
    }

    /// The stored schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The Arrow schema of prepared batches (and of decoded ones).
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::clone(&self.arrow)
    }

    /// `batch` with its columns in the stored types: dictionaries as their values, large and
    /// view types as the plain ones (the values unchanged). Call once per batch before
    /// [`encode`](Self::encode).
    pub fn prepare(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        if batch.num_columns() != self.arrow.fields().len() {
            return Err(Error::Arrow(arrow_schema::ArrowError::SchemaError(
                format!(
                    "a batch of {} columns for a schema of {}",
                    batch.num_columns(),
                    self.arrow.fields().len()
                ),
            )));
        }
        let columns = batch
            .columns()
            .iter()
            .zip(self.arrow.fields())
            .map(|(column, field)| {
                if column.data_type() == field.data_type() {
                    Ok(Arc::clone(column))
                } else {
                    arrow_cast::cast(column, field.data_type()).map_err(Error::from)
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.arrow),
            columns,
            &options,
        )?)
    }

    /// Appends the record of row `row` of a [prepared](Self::prepare) `batch` to `out`.
    pub fn encode(&self, batch: &RecordBatch, row: usize, out: &mut Vec<u8>) -> Result<()> {
        if !Arc::ptr_eq(&batch.schema(), &self.arrow)
            && batch.schema().fields() != self.arrow.fields()
        {
            return Err(Error::Arrow(arrow_schema::ArrowError::SchemaError(
                "the batch was not prepared by this encoder".to_owned(),
            )));
        }
        let mut enc = Encoder::from(out);
        head(&mut enc, Header::Map(Some(self.schema.fields.len())));
        for (field, column) in self.schema.fields.iter().zip(batch.columns()) {
            text(&mut enc, &field.name);
            value(&mut enc, field, column.as_ref(), row)?;
        }
        Ok(())
    }
}

type Enc<'a> = Encoder<&'a mut Vec<u8>>;

fn head(enc: &mut Enc<'_>, header: Header) {
    // Writing to a Vec cannot fail.
    let _ = enc.push(header);
}

fn text(enc: &mut Enc<'_>, s: &str) {
    let _ = enc.text(s, None);
}

fn bytes(enc: &mut Enc<'_>, b: &[u8]) {
    let _ = enc.bytes(b, None);
}

fn int(enc: &mut Enc<'_>, v: i64) {
    head(
        enc,
        match u64::try_from(v) {
            Ok(v) => Header::Positive(v),
            Err(_) => Header::Negative(!(v as u64)),
        },
    );
}

fn prim<T: ArrowPrimitiveType>(array: &dyn Array, row: usize) -> T::Native {
    array.as_primitive::<T>().value(row)
}

/// One value of `field` from `array` at `row`.
fn value(enc: &mut Enc<'_>, field: &Field, array: &dyn Array, row: usize) -> Result<()> {
    if array.is_null(row) {
        head(enc, Header::Simple(ciborium_ll::simple::NULL));
        return Ok(());
    }
    match &field.data_type {
        DataType::Bool => head(
            enc,
            Header::Simple(if array.as_boolean().value(row) {
                ciborium_ll::simple::TRUE
            } else {
                ciborium_ll::simple::FALSE
            }),
        ),
        DataType::Int8 => int(enc, prim::<Int8Type>(array, row).into()),
        DataType::Int16 => int(enc, prim::<Int16Type>(array, row).into()),
        DataType::Int32 => int(enc, prim::<Int32Type>(array, row).into()),
        DataType::Date32 => int(enc, prim::<Date32Type>(array, row).into()),
        DataType::Int64 => int(enc, prim::<Int64Type>(array, row)),
        DataType::Timestamp { .. } => int(enc, timestamp(array, row)),
        DataType::UInt8 => head(enc, Header::Positive(prim::<UInt8Type>(array, row).into())),
        DataType::UInt16 => head(enc, Header::Positive(prim::<UInt16Type>(array, row).into())),
        DataType::UInt32 => head(enc, Header::Positive(prim::<UInt32Type>(array, row).into())),
        DataType::UInt64 => head(enc, Header::Positive(prim::<UInt64Type>(array, row))),
        DataType::Float16 => head(enc, Header::Float(prim::<Float16Type>(array, row).to_f64())),
        DataType::Float32 => head(enc, Header::Float(prim::<Float32Type>(array, row).into())),
        DataType::Float64 => head(enc, Header::Float(prim::<Float64Type>(array, row))),
        DataType::Utf8 => text(enc, array.as_string::<i32>().value(row)),
        DataType::Binary => bytes(enc, array.as_binary::<i32>().value(row)),
        DataType::FixedSizeBinary(_) => bytes(enc, array.as_fixed_size_binary().value(row)),
        DataType::List(item) => {
            let list = array.as_list::<i32>();
            let offsets = list.value_offsets();
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            items(enc, item, list.values().as_ref(), start, end)?;
        }
        DataType::FixedSizeList { item, size } => {
            let list = array.as_fixed_size_list();
            let start = list.value_offset(row) as usize;
            items(
                enc,
                item,
                list.values().as_ref(),
                start,
                start + *size as usize,
            )?;
        }
        DataType::Struct(fields) => {
            let array = array.as_struct();
            head(enc, Header::Map(Some(fields.len())));
            for (member, column) in fields.iter().zip(array.columns()) {
                text(enc, &member.name);
                value(enc, member, column.as_ref(), row)?;
            }
        }
        other => {
            return Err(Error::Unsupported {
                path: field.name.clone(),
                detail: format!("no encoding for {other}"),
            });
        }
    }
    Ok(())
}

/// The items `start..end` of a list's values: packed little-endian bytes under the type's
/// RFC 8746 tag when the items are fixed-width numbers without nulls, else an array.
fn items(
    enc: &mut Enc<'_>,
    item: &Field,
    values: &dyn Array,
    start: usize,
    end: usize,
) -> Result<()> {
    let no_nulls = values.null_count() == 0 || (start..end).all(|i| !values.is_null(i));
    if no_nulls
        && let (Some(tag), Some(packed)) = (
            item.data_type.typed_array_tag(),
            packed(&item.data_type, values, start, end),
        )
    {
        head(enc, Header::Tag(tag));
        bytes(enc, packed);
        return Ok(());
    }
    head(enc, Header::Array(Some(end - start)));
    for i in start..end {
        value(enc, item, values, i)?;
    }
    Ok(())
}

/// The little-endian bytes of items `start..end` of fixed-width numbers (Arrow buffers are
/// little-endian on every platform arrow-rs supports), or `None` for other types.
fn packed<'a>(
    item: &DataType,
    values: &'a dyn Array,
    start: usize,
    end: usize,
) -> Option<&'a [u8]> {
    fn of<T: ArrowPrimitiveType>(values: &dyn Array, start: usize, end: usize) -> &[u8] {
        values.as_primitive::<T>().values()[start..end].to_byte_slice()
    }
    Some(match item {
        DataType::Int8 => of::<Int8Type>(values, start, end),
        DataType::Int16 => of::<Int16Type>(values, start, end),
        DataType::Int32 => of::<Int32Type>(values, start, end),
        DataType::Date32 => of::<Date32Type>(values, start, end),
        DataType::Int64 => of::<Int64Type>(values, start, end),
        DataType::UInt8 => of::<UInt8Type>(values, start, end),
        DataType::UInt16 => of::<UInt16Type>(values, start, end),
        DataType::UInt32 => of::<UInt32Type>(values, start, end),
        DataType::UInt64 => of::<UInt64Type>(values, start, end),
        DataType::Float16 => of::<Float16Type>(values, start, end),
        DataType::Float32 => of::<Float32Type>(values, start, end),
        DataType::Float64 => of::<Float64Type>(values, start, end),
        DataType::Timestamp { .. } => match values.data_type() {
            Arrow::Timestamp(ArrowUnit::Second, _) => of::<TimestampSecondType>(values, start, end),
            Arrow::Timestamp(ArrowUnit::Millisecond, _) => {
                of::<TimestampMillisecondType>(values, start, end)
            }
            Arrow::Timestamp(ArrowUnit::Microsecond, _) => {
                of::<TimestampMicrosecondType>(values, start, end)
            }
            _ => of::<TimestampNanosecondType>(values, start, end),
        },
        _ => return None,
    })
}

/// A timestamp's count of units, whatever the unit.
fn timestamp(array: &dyn Array, row: usize) -> i64 {
    match array.data_type() {
        Arrow::Timestamp(ArrowUnit::Second, _) => prim::<TimestampSecondType>(array, row),
        Arrow::Timestamp(ArrowUnit::Millisecond, _) => prim::<TimestampMillisecondType>(array, row),
        Arrow::Timestamp(ArrowUnit::Microsecond, _) => prim::<TimestampMicrosecondType>(array, row),
        _ => prim::<TimestampNanosecondType>(array, row),
    }
}
