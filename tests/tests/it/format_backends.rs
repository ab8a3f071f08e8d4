//! guideloom-storage storages through every local guideloom-io backend (SeekIo, PreadIo,
//! MmapIo), sync and async: round trips with rollover, request counts at the storage level,
//! and discovery through a lazily-opening backend (as over HTTP).

// Test data is small; the truncating casts below are on values known to fit.
#![allow(clippy::cast_possible_truncation)]

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::{Error, RawFormat};
use guideloom_io::{
    AsyncReader, Backend, Capabilities, CountingReader, MmapIo, PreadIo, RequestStats, SeekIo,
    SyncReader,
};
use guideloom_storage::{DocumentStorage, StreamStorage, StreamWithMetaStorage, WriterOptions};
use proptest::prelude::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `f` once per local backend.
fn each_backend(f: impl Fn(&str, Arc<dyn Backend<Location = PathBuf>>)) {
    f("SeekIo", Arc::new(SeekIo::new()));
    f("PreadIo", Arc::new(PreadIo::new()));
    f("MmapIo", Arc::new(MmapIo::new()));
}

fn documents_round_trip(
    backend: Arc<dyn Backend<Location = PathBuf>>,
    recs: &[Vec<u8>],
    max_records: u64,
    max_bytes: u64,
) {
    let tmp = tempfile::tempdir().unwrap();
    let options = WriterOptions::default()
        .max_shard_records(max_records)
        .max_shard_bytes(max_bytes);
    let storage =
        DocumentStorage::new(tmp.path().join("d"), RawFormat, backend).with_writer_options(options);
    let mut w = storage.sync_writer().unwrap();
    for (i, r) in recs.iter().enumerate() {
        w.append(i as u64, &Bytes::from(r.clone())).unwrap();
    }
    w.finish().unwrap();
    let r = storage.sync_reader().unwrap();
    assert_eq!(r.len(), recs.len() as u64);
    for (i, rec) in recs.iter().enumerate() {
        assert_eq!(&r.read(i as u64).unwrap()[..], &rec[..]);
    }
    let all: Vec<Bytes> = r.iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(all.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), recs);
    let rev: Vec<u64> = (0..recs.len() as u64).rev().collect();
    let many = r.read_many(&rev).unwrap();
    for (got, &i) in many.iter().zip(&rev) {
        assert_eq!(&got[..], &recs[i as usize][..]);
    }
    assert!(matches!(
        r.read(recs.len() as u64),
        Err(Error::IndexOutOfRange { .. })
    ));
    rt().block_on(async {
        let a = storage.async_reader().await.unwrap();
        assert_eq!(a.len(), recs.len() as u64);
        for (i, rec) in recs.iter().enumerate() {
            assert_eq!(&a.read(i as u64).await.unwrap()[..], &rec[..]);
        }
        let many = a.read_many(&rev).await.unwrap();
        assert_eq!(many.len(), rev.len());
    });
}

