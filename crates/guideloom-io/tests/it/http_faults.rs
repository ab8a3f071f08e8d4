//! `HttpIo` against a misbehaving origin of our own on loopback: every fault gives the
//! documented error or a successful retry, with the request counts to prove it.
#![cfg(feature = "http")]
// Test data are small; indexing them with u64 offsets cannot truncate.
#![allow(clippy::cast_possible_truncation)]

use crate::support;

use std::time::Duration;

use guideloom_io::RetryPolicy;
use guideloom_io::http::{HttpIo, HttpOptions, HttpPath};
use guideloom_io::{AsyncReader, Backend, Error, Location, TimeoutKind};
use support::origin::{Mode, Origin};

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

fn fast_options() -> HttpOptions {
    HttpOptions::default()
        .with_retry(RetryPolicy::new(
            4,
            Duration::from_millis(1),
            Duration::from_millis(20),
        ))
        .with_request_timeout(Duration::from_secs(10))
}

fn obj() -> HttpPath {
    HttpPath::new("obj.bin").unwrap()
}

async fn setup(mode: Mode, n: usize) -> (Origin, HttpIo, Vec<u8>) {
    let d = data(n);
    let origin = Origin::start(d.clone(), mode).await;
    let io = HttpIo::with_options(&origin.base(), fast_options()).unwrap();
    (origin, io, d)
}

#[tokio::test]
async fn honest_origin_one_request_per_operation() {
    let (origin, io, d) = setup(Mode::Honest, 100_000).await;
    let r = io.open_reader(&obj()).unwrap();
    assert_eq!(origin.requests(), 0, "open is lazy");

    let tail = r.read_tail(1000).await.unwrap();
    assert_eq!(tail.size, 100_000);
    assert_eq!(&tail.bytes[..], &d[99_000..]);
    assert_eq!(r.stats().snapshot().requests, 1);

    assert_eq!(
        r.size().await.unwrap(),
        100_000,
        "size learnt from Content-Range"
    );
    assert_eq!(r.stats().snapshot().requests, 1);

    let b = r.read(10, 20).await.unwrap();
    assert_eq!(&b[..], &d[10..30]);
    assert_eq!(r.stats().snapshot().requests, 2);
    assert_eq!(r.read(5, 0).await.unwrap().len(), 0);
    assert_eq!(
        r.stats().snapshot().requests,
        2,
        "zero-length read makes no request"
    );

    // Known size: out-of-range is answered locally.
    assert!(matches!(
        r.read(99_990, 20).await,
        Err(Error::OutOfRange { size: 100_000, .. })
    ));
    assert_eq!(origin.requests(), 2);
    assert_eq!(io.stats().snapshot().requests, 2);
    assert_eq!(io.stats().snapshot().bytes_received, 1020);

    // Keep-alive: a second reader of the same backend reuses the pooled connection.
    let r2 = io.open_reader(&obj()).unwrap();
    for i in 0..10 {
        assert_eq!(
            &r2.read(i * 100, 10).await.unwrap()[..],
            &d[i as usize * 100..i as usize * 100 + 10]
        );
    }
    // One pooled connection (a second only if the pool check-in loses a race).
    assert!(
        origin.connections() <= 2,
        "{} connections for 12 sequential requests",
        origin.connections()
    );
}

#[tokio::test]
async fn batched_reads_use_one_multipart_request() {
    let (origin, io, d) = setup(Mode::Honest, 1_000_000).await;
    let r = io.open_reader(&obj()).unwrap();
    // Far apart: not merged by coalescing, so one multi-range request.
    let ranges = vec![
        900_000..900_100,
        0..10,
        500_000..500_050,
        5..8,
        700_000..700_000,
    ];
    let got = r.read_ranges(&ranges).await.unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(&b[..], &d[r.start as usize..r.end as usize]);
    }
    assert_eq!(origin.requests(), 1);
    let log = origin.log();
    assert!(
        log[0].contains("bytes=0-9,500000-500049,900000-900099"),
        "{log:?}"
    );
    assert!(io.multi_range_in_use());
}

