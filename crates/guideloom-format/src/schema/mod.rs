//! Schemas: the typed columns a dataset's records carry, and the CBOR encoding of a record
//! under one (`docs/format.md`, "Schema-bound records").
//!
//! A [`Schema`] is the subset of Arrow's type system that guideloom stores: every type maps
//! to one Arrow type (the crate `guideloom-arrow` converts both ways) and to one CBOR
//! encoding of its values, so a record written under a schema reads back as an Arrow row
//! with exactly the values that went in. A schema is declared once per snapshot (the
//! manifest's `schema`) and carried by each shard (its metadata's `schema`); a writer checks
//! every record against it ([`CompiledSchema::check`]) and refuses a mismatch by field.
//!
//! Schemas serialize with serde, the same shape in JSON (manifests) and CBOR (shard
//! metadata): a field is `{"name", "type", "nullable", "metadata"}` and a type is a name
//! (`"int64"`, `"utf8"`) or a one-key map (`{"list": field}`, `{"fixed_size_list": {"item":
//! field, "size": 64}}`, `{"struct": [fields]}`, `{"timestamp": {"unit": "us", "tz": null}}`).
//!
//! ```
//! use guideloom_format::schema::{DataType, Field, Schema};
//!
//! let schema = Schema::new(vec![
//!     Field::new("label", DataType::Int64, false),
//!     Field::new("image", DataType::Binary, false).with_media("image/png"),
//!     Field::new("caption", DataType::Utf8, true),
//! ]);
//! schema.check()?;
//! let json = serde_json::to_string(&schema).unwrap();
//! assert!(json.starts_with(r#"{"fields":[{"name":"label","type":"int64","nullable":false}"#));
//! # Ok::<(), guideloom_format::schema::SchemaError>(())
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

mod evolve;
mod walk;

pub use evolve::Incompatible;
pub use walk::{CompiledSchema, Event, Mismatch, NodeId, Visitor};

/// Field-metadata key of a media field's MIME type (`image/jpeg`, `audio/wav`,
/// `application/json`, ...): what a viewer or a decoder makes of the bytes.
pub const MEDIA_KEY: &str = "guideloom.media";
/// Field-metadata key of an Arrow extension type's name (`arrow.fixed_shape_tensor`).
pub const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
/// Field-metadata key of an Arrow extension type's parameters (`{"shape":[8,8]}`).
pub const EXTENSION_METADATA_KEY: &str = "ARROW:extension:metadata";
/// Arrow's canonical extension for tensors of one shape: a `fixed_size_list` of a primitive.
pub const FIXED_SHAPE_TENSOR: &str = "arrow.fixed_shape_tensor";

/// Most fields in a schema, counting nested ones.
pub const MAX_FIELDS: usize = 10_000;
/// Deepest nesting of lists and structs.
pub const MAX_DEPTH: usize = 32;
/// Largest `fixed_size_list` or `fixed_size_binary` size.
pub const MAX_FIXED_SIZE: u32 = 1 << 28;
/// Longest field name or metadata key, in bytes.
pub const MAX_NAME_BYTES: usize = 64 << 10;
/// Longest metadata value, in bytes (pandas' schema metadata of a wide frame runs to
/// hundreds of KiB).
pub const MAX_METADATA_VALUE_BYTES: usize = 1 << 20;

/// The columns of a dataset's records.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schema {
    /// The top-level fields, in order (a record's columns).
    pub fields: Vec<Field>,
    /// Schema-level metadata, as declared (Arrow's schema metadata).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// One named, typed column (or a nested list item or struct member).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    /// The name, unique among its siblings.
    pub name: String,
    /// The type of its values.
    #[serde(rename = "type")]
    pub data_type: DataType,
    /// Whether a value may be null (or absent from a record).
    pub nullable: bool,
    /// Field metadata, as declared ([`MEDIA_KEY`], Arrow extension keys, anything else).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// The unit of a [`DataType::Timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
}

