//! Snapshots mixing native shards and ArrayRecord files adopted without rewriting them, on a
//! local root, a memory root and moto (S3): every read path of the snapshot reader (get,
//! get_many, get_range, read_in_order, scan), the facade's `Dataset` and the loader, and a
//! damaged ArrayRecord shard giving the typed error naming it.

use crate::publish_common;

use std::sync::Arc;

use bytes::Bytes;
use guideloom::arrayrecord::{ArrayRecordReader, ArrayRecordWriter, CHUNK_HEADER_SIZE, Layout};
use guideloom::format::{RunBudget, ShardMetadata};
use guideloom::{
    Dataset, DatasetOptions, Error, Loader, LoaderOptions, RawFormat, S3Options, StoreOptions,
};
use guideloom_publish::{
    FooterInspector, PublicationOptions, PublishMode, PublishRequest, Root, ShardFormat, ShardRef,
};
use publish_common::unique;

/// `i` as an index into a `Vec`.
fn at(i: u64) -> usize {
    usize::try_from(i).unwrap()
}

/// Record `i` of a shard tagged `tag`: sizes vary (0 B up to ~3 KiB) so chunks and runs differ.
fn record(tag: &str, i: u64) -> Vec<u8> {
    let mut r = format!("{tag}:{i}:").into_bytes();
    r.resize(r.len() + at(i * 97 % 3000), u8::try_from(i % 251).unwrap());
    if i.is_multiple_of(11) {
        r.clear();
    }
    r
}

/// The bytes of an ArrayRecord file of `n` records tagged `tag`, written with `options`.
fn array_record_bytes(tag: &str, n: u64, options: &str) -> Vec<u8> {
    let mut w = ArrayRecordWriter::new(Vec::new(), options.parse().unwrap());
    for i in 0..n {
        w.write(&record(tag, i)).unwrap();
    }
    w.finish().unwrap()
}

/// What the footer of an ArrayRecord file given as bytes says.
fn layout(bytes: &[u8]) -> Layout {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.array_record");
    std::fs::write(&path, bytes).unwrap();
    let reader = guideloom::SeekIo::new();
    let file = ArrayRecordReader::open(
        guideloom::Backend::open(&reader, &path).unwrap(),
        &Default::default(),
    )
    .unwrap();
    file.layout().clone()
}

/// The shards of the mixed snapshot, in order: (tag, records).
const SHARDS: [(&str, u64); 4] = [
    ("native", 40),
    ("ar-zstd", 300),
    ("ar-snappy", 61),
    ("ar-written", 33),
];

fn expected() -> Vec<Vec<u8>> {
    SHARDS
        .iter()
        .flat_map(|(tag, n)| (0..*n).map(|i| record(tag, i)))
        .collect()
}