#[tokio::test]
async fn multipart_cap_splits_requests() {
    let d = data(1_000_000);
    let origin = Origin::start(d.clone(), Mode::Honest).await;
    let io = HttpIo::with_options(
        &origin.base(),
        fast_options()
            .with_max_ranges_per_request(4)
            .with_coalesce(guideloom_io::CoalescePolicy::NEVER),
    )
    .unwrap();
    let r = io.open_reader(&obj()).unwrap();
    let ranges: Vec<_> = (0..10u64).map(|i| i * 1000..i * 1000 + 7).collect();
    let got = r.read_ranges(&ranges).await.unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(&b[..], &d[r.start as usize..r.end as usize]);
    }
    assert_eq!(origin.requests(), 3, "10 ranges, at most 4 per request");
}

#[tokio::test]
async fn reordered_and_merged_multipart_parts_are_mapped() {
    for mode in [Mode::MultipartReordered, Mode::MultipartMerged] {
        let d = data(1_000_000);
        let origin = Origin::start(d.clone(), mode).await;
        // No coalescing on our side, so close ranges go out separately and the origin
        // (in MultipartMerged mode) merges them into one part.
        let io = HttpIo::with_options(
            &origin.base(),
            fast_options().with_coalesce(guideloom_io::CoalescePolicy::NEVER),
        )
        .unwrap();
        let r = io.open_reader(&obj()).unwrap();
        let ranges = vec![0..10, 20..30, 40..140, 50..60];
        let got = r.read_ranges(&ranges).await.unwrap();
        for (r, b) in ranges.iter().zip(&got) {
            assert_eq!(&b[..], &d[r.start as usize..r.end as usize], "{mode:?}");
        }
        assert_eq!(origin.requests(), 1, "{mode:?}");
    }
}

