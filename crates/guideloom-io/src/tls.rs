//! One TLS and crypto stack for every remote client: rustls with the ring provider.
//!
//! guideloom's own HTTP backend ([`HttpIo`](crate::http::HttpIo)) passes ring to rustls
//! explicitly. object_store's cloud stores (features `s3`, `gcs`, `azure`) talk through
//! reqwest, which guideloom builds *without* a provider of its own (reqwest's default would
//! compile aws-lc-rs, a second crypto library with a C build, beside ring). reqwest then
//! takes the process's default rustls provider, and [`install_crypto_provider`] makes that
//! ring.
//!
//! guideloom-publish calls it before it builds any cloud store, so `s3://`, `gs://` and
//! `az://` roots need nothing from the caller. Code that builds an object_store client
//! itself (`AmazonS3Builder::new()...build()`) and hands it to guideloom calls it once first:
//!
//! ```
//! guideloom_io::tls::install_crypto_provider();
//! // let store = object_store::aws::AmazonS3Builder::new()...build()?;
//! ```
//!
//! A provider the application installed before (ring or aws-lc-rs) is kept: the call only
//! fills the gap.

/// Installs rustls' ring provider as the process default, unless a default is already
/// installed. Cheap and idempotent; safe to call from any thread, any number of times.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a default is then in place.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::install_crypto_provider;

    #[test]
    fn a_default_provider_is_in_place_after_the_call_and_a_second_call_keeps_it() {
        install_crypto_provider();
        let first = rustls::crypto::CryptoProvider::get_default().expect("installed");
        install_crypto_provider();
        let second = rustls::crypto::CryptoProvider::get_default().expect("still installed");
        assert!(std::sync::Arc::ptr_eq(first, second));
    }
}
