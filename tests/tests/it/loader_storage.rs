//! The loader reads a plain storage directory as well as a published root: the format
//! storages' sync readers are `RecordSource`s. Over the same records in the same shard sizes,
//! with the same options and seed, a `DocumentStorage` and a published snapshot give the
//! same batches — every record exactly once per epoch — in every shuffle mode; the stream
//! storages hand out their chunks / documents as records.

use guideloom::{
    Bytes, Dataset, DocumentStorage, Loader, LoaderOptions, PublishMode, Publisher, RawFormat,
    RecordSource, ShardMetadata, ShuffleMode, StreamStorage, StreamWithMetaStorage, WriterOptions,
};

const SHARD: usize = 10;

/// 103 records of varying length (some empty): shards of 10 plus one of 3.
fn records() -> Vec<Bytes> {
    (0..103u64)
        .map(|i| Bytes::from(format!("record {i} {}", "x".repeat((i % 7) as usize))))
        .map(|b| if b.ends_with(b" ") { Bytes::new() } else { b })
        .collect()
}

/// Every batch of `epoch` as (global batch, indices, records).
fn epoch<S>(source: S, options: &LoaderOptions, n: u64) -> Vec<(u64, Vec<u64>, Vec<Bytes>)>
where
    S: RecordSource,
{
    let loader = Loader::new(source, options.clone(), |_i, b: Bytes| {
        Ok::<_, guideloom::Error>(b)
    })
    .unwrap();
    loader
        .epoch(n)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (b.batch, b.indices, b.records)
        })
        .collect()
}

#[test]
fn a_document_storage_loads_like_the_published_root_of_the_same_records() {
    let tmp = tempfile::tempdir().unwrap();
    let records = records();
    assert!(records.iter().any(Bytes::is_empty));

    let storage = DocumentStorage::local(tmp.path().join("storage"), RawFormat)
        .with_writer_options(WriterOptions::default().max_shard_records(SHARD as u64));
    let mut w = storage.sync_writer().unwrap();
    for r in &records {
        w.push(r).unwrap();
    }
    assert_eq!(w.finish().unwrap().len(), 11);
    let reader = storage.sync_reader().unwrap();

    let root = tmp.path().join("root");
    let publisher = Publisher::open(root.to_str().unwrap()).unwrap();
    let shards = records
        .chunks(SHARD)
        .enumerate()
        .map(|(n, chunk)| {
            let meta = ShardMetadata::new("raw", "documents");
            publisher
                .write_raw_shard("w", n as u64, meta, chunk.iter())
                .unwrap()
        })
        .collect();
    publisher
        .publish("d", "s1", shards, PublishMode::Full)
        .unwrap();
    let dataset = Dataset::open(root.to_str().unwrap()).unwrap();

    assert_eq!(RecordSource::len(&reader), 103);
    assert_eq!(reader.shard_bounds(), RecordSource::shard_bounds(&dataset));
    assert!(!reader.is_remote());
    assert!(reader.name().contains("storage"), "{}", reader.name());

    let reader = std::sync::Arc::new(reader);
    for shuffle in [
        ShuffleMode::Sequential,
        ShuffleMode::Full,
        ShuffleMode::ShardWindow { window: 3 },
        ShuffleMode::Auto,
    ] {
        let options = LoaderOptions::new(8)
            .with_seed(42)
            .with_shuffle(shuffle)
            .with_workers(3);
        for n in 0..2 {
            let from_storage = epoch(reader.clone(), &options, n);
            let from_root = epoch(dataset.clone(), &options, n);
            assert_eq!(from_storage, from_root, "{shuffle:?} epoch {n}");
            let mut seen: Vec<u64> = from_storage.iter().flat_map(|b| b.1.clone()).collect();
            for (_, indices, got) in &from_storage {
                for (&i, bytes) in indices.iter().zip(got) {
                    assert_eq!(bytes, &records[usize::try_from(i).unwrap()], "record {i}");
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..103).collect::<Vec<_>>(), "{shuffle:?}: each once");
        }
        if shuffle != ShuffleMode::Sequential {
            let a = epoch(reader.clone(), &options, 0);
            let b = epoch(reader.clone(), &options, 1);
            assert_ne!(a, b, "{shuffle:?}: epochs differ");
        }
    }
}

