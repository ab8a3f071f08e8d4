//! What writing and publishing take and return from Python: `ShardRef` (a written shard),
//! `Snapshot` (a published or opened snapshot), `PublicationOptions` and `mode=`. The
//! operations are `guideloom.Root`'s methods (`crate::root`) and the module-level functions
//! (`crate::calls`).

use std::sync::Arc;

use guideloom::PublishMode;
use guideloom::publish::FooterInspector;
use pyo3::prelude::*;

use crate::errors::raise;

/// A written shard: pass it to `publish`.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct ShardRef {
    inner: guideloom::ShardRef,
}

#[pymethods]
impl ShardRef {
    /// The shard's key in the root (`shards/<work_id>/<n>.glm`).
    #[getter]
    fn key(&self) -> &str {
        &self.inner.key
    }
    /// Its size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size
    }
    /// The number of records in it.
    #[getter]
    fn record_count(&self) -> u64 {
        self.inner.record_count
    }
    /// The reference as JSON (its manifest form): with `_from_json`, what lets `pickle` carry
    /// a `ShardRef` from a distributed worker back to the process that publishes
    /// (`guideloom/_pickle.py` registers the pair with `copyreg`).
    fn _to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(|e| {
            raise(
                "InternalError",
                format!("cannot encode a shard reference: {e}"),
            )
        })
    }
    /// The reference `_to_json` gave.
    #[staticmethod]
    fn _from_json(json: &str) -> PyResult<Self> {
        let inner = serde_json::from_str(json).map_err(|e| {
            raise(
                "InvalidArgumentError",
                format!("not a shard reference: {e}"),
            )
        })?;
        Ok(ShardRef { inner })
    }
    fn __repr__(&self) -> String {
        format!(
            "ShardRef(key={:?}, size={}, record_count={})",
            self.inner.key, self.inner.size, self.inner.record_count
        )
    }
}

/// A published snapshot.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    inner: guideloom::Snapshot,
    /// How `publish` ended (`None` until something else returns snapshots).
    outcome: Option<guideloom::PublishOutcome>,
}

#[pymethods]
impl Snapshot {
    /// The snapshot id.
    #[getter]
    fn id(&self) -> &str {
        self.inner.id()
    }
    /// Its position in the root's log (0, 1, ...).
    #[getter]
    fn seq(&self) -> u64 {
        self.inner.seq()
    }
    /// The number of records.
    #[getter]
    fn total_records(&self) -> u64 {
        self.inner.total_records()
    }
    /// How the `publish` call that returned this snapshot ended: `"committed"` (it wrote
    /// the log entry) or `"already_published"` (an identical request, another process or an
    /// earlier attempt, had: nothing was written); `None` for a snapshot that was opened.
    #[getter]
    fn outcome(&self) -> Option<&'static str> {
        self.outcome.map(|o| match o {
            guideloom::PublishOutcome::Committed => "committed",
            guideloom::PublishOutcome::AlreadyPublished => "already_published",
            // A kind added later: reported as neither of the two above.
            _ => "other",
        })
    }
    /// Its shards, in record order.
    #[getter]
    fn shards(&self) -> Vec<ShardRef> {
        self.inner
            .shards()
            .iter()
            .map(|s| ShardRef { inner: s.clone() })
            .collect()
    }
    fn __repr__(&self) -> String {
        format!(
            "Snapshot(id={:?}, seq={}, total_records={}, shards={})",
            self.inner.id(),
            self.inner.seq(),
            self.inner.total_records(),
            self.inner.shards().len()
        )
    }
}

/// Options of `publish`.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug, Clone)]
pub(crate) struct PublicationOptions {
    verify_record_counts: bool,
}

#[pymethods]
impl PublicationOptions {
    #[new]
    #[pyo3(signature = (*, verify_record_counts = false))]
    fn new(verify_record_counts: bool) -> Self {
        PublicationOptions {
            verify_record_counts,
        }
    }
    /// Read each shard's footer (one 64-byte ranged read) and check its record count and
    /// checksum against the reference before publishing.
    #[getter]
    fn verify_record_counts(&self) -> bool {
        self.verify_record_counts
    }
    fn __repr__(&self) -> String {
        format!(
            "PublicationOptions(verify_record_counts={})",
            if self.verify_record_counts {
                "True"
            } else {
                "False"
            }
        )
    }
}

impl PublicationOptions {
    pub(crate) fn to_rust(&self) -> guideloom::PublicationOptions {
        guideloom::PublicationOptions {
            verify_record_counts: self.verify_record_counts,
            inspector: self
                .verify_record_counts
                .then(|| Arc::new(FooterInspector) as Arc<dyn guideloom::publish::ShardInspector>),
            ..guideloom::PublicationOptions::default()
        }
    }
}

impl From<guideloom::ShardRef> for ShardRef {
    fn from(inner: guideloom::ShardRef) -> Self {
        ShardRef { inner }
    }
}

impl ShardRef {
    /// The Rust reference.
    pub(crate) fn to_rust(&self) -> guideloom::ShardRef {
        self.inner.clone()
    }
}

impl Snapshot {
    /// The snapshot a `publish` call returned, with how it ended.
    pub(crate) fn published(published: guideloom::Published) -> Self {
        Snapshot {
            inner: published.snapshot,
            outcome: Some(published.outcome),
        }
    }

    /// A snapshot that was opened (no outcome).
    pub(crate) fn opened(inner: guideloom::Snapshot) -> Self {
        Snapshot {
            inner,
            outcome: None,
        }
    }
}

/// `mode=` of `publish`.
pub(crate) fn publish_mode(mode: &str) -> PyResult<PublishMode> {
    match mode {
        "full" => Ok(PublishMode::Full),
        "append" => Ok(PublishMode::Append),
        other => Err(raise(
            "InvalidArgumentError",
            format!("mode must be \"full\" or \"append\", not {other:?}"),
        )),
    }
}
