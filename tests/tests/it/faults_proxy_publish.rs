//! Publication through the fault-injecting proxy (`guideloom-faultproxy`) in front of moto,
//! Ceph RGW, fake-gcs-server and Azurite, with `guideloom_publish::Root`s resolved from
//! `s3://`, `gs://` and `az://` URIs whose endpoint is the proxy (so the conditional-write probe, every HEAD, GET, LIST and create-only or CAS
//! PUT of the protocol goes through it).
//!
//! The flow — `upload_shard`, `publish`, `latest`; and `publish_annotations` on a published
//! snapshot — is run once per fault kind and per request position: the fault hits request
//! number k of the flow (k = 0, 1, ... up to the last request of a clean run), so every call
//! site meets every fault, including the faults that hit a PUT *after the server stored the
//! object* (a reset, a clean close or a timeout once the upstream answered: the ambiguous
//! outcome). After each run, through a clean root (no proxy):
//!
//! - the root validates: `latest()` opens (or the root was never initialised), every shard
//!   of every snapshot reads back with its size and bytes;
//! - a snapshot is whole or absent, and one that `publish` reported as published is in the
//!   log (never a success for a snapshot that is not there);
//! - after an error, a retry of the same request succeeds and leaves exactly one snapshot of
//!   that id (likewise the same shard upload and annotation set);
//! - no error calls a transport fault corruption.

use crate::faults_common;

use std::time::Duration;

use bytes::Bytes;
use faults_common::*;
use guideloom_faultproxy::{Applied, Fault, FaultProxy, Script};
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, PublishRequest, RetryPolicy, Root, ShardRef, Snapshot,
};

/// The fault kinds of the publication runs: every kind of the read tests except the ones
/// that act like another here (a reset 10 bytes into the answer like one at its first byte,
/// a 500 like a 503, a reset deep in a body larger than any control object). A 700 ms drip
/// never completes a response head within the 2 s attempt timeout, after the upstream acted.
fn publication_faults() -> Vec<Named> {
    let mut v: Vec<Named> = every_fault()
        .into_iter()
        .filter(|n| {
            !matches!(
                n.fault,
                Fault::Drip(_)
                    | Fault::ResetAfterResponseBytes(10 | 5000)
                    | Fault::Status { code: 500, .. }
            )
        })
        .collect();
    v.push(Named {
        name: "drip 700 ms/B",
        fault: Fault::Drip(Duration::from_millis(700)),
    });
    v
}

fn shard_body() -> Bytes {
    Bytes::from(data(3000))
}

fn request(shards: Vec<ShardRef>) -> PublishRequest {
    PublishRequest {
        dataset_id: "faults".into(),
        snapshot_id: "s1".into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    }
}

/// What one run of the publication flow returned.
#[derive(Debug)]
struct Run {
    upload: Result<ShardRef, Error>,
    publish: Option<Result<Snapshot, Error>>,
}

async fn publication(root: &Root) -> Run {
    let upload = root.upload_shard("w", 0, shard_body(), 10).await;
    let publish = match &upload {
        Ok(shard) => Some(
            root.publish(
                &request(vec![shard.clone()]),
                &PublicationOptions::default(),
            )
            .await
            .map(|published| published.snapshot),
        ),
        Err(_) => None,
    };
    if matches!(publish, Some(Ok(_))) {
        // Reading back through the proxy too (its faults, if any are left, must stay typed).
        if let Err(e) = root.latest().await {
            assert_named(&e);
        }
    }
    Run { upload, publish }
}

fn assert_named(e: &Error) {
    let text = e.to_string();
    assert!(
        !matches!(e, Error::Corrupt { .. }) && !misnamed(&text),
        "a transport fault reported as damage: {text}"
    );
}