fn stream_round_trip(
    backend: Arc<dyn Backend<Location = PathBuf>>,
    appends: &[Vec<u16>],
    chunk: u64,
    max_bytes: u64,
) {
    let tmp = tempfile::tempdir().unwrap();
    let options = WriterOptions::default()
        .stream_chunk_bytes(chunk)
        .max_shard_bytes(max_bytes);
    let storage =
        StreamStorage::<u16, _>::new(tmp.path().join("s"), backend).with_writer_options(options);
    let mut w = storage.sync_writer().unwrap();
    let mut model = Vec::new();
    for a in appends {
        w.append(a).unwrap();
        model.extend_from_slice(a);
    }
    w.finish().unwrap();
    let r = storage.sync_reader().unwrap();
    assert_eq!(r.len(), model.len() as u64);
    let n = model.len();
    for (start, len) in [(0, n), (n / 3, n / 2), (n.saturating_sub(1), n.min(1))] {
        assert_eq!(
            &*r.read(start as u64, len as u64).unwrap(),
            &model[start..start + len]
        );
    }
    rt().block_on(async {
        let a = storage.async_reader().await.unwrap();
        assert_eq!(&*a.read(0, n as u64).await.unwrap(), &model[..]);
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn documents_through_every_backend(
        recs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..30),
        max_records in 1u64..6,
        max_bytes in 1u64..800,
    ) {
        each_backend(|_, b| documents_round_trip(b, &recs, max_records, max_bytes));
    }

    #[test]
    fn streams_through_every_backend(
        appends in proptest::collection::vec(proptest::collection::vec(any::<u16>(), 0..80), 0..10),
        chunk in 2u64..100,
        max_bytes in 1u64..500,
    ) {
        each_backend(|_, b| stream_round_trip(b, &appends, chunk, max_bytes));
    }
}

#[test]
fn stream_with_meta_through_every_backend() {
    each_backend(|name, backend| {
        let tmp = tempfile::tempdir().unwrap();
        let storage =
            StreamWithMetaStorage::<u32, (String, u8), _>::new(tmp.path().into(), backend)
                .with_writer_options(WriterOptions::default().max_shard_records(3));
        let mut w = storage.sync_writer().unwrap();
        for d in 0..10u32 {
            let elems: Vec<u32> = (0..d).collect();
            assert_eq!(
                w.append(&elems, &(name.to_owned(), d as u8)).unwrap(),
                u64::from(d)
            );
        }
        w.finish().unwrap();
        let r = storage.sync_reader().unwrap();
        assert_eq!(r.num_docs(), 10);
        assert_eq!(r.len(), 45);
        let (elems, meta) = r.read_doc(7).unwrap();
        assert_eq!(&*elems, &(0..7).collect::<Vec<u32>>()[..]);
        assert_eq!(meta, (name.to_owned(), 7));
        rt().block_on(async {
            let a = storage.async_reader().await.unwrap();
            let (elems, meta) = a.read_doc(9).await.unwrap();
            assert_eq!(elems.len(), 9);
            assert_eq!(meta.1, 9);
            assert_eq!(a.doc_range(9).unwrap(), 36..45);
        });
    });
}

/// A backend that counts every request its readers make, into one shared counter.
#[derive(Debug)]
struct Counting<B> {
    inner: B,
    stats: Arc<RequestStats>,
}

#[async_trait]
impl<B: Backend<Location = PathBuf>> Backend for Counting<B> {
    type Location = PathBuf;
    fn name(&self) -> &'static str {
        "Counting"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn open(&self, location: &PathBuf) -> guideloom_io::Result<Box<dyn SyncReader>> {
        let r = self.inner.open(location)?;
        Ok(Box::new(CountingReader::with_stats(r, self.stats.clone())))
    }
    async fn open_async(&self, location: &PathBuf) -> guideloom_io::Result<Box<dyn AsyncReader>> {
        let r = self.inner.open_async(location).await?;
        Ok(Box::new(CountingReader::with_stats(r, self.stats.clone())))
    }
}

#[test]
fn storage_request_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let stats = Arc::new(RequestStats::new());
    let backend = Counting {
        inner: PreadIo::new(),
        stats: stats.clone(),
    };
    let storage = DocumentStorage::new(tmp.path().to_owned(), RawFormat, backend)
        .with_writer_options(WriterOptions::default().max_shard_records(100));
    let mut w = storage.sync_writer().unwrap();
    for i in 0..300u64 {
        w.append(i, &Bytes::from(vec![i as u8; 1000])).unwrap();
    }
    w.finish().unwrap();

    let r = storage.sync_reader().unwrap();
    assert_eq!(stats.reset().requests, 3, "one tail read per shard");
    assert_eq!(r.read(150).unwrap().len(), 1000);
    assert_eq!(stats.reset().requests, 1, "one read per record");
    r.read_many(&[101, 102, 103, 150]).unwrap();
    assert_eq!(
        stats.reset().requests,
        1,
        "one batched read per shard touched"
    );
    r.read_many(&[5, 105, 205]).unwrap();
    assert_eq!(stats.reset().requests, 3);
    assert_eq!(r.iter().count(), 300);
    assert_eq!(
        stats.reset().requests,
        3,
        "in-order iteration reads 100 KiB shards whole"
    );

    rt().block_on(async {
        let a = storage.async_reader().await.unwrap();
        assert_eq!(stats.reset().requests, 3);
        a.read(299).await.unwrap();
        assert_eq!(stats.reset().requests, 1);
    });

    let s = StreamStorage::<u32, _>::new(
        tmp.path().join("tokens"),
        Counting {
            inner: MmapIo::new(),
            stats: stats.clone(),
        },
    );
    let mut w = s.sync_writer().unwrap();
    w.append(&(0..100_000u32).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let r = s.sync_reader().unwrap();
    stats.reset();
    let slice = r.read(5000, 2048).unwrap();
    assert_eq!(slice[0], 5000);
    assert_eq!(
        stats.reset().requests,
        1,
        "a slice inside one shard is one read"
    );
    assert!(slice.is_view(), "zero-copy from the mapping");
}

/// A backend whose `open` always succeeds (like HTTP without a HEAD); a missing object
/// surfaces as NotFound at the first read instead.
#[derive(Debug)]
struct Lazy;

#[derive(Debug)]
struct LazyReader {
    name: String,
    inner: Option<Box<dyn SyncReader>>,
}

impl LazyReader {
    fn get(&self) -> guideloom_io::Result<&dyn SyncReader> {
        self.inner
            .as_deref()
            .ok_or_else(|| guideloom_io::Error::NotFound {
                location: self.name.clone(),
                source: None,
            })
    }
}

impl SyncReader for LazyReader {
    fn location(&self) -> &str {
        &self.name
    }
    fn size(&self) -> guideloom_io::Result<u64> {
        self.get()?.size()
    }
    fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        self.get()?.read(offset, len)
    }
    fn read_tail(&self, len: u64) -> guideloom_io::Result<guideloom_io::Tail> {
        self.get()?.read_tail(len)
    }
    fn close(&self) -> guideloom_io::Result<()> {
        Ok(())
    }
}

