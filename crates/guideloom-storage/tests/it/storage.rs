//! Storages: round trips with rollover at every boundary, edge cases.

use std::path::Path;

use bytes::Bytes;
use guideloom_format::{CborFormat, Error, RawFormat};
use guideloom_io::{MmapIo, SeekIo};
use guideloom_storage::{DocumentStorage, StreamStorage, StreamWithMetaStorage, WriterOptions};
use proptest::prelude::*;

use crate::util::{listing, rt};

fn docs(dir: &Path, options: WriterOptions) -> DocumentStorage<RawFormat, SeekIo> {
    DocumentStorage::new(dir.to_owned(), RawFormat, SeekIo::new()).with_writer_options(options)
}

/// Checks shard limits: every shard within the record limit and within the byte limit
/// unless it holds a single oversized record.
fn check_limits(dir: &Path, options: &WriterOptions) {
    let fs = guideloom_storage::FileSystemDocument::new(dir, "raw");
    for s in fs.discover().unwrap() {
        assert!(s.records >= 1 && s.records <= options.shard_records_limit());
        assert!(s.data_len <= options.shard_bytes_limit() || s.records == 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn documents_round_trip_sync_and_async(
        recs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..40),
        max_records in 1u64..6,
        max_bytes in 1u64..600,
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        let options = WriterOptions::default().max_shard_records(max_records).max_shard_bytes(max_bytes);
        let storage = docs(&dir, options.clone());
        let mut w = storage.sync_writer().unwrap();
        for (i, r) in recs.iter().enumerate() {
            w.append(i as u64, &Bytes::from(r.clone())).unwrap();
        }
        w.finish().unwrap();
        check_limits(&dir, &options);

        let r = storage.sync_reader().unwrap();
        prop_assert_eq!(r.len(), recs.len() as u64);
        for (i, rec) in recs.iter().enumerate() {
            prop_assert_eq!(&r.read(i as u64).unwrap()[..], &rec[..]);
        }
        let all: Vec<Bytes> = r.iter().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(all.len(), recs.len());
        for (a, b) in all.iter().zip(&recs) {
            prop_assert_eq!(&a[..], &b[..]);
        }
        if !recs.is_empty() {
            let idx: Vec<u64> = picks.iter().map(|p| p.index(recs.len()) as u64).collect();
            let many = r.read_many(&idx).unwrap();
            for (got, &i) in many.iter().zip(&idx) {
                prop_assert_eq!(&got[..], &recs[i as usize][..]);
            }
        }
        let is_oob = matches!(
            r.read(recs.len() as u64),
            Err(Error::IndexOutOfRange { .. })
        );
        prop_assert!(is_oob);

        rt().block_on(async {
            let a = storage.async_reader().await.unwrap();
            assert_eq!(a.len(), recs.len() as u64);
            let mut start = 0u64;
            loop {
                let batch = a.read_batch(start).await.unwrap();
                if batch.is_empty() { break; }
                for (k, got) in batch.iter().enumerate() {
                    assert_eq!(&got[..], &recs[start as usize + k][..]);
                }
                start += batch.len() as u64;
            }
            assert_eq!(start, recs.len() as u64);
            for (i, rec) in recs.iter().enumerate() {
                assert_eq!(&a.read(i as u64).await.unwrap()[..], &rec[..]);
            }
        });
    }

    #[test]
    fn stream_round_trip_and_slices(
        appends in proptest::collection::vec(proptest::collection::vec(any::<u32>(), 0..50), 0..12),
        chunk in 4u64..64,
        max_bytes in 1u64..400,
        slices in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..120), 0..12),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let options = WriterOptions::default().stream_chunk_bytes(chunk).max_shard_bytes(max_bytes);
        let storage = StreamStorage::<u32, _>::new(tmp.path().join("s"), SeekIo::new())
            .with_writer_options(options);
        let mut w = storage.sync_writer().unwrap();
        let mut model: Vec<u32> = Vec::new();
        for a in &appends {
            w.append(a).unwrap();
            model.extend(a);
        }
        prop_assert_eq!(w.len(), model.len() as u64);
        w.finish().unwrap();
        let r = storage.sync_reader().unwrap();
        prop_assert_eq!(r.len(), model.len() as u64);
        prop_assert_eq!(&*r.read(0, model.len() as u64).unwrap(), &model[..]);
        for (at, n) in &slices {
            let start = if model.is_empty() { 0 } else { at.index(model.len()) };
            let n = n.min(&(model.len() - start)).to_owned();
            let got = r.read(start as u64, n as u64).unwrap();
            prop_assert_eq!(&*got, &model[start..start + n]);
        }
        let past = matches!(
            r.read(model.len() as u64, 1),
            Err(Error::SliceOutOfRange { .. })
        );
        prop_assert!(past);
        rt().block_on(async {
            let a = storage.async_reader().await.unwrap();
            assert_eq!(&*a.read(0, model.len() as u64).await.unwrap(), &model[..]);
        });
    }

    #[test]
    fn stream_with_meta_round_trip(
        docs in proptest::collection::vec(
            (proptest::collection::vec(any::<i64>(), 0..30), ".{0,8}"), 0..20),
        max_records in 1u64..5,
        max_bytes in 1u64..300,
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let options = WriterOptions::default().max_shard_records(max_records).max_shard_bytes(max_bytes);
        let storage = StreamWithMetaStorage::<i64, String, _>::new(tmp.path().join("m"), SeekIo::new())
            .with_writer_options(options);
        let mut w = storage.sync_writer().unwrap();
        for (i, (el, meta)) in docs.iter().enumerate() {
            prop_assert_eq!(w.append(el, meta).unwrap(), i as u64);
        }
        w.finish().unwrap();
        let r = storage.sync_reader().unwrap();
        prop_assert_eq!(r.num_docs(), docs.len() as u64);
        let flat: Vec<i64> = docs.iter().flat_map(|d| d.0.clone()).collect();
        prop_assert_eq!(r.len(), flat.len() as u64);
        let mut at = 0u64;
        for (i, (el, meta)) in docs.iter().enumerate() {
            let (got, m) = r.read_doc(i as u64).unwrap();
            prop_assert_eq!(&*got, &el[..]);
            prop_assert_eq!(&m, meta);
            let span = r.doc_range(i as u64).unwrap();
            prop_assert_eq!(span.clone(), at..at + el.len() as u64);
            prop_assert_eq!(&*r.read(span.start, span.end - span.start).unwrap(), &el[..]);
            at = span.end;
        }
        // Batched: any order, repeats, across shards; past the end is a typed error.
        let idx: Vec<u64> = if docs.is_empty() {
            Vec::new()
        } else {
            picks.iter().map(|p| p.index(docs.len()) as u64).collect()
        };
        let many = r.read_docs(&idx).unwrap();
        prop_assert_eq!(many.len(), idx.len());
        for ((got, m), &i) in many.iter().zip(&idx) {
            prop_assert_eq!(&**got, &docs[i as usize].0[..]);
            prop_assert_eq!(m, &docs[i as usize].1);
        }
        let past = matches!(
            r.read_docs(&[0, docs.len() as u64]),
            Err(Error::IndexOutOfRange { index, .. }) if index == docs.len() as u64
        );
        prop_assert!(past);
        rt().block_on(async {
            let a = storage.async_reader().await.unwrap();
            assert_eq!(a.num_docs(), docs.len() as u64);
            for (i, (el, meta)) in docs.iter().enumerate() {
                let (got, m) = a.read_doc(i as u64).await.unwrap();
                assert_eq!(&*got, &el[..]);
                assert_eq!(&m, meta);
            }
            let many = a.read_docs(&idx).await.unwrap();
            assert_eq!(many.len(), idx.len());
            for ((got, m), &i) in many.iter().zip(&idx) {
                assert_eq!(&**got, &docs[i as usize].0[..]);
                assert_eq!(m, &docs[i as usize].1);
            }
            assert!(matches!(
                a.read_docs(&[docs.len() as u64]).await,
                Err(Error::IndexOutOfRange { .. })
            ));
        });
    }
}

