//! `Root::write_shard` streams into a local root's create-only temporary file: the bytes are
//! the encoder's, nothing but the final object stays behind (written, refused as too large,
//! stopped by a record error, or colliding), re-writing identical bytes is idempotent and
//! different bytes collide — past the 1 MiB at which the temporary file is opened, and below.

use std::path::Path;

use guideloom_format::{ShardEncoder, ShardMetadata};
use guideloom_publish::{Checksum, Error, LocalStore, Root, RootOptions};

fn meta() -> ShardMetadata {
    ShardMetadata::new("raw", "documents")
}

/// Record `i` of `len` bytes (distinct per `seed`).
fn record(seed: u8, i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (i.wrapping_mul(31) ^ j ^ usize::from(seed)).to_le_bytes()[0])
        .collect()
}

fn records(seed: u8, count: usize, len: usize) -> Vec<Vec<u8>> {
    (0..count).map(|i| record(seed, i, len)).collect()
}

/// Every file under `dir`, relative, sorted (temporaries included).
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn encoded(recs: &[Vec<u8>]) -> Vec<u8> {
    let mut enc = ShardEncoder::new(Vec::new(), meta()).unwrap();
    for r in recs {
        enc.append(r).unwrap();
    }
    enc.finish().unwrap().0
}

fn root(dir: &Path, mounted: bool, limit: Option<u64>) -> Root {
    let mut options = RootOptions::default();
    if let Some(limit) = limit {
        options.max_encoded_shard_bytes = limit;
    }
    let store = if mounted {
        LocalStore::mounted(dir)
    } else {
        LocalStore::new(dir)
    };
    Root::new(std::sync::Arc::new(store), options)
}

#[tokio::test]
async fn streamed_shards_are_the_encoders_bytes_and_leave_nothing_else() {
    for mounted in [false, true] {
        // 3 000 x 1 KiB is past the 1 MiB buffer (the file is opened while streaming);
        // 10 x 100 B stays below it (written whole at commit).
        for (count, len) in [(3_000, 1_024), (10, 100)] {
            let dir = tempfile::tempdir().unwrap();
            let root = root(dir.path(), mounted, None);
            let recs = records(1, count, len);
            let shard = root.write_shard("w", 0, meta(), &recs).await.unwrap();
            let bytes = encoded(&recs);
            let path = dir.path().join(&shard.key);
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "mounted={mounted}");
            assert_eq!(
                (shard.size, shard.record_count),
                (bytes.len() as u64, count as u64)
            );
            let footer = guideloom_format::Footer::decode(
                "s",
                &bytes[bytes.len() - 64..],
                bytes.len() as u64,
            )
            .unwrap();
            assert_eq!(
                shard.checksum,
                Some(Checksum::FooterCrc32c(footer.checksum()))
            );
            assert_eq!(files(dir.path()), vec![shard.key.clone()]);

            // The same bytes again: idempotent. Other bytes: a collision, the object kept.
            let again = root.write_shard("w", 0, meta(), &recs).await.unwrap();
            assert_eq!(again, shard);
            let other = records(2, count, len);
            let err = root.write_shard("w", 0, meta(), &other).await.unwrap_err();
            assert!(
                matches!(&err, Error::PublicationCollision { key } if *key == shard.key),
                "mounted={mounted}: {err}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
            assert_eq!(files(dir.path()), vec![shard.key.clone()]);
        }
    }
}

#[tokio::test]
async fn refused_and_stopped_writes_leave_no_file() {
    for mounted in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        // A 3 MiB shard against a 2 MiB limit: refused the moment its running size passes
        // 2 MiB (after 2 MiB reached the temporary file), with the size it had reached and
        // without pulling the records that are left.
        let root = root(dir.path(), mounted, Some(2 << 20));
        let recs = records(3, 3 * 1_024, 1_024);
        let pulled = std::cell::Cell::new(0usize);
        let counted = recs.iter().inspect(|_| pulled.set(pulled.get() + 1));
        let err = root.write_shard("w", 0, meta(), counted).await.unwrap_err();
        assert!(
            matches!(err, Error::ShardTooLarge { size, limit, .. }
                if limit == 2 << 20 && size > limit && size <= limit + 1_024),
            "{err}"
        );
        assert!(
            (2_000..2_100).contains(&pulled.get()),
            "{} of {} records pulled",
            pulled.get(),
            recs.len()
        );
        assert_eq!(files(dir.path()), Vec::<String>::new(), "mounted={mounted}");

        // A record that fails after 1.5 MiB were written: the caller's error, no file.
        let produced = (0..3_000usize).map(|i| {
            if i == 1_500 {
                Err("record 1500 failed")
            } else {
                Ok(record(4, i, 1_024))
            }
        });
        let err = root
            .try_write_shard("w", 1, meta(), produced)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(err, "record 1500 failed");
        assert_eq!(files(dir.path()), Vec::<String>::new(), "mounted={mounted}");
    }
}
