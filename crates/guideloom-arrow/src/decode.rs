//! Records → an Arrow batch: the schema's walker feeds arrow-rs builders, one per node.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, FixedSizeBinaryBuilder, PrimitiveBuilder,
    StringBuilder,
};
use arrow_array::types::{
    ArrowPrimitiveType, Date32Type, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, ListArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType as Arrow, SchemaRef};
use guideloom_format::schema::{
    CompiledSchema, DataType, Event, NodeId, Schema, TimeUnit, Visitor,
};

use crate::schema::{arrow_field, to_arrow};
use crate::{Error, Result};

/// Decodes schema-bound CBOR records into one Arrow [`RecordBatch`] at a time: [`push`]
/// each record (a row), then [`finish`] the batch. Every value is checked against the
/// schema as it is decoded; a record that does not match is refused by field
/// ([`Error::Mismatch`]) and leaves the decoder unusable ([`Error::Poisoned`]) — records
/// read from a dataset were checked when they were written, so this only happens to damaged
/// or foreign bytes.
///
/// [`push`]: BatchDecoder::push
/// [`finish`]: BatchDecoder::finish
#[derive(Debug)]
pub struct BatchDecoder {
    schema: CompiledSchema,
    arrow: SchemaRef,
    cols: Builders,
    rows: usize,
    poisoned: bool,
}

impl BatchDecoder {
    /// A decoder for records of `schema`.
    pub fn new(schema: &Schema) -> Result<Self> {
        let schema = schema.compile()?;
        let cols = Builders(
            (0..schema.node_count())
                .map(|n| Col::new(&schema, n))
                .collect(),
        );
        let arrow = Arc::new(to_arrow(schema.schema()));
        Ok(BatchDecoder {
            schema,
            arrow,
            cols,
            rows: 0,
            poisoned: false,
        })
    }

    /// The Arrow schema of the batches.
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::clone(&self.arrow)
    }

    /// Rows pushed since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row was pushed since the last [`finish`](Self::finish).
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Decodes one record into the batch being built.
    pub fn push(&mut self, record: &[u8]) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let mut visitor = Feed {
            cols: &mut self.cols,
            schema: &self.schema,
        };
        if let Err(source) = self.schema.walk(record, &mut visitor) {
            self.poisoned = true;
            return Err(Error::Mismatch {
                index: self.rows,
                source,
            });
        }
        self.rows += 1;
        Ok(())
    }

    /// The batch of the rows pushed since the last call (possibly empty).
    pub fn finish(&mut self) -> Result<RecordBatch> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let columns = self
            .schema
            .top()
            .iter()
            .map(|&node| self.cols.finish(&self.schema, node))
            .collect::<Result<Vec<_>>>()?;
        let rows = std::mem::take(&mut self.rows);
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.arrow),
            columns,
            &options,
        )?)
    }
}

/// The builders, indexed by node.
#[derive(Debug)]
struct Builders(Vec<Col>);

/// One node's builder. Lists and structs keep their validity (and offsets); their children
/// are other nodes.
#[derive(Debug)]
enum Col {
    Bool(BooleanBuilder),
    I8(PrimitiveBuilder<Int8Type>),
    I16(PrimitiveBuilder<Int16Type>),
    I32(PrimitiveBuilder<Int32Type>),
    I64(PrimitiveBuilder<Int64Type>),
    U8(PrimitiveBuilder<UInt8Type>),
    U16(PrimitiveBuilder<UInt16Type>),
    U32(PrimitiveBuilder<UInt32Type>),
    U64(PrimitiveBuilder<UInt64Type>),
    F16(PrimitiveBuilder<Float16Type>),
    F32(PrimitiveBuilder<Float32Type>),
    F64(PrimitiveBuilder<Float64Type>),
    Utf8(StringBuilder),
    Binary(BinaryBuilder),
    FixedBinary(FixedSizeBinaryBuilder, i32),
    List {
        offsets: Vec<i32>,
        nulls: NullBufferBuilder,
    },
    FixedList {
        nulls: NullBufferBuilder,
    },
    Struct {
        nulls: NullBufferBuilder,
    },
}

