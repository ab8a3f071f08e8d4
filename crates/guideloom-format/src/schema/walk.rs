//! Walking a CBOR record under a schema: one pass over the bytes that checks every value
//! against its field and hands it to a [`Visitor`] (a no-op to check a record, Arrow
//! builders in `guideloom-arrow`). Nothing is allocated per value; byte and text values are
//! borrowed from the record.
//!
//! Every byte is untrusted: a count in a header is never used to allocate, nesting follows
//! the schema (so it is bounded by [`MAX_DEPTH`](super::MAX_DEPTH)), and a record that ends
//! early, has bytes after its end or holds a value its field cannot is refused by path.

use std::collections::HashMap;

use ciborium_ll::Header;

use super::{DataType, Field, Schema, join};

/// A node of a compiled schema: a field, a list item or a struct member, numbered in
/// depth-first order from 0 (the first top-level field).
pub type NodeId = usize;

/// One value (or structure mark) of a record, handed to a [`Visitor`] with its node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// No value: a null, an absent field, or a slot under a null struct or fixed-size list
    /// (then also for fields that are not nullable; a builder fills such a slot).
    Null,
    /// A `bool`.
    Bool(bool),
    /// A signed integer, date or timestamp, in its type's range.
    Int(i64),
    /// An unsigned integer, in its type's range.
    UInt(u64),
    /// A float, exactly representable in its type.
    Float(f64),
    /// A `binary` or `fixed_size_binary` value (of the right length).
    Bytes(&'a [u8]),
    /// A `utf8` value.
    Text(&'a str),
    /// The items of a list of fixed-width numbers as little-endian bytes (a whole number of
    /// items), given to the item node between the list's `ListStart` and `ListEnd`.
    Packed(&'a [u8]),
    /// A list value starts (its items follow at the item node).
    ListStart,
    /// The list value started last ends.
    ListEnd,
    /// A struct value starts (one event per member follows, in member order).
    StructStart,
}

/// Receives a record's values in order.
pub trait Visitor {
    /// `event` for `node`.
    fn visit(&mut self, node: NodeId, event: Event<'_>);
}

/// A visitor that does nothing: [`CompiledSchema::check`].
#[derive(Debug)]
struct Check;

impl Visitor for Check {
    fn visit(&mut self, _: NodeId, _: Event<'_>) {}
}

/// Why a record does not match its schema: the field's path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field {path:?}: {detail}")]
pub struct Mismatch {
    /// The field's dotted path (`label`, `meta.source`, `boxes.item`); empty for the record.
    pub path: String,
    /// What is wrong.
    pub detail: String,
}

#[derive(Debug)]
struct Node {
    /// The field's own name (a name may hold dots: the path is for messages only).
    name: String,
    path: String,
    data_type: DataType,
    nullable: bool,
    /// Struct members, or the one list item.
    children: Vec<NodeId>,
    /// The members' names, for structs with many members.
    lookup: Option<HashMap<String, usize>>,
}

/// A schema prepared for walking records: [`Schema::compile`].
#[derive(Debug)]
pub struct CompiledSchema {
    schema: Schema,
    nodes: Vec<Node>,
    top: Vec<NodeId>,
    top_lookup: Option<HashMap<String, usize>>,
}

/// Structs with more members than this look names up in a map.
const LINEAR_LOOKUP: usize = 16;

fn lookup(fields: &[Field]) -> Option<HashMap<String, usize>> {
    (fields.len() > LINEAR_LOOKUP).then(|| {
        fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.clone(), i))
            .collect()
    })
}

impl CompiledSchema {
    pub(super) fn new(schema: &Schema) -> Self {
        let mut nodes = Vec::new();
        let top = schema
            .fields
            .iter()
            .map(|f| add(&mut nodes, "", f))
            .collect();
        CompiledSchema {
            schema: schema.clone(),
            nodes,
            top,
            top_lookup: lookup(&schema.fields),
        }
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// How many nodes there are (node ids are `0..len`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The top-level fields' nodes, in order.
    pub fn top(&self) -> &[NodeId] {
        &self.top
    }

    /// A node's children: struct members in order, or a list's item.
    pub fn children(&self, node: NodeId) -> &[NodeId] {
        &self.nodes[node].children
    }

    /// A node's type.
    pub fn data_type(&self, node: NodeId) -> &DataType {
        &self.nodes[node].data_type
    }

    /// Whether a node's field is nullable.
    pub fn nullable(&self, node: NodeId) -> bool {
        self.nodes[node].nullable
    }

    /// A node's dotted path.
    pub fn path(&self, node: NodeId) -> &str {
        &self.nodes[node].path
    }

    /// Checks one CBOR record against the schema.
    ///
    /// ```
    /// use ciborium::cbor;
    /// use guideloom_format::schema::{DataType, Field, Schema};
    ///
    /// let schema = Schema::new(vec![Field::new("label", DataType::UInt8, false)]).compile()?;
    /// let mut record = Vec::new();
    /// ciborium::into_writer(&cbor!({"label" => 7}).unwrap(), &mut record).unwrap();
    /// assert!(schema.check(&record).is_ok());
    /// record.clear();
    /// ciborium::into_writer(&cbor!({"label" => 300}).unwrap(), &mut record).unwrap();
    /// assert_eq!(schema.check(&record).unwrap_err().path, "label");
    /// # Ok::<(), guideloom_format::schema::SchemaError>(())
    /// ```
    pub fn check(&self, record: &[u8]) -> Result<(), Mismatch> {
        self.walk(record, &mut Check)
    }

    /// Walks one CBOR record, giving every value to `visitor` in schema order: for each
    /// top-level field in order, its value (or [`Event::Null`] when absent). On an error the
    /// visitor may have seen part of the record.
    pub fn walk(&self, record: &[u8], visitor: &mut impl Visitor) -> Result<(), Mismatch> {
        let mut cursor = Cursor {
            bytes: record,
            pos: 0,
        };
        let header = cursor.header("")?;
        let Header::Map(len) = header else {
            return Err(mismatch(
                "",
                format!("the record is {}, not a map", what(&header)),
            ));
        };
        self.members(
            &mut cursor,
            "",
            len,
            &self.top,
            self.top_lookup.as_ref(),
            visitor,
        )?;
        if cursor.pos != record.len() {
            return Err(mismatch(
                "",
                format!("{} bytes after the record", record.len() - cursor.pos),
            ));
        }
        Ok(())
    }

    /// The members of a map (the record or a struct value): values in member order, absent
    /// members as nulls.
    fn members(
        &self,
        cursor: &mut Cursor<'_>,
        path: &str,
        len: Option<usize>,
        members: &[NodeId],
        lookup: Option<&HashMap<String, usize>>,
        visitor: &mut impl Visitor,
    ) -> Result<(), Mismatch> {
        // Values arrive in the record's key order, visitors expect member order: the common
        // case (keys in member order, as this crate's writers write them) visits at once;
        // otherwise the value's place is remembered and the map is walked again in order.
        let mut seen = Seen::new(members.len());
        let mut next = 0usize;
        let mut out_of_order: Vec<(usize, usize)> = Vec::new();
        let mut read = 0usize;
        loop {
            if len.is_some_and(|n| read == n) {
                break;
            }
            let header = cursor.header(path)?;
            if len.is_none() && header == Header::Break {
                break;
            }
            read += 1;
            let Header::Text(Some(key_len)) = header else {
                return Err(mismatch(
                    path,
                    format!("a map key is {}, not text", what(&header)),
                ));
            };
            let key = cursor.text(path, key_len)?;
            let index = if members.get(next).is_some_and(|&n| self.name(n) == key) {
                next
            } else {
                match lookup {
                    Some(map) => map.get(key).copied(),
                    None => members.iter().position(|&n| self.name(n) == key),
                }
                .ok_or_else(|| mismatch(&join(path, key), "not a field of the schema"))?
            };
            if !seen.insert(index) {
                return Err(mismatch(&join(path, key), "key appears twice"));
            }
            if index == next && out_of_order.is_empty() {
                // Members before `next` are all seen: fill nothing, visit now.
                self.value(cursor, members[index], visitor)?;
                next += 1;
            } else {
                out_of_order.push((index, cursor.pos));
                self.skip_value(cursor, members[index])?;
            }
        }
        if out_of_order.is_empty() {
            for &node in &members[next..] {
                self.absent(node, visitor)?;
            }
            return Ok(());
        }
        // Walk again in member order from the remembered places.
        out_of_order.sort_unstable();
        let end = cursor.pos;
        let mut remembered = out_of_order.into_iter().peekable();
        for (index, &node) in members.iter().enumerate().skip(next) {
            match remembered.next_if(|&(i, _)| i == index) {
                Some((_, at)) => {
                    let mut again = Cursor {
                        bytes: cursor.bytes,
                        pos: at,
                    };
                    self.value(&mut again, node, visitor)?;
                }
                None => self.absent(node, visitor)?,
            }
        }
        cursor.pos = end;
        Ok(())
    }

    fn name(&self, node: NodeId) -> &str {
        &self.nodes[node].name
    }

    /// A member the map does not hold: null if its field allows it.
    fn absent(&self, node: NodeId, visitor: &mut impl Visitor) -> Result<(), Mismatch> {
        let n = &self.nodes[node];
        if !n.nullable {
            return Err(mismatch(&n.path, "missing (the field is not nullable)"));
        }
        self.null(node, visitor);
        Ok(())
    }

    /// A null at `node`, and the slots beneath it that Arrow keeps under a null (struct
    /// members, fixed-size list items).
    fn null(&self, node: NodeId, visitor: &mut impl Visitor) {
        visitor.visit(node, Event::Null);
        let n = &self.nodes[node];
        match &n.data_type {
            DataType::Struct(_) => {
                for &child in &n.children {
                    self.null(child, visitor);
                }
            }
            DataType::FixedSizeList { size, .. } => {
                for _ in 0..*size {
                    self.null(n.children[0], visitor);
                }
            }
            _ => {}
        }
    }

    /// Skips a value (checked, not visited): the first pass over out-of-order keys.
    fn skip_value(&self, cursor: &mut Cursor<'_>, node: NodeId) -> Result<(), Mismatch> {
        self.value(cursor, node, &mut Check)
    }

    /// One value of `node`.
    fn value(
        &self,
        cursor: &mut Cursor<'_>,
        node: NodeId,
        visitor: &mut impl Visitor,
    ) -> Result<(), Mismatch> {
        let n = &self.nodes[node];
        let path = n.path.as_str();
        let header = cursor.header(path)?;
        if header == Header::Simple(ciborium_ll::simple::NULL) {
            if !n.nullable {
                return Err(mismatch(path, "null (the field is not nullable)"));
            }
            self.null(node, visitor);
            return Ok(());
        }
        let wrong = |header: &Header| {
            mismatch(
                path,
                format!("{} where {} was declared", what(header), n.data_type),
            )
        };
        let event = match (&n.data_type, header) {
            (DataType::Bool, Header::Simple(s)) if s == ciborium_ll::simple::FALSE => {
                Event::Bool(false)
            }
            (DataType::Bool, Header::Simple(s)) if s == ciborium_ll::simple::TRUE => {
                Event::Bool(true)
            }
            (t, Header::Positive(v)) if t.is_integer() => int_event(path, t, i128::from(v))?,
            (t, Header::Negative(v)) if t.is_integer() => int_event(path, t, -1 - i128::from(v))?,
            (t @ (DataType::Float16 | DataType::Float32 | DataType::Float64), h) => {
                Event::Float(float_value(t, h).ok_or_else(|| wrong(&h))?)
            }
            (DataType::Utf8, Header::Text(Some(len))) => Event::Text(cursor.text(path, len)?),
            (DataType::Binary, Header::Bytes(Some(len))) => Event::Bytes(cursor.take(path, len)?),
            (DataType::FixedSizeBinary(size), Header::Bytes(Some(len))) => {
                if u64::try_from(len) != Ok(u64::from(*size)) {
                    return Err(mismatch(
                        path,
                        format!("{len} bytes where {size} were declared"),
                    ));
                }
                Event::Bytes(cursor.take(path, len)?)
            }
            (DataType::List(_) | DataType::FixedSizeList { .. }, h) => {
                return self.list(cursor, node, h, visitor);
            }
            (DataType::Struct(_), Header::Map(len)) => {
                visitor.visit(node, Event::StructStart);
                let lookup = n.lookup.as_ref();
                return self.members(cursor, path, len, &n.children, lookup, visitor);
            }
            (_, h @ (Header::Bytes(None) | Header::Text(None))) => {
                return Err(mismatch(
                    path,
                    format!("indefinite-length {} is not supported", what(&h)),
                ));
            }
            (_, h) => return Err(wrong(&h)),
        };
        visitor.visit(node, event);
        Ok(())
    }

    /// A list value (an array, or packed little-endian bytes for fixed-width items).
    fn list(
        &self,
        cursor: &mut Cursor<'_>,
        node: NodeId,
        mut header: Header,
        visitor: &mut impl Visitor,
    ) -> Result<(), Mismatch> {
        let n = &self.nodes[node];
        let path = n.path.as_str();
        let item = n.children[0];
        let item_type = &self.nodes[item].data_type;
        let fixed = match n.data_type {
            DataType::FixedSizeList { size, .. } => Some(size),
            _ => None,
        };
        let count_ok = |count: u64| fixed.is_none_or(|size| count == u64::from(size));
        if let Header::Tag(tag) = header {
            if item_type.typed_array_tag() != Some(tag) {
                return Err(mismatch(
                    path,
                    format!("tag {tag} on a list of {item_type}"),
                ));
            }
            header = cursor.header(path)?;
            if !matches!(header, Header::Bytes(Some(_))) {
                return Err(mismatch(
                    path,
                    format!("tag {tag} on {}, not bytes", what(&header)),
                ));
            }
        }
        match header {
            Header::Bytes(Some(len)) => {
                let Some(width) = item_type.packed_width() else {
                    return Err(mismatch(
                        path,
                        format!("bytes where a list of {item_type} was declared"),
                    ));
                };
                let bytes = cursor.take(path, len)?;
                if len % width != 0 || !count_ok((len / width) as u64) {
                    return Err(mismatch(
                        path,
                        format!(
                            "{len} packed bytes are not {} items of {width} bytes",
                            expected(fixed)
                        ),
                    ));
                }
                visitor.visit(node, Event::ListStart);
                visitor.visit(item, Event::Packed(bytes));
                visitor.visit(node, Event::ListEnd);
                Ok(())
            }
            Header::Array(len) => {
                visitor.visit(node, Event::ListStart);
                let mut count = 0u64;
                loop {
                    if len.is_some_and(|l| count == l as u64) {
                        break;
                    }
                    if len.is_none() {
                        let at = cursor.pos;
                        if cursor.header(path)? == Header::Break {
                            break;
                        }
                        cursor.pos = at;
                    }
                    self.value(cursor, item, visitor)?;
                    count += 1;
                }
                if !count_ok(count) {
                    return Err(mismatch(
                        path,
                        format!("{count} items, not {}", expected(fixed)),
                    ));
                }
                visitor.visit(node, Event::ListEnd);
                Ok(())
            }
            h => Err(mismatch(
                path,
                format!("{} where {} was declared", what(&h), n.data_type),
            )),
        }
    }
}

fn expected(fixed: Option<u32>) -> String {
    fixed.map_or_else(|| "whole".to_owned(), |s| s.to_string())
}

fn add(nodes: &mut Vec<Node>, parent: &str, field: &Field) -> NodeId {
    let id = nodes.len();
    let path = join(parent, &field.name);
    nodes.push(Node {
        name: field.name.clone(),
        path: path.clone(),
        data_type: field.data_type.clone(),
        nullable: field.nullable,
        children: Vec::new(),
        lookup: None,
    });
    let (children, lookup) = match &field.data_type {
        DataType::List(item) | DataType::FixedSizeList { item, .. } => {
            (vec![add(nodes, &path, item)], None)
        }
        DataType::Struct(fields) => (
            fields.iter().map(|f| add(nodes, &path, f)).collect(),
            lookup(fields),
        ),
        _ => (Vec::new(), None),
    };
    nodes[id].children = children;
    nodes[id].lookup = lookup;
    id
}

impl DataType {
    fn is_integer(&self) -> bool {
        matches!(
            self,
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
                | DataType::Date32
                | DataType::Timestamp { .. }
        )
    }
}

/// An integer checked against its type's range.
fn int_event(path: &str, t: &DataType, v: i128) -> Result<Event<'static>, Mismatch> {
    let (lo, hi): (i128, i128) = match t {
        DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Int32 | DataType::Date32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::UInt8 => (0, u8::MAX.into()),
        DataType::UInt16 => (0, u16::MAX.into()),
        DataType::UInt32 => (0, u32::MAX.into()),
        DataType::UInt64 => (0, u64::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    };
    if v < lo || v > hi {
        return Err(mismatch(path, format!("{v} is out of the range of {t}")));
    }
    Ok(match t {
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            Event::UInt(u64::try_from(v).unwrap_or(u64::MAX))
        }
        _ => Event::Int(i64::try_from(v).unwrap_or(i64::MAX)),
    })
}

/// A float (or an integer) that `t` holds exactly: each narrowing cast below is compared
/// back with the value, which is the point.
#[allow(clippy::cast_possible_truncation)]
fn float_value(t: &DataType, header: Header) -> Option<f64> {
    let v = match header {
        Header::Float(v) => v,
        // An integer is accepted where it is exact in the float type.
        Header::Positive(n) => {
            let v = n as f64;
            (v as u64 == n && v < 2f64.powi(64)).then_some(v)?
        }
        Header::Negative(n) => {
            let v = -1.0 - n as f64;
            (-1 - i128::from(n) == v as i128).then_some(v)?
        }
        _ => return None,
    };
    let exact = v.is_nan()
        || match t {
            DataType::Float16 => f64::from(half::f16::from_f64(v)) == v,
            DataType::Float32 => f64::from(v as f32) == v,
            _ => true,
        };
    exact.then_some(v)
}

fn mismatch(path: &str, detail: impl Into<String>) -> Mismatch {
    Mismatch {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

/// What a header announces, for messages.
fn what(header: &Header) -> String {
    match header {
        Header::Positive(v) => format!("the integer {v}"),
        Header::Negative(v) => format!("the integer {}", -1 - i128::from(*v)),
        Header::Float(v) => format!("the float {v}"),
        Header::Simple(ciborium_ll::simple::FALSE | ciborium_ll::simple::TRUE) => "a bool".into(),
        Header::Simple(ciborium_ll::simple::NULL) => "null".into(),
        Header::Simple(s) => format!("the simple value {s}"),
        Header::Tag(t) => format!("tag {t}"),
        Header::Break => "a break".into(),
        Header::Bytes(_) => "bytes".into(),
        Header::Text(_) => "text".into(),
        Header::Array(_) => "an array".into(),
        Header::Map(_) => "a map".into(),
    }
}

/// Which members of a map were seen.
enum Seen {
    Few(u64),
    Many(Vec<bool>),
}

impl Seen {
    fn new(len: usize) -> Self {
        if len <= 64 {
            Seen::Few(0)
        } else {
            Seen::Many(vec![false; len])
        }
    }

    /// Marks `index`; false if it was marked already.
    fn insert(&mut self, index: usize) -> bool {
        match self {
            Seen::Few(bits) => {
                let bit = 1u64 << index;
                let new = *bits & bit == 0;
                *bits |= bit;
                new
            }
            Seen::Many(seen) => !std::mem::replace(&mut seen[index], true),
        }
    }
}

/// A position in a record's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// The next data item's head (RFC 8949 §3: the initial byte's major type and additional
    /// information, then 0, 1, 2, 4 or 8 bytes of argument), decoded straight from the slice:
    /// the walker's hot loop (a ciborium-ll `Decoder` per head cost 4x the whole walk).
    fn header(&mut self, path: &str) -> Result<Header, Mismatch> {
        let at = self.pos;
        let early = || mismatch(path, "the record ends early");
        let malformed = |what: &str| mismatch(path, format!("malformed CBOR at byte {at}: {what}"));
        let initial = *self.bytes.get(at).ok_or_else(early)?;
        let (major, info) = (initial >> 5, initial & 0x1f);
        let width = match info {
            0..=23 => 0,
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            31 => {
                self.pos = at + 1;
                return match major {
                    2 => Ok(Header::Bytes(None)),
                    3 => Ok(Header::Text(None)),
                    4 => Ok(Header::Array(None)),
                    5 => Ok(Header::Map(None)),
                    7 => Ok(Header::Break),
                    _ => Err(malformed("indefinite length on an integer or tag")),
                };
            }
            _ => return Err(malformed("reserved additional information")),
        };
        let arg_bytes = self.bytes.get(at + 1..at + 1 + width).ok_or_else(early)?;
        let arg = if width == 0 {
            u64::from(info)
        } else {
            arg_bytes.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))
        };
        self.pos = at + 1 + width;
        let len =
            |n: u64| usize::try_from(n).map_err(|_| malformed("a length past this platform's"));
        Ok(match major {
            0 => Header::Positive(arg),
            1 => Header::Negative(arg),
            2 => Header::Bytes(Some(len(arg)?)),
            3 => Header::Text(Some(len(arg)?)),
            4 => Header::Array(Some(len(arg)?)),
            5 => Header::Map(Some(len(arg)?)),
            6 => Header::Tag(arg),
            _ => match width {
                0 => Header::Simple(info),
                1 if arg < 32 => return Err(malformed("a simple value below 32 in two bytes")),
                1 => Header::Simple(u8::try_from(arg).unwrap_or(u8::MAX)),
                2 => Header::Float(f64::from(half::f16::from_bits(
                    u16::try_from(arg).unwrap_or(0),
                ))),
                4 => Header::Float(f64::from(f32::from_bits(u32::try_from(arg).unwrap_or(0)))),
                _ => Header::Float(f64::from_bits(arg)),
            },
        })
    }

    fn take(&mut self, path: &str, len: usize) -> Result<&'a [u8], Mismatch> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| {
                mismatch(
                    path,
                    format!("a value of {len} bytes runs past the record's end"),
                )
            })?;
        let bytes = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn text(&mut self, path: &str, len: usize) -> Result<&'a str, Mismatch> {
        let bytes = self.take(path, len)?;
        std::str::from_utf8(bytes).map_err(|e| mismatch(path, format!("text is not UTF-8: {e}")))
    }
}
