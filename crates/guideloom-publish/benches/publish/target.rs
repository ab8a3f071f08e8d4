//! Where the publication benchmarks write: a local root in a temporary directory, or a
//! prefix of the moto bucket; the shards they publish; and the raw operations of the
//! ceilings (durable file writes and plain PUTs, `pread` and `ObjectStoreIo` ranges).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use guideloom_format::{ShardMetadata, ShardWriter};
use guideloom_io::AsyncReader;
use guideloom_publish::{LocalReads, Registry, Root, RootOptions, StoreOptions};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use tokio::runtime::Runtime;

use guideloom_publish::CountingStore;

/// Shards per publication.
pub(crate) const SHARDS: u64 = 16;
/// Records per shard.
pub(crate) const RECORDS: u64 = 64;
/// Bytes per record.
pub(crate) const RECORD: usize = 1024;
/// The dataset id of every bench root.
pub(crate) const DATASET: &str = "bench";

/// The shards every publication uploads, encoded once in the native format.
pub(crate) fn encode_shards() -> Vec<Bytes> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rng = StdRng::seed_from_u64(5);
    let mut record = vec![0u8; RECORD];
    (0..SHARDS)
        .map(|n| {
            let path = dir.path().join(format!("{n}.glm"));
            let mut w = ShardWriter::create(&path, ShardMetadata::new("raw", "documents"))
                .expect("shard writer");
            for _ in 0..RECORDS {
                rng.fill_bytes(&mut record);
                w.append(&record).expect("append");
            }
            let info = w.finish().expect("finish shard");
            Bytes::from(std::fs::read(&info.path).expect("read shard"))
        })
        .collect()
}

/// The moto bucket and the options that reach it.
#[cfg(feature = "s3")]
pub(crate) struct Moto {
    options: StoreOptions,
    bucket: String,
    prefix: String,
    handle: Arc<guideloom_publish::ObjectStoreBucket>,
}

enum Kind {
    Local(tempfile::TempDir),
    #[cfg(feature = "s3")]
    S3(Box<Moto>),
}

#[cfg(feature = "s3")]
impl Moto {
    /// The raw client and the full object path of `key` of sub-root `sub`.
    fn raw(
        &self,
        sub: &str,
        key: &str,
    ) -> (Arc<dyn object_store::ObjectStore>, object_store::path::Path) {
        let path = object_store::path::Path::from(format!("{}/{sub}/{key}", self.prefix));
        (Arc::clone(self.handle.store()), path)
    }
}

/// One place bench roots are created in; every root gets a fresh sub-directory / prefix.
pub(crate) struct Target {
    /// `local` or `s3`, as it appears in group names.
    pub(crate) name: &'static str,
    kind: Kind,
    registry: Registry,
    next: AtomicU64,
}

impl Target {
    pub(crate) fn local() -> Target {
        Target {
            name: "local",
            kind: Kind::Local(tempfile::tempdir().expect("temp dir")),
            registry: Registry::new(),
            next: AtomicU64::new(0),
        }
    }

    /// The moto bucket of `cargo xtask servers up`, or why it cannot be used.
    #[cfg(feature = "s3")]
    pub(crate) fn moto() -> Result<Target, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (Some(endpoint), Some(bucket)) =
            (var("GUIDELOOM_S3_ENDPOINT"), var("GUIDELOOM_S3_BUCKET"))
        else {
            return Err(
                "GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET not set (run `cargo xtask bench`, or \
                 `cargo xtask servers up` and source .xtask/servers/up/env.sh)"
                    .into(),
            );
        };
        let mut options = StoreOptions::default();
        options.s3.endpoint = Some(endpoint);
        options.s3.allow_http = true;
        options.s3.region = Some(var("AWS_REGION").unwrap_or_else(|| "us-east-1".into()));
        let prefix = format!(
            "bench-publish-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        );
        // Resolving a root registers the bucket handle every later root shares.
        let registry = Registry::new();
        registry
            .resolve(&format!("s3://{bucket}/{prefix}"), &options)
            .map_err(|e| format!("s3://{bucket}: {e}"))?;
        let handle = registry
            .lookup("s3", &bucket)
            .ok_or_else(|| format!("s3://{bucket}: no bucket handle after resolving a root"))?;
        Ok(Target {
            name: "s3",
            kind: Kind::S3(Box::new(Moto {
                options,
                bucket,
                prefix,
                handle,
            })),
            registry,
            next: AtomicU64::new(0),
        })
    }

