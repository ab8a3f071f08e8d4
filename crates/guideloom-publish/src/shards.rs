//! Shards in the native format (`guideloom-format`): writing one into a root, and checking
//! published shards by their footers.

use std::io::{BufWriter, Read, Seek};
use std::path::Path;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::spec::FOOTER_LEN;
use guideloom_format::{Footer, ShardEncoder, ShardMetadata};
use tracing::{Instrument, info_span};

use crate::error::{BoxError, Error, Result};
use crate::key::check_name;
use crate::manifest::{Checksum, ShardRef, shard_key};
use crate::publish::{Root, ShardFacts, ShardInspector};
use crate::store::{RootStore, create_object};

/// Offset of the footer's own CRC32C inside the 64-byte footer (see `docs/format.md`).
const FOOTER_CRC_OFFSET: usize = 52;

fn format_error(key: &str, source: guideloom_format::Error) -> Error {
    Error::Shard {
        key: key.to_owned(),
        source: Box::new(source),
    }
}

/// The footer CRC of an encoded shard's last [`FOOTER_LEN`] bytes, after validating them.
fn footer_facts(key: &str, tail: &[u8], size: u64) -> Result<ShardFacts> {
    let footer = Footer::decode(key, tail, size).map_err(|e| format_error(key, e))?;
    let crc_bytes: [u8; 4] = tail
        .get(FOOTER_CRC_OFFSET..FOOTER_CRC_OFFSET + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| Error::corrupt(key, "footer too short"))?;
    Ok(ShardFacts {
        record_count: footer.record_count,
        checksum: Some(Checksum::FooterCrc32c(u32::from_le_bytes(crc_bytes))),
    })
}

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
        footer_facts(&shard.key, &tail, shard.size)
    }
}

impl Root {
    /// Writes `records` (already-encoded payloads) as shard `index` of worker `work_id`:
    /// the shard is encoded into an unnamed temporary file in `staging_dir` (nothing to clean
    /// up, even after a crash; no fsync, since it is read straight back), checked against `max_encoded_shard_bytes` before any request, then uploaded
    /// create-only to `shards/<work_id>/<index>.glm`. The reference carries the record count
    /// and the footer CRC, so `verify_record_counts` with [`FooterInspector`] costs one
    /// 64-byte ranged read per shard.
    ///
    /// Re-running a worker collides ([`Error::PublicationCollision`]) unless the bytes are
    /// identical. The encoded shard is held in memory for its single PUT.
    pub async fn write_shard<I, R>(
        &self,
        work_id: &str,
        index: u64,
        metadata: ShardMetadata,
        records: I,
        staging_dir: &Path,
    ) -> Result<ShardRef>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        check_name("work id", work_id)?;
        let key = shard_key(work_id, index);
        // The shard is encoded into an unnamed temporary file in `staging_dir`: memory stays
        // O(index) while records stream in, and a crash leaves nothing behind (the OS reclaims
        // a file without a name). No fsync: the bytes are read back for the PUT at once.
        let staged = tempfile::tempfile_in(staging_dir).map_err(|e| Error::io(staging_dir, e))?;
        let mut encoder = ShardEncoder::new(BufWriter::with_capacity(1 << 20, staged), metadata)
            .map_err(|e| format_error(&key, e))?;
        for r in records {
            encoder
                .append(r.as_ref())
                .map_err(|e| format_error(&key, e))?;
        }
        let (buffered, records) = encoder.finish().map_err(|e| format_error(&key, e))?;
        let mut file = buffered
            .into_inner()
            .map_err(|e| Error::io(staging_dir, e.into_error()))?;
        let encoded = file
            .stream_position()
            .map_err(|e| Error::io(staging_dir, e))?;
        let limit = self.options().max_encoded_shard_bytes;
        if encoded > limit {
            return Err(Error::ShardTooLarge {
                key,
                size: encoded,
                limit,
            });
        }
        let mut body = Vec::with_capacity(usize::try_from(encoded).unwrap_or(0));
        file.rewind()
            .and_then(|()| file.read_to_end(&mut body))
            .map_err(|e| Error::io(staging_dir, e))?;
        let size = body.len() as u64;
        if size < FOOTER_LEN {
            return Err(Error::corrupt(
                &key,
                "writer produced a shard without a footer",
            ));
        }
        let tail_start = usize::try_from(size - FOOTER_LEN)
            .map_err(|e| Error::storage(&key, "write_shard", Box::new(e) as BoxError))?;
        let facts = footer_facts(&key, &body[tail_start..], size)?;
        create_object(&**self.store(), &key, Bytes::from(body))
            .instrument(info_span!("upload_shard", key, size))
            .await?;
        Ok(ShardRef {
            key,
            size,
            record_count: records,
            checksum: facts.checksum,
        })
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
        let staging = tempfile::tempdir().unwrap();
        let meta = || ShardMetadata::new("raw", "documents");
        let records: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; usize::from(i) + 1]).collect();
        let a = root
            .write_shard("w0", 0, meta(), &records, staging.path())
            .await
            .unwrap();
        let b = root
            .write_shard("w1", 0, meta(), &records[..2], staging.path())
            .await
            .unwrap();
        assert_eq!((a.record_count, b.record_count), (5, 2));
        assert!(matches!(a.checksum, Some(Checksum::FooterCrc32c(_))));
        assert_eq!(
            std::fs::read_dir(staging.path()).unwrap().count(),
            0,
            "staging cleaned"
        );

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
        let staging = tempfile::tempdir().unwrap();
        let err = root
            .write_shard(
                "w",
                0,
                ShardMetadata::new("raw", "documents"),
                [vec![0u8; 500]],
                staging.path(),
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
