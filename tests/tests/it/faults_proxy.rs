//! Reads through the fault-injecting proxy (`guideloom-faultproxy`) between the clients and
//! the real servers: guideloom-io's `HttpIo` and nginx, `ObjectStoreIo` over object_store's
//! S3 client and moto / Ceph RGW. For every fault kind and every read shape (`read`,
//! `read_tail`, a multi-range `read_ranges`) a read returns exactly the right bytes after a
//! counted retry, or — when the fault persists — a typed error (a timeout names itself) after
//! exactly the configured attempts, within `attempts × request timeout` or the deadline.
//! Retry counts are asserted exactly: `HttpIo::stats` and the proxy's own count agree.
//!
//! Publication under faults is `faults_proxy_publish.rs`. Times are measured and printed,
//! never asserted; every case runs under a generous hang detector.

use crate::faults_common;

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use faults_common::*;
use guideloom_faultproxy::{BlackHole, Fault, FaultProxy, Script};
use guideloom_io::RetryPolicy;
use guideloom_io::http::{HttpIo, HttpOptions, HttpPath};
use guideloom_io::objstore::ObjectStoreIo;
use guideloom_io::{AsyncReader, Backend, Error, TimeoutKind};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

/// The test object's size: 1 MiB + 17 bytes.
const SIZE: usize = (1 << 20) + 17;

/// The read shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `read(1000, 16 KiB)`: one ranged GET.
    Read,
    /// `read_tail(20000)`: one suffix GET.
    Tail,
    /// Three 16 KiB ranges far apart: one multi-range GET over HTTP, three GETs over S3.
    Ranges,
}

const OPS: [Op; 3] = [Op::Read, Op::Tail, Op::Ranges];

fn ranges(op: Op) -> Vec<Range<usize>> {
    #[allow(clippy::single_range_in_vec_init)] // one range of the batch, not its bytes
    match op {
        Op::Read => vec![1000..1000 + 16384],
        Op::Tail => vec![SIZE - 20000..SIZE],
        Op::Ranges => vec![0..16384, 300_000..316_384, 900_000..916_384],
    }
}

/// Requests one read of `op` makes when nothing fails.
fn clean_requests(op: Op, s3: bool) -> u64 {
    if op == Op::Ranges && s3 { 3 } else { 1 }
}

async fn run(reader: &dyn AsyncReader, op: Op) -> Result<Vec<Bytes>, Error> {
    match op {
        Op::Read => Ok(vec![reader.read(1000, 16384).await?]),
        Op::Tail => {
            let t = reader.read_tail(20000).await?;
            assert_eq!(t.size, SIZE as u64);
            Ok(vec![t.bytes])
        }
        Op::Ranges => {
            let r: Vec<Range<u64>> = ranges(op)
                .into_iter()
                .map(|r| r.start as u64..r.end as u64)
                .collect();
            reader.read_ranges(&r).await
        }
    }
}

fn check_bytes(what: &str, got: &[Bytes], op: Op, d: &[u8]) {
    let want = ranges(op);
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, r) in got.iter().zip(want) {
        assert!(g[..] == d[r.clone()], "{what}: wrong bytes for {r:?}");
    }
}

/// The nginx test object: its directory under the nginx root is removed at the end.
struct Served {
    dir: PathBuf,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(test: &str) -> Option<Served> {
    let (url, root) = guideloom_tests::nginx(test)?;
    let name = guideloom_tests::unique("faults");
    let dir = root.join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("obj.bin"), data(SIZE)).unwrap();
    Some(Served {
        dir,
        url: format!("{url}{name}/"),
    })
}

/// One read of `op` through a fresh proxy running `script`, with a fresh `HttpIo`: the
/// result, HttpIo's (requests, retries), the proxy's request count, the time taken.
async fn http_case(
    served: &Served,
    script: Script,
    options: HttpOptions,
    op: Op,
) -> (Result<Vec<Bytes>, Error>, (u64, u64), u64, Duration) {
    let proxy = FaultProxy::for_url(&served.url, script).unwrap();
    let io = HttpIo::with_options(&proxy.proxied(&served.url), options).unwrap();
    let reader = io.open_reader(&HttpPath::new("obj.bin").unwrap()).unwrap();
    let (out, took) = guarded("http read", run(&reader, op)).await;
    let s = io.stats().snapshot();
    (out, (s.requests, s.retries), proxy.stats().requests, took)
}