/// The invariants, checked through `clean`: returns a note when the retry of a failed
/// request did not succeed.
async fn check(clean: &Root, run: &Run, faulty: &Root) -> Vec<String> {
    let mut notes = Vec::new();
    if let Err(e) = &run.upload {
        assert_named(e);
        // The same upload again (the proxy's script has run out: it passes now).
        if let Err(e) = faulty.upload_shard("w", 0, shard_body(), 10).await {
            notes.push(format!("retried upload_shard failed: {e}"));
        }
    }
    let published = match &run.publish {
        Some(Ok(s)) => Some(s.clone()),
        Some(Err(e)) => {
            assert_named(e);
            None
        }
        None => None,
    };
    // The root validates, whatever happened.
    let snapshots = match clean.snapshots().await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => panic!("the root does not validate after the run: {e}"),
    };
    for snapshot in &snapshots {
        whole(clean, snapshot).await;
    }
    match (&published, clean.latest().await) {
        // Success reported: the snapshot is in the log, whole.
        (Some(s), Ok(latest)) => {
            assert_eq!((latest.id(), latest.seq()), (s.id(), s.seq()));
            assert_eq!(latest.shards(), s.shards());
        }
        (Some(s), Err(e)) => panic!("publish reported {} but latest() fails: {e}", s.id()),
        (None, Ok(latest)) => assert_eq!(latest.id(), "s1", "only s1 is ever published"),
        (None, Err(e)) => assert!(e.is_not_found(), "latest() after a failed run: {e}"),
    }
    if matches!(run.publish, Some(Err(_))) {
        // A retry of the same request must succeed (or say exactly what happened).
        let shard = run.upload.as_ref().ok().cloned();
        let retried = faulty
            .publish(
                &request(shard.into_iter().collect()),
                &PublicationOptions::default(),
            )
            .await
            .map(|published| published.snapshot);
        match retried {
            Ok(s) => {
                let latest = clean.latest().await.unwrap();
                assert_eq!((latest.id(), latest.seq()), (s.id(), s.seq()));
                let all = clean.snapshots().await.unwrap();
                assert_eq!(all.iter().filter(|x| x.id() == "s1").count(), 1, "{all:?}");
                whole(clean, &latest).await;
            }
            Err(e) => {
                assert_named(&e);
                notes.push(format!("retried publish failed: {e}"));
            }
        }
    }
    notes
}

/// Every shard of `snapshot` reads back with its size and bytes.
async fn whole(clean: &Root, snapshot: &Snapshot) {
    for shard in snapshot.shards() {
        let obj = clean
            .store()
            .get(&shard.key, shard.size)
            .await
            .unwrap_or_else(|e| panic!("{} of {}: {e}", shard.key, snapshot.id()));
        assert_eq!(obj.body.len() as u64, shard.size, "{}", shard.key);
        assert!(obj.body == shard_body(), "{}: other bytes", shard.key);
    }
}

/// The requests of a clean run of `flow` through a pass-through proxy (method and target).
async fn clean_requests<F, Fut>(server: &str, endpoint: &str, bucket: &str, flow: F) -> Vec<Applied>
where
    F: Fn(Root, Root) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let proxy = FaultProxy::for_url(endpoint, Script::pass()).unwrap();
    let prefix = guideloom_tests::unique("faults-publish");
    let faulty = server_root(server, &proxy.url(), bucket, &prefix);
    let clean = server_root(server, endpoint, bucket, &prefix);
    guarded("clean run", flow(faulty, clean)).await;
    proxy.log()
}

