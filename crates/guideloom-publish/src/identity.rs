//! The identity protocol: `dataset.json`, created once and never changed, names the dataset
//! a root holds. Read lazily (the first operation that needs the dataset id reads it) and
//! cached for the root's lifetime; written create-only by the first publication.

use bytes::Bytes;
use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::key::check_name;
use crate::manifest::{DATASET_KEY, DatasetIdentity, MAX_IDENTITY_BYTES, to_json};
use crate::store::{RootStore, create_object};

/// A root's `dataset.json`, read once: shared by a root's clones (behind an `Arc`), so a
/// root reads it at most once however many operations need it.
#[derive(Debug, Default)]
pub(crate) struct Identity {
    cell: OnceCell<DatasetIdentity>,
}

impl Identity {
    /// Reads `dataset.json` from `store` (cached after the first success).
    /// [`Error::NotFound`] if nothing was ever published.
    pub(crate) async fn get(&self, store: &dyn RootStore) -> Result<DatasetIdentity> {
        self.cell.get_or_try_init(|| read(store)).await.cloned()
    }

    /// Writes `dataset.json` for `dataset_id` if absent; [`Error::DatasetMismatch`] if
    /// `store` holds another dataset.
    pub(crate) async fn init(
        &self,
        store: &dyn RootStore,
        dataset_id: &str,
    ) -> Result<DatasetIdentity> {
        check_name("dataset id", dataset_id)?;
        store.check_writable()?;
        match self.get(store).await {
            Ok(id) => return check(id, dataset_id),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let want = DatasetIdentity::new(dataset_id);
        match create_object(store, DATASET_KEY, Bytes::from(to_json(&want))).await {
            Ok(_) => {
                let _ = self.cell.set(want.clone());
                Ok(want)
            }
            // Someone else created it (perhaps with other formatting): compare ids.
            Err(Error::PublicationCollision { .. }) => check(read(store).await?, dataset_id),
            Err(e) => Err(e),
        }
    }
}

/// GETs and parses `dataset.json`, bounded by its cap.
async fn read(store: &dyn RootStore) -> Result<DatasetIdentity> {
    let obj = store.get(DATASET_KEY, MAX_IDENTITY_BYTES).await?;
    DatasetIdentity::parse(&obj.body)
}

fn check(id: DatasetIdentity, dataset_id: &str) -> Result<DatasetIdentity> {
    if id.dataset_id == dataset_id {
        Ok(id)
    } else {
        Err(Error::DatasetMismatch {
            expected: dataset_id.to_owned(),
            actual: id.dataset_id,
        })
    }
}