/// The fault applied to the first request (twice in a row for the status bursts) and the
/// retries that then cost.
fn transient(n: &Named) -> (Script, u64) {
    match n.fault {
        Fault::Status { .. } => (Script::requests([n.fault; 2]), 2),
        f => (Script::requests([f]), 1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_reads_recover_from_every_transient_fault() {
    let Some(served) = serve("http_reads_recover_from_every_transient_fault") else {
        return;
    };
    let d = data(SIZE);
    for n in every_fault() {
        for op in OPS {
            let (script, retries) = transient(&n);
            let (out, (requests, counted), at_proxy, took) =
                http_case(&served, script, http_options(), op).await;
            let what = format!("{} / {op:?}", n.name);
            let got = out.unwrap_or_else(|e| panic!("{what}: {e}"));
            check_bytes(&what, &got, op, &d);
            // Exactly one failed attempt per injected fault, each retried once.
            assert_eq!(
                (requests, counted),
                (clean_requests(op, false) + retries, retries),
                "{what}"
            );
            assert_eq!(at_proxy, requests, "{what}: the proxy saw every attempt");
            println!("http transient {what}: {requests} requests, {counted} retries, {took:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_reads_fail_typed_within_the_bound_when_faults_persist() {
    let Some(served) = serve("http_reads_fail_typed_within_the_bound_when_faults_persist") else {
        return;
    };
    for n in every_fault() {
        for op in OPS {
            let (out, (requests, retries), at_proxy, took) =
                http_case(&served, Script::always(n.fault), http_options(), op).await;
            let what = format!("{} / {op:?}", n.name);
            let e = out.map(|_| ()).unwrap_err();
            let text = e.to_string();
            assert!(!misnamed(&text), "{what}: {text}");
            assert!(e.is_retryable(), "{what}: {text}");
            // Every attempt was made, and no more: 3 requests, 2 retries.
            assert_eq!((requests, retries, at_proxy), (3, 2, 3), "{what}: {text}");
            match n.fault {
                Fault::Stall | Fault::Drip(_) => assert!(
                    matches!(&e, Error::Timeout(t) if t.attempts == Some(ATTEMPTS)
                        && t.limit == TimeoutKind::Request(ATTEMPT)),
                    "{what}: {text}"
                ),
                _ => assert!(
                    matches!(&e, Error::Remote { message, .. } if message.contains("after 3 attempts")),
                    "{what}: {text}"
                ),
            }
            println!("http persistent {what}: {took:?}: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_deadline_and_black_hole_end_reads_in_time() {
    let Some(served) = serve("http_deadline_and_black_hole_end_reads_in_time") else {
        return;
    };
    // A 1 B/s drip with ten attempts of 1 s but a 2.5 s deadline: the deadline ends the
    // read, whatever attempts remain (two or three, by the clock: not asserted).
    let options = http_options()
        .with_retry(RetryPolicy::new(
            10,
            Duration::from_millis(10),
            Duration::from_millis(50),
        ))
        .with_operation_timeout(Duration::from_millis(2500));
    for op in OPS {
        let drip = Script::always(Fault::Drip(Duration::from_secs(1)));
        let (out, (requests, retries), at_proxy, took) =
            http_case(&served, drip, options.clone(), op).await;
        let e = out.map(|_| ()).unwrap_err();
        let Error::Timeout(t) = &e else {
            panic!("{op:?}: {e}")
        };
        assert_eq!(
            t.limit,
            TimeoutKind::Deadline(Duration::from_millis(2500)),
            "{e}"
        );
        assert_eq!(Some(u32::try_from(requests).unwrap()), t.attempts, "{e}");
        assert!(
            requests < 10 && requests == at_proxy && retries == requests - 1,
            "{e}"
        );
        println!("http deadline drip / {op:?}: {requests} attempts, {took:?}: {e}");
    }

    // A 503 asking for a 5 s wait, with a 2 s deadline: no retry starts; the timeout says
    // why and carries the 503 as its source. One request, exactly.
    let options = http_options()
        .with_retry(RetryPolicy::new(
            3,
            Duration::from_millis(10),
            Duration::from_secs(10),
        ))
        .with_operation_timeout(Duration::from_secs(2));
    let (out, (requests, _), _, _) = http_case(
        &served,
        Script::always(Fault::unavailable(5)),
        options,
        Op::Read,
    )
    .await;
    let e = out.map(|_| ()).unwrap_err();
    assert!(
        matches!(&e, Error::Timeout(t) if t.attempts == Some(1)
            && t.limit == TimeoutKind::Deadline(Duration::from_secs(2))
            && t.source.as_ref().is_some_and(|s| s.to_string().contains("503"))),
        "{e}"
    );
    assert_eq!(requests, 1);

    // A black-holed server (connects, never reads or answers): a timeout per attempt.
    let hole = BlackHole::start().unwrap();
    let io = HttpIo::with_options(&format!("{}/", hole.url()), http_options()).unwrap();
    let reader = io.open_reader(&HttpPath::new("obj.bin").unwrap()).unwrap();
    for op in OPS {
        io.stats().reset();
        let (out, took) = guarded("black hole", run(&reader, op)).await;
        let e = out.map(|_| ()).unwrap_err();
        assert!(
            matches!(&e, Error::Timeout(t) if t.attempts == Some(ATTEMPTS)
                && t.limit == TimeoutKind::Request(ATTEMPT)),
            "{op:?}: {e}"
        );
        assert_eq!(io.stats().snapshot().retries, 2);
        println!("http black hole / {op:?}: {took:?}: {e}");
    }
}

/// One read of `op` of `key` through a fresh proxy in front of an S3 server, by
/// `ObjectStoreIo` over object_store's S3 client: the result and the proxy's request count.
async fn s3_case(
    endpoint: &str,
    bucket: &str,
    key: &str,
    script: Script,
    op: Op,
) -> (Result<Vec<Bytes>, Error>, u64, Duration) {
    let proxy = FaultProxy::for_url(endpoint, script).unwrap();
    let io = ObjectStoreIo::new(s3_store(&proxy.url(), bucket));
    let reader = io.open_async(&Path::from(key)).await.unwrap();
    let (out, took) = guarded("s3 read", run(&*reader, op)).await;
    (out, proxy.stats().requests, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_reads_recover_or_fail_typed_under_every_fault_moto() {
    s3_reads("moto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_reads_recover_or_fail_typed_under_every_fault_rgw() {
    s3_reads("rgw").await;
}

async fn s3_reads(server: &str) {
    let test = format!("s3_reads_recover_or_fail_typed_under_every_fault_{server}");
    let d = data(SIZE);
    if let Some((endpoint, bucket)) = s3_server(&test, server) {
        let key = guideloom_tests::unique("faults-s3");
        s3_store(&endpoint, &bucket)
            .put(&Path::from(key.as_str()), PutPayload::from(d.clone()))
            .await
            .unwrap();
        for n in every_fault() {
            for op in OPS {
                let what = format!("{server}: {} / {op:?}", n.name);
                // Transient: object_store retries (a request again, or a ranged GET for the
                // rest of a broken body), once per injected fault.
                let (script, retries) = transient(&n);
                let (out, requests, took) = s3_case(&endpoint, &bucket, &key, script, op).await;
                let got = out.unwrap_or_else(|e| panic!("{what}: {e}"));
                check_bytes(&what, &got, op, &d);
                assert_eq!(requests, clean_requests(op, true) + retries, "{what}");
                println!("s3 transient {what}: {requests} requests, {took:?}");

                // Persistent: 3 attempts per GET (2 retries), then a typed error.
                let (out, requests, took) =
                    s3_case(&endpoint, &bucket, &key, Script::always(n.fault), op).await;
                let e = out.map(|_| ()).unwrap_err();
                let text = e.to_string();
                assert!(!misnamed(&text), "{what}: {text}");
                assert!(e.is_retryable(), "{what}: {text}");
                match n.fault {
                    Fault::Stall | Fault::Drip(_) => {
                        assert!(
                            matches!(&e, Error::Timeout(t) if t.limit == TimeoutKind::Client),
                            "{what}: {text}"
                        );
                    }
                    _ => assert!(matches!(&e, Error::Remote { .. }), "{what}: {text}"),
                }
                println!("s3 persistent {what}: {requests} requests, {took:?}: {text}");
                let per_get = u64::from(ATTEMPTS);
                // A status failure (500, 503) is followed by one HEAD (with its own three
                // attempts) that tells a range past the end from other errors; a transport
                // failure is not. A batched read stops at its first failed GET.
                let heads = matches!(n.fault, Fault::Status { .. }).then_some(per_get);
                let gets = clean_requests(op, true) * per_get;
                let most = gets + heads.unwrap_or(0) * clean_requests(op, true);
                assert!(
                    requests >= per_get + heads.unwrap_or(0) && requests <= most,
                    "{what}: {requests} requests"
                );
                if op != Op::Ranges {
                    assert_eq!(requests, per_get + heads.unwrap_or(0), "{what}");
                }
            }
        }
    }
}
