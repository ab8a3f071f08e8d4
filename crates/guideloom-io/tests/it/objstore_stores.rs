//! `ObjectStoreIo` over object_store's in-memory store (always) and over moto's S3 server
//! (feature `s3`, env GUIDELOOM_S3_ENDPOINT / GUIDELOOM_S3_BUCKET).
#![cfg(feature = "object-store")]
// Test data are small; indexing them with u64 offsets cannot truncate.
#![allow(clippy::cast_possible_truncation)]

use crate::support;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_io::objstore::{ObjectStoreIo, ObjectStoreOptions};
use guideloom_io::{AsyncReader, Backend, CoalescePolicy, Error, Location};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use support::servers::{bytes, unique};

const SIZE: usize = 3 * 1024 * 1024 + 5;

async fn put(store: &dyn ObjectStore, path: &Path, data: &[u8]) {
    store
        .put(path, Bytes::copy_from_slice(data).into())
        .await
        .unwrap();
}

fn check(data: &[u8], ranges: &[Range<u64>], got: &[Bytes]) {
    assert_eq!(ranges.len(), got.len());
    for (r, b) in ranges.iter().zip(got) {
        assert_eq!(&b[..], &data[r.start as usize..r.end as usize], "{r:?}");
    }
}

/// The same checks for any store: exact reads, tail in one request, coalesced batches,
/// errors mapped.
async fn exercise(store: Arc<dyn ObjectStore>, prefix: &Path) {
    let data = bytes(SIZE, 3);
    let obj = Location::child(prefix, "obj.bin");
    put(&*store, &obj, &data).await;
    put(&*store, &Location::child(prefix, "empty.bin"), b"").await;

    let io = ObjectStoreIo::with_options(
        Arc::clone(&store),
        ObjectStoreOptions::default().with_coalesce(CoalescePolicy {
            max_gap: 4096,
            max_span: 256 * 1024,
        }),
    );
    let r = io.open_reader(&obj);
    let t = r.read_tail(10_000).await.unwrap();
    assert_eq!(t.size, SIZE as u64);
    assert_eq!(&t.bytes[..], &data[SIZE - 10_000..]);
    assert_eq!(
        r.stats().snapshot().requests,
        1,
        "one suffix request gives size and tail"
    );
    assert_eq!(r.size().await.unwrap(), SIZE as u64);
    assert_eq!(r.stats().snapshot().requests, 1);

    let b = r.read(12_345, 1000).await.unwrap();
    assert_eq!(&b[..], &data[12_345..13_345]);
    assert_eq!(r.stats().snapshot().requests, 2);
    assert!(r.read(0, 0).await.unwrap().is_empty());
    assert_eq!(r.stats().snapshot().requests, 2);

    // 64 neighbouring records: one request. 64 spread records: one per merged span.
    let neighbours: Vec<_> = (0..64u64)
        .map(|i| 1_000_000 + i * 1024..1_000_000 + i * 1024 + 1000)
        .collect();
    let s0 = r.stats().snapshot();
    check(
        &data,
        &neighbours,
        &r.read_ranges(&neighbours).await.unwrap(),
    );
    assert_eq!(r.stats().snapshot().requests - s0.requests, 1);
    let spread: Vec<_> = (0..8u64).map(|i| i * 300_000..i * 300_000 + 100).collect();
    let s0 = r.stats().snapshot();
    check(&data, &spread, &r.read_ranges(&spread).await.unwrap());
    assert_eq!(r.stats().snapshot().requests - s0.requests, 8);
    // The span cap keeps merged reads bounded: a long run of touching records splits.
    let run: Vec<_> = (0..1024u64).map(|i| i * 1024..i * 1024 + 1024).collect();
    let s0 = r.stats().snapshot();
    check(&data, &run, &r.read_ranges(&run).await.unwrap());
    assert_eq!(
        r.stats().snapshot().requests - s0.requests,
        4,
        "1 MiB in 256 KiB spans"
    );

    // A range overlapping the end is OutOfRange, never a short buffer.
    let fresh = io.open_reader(&obj);
    assert!(matches!(
        fresh.read(SIZE as u64 - 10, 20).await,
        Err(Error::OutOfRange { size, .. }) if size == SIZE as u64
    ));
    let fresh = io.open_reader(&obj);
    assert!(matches!(
        fresh.read(SIZE as u64 + 10, 20).await,
        Err(Error::OutOfRange { .. })
    ));

    let missing = io
        .open_async(&Location::child(prefix, "missing.bin"))
        .await
        .unwrap();
    assert!(missing.size().await.unwrap_err().is_not_found());
    assert!(missing.read(0, 1).await.unwrap_err().is_not_found());
    assert!(missing.read_tail(10).await.unwrap_err().is_not_found());

    let empty = io.open_reader(&Location::child(prefix, "empty.bin"));
    let t = empty.read_tail(100).await.unwrap();
    assert_eq!((t.size, t.bytes.len()), (0, 0));

    assert!(matches!(
        io.open(&obj),
        Err(Error::Unsupported {
            backend: "ObjectStoreIo",
            ..
        })
    ));
    r.close().await.unwrap();
    r.close().await.unwrap();
    assert!(matches!(r.read(0, 1).await, Err(Error::Closed { .. })));
    assert!(io.stats().snapshot().requests >= r.stats().snapshot().requests);
}

