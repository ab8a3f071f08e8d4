//! Directory listings: the one unranged `GET` of [`HttpIo`], for origins that list
//! directories (nginx `autoindex`, Caddy `file_server browse`), so that a caller can find
//! objects without probing names one by one.

use bytes::Bytes;
use http::{Method, StatusCode};

use super::HttpIo;
use super::path::HttpPath;
use super::send::{BodyLimits, Call};
use crate::error::{Error, Result};
use crate::stats::RequestStats;

impl HttpIo {
    /// The body of the directory listing of `path` (the URL `<path>/`, asked for with
    /// `Accept: application/json`): at most `limit` bytes, or [`Error::LongRead`] once the
    /// origin sends more (announced or not); a missing directory, or an origin that does not
    /// list it (HTTP 404 or 410), is [`Error::NotFound`]; any other status is
    /// [`Error::Remote`]. One request (retried as reads are), counted in
    /// [`stats`](HttpIo::stats). What the body means is the caller's to parse: nginx's
    /// `autoindex_format json` and Caddy's browse answer a JSON array of entries.
    pub async fn get_listing(&self, path: &HttpPath, limit: u64) -> Result<Bytes> {
        path.check()?;
        let uri = self.inner.base.dir_uri(path)?;
        let encoded = path.encoded();
        let display = self.inner.base.redacted(&if encoded.is_empty() {
            encoded
        } else {
            format!("{encoded}/")
        });
        let budget = self.inner.budget();
        // Counted once, in the backend's stats (`send` adds to both).
        let own = RequestStats::new();
        let call = Call {
            reader_stats: &own,
            location: &display,
            range: None,
            if_match: None,
            accept: Some("application/json"),
            limits: BodyLimits {
                partial: 0,
                full: Some(limit),
                unsized_full: true,
                offset: 0,
            },
            budget: &budget,
        };
        let f = self.inner.send(Method::GET, &uri, call).await?;
        if f.status != StatusCode::OK {
            return Err(self.inner.status_error(&display, &f, "GET listing"));
        }
        if super::content_length(&f.headers).is_some_and(|n| n > limit) {
            return Err(Error::LongRead {
                location: display,
                offset: 0,
                requested: limit,
                got: super::content_length(&f.headers),
            });
        }
        Ok(f.body)
    }
}
