//! `guideloom.Root`'s keeping methods: `gc`, `storage`, `expired`, `tag`, `untag`, `tags`
//! (Rust: `guideloom_publish::Root::gc` and friends). Results are plain dicts and lists.

use std::time::Duration;

use guideloom::{Card, CompactRequest, RetentionPolicy, RetryPolicy, Split};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::Error;
use crate::root::Root;
use crate::runtime::block_on;

fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| {
        crate::errors::raise(
            "InvalidArgumentError",
            format!("{what} must be a non-negative number of seconds, not {s}"),
        )
    })
}

#[pymethods]
impl Root {
    /// Garbage collection under a retention policy: the newest `keep_last` snapshots, those
    /// younger than `keep_younger_than` seconds, the tagged ones and (with
    /// `keep_annotated`) the annotated ones are kept; the others expire, and every object
    /// nothing kept references and at least `grace` seconds old is deleted. Safe while
    /// publishers run. `dry_run`: nothing is written. Returns a dict: `run`, `dry_run`,
    /// `kept`, `expired` (snapshot ids), `deleted` (list of `(key, bytes)`), `bytes`,
    /// `spared`, `resumed`.
    #[pyo3(signature = (*, keep_last = 1, keep_younger_than = None, keep_annotated = true, grace = 604800.0, dry_run = false))]
    fn gc<'py>(
        &self,
        py: Python<'py>,
        keep_last: usize,
        keep_younger_than: Option<f64>,
        keep_annotated: bool,
        grace: f64,
        dry_run: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let policy = RetentionPolicy {
            keep_last,
            keep_younger_than: keep_younger_than
                .map(|s| seconds("keep_younger_than", s))
                .transpose()?,
            keep_annotated,
            grace: seconds("grace", grace)?,
        };
        let root = self.current()?;
        let name = self.name.clone();
        let r = block_on(py, async move {
            root.gc(&policy, dry_run, &RetryPolicy::contended_update())
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        let d = PyDict::new(py);
        d.set_item("run", r.run)?;
        d.set_item("dry_run", r.dry_run)?;
        d.set_item("kept", r.kept)?;
        d.set_item(
            "expired",
            r.expired
                .into_iter()
                .map(|e| e.snapshot_id)
                .collect::<Vec<_>>(),
        )?;
        d.set_item(
            "deleted",
            PyList::new(py, r.deleted.into_iter().map(|x| (x.key, x.size)))?,
        )?;
        d.set_item("bytes", r.bytes)?;
        d.set_item("spared", r.spared)?;
        d.set_item("resumed", r.resumed)?;
        Ok(d)
    }

    /// Storage accounting under the default policy (keep the latest, 7-day grace): a dict of
    /// `live_bytes`, `reclaimable_bytes`, `shard_bytes`, `snapshots` (list of dicts) and
    /// `work_ids` (dict of dicts).
    fn storage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let root = self.current()?;
        let name = self.name.clone();
        let st = block_on(py, async move {
            root.storage(
                &RetentionPolicy::default(),
                &RetryPolicy::contended_update(),
            )
            .await
            .map_err(|e| Error::from(e).in_root(name))
        })?;
        let d = PyDict::new(py);
        d.set_item("live_bytes", st.live_bytes)?;
        d.set_item("reclaimable_bytes", st.reclaimable_bytes)?;
        d.set_item("shard_bytes", st.shard_bytes)?;
        let snaps = PyList::empty(py);
        for s in st.snapshots {
            let e = PyDict::new(py);
            e.set_item("snapshot_id", s.snapshot_id)?;
            e.set_item("seq", s.seq)?;
            e.set_item("bytes", s.bytes)?;
            e.set_item("unique_bytes", s.unique_bytes)?;
            e.set_item("expired", s.expired)?;
            e.set_item("expires", s.expires)?;
            snaps.append(e)?;
        }
        d.set_item("snapshots", snaps)?;
        let works = PyDict::new(py);
        for (w, b) in st.work_ids {
            let e = PyDict::new(py);
            e.set_item("objects", b.objects)?;
            e.set_item("bytes", b.bytes)?;
            e.set_item("live_bytes", b.live_bytes)?;
            e.set_item("reclaimable_bytes", b.reclaimable_bytes)?;
            works.set_item(w, e)?;
        }
        d.set_item("work_ids", works)?;
        Ok(d)
    }