/// A value type. Each maps to one Arrow type and one CBOR encoding (`docs/format.md`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DataType {
    /// `true` / `false`.
    Bool,
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    #[serde(rename = "uint8")]
    UInt8,
    /// Unsigned 16-bit integer.
    #[serde(rename = "uint16")]
    UInt16,
    /// Unsigned 32-bit integer.
    #[serde(rename = "uint32")]
    UInt32,
    /// Unsigned 64-bit integer.
    #[serde(rename = "uint64")]
    UInt64,
    /// IEEE half precision.
    Float16,
    /// IEEE single precision.
    Float32,
    /// IEEE double precision.
    Float64,
    /// UTF-8 text.
    Utf8,
    /// Bytes.
    Binary,
    /// Bytes of exactly this length.
    FixedSizeBinary(u32),
    /// Days since the Unix epoch (signed 32-bit).
    Date32,
    /// A count of `unit`s since the Unix epoch (signed 64-bit), in time zone `tz` if given.
    Timestamp {
        /// The unit.
        unit: TimeUnit,
        /// The time zone (an IANA name or an offset), as declared.
        #[serde(default)]
        tz: Option<String>,
    },
    /// A list of any length of one item type.
    List(Box<Field>),
    /// A list of exactly `size` items.
    FixedSizeList {
        /// The item field.
        item: Box<Field>,
        /// The length of every list.
        size: u32,
    },
    /// Named members, each a field.
    Struct(Vec<Field>),
}

/// Why a schema is refused: the field (a dotted path) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema field {path:?}: {detail}")]
pub struct SchemaError {
    /// The field's path (`image`, `meta.source`, `boxes.item`); empty for the schema itself.
    pub path: String,
    /// What is wrong.
    pub detail: String,
}

impl Schema {
    /// A schema of `fields` and no metadata.
    pub fn new(fields: Vec<Field>) -> Self {
        Schema {
            fields,
            metadata: BTreeMap::new(),
        }
    }

    /// The top-level field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Refuses what no reader can hold: empty or duplicate names among siblings, more than
    /// [`MAX_FIELDS`] fields, nesting deeper than [`MAX_DEPTH`], fixed sizes over
    /// [`MAX_FIXED_SIZE`] (or zero for a binary), names and metadata keys over
    /// [`MAX_NAME_BYTES`], metadata values over [`MAX_METADATA_VALUE_BYTES`], a tensor extension whose shape does not match its list. Every
    /// schema read from a root passes through here before it is used.
    pub fn check(&self) -> Result<(), SchemaError> {
        let mut count = 0usize;
        check_metadata("", &self.metadata)?;
        check_siblings("", &self.fields, 1, &mut count)
    }

    /// Compiles the schema for checking and walking records ([`CompiledSchema`]).
    pub fn compile(&self) -> Result<CompiledSchema, SchemaError> {
        self.check()?;
        Ok(CompiledSchema::new(self))
    }
}

impl fmt::Display for Schema {
    /// One line per top-level field: `name: type` (`?` when nullable), media in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{field}")?;
        }
        Ok(())
    }
}

impl Field {
    /// A field with no metadata.
    pub fn new(name: impl Into<String>, data_type: DataType, nullable: bool) -> Self {
        Field {
            name: name.into(),
            data_type,
            nullable,
            metadata: BTreeMap::new(),
        }
    }

    /// Sets [`MEDIA_KEY`] (the MIME type of the bytes: `image/jpeg`, `audio/wav`, ...).
    pub fn with_media(mut self, mime: impl Into<String>) -> Self {
        self.metadata.insert(MEDIA_KEY.to_owned(), mime.into());
        self
    }

    /// Sets one metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// A tensor of `shape` of `element`s: Arrow's canonical `arrow.fixed_shape_tensor`, a
    /// `fixed_size_list` of the product of the shape.
    pub fn tensor(name: impl Into<String>, element: DataType, shape: &[u32]) -> Self {
        let size = shape
            .iter()
            .try_fold(1u32, |a, d| a.checked_mul(*d))
            .unwrap_or(u32::MAX);
        let dims: Vec<String> = shape.iter().map(u32::to_string).collect();
        Field::new(
            name,
            DataType::FixedSizeList {
                item: Box::new(Field::new("item", element, false)),
                size,
            },
            false,
        )
        .with_metadata(EXTENSION_NAME_KEY, FIXED_SHAPE_TENSOR)
        .with_metadata(
            EXTENSION_METADATA_KEY,
            format!("{{\"shape\":[{}]}}", dims.join(",")),
        )
    }

