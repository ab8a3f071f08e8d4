//! One shard: request economy, verification, writer publication semantics.

use std::collections::BTreeMap;

use guideloom_format::{
    AsyncShard, Corruption, Error, MemReader, ReadOptions, ShardMetadata, ShardWriter, SyncShard,
    Value,
};
use guideloom_io::CountingReader;

use crate::util::{listing, rt, shard_bytes, write_shard};

fn records(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| (0..size).map(|j| (i * 31 + j) as u8).collect())
        .collect()
}

#[test]
fn open_is_one_request_and_read_is_one_request() {
    let recs = records(50, 100);
    let bytes = shard_bytes(&recs);
    let reader = CountingReader::new(MemReader::new("s", bytes));
    let stats = reader.stats().clone();
    let shard = SyncShard::open(reader, &ReadOptions::default()).unwrap();
    assert_eq!(stats.snapshot().requests, 1);
    assert_eq!(shard.len(), 50);
    stats.reset();
    assert_eq!(shard.read(7).unwrap(), recs[7]);
    let s = stats.snapshot();
    assert_eq!((s.requests, s.bytes_received), (1, 100));
    stats.reset();
    let many = shard.read_many(&[3, 4, 5, 40, 4]).unwrap();
    assert_eq!(stats.snapshot().requests, 1, "one read_ranges call");
    for (got, i) in many.iter().zip([3, 4, 5, 40, 4]) {
        assert_eq!(got, &recs[i]);
    }
    stats.reset();
    let run = shard.read_run(10, 20).unwrap();
    assert_eq!(stats.snapshot().requests, 1);
    assert_eq!(run.len(), 20);
    assert_eq!(run[19], recs[29]);
}

#[test]
fn large_index_costs_a_second_read_only() {
    let recs = records(2000, 3);
    let bytes = shard_bytes(&recs);
    let reader = CountingReader::new(MemReader::new("s", bytes.clone()));
    let stats = reader.stats().clone();
    let options = ReadOptions::default().with_speculative_tail(1024);
    let shard = SyncShard::open(reader, &options).unwrap();
    assert_eq!(stats.snapshot().requests, 2);
    // The second read fetches only what the tail did not hold: together the two reads are
    // exactly everything after the records (index, metadata, footer), no byte twice.
    let data: usize = recs.iter().map(Vec::len).sum();
    let after_records = (bytes.len() - 16 - data) as u64;
    assert_eq!(stats.snapshot().bytes_received, after_records);
    assert_eq!(shard.read(1999).unwrap(), recs[1999]);
}

#[test]
fn async_open_and_read_costs() {
    let recs = records(10, 10);
    let bytes = shard_bytes(&recs);
    rt().block_on(async {
        let reader = CountingReader::new(MemReader::new("s", bytes));
        let stats = reader.stats().clone();
        let shard = AsyncShard::open(reader, &ReadOptions::default())
            .await
            .unwrap();
        assert_eq!(stats.snapshot().requests, 1);
        assert_eq!(shard.read(9).await.unwrap(), recs[9]);
        assert_eq!(shard.read_many(&[1, 2]).await.unwrap()[1], recs[2]);
        assert_eq!(stats.snapshot().requests, 3);
        assert!(matches!(
            shard.read(10).await,
            Err(Error::IndexOutOfRange { index: 10, len: 10 })
        ));
    });
}

#[test]
fn empty_and_zero_length_records() {
    let bytes = shard_bytes(&[]);
    let size = bytes.len() as u64;
    let shard = SyncShard::open(MemReader::new("e", bytes), &ReadOptions::default()).unwrap();
    assert!(shard.is_empty());
    // Header, no data, no index, metadata, footer.
    assert_eq!(shard.footer().index_offset, 16);
    assert_eq!(shard.footer().metadata_offset, 16);
    assert_eq!(shard.footer().metadata_len + 80, size);
    assert!(matches!(
        shard.read(0),
        Err(Error::IndexOutOfRange { index: 0, len: 0 })
    ));
    let shard = SyncShard::open(
        MemReader::new("z", shard_bytes(&[vec![], vec![1], vec![]])),
        &ReadOptions::default(),
    )
    .unwrap();
    assert!(shard.read(0).unwrap().is_empty());
    assert_eq!(&shard.read(1).unwrap()[..], &[1]);
    assert!(shard.read(2).unwrap().is_empty());
}