    /// The snapshot ids the retention policy expired, in log order.
    fn expired(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let root = self.current()?;
        let name = self.name.clone();
        let e = block_on(py, async move {
            root.expired()
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(e.into_iter().map(|e| e.snapshot_id).collect())
    }

    /// Points tag `name` at snapshot `snapshot_id` (a snapshot id or another tag): the
    /// snapshot id it named before, if any. `open(root, snapshot=name)` then opens it.
    fn tag(&self, py: Python<'_>, name: String, snapshot_id: String) -> PyResult<Option<String>> {
        let root = self.current()?;
        let rname = self.name.clone();
        let previous = block_on(py, async move {
            root.tag(&name, &snapshot_id, &RetryPolicy::contended_update())
                .await
                .map_err(|e| Error::from(e).in_root(rname))
        })?;
        Ok(previous.map(|p| p.snapshot_id))
    }

    /// Removes tag `name`: the snapshot id it named (`NotFoundError` if there is no such tag).
    fn untag(&self, py: Python<'_>, name: String) -> PyResult<String> {
        let root = self.current()?;
        let rname = self.name.clone();
        let gone = block_on(py, async move {
            root.untag(&name, &RetryPolicy::contended_update())
                .await
                .map_err(|e| Error::from(e).in_root(rname))
        })?;
        Ok(gone.snapshot_id)
    }

    /// Every tag: a dict of tag name to snapshot id.
    fn tags(&self, py: Python<'_>) -> PyResult<std::collections::BTreeMap<String, String>> {
        let root = self.current()?;
        let name = self.name.clone();
        let tags = block_on(py, async move {
            root.tags().await.map_err(|e| Error::from(e).in_root(name))
        })?;
        Ok(tags.into_iter().map(|(n, t)| (n, t.snapshot_id)).collect())
    }

    /// Rewrites snapshot `from_snapshot`'s (default: the latest) small shards into fewer
    /// shards of about `target_shard_bytes`, published as the new full snapshot
    /// `snapshot_id` with every record identical, in the same order (`guideloom compact`).
    /// The old shards go with `gc`. Returns a dict: `snapshot_id`, `source`, `outcome`,
    /// `input_shards`, `input_bytes`, `output_shards`, `output_bytes`, `records`, `seconds`.
    #[pyo3(signature = (snapshot_id, *, from_snapshot = None, target_shard_bytes = 268435456, work_id = None, dry_run = false))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        snapshot_id: String,
        from_snapshot: Option<String>,
        target_shard_bytes: u64,
        work_id: Option<String>,
        dry_run: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut request =
            CompactRequest::new(snapshot_id).with_target_shard_bytes(target_shard_bytes);
        request.work_id = work_id;
        request.dry_run = dry_run;
        let root = self.current()?;
        let name = self.name.clone();
        let c = block_on(py, async move {
            root.compact(from_snapshot.as_deref(), &request)
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })?;
        let d = PyDict::new(py);
        d.set_item("snapshot_id", c.snapshot_id)?;
        d.set_item("source", c.source)?;
        d.set_item("outcome", c.outcome.map(|o| format!("{o:?}")))?;
        d.set_item("input_shards", c.input_shards)?;
        d.set_item("input_bytes", c.input_bytes)?;
        d.set_item("output_shards", c.output_shards)?;
        d.set_item("output_bytes", c.output_bytes)?;
        d.set_item("records", c.records)?;
        d.set_item("seconds", c.elapsed.as_secs_f64())?;
        Ok(d)
    }

    /// Writes snapshot `snapshot_id`'s dataset card: `readme` (markdown) and its metadata
    /// (`splits` maps a name to a snapshot id or a `"START..END"` range of records),
    /// create-only under `cards/<snapshot_id>/` (`guideloom card`).
    #[pyo3(signature = (snapshot_id, readme, *, licence = None, description = None, citation = None, splits = None))]
    #[allow(clippy::too_many_arguments)]
    fn write_card(
        &self,
        py: Python<'_>,
        snapshot_id: String,
        readme: String,
        licence: Option<String>,
        description: Option<String>,
        citation: Option<String>,
        splits: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<()> {
        let mut card = Card::new(readme);
        card.licence = licence;
        card.description = description;
        card.citation = citation;
        for (n, v) in splits.unwrap_or_default() {
            let split = Split::parse(&v).map_err(|e| Error::from(e).in_root(self.name.clone()))?;
            card.splits.insert(n, split);
        }
        let root = self.current()?;
        let name = self.name.clone();
        block_on(py, async move {
            root.write_card(&snapshot_id, &card)
                .await
                .map_err(|e| Error::from(e).in_root(name))
        })
    }

    /// The dataset card of `snapshot_id` (default: the newest snapshot that has one), as a
    /// dict (`snapshot_id`, `readme`, `licence`, `description`, `citation`, `splits`), or
    /// `None`.
    #[pyo3(signature = (snapshot_id = None))]
    fn card<'py>(
        &self,
        py: Python<'py>,
        snapshot_id: Option<String>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let root = self.current()?;
        let name = self.name.clone();
        let found = block_on(py, async move {
            match snapshot_id {
                Some(id) => root.card(&id).await.map(|c| c.map(|c| (id, c))),
                None => root.latest_card().await,
            }
            .map_err(|e| Error::from(e).in_root(name))
        })?;
        let Some((id, card)) = found else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("snapshot_id", id)?;
        d.set_item("readme", card.readme)?;
        d.set_item("licence", card.licence)?;
        d.set_item("description", card.description)?;
        d.set_item("citation", card.citation)?;
        let splits = PyDict::new(py);
        for (n, s) in card.splits {
            match s {
                Split::Snapshot(id) => splits.set_item(n, id)?,
                Split::Range { start, end } => splits.set_item(n, format!("{start}..{end}"))?,
            }
        }
        d.set_item("splits", splits)?;
        Ok(Some(d))
    }
}