#[async_trait]
impl Backend for Lazy {
    type Location = PathBuf;
    fn name(&self) -> &'static str {
        "Lazy"
    }
    fn capabilities(&self) -> Capabilities {
        let mut c = Capabilities::default();
        c.sync = true;
        c
    }
    fn open(&self, location: &PathBuf) -> guideloom_io::Result<Box<dyn SyncReader>> {
        Ok(Box::new(LazyReader {
            name: location.display().to_string(),
            inner: SeekIo::new().open(location).ok(),
        }))
    }
    async fn open_async(&self, _: &PathBuf) -> guideloom_io::Result<Box<dyn AsyncReader>> {
        Err(guideloom_io::Error::unsupported(
            "Lazy",
            "async reader",
            "sync only",
        ))
    }
}

#[test]
fn discovery_stops_at_not_found_from_a_lazy_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = DocumentStorage::new(tmp.path().to_owned(), RawFormat, Lazy)
        .with_writer_options(WriterOptions::default().max_shard_records(2));
    assert!(storage.sync_reader().unwrap().is_empty());
    let mut w = storage.sync_writer().unwrap();
    for i in 0..5u64 {
        w.append(i, &Bytes::from(vec![1; i as usize])).unwrap();
    }
    w.finish().unwrap();
    let r = storage.sync_reader().unwrap();
    assert_eq!((r.len(), r.shards().len()), (5, 3));
    assert_eq!(r.read(4).unwrap().len(), 4);
    // An unsupported flavour is a typed error, not a panic.
    assert!(matches!(
        rt().block_on(storage.async_reader()),
        Err(Error::Io(guideloom_io::Error::Unsupported { .. }))
    ));
}

#[test]
fn one_reader_shared_by_threads() {
    each_backend(|name, backend| {
        let tmp = tempfile::tempdir().unwrap();
        let storage = DocumentStorage::new(tmp.path().to_owned(), RawFormat, backend)
            .with_writer_options(WriterOptions::default().max_shard_records(64));
        let mut w = storage.sync_writer().unwrap();
        for i in 0..500u64 {
            w.append(i, &Bytes::from(i.to_le_bytes().repeat(i as usize % 7)))
                .unwrap();
        }
        w.finish().unwrap();
        let r = storage.sync_reader().unwrap();
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let r = &r;
                s.spawn(move || {
                    for k in 0..500u64 {
                        let i = (k * 7 + t * 131) % 500;
                        let got = r.read(i).unwrap();
                        assert_eq!(got, i.to_le_bytes().repeat(i as usize % 7), "{name}");
                    }
                });
            }
        });
    });
}