/// Writes a native shard and puts two ArrayRecord files into `root` as-is, adopts them and
/// publishes the three as snapshot `mixed`; then a snapshot `damaged` whose ArrayRecord
/// shard has a flipped byte in its second chunk. Returns the damaged shard's reference.
async fn publish_mixed(root: &Root) -> ShardRef {
    let (tag, n) = SHARDS[0];
    let native = root
        .write_shard(
            "w",
            0,
            ShardMetadata::new("raw", "documents"),
            (0..n).map(|i| record(tag, i)),
        )
        .await
        .unwrap();
    let mut shards = vec![native];
    for ((tag, n), options) in SHARDS[1..3].iter().zip(["", "group_size:7,snappy"]) {
        let key = format!("imported/{tag}.array_record");
        let bytes = array_record_bytes(tag, *n, options);
        root.store()
            .put_create(&key, Bytes::from(bytes.clone()))
            .await
            .unwrap();
        let adopted = root.adopt_array_record(&key).await.unwrap();
        assert_eq!(
            (adopted.size, adopted.record_count, adopted.format),
            (bytes.len() as u64, *n, ShardFormat::ArrayRecord)
        );
        shards.push(adopted);
    }
    // Written by guideloom into the root: streamed, create-only, with its SHA-256.
    let (tag, n) = SHARDS[3];
    let written = root
        .write_array_record_shard(
            "w",
            1,
            "group_size:5,brotli:4".parse().unwrap(),
            (0..n).map(|i| record(tag, i)),
        )
        .await
        .unwrap();
    assert_eq!(written.key, "shards/w/00000001.array_record");
    assert_eq!(
        (written.record_count, written.format),
        (n, ShardFormat::ArrayRecord)
    );
    // Re-running the writer: identical bytes succeed, other bytes collide.
    let again = root
        .write_array_record_shard(
            "w",
            1,
            "group_size:5,brotli:4".parse().unwrap(),
            (0..n).map(|i| record(tag, i)),
        )
        .await
        .unwrap();
    assert_eq!(again, written);
    let other = root
        .write_array_record_shard("w", 1, Default::default(), [b"other".as_slice()])
        .await
        .unwrap_err();
    assert!(other.is_collision(), "{other:?}");
    let body = root
        .store()
        .get(&written.key, written.size)
        .await
        .unwrap()
        .body;
    let file = layout(&body);
    assert_eq!((file.len(), file.group_size()), (n, 5));
    shards.push(written);
    // Past the size limit: refused, nothing under the key.
    let small = Root::new(
        Arc::clone(root.store()),
        guideloom_publish::RootOptions {
            max_encoded_shard_bytes: 100_000,
            ..guideloom_publish::RootOptions::default()
        },
    );
    let err = small
        .write_array_record_shard("w", 2, Default::default(), (0..n).map(|i| record(tag, i)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, guideloom_publish::Error::ShardTooLarge { size, limit: 100_000, .. } if *size > 100_000),
        "{err:?}"
    );
    assert!(
        root.store()
            .head("shards/w/00000002.array_record")
            .await
            .is_err()
    );

    let options = PublicationOptions {
        verify_record_counts: true,
        inspector: Some(Arc::new(FooterInspector)),
        ..PublicationOptions::default()
    };
    let request = |id: &str, shards: Vec<ShardRef>| PublishRequest {
        dataset_id: "mixed".into(),
        snapshot_id: id.into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request("mixed", shards), &options)
        .await
        .unwrap();

    // Not ArrayRecord at all, and a damaged footer: adoption refuses both, typed.
    let junk = "imported/junk.array_record";
    root.store()
        .put_create(junk, Bytes::from(vec![7u8; 200_000]))
        .await
        .unwrap();
    let mut torn = array_record_bytes("torn", 20, "group_size:1,uncompressed");
    let footer = layout(&torn).footer_offset() + CHUNK_HEADER_SIZE + 2;
    torn[at(footer)] ^= 0x40;
    let torn_key = "imported/torn.array_record";
    root.store()
        .put_create(torn_key, Bytes::from(torn))
        .await
        .unwrap();
    for key in [junk, torn_key] {
        let err = root.adopt_array_record(key).await.unwrap_err();
        assert!(
            matches!(&err, guideloom_publish::Error::ArrayRecordShard { key: k, source } if k == key && source.is_corrupt()),
            "{key}: {err:?}"
        );
    }
    let err = root
        .adopt_array_record("imported/absent")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = root.adopt_array_record("../outside").await.unwrap_err();
    assert!(
        matches!(err, guideloom_publish::Error::InvalidArgument { .. }),
        "{err:?}"
    );

    // Damage inside chunk 1 (records 1..2 at group size 1): the footer still opens.
    let mut bytes = array_record_bytes("damaged", 5, "group_size:1,uncompressed");
    let chunk = layout(&bytes).chunks()[1];
    bytes[at(chunk.offset + CHUNK_HEADER_SIZE + 2)] ^= 0x01;
    let key = "imported/damaged.array_record";
    root.store()
        .put_create(key, Bytes::from(bytes))
        .await
        .unwrap();
    let damaged = root.adopt_array_record(key).await.unwrap();
    root.publish(
        &request("damaged", vec![damaged.clone()]),
        &PublicationOptions::default(),
    )
    .await
    .unwrap();
    damaged
}

