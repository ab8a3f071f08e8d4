//! The one retry policy and the timeouts of every remote store client (`s3://`, `gs://`,
//! `az://` through object_store, `http(s)://` through guideloom-io), set once on
//! [`StoreOptions`] and converted here into each client's own configuration: object_store's
//! flat `RetryConfig` and `ClientOptions`, guideloom-io's `HttpOptions`.

use std::time::Duration;

use guideloom_io::RetryPolicy;

use super::StoreOptions;

/// The retries of an object-store client (`s3://`, `gs://`, `az://`) when
/// [`StoreOptions::retry`] is unset: 5 attempts (4 retries after the first; object_store's own
/// default is 10 retries), waits bounded by 100 ms doubling up to 5 s.
pub const DEFAULT_OBJECT_STORE_RETRY: RetryPolicy =
    RetryPolicy::new(5, Duration::from_millis(100), Duration::from_secs(5));
/// The connect timeout of an object-store client when [`StoreOptions::connect_timeout`] is
/// unset: 5 s (object_store's own default).
pub const DEFAULT_OBJECT_STORE_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The timeout of one attempt of any remote client when [`StoreOptions::request_timeout`] is
/// unset: 30 s (object_store's default, and guideloom-io's `HttpOptions` default).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The deadline of any remote client when [`StoreOptions::retry_timeout`] is unset: 60 s
/// (object_store's default is 3 minutes; guideloom-io's `HttpOptions` default operation
/// timeout).
pub const DEFAULT_RETRY_TIMEOUT: Duration = Duration::from_secs(60);

/// object_store's reading of a boolean variable (`true`, `1`, `yes`, `on`, `y`, any case).
pub(crate) fn is_true(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "on" | "yes" | "y"
    )
}

impl StoreOptions {
    /// The retry policy of object-store clients: [`StoreOptions::retry`], else
    /// [`DEFAULT_OBJECT_STORE_RETRY`].
    pub fn object_store_retry(&self) -> RetryPolicy {
        self.retry.unwrap_or(DEFAULT_OBJECT_STORE_RETRY)
    }

    /// The deadline of remote clients: [`StoreOptions::retry_timeout`], else
    /// [`DEFAULT_RETRY_TIMEOUT`].
    pub fn effective_retry_timeout(&self) -> Duration {
        self.retry_timeout.unwrap_or(DEFAULT_RETRY_TIMEOUT)
    }

    /// object_store's `RetryConfig` for these options (io's one conversion,
    /// [`RetryPolicy::object_store_config`]).
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
    pub(crate) fn object_store_retry_config(&self) -> object_store::RetryConfig {
        self.object_store_retry()
            .object_store_config(self.effective_retry_timeout())
    }

    /// object_store's `ClientOptions` with these timeouts and `allow_http`.
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
    pub(crate) fn object_store_client(&self, allow_http: bool) -> object_store::ClientOptions {
        // Every object-store client is built after this: reqwest then finds ring installed.
        guideloom_io::tls::install_crypto_provider();
        object_store::ClientOptions::new()
            .with_allow_http(allow_http)
            .with_timeout(self.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT))
            .with_connect_timeout(
                self.connect_timeout
                    .unwrap_or(DEFAULT_OBJECT_STORE_CONNECT_TIMEOUT),
            )
    }

    /// guideloom-io's `HttpOptions` of `http(s)://` roots (feature `http`): the retry policy,
    /// the timeouts and the deadline of these options ([`StoreOptions::retry_timeout`] is the
    /// deadline of one read), each unset one at `HttpOptions`' default (4 attempts, 30 s per
    /// attempt, 10 s to connect, 60 s per read).
    #[cfg(feature = "http")]
    pub fn http_options(&self) -> guideloom_io::http::HttpOptions {
        let mut http = guideloom_io::http::HttpOptions::default();
        if let Some(retry) = self.retry {
            http = http.with_retry(retry);
        }
        if let Some(t) = self.request_timeout {
            http = http.with_request_timeout(t);
        }
        if let Some(t) = self.connect_timeout {
            http = http.with_connect_timeout(t);
        }
        if let Some(t) = self.retry_timeout {
            http = http.with_operation_timeout(t);
        }
        http
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "http")]
    #[test]
    fn http_defaults_are_the_io_layers_and_options_reach_them() {
        use guideloom_io::http::HttpOptions;
        let ours = StoreOptions::default().http_options();
        let io = HttpOptions::default();
        assert_eq!(ours.request_timeout(), io.request_timeout());
        assert_eq!(ours.connect_timeout(), io.connect_timeout());
        assert_eq!(ours.operation_timeout(), io.operation_timeout());
        assert_eq!(ours.retry(), io.retry());

        let h = StoreOptions::default()
            .with_request_timeout(Duration::from_millis(1500))
            .with_connect_timeout(Duration::from_millis(250))
            .with_retry(RetryPolicy::new(0, Duration::ZERO, Duration::ZERO))
            .with_retry_timeout(Duration::from_secs(7))
            .http_options();
        assert_eq!(h.request_timeout(), Duration::from_millis(1500));
        assert_eq!(h.connect_timeout(), Duration::from_millis(250));
        assert_eq!(h.operation_timeout(), Duration::from_secs(7));
        assert_eq!(h.retry().max_attempts, 1, "at least one attempt");
    }

    #[test]
    fn object_store_defaults() {
        let o = StoreOptions::default();
        assert_eq!(o.object_store_retry(), DEFAULT_OBJECT_STORE_RETRY);
        assert_eq!(o.effective_retry_timeout(), Duration::from_secs(60));
        let set = o.with_retry(RetryPolicy::none());
        assert_eq!(set.object_store_retry().max_attempts, 1);
    }
}
