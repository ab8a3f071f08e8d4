//! Request tracing of `HttpIo`. Alone in its binary: tracing caches per-callsite interest
//! process-wide, so tests running in parallel without a subscriber would disable the
//! callsites this test observes.
#![cfg(feature = "http")]

#[path = "it/support/mod.rs"]
mod support;

use std::time::Duration;

use guideloom_io::AsyncReader;
use guideloom_io::RetryPolicy;
use guideloom_io::http::{HttpIo, HttpOptions, HttpPath};
use support::origin::{Mode, Origin};

/// Every attempt is traced with method, range, attempt, status and latency, and no log line
/// carries the URL's userinfo, its query token or a configured header value.
#[tokio::test(flavor = "current_thread")]
async fn tracing_shows_requests_but_never_credentials() {
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::format::FmtSpan;

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let capture = Capture::default();
    let sink = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let origin = Origin::start(vec![7u8; 1000], Mode::FailThen(1, 503)).await;
    let base = format!("http://alice:hunter2@{}/?sig=TOPSECRET", origin.addr);
    let io = HttpIo::with_options(
        &base,
        HttpOptions::default()
            .with_retry(RetryPolicy::new(
                4,
                Duration::from_millis(1),
                Duration::from_millis(20),
            ))
            .with_header("x-api-key", "KEY-VALUE-42")
            .unwrap(),
    )
    .unwrap();
    let r = io.open_reader(&HttpPath::new("obj.bin").unwrap()).unwrap();
    r.read(10, 20).await.unwrap();

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    for secret in ["hunter2", "TOPSECRET", "KEY-VALUE-42", "YWxpY2U6aHVudGVyMg"] {
        assert!(
            !logs.contains(secret),
            "{secret} leaked into the logs:\n{logs}"
        );
    }
    for expected in [
        "guideloom_http",
        "GET",
        "bytes=10-29",
        "attempt=2",
        "503",
        "206",
        "latency_ms",
    ] {
        assert!(
            logs.contains(expected),
            "{expected} missing from the logs:\n{logs}"
        );
    }
    assert!(logs.contains("?<redacted>"), "{logs}");
    // The origin did get the credentials.
    assert!(
        origin.log()[0].contains("Basic YWxpY2U6aHVudGVyMg=="),
        "{:?}",
        origin.log()
    );
}