/// Every read path of the snapshot reader over the mixed snapshot, and the damaged one.
async fn read_back(root: &Root, damaged: &ShardRef) {
    let want = expected();
    let reader = root.reader(root.snapshot("mixed").await.unwrap());
    assert_eq!(reader.len(), want.len() as u64);
    let formats: Vec<ShardFormat> = reader
        .snapshot()
        .shards()
        .iter()
        .map(|s| s.format)
        .collect();
    assert_eq!(
        formats,
        [
            ShardFormat::Native,
            ShardFormat::ArrayRecord,
            ShardFormat::ArrayRecord,
            ShardFormat::ArrayRecord
        ]
    );
    for i in [0, 39, 40, 41, 200, 339, 340, 345, 400, 401, 433] {
        assert_eq!(
            reader.get_async(i).await.unwrap(),
            want[at(i)],
            "record {i}"
        );
    }
    let picks: Vec<u64> = (0..want.len() as u64)
        .rev()
        .step_by(13)
        .chain([340, 0, 340])
        .collect();
    let got = reader.get_many_async(&picks).await.unwrap();
    for (i, g) in picks.iter().zip(&got) {
        assert_eq!(g, &want[at(*i)], "get_many record {i}");
    }
    let all = reader.get_range_async(0..reader.len()).await.unwrap();
    assert!(all.iter().map(|b| &b[..]).eq(want.iter().map(|r| &r[..])));
    // Small budgets: many runs, each inside one shard, in order, covering the range.
    let mut runs = reader
        .read_in_order(30..380, RunBudget::new(4096, 9))
        .unwrap();
    let mut next = 30;
    while let Some(run) = runs.next_run().await {
        let run = run.unwrap();
        assert_eq!(run.first, next);
        assert!(!run.records.is_empty() && run.records.len() <= 9);
        for (i, r) in (run.first..).zip(&run.records) {
            assert_eq!(r, &want[at(i)]);
        }
        next += run.records.len() as u64;
    }
    assert_eq!(next, 380);
    let mut scan = reader.scan(0..reader.len()).unwrap();
    let mut scanned = Vec::new();
    while let Some(r) = scan.next_record().await {
        scanned.push(r.unwrap());
    }
    assert!(
        scanned
            .iter()
            .map(|b| &b[..])
            .eq(want.iter().map(|r| &r[..]))
    );
    let opened = reader.open_shard_async(1).await.unwrap();
    assert_eq!(opened.format(), ShardFormat::ArrayRecord);
    assert_eq!(opened.record_format(), "raw");
    assert!(opened.array_record().is_some() && opened.native().is_none());

    // The damaged shard: records 0, 2.. read; record 1 is the typed error naming the shard,
    // however it is read.
    let reader = root.reader(root.snapshot("damaged").await.unwrap());
    assert_eq!(reader.get_async(0).await.unwrap(), record("damaged", 0));
    assert_eq!(reader.get_async(2).await.unwrap(), record("damaged", 2));
    let errors = [
        reader.get_async(1).await.unwrap_err(),
        reader.get_many_async(&[0, 1]).await.unwrap_err(),
        reader.get_range_async(0..5).await.unwrap_err(),
        async {
            let mut scan = reader.scan(0..5).unwrap();
            loop {
                match scan.next_record().await {
                    Some(Err(e)) => return e,
                    Some(Ok(_)) => {}
                    None => panic!("the scan read a damaged chunk"),
                }
            }
        }
        .await,
    ];
    for err in errors {
        assert!(
            matches!(&err, guideloom_publish::Error::ArrayRecordShard { key, source }
                if *key == damaged.key && source.is_corrupt()),
            "{err:?}"
        );
    }
}

/// The facade over the same root: `Dataset` by index and batch, its in-order iterator, the
/// loader, and the damaged snapshot's facade error.
fn through_the_facade(uri: &str, options: &DatasetOptions, damaged: &ShardRef) {
    let want = expected();
    let mut mixed = options.clone();
    mixed.snapshot = Some("mixed".into());
    let ds = Dataset::open_with(uri, mixed).unwrap();
    assert_eq!(ds.len(), want.len() as u64);
    assert_eq!(ds.get(345).unwrap(), want[345]);
    assert_eq!(ds.get_many(&[340, 3, 100]).unwrap()[0], want[340]);
    let iterated: Vec<Bytes> = ds.iter().map(Result::unwrap).collect();
    assert!(
        iterated
            .iter()
            .map(|b| &b[..])
            .eq(want.iter().map(|r| &r[..]))
    );
    let loader = Loader::with_format(ds, LoaderOptions::new(32).with_seed(3), RawFormat).unwrap();
    let mut seen = vec![false; want.len()];
    for batch in loader.epoch(0).unwrap() {
        let batch = batch.unwrap();
        for (i, r) in batch.indices.iter().zip(&batch.records) {
            assert_eq!(r, &want[at(*i)]);
            seen[at(*i)] = true;
        }
    }
    assert!(seen.iter().all(|s| *s), "an epoch reads every record once");

    let mut broken = options.clone();
    broken.snapshot = Some("damaged".into());
    let err = Error::from(Dataset::open_with(uri, broken).unwrap().get(1).unwrap_err());
    assert!(
        matches!(&err, Error::Publish(guideloom_publish::Error::ArrayRecordShard { key, source }) if *key == damaged.key
            && matches!(**source, guideloom::arrayrecord::Error::Corrupt { .. })),
        "{err:?}"
    );
}