impl Col {
    fn new(schema: &CompiledSchema, node: NodeId) -> Col {
        match schema.data_type(node) {
            DataType::Bool => Col::Bool(BooleanBuilder::new()),
            DataType::Int8 => Col::I8(PrimitiveBuilder::new()),
            DataType::Int16 => Col::I16(PrimitiveBuilder::new()),
            DataType::Int32 | DataType::Date32 => Col::I32(PrimitiveBuilder::new()),
            DataType::Int64 | DataType::Timestamp { .. } => Col::I64(PrimitiveBuilder::new()),
            DataType::UInt8 => Col::U8(PrimitiveBuilder::new()),
            DataType::UInt16 => Col::U16(PrimitiveBuilder::new()),
            DataType::UInt32 => Col::U32(PrimitiveBuilder::new()),
            DataType::UInt64 => Col::U64(PrimitiveBuilder::new()),
            DataType::Float16 => Col::F16(PrimitiveBuilder::new()),
            DataType::Float32 => Col::F32(PrimitiveBuilder::new()),
            DataType::Float64 => Col::F64(PrimitiveBuilder::new()),
            DataType::Utf8 => Col::Utf8(StringBuilder::new()),
            DataType::Binary => Col::Binary(BinaryBuilder::new()),
            DataType::FixedSizeBinary(n) => {
                let n = i32::try_from(*n).unwrap_or(i32::MAX);
                Col::FixedBinary(FixedSizeBinaryBuilder::new(n), n)
            }
            DataType::List(_) => Col::List {
                offsets: vec![0],
                nulls: NullBufferBuilder::new(0),
            },
            DataType::FixedSizeList { .. } => Col::FixedList {
                nulls: NullBufferBuilder::new(0),
            },
            _ => Col::Struct {
                nulls: NullBufferBuilder::new(0),
            },
        }
    }

    /// How many values the builder holds (the next item's position, for list offsets).
    fn len(&self) -> usize {
        match self {
            Col::Bool(b) => b.len(),
            Col::I8(b) => b.len(),
            Col::I16(b) => b.len(),
            Col::I32(b) => b.len(),
            Col::I64(b) => b.len(),
            Col::U8(b) => b.len(),
            Col::U16(b) => b.len(),
            Col::U32(b) => b.len(),
            Col::U64(b) => b.len(),
            Col::F16(b) => b.len(),
            Col::F32(b) => b.len(),
            Col::F64(b) => b.len(),
            Col::Utf8(b) => b.len(),
            Col::Binary(b) => b.len(),
            Col::FixedBinary(b, _) => b.len(),
            Col::List { offsets, .. } => offsets.len() - 1,
            Col::FixedList { nulls } | Col::Struct { nulls } => nulls.len(),
        }
    }
}

/// Appends a slot with no value: a null where the field allows it, else (only under a null
/// parent, which masks it) the type's default.
fn empty<T: ArrowPrimitiveType>(b: &mut PrimitiveBuilder<T>, nullable: bool) {
    if nullable {
        b.append_null()
    } else {
        b.append_value(T::Native::default())
    }
}

/// Appends little-endian packed items.
fn packed<T: ArrowPrimitiveType, const W: usize>(
    b: &mut PrimitiveBuilder<T>,
    bytes: &[u8],
    read: impl Fn([u8; W]) -> T::Native,
) {
    let chunks = bytes.chunks_exact(W);
    for chunk in chunks {
        let mut a = [0u8; W];
        a.copy_from_slice(chunk);
        b.append_value(read(a));
    }
}

/// Narrows a value the walker checked against the type's range.
fn narrow<T: TryFrom<i64> + Default>(v: i64) -> T {
    T::try_from(v).unwrap_or_default()
}

fn narrow_u<T: TryFrom<u64> + Default>(v: u64) -> T {
    T::try_from(v).unwrap_or_default()
}

struct Feed<'a> {
    cols: &'a mut Builders,
    schema: &'a CompiledSchema,
}

