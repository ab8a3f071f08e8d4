//! Shards read through the node cache ([`NodeCache`](crate::NodeCache)): opened from their
//! entries, and entries removed when their records fail their checks.

use super::Dataset;
use crate::cache::is_damage;
use crate::error::{Error, Result};
use crate::manifest::ShardRef;
use crate::opened::OpenedShard;

impl Dataset {
    /// Shard `i` opened from the node cache (filled first if missing), when the root has one
    /// for its store and the shard fits; `None`: read it from the store. A damaged download
    /// is the shard's error; any other failure of the cache falls back to the store.
    pub(super) async fn open_cached(
        &self,
        i: usize,
        reference: &ShardRef,
    ) -> Result<Option<OpenedShard>> {
        let root = &self.inner.root;
        let Some(cache) = root.read_cache() else {
            return Ok(None);
        };
        let opened = cache
            .open(root.store(), reference, &self.inner.options)
            .await;
        match opened {
            Ok(Some(cached)) => {
                let _ = self.inner.cached[i].set((cached.name, cached.file));
                Ok(Some(cached.shard))
            }
            Ok(None) => Ok(None),
            Err(e) if is_damage(&e) => Err(e),
            Err(e) => {
                tracing::warn!(key = %reference.key, error = %e, "node cache failed; reading the shard by ranges");
                Ok(None)
            }
        }
    }

    /// Whether every shard of this snapshot is read from local files now: opened with a
    /// synchronous view, or held whole by the node cache (so opening it fills nothing).
    /// Stops at the first that is not. What a read-ahead asks before it chooses to read each
    /// batch on the taker's thread, as on a local root.
    pub(crate) fn reads_locally(&self) -> bool {
        let root = &self.inner.root;
        let cache = root.read_cache();
        let refs = self.inner.snapshot.shards();
        self.inner
            .shards
            .iter()
            .zip(refs)
            .all(|(opened, reference)| match opened.get() {
                Some(shard) => shard.as_sync().is_some(),
                None => cache.is_some_and(|c| c.holds(root.store().as_ref(), reference)),
            })
    }

    /// `e`, after removing shard `i`'s cache entry when `e` says its bytes are damaged (the
    /// next reader refetches it; this one keeps its descriptor).
    #[cold]
    pub(super) fn forget_damaged(&self, i: usize, e: Error) -> Error {
        if e.is_shard_error()
            && let (Some(cache), Some((name, file))) =
                (self.inner.root.cache(), self.inner.cached[i].get())
            && let Err(d) = cache.discard_now(name, file)
        {
            tracing::warn!(error = %d, "could not remove a damaged cache entry");
        }
        e
    }
}