fn exercise(uri: &str, options: &DatasetOptions) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let damaged = rt.block_on(async {
        let root = guideloom::resolve_root(uri, options).unwrap();
        let damaged = publish_mixed(&root).await;
        read_back(&root, &damaged).await;
        damaged
    });
    drop(rt);
    through_the_facade(uri, options, &damaged);
}

#[test]
fn mixed_snapshot_on_a_local_root() {
    let dir = tempfile::tempdir().unwrap();
    exercise(dir.path().to_str().unwrap(), &DatasetOptions::default());
}

#[test]
fn mixed_snapshot_on_a_memory_root() {
    let options = DatasetOptions::default().with_registry(Arc::new(guideloom::Registry::new()));
    exercise(&format!("memory://{}", unique("ar-mixed")), &options);
}

#[test]
fn mixed_snapshot_on_moto() {
    let Some(server) = guideloom_tests::moto("ArrayRecord snapshots on moto") else {
        return;
    };
    let options = DatasetOptions::default()
        .with_store(StoreOptions {
            s3: S3Options {
                endpoint: Some(server.endpoint.clone()),
                allow_http: true,
                ..S3Options::default()
            },
            ..StoreOptions::default()
        })
        .with_registry(Arc::new(guideloom::Registry::new()));
    let uri = format!("s3://{}/{}", server.bucket, unique("ar-mixed"));
    exercise(&uri, &options);
}

/// Request counts through a counting store (memory root): opening an ArrayRecord shard is
/// one tail read, a record one ranged read of exactly its chunk, a batch one range per chunk
/// not cached, in one `read_ranges`; no whole-object read.
#[test]
fn array_record_reads_cost_one_range_per_chunk() {
    use guideloom_publish::{CountingStore, Registry, RootOptions, StoreOptions};
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let base = Registry::new()
            .resolve(
                &format!("memory://{}", unique("ar-counts")),
                &StoreOptions::default(),
            )
            .unwrap();
        let counting = Arc::new(CountingStore::new(base));
        let root = Root::new(counting.clone(), RootOptions::default());
        let bytes = array_record_bytes("counted", 200, "group_size:1,uncompressed");
        let file = layout(&bytes);
        let chunk = |i: usize| file.chunks()[i].end - file.chunks()[i].offset;
        root.store()
            .put_create("a.array_record", Bytes::from(bytes.clone()))
            .await
            .unwrap();
        let shard = root.adopt_array_record("a.array_record").await.unwrap();
        let request = PublishRequest {
            dataset_id: "d".into(),
            snapshot_id: "s".into(),
            shards: vec![shard],
            mode: PublishMode::Full,
            schema: None,
        };
        root.publish(&request, &PublicationOptions::default())
            .await
            .unwrap();
        let reader = root.open_latest().await.unwrap();

        let before = counting.counts();
        assert_eq!(reader.get_async(10).await.unwrap(), record("counted", 10));
        let spent = counting.counts() - before;
        let tail = (256 << 10).min(bytes.len() as u64);
        assert_eq!(spent.reader_reads.requests, 2, "{spent:?}");
        assert_eq!(spent.reader_reads.bytes_received, tail + chunk(10));
        assert_eq!(
            spent.requests(),
            2,
            "nothing but the reader's reads: {spent:?}"
        );

        let before = counting.counts();
        reader.get_async(11).await.unwrap();
        let spent = counting.counts() - before;
        assert_eq!(
            (spent.requests(), spent.reader_reads.bytes_received),
            (1, chunk(11))
        );

        // 10 and 11 are cached; 50, 7 and 120 are one range each.
        let before = counting.counts();
        let got = reader
            .get_many_async(&[50, 7, 50, 120, 10, 11])
            .await
            .unwrap();
        let spent = counting.counts() - before;
        assert_eq!(got[3], record("counted", 120));
        assert_eq!(
            (spent.requests(), spent.reader_reads.bytes_received),
            (3, chunk(50) + chunk(7) + chunk(120))
        );
    });
}