#[tokio::test]
async fn in_memory_store() {
    exercise(Arc::new(InMemory::new()), &Path::from("data/set")).await;
}

#[test]
fn public_types_are_send_sync_debug() {
    fn check<T: Send + Sync + std::fmt::Debug + 'static>() {}
    check::<ObjectStoreIo>();
    check::<guideloom_io::objstore::ObjectStoreReader>();
    check::<ObjectStoreOptions>();
    let io: guideloom_io::DynBackend<Path> =
        Arc::new(ObjectStoreIo::new(Arc::new(InMemory::new())));
    assert_eq!(io.name(), "ObjectStoreIo");
}

#[test]
fn path_child_joins_parts() {
    let p = Location::child(&Path::from("a/b"), "c/d.bin");
    assert_eq!(p.as_ref(), "a/b/c/d.bin");
    assert_eq!(Location::child(&Path::from(""), "x").as_ref(), "x");
}

#[cfg(feature = "blocking")]
#[test]
fn in_memory_store_through_the_blocking_adapter() {
    use guideloom_io::SyncReader;
    use guideloom_io::blocking::BlockingIo;

    let store = Arc::new(InMemory::new());
    let data = bytes(100_000, 9);
    let io = BlockingIo::new(ObjectStoreIo::new(store.clone())).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(put(&*store, &Path::from("x.bin"), &data));
    let r = io.open(&Path::from("x.bin")).unwrap();
    assert_eq!(r.size().unwrap(), 100_000);
    assert_eq!(&r.read(10, 10).unwrap()[..], &data[10..20]);
    assert_eq!(
        r.read_tail(5).unwrap().bytes,
        Bytes::copy_from_slice(&data[99_995..])
    );
    // Called from inside a runtime: an error, never a panic.
    let inner = rt.block_on(async { r.read(0, 1) });
    assert!(
        matches!(
            inner,
            Err(Error::Unsupported {
                backend: "BlockingIo",
                ..
            })
        ),
        "{inner:?}"
    );
    assert!(
        rt.block_on(async { io.open(&Path::from("x.bin")) })
            .is_err()
    );
    // A borrowed runtime must be multi-thread; a current-thread one is refused.
    assert!(
        BlockingIo::with_handle(ObjectStoreIo::new(store.clone()), rt.handle().clone()).is_err()
    );
    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let shared = BlockingIo::with_handle(ObjectStoreIo::new(store), mt.handle().clone()).unwrap();
    let r = shared.open(&Path::from("x.bin")).unwrap();
    assert_eq!(&r.read(99_990, 10).unwrap()[..], &data[99_990..]);
}

/// The conformance kit on `store`, async and sync (through `BlockingIo`).
#[cfg(all(feature = "conformance", feature = "blocking"))]
fn conformance(store: Arc<dyn ObjectStore>, prefix: Path, iterations: usize) {
    use guideloom_io::blocking::BlockingIo;
    use guideloom_io::conformance::{ConformanceOptions, Fixture, run_all_with};

    struct StoreFixture {
        store: Arc<dyn ObjectStore>,
        prefix: Path,
    }

    #[async_trait::async_trait]
    impl Fixture for StoreFixture {
        type Location = Path;
        async fn create(&self, name: &str, bytes: &[u8]) -> Result<Path, guideloom_io::BoxError> {
            let path = Location::child(&self.prefix, name);
            self.store
                .put(&path, Bytes::copy_from_slice(bytes).into())
                .await?;
            Ok(path)
        }
        fn missing(&self) -> Path {
            Location::child(&self.prefix, "never-created.bin")
        }
    }

    let fixture = StoreFixture {
        store: Arc::clone(&store),
        prefix,
    };
    let mut options = ConformanceOptions::default();
    options.iterations = iterations;
    let io = BlockingIo::new(ObjectStoreIo::new(store)).unwrap();
    let report = run_all_with(&io, &fixture, &options).unwrap();
    assert!(report.skipped.is_empty(), "{report}");
    println!("{report}; {:?}", io.inner().stats().snapshot());
}

#[cfg(all(feature = "conformance", feature = "blocking"))]
#[test]
fn in_memory_conformance_kit() {
    conformance(Arc::new(InMemory::new()), Path::from("conformance"), 400);
}

