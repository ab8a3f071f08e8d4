//! Objects swapped behind readers (issue 24, "Trust, round three", §3), on every root kind:
//! a published shard replaced by another object of the same size is never served as the
//! snapshot's records.
//!
//! - Replaced before a reader opens it: every read path (`get`, the point-read probe of a
//!   large shard on S3, `get_many`, `get_range`, `scan`, whole-shard staging) fails with
//!   `Verification` naming the shard and its footer or tail checksum.
//! - Replaced after a reader opened it: on object stores the reader's next read fails with
//!   `Verification` of its `"entity tag"` (the pinned `If-Match` refused), at one request;
//!   on a local root, a replacement by rename leaves the open file (the snapshot's records)
//!   and an overwrite in place is caught by the records' CRC32Cs.
//! - An adopted ArrayRecord file swapped on S3 (footers identical, records not): its tail
//!   checksum before the open, the entity tag after.
//! - A shard replaced in the middle of a whole-shard download: the entity tags of the
//!   download's ranges differ, and nothing is staged.
//!
//! HTTP roots (nginx) are covered in `publish_http_root.rs`.

#![cfg(unix)]

use crate::publish_common;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use guideloom::arrayrecord::ArrayRecordWriter;
use guideloom_format::ShardMetadata;
use guideloom_publish::{
    CasOutcome, CreateOutcome, Dataset, Error, Etag, Object, ObjectInfo, ObjectStoreBucket,
    Registry, Root, RootOptions, RootStore, ShardRef, StagingOptions, StoreCapabilities,
    StoreOptions,
};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use publish_common::{block_on, publish, unique};

/// Records per shard: an index of 72 000 bytes, over the 64 KiB a whole open reads at
/// first, so that the first `get` on an S3 root is a point read (the probe path).
const RECORDS: u64 = 6_000;

/// Record `i` of a shard tagged `tag` (one byte): 16 hex digits of a mix of both, so
/// every shard of the tests has the same size and shards of different tags share no
/// record (a linear checksum sees no pattern between them).
fn record(tag: u8, i: u64) -> Vec<u8> {
    let mut x = (u64::from(tag) << 32 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    format!("{x:016x}").into_bytes()
}

/// Where a root's objects live, so that a test can replace one behind the root's back.
enum Backing {
    /// A local directory (a local root or a declared mount).
    Dir(tempfile::TempDir),
    /// An object store, the root at `prefix` of `bucket` (whose shard readers' requests
    /// `bucket.io().stats()` counts).
    Store(Arc<dyn ObjectStore>, String, Arc<ObjectStoreBucket>),
}

/// A root of one kind, and how to replace its objects.
struct Swappable {
    name: &'static str,
    root: Root,
    backing: Backing,
}

impl Swappable {
    /// Replaces the object at `key` with `body`: a new file renamed over the old one, or an
    /// unconditional PUT.
    async fn replace(&self, key: &str, body: &[u8]) {
        match &self.backing {
            Backing::Dir(dir) => {
                let path = dir.path().join(key);
                let next = dir.path().join(format!("{key}.next"));
                std::fs::write(&next, body).unwrap();
                std::fs::rename(&next, &path).unwrap();
            }
            Backing::Store(store, prefix, _) => {
                let path = ObjectPath::from(format!("{prefix}/{key}"));
                store
                    .put(&path, Bytes::copy_from_slice(body).into())
                    .await
                    .unwrap();
            }
        }
    }

    /// A new `Root` on the same store: nothing cached, as a new process opens it.
    fn fresh(&self) -> Root {
        Root::new(Arc::clone(self.root.store()), RootOptions::default())
    }

    /// Whether reads are network requests (then the first `get` of a large shard probes).
    fn remote(&self) -> bool {
        self.root.store().capabilities().remote_reads
    }
}

fn dir_root(name: &'static str, mount: bool) -> Swappable {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        mount,
        ..StoreOptions::default()
    };
    let uri = format!("file://{}", dir.path().display());
    let store = Registry::new().resolve(&uri, &options).unwrap();
    Swappable {
        name,
        root: Root::new(store, RootOptions::default()),
        backing: Backing::Dir(dir),
    }
}