#[test]
fn multi_mib_records() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = docs(
        tmp.path(),
        WriterOptions::default().max_shard_bytes(4 << 20),
    );
    let big: Vec<Bytes> = (0..3u8)
        .map(|i| Bytes::from(vec![i; (3 << 20) + usize::from(i)]))
        .collect();
    let mut w = storage.sync_writer().unwrap();
    for (i, b) in big.iter().enumerate() {
        w.append(i as u64, b).unwrap();
    }
    w.append(3, &Bytes::new()).unwrap();
    let shards = w.finish().unwrap();
    assert_eq!(
        shards.len(),
        3,
        "each 3 MiB record rolls over; the empty one fits"
    );
    let r = storage.sync_reader().unwrap();
    for (i, b) in big.iter().enumerate() {
        assert_eq!(r.read(i as u64).unwrap(), b);
    }
    assert!(r.read(3).unwrap().is_empty());
}

#[test]
fn missing_directory_is_empty_storage() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = docs(&tmp.path().join("nope"), WriterOptions::default());
    let r = storage.sync_reader().unwrap();
    assert!(r.is_empty());
    assert!(matches!(
        r.read(0),
        Err(Error::IndexOutOfRange { index: 0, len: 0 })
    ));
    assert_eq!(r.iter().count(), 0);
    let s = StreamStorage::<u8, _>::new(tmp.path().join("nope"), SeekIo::new());
    let sr = s.sync_reader().unwrap();
    assert!(sr.is_empty());
    assert_eq!(sr.read(0, 0).unwrap().len(), 0);
    assert!(matches!(
        sr.read(0, 1),
        Err(Error::SliceOutOfRange { total: 0, .. })
    ));
    // A writer creates the directory; finishing with nothing written publishes nothing.
    storage.sync_writer().unwrap().finish().unwrap();
    assert!(listing(&tmp.path().join("nope")).is_empty());
}

