//! `Root::adopt_shard`: a shard already in the root gets the reference its writer returned
//! (stream and companion included), at the documented request cost, and a shard or
//! companion that lies is refused by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_format::{ShardMetadata, Value};

use super::*;
use crate::error::Error;
use crate::manifest::PublishMode;
use crate::store::{CountingStore, create_object};

/// A memory root whose every request (readers' reads included) is counted.
fn memory_root(name: &str) -> (Root, CountingStore) {
    let store = Registry::new()
        .resolve(&format!("memory://{name}"), &StoreOptions::default())
        .unwrap();
    let counting = CountingStore::new(store);
    (
        Root::new(Arc::new(counting.clone()), RootOptions::default()),
        counting,
    )
}

/// Adopts `written` as another process would (key and listed size only), counting requests.
async fn adopt(root: &Root, counting: &CountingStore, written: &ShardRef) -> (ShardRef, u64) {
    let before = counting.counts().total().requests;
    let adopted = root.adopt_shard(&written.key, written.size).await.unwrap();
    (adopted, counting.counts().total().requests - before)
}

async fn bytes_of(root: &Root, key: &str) -> Bytes {
    root.store().get(key, 1 << 30).await.unwrap().body
}

#[tokio::test]
async fn adopted_shards_are_the_references_their_writers_returned() {
    let (root, counting) = memory_root("adopt-equal");
    let records: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; usize::from(i)]).collect();
    let meta = ShardMetadata::new("raw", "documents");
    let plain = root.write_shard("w", 0, meta, &records).await.unwrap();
    // User metadata past the first tail read: a second ranged read brings it.
    let big = BTreeMap::from([("note".to_owned(), Value::Text("x".repeat(10_000)))]);
    let meta = ShardMetadata::new("raw", "documents").with_user(big);
    let big_meta = root.write_shard("w", 1, meta, &records).await.unwrap();
    let docs: [&[u32]; 3] = [&[1, 2, 3], &[], &[4, 5]];
    let stream = root.write_stream_shard("w", 2, docs).await.unwrap();
    let with_meta = [(vec![7u32; 3], 10u8), (vec![8; 1], 11), (vec![], 12)];
    let stream_meta = root
        .write_stream_shard_with_meta("w", 3, with_meta)
        .await
        .unwrap();
    assert!(stream_meta.stream.as_ref().unwrap().meta.is_some());

    // One tail read; two for metadata past it; a stream adds the companion's HEAD, and a
    // companion its own tail read.
    let expected_requests = [1, 2, 2, 3];
    let written = [&plain, &big_meta, &stream, &stream_meta];
    let mut adopted = Vec::new();
    for (w, requests) in written.into_iter().zip(expected_requests) {
        let (a, n) = adopt(&root, &counting, w).await;
        assert_eq!(&a, w, "{}", w.key);
        assert_eq!(n, requests, "requests to adopt {}", w.key);
        adopted.push(a);
    }

    // Published, they read as the written ones do.
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s".into(),
        shards: adopted[2..].to_vec(),
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
    let reader = root.open_latest().await.unwrap();
    assert_eq!(reader.stream().unwrap().len(), 9);
    let cbor = reader.document_meta_bytes_async(3).await.unwrap();
    let meta: u8 = guideloom_format::cbor::decode_one(&cbor).unwrap();
    assert_eq!(meta, 10);
}

#[tokio::test]
async fn shards_and_companions_that_lie_are_refused_by_name() {
    let (root, _) = memory_root("adopt-hostile");
    let store = &**root.store();
    let docs: [&[u16]; 2] = [&[1, 2], &[3]];
    let stream = root.write_stream_shard("w", 0, docs).await.unwrap();
    let three = [(vec![1u16], 1u8), (vec![2], 2), (vec![3], 3)];
    let other = root
        .write_stream_shard_with_meta("w", 1, three)
        .await
        .unwrap();

    // Not a shard at all, too small for a footer, a size that is not the object's.
    let junk = root
        .upload_shard("junk", 0, Bytes::from(vec![7u8; 100]), 1)
        .await
        .unwrap();
    let err = root.adopt_shard(&junk.key, junk.size).await.unwrap_err();
    assert!(
        matches!(&err, Error::Shard { key, source } if *key == junk.key && source.is_corrupt()),
        "{err}"
    );
    let err = root.adopt_shard(&junk.key, 10).await.unwrap_err();
    assert!(
        matches!(&err, Error::Shard { key, source } if *key == junk.key && source.is_corrupt()),
        "{err}"
    );
    let err = root
        .adopt_shard(&stream.key, stream.size - 1)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&stream.key), "{err}");
    let err = root.adopt_shard("../outside.glm", 100).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");

    // A flipped metadata byte: the footer is intact, the metadata CRC is not.
    let mut bytes = bytes_of(&root, &stream.key).await.to_vec();
    let at = bytes.len() - 64 - 3;
    bytes[at] ^= 0x40;
    let key = "shards/flip/00000000.glm";
    create_object(store, key, Bytes::from(bytes)).await.unwrap();
    let err = root.adopt_shard(key, stream.size).await.unwrap_err();
    assert!(
        matches!(&err, Error::Shard { key: k, source } if k == key && source.is_corrupt()),
        "{err}"
    );

    // A companion of 3 documents beside a stream shard of 2.
    let companion = other.stream.as_ref().unwrap().meta.as_ref().unwrap();
    let body = bytes_of(&root, &companion.key).await;
    create_object(store, "shards/w/00000000.meta.glm", body)
        .await
        .unwrap();
    let err = root
        .adopt_shard(&stream.key, stream.size)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Verification { what: "companion record count", key, expected, actual }
            if key == "shards/w/00000000.meta.glm" && expected == "2" && actual == "3"),
        "{err}"
    );

    // A stream shard where its companion should be.
    let two: [&[u16]; 2] = [&[9], &[9]];
    let stray = root.write_stream_shard("v", 0, two).await.unwrap();
    let body = bytes_of(&root, &stray.key).await;
    create_object(store, "shards/x/00000000.meta.glm", body)
        .await
        .unwrap();
    let docs: [&[u16]; 2] = [&[1], &[2]];
    let lone = root.write_stream_shard("x", 0, docs).await.unwrap();
    let err = root.adopt_shard(&lone.key, lone.size).await.unwrap_err();
    assert!(
        matches!(&err, Error::Verification { what: "companion record format", key, .. }
            if key == "shards/x/00000000.meta.glm"),
        "{err}"
    );
}