    /// The MIME type of a media field ([`MEDIA_KEY`]).
    pub fn media(&self) -> Option<&str> {
        self.metadata.get(MEDIA_KEY).map(String::as_str)
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.data_type)?;
        if self.nullable {
            f.write_str("?")?;
        }
        if let Some(media) = self.media() {
            write!(f, " [{media}]")?;
        }
        if self.metadata.get(EXTENSION_NAME_KEY).map(String::as_str) == Some(FIXED_SHAPE_TENSOR)
            && let Some(shape) = self.metadata.get(EXTENSION_METADATA_KEY)
        {
            write!(f, " [tensor {shape}]")?;
        }
        Ok(())
    }
}

impl DataType {
    /// The name used in JSON and in messages (`int64`, `list`, `fixed_size_list`).
    pub fn name(&self) -> &'static str {
        match self {
            DataType::Bool => "bool",
            DataType::Int8 => "int8",
            DataType::Int16 => "int16",
            DataType::Int32 => "int32",
            DataType::Int64 => "int64",
            DataType::UInt8 => "uint8",
            DataType::UInt16 => "uint16",
            DataType::UInt32 => "uint32",
            DataType::UInt64 => "uint64",
            DataType::Float16 => "float16",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
            DataType::Utf8 => "utf8",
            DataType::Binary => "binary",
            DataType::FixedSizeBinary(_) => "fixed_size_binary",
            DataType::Date32 => "date32",
            DataType::Timestamp { .. } => "timestamp",
            DataType::List(_) => "list",
            DataType::FixedSizeList { .. } => "fixed_size_list",
            DataType::Struct(_) => "struct",
        }
    }

    /// The byte width of a fixed-width number (the packed encoding of its lists), or `None`.
    pub fn packed_width(&self) -> Option<usize> {
        Some(match self {
            DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 | DataType::Float16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 | DataType::Date32 => 4,
            DataType::Int64 | DataType::UInt64 | DataType::Float64 | DataType::Timestamp { .. } => {
                8
            }
            _ => return None,
        })
    }

    /// The RFC 8746 typed-array tag of a little-endian array of this type, or `None`.
    pub fn typed_array_tag(&self) -> Option<u64> {
        Some(match self {
            DataType::UInt8 => 64,
            DataType::UInt16 => 69,
            DataType::UInt32 => 70,
            DataType::UInt64 => 71,
            DataType::Int8 => 72,
            DataType::Int16 => 77,
            DataType::Int32 | DataType::Date32 => 78,
            DataType::Int64 | DataType::Timestamp { .. } => 79,
            DataType::Float16 => 84,
            DataType::Float32 => 85,
            DataType::Float64 => 86,
            _ => return None,
        })
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::FixedSizeBinary(n) => write!(f, "fixed_size_binary[{n}]"),
            DataType::Timestamp { unit, tz } => {
                let unit = match unit {
                    TimeUnit::S => "s",
                    TimeUnit::Ms => "ms",
                    TimeUnit::Us => "us",
                    TimeUnit::Ns => "ns",
                };
                match tz {
                    Some(tz) => write!(f, "timestamp[{unit}, {tz}]"),
                    None => write!(f, "timestamp[{unit}]"),
                }
            }
            DataType::List(item) => write!(f, "list<{}>", item.data_type),
            DataType::FixedSizeList { item, size } => {
                write!(f, "fixed_size_list<{}>[{size}]", item.data_type)
            }
            DataType::Struct(fields) => {
                f.write_str("struct<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{field}")?;
                }
                f.write_str(">")
            }
            other => f.write_str(other.name()),
        }
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

