//! Schema evolution across snapshots: which later schema may follow an earlier one.
//!
//! The rule (`docs/format.md`, "Schema evolution"): records written under the earlier schema
//! must read under the later one unchanged, because an appended snapshot keeps the earlier
//! shards. So every earlier field stays, in its place, with its type and its extension
//! metadata; a field may become nullable but never stop being so; new fields (top level or
//! struct members) come after the earlier ones and are nullable (earlier records read them as
//! null). Anything else — a changed type, a dropped or renamed field, a new required field —
//! is refused: that is a new dataset.

use super::{DataType, EXTENSION_METADATA_KEY, EXTENSION_NAME_KEY, Field, Schema, join};

/// Why a schema may not follow another, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema change at {path:?} refused: {detail} (a change of this kind needs a new dataset)")]
pub struct Incompatible {
    /// The field's dotted path.
    pub path: String,
    /// What changed.
    pub detail: String,
}

impl Schema {
    /// Whether `self` may be the schema of a snapshot that follows one of schema `earlier`
    /// (see the module docs for the rule).
    ///
    /// ```
    /// use guideloom_format::schema::{DataType, Field, Schema};
    ///
    /// let v1 = Schema::new(vec![Field::new("text", DataType::Utf8, false)]);
    /// let v2 = Schema::new(vec![
    ///     Field::new("text", DataType::Utf8, false),
    ///     Field::new("label", DataType::Int64, true), // new and nullable: allowed
    /// ]);
    /// assert!(v2.evolves_from(&v1).is_ok());
    /// let retyped = Schema::new(vec![Field::new("text", DataType::Binary, false)]);
    /// assert_eq!(retyped.evolves_from(&v1).unwrap_err().path, "text");
    /// ```
    pub fn evolves_from(&self, earlier: &Schema) -> Result<(), Incompatible> {
        siblings("", &earlier.fields, &self.fields)
    }
}

fn refuse(path: &str, detail: impl Into<String>) -> Incompatible {
    Incompatible {
        path: path.to_owned(),
        detail: detail.into(),
    }
}

fn siblings(parent: &str, earlier: &[Field], later: &[Field]) -> Result<(), Incompatible> {
    for (i, old) in earlier.iter().enumerate() {
        let path = join(parent, &old.name);
        match later.get(i) {
            Some(new) if new.name == old.name => field(&path, old, new)?,
            _ if later.iter().any(|f| f.name == old.name) => {
                return Err(refuse(&path, "field moved from its place"));
            }
            _ => return Err(refuse(&path, "field dropped")),
        }
    }
    for new in &later[earlier.len().min(later.len())..] {
        if !new.nullable {
            return Err(refuse(
                &join(parent, &new.name),
                "new field is not nullable (earlier records have no value for it)",
            ));
        }
    }
    Ok(())
}

fn field(path: &str, old: &Field, new: &Field) -> Result<(), Incompatible> {
    if old.nullable && !new.nullable {
        return Err(refuse(path, "nullable field made required"));
    }
    for key in [EXTENSION_NAME_KEY, EXTENSION_METADATA_KEY] {
        if old.metadata.get(key) != new.metadata.get(key) {
            return Err(refuse(path, format!("extension metadata {key:?} changed")));
        }
    }
    match (&old.data_type, &new.data_type) {
        (DataType::Struct(a), DataType::Struct(b)) => siblings(path, a, b),
        (DataType::List(a), DataType::List(b)) => field(&join(path, &a.name), a, b),
        (
            DataType::FixedSizeList { item: a, size: n },
            DataType::FixedSizeList { item: b, size: m },
        ) if n == m => field(&join(path, &a.name), a, b),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(refuse(path, format!("type changed from {a} to {b}"))),
    }
}
