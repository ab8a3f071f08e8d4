//! Reading published records through `guideloom_publish::Root`s whose every request goes
//! through the fault-injecting proxy (`guideloom-faultproxy`): an `s3://` root whose endpoint
//! is the proxy (moto, Ceph RGW) and an `http://` root served by nginx behind it. The read
//! flow — `open_latest`, four `get`s and a `get_many` — is run under every fault kind:
//!
//! - on every other request (each request's first attempt fails, its retry passes): the exact
//!   records, after exactly twice the requests of a clean run (faults that spare short
//!   answers — a reset 5000 bytes into a body, a truncated body — between one and two times);
//! - on every request: a typed error (a timeout says so), never "corrupt", within the bound.

use crate::faults_common;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use faults_common::*;
use guideloom_faultproxy::{Fault, FaultProxy, Script};
use guideloom_format::ShardMetadata;
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, PublishRequest, Registry, Root, RootOptions,
    StoreOptions,
};

const RECORDS: u64 = 50;
const READ: [u64; 7] = [0, 17, 49, 3, 5, 6, 7];

fn record(i: u64) -> Vec<u8> {
    let pad = usize::try_from(i * 37 % 300).unwrap();
    format!("record {i:03} {}", "x".repeat(pad)).into_bytes()
}

/// One shard of [`RECORDS`] records, published as snapshot `s1` (no proxy).
async fn publish_clean(root: &Root) {
    let shard = root
        .write_shard(
            "w",
            0,
            ShardMetadata::new("raw", "documents"),
            (0..RECORDS).map(record),
        )
        .await
        .unwrap();
    let request = PublishRequest {
        dataset_id: "faults".into(),
        snapshot_id: "s1".into(),
        shards: vec![shard],
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
}

/// The read flow: the latest snapshot, then records one by one and a batch.
async fn read(root: &Root) -> Result<Vec<Bytes>, Error> {
    let reader = root.open_latest().await?;
    let mut out = Vec::new();
    for i in &READ[..4] {
        out.push(reader.get_async(*i).await?);
    }
    out.extend(reader.get_many_async(&READ[4..]).await?);
    Ok(out)
}

/// The read flow through proxies in front of `upstream`, `through` making the root that
/// reaches it through a proxy.
///
/// `body_errors_retried`: whether the root's client retries an answer whose body broke off
/// after its head. `HttpIo` does, for every request. object_store resumes a GET of a record
/// range (`ObjectStoreIo`'s streamed body) but not a LIST nor the whole-object GET of a
/// control object; guideloom-publish's object-store root repeats those itself (a read is
/// safe to repeat), so both kinds of root now recover from a body cut once.
async fn sweep(
    what: &str,
    upstream: &str,
    body_errors_retried: bool,
    through: impl Fn(&FaultProxy) -> Root,
) {
    let clean = FaultProxy::for_url(upstream, Script::pass()).unwrap();
    let (got, _) = guarded(what, read(&through(&clean))).await;
    assert_eq!(got.unwrap().len(), READ.len());
    let n = clean.stats().requests;
    println!("{what}: the read flow makes {n} requests");
    for f in every_fault() {
        let fault = f.fault;
        // Each request's first attempt gets the fault, its retry passes.
        let proxy = FaultProxy::for_url(
            upstream,
            Script::from_fn(move |e| {
                if e.request % 2 == 0 {
                    fault
                } else {
                    Fault::Pass
                }
            }),
        )
        .unwrap();
        let case = format!("{what}: {} on every other request", f.name);
        let (got, took) = guarded(&case, read(&through(&proxy))).await;
        // A reset deep in a body or a truncation spares the answers shorter than that
        // (control objects, HEADs, small records): those requests pass, so only a range is
        // exact for them.
        let size_dependent = matches!(
            fault,
            Fault::ResetAfterResponseBytes(5000) | Fault::TruncateBody(_)
        );
        let got = match got {
            Ok(got) => got,
            Err(e) if size_dependent && !body_errors_retried => {
                let chain = chain(&e);
                assert!(
                    matches!(e, Error::Storage { .. }) && chain.contains("body error"),
                    "{case}: {chain}"
                );
                assert!(!misnamed(&chain), "{case}: {chain}");
                println!("{case}: KNOWN GAP, a body cut once is not retried: {e}");
                continue;
            }
            Err(e) => panic!("{case}: {e}"),
        };
        for (bytes, i) in got.iter().zip(READ) {
            assert_eq!(&bytes[..], &record(i)[..], "{case}: record {i}");
        }
        let requests = proxy.stats().requests;
        if size_dependent {
            assert!(
                (n..=2 * n).contains(&requests),
                "{case}: {requests} requests"
            );
        } else {
            assert_eq!(requests, 2 * n, "{case}: one retry per request");
        }
        println!("{case}: right records, {requests} requests, {took:?}");

        let proxy = FaultProxy::for_url(upstream, Script::always(fault)).unwrap();
        let case = format!("{what}: {} on every request", f.name);
        let (got, took) = guarded(&case, read(&through(&proxy))).await;
        let e = match got {
            // Every answer of this flow was shorter than the fault needs (S3 lists and
            // records here are): nothing to fail, and the records are right.
            Ok(got) if size_dependent => {
                for (bytes, i) in got.iter().zip(READ) {
                    assert_eq!(&bytes[..], &record(i)[..], "{case}: record {i}");
                }
                println!("{case}: spared every answer, right records");
                continue;
            }
            Ok(_) => panic!("{case}: the read succeeded through a fault on every request"),
            Err(e) => e,
        };
        let text = e.to_string();
        let chain = chain(&e);
        assert!(
            !matches!(e, Error::Corrupt { .. }) && !misnamed(&chain),
            "{case}: {chain}"
        );
        if matches!(fault, Fault::Stall | Fault::Drip(_)) {
            assert!(chain.contains("timed out"), "{case}: {chain}");
        }
        println!(
            "{case}: {} requests, {took:?}: {text}",
            proxy.stats().requests
        );
    }
}

/// The error and its sources on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

async fn s3_sweep(server: &str) {
    let test = format!("s3_root_reads_records_under_every_fault_{server}");
    let Some((endpoint, bucket)) = s3_server(&test, server) else {
        return;
    };
    let prefix = guideloom_tests::unique("faults-roots");
    publish_clean(&s3_root(&endpoint, &bucket, &prefix)).await;
    sweep(&format!("{server} s3:// root"), &endpoint, true, |proxy| {
        s3_root(&proxy.url(), &bucket, &prefix)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_root_reads_records_under_every_fault_moto() {
    s3_sweep("moto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_root_reads_records_under_every_fault_rgw() {
    s3_sweep("rgw").await;
}

/// Removes the published subdirectory of the nginx root whatever the outcome.
struct Served(PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_root_reads_records_under_every_fault() {
    let Some((url, served)) = guideloom_tests::nginx("http_root_reads_records_under_every_fault")
    else {
        return;
    };
    let name = guideloom_tests::unique("faults-roots");
    let dir = served.join(&name);
    let _served = Served(dir.clone());
    let local = Root::new(
        Registry::new()
            .resolve(dir.to_str().unwrap(), &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    );
    publish_clean(&local).await;
    let options = StoreOptions::default()
        .with_request_timeout(ATTEMPT)
        .with_connect_timeout(ATTEMPT)
        .with_retry(guideloom_io::RetryPolicy::remote_request().with_max_attempts(ATTEMPTS))
        .with_retry_timeout(Duration::from_secs(20));
    sweep("nginx http:// root", &url, true, |proxy| {
        let base = format!("{}{name}", proxy.proxied(&url));
        Root::new(
            Registry::new().resolve(&base, &options).unwrap(),
            RootOptions::default(),
        )
    })
    .await;
}