    fn options(&self) -> StoreOptions {
        match &self.kind {
            Kind::Local(_) => StoreOptions::default(),
            #[cfg(feature = "s3")]
            Kind::S3(m) => m.options.clone(),
        }
    }

    /// A fresh sub-root name.
    pub(crate) fn fresh(&self, tag: &str) -> String {
        format!("{tag}-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// The URI of sub-root `sub`.
    pub(crate) fn uri(&self, sub: &str) -> String {
        match &self.kind {
            Kind::Local(dir) => dir.path().join(sub).display().to_string(),
            #[cfg(feature = "s3")]
            Kind::S3(m) => format!("s3://{}/{}/{sub}", m.bucket, m.prefix),
        }
    }

    /// `Registry::resolve` of sub-root `sub` and a root on its store, as a user opens a root.
    pub(crate) fn resolve(&self, sub: &str) -> Root {
        let store = self
            .registry
            .resolve(&self.uri(sub), &self.options())
            .expect("resolve root");
        Root::new(store, RootOptions::default())
    }

    /// Sub-root `sub` of a local target resolved with `local_reads` (the facade's
    /// `StoreOptions::local_reads`); `None` on moto.
    pub(crate) fn resolve_local_reads(&self, sub: &str, local_reads: LocalReads) -> Option<Root> {
        match &self.kind {
            Kind::Local(_) => {
                let options = StoreOptions {
                    local_reads,
                    ..StoreOptions::default()
                };
                let store = self
                    .registry
                    .resolve(&self.uri(sub), &options)
                    .expect("resolve root");
                Some(Root::new(store, RootOptions::default()))
            }
            #[cfg(feature = "s3")]
            Kind::S3(_) => None,
        }
    }

    /// Sub-root `sub` through a [`CountingStore`].
    pub(crate) fn counted(&self, sub: &str) -> (Root, CountingStore) {
        let options = self.options();
        let store = self
            .registry
            .resolve(&self.uri(sub), &options)
            .expect("resolve store");
        let counting = CountingStore::new(store);
        (
            Root::new(Arc::new(counting.clone()), RootOptions::default()),
            counting,
        )
    }

    /// Requests the moto bucket handle has sent so far (store operations plus the record
    /// reads of its `ObjectStoreIo`); `None` for local roots.
    pub(crate) fn http_requests(&self) -> Option<u64> {
        match &self.kind {
            Kind::Local(_) => None,
            #[cfg(feature = "s3")]
            Kind::S3(m) => {
                let h = &m.handle;
                Some(h.requests() + h.io().stats().snapshot().requests)
            }
        }
    }

    /// The ceiling's write of `body` as object `key` of sub-root `sub`: a new file written
    /// and fsynced (local), or one plain unconditional PUT (moto).
    pub(crate) fn raw_put(&self, rt: &Runtime, sub: &str, key: &str, body: &Bytes) {
        match &self.kind {
            Kind::Local(dir) => {
                let path = dir.path().join(sub).join(key);
                std::fs::create_dir_all(path.parent().expect("key has a parent"))
                    .expect("create dirs");
                let mut f = File::options()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .expect("create file");
                f.write_all(body).expect("write");
                f.sync_all().expect("fsync");
            }
            #[cfg(feature = "s3")]
            Kind::S3(m) => {
                use object_store::ObjectStoreExt;
                let (store, path) = m.raw(sub, key);
                rt.block_on(store.put(&path, body.clone().into()))
                    .expect("raw put");
            }
        }
        let _ = rt;
    }

    /// The ceiling's whole-object read of `key` of sub-root `sub`.
    pub(crate) fn raw_get(&self, rt: &Runtime, sub: &str, key: &str) -> Bytes {
        let _ = rt;
        match &self.kind {
            Kind::Local(dir) => {
                Bytes::from(std::fs::read(dir.path().join(sub).join(key)).expect("read"))
            }
            #[cfg(feature = "s3")]
            Kind::S3(m) => {
                use object_store::ObjectStoreExt;
                let (store, path) = m.raw(sub, key);
                rt.block_on(async { store.get(&path).await?.bytes().await })
                    .expect("raw get")
            }
        }
    }

    /// The ceiling of a prefetching scan: every object of `keys` of sub-root `sub` read
    /// whole and buffered, `in_flight` requests at once (object_store `get`, joined with
    /// `buffer_unordered`); returns the bytes read.
    pub(crate) fn raw_get_parallel(
        &self,
        rt: &Runtime,
        sub: &str,
        keys: &[String],
        in_flight: usize,
    ) -> u64 {
        match &self.kind {
            Kind::Local(_) => {
                // One at a time: local reads need no requests in flight.
                let _ = in_flight;
                keys.iter()
                    .map(|k| self.raw_get(rt, sub, k).len() as u64)
                    .sum()
            }
            #[cfg(feature = "s3")]
            Kind::S3(m) => {
                use futures::{StreamExt, TryStreamExt};
                use object_store::ObjectStoreExt;
                let gets = keys.iter().map(|key| {
                    let (store, path) = m.raw(sub, key);
                    async move { store.get(&path).await?.bytes().await }
                });
                rt.block_on(
                    futures::stream::iter(gets)
                        .buffer_unordered(in_flight.max(1))
                        .try_fold(0u64, |n, body| async move { Ok(n + body.len() as u64) }),
                )
                .expect("raw parallel get")
            }
        }
    }

    /// The local file of `key` of sub-root `sub` (local roots only).
    pub(crate) fn local_path(&self, sub: &str, key: &str) -> Option<PathBuf> {
        match &self.kind {
            Kind::Local(dir) => Some(dir.path().join(sub).join(key)),
            #[cfg(feature = "s3")]
            Kind::S3(_) => None,
        }
    }

    /// A raw IO-layer reader of `key` of sub-root `sub` on moto: `ObjectStoreIo` on the same
    /// client, with its own counters (`None` for local roots).
    pub(crate) fn raw_reader(&self, sub: &str, key: &str) -> Option<Box<dyn AsyncReader>> {
        match &self.kind {
            Kind::Local(_) => {
                let _ = (sub, key);
                None
            }
            #[cfg(feature = "s3")]
            Kind::S3(m) => {
                let (store, path) = m.raw(sub, key);
                let io = guideloom_io::objstore::ObjectStoreIo::new(store);
                Some(Box::new(io.open_reader(&path)))
            }
        }
    }

    /// Deletes everything the benches wrote (the temporary directory goes on drop).
    pub(crate) fn cleanup(&self, rt: &Runtime) {
        match &self.kind {
            Kind::Local(_) => {}
            #[cfg(feature = "s3")]
            Kind::S3(m) => {
                use futures::TryStreamExt;
                use object_store::ObjectStoreExt;
                let store = Arc::clone(m.handle.store());
                let prefix = object_store::path::Path::from(m.prefix.as_str());
                let result: object_store::Result<()> = rt.block_on(async {
                    let metas: Vec<_> = store.list(Some(&prefix)).try_collect().await?;
                    for meta in metas {
                        store.delete(&meta.location).await?;
                    }
                    Ok(())
                });
                if let Err(e) = result {
                    println!("note: cleaning up s3 prefix {}: {e}", m.prefix);
                }
            }
        }
        let _ = rt;
    }
}
