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

    /// The identity if this root has read it already (a publisher always has): readers check
    /// log entries against it when known and do not spend a request to learn it.
    pub(crate) fn cached(&self) -> Option<&DatasetIdentity> {
        self.cell.get()
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

/// How long a reader waits for a `dataset.json` that another writer is still writing, on a
/// store whose objects do not appear whole ([`StoreCapabilities::atomic_writes`] `false`: a
/// declared mount, where the first publisher's exclusive create is visible before its bytes).
/// Past it, the object is taken as damaged (a writer killed mid-write leaves it so).
///
/// [`StoreCapabilities::atomic_writes`]: crate::StoreCapabilities::atomic_writes
const SETTLE_WAITS_MS: [u64; 8] = [10, 20, 40, 80, 160, 320, 640, 1280];

/// GETs and parses `dataset.json`, bounded by its cap. On a store without atomic writes an
/// unparseable object is read again after a pause (see [`SETTLE_WAITS_MS`]): it may be
/// another publisher's object caught between its creation and its last byte.
async fn read(store: &dyn RootStore) -> Result<DatasetIdentity> {
    let settles = !store.capabilities().atomic_writes;
    let mut waits = SETTLE_WAITS_MS.iter();
    loop {
        let obj = store.get(DATASET_KEY, MAX_IDENTITY_BYTES).await?;
        match DatasetIdentity::parse(&obj.body) {
            Err(Error::Corrupt { .. }) if settles => match waits.next() {
                Some(ms) => {
                    tracing::debug!(
                        key = DATASET_KEY,
                        wait_ms = ms,
                        "identity incomplete; reading again"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(*ms)).await;
                }
                None => return DatasetIdentity::parse(&obj.body),
            },
            parsed => return parsed,
        }
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Identity;
    use crate::error::Error;
    use crate::manifest::{DATASET_KEY, DatasetIdentity, to_json};
    use crate::registry::{Registry, StoreOptions};
    use crate::store::RootStore;

    fn store(dir: &std::path::Path, mount: bool) -> Arc<dyn RootStore> {
        let options = StoreOptions {
            mount,
            ..StoreOptions::default()
        };
        Registry::new()
            .resolve(dir.to_str().unwrap(), &options)
            .unwrap()
    }

    /// On a mount, a second publisher can find the first one's `dataset.json` created but
    /// still empty (exclusive create, then the bytes): it waits for the bytes instead of
    /// calling the object damaged (the race CI once hit on the rclone mount).
    #[tokio::test]
    async fn a_mount_waits_for_an_identity_still_being_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DATASET_KEY);
        std::fs::write(&path, b"").unwrap();
        let body = to_json(&DatasetIdentity::new("d"));
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            std::fs::write(&path, body).unwrap();
        });
        let mounted = store(dir.path(), true);
        let id = Identity::default().init(&*mounted, "d").await.unwrap();
        assert_eq!(id.dataset_id, "d");
        writer.await.unwrap();
    }

    /// A writer killed mid-write leaves the identity partial for good: after the waits the
    /// reader gets the typed error, and a local (atomic) root does not wait at all.
    #[tokio::test]
    async fn a_partial_identity_is_corrupt_after_the_waits() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DATASET_KEY), b"{\"format\":").unwrap();
        let mounted = store(dir.path(), true);
        let err = Identity::default().init(&*mounted, "d").await.unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { ref key, .. } if key == DATASET_KEY),
            "{err}"
        );
        let local = store(dir.path(), false);
        let err = Identity::default().init(&*local, "d").await.unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    }
}
