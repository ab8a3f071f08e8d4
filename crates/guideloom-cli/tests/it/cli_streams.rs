//! Stream shards written by the library (`Root::write_stream_shard*`) and published with
//! `guideloom publish`: the snapshot keeps each shard's stream reference (element type,
//! count, metadata companion), and a `.meta.glm` companion is never a shard of its own.

use crate::common;

use common::{guideloom, json, ok};
use guideloom_publish::{Root, RootOptions, StoreOptions};

#[test]
fn publish_keeps_stream_references_and_never_publishes_a_companion_as_a_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("root");
    let r = r.to_str().unwrap();
    let root = Root::open(r, &StoreOptions::default(), RootOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let plain: [&[u16]; 2] = [&[1, 2, 3], &[4]];
    let with_meta = [(vec![5u16, 6], "a".to_owned()), (vec![7], "b".to_owned())];
    let written = rt.block_on(async {
        vec![
            root.write_stream_shard("w", 0, plain).await.unwrap(),
            root.write_stream_shard_with_meta("w", 1, with_meta)
                .await
                .unwrap(),
        ]
    });

    // Three objects under shards/w/, two of them shards: no completion marker (the library
    // writes none), so both commands name work id w with its two shards.
    let info = ok(guideloom(&["info", r]));
    assert!(info.contains("work id w: 2 shard(s)"), "{info}");
    assert!(!info.contains(".meta.glm"), "{info}");
    let out = json(&ok(guideloom(&[
        "--json",
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
        "--work-id",
        "w",
        "--include-incomplete",
    ])));
    assert_eq!(out["shards"], 2, "{out}");
    assert_eq!(out["records"], 4, "{out}");

    let snapshot = rt.block_on(root.latest()).unwrap();
    assert_eq!(snapshot.shards(), &written[..]);
    let reader = rt.block_on(root.open_latest()).unwrap();
    assert_eq!(reader.stream().unwrap().len(), 7);
    let tokens = rt.block_on(reader.read_elements_async(2..5)).unwrap();
    assert_eq!(&tokens[..], &[3, 0, 4, 0, 5, 0]);
    let meta = rt.block_on(reader.document_meta_bytes_async(3)).unwrap();
    let meta: String = guideloom_format::cbor::decode_one(&meta).unwrap();
    assert_eq!(meta, "b");
}