#[tokio::test]
async fn oversized_multipart_answer_is_refused() {
    // The origin merges far-apart ranges into one huge part: memory stays bounded, the
    // answer is refused rather than buffered.
    let (origin, io, _) = setup(Mode::MultipartMerged, 1_000_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let e = r
        .read_ranges(&[0..10, 300_000..300_010, 600_000..600_100])
        .await
        .unwrap_err();
    // Not a short read: a long one, with the multipart budget as the size asked for.
    assert!(
        matches!(
            &e,
            Error::LongRead {
                offset: 0,
                got: Some(_),
                ..
            }
        ),
        "{e}"
    );
    assert!(!e.to_string().contains("short"), "{e}");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn single_part_answer_to_multi_range_falls_back() {
    let (origin, io, d) = setup(Mode::SingleForMulti, 1_000_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let ranges = vec![0..10, 300_000..300_010, 600_000..600_100];
    let got = r.read_ranges(&ranges).await.unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(&b[..], &d[r.start as usize..r.end as usize]);
    }
    // 1 multi-range answered for the first range only, then 2 single-range requests.
    assert_eq!(origin.requests(), 3);
    assert!(!io.multi_range_in_use(), "later batches skip multi-range");
    let got = r.read_ranges(&ranges).await.unwrap();
    assert_eq!(&got[2][..], &d[600_000..600_100]);
    assert_eq!(origin.requests(), 6);
}

#[tokio::test]
async fn single_part_covering_every_range_is_used() {
    let d = data(1_000_000);
    let origin = Origin::start(d.clone(), Mode::SingleCoveringAll).await;
    let io = HttpIo::with_options(
        &origin.base(),
        fast_options().with_coalesce(guideloom_io::CoalescePolicy::NEVER),
    )
    .unwrap();
    let r = io.open_reader(&obj()).unwrap();
    let ranges = vec![0..10, 1000..1010, 2000..2100];
    let got = r.read_ranges(&ranges).await.unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(&b[..], &d[r.start as usize..r.end as usize]);
    }
    assert_eq!(origin.requests(), 1);
    assert!(io.multi_range_in_use(), "a covering answer is fine");
}

#[tokio::test]
async fn ignored_range_is_an_error() {
    let (origin, io, d) = setup(Mode::IgnoreRange, 10_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let e = r.read(0, 100).await.unwrap_err();
    assert!(
        matches!(&e, Error::Remote { message, retryable: false, .. } if message.contains("ignored the Range header")),
        "{e}"
    );
    assert_eq!(origin.requests(), 1, "not retried");
    // A tail read asking for more than the object: the whole body is the tail (documented).
    let t = r.read_tail(20_000).await.unwrap();
    assert_eq!((t.size, &t.bytes[..]), (10_000, &d[..]));
    // A tail smaller than the object with a 200: the origin ignored Range.
    let r2 = io.open_reader(&obj()).unwrap();
    assert!(r2.read_tail(100).await.is_err());
    // Batched reads too.
    let e = r2.read_ranges(&[0..10, 5000..5010]).await.unwrap_err();
    assert!(e.to_string().contains("ignored the Range header"), "{e}");
}

#[tokio::test]
async fn truncated_body_is_a_short_read() {
    let (_origin, io, _) = setup(Mode::Truncate, 10_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let e = r.read(100, 1000).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShortRead {
                offset: 100,
                requested: 1000,
                got: 500,
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn status_416_is_out_of_range() {
    let (_origin, io, _) = setup(Mode::Always416, 10_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let e = r.read(20_000, 10).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                offset: 20_000,
                len: 10,
                size: 10_000,
                ..
            }
        ),
        "{e}"
    );
    // Honest origin: past-the-end request on an unknown size.
    let (_o2, io2, _) = setup(Mode::Honest, 10_000).await;
    let r2 = io2.open_reader(&obj()).unwrap();
    assert!(matches!(
        r2.read(10_000, 1).await,
        Err(Error::OutOfRange { size: 10_000, .. })
    ));
    // Overlapping the end: the origin clips, Content-Range reveals the size.
    let r3 = io2.open_reader(&obj()).unwrap();
    assert!(matches!(
        r3.read(9_990, 20).await,
        Err(Error::OutOfRange { size: 10_000, .. })
    ));
}

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let (origin, io, d) = setup(Mode::FailThen(2, 500), 10_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let b = r.read(10, 10).await.unwrap();
    assert_eq!(&b[..], &d[10..20]);
    assert_eq!(origin.requests(), 3);
    assert_eq!(r.stats().snapshot().requests, 3, "every attempt is counted");
    let (origin, io, _) = setup(Mode::FailThen(1, 429), 10_000).await;
    io.open_reader(&obj()).unwrap().size().await.unwrap();
    assert_eq!(origin.requests(), 2, "429 is retried");
}

#[tokio::test]
async fn persistent_errors_report_attempts() {
    let (origin, io, _) = setup(Mode::FailThen(usize::MAX, 503), 10_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let e = r.read(0, 10).await.unwrap_err();
    assert!(
        matches!(&e, Error::Remote { message, retryable: true, .. } if message.contains("503") && message.contains("after 4 attempts")),
        "{e}"
    );
    assert_eq!(origin.requests(), 4);
    // 4xx other than 429 is not retried.
    let (origin, io, _) = setup(Mode::FailThen(usize::MAX, 403), 10_000).await;
    let e = io
        .open_reader(&obj())
        .unwrap()
        .read(0, 10)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("403"), "{e}");
    assert!(!e.is_retryable());
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn not_found_is_not_found_and_not_retried() {
    let (origin, io, _) = setup(Mode::Honest, 100).await;
    let r = io
        .open_async(&HttpPath::new("missing.bin").unwrap())
        .await
        .unwrap();
    assert!(r.size().await.unwrap_err().is_not_found());
    assert!(r.read(0, 1).await.unwrap_err().is_not_found());
    assert!(r.read_tail(10).await.unwrap_err().is_not_found());
    assert_eq!(origin.requests(), 3);
    // A 404 (with its small error page) does not cost the pooled connection.
    assert!(
        origin.connections() < 3,
        "404 answers should keep the connection: {} connections",
        origin.connections()
    );
}

#[tokio::test]
async fn dropped_connection_mid_body_is_retried() {
    let (origin, io, d) = setup(Mode::DropMidBody(2), 100_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let b = r.read(1000, 50_000).await.unwrap();
    assert_eq!(&b[..], &d[1000..51_000]);
    assert_eq!(origin.requests(), 3);

    let (origin, io, _) = setup(Mode::DropMidBody(usize::MAX), 100_000).await;
    let e = io
        .open_reader(&obj())
        .unwrap()
        .read(0, 50_000)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Remote { message, retryable: true, .. } if message.contains("after 4 attempts")),
        "{e}"
    );
    assert_eq!(origin.requests(), 4);
}

#[tokio::test]
async fn lying_content_length_is_an_error() {
    let (origin, io, _) = setup(Mode::LongContentLength, 10_000).await;
    let r = io.open_reader(&obj()).unwrap();
    let e = r.read(0, 100).await.unwrap_err();
    // Content-Length 200 for a 100-byte range: refused before reading, never retried, and
    // called what it is (not a short read).
    assert!(
        matches!(
            &e,
            Error::LongRead {
                offset: 0,
                requested: 100,
                got: Some(200),
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("sent 200 bytes for a range of 100 bytes at offset 0"),
        "{e}"
    );
    assert!(!e.is_retryable());
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn redirects_are_not_followed_and_secrets_not_shown() {
    let (origin, io, _) = setup(Mode::RedirectElsewhere, 100).await;
    let e = io
        .open_reader(&obj())
        .unwrap()
        .read(0, 10)
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("302") && msg.contains("not followed"), "{msg}");
    assert!(
        msg.contains("other-host.invalid") && !msg.contains("SECRET"),
        "{msg}"
    );
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn credentials_are_sent_but_never_displayed() {
    let origin = Origin::start(data(100), Mode::FailThen(usize::MAX, 500)).await;
    let base = format!("http://user:hunter2@{}/?sig=TOPSECRET", origin.addr);
    let io = HttpIo::with_options(&base, fast_options().with_retry(RetryPolicy::none())).unwrap();
    let e = io
        .open_reader(&obj())
        .unwrap()
        .read(0, 10)
        .await
        .unwrap_err();
    let shown = format!("{e} {e:?} {io:?} {}", io.base_url());
    assert!(
        !shown.contains("hunter2") && !shown.contains("TOPSECRET"),
        "{shown}"
    );
    let log = origin.log();
    // "user:hunter2" in base64, and the query string reaches the origin.
    assert!(log[0].contains("Basic dXNlcjpodW50ZXIy"), "{log:?}");
    assert!(log[0].contains("/obj.bin?sig=TOPSECRET"), "{log:?}");
}

#[tokio::test]
async fn stalled_origin_times_out_with_attempt_count() {
    let origin = Origin::start(data(100), Mode::Stall).await;
    let io = HttpIo::with_options(
        &origin.base(),
        fast_options()
            .with_request_timeout(Duration::from_millis(200))
            .with_retry(RetryPolicy::new(
                2,
                Duration::from_millis(1),
                Duration::from_millis(5),
            )),
    )
    .unwrap();
    let e = io
        .open_reader(&obj())
        .unwrap()
        .read(0, 10)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Timeout(t) if t.attempts == Some(2)
                && t.limit == TimeoutKind::Request(Duration::from_millis(200))
                && t.source.is_none()
        ),
        "{e}"
    );
    assert!(e.is_retryable() && e.to_string().starts_with("timed out: GET bytes=0-9 "));
    let stats = io.stats().snapshot();
    assert_eq!((stats.requests, stats.retries), (2, 1));
}

#[tokio::test]
async fn operation_deadline_cuts_an_attempt_short() {
    // Each attempt may take 10 s, but the read as a whole only 300 ms: one attempt, cut off
    // by the deadline, and no retry after it.
    let origin = Origin::start(data(100), Mode::Stall).await;
    let io = HttpIo::with_options(
        &origin.base(),
        fast_options().with_operation_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let r = io.open_reader(&obj()).unwrap();
    for e in [
        r.read(0, 10).await.unwrap_err(),
        r.read_tail(10).await.map(|_| ()).unwrap_err(),
        r.read_ranges(&[0..1, 50..60])
            .await
            .map(|_| ())
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                &e,
                Error::Timeout(t) if t.attempts == Some(1)
                    && t.limit == TimeoutKind::Deadline(Duration::from_millis(300))
            ),
            "{e}"
        );
    }
    let stats = io.stats().snapshot();
    assert_eq!((stats.requests, stats.retries), (3, 0));
}

#[tokio::test]
async fn head_without_content_length_is_an_error() {
    let (_origin, io, _) = setup(Mode::HeadNoLength, 100).await;
    let e = io.open_reader(&obj()).unwrap().size().await.unwrap_err();
    assert!(e.to_string().contains("Content-Length"), "{e}");
}

#[tokio::test]
async fn empty_object_tail_and_reads() {
    let (_origin, io, _) = setup(Mode::Honest, 100).await;
    let r = io
        .open_reader(&HttpPath::new("empty.bin").unwrap())
        .unwrap();
    let t = r.read_tail(64).await.unwrap();
    assert_eq!((t.size, t.bytes.len()), (0, 0));
    assert_eq!(r.read(0, 0).await.unwrap().len(), 0);
    assert!(matches!(r.read(0, 1).await, Err(Error::OutOfRange { .. })));
}

#[tokio::test]
async fn closed_reader_and_sync_open() {
    let (_origin, io, _) = setup(Mode::Honest, 100).await;
    let r = io.open_reader(&obj()).unwrap();
    r.close().await.unwrap();
    r.close().await.unwrap();
    assert!(matches!(r.read(0, 1).await, Err(Error::Closed { .. })));
    assert!(matches!(
        io.open(&obj()),
        Err(Error::Unsupported {
            backend: "HttpIo",
            ..
        })
    ));
    let bad = HttpPath::root().child("../x");
    assert!(matches!(
        io.open_async(&bad).await,
        Err(Error::InvalidArgument { .. })
    ));
    assert!(HttpIo::new("http://127.0.0.1/no-slash").is_err());
}

/// The conformance kit, async and sync (through `BlockingIo`), on an honest loopback origin.
#[cfg(all(feature = "conformance", feature = "blocking"))]
#[test]
fn conformance_kit_on_loopback_origin() {
    use guideloom_io::blocking::BlockingIo;
    use guideloom_io::conformance::{ConformanceOptions, Fixture, run_all_with};

    struct OriginFixture<'a>(&'a Origin);

    #[async_trait::async_trait]
    impl Fixture for OriginFixture<'_> {
        type Location = HttpPath;
        async fn create(
            &self,
            name: &str,
            bytes: &[u8],
        ) -> Result<HttpPath, guideloom_io::BoxError> {
            self.0.put(name, bytes);
            Ok(HttpPath::new(name)?)
        }
        fn missing(&self) -> HttpPath {
            HttpPath::new("never-created.bin").unwrap()
        }
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    let origin = rt.block_on(Origin::start(Vec::new(), Mode::Honest));
    let fixture = OriginFixture(&origin);
    let mut options = ConformanceOptions::default();
    options.iterations = 100;

    // Async only: the sync flavour is refused with Unsupported, as the capabilities say.
    let http = HttpIo::with_options(&origin.base(), fast_options()).unwrap();
    let report = run_all_with(&http, &fixture, &options).unwrap();
    assert_eq!(report.skipped.len(), 1, "{report}");

    // Both flavours through the blocking adapter.
    let io =
        BlockingIo::new(HttpIo::with_options(&origin.base(), fast_options()).unwrap()).unwrap();
    let report = run_all_with(&io, &fixture, &options).unwrap();
    assert!(report.skipped.is_empty(), "{report}");
    println!("{report}; {:?}", io.inner().stats().snapshot());
}

#[tokio::test]
async fn https_to_a_plain_http_port_fails_cleanly() {
    // The TLS client (rustls, ring) is wired in: a handshake with a plain-HTTP server fails
    // with a remote error naming TLS, never a panic or a hang.
    let origin = Origin::start(data(100), Mode::Honest).await;
    let io = HttpIo::with_options(
        &format!("https://{}/", origin.addr),
        fast_options().with_retry(RetryPolicy::none()),
    )
    .unwrap();
    let e = io
        .open_reader(&obj())
        .unwrap()
        .read(0, 10)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Remote { message, .. }
            if message.to_lowercase().contains("tls") && message.contains("after 1 attempt")),
        "{e}"
    );
}

#[test]
fn public_types_are_send_sync_debug() {
    fn check<T: Send + Sync + std::fmt::Debug + 'static>() {}
    check::<HttpIo>();
    check::<guideloom_io::http::HttpReader>();
    check::<HttpOptions>();
    check::<HttpPath>();
    check::<RetryPolicy>();
    #[cfg(feature = "blocking")]
    {
        check::<guideloom_io::blocking::BlockingIo<HttpIo>>();
        check::<guideloom_io::blocking::BlockingReader>();
    }
    // A type-erased backend satisfies a generic bound.
    fn generic<B: Backend<Location = HttpPath>>(b: &B) -> &'static str {
        b.name()
    }
    let io: guideloom_io::DynBackend<HttpPath> =
        std::sync::Arc::new(HttpIo::new("http://127.0.0.1:1/").unwrap());
    assert_eq!(generic(&io), "HttpIo");
}
