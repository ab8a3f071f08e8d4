//! Shards in the native format (`guideloom-format`): writing one into a root, uploading an
//! encoded one, and checking published shards by their footers.
//!
//! How a shard is written ([`Root::write_shard`]): records → [`ShardEncoder`] → [`Tally`]
//! (size limit, SHA-256) → the store's [`PendingObject`] (a local root's create-only temporary
//! file, or one buffer for stores that need one PUT) → commit (fsync + link, or the PUT) →
//! [`create_streamed`]'s read-back only if the key was taken. Each byte is encoded once and
//! written once; memory is the index (12 bytes per record) and a write buffer.

use std::io::Write;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::spec::FOOTER_LEN;
use guideloom_format::{Encoded, Footer, ShardEncoder, ShardMetadata};
use tracing::{Instrument, info_span};

use crate::error::{Error, Result};
use crate::key::{check_name, sha256_hex};
use crate::manifest::{Checksum, ShardRef, shard_key};
use crate::publish::{Root, ShardFacts, ShardInspector};
use crate::store::{Digest256, PendingObject, RootStore, create_object, create_streamed};

/// Checks shards by their footers: one ranged read of the last 64 bytes per shard (no
/// download), giving the record count and the footer's CRC32C (which covers the index and
/// metadata checksums, the layout and the count).
#[derive(Debug, Clone, Copy, Default)]
pub struct FooterInspector;

#[async_trait]
impl ShardInspector for FooterInspector {
    async fn inspect(&self, store: &dyn RootStore, shard: &ShardRef) -> Result<ShardFacts> {
        if shard.size < FOOTER_LEN {
            return Err(Error::corrupt(&shard.key, "smaller than a shard footer"));
        }
        let tail = store
            .get_range(&shard.key, shard.size - FOOTER_LEN..shard.size)
            .await?;
        let footer = Footer::decode(&shard.key, &tail, shard.size)
            .map_err(|e| Error::shard(&shard.key, e))?;
        Ok(ShardFacts {
            record_count: footer.record_count,
            checksum: Some(Checksum::FooterCrc32c(footer.checksum())),
        })
    }
}

/// The sink between the encoder and the store: forwards bytes while the shard stays within
/// the size limit, hashing them; past the limit it only counts, so the refusal can name the
/// exact size while nothing more reaches the store.
struct Tally<'p, 'a> {
    out: &'p mut (dyn PendingObject + 'a),
    digest: Digest256,
    limit: u64,
    /// Bytes not forwarded because the limit was passed.
    over: u64,
}

impl Write for Tally<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.over == 0 && self.digest.len() + buf.len() as u64 <= self.limit {
            self.out.write_all(buf)?;
            self.digest.update(buf);
        } else {
            self.over += buf.len() as u64;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A shard ready for its create-only write: whole bytes from the caller, or a pending
/// object the encoder has filled (with the encoder's facts and the SHA-256 of what it wrote).
enum Body<'a> {
    Encoded {
        bytes: Bytes,
        records: u64,
    },
    Streamed {
        pending: Box<dyn PendingObject + 'a>,
        digest: [u8; 32],
        encoded: Encoded,
    },
}

