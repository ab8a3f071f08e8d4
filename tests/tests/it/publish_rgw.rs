//! Ceph RGW only (`cargo xtask servers up ceph`): the quirks and the atomicity that the
//! shared matrix in `publish_roots.rs` does not show. RGW 16 refuses the quoted etag that
//! object_store sends in `If-Match`; the conditional-write probe must learn
//! [`EtagStyle::Unquoted`] there, and compare-and-swap must then work. Unlike moto, RGW is
//! atomic under concurrency, so a race of large creates has exactly one winner.

use crate::publish_common;

use std::sync::Arc;

use bytes::Bytes;
use guideloom_publish::{CreateOutcome, EtagStyle, RootStore, cas_update};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload, UpdateVersion};
use publish_common::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn rgw_rejects_quoted_etags_and_the_probe_learns_unquoted() {
    let Some((fx, registry)) = rgw_with_registry() else {
        return;
    };
    let bucket_name = std::env::var("GUIDELOOM_RGW_BUCKET").unwrap();
    let bucket = registry.lookup("s3", &bucket_name).unwrap();
    runtime().block_on(async {
        // The quirk itself, on the raw store: the current etag, quoted as returned, is refused.
        let raw = Arc::clone(bucket.store());
        let path = Path::from(format!("{}/etag-quirk", unique("rgw-raw")));
        let first = raw
            .put_opts(&path, PutPayload::from_static(b"a"), PutMode::Create.into())
            .await
            .unwrap();
        let quoted = first.e_tag.clone().expect("RGW returns an etag");
        assert!(quoted.starts_with('"'), "{quoted}");
        let update = |e_tag: String| {
            PutMode::Update(UpdateVersion {
                e_tag: Some(e_tag),
                version: None,
            })
        };
        let err = raw
            .put_opts(
                &path,
                PutPayload::from_static(b"b"),
                update(quoted.clone()).into(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::Precondition { .. }),
            "{err}"
        );
        // Unquoted, the same etag is accepted: this is what the probe has to find out.
        raw.put_opts(
            &path,
            PutPayload::from_static(b"c"),
            update(quoted.trim_matches('"').to_owned()).into(),
        )
        .await
        .unwrap();
        raw.delete(&path).await.unwrap();

        let requests_before = bucket.requests();
        assert_eq!(
            bucket.probe(&unique("rgw-probe")).await.unwrap(),
            EtagStyle::Unquoted
        );
        assert!(bucket.requests() > requests_before, "the probe ran here");
        // The verdict is kept: a second call sends nothing.
        let after_probe = bucket.requests();
        assert_eq!(
            bucket.probe("elsewhere").await.unwrap(),
            EtagStyle::Unquoted
        );
        assert_eq!(bucket.requests(), after_probe);

        // Compare-and-swap through the root now works: create, then two updates.
        for want in ["1", "2", "3"] {
            let body = cas_update(
                &**fx.root.store(),
                "counters/c",
                1 << 20,
                &fast_retry(),
                |cur| {
                    let n: u64 =
                        cur.map_or(0, |b| std::str::from_utf8(b).unwrap().parse().unwrap());
                    Ok(Some((n + 1).to_string().into_bytes()))
                },
            )
            .await
            .unwrap();
            assert_eq!(&body[..], want.as_bytes());
        }
    });
}

#[test]
fn rgw_sixteen_large_creates_of_one_key_have_one_winner() {
    let Some((_fx, registry)) = rgw_with_registry() else {
        return;
    };
    let bucket_name = std::env::var("GUIDELOOM_RGW_BUCKET").unwrap();
    let bucket = registry.lookup("s3", &bucket_name).unwrap();
    let prefix = unique("rgw-race");
    let root = Arc::new(bucket.root(&prefix).unwrap());
    // 8 MB bodies: the size at which moto let several creates win (TEST-SERVERS.md §2).
    const N: usize = 16;
    const SIZE: usize = 8 << 20;
    let rt = runtime();
    for round in 0..2 {
        let key = format!("race/create-{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(N));
        let outcomes: Vec<CreateOutcome> = rt.block_on(async {
            let handles: Vec<_> = (0..N)
                .map(|i| {
                    let (root, barrier, key) =
                        (Arc::clone(&root), Arc::clone(&barrier), key.clone());
                    tokio::spawn(async move {
                        let body = Bytes::from(vec![u8::try_from(i).unwrap(); SIZE]);
                        barrier.wait().await;
                        root.put_create(&key, body).await.unwrap()
                    })
                })
                .collect();
            let mut out = Vec::new();
            for h in handles {
                out.push(h.await.unwrap());
            }
            out
        });
        let winners: Vec<usize> = outcomes
            .iter()
            .enumerate()
            .filter(|(_, o)| **o == CreateOutcome::Created)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        // The stored object is the winner's, whole.
        let body = rt.block_on(root.get(&key, SIZE as u64)).unwrap().body;
        assert_eq!(body.len(), SIZE);
        let fill = u8::try_from(winners[0]).unwrap();
        assert!(body.iter().all(|&b| b == fill), "round {round}: mixed body");
        let raw = Path::from(format!("{prefix}/{key}"));
        rt.block_on(bucket.store().delete(&raw)).unwrap();
    }
}