#[test]
fn non_dense_append_names_the_expected_index() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = docs(tmp.path(), WriterOptions::default());
    let mut w = storage.sync_writer().unwrap();
    w.append(0, &Bytes::from_static(b"a")).unwrap();
    assert!(matches!(
        w.append(2, &Bytes::new()),
        Err(Error::NonDenseIndex {
            expected: 1,
            got: 2
        })
    ));
    assert!(matches!(
        w.append(0, &Bytes::new()),
        Err(Error::NonDenseIndex {
            expected: 1,
            got: 0
        })
    ));
    w.append(1, &Bytes::from_static(b"b")).unwrap();
    w.finish().unwrap();
    // A new writer continues after the stored records, in a new shard.
    let mut w = storage.sync_writer().unwrap();
    assert_eq!(w.len(), 2);
    assert!(matches!(
        w.append(0, &Bytes::new()),
        Err(Error::NonDenseIndex { expected: 2, .. })
    ));
    w.append(2, &Bytes::from_static(b"c")).unwrap();
    w.finish().unwrap();
    let r = storage.sync_reader().unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r.shards().len(), 2);
    assert_eq!(r.record_location(1).unwrap(), (0, 17..18));
    assert_eq!(r.record_location(2).unwrap(), (1, 16..17));
    assert!(matches!(
        r.record_location(3),
        Err(Error::IndexOutOfRange { .. })
    ));
    assert_eq!(&r.read(2).unwrap()[..], b"c");
}

#[test]
fn readers_see_only_finished_shards_while_a_writer_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = docs(tmp.path(), WriterOptions::default().max_shard_records(2));
    let mut w = storage.sync_writer().unwrap();
    for i in 0..3u64 {
        w.append(i, &Bytes::from(vec![i as u8; 3])).unwrap();
    }
    // Shard 0 (records 0, 1) is published; record 2 is in the unfinished shard 1.
    let r = storage.sync_reader().unwrap();
    assert_eq!(r.len(), 2);
    assert!(matches!(r.read(2), Err(Error::IndexOutOfRange { .. })));
    w.append(3, &Bytes::new()).unwrap();
    w.append(4, &Bytes::new()).unwrap();
    assert_eq!(storage.sync_reader().unwrap().len(), 4);
    assert_eq!(r.len(), 2, "an open reader keeps its snapshot");
    // Dropping without finish discards the unfinished shard (record 4) only.
    drop(w);
    assert_eq!(storage.sync_reader().unwrap().len(), 4);
    assert!(listing(tmp.path()).iter().all(|n| !n.starts_with('.')));
}

