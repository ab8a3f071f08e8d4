//! Unit tests of the credentials bridge: region precedence, the expiry-aware cache, redaction.

use std::sync::atomic::{AtomicUsize, Ordering};

use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::future;

use super::*;

fn inputs(
    options: Option<&str>,
    profile: Option<&str>,
    named: bool,
    env: Option<&str>,
) -> RegionInputs {
    RegionInputs {
        options: options.map(Into::into),
        profile: profile.map(Into::into),
        profile_named: named,
        environment: env.map(Into::into),
    }
}

fn picked(i: RegionInputs) -> Option<(String, RegionSource)> {
    i.pick().map(|r| (r.region, r.source))
}

#[test]
fn region_precedence() {
    let r = |s: &str, src| Some((s.to_owned(), src));
    // Options beat everything.
    assert_eq!(
        picked(inputs(
            Some("ap-south-1"),
            Some("eu-west-1"),
            true,
            Some("us-west-2")
        )),
        r("ap-south-1", RegionSource::Options)
    );
    // A named profile beats the environment.
    assert_eq!(
        picked(inputs(None, Some("eu-west-1"), true, Some("us-west-2"))),
        r("eu-west-1", RegionSource::NamedProfile)
    );
    // The environment beats the ambient profile (as in the AWS CLI).
    assert_eq!(
        picked(inputs(None, Some("eu-west-1"), false, Some("us-west-2"))),
        r("us-west-2", RegionSource::Environment)
    );
    // The ambient profile beats the fallback: never us-east-1 when a profile names a region.
    assert_eq!(
        picked(inputs(None, Some("eu-west-1"), false, None)),
        r("eu-west-1", RegionSource::AmbientProfile)
    );
    // A named profile without a region falls through to the environment.
    assert_eq!(
        picked(inputs(None, None, true, Some("us-west-2"))),
        r("us-west-2", RegionSource::Environment)
    );
    // Empty values are unset; nothing set is None (object_store's default applies).
    assert_eq!(
        picked(inputs(Some(" "), Some(""), true, Some("ca-central-1"))),
        r("ca-central-1", RegionSource::Environment)
    );
    assert_eq!(picked(inputs(None, None, false, None)), None);
}

#[derive(Debug)]
struct Counting {
    calls: Arc<AtomicUsize>,
    expiry: Option<SystemTime>,
    fail: bool,
}

impl ProvideCredentials for Counting {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return future::ProvideCredentials::ready(Err(CredentialsError::not_loaded(
                "no profile here",
            )));
        }
        future::ProvideCredentials::ready(Ok(Credentials::new(
            format!("AKIDTEST{n}"),
            "SECRETVALUE",
            Some("SESSIONTOKEN".into()),
            self.expiry,
            "test",
        )))
    }
}

fn counting(expiry: Option<SystemTime>, fail: bool) -> (AwsChainCredentials, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let provider = Counting {
        calls: Arc::clone(&calls),
        expiry,
        fail,
    };
    (
        AwsChainCredentials::from_provider("test provider", provider),
        calls,
    )
}

#[tokio::test]
async fn credentials_are_cached_until_close_to_expiry() {
    let in_an_hour = SystemTime::now() + Duration::from_secs(3600);
    let (creds, calls) = counting(Some(in_an_hour), false);
    let a = creds.get_credential().await.unwrap();
    let b = creds.get_credential().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.key_id, "AKIDTEST0");
    assert_eq!(a.token.as_deref(), Some("SESSIONTOKEN"));

    // Never-expiring credentials are fetched once too.
    let (creds, calls) = counting(None, false);
    creds.get_credential().await.unwrap();
    creds.get_credential().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn credentials_inside_the_refresh_window_are_refetched() {
    let soon = SystemTime::now() + REFRESH_BEFORE_EXPIRY / 2;
    let (creds, calls) = counting(Some(soon), false);
    let a = creds.get_credential().await.unwrap();
    let b = creds.get_credential().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        (a.key_id.as_str(), b.key_id.as_str()),
        ("AKIDTEST0", "AKIDTEST1")
    );
}

#[tokio::test]
async fn debug_never_shows_secrets() {
    let (creds, _) = counting(None, false);
    creds.get_credential().await.unwrap();
    let shown = format!("{creds:?}");
    assert!(shown.contains("test provider"), "{shown}");
    for secret in ["AKIDTEST", "SECRETVALUE", "SESSIONTOKEN"] {
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[tokio::test]
async fn provider_failures_name_the_source() {
    let (creds, calls) = counting(None, true);
    let err = creds.get_credential().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(
        err,
        object_store::Error::Generic { store: "S3", .. }
    ));
    assert!(
        text.contains("test provider") && text.contains("no profile here"),
        "{text}"
    );
    // Failures are not cached: the next request asks again.
    creds.get_credential().await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn complete_now_polls_once() {
    assert_eq!(complete_now(async { 7 }), Some(7));
    assert_eq!(complete_now(std::future::pending::<u8>()), None);
}
