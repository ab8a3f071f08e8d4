//! object_store's environment conventions for `s3://` stores, read in one place: the CLI's
//! options and every S3 store built here (the Python package's included) complete their
//! options from the same [`S3Environment`].

use super::S3Options;
use crate::error::{Error, Result};
use crate::uri::redact_userinfo;

/// The endpoint variables, most specific first (object_store's `AWS_ENDPOINT_URL_S3` wins
/// over `AWS_ENDPOINT_URL` / `AWS_ENDPOINT`).
pub const ENDPOINT_VARIABLES: [&str; 3] =
    ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"];

/// The region variables, in order.
pub const REGION_VARIABLES: [&str; 2] = ["AWS_REGION", "AWS_DEFAULT_REGION"];

/// The variable that allows plain-HTTP endpoints (object_store's `AWS_ALLOW_HTTP`).
pub const ALLOW_HTTP_VARIABLE: &str = "AWS_ALLOW_HTTP";

/// The S3 settings of the process environment, by the conventions of object_store's
/// `AmazonS3Builder::from_env` (empty values count as unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Environment {
    /// The endpoint, and the variable it came from ([`ENDPOINT_VARIABLES`], first set wins).
    pub endpoint: Option<(&'static str, String)>,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// `AWS_ALLOW_HTTP` is true by object_store's reading of booleans (`true`, `1`, `yes`,
    /// `on`, `y`, any case).
    pub allow_http: bool,
}

impl S3Environment {
    /// The process environment's settings.
    pub fn read() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings `lookup` (a variable's value by name) gives.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
        S3Environment {
            endpoint: ENDPOINT_VARIABLES
                .iter()
                .find_map(|&name| set(name).map(|v| (name, v))),
            region: REGION_VARIABLES.iter().find_map(|name| set(name)),
            allow_http: set(ALLOW_HTTP_VARIABLE).is_some_and(|v| crate::registry::is_true(&v)),
        }
    }
}

impl S3Options {
    /// These options completed from `env` where they leave the choice to it, as
    /// object_store's `from_env` followed by explicit settings does: the environment's
    /// endpoint when none is set, and plain HTTP allowed when either allows it (the default
    /// `false` cannot be told from an explicit one, so `AWS_ALLOW_HTTP=true` allows it, as
    /// it does for object_store's own builders). The region is left to the credentials
    /// chain, which reads the same variables.
    pub fn with_environment(&self, env: &S3Environment) -> S3Options {
        let mut options = self.clone();
        if options.endpoint.is_none() {
            options.endpoint = env.endpoint.as_ref().map(|(_, url)| url.clone());
        }
        options.allow_http |= env.allow_http;
        options
    }

    /// Refuses a plain `http://` endpoint unless plain HTTP is allowed, before any request,
    /// with an [`Error::InvalidArgument`] naming the endpoint (credentials redacted), where it
    /// came from and the three ways to allow it. Without this check the client would fail
    /// each request with "URL scheme is not allowed".
    pub fn check_plain_http(&self, bucket: &str, env: &S3Environment) -> Result<()> {
        let Some(endpoint) = &self.endpoint else {
            return Ok(());
        };
        let plain = endpoint
            .get(..7)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
        if !plain || self.allow_http {
            return Ok(());
        }
        let origin = match &env.endpoint {
            Some((name, url)) if url == endpoint => format!(" (from {name})"),
            _ => String::new(),
        };
        Err(Error::InvalidArgument {
            what: format!(
                "s3://{bucket}: endpoint {}{origin} is plain HTTP, which is refused unless \
                 allow_http is set: S3Options(allow_http=True) in Python, --s3-allow-http on \
                 the command line, S3Options::allow_http in Rust, or {ALLOW_HTTP_VARIABLE}=true \
                 in the environment",
                redact_userinfo(endpoint)
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> S3Environment {
        S3Environment::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn the_most_specific_endpoint_variable_wins_and_empty_values_are_unset() {
        let e = env(&[
            ("AWS_ENDPOINT", "http://c"),
            ("AWS_ENDPOINT_URL", "http://b"),
            ("AWS_ENDPOINT_URL_S3", ""),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
        ]);
        assert_eq!(
            e.endpoint,
            Some(("AWS_ENDPOINT_URL", "http://b".to_owned()))
        );
        assert_eq!(e.region.as_deref(), Some("eu-west-1"));
        assert!(!e.allow_http);
        assert_eq!(
            S3Environment::from_lookup(|_| None),
            S3Environment::default()
        );
    }

    #[test]
    fn allow_http_reads_object_stores_booleans() {
        for yes in ["true", "TRUE", "1", "yes", "on", "y"] {
            assert!(env(&[("AWS_ALLOW_HTTP", yes)]).allow_http, "{yes}");
        }
        for no in ["false", "0", "no", "off", "", "maybe"] {
            assert!(!env(&[("AWS_ALLOW_HTTP", no)]).allow_http, "{no}");
        }
    }

    #[test]
    fn explicit_options_win_and_the_environment_fills_the_rest() {
        let e = env(&[
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
            ("AWS_ALLOW_HTTP", "true"),
        ]);
        let filled = S3Options::default().with_environment(&e);
        assert_eq!(filled.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert!(filled.allow_http);
        let explicit = S3Options {
            endpoint: Some("https://s3.example".into()),
            ..S3Options::default()
        };
        let kept = explicit.with_environment(&e);
        assert_eq!(kept.endpoint.as_deref(), Some("https://s3.example"));
    }

    #[test]
    fn a_plain_http_endpoint_without_allow_http_is_refused_naming_the_setting() {
        let e = env(&[("AWS_ENDPOINT_URL", "http://u:p@127.0.0.1:9")]);
        let options = S3Options::default().with_environment(&e);
        let err = options.check_plain_http("b", &e).unwrap_err();
        let Error::InvalidArgument { what } = &err else {
            panic!("{err:?}")
        };
        for part in [
            "s3://b",
            "127.0.0.1:9",
            "AWS_ENDPOINT_URL",
            "allow_http",
            "AWS_ALLOW_HTTP=true",
        ] {
            assert!(what.contains(part), "{part}: {what}");
        }
        assert!(!what.contains("u:p") && !what.contains("at AWS"), "{what}");
        // Allowed either way, and https never needs it.
        let allowed = S3Options {
            allow_http: true,
            ..options.clone()
        };
        allowed.check_plain_http("b", &e).unwrap();
        let tls = S3Options {
            endpoint: Some("https://127.0.0.1:9".into()),
            ..S3Options::default()
        };
        tls.check_plain_http("b", &e).unwrap();
        S3Options::default()
            .check_plain_http("b", &S3Environment::default())
            .unwrap();
    }
}