fn store_root(name: &'static str, store: Arc<dyn ObjectStore>) -> Swappable {
    let prefix = unique("swapped");
    let bucket = ObjectStoreBucket::new(Arc::clone(&store), name);
    let root = Root::new(
        Arc::new(bucket.root(&prefix).unwrap()),
        RootOptions::default(),
    );
    Swappable {
        name,
        root,
        backing: Backing::Store(store, prefix, bucket),
    }
}

/// Every kind available here: local, mount, memory, and moto and RGW when configured.
fn kinds() -> Vec<Swappable> {
    let mut v = vec![
        dir_root("local", false),
        dir_root("mount", true),
        store_root("memory", Arc::new(InMemory::new())),
    ];
    v.extend(guideloom_tests::moto("publish_swapped on moto").map(|m| store_root("moto", m.store)));
    v.extend(guideloom_tests::rgw("publish_swapped on RGW").map(|m| store_root("rgw", m.store)));
    v
}

/// The object stores available here: memory, and moto and RGW when configured.
fn store_kinds() -> Vec<Swappable> {
    kinds()
        .into_iter()
        .filter(|k| matches!(k.backing, Backing::Store(..)))
        .collect()
}

/// Writes shard 0 of worker `work_id`, records tagged `tag`.
async fn write(root: &Root, work_id: &str, tag: u8) -> ShardRef {
    let meta = ShardMetadata::new("raw", "documents");
    root.write_shard(work_id, 0, meta, (0..RECORDS).map(|i| record(tag, i)))
        .await
        .unwrap()
}

/// The bytes of the object at `key`.
async fn bytes_of(root: &Root, key: &str) -> Bytes {
    root.store().get(key, u64::MAX).await.unwrap().body
}

/// Asserts `err` is the `Verification` of `key`'s `what`.
fn assert_swap(kind: &str, call: &str, err: &Error, key: &str, what: &str) {
    assert_swap_any(kind, call, err, key, &[what]);
}

/// Asserts `err` is the `Verification` of `key`'s property, one of `whats`.
fn assert_swap_any(kind: &str, call: &str, err: &Error, key: &str, whats: &[&str]) {
    assert!(
        matches!(err, Error::Verification { key: k, what: w, .. } if k == key && whats.contains(w)),
        "{kind}: {call}: expected Verification {{ {key}, {whats:?} }}, got {err:?}"
    );
}

/// Every read of `reader` touching its shard 0 (records `0..RECORDS`) fails with the
/// `Verification` of `what` naming `key`; on a remote root the first `get` is a probe.
/// Reads through whole-shard staging (`scan`, and `get_range` on a remote root) check a
/// reference's SHA-256 first, when it has one: `"sha256"` is their refusal then.
async fn every_read_refuses(kind: &Swappable, reader: &Dataset, key: &str, what: &str) {
    let staged = [what, "sha256"];
    let n = kind.name;
    assert_swap(
        n,
        "get (first)",
        &reader.get_async(3).await.unwrap_err(),
        key,
        what,
    );
    if kind.remote() {
        // The probe was spent on the first get: this one opens the shard whole.
        assert_swap(
            n,
            "get (whole open)",
            &reader.get_async(4).await.unwrap_err(),
            key,
            what,
        );
    }
    let many = reader
        .get_many_async(&[0, 5, RECORDS - 1])
        .await
        .unwrap_err();
    assert_swap(n, "get_many", &many, key, what);
    let range = reader.get_range_async(0..RECORDS).await.unwrap_err();
    assert_swap_any(n, "get_range", &range, key, &staged);
    let mut scan = reader.scan(0..10).unwrap();
    let scanned = scan.next_record().await.unwrap().unwrap_err();
    assert_swap_any(n, "scan", &scanned, key, &staged);
}