#[cfg(feature = "s3")]
fn moto_store(endpoint: String, bucket: String) -> Arc<dyn ObjectStore> {
    // Not from_env: this machine sets AWS_CA_BUNDLE and other variables.
    guideloom_io::tls::install_crypto_provider();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap();
    Arc::new(store)
}

#[cfg(feature = "s3")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_s3() {
    let Some((endpoint, bucket)) = support::servers::s3("moto_s3") else {
        return;
    };
    let prefix = Path::from(unique("objstore-moto"));
    exercise(moto_store(endpoint, bucket), &prefix).await;
}

#[cfg(all(feature = "s3", feature = "conformance", feature = "blocking"))]
#[test]
fn moto_conformance_kit() {
    let Some((endpoint, bucket)) = support::servers::s3("moto_conformance_kit") else {
        return;
    };
    conformance(
        moto_store(endpoint, bucket),
        Path::from(unique("objstore-moto-conformance")),
        40,
    );
}

/// An object replaced behind an open reader (same size, other bytes) is `Error::Changed` at
/// the reader's next read, whichever kind of read, with no extra request: the first read
/// pinned the entity tag and every later one sends it as `If-Match`.
async fn replaced_object_is_changed_at_the_next_read(store: Arc<dyn ObjectStore>, prefix: &Path) {
    let obj = Location::child(prefix, "swapped.bin");
    let first = bytes(100_000, 1);
    put(&*store, &obj, &first).await;
    let io = ObjectStoreIo::new(Arc::clone(&store));
    let r = io.open_reader(&obj);
    let tail = r.read_tail(1000).await.unwrap();
    assert_eq!(&tail.bytes[..], &first[99_000..]);
    let pinned = r.etag().expect("the store reports entity tags").to_owned();
    assert_eq!(&r.read(10, 20).await.unwrap()[..], &first[10..30]);

    put(&*store, &obj, &bytes(100_000, 2)).await;
    let before = r.stats().snapshot().requests;
    let reads: [Result<Vec<Bytes>, Error>; 3] = [
        r.read(10, 20).await.map(|b| vec![b]),
        r.read_ranges(&[0..10, 50_000..50_010]).await,
        r.read_tail(1000).await.map(|t| vec![t.bytes]),
    ];
    for (n, read) in reads.into_iter().enumerate() {
        let err = read.unwrap_err();
        assert!(
            matches!(&err, Error::Changed { pinned: p, .. } if *p == pinned),
            "read {n}: {err:?}"
        );
        assert!(err.is_changed() && !err.is_retryable());
    }
    assert_eq!(
        r.stats().snapshot().requests - before,
        3,
        "one request per read, none added"
    );
    // A new reader reads the new object.
    let fresh = io.open_reader(&obj);
    assert_eq!(
        &fresh.read(10, 20).await.unwrap()[..],
        &bytes(100_000, 2)[10..30]
    );
}

#[tokio::test]
async fn in_memory_replaced_object_is_changed() {
    replaced_object_is_changed_at_the_next_read(Arc::new(InMemory::new()), &Path::from("swap"))
        .await;
}

#[cfg(feature = "s3")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_replaced_object_is_changed() {
    let Some((endpoint, bucket)) = support::servers::s3("moto_replaced_object_is_changed") else {
        return;
    };
    let prefix = Path::from(unique("objstore-swap"));
    replaced_object_is_changed_at_the_next_read(moto_store(endpoint, bucket), &prefix).await;
}

/// `InMemory` behind a client quirk: `quirk` sees each GET's options first and refuses the
/// request (nothing reaches the store) or passes them on, rewritten. Every other call goes
/// straight to the store.
#[derive(Debug)]
struct Quirky {
    name: &'static str,
    quirk: Quirk,
    store: InMemory,
}

/// A client quirk: a GET's options refused, or passed on (rewritten).
type Quirk = fn(&Path, object_store::GetOptions) -> object_store::Result<object_store::GetOptions>;

impl Quirky {
    /// An empty `InMemory` behind `quirk`.
    fn store(name: &'static str, quirk: Quirk) -> Arc<dyn ObjectStore> {
        Arc::new(Quirky {
            name,
            quirk,
            store: InMemory::new(),
        })
    }
}

impl std::fmt::Display for Quirky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Quirky {
    async fn put_opts(
        &self,
        location: &Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.store.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.store.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        let options = (self.quirk)(location, options)?;
        self.store.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
        self.store.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.store.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.store.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.store.copy_opts(from, to, options).await
    }
}

/// Ceph RGW 16's conditional-write quirk applied to reads of `InMemory` (whose entity tags
/// are quoted): an `If-Match` with the quoted form is refused (412) while the unquoted form
/// is honoured.
fn quotes_refused(
    location: &Path,
    mut options: object_store::GetOptions,
) -> object_store::Result<object_store::GetOptions> {
    if let Some(tag) = options.if_match.take() {
        if tag.starts_with('"') {
            return Err(object_store::Error::Precondition {
                path: location.to_string(),
                source: "quoted entity tag refused".into(),
            });
        }
        options.if_match = Some(format!("\"{tag}\""));
    }
    Ok(options)
}