fn describe(log: &[Applied]) -> String {
    log.iter()
        .map(|a| format!("{} {}", a.exchange.method, a.exchange.target))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a request of a clean run belongs to the conditional-write probe (its PUTs, GET
/// and the bulk DELETE), which the publication sweep already covers.
fn is_probe(a: &Applied) -> bool {
    let target = &a.exchange.target;
    // GCS object names arrive percent-encoded, `/` included.
    target.contains("/_probe/") || target.contains("%2F_probe%2F") || target.ends_with("?delete")
}

/// Runs `flow` once per fault kind and per request position `k` of a clean run (positions
/// for which `skip` holds excepted), each on a fresh prefix through a fresh proxy that
/// applies the fault to request `k` only. Returns the notes of failed retries.
async fn sweep<Flow, Fut>(
    server: &str,
    endpoint: &str,
    bucket: &str,
    log: &[Applied],
    skip: fn(&Applied) -> bool,
    flow: Flow,
) -> Vec<String>
where
    Flow: Fn(String, Root, Root) -> Fut,
    Fut: std::future::Future<Output = (String, Vec<String>)>,
{
    let mut notes = Vec::new();
    for n in publication_faults() {
        for (k, clean_request) in log.iter().enumerate() {
            if skip(clean_request) {
                continue;
            }
            let (fault, at) = (n.fault, k as u64);
            let proxy = FaultProxy::for_url(
                endpoint,
                Script::from_fn(move |e| if e.request == at { fault } else { Fault::Pass }),
            )
            .unwrap();
            let prefix = guideloom_tests::unique("faults-publish");
            let faulty = server_root(server, &proxy.url(), bucket, &prefix);
            let clean = server_root(server, endpoint, bucket, &prefix);
            let what = format!(
                "{server}: {} at request {k} ({} {})",
                n.name,
                clean_request.exchange.method,
                clean_request
                    .exchange
                    .target
                    .split('?')
                    .next()
                    .unwrap_or_default()
            );
            let ((outcome, found), took) = guarded(&what, flow(what.clone(), faulty, clean)).await;
            println!("{what} ({took:?}): {outcome}");
            notes.extend(found.into_iter().map(|f| format!("{what}: {f}")));
        }
    }
    for n in &notes {
        println!("NOTE {n}");
    }
    notes
}

async fn publication_sweep(server: &str) {
    let test = format!("publication_survives_a_fault_at_every_request_{server}");
    let Some((endpoint, bucket)) = s3_server(&test, server) else {
        return;
    };
    let log = clean_requests(server, &endpoint, &bucket, |faulty, _| async move {
        let run = publication(&faulty).await;
        run.publish.unwrap().unwrap();
    })
    .await;
    println!(
        "{server}: a clean publication makes {} requests:\n{}",
        log.len(),
        describe(&log)
    );
    let notes = sweep(
        server,
        &endpoint,
        &bucket,
        &log,
        |_| false,
        |_, faulty, clean| async move {
            let run = publication(&faulty).await;
            let notes = check(&clean, &run, &faulty).await;
            let outcome = match &run.publish {
                Some(Ok(_)) => "published".to_owned(),
                Some(Err(e)) => format!("publish failed: {e}"),
                None => format!("upload failed: {}", run.upload.as_ref().unwrap_err()),
            };
            (outcome, notes)
        },
    )
    .await;
    assert!(notes.is_empty(), "{} retries failed", notes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_survives_a_fault_at_every_request_moto() {
    publication_sweep("moto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_survives_a_fault_at_every_request_rgw() {
    publication_sweep("rgw").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_survives_a_fault_at_every_request_gcs() {
    publication_sweep("gcs").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_survives_a_fault_at_every_request_azure() {
    publication_sweep("azure").await;
}

const VALUES: [u64; 10] = [0, 7, 14, 21, 28, 35, 42, 49, 56, 63];

async fn annotate(
    root: &Root,
    snapshot: &Snapshot,
) -> Result<guideloom_publish::AnnotationEntry, Error> {
    root.publish_annotations(
        "labels",
        "v1",
        snapshot,
        &VALUES,
        &RetryPolicy::contended_update(),
    )
    .await
}

/// A published snapshot on `root` (through no proxy).
async fn published(root: &Root) -> Snapshot {
    let shard = root.upload_shard("w", 0, shard_body(), 10).await.unwrap();
    root.publish(&request(vec![shard]), &PublicationOptions::default())
        .await
        .unwrap()
        .snapshot
}

/// One faulted annotation run and its checks through `clean`.
async fn annotation_run(what: String, faulty: Root, clean: Root) -> (String, Vec<String>) {
    let snapshot = published(&clean).await;
    let out = annotate(&faulty, &snapshot).await;
    // The catalog validates; the set is whole or absent; Ok means present.
    let catalog = clean
        .catalog()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let found = catalog.find("labels", Some("v1")).cloned();
    match (&out, &found) {
        (Ok(entry), Some(f)) => assert_eq!(entry, f, "{what}"),
        (Ok(_), None) => panic!("{what}: reported published, not in the catalog"),
        (Err(e), _) => assert_named(e),
    }
    if found.is_some() {
        let set = clean
            .annotations("labels", Some("v1"), &snapshot, false)
            .await;
        let set = set.unwrap_or_else(|e| panic!("{what}: {e}"));
        for (i, want) in VALUES.iter().enumerate() {
            assert_eq!(set.get::<u64>(i as u64).unwrap(), *want, "{what}");
        }
    }
    let mut notes = Vec::new();
    if let Err(e) = &out {
        // The same annotation set again (the proxy passes now): it must land, once.
        match annotate(&faulty, &snapshot).await {
            Ok(entry) => {
                let catalog = clean.catalog().await.unwrap();
                assert_eq!(catalog.find("labels", Some("v1")), Some(&entry), "{what}");
                assert_eq!(
                    catalog.entries.iter().filter(|x| x.set == "labels").count(),
                    1
                );
            }
            Err(again) => notes.push(format!("{e}; retry: {again}")),
        }
    }
    let outcome = out
        .as_ref()
        .map_or_else(|e| format!("failed: {e}"), |_| "published".into());
    (outcome, notes)
}

async fn annotation_sweep(server: &str) {
    let test = format!("annotations_survive_a_fault_at_every_request_{server}");
    let Some((endpoint, bucket)) = s3_server(&test, server) else {
        return;
    };
    let log = clean_requests(server, &endpoint, &bucket, |faulty, clean| async move {
        let snapshot = published(&clean).await;
        annotate(&faulty, &snapshot).await.unwrap();
    })
    .await;
    println!(
        "{server}: clean annotations make {} requests:\n{}",
        log.len(),
        describe(&log)
    );
    // The probe's requests are swept by the publication tests.
    let notes = sweep(server, &endpoint, &bucket, &log, is_probe, annotation_run).await;
    assert!(notes.is_empty(), "{} retries failed", notes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_survive_a_fault_at_every_request_moto() {
    annotation_sweep("moto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_survive_a_fault_at_every_request_rgw() {
    annotation_sweep("rgw").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_survive_a_fault_at_every_request_gcs() {
    annotation_sweep("gcs").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_survive_a_fault_at_every_request_azure() {
    annotation_sweep("azure").await;
}
