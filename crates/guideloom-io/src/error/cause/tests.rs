//! Chains built by hand; `tests/it/causes.rs` holds the causes to real responses (moto, a
//! closed port) through object_store and the HTTP backend.

use super::*;

#[derive(Debug)]
struct Wrap(String, Option<Box<dyn StdError + Send + Sync>>);

fn wrap(text: &str, source: Option<Box<dyn StdError + Send + Sync>>) -> Wrap {
    Wrap(text.to_owned(), source)
}

impl fmt::Display for Wrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for Wrap {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.1.as_deref().map(|e| e as &(dyn StdError + 'static))
    }
}

/// object_store's request error as it displays itself: `Error performing ... - <inner>`.
fn retry_error(head: &str, inner: &str) -> Wrap {
    wrap(
        &format!("Error performing {head} - {inner}"),
        Some(Box::new(wrap(inner, None))),
    )
}

#[cfg(feature = "object-store")]
#[test]
fn codes_of_error_documents() {
    let body = "404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>\
                <Message>The specified bucket does not exist</Message></Error>";
    assert_eq!(element(body, "Code"), Some("NoSuchBucket"));
    assert!(!plausible_code(""));
    assert!(!plausible_code("a b"));
    assert_eq!(element("no document", "Code"), None);
    let cause = Cause::of_code("NoSuchBucket", Some("The specified bucket does not exist"));
    assert_eq!(cause.kind, CauseKind::BucketNotFound);
    assert_eq!(cause.to_string(), "bucket does not exist (NoSuchBucket)");
    assert_eq!(
        Cause::of_code("SignatureDoesNotMatch", None).kind,
        CauseKind::BadCredentials
    );
    assert_eq!(
        Cause::of_code("Whatever", Some("the server's words")).to_string(),
        "request refused (Whatever: the server's words)"
    );
    assert_eq!(bounded("a\nb", 10), "a b");
    assert_eq!(bounded("abcdef", 3), "abc…");
}

#[test]
fn names_are_mentioned_whole() {
    let text = "corrupt shard /tmp/r/shards/w/00000000.glm: footer checksum mismatch";
    assert!(mentions(text, "shards/w/00000000.glm"));
    assert!(mentions(text, "/tmp/r"));
    assert!(mentions(text, "r"), "a path component");
    assert!(!mentions(text, "shards/w/0000"), "inside a longer name");
    assert!(!mentions(text, "w/00000000.gl"));
    assert!(!mentions(text, ""));
    assert!(mentions("http://h/x/dataset.json: refused", "http://h/x/"));
    assert!(!mentions("bad s3://b/xy/k", "s3://b/x"));
}

#[test]
fn os_errors_deep_in_a_chain() {
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    let chain = wrap(
        "client error",
        Some(Box::new(wrap("connect", Some(Box::new(refused))))),
    );
    let cause = cause_of(&chain).unwrap();
    assert_eq!(cause.kind, CauseKind::ConnectionRefused);
    assert_eq!(cause.to_string(), "connection refused");
    assert_eq!(cause_of(&wrap("nothing said", None)), None);
}

#[test]
fn requests_read_from_object_stores_text() {
    let e = retry_error(
        "GET http://h:9/b/k in 56.584167ms",
        "Server returned non-2xx status code: 404 Not Found: <?xml?><Error>...</Error>",
    );
    let r = request_of(&e).unwrap();
    assert_eq!(
        (r.method.as_str(), r.url.as_str()),
        ("GET", "http://h:9/b/k")
    );
    assert_eq!(r.status, Some((404, "Not Found".to_owned())));
    assert_eq!(r.retries, 0);
    assert_eq!(r.elapsed, Some(Duration::from_nanos(56_584_167)));
    assert_eq!(r.to_string(), "GET http://h:9/b/k: 404 Not Found");
    assert_eq!(brief(&e), "GET http://h:9/b/k: 404 Not Found");
    // Retries, a transport failure, and a wrapper above (object_store's list error).
    let e = retry_error(
        "PUT http://h:9/b/k in 1.075814126s, after 4 retries, max_retries: 4, \
         retry_timeout: 60s ",
        "HTTP error: error sending request",
    );
    let list = wrap(
        &format!("Error performing list request: {e}"),
        Some(Box::new(e)),
    );
    let r = request_of(&list).unwrap();
    assert_eq!((r.method.as_str(), r.status.as_ref()), ("PUT", None));
    assert_eq!(
        r.to_string(),
        "PUT http://h:9/b/k, after 4 retries in 1.1 s"
    );
    // Text of another shape is no request; its brief drops a response document.
    let other = wrap("Error performing magic - xyz", None);
    assert_eq!(request_of(&other), None);
    let raw = wrap(
        "Generic error: 400 Bad Request: <?xml version=\"1.0\"?><Error/>",
        None,
    );
    assert_eq!(brief(&raw), "Generic error: 400 Bad Request");
    assert_eq!(
        debug_duration("473.016µs"),
        Some(Duration::from_nanos(473_016))
    );
    assert_eq!(debug_duration("2x"), None);
}

#[cfg(feature = "object-store")]
#[test]
fn object_store_errors() {
    let e = object_store::Error::Generic {
        store: "S3",
        source: Box::new(retry_error(
            "GET http://h/b?list-type=2 in 3ms",
            "Server returned non-2xx status code: 404 Not Found: <Error><Code>NoSuchBucket\
             </Code></Error>",
        )),
    };
    assert_eq!(cause_of(&e).unwrap().kind, CauseKind::BucketNotFound);
    let e = object_store::Error::PermissionDenied {
        path: "k".into(),
        source: Box::new(wrap("403 Forbidden", None)),
    };
    assert_eq!(cause_of(&e).unwrap().kind, CauseKind::AccessDenied);
    let e = object_store::Error::NotFound {
        path: "k".into(),
        source: Box::new(wrap("404", None)),
    };
    assert_eq!(
        cause_of(&e),
        None,
        "a missing key is not a cause of failure"
    );
    // No document: the status says it.
    let e = object_store::Error::Generic {
        store: "S3",
        source: Box::new(retry_error(
            "GET http://h/b/k in 3ms",
            "Server returned non-2xx status code: 503 Service Unavailable: ",
        )),
    };
    assert_eq!(cause_of(&e).unwrap().kind, CauseKind::Throttled);
}