/// A written shard (footer CRC32C in its reference) and an uploaded one (SHA-256 and tail
/// CRC32C), each replaced by another shard of the same size before any reader opens them:
/// every read fails naming the shard and the checksum, and no record of the other shard
/// is ever returned.
#[test]
fn a_shard_replaced_before_the_open_is_refused_by_every_read() {
    for kind in kinds() {
        block_on(async {
            let root = &kind.root;
            let written = write(root, "a", b'a').await;
            let other = write(root, "b", b'b').await;
            assert_eq!(written.size, other.size, "{}: same-size shards", kind.name);
            let encoded = bytes_of(root, &write(root, "c", b'c').await.key).await;
            let uploaded = root.upload_shard("u", 0, encoded, RECORDS).await.unwrap();
            publish(root, "s1", vec![written.clone()]).await;
            let replacement = bytes_of(root, &other.key).await;

            kind.replace(&written.key, &replacement).await;
            let reader = kind.fresh().open_latest().await.unwrap();
            every_read_refuses(&kind, &reader, &written.key, "footer checksum").await;

            publish(root, "s2", vec![uploaded.clone()]).await;
            kind.replace(&uploaded.key, &replacement).await;
            let reader = kind.fresh().open_latest().await.unwrap();
            every_read_refuses(&kind, &reader, &uploaded.key, "tail checksum").await;
        });
    }
}

/// A shard replaced on an object store after a reader opened it: the reader's next read
/// fails with `Verification` of the `"entity tag"` it pinned, at one request (no request is
/// spent on the check), for single reads and batches alike; a new reader then refuses the
/// replacement by its footer.
#[test]
fn a_shard_replaced_after_the_open_fails_the_next_read() {
    for kind in store_kinds() {
        block_on(async {
            let root = &kind.root;
            let written = write(root, "a", b'a').await;
            let other = write(root, "b", b'b').await;
            publish(root, "s1", vec![written.clone()]).await;
            let reader = kind.fresh().open_latest().await.unwrap();
            // Opened whole (a second read after the probe on S3), then read.
            assert_eq!(
                &reader.get_async(0).await.unwrap()[..],
                &record(b'a', 0)[..]
            );
            assert_eq!(
                &reader.get_async(1).await.unwrap()[..],
                &record(b'a', 1)[..]
            );

            kind.replace(&written.key, &bytes_of(root, &other.key).await)
                .await;
            let io = reader_requests(&kind);
            let err = reader.get_async(2).await.unwrap_err();
            assert_swap(kind.name, "get", &err, &written.key, "entity tag");
            if let Some(before) = io {
                let after = reader_requests(&kind).unwrap();
                assert_eq!(after - before, 1, "{}: one request, none added", kind.name);
            }
            let err = reader.get_many_async(&[3, 4000]).await.unwrap_err();
            assert_swap(kind.name, "get_many", &err, &written.key, "entity tag");
            let err = kind
                .fresh()
                .open_latest()
                .await
                .unwrap()
                .get_async(2)
                .await
                .unwrap_err();
            assert_swap(
                kind.name,
                "new reader",
                &err,
                &written.key,
                "footer checksum",
            );
        });
    }
}

/// The requests the bucket's shard readers made, when the root is on an object store.
fn reader_requests(kind: &Swappable) -> Option<u64> {
    match &kind.backing {
        Backing::Store(_, _, bucket) => Some(bucket.io().stats().snapshot().requests),
        Backing::Dir(_) => None,
    }
}