#[test]
fn format_mismatch_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let raw = docs(tmp.path(), WriterOptions::default());
    let mut w = raw.sync_writer().unwrap();
    w.append(0, &Bytes::from_static(b"x")).unwrap();
    w.finish().unwrap();
    let cbor = DocumentStorage::new(
        tmp.path().to_owned(),
        CborFormat::<u32>::new(),
        SeekIo::new(),
    );
    assert!(matches!(
        cbor.sync_reader(),
        Err(Error::FormatMismatch { ref expected, ref found, .. }) if expected == "cbor" && found == "raw"
    ));
    assert!(matches!(
        cbor.sync_writer(),
        Err(Error::FormatMismatch { .. })
    ));
    let stream = StreamStorage::<u32, _>::new(tmp.path().to_owned(), SeekIo::new());
    assert!(matches!(
        stream.sync_reader(),
        Err(Error::FormatMismatch { ref expected, .. }) if expected == "stream<u32>"
    ));
}

#[test]
fn cbor_documents_and_decode_errors() {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Doc {
        id: u32,
        text: String,
    }
    let tmp = tempfile::tempdir().unwrap();
    let storage = DocumentStorage::new(
        tmp.path().to_owned(),
        CborFormat::<Doc>::new(),
        SeekIo::new(),
    );
    let mut w = storage.sync_writer().unwrap();
    for id in 0..5 {
        w.push(&Doc {
            id,
            text: format!("doc {id}"),
        })
        .unwrap();
    }
    w.finish().unwrap();
    let r = storage.sync_reader().unwrap();
    assert_eq!(
        r.read(3).unwrap(),
        Doc {
            id: 3,
            text: "doc 3".into()
        }
    );
    // The same bytes read as another type: a typed decode error naming the record.
    let wrong = DocumentStorage::new(
        tmp.path().to_owned(),
        CborFormat::<Vec<u64>>::new(),
        SeekIo::new(),
    );
    assert!(matches!(
        wrong.sync_reader().unwrap().read(1),
        Err(Error::Decode { index: 1, .. })
    ));
}

#[test]
fn stream_elements_are_aligned_views_when_possible() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = StreamStorage::<f64, _>::new(tmp.path().to_owned(), MmapIo::new())
        .with_writer_options(WriterOptions::default().stream_chunk_bytes(64));
    let mut w = storage.sync_writer().unwrap();
    let data: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.5).collect();
    w.append(&data).unwrap();
    w.finish().unwrap();
    let r = storage.sync_reader().unwrap();
    let got = r.read(3, 40).unwrap();
    assert_eq!(&*got, &data[3..43]);
    // Mapped pages are page aligned and elements sit at multiples of 8 in the file, so this
    // is a view of the mapping, not a copy: the slice points into the shard's mapping.
    assert!(got.is_view());
    // Spanning two shards needs one contiguous buffer: a copy.
    let tmp2 = tempfile::tempdir().unwrap();
    let two = StreamStorage::<f64, _>::new(tmp2.path().to_owned(), MmapIo::new())
        .with_writer_options(
            WriterOptions::default()
                .stream_chunk_bytes(64)
                .max_shard_bytes(400),
        );
    let mut w = two.sync_writer().unwrap();
    w.append(&data).unwrap();
    w.finish().unwrap();
    let r = two.sync_reader().unwrap();
    assert!(r.shards().len() > 1);
    let across = r.read(0, 100).unwrap();
    assert_eq!(&*across, &data[..]);
    assert!(!across.is_view());
}

#[test]
fn writer_io_failure_discards_and_poisons() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gone");
    let storage = docs(&dir, WriterOptions::default().max_shard_records(1));
    let mut w = storage.sync_writer().unwrap();
    w.append(0, &Bytes::from_static(b"a")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // Rolling over must publish shard 0 into a directory that no longer exists.
    assert!(matches!(
        w.append(1, &Bytes::from_static(b"b")),
        Err(Error::Write { .. })
    ));
    assert!(matches!(
        w.append(1, &Bytes::from_static(b"b")),
        Err(Error::WriterFailed { .. })
    ));
    assert!(matches!(w.finish(), Err(Error::WriterFailed { .. })));
    assert!(!dir.exists());
}