#[test]
fn record_checksum_verified_unless_disabled() {
    let recs = records(3, 64);
    let mut bytes = shard_bytes(&recs).to_vec();
    bytes[16 + 64 + 5] ^= 0x40; // inside record 1
    let on = SyncShard::open(MemReader::new("s", bytes.clone()), &ReadOptions::default()).unwrap();
    assert!(matches!(
        on.read(1),
        Err(Error::Corrupt {
            what: Corruption::RecordChecksum { index: 1 },
            ..
        })
    ));
    assert_eq!(on.read(0).unwrap(), recs[0]);
    let off = SyncShard::open(
        MemReader::new("s", bytes),
        &ReadOptions::default().with_verify_records(false),
    )
    .unwrap();
    assert_ne!(off.read(1).unwrap(), recs[1]);
}

#[test]
fn metadata_round_trips_user_map() {
    let dir = tempfile::tempdir().unwrap();
    let mut user = BTreeMap::new();
    user.insert("source".to_owned(), Value::Text("wiki".into()));
    let meta = ShardMetadata::new("raw", "documents").with_user(user.clone());
    let path = dir.path().join("m.glm");
    let mut w = ShardWriter::create(&path, meta).unwrap();
    w.append(b"x").unwrap();
    let info = w.finish().unwrap();
    assert_eq!(info.records, 1);
    assert_eq!(info.size, std::fs::metadata(&path).unwrap().len());
    let shard = SyncShard::open(
        guideloom_io::Backend::open(&guideloom_io::SeekIo::new(), &path).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(shard.metadata().user, user);
    assert_eq!(shard.metadata().records, 1);
    assert_eq!(shard.metadata().format, "raw");
}

#[test]
fn collision_at_final_name_is_an_error_not_an_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.glm");
    let original = write_shard(&path, &[b"first".to_vec()]);
    // Created before the first shard existed, finished after: the race case.
    let other = dir.path().join("d.glm");
    let mut late = ShardWriter::create(&other, ShardMetadata::new("raw", "documents")).unwrap();
    late.append(b"second").unwrap();
    std::fs::copy(&path, &other).unwrap();
    let before = std::fs::read(&other).unwrap();
    assert!(matches!(late.finish(), Err(Error::AlreadyExists { .. })));
    assert_eq!(std::fs::read(&other).unwrap(), before);
    // Creating over an existing shard fails early too.
    assert!(matches!(
        ShardWriter::create(&path, ShardMetadata::new("raw", "documents")),
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert_eq!(
        listing(dir.path()),
        vec!["c.glm", "d.glm"],
        "no temp files left"
    );
}

#[test]
fn dropped_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.glm");
    let mut w = ShardWriter::create(&path, ShardMetadata::new("raw", "documents")).unwrap();
    w.append(&[0u8; 10_000]).unwrap();
    assert_eq!(listing(dir.path()).len(), 1, "only the hidden temp file");
    assert!(listing(dir.path())[0].starts_with(".x.glm."));
    drop(w);
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn empty_records_cost_no_request() {
    let recs = vec![vec![], vec![], vec![5u8; 10], vec![]];
    let reader = CountingReader::new(MemReader::new("s", shard_bytes(&recs)));
    let stats = reader.stats().clone();
    let shard = SyncShard::open(reader, &ReadOptions::default()).unwrap();
    stats.reset();
    assert!(shard.read(0).unwrap().is_empty());
    assert!(shard.read_run(0, 2).unwrap().iter().all(|b| b.is_empty()));
    let many = shard.read_many(&[3, 0, 1]).unwrap();
    assert_eq!(many.len(), 3);
    assert!(shard.read_many(&[]).unwrap().is_empty());
    assert_eq!(stats.snapshot().requests, 0, "no zero-length requests");
    let mixed = shard.read_many(&[1, 2, 3]).unwrap();
    assert_eq!(&mixed[1][..], &[5u8; 10]);
    assert!(mixed[0].is_empty() && mixed[2].is_empty());
    assert_eq!(stats.snapshot().requests, 1);
}
