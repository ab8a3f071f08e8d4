//! The Arrow form of a guideloom schema, and the guideloom schema of an Arrow one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_schema::{
    DataType as Arrow, Field as ArrowField, Fields, Schema as ArrowSchema, TimeUnit as ArrowUnit,
};
use guideloom_format::schema::{DataType, Field, Schema, TimeUnit};

use crate::{Error, Result};

/// The Arrow schema of `schema`: one Arrow field per field, with its metadata (media types,
/// extension types) and the schema's metadata.
pub fn to_arrow(schema: &Schema) -> ArrowSchema {
    let fields: Vec<ArrowField> = schema.fields.iter().map(arrow_field).collect();
    ArrowSchema::new_with_metadata(fields, hash_map(&schema.metadata))
}

pub(crate) fn arrow_field(field: &Field) -> ArrowField {
    ArrowField::new(&field.name, arrow_type(&field.data_type), field.nullable)
        .with_metadata(hash_map(&field.metadata))
}

pub(crate) fn arrow_type(data_type: &DataType) -> Arrow {
    match data_type {
        DataType::Bool => Arrow::Boolean,
        DataType::Int8 => Arrow::Int8,
        DataType::Int16 => Arrow::Int16,
        DataType::Int32 => Arrow::Int32,
        DataType::Int64 => Arrow::Int64,
        DataType::UInt8 => Arrow::UInt8,
        DataType::UInt16 => Arrow::UInt16,
        DataType::UInt32 => Arrow::UInt32,
        DataType::UInt64 => Arrow::UInt64,
        DataType::Float16 => Arrow::Float16,
        DataType::Float32 => Arrow::Float32,
        DataType::Float64 => Arrow::Float64,
        DataType::Utf8 => Arrow::Utf8,
        DataType::Binary => Arrow::Binary,
        DataType::FixedSizeBinary(n) => {
            Arrow::FixedSizeBinary(i32::try_from(*n).unwrap_or(i32::MAX))
        }
        DataType::Date32 => Arrow::Date32,
        DataType::Timestamp { unit, tz } => Arrow::Timestamp(
            match unit {
                TimeUnit::S => ArrowUnit::Second,
                TimeUnit::Ms => ArrowUnit::Millisecond,
                TimeUnit::Us => ArrowUnit::Microsecond,
                TimeUnit::Ns => ArrowUnit::Nanosecond,
            },
            tz.as_deref().map(Arc::from),
        ),
        DataType::List(item) => Arrow::List(Arc::new(arrow_field(item))),
        DataType::FixedSizeList { item, size } => Arrow::FixedSizeList(
            Arc::new(arrow_field(item)),
            i32::try_from(*size).unwrap_or(i32::MAX),
        ),
        DataType::Struct(fields) => {
            Arrow::Struct(fields.iter().map(arrow_field).collect::<Fields>())
        }
        // `DataType` is non-exhaustive for other crates, not for this match's purposes: a
        // type added there fails to compile here until it is mapped.
        #[allow(unreachable_patterns)]
        other => unreachable!("unmapped type {other}"),
    }
}

/// The guideloom schema of an Arrow schema: dictionaries stored as their values, large and
/// view strings, binaries and lists as the plain ones (the values are the same), field and
/// schema metadata kept (but Parquet's `ARROW:schema`, a second copy of the schema). Types guideloom does not store (decimals, durations, times,
/// intervals, maps, unions, nulls...) are refused by field ([`Error::Unsupported`]); the
/// result passes [`Schema::check`].
///
/// ```
/// use arrow_schema::{DataType, Field, Schema};
///
/// let arrow = Schema::new(vec![
///     Field::new("name", DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::LargeUtf8)), true),
///     Field::new("price", DataType::Decimal128(10, 2), false),
/// ]);
/// let err = guideloom_arrow::from_arrow(&arrow).unwrap_err();
/// assert!(err.to_string().contains("price"));
/// # Ok::<(), guideloom_arrow::Error>(())
/// ```
pub fn from_arrow(schema: &ArrowSchema) -> Result<Schema> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| field_from_arrow("", f))
        .collect::<Result<Vec<_>>>()?;
    let schema = Schema {
        fields,
        metadata: btree_map(schema.metadata()),
    };
    schema.check()?;
    Ok(schema)
}

fn field_from_arrow(parent: &str, field: &ArrowField) -> Result<Field> {
    let path = if parent.is_empty() {
        field.name().clone()
    } else {
        format!("{parent}.{}", field.name())
    };
    Ok(Field {
        name: field.name().clone(),
        data_type: type_from_arrow(&path, field.data_type())?,
        nullable: field.is_nullable(),
        metadata: btree_map(field.metadata()),
    })
}

fn type_from_arrow(path: &str, data_type: &Arrow) -> Result<DataType> {
    Ok(match data_type {
        Arrow::Boolean => DataType::Bool,
        Arrow::Int8 => DataType::Int8,
        Arrow::Int16 => DataType::Int16,
        Arrow::Int32 => DataType::Int32,
        Arrow::Int64 => DataType::Int64,
        Arrow::UInt8 => DataType::UInt8,
        Arrow::UInt16 => DataType::UInt16,
        Arrow::UInt32 => DataType::UInt32,
        Arrow::UInt64 => DataType::UInt64,
        Arrow::Float16 => DataType::Float16,
        Arrow::Float32 => DataType::Float32,
        Arrow::Float64 => DataType::Float64,
        Arrow::Utf8 | Arrow::LargeUtf8 | Arrow::Utf8View => DataType::Utf8,
        Arrow::Binary | Arrow::LargeBinary | Arrow::BinaryView => DataType::Binary,
        Arrow::FixedSizeBinary(n) => DataType::FixedSizeBinary(positive(path, *n)?),
        Arrow::Date32 => DataType::Date32,
        Arrow::Timestamp(unit, tz) => DataType::Timestamp {
            unit: match unit {
                ArrowUnit::Second => TimeUnit::S,
                ArrowUnit::Millisecond => TimeUnit::Ms,
                ArrowUnit::Microsecond => TimeUnit::Us,
                ArrowUnit::Nanosecond => TimeUnit::Ns,
            },
            tz: tz.as_deref().map(str::to_owned),
        },
        Arrow::List(item)
        | Arrow::LargeList(item)
        | Arrow::ListView(item)
        | Arrow::LargeListView(item) => DataType::List(Box::new(field_from_arrow(path, item)?)),
        Arrow::FixedSizeList(item, size) => DataType::FixedSizeList {
            item: Box::new(field_from_arrow(path, item)?),
            size: u32::try_from(*size)
                .map_err(|_| unsupported(path, format!("a fixed_size_list of {size} items")))?,
        },
        Arrow::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| field_from_arrow(path, f))
                .collect::<Result<Vec<_>>>()?,
        ),
        Arrow::Dictionary(_, values) => type_from_arrow(path, values)?,
        other => {
            return Err(unsupported(
                path,
                format!("Arrow type {other} is not stored by guideloom (cast the column first)"),
            ));
        }
    })
}

fn positive(path: &str, n: i32) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| unsupported(path, format!("fixed_size_binary of {n} bytes")))
}

pub(crate) fn unsupported(path: &str, detail: impl Into<String>) -> Error {
    Error::Unsupported {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

fn hash_map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn btree_map(m: &HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}