fn refuse(path: &str, detail: impl Into<String>) -> SchemaError {
    SchemaError {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

fn check_metadata(path: &str, metadata: &BTreeMap<String, String>) -> Result<(), SchemaError> {
    for (k, v) in metadata {
        if k.len() > MAX_NAME_BYTES || v.len() > MAX_NAME_BYTES {
            return Err(refuse(
                path,
                format!("metadata entry over {MAX_NAME_BYTES} bytes"),
            ));
        }
    }
    Ok(())
}

fn check_siblings(
    parent: &str,
    fields: &[Field],
    depth: usize,
    count: &mut usize,
) -> Result<(), SchemaError> {
    if depth > MAX_DEPTH {
        return Err(refuse(
            parent,
            format!("nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    let mut names = HashSet::with_capacity(fields.len());
    for field in fields {
        let path = join(parent, &field.name);
        if field.name.is_empty() {
            return Err(refuse(&path, "empty field name"));
        }
        if field.name.len() > MAX_NAME_BYTES {
            return Err(refuse(
                parent,
                format!("a field name over {MAX_NAME_BYTES} bytes"),
            ));
        }
        if !names.insert(field.name.as_str()) {
            return Err(refuse(&path, "field name declared twice"));
        }
        check_field(&path, field, depth, count)?;
    }
    Ok(())
}

fn check_field(
    path: &str,
    field: &Field,
    depth: usize,
    count: &mut usize,
) -> Result<(), SchemaError> {
    *count += 1;
    if *count > MAX_FIELDS {
        return Err(refuse(path, format!("more than {MAX_FIELDS} fields")));
    }
    check_metadata(path, &field.metadata)?;
    match &field.data_type {
        DataType::FixedSizeBinary(n) if *n == 0 || *n > MAX_FIXED_SIZE => {
            return Err(refuse(path, format!("fixed_size_binary of {n} bytes")));
        }
        DataType::List(item) => {
            if depth >= MAX_DEPTH {
                return Err(refuse(
                    path,
                    format!("nested deeper than {MAX_DEPTH} levels"),
                ));
            }
            check_field(&join(path, &item.name), item, depth + 1, count)?;
        }
        DataType::FixedSizeList { item, size } => {
            if *size > MAX_FIXED_SIZE {
                return Err(refuse(path, format!("fixed_size_list of {size} items")));
            }
            if depth >= MAX_DEPTH {
                return Err(refuse(
                    path,
                    format!("nested deeper than {MAX_DEPTH} levels"),
                ));
            }
            check_field(&join(path, &item.name), item, depth + 1, count)?;
        }
        DataType::Struct(fields) => check_siblings(path, fields, depth + 1, count)?,
        _ => {}
    }
    if field.metadata.get(EXTENSION_NAME_KEY).map(String::as_str) == Some(FIXED_SHAPE_TENSOR) {
        check_tensor(path, field)?;
    }
    Ok(())
}

/// A fixed-shape tensor's shape must multiply to its list size.
fn check_tensor(path: &str, field: &Field) -> Result<(), SchemaError> {
    let DataType::FixedSizeList { size, .. } = &field.data_type else {
        return Err(refuse(
            path,
            "a fixed_shape_tensor must be a fixed_size_list",
        ));
    };
    let shape = field
        .metadata
        .get(EXTENSION_METADATA_KEY)
        .and_then(|m| tensor_shape(m))
        .ok_or_else(|| refuse(path, "a fixed_shape_tensor without a readable shape"))?;
    let product = shape.iter().try_fold(1u64, |a, d| a.checked_mul(*d));
    if product != Some(u64::from(*size)) {
        return Err(refuse(
            path,
            format!("tensor shape {shape:?} does not hold {size} items"),
        ));
    }
    Ok(())
}

/// The `shape` of a fixed-shape tensor's extension metadata (`{"shape":[8,8], ...}`).
pub fn tensor_shape(metadata: &str) -> Option<Vec<u64>> {
    #[derive(Deserialize)]
    struct Params {
        shape: Vec<u64>,
    }
    serde_json::from_str::<Params>(metadata)
        .ok()
        .map(|p| p.shape)
}

#[cfg(test)]
mod tests;
