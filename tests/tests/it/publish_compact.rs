//! Compaction across crates (`Root::compact`), on a local root opened like a user opens
//! one: 200 shards of 50 records become a few, every record's bytes identical by index, an
//! ArrayRecord shard kept as it is, an annotation set of the source aligned with the new
//! snapshot, a second run (from a fresh `Root`, as another process) idempotent, and a
//! missing source a typed error. The unit tests (`guideloom-publish`'s
//! `root::compact_tests`) cover streams, schemas and a proptest over shard sizes.

use guideloom::format::ShardMetadata;
use guideloom_publish::{
    CompactRequest, Error, PlannedShard, PublicationOptions, PublishMode, PublishOutcome,
    PublishRequest, RetryPolicy, Root, RootOptions, ShardFormat, StoreOptions,
};

fn open(dir: &std::path::Path) -> Root {
    Root::open(
        dir.to_str().unwrap(),
        &StoreOptions::default(),
        RootOptions::default(),
    )
    .unwrap()
}

fn record(shard: u64, r: u64) -> Vec<u8> {
    let len = 8 + (shard * 13 + r * 7) % 120;
    (0..len)
        .map(|i| u8::try_from((shard * 3 + r * 5 + i) % 256).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_small_shards_compact_to_few_with_every_record_identical() {
    let dir = tempfile::tempdir().unwrap();
    let root = open(dir.path());
    let mut shards = Vec::new();
    for s in 0..200u64 {
        let records: Vec<Vec<u8>> = (0..50).map(|r| record(s, r)).collect();
        let meta = ShardMetadata::new("raw", "documents");
        shards.push(root.write_shard("w", s, meta, &records).await.unwrap());
        if s == 120 {
            // An ArrayRecord file in the middle: kept, and it splits the groups.
            let records: Vec<Vec<u8>> = (0..50).map(|r| record(1000, r)).collect();
            shards.push(
                root.write_array_record_shard("w", 0, Default::default(), &records)
                    .await
                    .unwrap(),
            );
        }
    }
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s1".into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    let source = root
        .publish(&request, &PublicationOptions::default())
        .await
        .unwrap()
        .snapshot;
    let values: Vec<u64> = (0..source.total_records()).map(|i| i * 3 + 1).collect();
    root.publish_annotations(
        "score",
        "v1",
        &source,
        &values,
        &RetryPolicy::contended_update(),
    )
    .await
    .unwrap();

    let compact = CompactRequest::new("s2").with_target_shard_bytes(128 << 10);
    let done = root.compact(Some("s1"), &compact).await.unwrap();
    assert_eq!((done.input_shards, done.records), (201, 10_050));
    assert!(done.output_shards <= 10, "{:?}", done.plan);
    let new = done.snapshot.clone().unwrap();
    let kept: Vec<_> = new
        .shards()
        .iter()
        .filter(|s| s.format == ShardFormat::ArrayRecord)
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0], &source.shards()[121]);
    assert!(
        done.plan
            .iter()
            .any(|p| matches!(p, PlannedShard::Kept { source: 121, .. }))
    );

    // Every record, by index, through a reader of each snapshot.
    let (a, b) = (root.reader(source.clone()), root.reader(new.clone()));
    for i in 0..source.total_records() {
        assert_eq!(
            a.get_async(i).await.unwrap(),
            b.get_async(i).await.unwrap(),
            "record {i}"
        );
    }
    // The source's annotations, read against the new snapshot, give the same values.
    let on_new = root.annotations("score", None, &new, true).await.unwrap();
    for (i, want) in values.iter().enumerate() {
        assert_eq!(on_new.get::<u64>(i as u64).unwrap(), *want);
    }

    // Another process runs the same compaction: identical objects, the same snapshot.
    let again = open(dir.path())
        .compact(Some("s1"), &compact)
        .await
        .unwrap();
    assert_eq!(again.outcome, Some(PublishOutcome::AlreadyPublished));
    assert_eq!(again.snapshot, Some(new));
    assert_eq!(root.snapshots().await.unwrap().len(), 2);

    let err = root
        .compact(Some("gone"), &CompactRequest::new("s3"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
}
