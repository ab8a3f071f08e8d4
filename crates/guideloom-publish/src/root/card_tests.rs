//! Dataset cards: create-only per snapshot, identical rewrites, the newest card, and hostile
//! card objects (huge, not UTF-8, wrong JSON).
#![allow(clippy::cast_possible_truncation)] // test sizes are small

use bytes::Bytes;
use guideloom_format::ShardMetadata;

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

async fn publish(root: &Root, id: &str) {
    let n = root.snapshots().await.unwrap().len() as u64;
    let shard = root
        .write_shard("w", n, ShardMetadata::new("raw", "documents"), [b"x"])
        .await
        .unwrap();
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: id.into(),
        shards: vec![shard],
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
}

fn card(text: &str) -> Card {
    let mut card = Card::new(format!("# {text}\n\nMore about {text}.\n"));
    card.licence = Some("CC-BY-4.0".into());
    card.description = Some(format!("the {text} dataset"));
    card.citation = Some("@misc{x}".into());
    card.schema = Some(serde_json::json!({"fields": [{"name": "text"}]}));
    card.splits
        .insert("train".into(), Split::range(0..1).unwrap());
    card.splits
        .insert("all".into(), Split::Snapshot("s1".into()));
    card.extra
        .insert("homepage".into(), serde_json::json!("https://example.org"));
    card
}

#[tokio::test]
async fn cards_are_create_only_versioned_and_the_newest_is_found() {
    let root = memory_root("card-flow");
    assert!(matches!(
        root.write_card("s1", &card("a")).await,
        Err(Error::NotFound { .. })
    ));
    publish(&root, "s1").await;
    assert_eq!(root.card("s1").await.unwrap(), None);
    assert_eq!(root.latest_card().await.unwrap(), None);
    root.write_card("s1", &card("a")).await.unwrap();
    // Identical bytes: success (guarantee 2).
    root.write_card("s1", &card("a")).await.unwrap();
    assert_eq!(root.card("s1").await.unwrap(), Some(card("a")));
    // Another README: a collision naming it; another card.json only: naming that.
    let err = root.write_card("s1", &card("b")).await.unwrap_err();
    assert!(
        matches!(&err, Error::PublicationCollision { key } if key == "cards/s1/README.md"),
        "{err}"
    );
    let mut other = card("a");
    other.licence = Some("MIT".into());
    let err = root.write_card("s1", &other).await.unwrap_err();
    assert!(
        matches!(&err, Error::PublicationCollision { key } if key == "cards/s1/card.json"),
        "{err}"
    );
    assert_eq!(root.card("s1").await.unwrap(), Some(card("a")));
    // Newer snapshots without a card: the latest card is still s1's; then s3's.
    publish(&root, "s2").await;
    publish(&root, "s3").await;
    let (id, latest) = root.latest_card().await.unwrap().unwrap();
    assert_eq!((id.as_str(), latest), ("s1", card("a")));
    root.write_card("s3", &card("c")).await.unwrap();
    let (id, latest) = root.latest_card().await.unwrap().unwrap();
    assert_eq!((id.as_str(), latest.first_lines(1)), ("s3", vec!["# c"]));
}

#[tokio::test]
async fn hostile_cards_are_corrupt_or_too_large_naming_the_object() {
    let root = memory_root("card-hostile");
    publish(&root, "s1").await;
    let store = root.store().clone();
    let put = |key: &'static str, body: Vec<u8>| {
        let store = store.clone();
        async move { store.put_create(key, Bytes::from(body)).await.unwrap() }
    };
    let (_, good_json) = card("a").to_bytes().unwrap();
    // A README that is not UTF-8.
    put("cards/s1/README.md", vec![b'#', 0xff, 0xfe]).await;
    put("cards/s1/card.json", good_json.to_vec()).await;
    let err = root.card("s1").await.unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { key, .. } if key == "cards/s1/README.md"),
        "{err}"
    );

    // card.json: not JSON, the wrong shape, unknown fields, a foreign format, bad splits.
    let bad_jsons: [&[u8]; 6] = [
        b"{not json",
        b"[1, 2]",
        br#"{"format": "guideloom-card", "version": 1, "licence": 7}"#,
        br#"{"format": "guideloom-card", "version": 1, "surprise": true}"#,
        br#"{"format": "something-else", "version": 1}"#,
        br#"{"format": "guideloom-card", "version": 1, "splits": {"x": {"range": {"start": 5, "end": 5}}}}"#,
    ];
    for (n, body) in bad_jsons.iter().enumerate() {
        let id = format!("h{n}");
        publish(&root, &id).await;
        let readme = card_readme_key(&id);
        let json = card_json_key(&id);
        store
            .put_create(&readme, Bytes::from_static(b"# ok"))
            .await
            .unwrap();
        store
            .put_create(&json, Bytes::copy_from_slice(body))
            .await
            .unwrap();
        let err = root.card(&id).await.unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { key, .. } if *key == json),
            "{n}: {err}"
        );
    }

    // Huge objects are refused before their bodies are read.
    publish(&root, "big").await;
    let huge = vec![b'a'; (MAX_CARD_README_BYTES + 1) as usize];
    store
        .put_create("cards/big/README.md", Bytes::from(huge.clone()))
        .await
        .unwrap();
    store
        .put_create("cards/big/card.json", good_json.clone())
        .await
        .unwrap();
    let err = root.card("big").await.unwrap_err();
    assert!(
        matches!(&err, Error::TooLarge { key, .. } if key == "cards/big/README.md"),
        "{err}"
    );
    publish(&root, "bigjson").await;
    store
        .put_create("cards/bigjson/card.json", Bytes::from(huge))
        .await
        .unwrap();
    let err = root.card("bigjson").await.unwrap_err();
    assert!(
        matches!(&err, Error::TooLarge { key, .. } if key == "cards/bigjson/card.json"),
        "{err}"
    );
    // A card.json without its README.
    publish(&root, "lonely").await;
    store
        .put_create("cards/lonely/card.json", good_json)
        .await
        .unwrap();
    let err = root.card("lonely").await.unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { key, .. } if key == "cards/lonely/README.md"),
        "{err}"
    );
    // A card too large to write is refused before any request.
    let mut too_big = card("x");
    too_big.readme = "a".repeat(MAX_CARD_README_BYTES as usize + 1);
    let err = root.write_card("s1", &too_big).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

#[test]
fn the_parser_round_trips_and_checks_every_field() {
    let (readme, json) = card("a").to_bytes().unwrap();
    assert_eq!(Card::parse("s1", &readme, &json).unwrap(), card("a"));
    // Deterministic bytes: the same card encodes the same way.
    assert_eq!(card("a").to_bytes().unwrap(), (readme, json.clone()));
    let err = Card::parse("s1", b"ok", &json[..json.len() - 1]).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    for bad in ["", "3..1", "a/b", "..5"] {
        assert!(Split::parse(bad).is_err(), "{bad:?}");
    }
}
