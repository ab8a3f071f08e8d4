//! Compaction ([`Root::compact`]): the plan, record-for-record identity, stream shards and
//! their companions, kept shards, idempotence and refusals.
#![allow(clippy::cast_possible_truncation)] // test bytes wrap on purpose; indices are small

use ciborium::cbor;
use guideloom_format::ShardMetadata;
use guideloom_format::schema::{DataType, Field, Schema};
use proptest::prelude::*;

use super::*;
use crate::error::Error;
use crate::manifest::PublishMode;
use crate::publication::{PublicationOptions, PublishOutcome, PublishRequest};

fn memory_root(name: &str) -> Root {
    let store = Registry::new()
        .resolve(&format!("memory://{name}"), &StoreOptions::default())
        .unwrap();
    Root::new(store, RootOptions::default())
}

async fn publish(root: &Root, id: &str, shards: Vec<ShardRef>, schema: Option<Schema>) -> Snapshot {
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: id.into(),
        shards,
        mode: PublishMode::Full,
        schema,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap()
        .snapshot
}

/// A record whose bytes say where it came from: shard `s`, record `r`, of length 1 + (s*7+r)%23.
fn record(s: usize, r: usize) -> Vec<u8> {
    let len = 1 + (s * 7 + r) % 23;
    (0..len).map(|i| (s * 31 + r * 17 + i) as u8).collect()
}

/// Writes shards of `sizes` records each under work id `w` and publishes them as `id`.
async fn small_shards(root: &Root, id: &str, sizes: &[usize]) -> Snapshot {
    let mut shards = Vec::new();
    for (s, &n) in sizes.iter().enumerate() {
        let records: Vec<Vec<u8>> = (0..n).map(|r| record(s, r)).collect();
        let meta = ShardMetadata::new("raw", "documents");
        shards.push(
            root.write_shard("w", s as u64, meta, &records)
                .await
                .unwrap(),
        );
    }
    publish(root, id, shards, None).await
}

/// Every record of `a` equals the one at the same index of `b`.
async fn same_records(root: &Root, a: &Snapshot, b: &Snapshot) {
    assert_eq!(a.total_records(), b.total_records());
    let (ra, rb) = (root.reader(a.clone()), root.reader(b.clone()));
    for i in 0..a.total_records() {
        assert_eq!(
            ra.get_async(i).await.unwrap(),
            rb.get_async(i).await.unwrap(),
            "record {i}"
        );
    }
}