#[test]
fn loader_errors_from_a_storage_stay_typed() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = DocumentStorage::local(tmp.path(), RawFormat);
    let mut w = storage.sync_writer().unwrap();
    for i in 0..20u8 {
        w.push(&Bytes::from(vec![i; 100])).unwrap();
    }
    w.finish().unwrap();
    let reader = storage.sync_reader().unwrap();
    // Damage one record's payload: its checksum no longer matches.
    let shard = tmp.path().join("shard-000000.glm");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = usize::try_from(reader.record_location(13).unwrap().1.start).unwrap();
    bytes[at] ^= 0xff;
    std::fs::write(&shard, bytes).unwrap();

    let options = LoaderOptions::new(4)
        .with_shuffle(ShuffleMode::Sequential)
        .with_workers(1);
    let loader = Loader::new(reader, options, |_i, b: Bytes| Ok::<_, guideloom::Error>(b)).unwrap();
    let results: Vec<_> = loader.epoch(0).unwrap().collect();
    let err = results
        .into_iter()
        .find_map(Result::err)
        .expect("the damaged batch fails");
    assert!(
        matches!(&err, guideloom::Error::Format(e) if e.is_corrupt()),
        "{err:?}"
    );
}

#[test]
fn stream_storages_hand_out_chunks_and_documents() {
    let tmp = tempfile::tempdir().unwrap();
    // A stream of u32 in chunks of 4 elements, shards of 3 chunks.
    let stream = StreamStorage::<u32>::local(tmp.path().join("tokens")).with_writer_options(
        WriterOptions::default()
            .stream_chunk_bytes(16)
            .max_shard_records(3),
    );
    let mut w = stream.sync_writer().unwrap();
    w.append(&(0..30).collect::<Vec<u32>>()).unwrap();
    w.finish().unwrap();
    let reader = stream.sync_reader().unwrap();
    // 30 elements = 7 full chunks + one of 2; shards of 3 chunks: 3 + 3 + 2.
    assert_eq!(RecordSource::len(&reader), 8);
    assert_eq!(reader.shard_bounds(), Some(&[0u64, 3, 6, 8][..]));
    let got = reader.get_many(&[7, 0, 4]).unwrap();
    let le = |xs: &[u32]| Bytes::from(xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    assert_eq!(
        got,
        [le(&[28, 29]), le(&[0, 1, 2, 3]), le(&[16, 17, 18, 19])]
    );
    assert!(matches!(
        reader.get_many(&[8]),
        Err(guideloom::format::Error::IndexOutOfRange { index: 8, len: 8 })
    ));

    // Documents of a stream with metadata: record i is document i's elements.
    let docs = StreamWithMetaStorage::<u32, String>::local(tmp.path().join("docs"))
        .with_writer_options(WriterOptions::default().max_shard_records(2));
    let mut w = docs.sync_writer().unwrap();
    let lens = [3u32, 0, 5, 1, 2];
    let mut next = 0u32;
    for (d, &n) in lens.iter().enumerate() {
        let elements: Vec<u32> = (next..next + n).collect();
        next += n;
        w.append(&elements, &format!("doc {d}")).unwrap();
    }
    w.finish().unwrap();
    let reader = docs.sync_reader().unwrap();
    assert_eq!(RecordSource::len(&reader), 5);
    assert_eq!(reader.shard_bounds(), Some(&[0u64, 2, 4, 5][..]));
    let options = LoaderOptions::new(2).with_seed(1).with_workers(2);
    let loader = Loader::new(reader, options, |i, b: Bytes| {
        Ok::<_, guideloom::Error>((i, b.len() / 4))
    })
    .unwrap();
    let mut got: Vec<(u64, usize)> = loader
        .epoch(0)
        .unwrap()
        .flat_map(|b| b.unwrap().records)
        .collect();
    got.sort_unstable();
    let want: Vec<(u64, usize)> = lens
        .iter()
        .enumerate()
        .map(|(d, &n)| (d as u64, n as usize))
        .collect();
    assert_eq!(got, want);
}

/// A source with its own error type: failing on index 5.
struct Picky;

impl RecordSource for Picky {
    type Error = std::io::Error;
    fn name(&self) -> String {
        "picky".to_owned()
    }
    fn len(&self) -> u64 {
        10
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>, std::io::Error> {
        if indices.contains(&5) {
            return Err(std::io::Error::other("five"));
        }
        Ok(indices.iter().map(|_| Bytes::new()).collect())
    }
}

#[test]
fn a_source_with_its_own_error_type_fails_with_fetch() {
    let options = LoaderOptions::new(5)
        .with_shuffle(ShuffleMode::Sequential)
        .with_workers(1);
    let loader = Loader::new(Picky, options, |_i, b: Bytes| Ok::<_, guideloom::Error>(b)).unwrap();
    let results: Vec<_> = loader.epoch(0).unwrap().collect();
    assert_eq!(
        results.len(),
        2,
        "the first batch, then the error: {results:?}"
    );
    assert!(results[0].is_ok());
    let Err(guideloom::Error::Fetch {
        source_name,
        source,
    }) = &results[1]
    else {
        panic!("{results:?}");
    };
    assert_eq!(source_name, "picky");
    let io = source
        .downcast_ref::<std::io::Error>()
        .expect("the source's own error");
    assert_eq!(io.to_string(), "five");
}