/// On a local root, a reader holds the file it opened: a replacement by rename (a new
/// inode) leaves it reading the snapshot's records, and the next reader refuses the new
/// file by its footer. An overwrite in place of an open file changes the bytes under the
/// reader: a `pread` reader (a declared mount's default, `LocalReads::Pread`) holds the
/// index it read at open, so the records' CRC32Cs catch it (`Shard`, `is_corrupt`); a
/// mapped reader's index is in the mapping too (docs/publication.md says what that means);
/// either way the next reader refuses the file by its footer.
#[test]
fn a_local_reader_keeps_its_file_and_the_next_one_refuses_the_replacement() {
    for mount in [false, true] {
        let kind = dir_root(if mount { "mount" } else { "local" }, mount);
        block_on(async {
            let root = &kind.root;
            let written = write(root, "a", b'a').await;
            let other = write(root, "b", b'b').await;
            publish(root, "s1", vec![written.clone()]).await;
            let reader = kind.fresh().open_latest().await.unwrap();
            assert_eq!(
                &reader.get_async(0).await.unwrap()[..],
                &record(b'a', 0)[..]
            );
            let original = bytes_of(root, &written.key).await;
            let replacement = bytes_of(root, &other.key).await;

            kind.replace(&written.key, &replacement).await;
            for i in [1, 2999, RECORDS - 1] {
                assert_eq!(
                    &reader.get_async(i).await.unwrap()[..],
                    &record(b'a', i)[..]
                );
            }
            let err = kind
                .fresh()
                .open_latest()
                .await
                .unwrap()
                .get_async(0)
                .await
                .unwrap_err();
            assert_swap(
                kind.name,
                "renamed over",
                &err,
                &written.key,
                "footer checksum",
            );

            // Back to the snapshot's bytes, opened, then overwritten in place.
            let Backing::Dir(dir) = &kind.backing else {
                unreachable!()
            };
            kind.replace(&written.key, &original).await;
            let reader = kind.fresh().open_latest().await.unwrap();
            assert_eq!(
                &reader.get_async(0).await.unwrap()[..],
                &record(b'a', 0)[..]
            );
            // Same size, no truncation: the open file's bytes change under the reader.
            let file = std::fs::File::options()
                .write(true)
                .open(dir.path().join(&written.key))
                .unwrap();
            std::os::unix::fs::FileExt::write_all_at(&file, &replacement, 0).unwrap();
            if mount {
                let err = reader.get_async(1).await.unwrap_err();
                assert!(
                    matches!(&err, Error::Shard { key, source } if *key == written.key && source.is_corrupt()),
                    "{}: overwritten in place: {err:?}",
                    kind.name
                );
            }
            let err = kind
                .fresh()
                .open_latest()
                .await
                .unwrap()
                .get_async(1)
                .await
                .unwrap_err();
            assert_swap(
                kind.name,
                "overwritten",
                &err,
                &written.key,
                "footer checksum",
            );
        });
    }
}

/// The bytes of an ArrayRecord file of `n` records of 100 bytes filled with `fill`: files of
/// the same `n` have the same size, chunks and footer, and differ only in their records.
fn array_record(fill: u8, n: u64) -> Vec<u8> {
    let mut w = ArrayRecordWriter::new(Vec::new(), "group_size:16,uncompressed".parse().unwrap());
    for i in 0..n {
        let mut r = vec![fill; 100];
        r[..8].copy_from_slice(&i.to_le_bytes());
        w.write(&r).unwrap();
    }
    w.finish().unwrap()
}

/// An ArrayRecord file adopted into an object-store root and swapped for another of the
/// same size and the same footer: replaced between the open and a read, record 1500 is the
/// `"entity tag"` error (never the other file's record 1500); replaced before a reader
/// opens it, the reader refuses it by the tail checksum recorded at adoption.
#[test]
fn an_adopted_array_record_file_swapped_on_an_object_store_is_refused() {
    const N: u64 = 4_000;
    for kind in store_kinds() {
        block_on(async {
            let root = &kind.root;
            let key = "imported/train.array_record";
            let ours = array_record(b'x', N);
            let theirs = array_record(b'y', N);
            assert_eq!(ours.len(), theirs.len());
            assert!(ours.len() as u64 > guideloom_publish::MAX_TAIL_CHECK_BYTES);
            kind.replace(key, &ours).await;
            let adopted = root.adopt_array_record(key).await.unwrap();
            assert!(adopted.tail.is_some(), "{}: {adopted:?}", kind.name);
            publish(root, "s1", vec![adopted]).await;

            let reader = kind.fresh().open_latest().await.unwrap();
            assert_eq!(reader.get_async(0).await.unwrap()[100 - 1], b'x');
            kind.replace(key, &theirs).await;
            let err = reader.get_async(1500).await.unwrap_err();
            assert_swap(kind.name, "get 1500", &err, key, "entity tag");

            let reader = kind.fresh().open_latest().await.unwrap();
            let err = reader.get_async(1500).await.unwrap_err();
            assert_swap(kind.name, "new reader", &err, key, "tail checksum");
        });
    }
}

