//! One fill: the shard downloaded by ranged reads into its reserved temporary file (of
//! [`CacheOptions::fill_chunk_bytes`](super::CacheOptions::fill_chunk_bytes), up to
//! [`fill_requests`](super::CacheOptions::fill_requests) of the process's fills at once,
//! each chunk written at its offset), synced,
//! checked (size, entity tags of one version, SHA-256 when the reference has one, then the
//! footer or tail checksum and record count by `open_checked`), and only then committed.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use futures::{StreamExt, TryStreamExt};
use tracing::{Instrument, info_span};

use super::NodeCache;
use crate::error::{Error, Result};
use crate::manifest::{Checksum, ShardRef};
use crate::staging::{check_version, chunks, hash_file};
use crate::store::RootStore;

impl NodeCache {
    /// Downloads `reference` into `file` (the reservation at `temp`) and checks it; the file
    /// is synced before this returns `Ok`.
    pub(super) async fn download(
        &self,
        store: &Arc<dyn RootStore>,
        reference: &ShardRef,
        file: Arc<File>,
        temp: &Path,
    ) -> Result<()> {
        let key = reference.key.as_str();
        let size = reference.size;
        let span = info_span!("cache_fill", root = %store.describe(), key, size);
        async {
            let version = OnceLock::new();
            let chunk = self.options.fill_chunk_bytes;
            futures::stream::iter(chunks(size, chunk))
                .map(Ok)
                .try_for_each_concurrent(self.options.fill_requests.max(1), |range| {
                    let file = Arc::clone(&file);
                    let version = &version;
                    async move {
                        let permit = self.requests.acquire().await.map_err(|_| {
                            Error::io(temp, std::io::Error::other("fill request limiter closed"))
                        })?;
                        let (bytes, etag) = store.get_range_tagged(key, range.clone()).await?;
                        drop(permit);
                        self.count(|s| {
                            s.fill_requests += 1;
                            s.fill_bytes += bytes.len() as u64;
                        });
                        check_version(key, version, etag)?;
                        if bytes.len() as u64 != range.end - range.start {
                            return Err(Error::Verification {
                                key: key.to_owned(),
                                what: "size",
                                expected: size.to_string(),
                                actual: (range.start + bytes.len() as u64).to_string(),
                            });
                        }
                        let temp = temp.to_owned();
                        blocking(temp.clone(), move || {
                            file.write_all_at(&bytes, range.start)
                                .map_err(|e| Error::io(&temp, e))
                        })
                        .await
                    }
                })
                .await?;
            let want = match &reference.checksum {
                Some(Checksum::Sha256(want)) => Some(want.clone()),
                _ => None,
            };
            let temp_path = temp.to_owned();
            let got = blocking(temp.to_owned(), move || {
                file.sync_all().map_err(|e| Error::io(&temp_path, e))?;
                want.map(|_| hash_file(&file, size, &temp_path)).transpose()
            })
            .await?;
            if let (Some(Checksum::Sha256(want)), Some(got)) = (&reference.checksum, got)
                && &got != want
            {
                return Err(Error::Verification {
                    key: key.to_owned(),
                    what: "sha256",
                    expected: want.clone(),
                    actual: got,
                });
            }
            Ok(())
        }
        .instrument(span)
        .await
    }
}

/// Runs file work on tokio's blocking pool (`path` names it in a failure to join).
pub(super) async fn blocking<T: Send + 'static>(
    path: PathBuf,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Error::io(
            path,
            std::io::Error::other(format!("cache task failed: {e}")),
        )
    })?
}