impl Root {
    /// Writes `records` (already-encoded payloads) as shard `index` of worker `work_id`,
    /// create-only at `shards/<work_id>/<index>.glm`, encoding each record once straight
    /// into the store ([`RootStore::begin_create`]): on a local root into the create-only
    /// temporary file (fsynced and linked once complete), on stores that need one PUT into
    /// one buffer. Memory is the index (12 bytes per record) and a write buffer on a local
    /// root. A shard larger than `max_encoded_shard_bytes` is refused
    /// ([`Error::ShardTooLarge`], with its exact size): bytes past the limit never reach the
    /// store, nothing appears under the key, and no request is made.
    ///
    /// The reference carries the record count and the footer CRC (from the encoder, not
    /// parsed back), so `verify_record_counts` with [`FooterInspector`] costs one 64-byte
    /// ranged read per shard. Re-running a worker collides
    /// ([`Error::PublicationCollision`]) unless the bytes are identical, told apart by the
    /// SHA-256 computed while writing.
    pub async fn write_shard<I, R>(
        &self,
        work_id: &str,
        index: u64,
        metadata: ShardMetadata,
        records: I,
    ) -> Result<ShardRef>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let records = records.into_iter().map(Ok::<R, std::convert::Infallible>);
        match self
            .try_write_shard(work_id, index, metadata, records)
            .await?
        {
            Ok(shard) => Ok(shard),
            Err(never) => match never {},
        }
    }

    /// [`write_shard`](Self::write_shard) of records that are produced fallibly (encoded as
    /// they are written, say): the first `Err` stops the write — nothing appears under the
    /// key, no request is made — and is returned as the inner `Err`; the outer `Err` is the
    /// root's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::ShardMetadata;
    /// use guideloom_publish::Root;
    ///
    /// let root = Root::open("memory://try-write", &Default::default())?;
    /// let meta = || ShardMetadata::new("raw", "documents");
    /// let good = (0..3u8).map(|i| Ok::<_, String>(vec![i; 4]));
    /// let shard = root.try_write_shard("w", 0, meta(), good).await?.unwrap();
    /// assert_eq!(shard.record_count, 3);
    /// let bad = [Ok(vec![1u8]), Err("record 1 does not encode".to_owned())];
    /// let err = root.try_write_shard("w", 1, meta(), bad).await?.unwrap_err();
    /// assert_eq!(err, "record 1 does not encode");
    /// assert!(root.store().head("shards/w/00000001.glm").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn try_write_shard<I, R, E>(
        &self,
        work_id: &str,
        index: u64,
        metadata: ShardMetadata,
        records: I,
    ) -> Result<std::result::Result<ShardRef, E>>
    where
        I: IntoIterator<Item = std::result::Result<R, E>>,
        R: AsRef<[u8]>,
    {
        check_name("work id", work_id)?;
        self.store().check_writable()?;
        let key = shard_key(work_id, index);
        let limit = self.options().max_encoded_shard_bytes;
        let mut pending = self.store().begin_create(&key)?;
        let mut tally = Tally {
            out: &mut *pending,
            digest: Digest256::default(),
            limit,
            over: 0,
        };
        let mut encoder =
            ShardEncoder::new(&mut tally, metadata).map_err(|e| Error::shard(&key, e))?;
        for r in records {
            let r = match r {
                Ok(r) => r,
                // Dropping `pending` discards what reached it.
                Err(e) => return Ok(Err(e)),
            };
            encoder
                .append(r.as_ref())
                .map_err(|e| Error::shard(&key, e))?;
        }
        let (_, encoded) = encoder.finish().map_err(|e| Error::shard(&key, e))?;
        let Tally { digest, over, .. } = tally;
        if over > 0 {
            return Err(Error::ShardTooLarge {
                key,
                size: encoded.size,
                limit,
            });
        }
        debug_assert_eq!(digest.len(), encoded.size);
        let body = Body::Streamed {
            pending,
            digest: digest.finish(),
            encoded,
        };
        self.create_shard(key, body).await.map(Ok)
    }

    /// The one create-only write of a shard, encoded here or uploaded as bytes:
    /// [`create_streamed`] or [`create_object`] under an `upload_shard` span, returning the
    /// reference (the footer CRC when the encoder's facts are known, else the SHA-256).
    async fn create_shard(&self, key: String, body: Body<'_>) -> Result<ShardRef> {
        let store = &**self.store();
        let (size, record_count, checksum) = match body {
            Body::Streamed {
                pending,
                digest,
                encoded,
            } => {
                create_streamed(store, &key, pending, encoded.size, digest)
                    .instrument(info_span!("upload_shard", key, size = encoded.size))
                    .await?;
                let crc = Checksum::FooterCrc32c(encoded.footer_crc());
                (encoded.size, encoded.records, crc)
            }
            Body::Encoded { bytes, records } => {
                let size = bytes.len() as u64;
                let limit = self.options().max_encoded_shard_bytes;
                if size > limit {
                    return Err(Error::ShardTooLarge { key, size, limit });
                }
                let checksum = Checksum::Sha256(sha256_hex(&bytes));
                create_object(store, &key, bytes)
                    .instrument(info_span!("upload_shard", key, size))
                    .await?;
                (size, records, checksum)
            }
        };
        Ok(ShardRef {
            key,
            size,
            record_count,
            checksum: Some(checksum),
        })
    }

    /// Uploads an encoded shard create-only as `shards/<work_id>/<index>.glm` and returns
    /// its reference (with a SHA-256 checksum): the same create-only write as
    /// [`write_shard`](Self::write_shard)'s. Refused before any request if it is larger
    /// than `max_encoded_shard_bytes`. Re-running a worker collides
    /// ([`Error::PublicationCollision`]) unless the bytes are identical.
    pub async fn upload_shard(
        &self,
        work_id: &str,
        index: u64,
        body: Bytes,
        record_count: u64,
    ) -> Result<ShardRef> {
        check_name("work id", work_id)?;
        self.store().check_writable()?;
        let key = shard_key(work_id, index);
        let body = Body::Encoded {
            bytes: body,
            records: record_count,
        };
        self.create_shard(key, body).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::manifest::PublishMode;
    use crate::publish::{PublicationOptions, PublishRequest};
    use crate::registry::{Registry, StorageOptions};

    fn request(id: &str, shards: Vec<ShardRef>) -> PublishRequest {
        PublishRequest {
            dataset_id: "d".into(),
            snapshot_id: id.into(),
            shards,
            mode: PublishMode::Full,
        }
    }

    #[tokio::test]
    async fn written_shards_verify_by_footer_with_one_small_read_each() {
        let reg = Registry::new();
        let root = reg
            .resolve("memory://shards-test", &StorageOptions::default())
            .unwrap();
        let meta = || ShardMetadata::new("raw", "documents");
        let records: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; usize::from(i) + 1]).collect();
        let a = root.write_shard("w0", 0, meta(), &records).await.unwrap();
        let b = root
            .write_shard("w1", 0, meta(), &records[..2])
            .await
            .unwrap();
        assert_eq!((a.record_count, b.record_count), (5, 2));
        assert!(matches!(a.checksum, Some(Checksum::FooterCrc32c(_))));

        let bucket = reg.lookup("memory", "shards-test").unwrap();
        let opts = PublicationOptions {
            verify_record_counts: true,
            inspector: Some(Arc::new(FooterInspector)),
            ..PublicationOptions::default()
        };
        // Warm the identity so the count below is the verification plus the commit only.
        root.init("d").await.unwrap();
        let before = bucket.requests();
        let snap = root
            .publish(&request("s1", vec![a.clone(), b.clone()]), &opts)
            .await
            .unwrap();
        assert_eq!(snap.total_records(), 7);
        // 2 HEAD + 2 tail reads + claim PUT + LIST + log PUT + pointer PUT.
        assert_eq!(bucket.requests() - before, 8);

        let mut wrong_count = a.clone();
        wrong_count.record_count = 6;
        let err = root
            .publish(&request("s2", vec![wrong_count]), &opts)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Verification { what: "record count", key, .. } if *key == a.key),
            "{err}"
        );
        let mut wrong_crc = a.clone();
        wrong_crc.checksum = Some(Checksum::FooterCrc32c(0));
        let err = root
            .publish(&request("s2", vec![wrong_crc]), &opts)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Verification {
                    what: "checksum",
                    ..
                }
            ),
            "{err}"
        );
        // A non-shard object fails footer decoding with a typed error naming it.
        let junk = root
            .upload_shard("junk", 0, Bytes::from(vec![7u8; 100]), 1)
            .await
            .unwrap();
        let err = root
            .publish(&request("s2", vec![junk.clone()]), &opts)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Shard { key, source } if *key == junk.key && source.is_corrupt()),
            "{err}"
        );
    }

    #[tokio::test]
    async fn oversized_written_shard_is_refused_before_upload() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StorageOptions {
            max_encoded_shard_bytes: 100,
            ..StorageOptions::default()
        };
        let root = Registry::new()
            .resolve(dir.path().join("root").to_str().unwrap(), &opts)
            .unwrap();
        let err = root
            .write_shard(
                "w",
                0,
                ShardMetadata::new("raw", "documents"),
                [vec![0u8; 500]],
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::ShardTooLarge { limit: 100, .. }),
            "{err}"
        );
        assert!(!dir.path().join("root").exists(), "nothing was written");
    }
}