impl Visitor for Feed<'_> {
    fn visit(&mut self, node: NodeId, event: Event<'_>) {
        let nullable = self.nullable(node);
        // The child's length, for list offsets (read before the mutable borrow).
        let child_len = match (&self.cols.0[node], event) {
            (Col::List { .. }, Event::Null | Event::ListEnd) => {
                self.cols.0[self.schema.children(node)[0]].len()
            }
            _ => 0,
        };
        let col = &mut self.cols.0[node];
        #[allow(clippy::cast_possible_truncation)]
        match (col, event) {
            (Col::List { offsets, nulls }, Event::Null) => {
                offsets.push(i32::try_from(child_len).unwrap_or(i32::MAX));
                nulls.append(!nullable);
            }
            (Col::List { offsets, nulls }, Event::ListEnd) => {
                offsets.push(i32::try_from(child_len).unwrap_or(i32::MAX));
                nulls.append_non_null();
            }
            (Col::List { .. } | Col::FixedList { .. }, Event::ListStart) => {}
            (Col::FixedList { nulls }, Event::ListEnd) => nulls.append_non_null(),
            (Col::FixedList { nulls } | Col::Struct { nulls }, Event::Null) => {
                nulls.append(!nullable)
            }
            (Col::Struct { nulls }, Event::StructStart) => nulls.append_non_null(),
            (Col::Bool(b), Event::Bool(v)) => b.append_value(v),
            (Col::Bool(b), Event::Null) => {
                if nullable {
                    b.append_null()
                } else {
                    b.append_value(false)
                }
            }
            (Col::Utf8(b), Event::Text(v)) => b.append_value(v),
            (Col::Utf8(b), Event::Null) => {
                if nullable {
                    b.append_null()
                } else {
                    b.append_value("")
                }
            }
            (Col::Binary(b), Event::Bytes(v)) => b.append_value(v),
            (Col::Binary(b), Event::Null) => {
                if nullable {
                    b.append_null()
                } else {
                    b.append_value(b"")
                }
            }
            (Col::FixedBinary(b, _), Event::Bytes(v)) => {
                // The walker checked the length.
                let _ = b.append_value(v);
            }
            (Col::FixedBinary(b, n), Event::Null) => {
                if nullable {
                    b.append_null();
                } else {
                    let _ = b.append_value(vec![0u8; usize::try_from(*n).unwrap_or(0)]);
                }
            }
            (Col::I8(b), Event::Int(v)) => b.append_value(narrow(v)),
            (Col::I16(b), Event::Int(v)) => b.append_value(narrow(v)),
            (Col::I32(b), Event::Int(v)) => b.append_value(narrow(v)),
            (Col::I64(b), Event::Int(v)) => b.append_value(v),
            (Col::U8(b), Event::UInt(v)) => b.append_value(narrow_u(v)),
            (Col::U16(b), Event::UInt(v)) => b.append_value(narrow_u(v)),
            (Col::U32(b), Event::UInt(v)) => b.append_value(narrow_u(v)),
            (Col::U64(b), Event::UInt(v)) => b.append_value(v),
            // Exact: the walker checked that the float type holds the value.
            (Col::F16(b), Event::Float(v)) => b.append_value(half::f16::from_f64(v)),
            (Col::F32(b), Event::Float(v)) => b.append_value(v as f32),
            (Col::F64(b), Event::Float(v)) => b.append_value(v),
            (Col::I8(b), Event::Packed(p)) => packed(b, p, i8::from_le_bytes),
            (Col::I16(b), Event::Packed(p)) => packed(b, p, i16::from_le_bytes),
            (Col::I32(b), Event::Packed(p)) => packed(b, p, i32::from_le_bytes),
            (Col::I64(b), Event::Packed(p)) => packed(b, p, i64::from_le_bytes),
            (Col::U8(b), Event::Packed(p)) => b.append_slice(p),
            (Col::U16(b), Event::Packed(p)) => packed(b, p, u16::from_le_bytes),
            (Col::U32(b), Event::Packed(p)) => packed(b, p, u32::from_le_bytes),
            (Col::U64(b), Event::Packed(p)) => packed(b, p, u64::from_le_bytes),
            (Col::F16(b), Event::Packed(p)) => packed(b, p, half::f16::from_le_bytes),
            (Col::F32(b), Event::Packed(p)) => packed(b, p, f32::from_le_bytes),
            (Col::F64(b), Event::Packed(p)) => packed(b, p, f64::from_le_bytes),
            (Col::I8(b), Event::Null) => empty(b, nullable),
            (Col::I16(b), Event::Null) => empty(b, nullable),
            (Col::I32(b), Event::Null) => empty(b, nullable),
            (Col::I64(b), Event::Null) => empty(b, nullable),
            (Col::U8(b), Event::Null) => empty(b, nullable),
            (Col::U16(b), Event::Null) => empty(b, nullable),
            (Col::U32(b), Event::Null) => empty(b, nullable),
            (Col::U64(b), Event::Null) => empty(b, nullable),
            (Col::F16(b), Event::Null) => empty(b, nullable),
            (Col::F32(b), Event::Null) => empty(b, nullable),
            (Col::F64(b), Event::Null) => empty(b, nullable),
            // The walker only sends a node the events of its type.
            (_, event) => debug_assert!(false, "event {event:?} for node {node}"),
        }
    }
}