#[tokio::test]
async fn many_small_shards_become_few_with_identical_records() {
    let root = memory_root("compact-many");
    let sizes = vec![50; 200];
    let source = small_shards(&root, "s1", &sizes).await;
    let per_shard = source.shards()[0].size;
    // About 40 source shards to an output shard.
    let target = per_shard * 40;
    let request = CompactRequest::new("s2").with_target_shard_bytes(target);
    let done = root.compact(Some("s1"), &request).await.unwrap();
    assert_eq!((done.input_shards, done.records), (200, 10_000));
    assert!((5..=6).contains(&done.output_shards), "{:?}", done.plan);
    // Groups are as large as the target allows: the next shard would not have fitted.
    for pair in done.plan.windows(2) {
        let PlannedShard::Rewritten { input_bytes, .. } = &pair[0] else {
            panic!("{pair:?}")
        };
        let next = source.shards()[pair[1].sources().start].size;
        assert!(
            *input_bytes <= target && input_bytes + next > target,
            "{pair:?}"
        );
    }
    assert_eq!(done.outcome, Some(PublishOutcome::Committed));
    let new = root.snapshot("s2").await.unwrap();
    assert_eq!(new.manifest.mode, PublishMode::Full);
    assert!(
        new.shards()
            .iter()
            .all(|s| s.key.starts_with("shards/compact-s2/"))
    );
    assert!(new.shards().iter().all(|s| s.size <= target));
    assert!(done.output_bytes < done.input_bytes);
    same_records(&root, &source, &new).await;
    // The plan covers every source shard once, in order.
    let covered: Vec<usize> = done.plan.iter().flat_map(PlannedShard::sources).collect();
    assert_eq!(covered, (0..200).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_second_run_is_idempotent_and_a_dry_run_writes_nothing() {
    let root = memory_root("compact-again");
    let source = small_shards(&root, "s1", &[3, 0, 5, 7, 1]).await;
    let request = CompactRequest::new("s2");
    let dry = root
        .compact(Some("s1"), &request.clone().with_dry_run(true))
        .await
        .unwrap();
    assert!(dry.snapshot.is_none());
    assert_eq!(dry.output_shards, 1);
    assert!(matches!(
        root.snapshot("s2").await,
        Err(Error::NotFound { .. })
    ));
    assert!(
        root.store()
            .head("shards/compact-s2/00000000.glm")
            .await
            .is_err()
    );

    let first = root.compact(Some("s1"), &request).await.unwrap();
    let again = root.compact(Some("s1"), &request).await.unwrap();
    assert_eq!(first.outcome, Some(PublishOutcome::Committed));
    assert_eq!(again.outcome, Some(PublishOutcome::AlreadyPublished));
    assert_eq!(first.snapshot, again.snapshot);
    assert_eq!(dry.plan, first.plan);
    same_records(&root, &source, first.snapshot.as_ref().unwrap()).await;
    // Without a source the latest (the compaction itself) is refused, not recompacted.
    let err = root.compact(None, &request).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    // Another compaction into the same id is another request: a collision on the claim.
    let other = root
        .compact(Some("s1"), &request.clone().with_work_id("other"))
        .await
        .unwrap_err();
    assert!(
        matches!(other, Error::PublicationCollision { .. }),
        "{other}"
    );
}

#[tokio::test]
async fn a_missing_source_and_bad_targets_are_typed_errors() {
    let root = memory_root("compact-missing");
    small_shards(&root, "s1", &[1, 2]).await;
    let err = root
        .compact(Some("nope"), &CompactRequest::new("s2"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    for target in [0, (5 << 30) + 1] {
        let request = CompactRequest::new("s2").with_target_shard_bytes(target);
        let err = root.compact(Some("s1"), &request).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }
    let empty = memory_root("compact-empty");
    let err = empty
        .compact(None, &CompactRequest::new("s2"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn large_shards_and_other_metadata_are_kept_or_split_groups() {
    let root = memory_root("compact-kept");
    let big: Vec<Vec<u8>> = (0..400).map(|r| vec![r as u8; 100]).collect();
    let raw = || ShardMetadata::new("raw", "documents");
    let cbor = || ShardMetadata::new("cbor", "documents");
    let shards = vec![
        root.write_shard("w", 0, raw(), [b"a"]).await.unwrap(),
        root.write_shard("w", 1, raw(), [b"b"]).await.unwrap(),
        root.write_shard("w", 2, raw(), &big).await.unwrap(),
        root.write_shard("w", 3, raw(), [b"c"]).await.unwrap(),
        root.write_shard("w", 4, cbor(), [b"d"]).await.unwrap(),
        root.write_shard("w", 5, cbor(), [b"e"]).await.unwrap(),
    ];
    let source = publish(&root, "s1", shards, None).await;
    let request = CompactRequest::new("s2").with_target_shard_bytes(10_000);
    let done = root.compact(Some("s1"), &request).await.unwrap();
    let sources: Vec<_> = done.plan.iter().map(PlannedShard::sources).collect();
    assert_eq!(sources, [0..2, 2..3, 3..4, 4..6]);
    let new = done.snapshot.unwrap();
    // The large shard and the lone one are referenced, not rewritten.
    assert_eq!(new.shards()[1], source.shards()[2]);
    assert_eq!(new.shards()[2], source.shards()[3]);
    same_records(&root, &source, &new).await;
    // Each rewritten shard keeps its group's record format.
    let reader = root.reader(new);
    let formats: Vec<String> = futures::future::join_all((0..4).map(|i| {
        let reader = &reader;
        async move {
            reader
                .open_shard_async(i)
                .await
                .unwrap()
                .record_format()
                .to_owned()
        }
    }))
    .await;
    assert_eq!(formats, ["raw", "raw", "raw", "cbor"]);
}

#[tokio::test]
async fn schema_bound_shards_keep_their_schema_and_annotations_align() {
    let root = memory_root("compact-schema");
    let schema = Schema::new(vec![
        Field::new("text", DataType::Utf8, false),
        Field::new("label", DataType::UInt8, false),
    ]);
    let mut shards = Vec::new();
    for s in 0..12u64 {
        let records: Vec<Vec<u8>> = (0..4)
            .map(|r| {
                let mut out = Vec::new();
                let text = format!("doc {s}/{r}");
                ciborium::into_writer(&cbor!({"text" => text, "label" => r}).unwrap(), &mut out)
                    .unwrap();
                out
            })
            .collect();
        let meta = ShardMetadata::new("cbor", "documents").with_schema(schema.clone());
        shards.push(root.write_shard("w", s, meta, &records).await.unwrap());
    }
    let source = publish(&root, "s1", shards, Some(schema.clone())).await;
    let labels: Vec<String> = (0..48).map(|i| format!("label-{i}")).collect();
    let retry = guideloom_io::RetryPolicy::contended_update();
    root.publish_annotations("labels", "v1", &source, &labels, &retry)
        .await
        .unwrap();
    let done = root
        .compact(Some("s1"), &CompactRequest::new("s2"))
        .await
        .unwrap();
    let new = done.snapshot.unwrap();
    assert_eq!(new.shards().len(), 1);
    assert_eq!(new.manifest.schema.as_ref(), Some(&schema));
    let reader = root.reader(new.clone());
    let opened = reader.open_shard_async(0).await.unwrap();
    assert_eq!(
        opened.native().unwrap().metadata().schema.as_ref(),
        Some(&schema)
    );
    same_records(&root, &source, &new).await;
    let on_source = root
        .annotations("labels", None, &source, false)
        .await
        .unwrap();
    let on_new = root.annotations("labels", None, &new, true).await.unwrap();
    for i in 0..48 {
        assert_eq!(
            on_new.get::<String>(i).unwrap(),
            on_source.get::<String>(i).unwrap()
        );
        assert_eq!(on_new.get::<String>(i).unwrap(), labels[i as usize]);
    }
}

#[tokio::test]
async fn stream_shards_concatenate_documents_and_companions() {
    let root = memory_root("compact-stream");
    let mut shards = Vec::new();
    let mut all_tokens = Vec::new();
    let mut all_meta = Vec::new();
    for s in 0..9u32 {
        let docs: Vec<(Vec<u32>, String)> = (0..s % 4)
            .map(|d| {
                (
                    (0..(s + d) % 6).map(|t| s * 100 + d * 10 + t).collect(),
                    format!("m{s}.{d}"),
                )
            })
            .collect();
        for (tokens, meta) in &docs {
            all_tokens.extend_from_slice(tokens);
            all_meta.push(meta.clone());
        }
        shards.push(
            root.write_stream_shard_with_meta("w", s.into(), docs)
                .await
                .unwrap(),
        );
    }
    let source = publish(&root, "s1", shards, None).await;
    let done = root
        .compact(Some("s1"), &CompactRequest::new("s2"))
        .await
        .unwrap();
    let new = done.snapshot.unwrap();
    assert_eq!(new.shards().len(), 1);
    let stream = new.shards()[0].stream.as_ref().unwrap();
    assert_eq!(
        (stream.element.as_str(), stream.elements),
        ("u32", all_tokens.len() as u64)
    );
    assert_eq!(
        stream.meta.as_ref().unwrap().key,
        "shards/compact-s2/00000000.meta.glm"
    );
    // The new root reference equals what another process would adopt.
    let adopted = root
        .adopt_shard(&new.shards()[0].key, new.shards()[0].size)
        .await
        .unwrap();
    assert_eq!(&adopted, &new.shards()[0]);
    same_records(&root, &source, &new).await;
    let reader = root.reader(new);
    let tokens = reader
        .tokens_async::<u32>(0..all_tokens.len() as u64)
        .await
        .unwrap();
    assert_eq!(tokens.to_vec(), all_tokens);
    for (i, want) in all_meta.iter().enumerate() {
        assert_eq!(
            &reader
                .document_meta_async::<String>(i as u64)
                .await
                .unwrap(),
            want
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_thread_runtime_compacts_the_same_bytes() {
    let root = memory_root("compact-mt");
    let source = small_shards(&root, "s1", &[30; 20]).await;
    let done = root
        .compact(Some("s1"), &CompactRequest::new("s2"))
        .await
        .unwrap();
    same_records(&root, &source, done.snapshot.as_ref().unwrap()).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the shard sizes and the target, every record comes out identical, the plan
    /// covers every source shard once in order, and no rewritten group passes the target.
    #[test]
    fn every_record_comes_out_identical(
        sizes in proptest::collection::vec(0usize..40, 1..25),
        target in 200u64..3_000,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let root = Root::new(
                Registry::new().resolve("memory://compact-prop", &StoreOptions::default()).unwrap(),
                RootOptions::default(),
            );
            let source = small_shards(&root, "s1", &sizes).await;
            let request = CompactRequest::new("s2").with_target_shard_bytes(target);
            let done = root.compact(Some("s1"), &request).await.unwrap();
            let covered: Vec<usize> = done.plan.iter().flat_map(PlannedShard::sources).collect();
            assert_eq!(covered, (0..sizes.len()).collect::<Vec<_>>());
            for p in &done.plan {
                if let PlannedShard::Rewritten { input_bytes, .. } = p {
                    assert!(*input_bytes <= target, "{p:?}");
                }
            }
            same_records(&root, &source, done.snapshot.as_ref().unwrap()).await;
        });
    }
}