/// A store that refuses quoted entity tags in `If-Match` costs one extra request, once per
/// backend: the refused request is retried unquoted, every later one is sent unquoted, and
/// a replaced object is still `Error::Changed`.
#[tokio::test]
async fn a_store_refusing_quoted_etags_gets_them_unquoted() {
    let store: Arc<dyn ObjectStore> = Quirky::store("QuotesRefused", quotes_refused);
    let obj = Path::from("quotes/obj.bin");
    let data = bytes(10_000, 5);
    put(&*store, &obj, &data).await;
    let io = ObjectStoreIo::new(Arc::clone(&store));
    let r = io.open_reader(&obj);
    r.read_tail(100).await.unwrap();
    assert!(r.etag().unwrap().starts_with('"'));
    assert_eq!(&r.read(0, 10).await.unwrap()[..], &data[..10]);
    assert_eq!(r.stats().snapshot().requests, 3, "tail, refused, unquoted");
    assert_eq!(&r.read(10, 10).await.unwrap()[..], &data[10..20]);
    let other = io.open_reader(&obj);
    other.read_tail(100).await.unwrap();
    other.read(0, 10).await.unwrap();
    assert_eq!(
        r.stats().snapshot().requests + other.stats().snapshot().requests,
        6,
        "learnt once for the backend"
    );
    put(&*store, &obj, &bytes(10_000, 6)).await;
    let err = r.read(0, 10).await.unwrap_err();
    assert!(matches!(err, Error::Changed { found: None, .. }), "{err:?}");
}

/// A client that refuses suffix ranges before sending anything, as object_store's Azure
/// client does ("Azure does not support suffix range requests").
fn no_suffix(
    _: &Path,
    options: object_store::GetOptions,
) -> object_store::Result<object_store::GetOptions> {
    if matches!(options.range, Some(object_store::GetRange::Suffix(_))) {
        return Err(object_store::Error::NotSupported {
            source: "suffix range requests are not supported".into(),
        });
    }
    Ok(options)
}

/// A store whose client refuses suffix ranges (Azure's) still reads tails: as a bounded
/// range of the size (one HEAD when the size is unknown, none when it is), with the same
/// pinning; the refusal is learnt once per backend and sends nothing.
#[tokio::test]
async fn a_store_refusing_suffix_ranges_reads_tails_by_size() {
    let store: Arc<dyn ObjectStore> = Quirky::store("NoSuffix", no_suffix);
    let obj = Path::from("suffix/obj.bin");
    let data = bytes(10_000, 7);
    put(&*store, &obj, &data).await;
    let io = ObjectStoreIo::new(Arc::clone(&store));
    let r = io.open_reader(&obj);
    let tail = r.read_tail(100).await.unwrap();
    assert_eq!((tail.size, &tail.bytes[..]), (10_000, &data[9_900..]));
    assert_eq!(
        r.stats().snapshot().requests,
        2,
        "HEAD, then the bounded tail"
    );
    // Longer than the object: the whole object.
    let all = io.open_reader(&obj).read_tail(20_000).await.unwrap();
    assert_eq!(&all.bytes[..], &data[..]);
    // A reader that knows the size sends one request.
    let known = io.open_reader_with_size(&obj, 10_000);
    assert_eq!(
        &known.read_tail(10).await.unwrap().bytes[..],
        &data[9_990..]
    );
    assert_eq!(known.stats().snapshot().requests, 1);
    // Pinned like any tail: a replaced object is Changed at the next read.
    put(&*store, &obj, &bytes(10_000, 8)).await;
    let err = r.read(0, 10).await.unwrap_err();
    assert!(matches!(err, Error::Changed { .. }), "{err:?}");
}

/// A size hint is never trusted: an object of another size read without suffix ranges
/// gives its real tail and size.
#[tokio::test]
async fn a_wrong_size_hint_still_reads_the_real_tail() {
    let store: Arc<dyn ObjectStore> = Quirky::store("NoSuffix", no_suffix);
    let obj = Path::from("suffix/hint.bin");
    let data = bytes(10_000, 9);
    put(&*store, &obj, &data).await;
    let io = ObjectStoreIo::new(Arc::clone(&store));
    for hint in [9_000, 12_000, 10] {
        let r = io.open_reader_with_size(&obj, hint);
        let tail = r.read_tail(100).await.unwrap();
        assert_eq!(
            (tail.size, &tail.bytes[..]),
            (10_000, &data[9_900..]),
            "{hint}"
        );
    }
}