impl Feed<'_> {
    fn nullable(&self, node: NodeId) -> bool {
        self.schema.nullable(node)
    }
}

impl Builders {
    /// The array of `node` (and its children), emptying the builders.
    fn finish(&mut self, schema: &CompiledSchema, node: NodeId) -> Result<ArrayRef> {
        let children: Vec<NodeId> = schema.children(node).to_vec();
        let data_type = schema.data_type(node).clone();
        let array: ArrayRef = match &mut self.0[node] {
            Col::Bool(b) => Arc::new(b.finish()),
            Col::I8(b) => Arc::new(b.finish()),
            Col::I16(b) => Arc::new(b.finish()),
            Col::I32(b) => {
                let a = b.finish();
                match data_type {
                    DataType::Date32 => Arc::new(a.reinterpret_cast::<Date32Type>()),
                    _ => Arc::new(a),
                }
            }
            Col::I64(b) => {
                let a = b.finish();
                match &data_type {
                    DataType::Timestamp { unit, tz } => {
                        let tz = tz.as_deref().map(Arc::<str>::from);
                        match unit {
                            TimeUnit::S => Arc::new(
                                a.reinterpret_cast::<TimestampSecondType>()
                                    .with_timezone_opt(tz),
                            ),
                            TimeUnit::Ms => Arc::new(
                                a.reinterpret_cast::<TimestampMillisecondType>()
                                    .with_timezone_opt(tz),
                            ),
                            TimeUnit::Us => Arc::new(
                                a.reinterpret_cast::<TimestampMicrosecondType>()
                                    .with_timezone_opt(tz),
                            ),
                            TimeUnit::Ns => Arc::new(
                                a.reinterpret_cast::<TimestampNanosecondType>()
                                    .with_timezone_opt(tz),
                            ),
                        }
                    }
                    _ => Arc::new(a),
                }
            }
            Col::U8(b) => Arc::new(b.finish()),
            Col::U16(b) => Arc::new(b.finish()),
            Col::U32(b) => Arc::new(b.finish()),
            Col::U64(b) => Arc::new(b.finish()),
            Col::F16(b) => Arc::new(b.finish()),
            Col::F32(b) => Arc::new(b.finish()),
            Col::F64(b) => Arc::new(b.finish()),
            Col::Utf8(b) => Arc::new(b.finish()),
            Col::Binary(b) => Arc::new(b.finish()),
            Col::FixedBinary(b, _) => Arc::new(b.finish()),
            Col::List { offsets, nulls } => {
                let offsets =
                    OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, vec![0])));
                let nulls = nulls.finish();
                let DataType::List(item) = &data_type else {
                    unreachable!("a list node")
                };
                let values = self.finish(schema, children[0])?;
                Arc::new(ListArray::try_new(
                    Arc::new(arrow_field(item)),
                    offsets,
                    values,
                    nulls,
                )?)
            }
            Col::FixedList { nulls } => {
                let nulls = nulls.finish();
                let DataType::FixedSizeList { item, size } = &data_type else {
                    unreachable!("a fixed-size list node")
                };
                let values = self.finish(schema, children[0])?;
                let size = i32::try_from(*size).unwrap_or(i32::MAX);
                Arc::new(FixedSizeListArray::try_new(
                    Arc::new(arrow_field(item)),
                    size,
                    values,
                    nulls,
                )?)
            }
            Col::Struct { nulls } => {
                let nulls = nulls.finish();
                let Arrow::Struct(fields) = crate::schema::arrow_type(&data_type) else {
                    unreachable!("a struct node")
                };
                let arrays = children
                    .iter()
                    .map(|&c| self.finish(schema, c))
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(StructArray::try_new(fields, arrays, nulls)?)
            }
        };
        debug_assert!(array.len() <= i32::MAX as usize);
        Ok(array)
    }
}
