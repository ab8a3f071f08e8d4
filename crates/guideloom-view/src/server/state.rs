//! What the server keeps between requests: the root, the options, the datasets and
//! annotation sets it opened, and its counters.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use guideloom::publish::{AnnotationSet, CountingStore, Snapshot};
use guideloom::{Dataset, Root};
use tokio::sync::Mutex;

use super::ViewerOptions;
use super::query::Query;
use super::reply::Fail;

/// Snapshots whose datasets (opened shards) are kept open.
const OPEN_DATASETS: usize = 8;
/// Annotation sets kept downloaded.
const OPEN_SETS: usize = 8;

/// Counters of what the server did, for `/api/stats` and tests.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) requests: AtomicU64,
    pub(super) records_read: AtomicU64,
    pub(super) records_skipped: AtomicU64,
}

/// An opened annotation set's key: `set/version` and the snapshot it is read for.
type SetKey = (String, String);

/// The server's state, shared by every request.
#[derive(Debug)]
pub(super) struct State {
    /// The root, its store wrapped in [`State::counting`].
    pub(super) root: Root,
    /// Every request the viewer made of the store, for `/api/stats`.
    pub(super) counting: CountingStore,
    pub(super) name: String,
    pub(super) options: ViewerOptions,
    datasets: Mutex<Vec<(String, Dataset)>>,
    sets: Mutex<Vec<(SetKey, Arc<AnnotationSet>)>>,
    pub(super) stats: Stats,
}

impl State {
    /// The state of a viewer of `root`, whose store is wrapped to count requests and bytes.
    pub(super) fn new(root: Root, name: String, options: ViewerOptions) -> Self {
        let counting = CountingStore::new(root.store().clone());
        let root = Root::new(Arc::new(counting.clone()), root.options().clone());
        State {
            root,
            counting,
            name,
            options,
            datasets: Mutex::new(Vec::new()),
            sets: Mutex::new(Vec::new()),
            stats: Stats::default(),
        }
    }

    /// The dataset of the snapshot asked for (`snapshot=`), the viewer's default, or the
    /// latest; kept open across requests so its opened shards are reused.
    pub(super) async fn dataset(&self, query: &Query) -> Result<Dataset, Fail> {
        let id = query
            .get("snapshot")
            .or(self.options.snapshot.as_deref())
            .map(str::to_owned);
        if let Some(id) = &id {
            let open = self.datasets.lock().await;
            if let Some((_, d)) = open.iter().find(|(k, _)| k == id) {
                return Ok(d.clone());
            }
        }
        let snapshot = match &id {
            Some(id) => self.root.snapshot(id).await,
            None => self.root.latest().await,
        }
        .map_err(|e| Fail::from_publish(&e))?;
        let key = snapshot.id().to_owned();
        let mut open = self.datasets.lock().await;
        if let Some((_, d)) = open.iter().find(|(k, _)| *k == key) {
            return Ok(d.clone());
        }
        let d = self.root.reader(snapshot);
        if open.len() >= OPEN_DATASETS {
            open.remove(0);
        }
        open.push((key, d.clone()));
        Ok(d)
    }

    /// Every snapshot id, in log order (none on a root with nothing published).
    pub(super) async fn snapshot_ids(&self) -> Result<Vec<String>, Fail> {
        match self.root.snapshots().await {
            Ok(s) => Ok(s.iter().map(|s| s.id().to_owned()).collect()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(Fail::from_publish(&e)),
        }
    }

    /// The annotation set `set/version`, downloaded once and kept (for `snapshot`'s records).
    pub(super) async fn annotation_set(
        &self,
        name: &str,
        snapshot: &Snapshot,
    ) -> Result<Arc<AnnotationSet>, String> {
        let (set, version) = name
            .split_once('/')
            .ok_or_else(|| format!("{name:?}: expected SET/VERSION"))?;
        let key = (name.to_owned(), snapshot.id().to_owned());
        {
            let open = self.sets.lock().await;
            if let Some((_, s)) = open.iter().find(|(k, _)| *k == key) {
                return Ok(s.clone());
            }
        }
        let opened = self
            .root
            .annotations(set, Some(version), snapshot, true)
            .await
            .map_err(|e| e.to_string())?;
        let opened = Arc::new(opened);
        let mut open = self.sets.lock().await;
        if open.len() >= OPEN_SETS {
            open.remove(0);
        }
        open.push((key, opened.clone()));
        Ok(opened)
    }
}
