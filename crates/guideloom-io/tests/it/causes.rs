//! `cause_of`, `request_of` and `brief` on real error chains: object_store's errors built
//! from moto's responses (a missing bucket, a missing key) and from a closed port, and the
//! HTTP backend's from a closed port; `Error::Remote` of `ObjectStoreIo` leads with the cause
//! and names the object by its store label. These hold the module's reading of
//! object_store's text to the version in use.
#![cfg(feature = "s3")]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use guideloom_io::objstore::ObjectStoreIo;
use guideloom_io::{AsyncReader, CauseKind, Error, Location, brief, cause_of, request_of};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, RetryConfig};
use support::servers::unique;

fn store(endpoint: &str, bucket: &str, max_retries: usize) -> Arc<dyn ObjectStore> {
    guideloom_io::tls::install_crypto_provider();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .with_retry(RetryConfig {
            max_retries,
            retry_timeout: Duration::from_secs(10),
            backoff: object_store::BackoffConfig {
                init_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(5),
                base: 2.0,
            },
        })
        .build()
        .unwrap();
    Arc::new(store)
}

/// A port on 127.0.0.1 where nothing listens (bound, then let go).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[track_caller]
fn short(text: &str) {
    assert!(!text.contains('<') && !text.contains('\n'), "{text}");
    assert!(text.len() < 300, "{} characters: {text}", text.len());
}

#[tokio::test]
async fn a_missing_bucket_on_moto() {
    let Some((endpoint, _)) = support::servers::s3("a_missing_bucket_on_moto") else {
        return;
    };
    let bucket = unique("no-such-bucket");
    let s = store(&endpoint, &bucket, 0);
    let key = Path::from("x/dataset.json");
    let get = s.get(&key).await.unwrap_err();
    assert!(
        matches!(get, object_store::Error::NotFound { .. }),
        "object_store calls it NotFound: {get}"
    );
    let list = s
        .list_with_delimiter(Some(&Path::from("x")))
        .await
        .unwrap_err();
    for e in [&get, &list] {
        let cause = cause_of(e).unwrap();
        assert_eq!(cause.kind, CauseKind::BucketNotFound, "{e}");
        assert_eq!(cause.code.as_deref(), Some("NoSuchBucket"));
        assert_eq!(cause.to_string(), "bucket does not exist (NoSuchBucket)");
        let request = request_of(e).unwrap();
        assert_eq!(request.method, "GET");
        assert!(
            request.url.starts_with(&format!("{endpoint}/{bucket}")),
            "{request}"
        );
        assert_eq!(request.status, Some((404, "Not Found".to_owned())));
        assert_eq!(request.retries, 0);
        assert_eq!(brief(e), request.to_string());
        short(&brief(e));
    }

    // Through ObjectStoreIo: a Remote error (not NotFound: every key of the bucket fails
    // alike), cause first, the object by its label, short.
    let io = ObjectStoreIo::new(s).with_label(format!("s3://{bucket}"));
    let e = io.open_reader(&key).read(0, 10).await.unwrap_err();
    assert!(matches!(e, Error::Remote { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "bucket does not exist (NoSuchBucket): s3://{bucket}/x/dataset.json: "
        )),
        "{text}"
    );
    assert!(!text.contains("AmazonS3("), "{text}");
    short(&text);
}

#[tokio::test]
async fn a_missing_key_on_moto_has_no_cause() {
    let Some((endpoint, bucket)) = support::servers::s3("a_missing_key_on_moto_has_no_cause")
    else {
        return;
    };
    let s = store(&endpoint, &bucket, 0);
    let key = Location::child(&Path::from(unique("causes")), "absent.bin");
    let e = s.get(&key).await.unwrap_err();
    assert_eq!(cause_of(&e), None, "a missing object is an answer: {e}");
    assert_eq!(
        request_of(&e).unwrap().status,
        Some((404, "Not Found".to_owned()))
    );
    let e = ObjectStoreIo::new(s)
        .open_reader(&key)
        .read(0, 1)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
}

#[tokio::test]
async fn a_closed_port_through_object_store() {
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    let s = store(&endpoint, "bkt", 1);
    let e = s.get(&Path::from("k")).await.unwrap_err();
    let cause = cause_of(&e).unwrap();
    assert_eq!(cause.kind, CauseKind::ConnectionRefused, "{e}");
    assert_eq!(cause.to_string(), "connection refused");
    let request = request_of(&e).unwrap();
    assert_eq!(request.url, format!("{endpoint}/bkt/k"));
    assert_eq!((request.status, request.retries), (None, 1));
    assert!(request.elapsed.is_some());
    let text = brief(&e);
    assert!(
        text.starts_with(&format!("GET {endpoint}/bkt/k, after 1 retry in ")),
        "{text}"
    );
    let e = ObjectStoreIo::new(s)
        .with_label("s3://bkt")
        .open_reader(&Path::from("k"))
        .read(0, 1)
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("connection refused: s3://bkt/k: "),
        "{text}"
    );
    short(&text);
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_closed_port_through_the_http_backend() {
    use guideloom_io::http::{HttpIo, HttpOptions, HttpPath};
    let base = format!("http://127.0.0.1:{}/data/", closed_port());
    let options = HttpOptions::default().with_retry(guideloom_io::RetryPolicy::new(
        1,
        Duration::from_millis(1),
        Duration::from_millis(5),
    ));
    let io = HttpIo::with_options(&base, options).unwrap();
    let e = io
        .open_reader(&HttpPath::new("k").unwrap())
        .unwrap()
        .read(0, 1)
        .await
        .unwrap_err();
    assert_eq!(
        cause_of(&e).unwrap().kind,
        CauseKind::ConnectionRefused,
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with(&format!("connection refused: {base}k: ")),
        "{e}"
    );
}