/// A store over `inner` that replaces `key` (in `raw`, at `path`) with `replacement` right
/// after the first ranged read of it: a swap in the middle of a whole-shard download.
#[derive(Debug)]
struct SwapMidDownload {
    inner: Arc<dyn RootStore>,
    raw: Arc<dyn ObjectStore>,
    path: ObjectPath,
    key: String,
    replacement: Bytes,
    swapped: AtomicBool,
}

#[async_trait]
impl RootStore for SwapMidDownload {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> StoreCapabilities {
        self.inner.capabilities()
    }
    async fn put_create(&self, key: &str, body: Bytes) -> guideloom_publish::Result<CreateOutcome> {
        self.inner.put_create(key, body).await
    }
    async fn put_cas(
        &self,
        key: &str,
        body: Bytes,
        expected: Option<&Etag>,
    ) -> guideloom_publish::Result<CasOutcome> {
        self.inner.put_cas(key, body, expected).await
    }
    async fn get(&self, key: &str, limit: u64) -> guideloom_publish::Result<Object> {
        self.inner.get(key, limit).await
    }
    async fn get_range(&self, key: &str, range: Range<u64>) -> guideloom_publish::Result<Bytes> {
        Ok(self.get_range_tagged(key, range).await?.0)
    }
    async fn get_range_tagged(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> guideloom_publish::Result<(Bytes, Option<Etag>)> {
        let got = self.inner.get_range_tagged(key, range).await?;
        if key == self.key && !self.swapped.swap(true, Ordering::SeqCst) {
            self.raw
                .put(&self.path, self.replacement.clone().into())
                .await
                .unwrap();
        }
        Ok(got)
    }
    async fn head(&self, key: &str) -> guideloom_publish::Result<ObjectInfo> {
        self.inner.head(key).await
    }
    async fn open_reader(
        &self,
        key: &str,
        size: u64,
    ) -> guideloom_publish::Result<Box<dyn guideloom_io::AsyncReader>> {
        self.inner.open_reader(key, size).await
    }
    async fn list(&self, prefix: &str) -> guideloom_publish::Result<Vec<ObjectInfo>> {
        self.inner.list(prefix).await
    }
}

/// A shard replaced while whole-shard staging downloads it (one 16 KiB range at a time):
/// the ranges' entity tags differ, and the scan fails with `Verification` of the
/// `"entity tag"` rather than stage (and serve) a file of two objects' bytes.
#[test]
fn a_shard_replaced_mid_download_is_never_staged() {
    for kind in store_kinds() {
        block_on(async {
            let root = &kind.root;
            let written = write(root, "a", b'a').await;
            let other = write(root, "b", b'b').await;
            publish(root, "s1", vec![written.clone()]).await;
            let Backing::Store(raw, prefix, _) = &kind.backing else {
                unreachable!()
            };
            let store = Arc::new(SwapMidDownload {
                inner: Arc::clone(root.store()),
                raw: Arc::clone(raw),
                path: ObjectPath::from(format!("{prefix}/{}", written.key)),
                key: written.key.clone(),
                replacement: bytes_of(root, &other.key).await,
                swapped: AtomicBool::new(false),
            });
            let staging = tempfile::tempdir().unwrap();
            let options = RootOptions {
                staging: StagingOptions {
                    dir: Some(staging.path().to_owned()),
                    download_chunk_bytes: 16 << 10,
                    parallel_requests: 1,
                    ..StagingOptions::default()
                },
                ..RootOptions::default()
            };
            let reader = Root::new(store, options).open_latest().await.unwrap();
            let mut scan = reader.scan(0..RECORDS).unwrap();
            let err = scan.next_record().await.unwrap().unwrap_err();
            assert_swap(kind.name, "scan", &err, &written.key, "entity tag");
        });
    }
}
