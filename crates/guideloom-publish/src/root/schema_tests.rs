//! Schemas through a root: writers refuse records that do not match, manifests carry the
//! schema, and a publication whose schema does not evolve from the latest one is refused.

use std::sync::Arc;

use ciborium::{Value, cbor};
use guideloom_format::ShardMetadata;
use guideloom_format::schema::{DataType, Field, Schema};

use super::*;
use crate::error::Error;
use crate::manifest::PublishMode;
use crate::publication::{PublicationOptions, PublishRequest};

fn memory_root(name: &str) -> Root {
    let store = Registry::new()
        .resolve(&format!("memory://{name}"), &StoreOptions::default())
        .unwrap();
    Root::new(store, RootOptions::default())
}

fn v1() -> Schema {
    Schema::new(vec![
        Field::new("text", DataType::Utf8, false),
        Field::new("label", DataType::UInt8, false),
    ])
}

fn record(value: Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(&value, &mut out).unwrap();
    out
}

fn request(
    id: &str,
    shards: Vec<ShardRef>,
    mode: PublishMode,
    schema: Option<Schema>,
) -> PublishRequest {
    PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: id.into(),
        shards,
        mode,
        schema,
    }
}

async fn publish(root: &Root, request: PublishRequest) -> Result<Snapshot> {
    root.publish(&request, &PublicationOptions::default())
        .await
        .map(|p| p.snapshot)
}

async fn shard(root: &Root, work: &str, schema: &Schema, records: &[Value]) -> Result<ShardRef> {
    let meta = ShardMetadata::new("cbor", "documents").with_schema(schema.clone());
    let bytes: Vec<Vec<u8>> = records.iter().cloned().map(record).collect();
    root.write_shard(work, 0, meta, &bytes).await
}

#[tokio::test]
async fn a_record_off_the_schema_is_refused_by_field_and_index() {
    let root = memory_root("schema-writer");
    let records = [
        cbor!({"text" => "a", "label" => 1}).unwrap(),
        cbor!({"text" => "b", "label" => 300}).unwrap(),
    ];
    let err = shard(&root, "w", &v1(), &records).await.unwrap_err();
    assert_eq!(err.kind(), guideloom_io::ErrorKind::Mismatch, "{err}");
    let text = format!("{err:#}");
    assert!(text.contains("label"), "{text}");
    assert!(
        err.to_string().contains("record 1") || format!("{:?}", err).contains("index: 1"),
        "{err:?}"
    );
    // Nothing was left under the shard's key.
    assert!(root.store().head("shards/w/00000000.glm").await.is_err());
}

#[tokio::test]
async fn schemas_evolve_by_the_rules() {
    let root = memory_root("schema-evolve");
    let first = shard(
        &root,
        "a",
        &v1(),
        &[cbor!({"text" => "a", "label" => 1}).unwrap()],
    )
    .await
    .unwrap();
    let s1 = publish(
        &root,
        request("s1", vec![first], PublishMode::Full, Some(v1())),
    )
    .await
    .unwrap();
    assert_eq!(s1.manifest.schema, Some(v1()));
    assert_eq!(
        root.latest().await.unwrap().manifest.schema,
        Some(v1()),
        "read back from the log"
    );

    // A new nullable field: allowed, and the earlier shard stays readable under it.
    let mut v2 = v1();
    v2.fields.push(Field::new("score", DataType::Float32, true));
    let second = shard(
        &root,
        "b",
        &v2,
        &[cbor!({"text" => "b", "label" => 2, "score" => 0.5}).unwrap()],
    )
    .await
    .unwrap();
    let s2 = publish(
        &root,
        request(
            "s2",
            vec![second.clone()],
            PublishMode::Append,
            Some(v2.clone()),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        (s2.manifest.total_records, s2.manifest.schema.clone()),
        (2, Some(v2.clone()))
    );

    // A changed type, a dropped schema, a new required field: refused, nothing committed.
    let mut retyped = v2.clone();
    retyped.fields[1].data_type = DataType::Int64;
    let mut required = v2.clone();
    required
        .fields
        .push(Field::new("must", DataType::Bool, false));
    for (id, mode, schema, says) in [
        (
            "s3",
            PublishMode::Append,
            Some(retyped),
            "type changed from uint8 to int64",
        ),
        ("s4", PublishMode::Full, None, "a schema is never dropped"),
        ("s5", PublishMode::Append, Some(required), "not nullable"),
    ] {
        let err = publish(&root, request(id, vec![second.clone()], mode, schema))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::SchemaChange { .. }), "{err:?}");
        assert_eq!(err.kind(), guideloom_io::ErrorKind::Mismatch);
        assert!(err.to_string().contains(says), "{err}");
    }
    assert_eq!(root.latest().await.unwrap().id(), "s2");
}

#[tokio::test]
async fn a_schema_comes_to_a_schemaless_dataset_only_in_full() {
    let root = memory_root("schema-late");
    let meta = ShardMetadata::new("cbor", "documents");
    let plain = root
        .write_shard("p", 0, meta, [record(cbor!({"text" => "x"}).unwrap())])
        .await
        .unwrap();
    publish(&root, request("s1", vec![plain], PublishMode::Full, None))
        .await
        .unwrap();
    let typed = shard(
        &root,
        "t",
        &v1(),
        &[cbor!({"text" => "a", "label" => 1}).unwrap()],
    )
    .await
    .unwrap();
    let err = publish(
        &root,
        request("s2", vec![typed.clone()], PublishMode::Append, Some(v1())),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("schemaless"), "{err}");
    publish(
        &root,
        request("s3", vec![typed], PublishMode::Full, Some(v1())),
    )
    .await
    .unwrap();
    let _ = Arc::new(());
}
