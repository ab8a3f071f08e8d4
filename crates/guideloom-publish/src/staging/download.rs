//! One shard's download: its chunks fetched by ranged reads, up to the stager's request
//! limit at once, each written at its offset in an unnamed file as it arrives; then the
//! checks (size, SHA-256 over the file) and the shard opened for local reads, checked
//! against its reference as every open is (footer or tail checksum, `open_checked`).
//!
//! Every chunk must come from one version of the object: the entity tags of the chunks'
//! responses (where the store reports them) must all be the first one's, so a shard
//! replaced mid-download is [`Error::Verification`] of its `"entity tag"`, never a staged
//! file of two objects' bytes.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use futures::{StreamExt, TryStreamExt};
use guideloom_io::PreadIo;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;
use tracing::{Instrument, debug, info_span};

use super::{StagedShard, Stager};
use crate::error::{Error, Result};
use crate::key::hex;
use crate::manifest::{Checksum, ShardRef};
use crate::opened::open_checked;
use crate::store::Etag;

/// Buffer of the read-back that hashes a staged file.
const HASH_BUFFER_BYTES: usize = 1 << 20;

/// The chunk ranges of a download of `size` bytes in chunks of at most `chunk`.
pub(crate) fn chunks(size: u64, chunk: u64) -> impl Iterator<Item = Range<u64>> {
    let chunk = chunk.max(1);
    (0..size.div_ceil(chunk)).map(move |i| i * chunk..size.min((i + 1) * chunk))
}

/// Every chunk's entity tag (where the store reports one) must be the first one's.
pub(crate) fn check_version(key: &str, version: &OnceLock<Etag>, etag: Option<Etag>) -> Result<()> {
    if let Some(etag) = etag {
        let first = version.get_or_init(|| etag.clone());
        if first.bare() != etag.bare() {
            return Err(Error::Verification {
                key: key.to_owned(),
                what: "entity tag",
                expected: first.0.clone(),
                actual: format!("{etag} (the object was replaced during its download)"),
            });
        }
    }
    Ok(())
}

/// The SHA-256 of the first `size` bytes of `file`, read back in order.
pub(crate) fn hash_file(file: &File, size: u64, dir: &Path) -> Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; HASH_BUFFER_BYTES];
    let mut offset = 0u64;
    while offset < size {
        let len = usize::try_from(size - offset)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        file.read_exact_at(&mut buf[..len], offset)
            .map_err(|e| Error::io(dir, e))?;
        hasher.update(&buf[..len]);
        offset += len as u64;
    }
    Ok(hex(&hasher.finalize()))
}

impl Stager {
    pub(super) async fn download(&self, reference: &ShardRef) -> Result<Arc<StagedShard>> {
        let key = reference.key.clone();
        let size = reference.size;
        let span = info_span!("stage_shard", root = %self.store.describe(), key = %key, size);
        async {
            self.lock().stats.downloads += 1;
            let dir = self.options.directory();
            // The file is created by the first chunk to arrive, so that the first poll of a
            // download already queues its requests for permits (ahead of prefetches started
            // after it).
            let file = OnceCell::new();
            let version = OnceLock::new();
            futures::stream::iter(chunks(size, self.options.download_chunk_bytes))
                .map(Ok)
                .try_for_each_concurrent(self.options.requests_in_flight(), |range| {
                    self.fetch_chunk(&key, size, (&file, &version), range, &dir)
                })
                .await?;
            let file = match file.into_inner() {
                Some(file) => Arc::try_unwrap(file).map_err(|_| {
                    Error::io(
                        &dir,
                        std::io::Error::other("staged file still shared after its download"),
                    )
                })?,
                None => self.temp_file(&dir).await?,
            };
            let file = match &reference.checksum {
                Some(Checksum::Sha256(want)) => {
                    let hash_dir = dir.clone();
                    let (file, got) = self
                        .blocking(move || {
                            let got = hash_file(&file, size, &hash_dir)?;
                            Ok((file, got))
                        })
                        .await?;
                    if &got != want {
                        return Err(Error::Verification {
                            key,
                            what: "sha256",
                            expected: want.clone(),
                            actual: got,
                        });
                    }
                    file
                }
                _ => file,
            };
            let location = format!("staged copy of {}/{key}", self.store.describe());
            let reader = PreadIo::new()
                .open_file_async(file, &location)
                .map_err(|source| Error::Read {
                    key: key.clone(),
                    source,
                })?;
            let shard = open_checked(reader, reference, &self.read_options).await?;
            debug!("staged");
            Ok(Arc::new(StagedShard { key, size, shard }))
        }
        .instrument(span)
        .await
    }

    /// Fetches `range` of `key` (holding one request permit until its bytes are written)
    /// and writes it at its offset in `file`; the entity tag of its response must be
    /// `version`'s, the first chunk's to arrive.
    async fn fetch_chunk(
        &self,
        key: &str,
        size: u64,
        (file, version): (&OnceCell<Arc<File>>, &OnceLock<Etag>),
        range: Range<u64>,
        dir: &Path,
    ) -> Result<()> {
        let _permit =
            self.requests.acquire().await.map_err(|_| {
                Error::io(dir, std::io::Error::other("staging request limiter closed"))
            })?;
        self.lock().stats.store.requests += 1;
        let (bytes, etag) = self.store.get_range_tagged(key, range.clone()).await?;
        self.lock().stats.store.bytes_received += bytes.len() as u64;
        check_version(key, version, etag)?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(Error::Verification {
                key: key.to_owned(),
                what: "size",
                expected: size.to_string(),
                actual: (range.start + bytes.len() as u64).to_string(),
            });
        }
        let file = match file.get() {
            Some(file) => Arc::clone(file),
            None => Arc::clone(
                file.get_or_try_init(|| async { self.temp_file(dir).await.map(Arc::new) })
                    .await?,
            ),
        };
        let dir = dir.to_owned();
        self.blocking(move || {
            file.write_all_at(&bytes, range.start)
                .map_err(|e| Error::io(&dir, e))
        })
        .await
    }

    /// A new unnamed file in the staging directory `dir`.
    async fn temp_file(&self, dir: &Path) -> Result<File> {
        let dir = dir.to_owned();
        self.blocking(move || tempfile::tempfile_in(&dir).map_err(|e| Error::io(&dir, e)))
            .await
    }
}
