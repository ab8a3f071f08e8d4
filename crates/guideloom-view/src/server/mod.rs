//! The viewer's HTTP/1.1 server: read-only pages over one root.
//!
//! | path | what |
//! |---|---|
//! | `/` | overview: dataset id, the latest card, snapshots (seq, id, mode, records, shards, bytes; latest, tags, expired), sets |
//! | `/shards?snapshot=ID` | a snapshot's shards, sizes and health (listing or HEAD) |
//! | `/records?snapshot=ID&page=N&per=50&set=S/V&index=I` | the record browser |
//! | `/record/I?snapshot=ID&set=S/V` | one record |
//! | `/card?snapshot=ID` | a snapshot's dataset card (without `snapshot`: the latest card) |
//! | `/bench` | benchmark bar charts (`ViewerOptions::bench`) |
//! | `/api/overview`, `/api/shards`, `/api/records`, `/api/card`, `/api/stats` | the same as JSON |
//! | `/static/app.css`, `/static/app.js` | the stylesheet and script |
//!
//! Only `GET` and `HEAD` are answered (anything else is `405`). Every response carries
//! [`CONTENT_SECURITY_POLICY`], `X-Content-Type-Options: nosniff`, `Referrer-Policy:
//! no-referrer` and `Cache-Control: no-store`. A page reads only the records it shows
//! (`Dataset::get_many_async` of the page's indices); a record larger than
//! [`ViewerOptions::max_record_bytes`] in a native shard is not read at all (its size comes
//! from the shard's index). Each request runs in a `request` tracing span.
//!
//! The modules, each a leaf or using only those listed before it:
//! `reply` (responses and failures), `query` (the query string), `state` (what is kept
//! between requests), `read` (reading a page's records and annotation values), `views`
//! (each route's data), then `pages` (HTML) and `api` (JSON); this file binds, accepts,
//! routes and adds the security headers.

mod api;
mod pages;
mod query;
mod read;
mod reply;
mod state;
mod views;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use guideloom::Root;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::html::{self, BenchResult};
use query::Query;
use reply::{Fail, respond};
use state::State;

/// The Content-Security-Policy of every response: nothing but this origin's own files,
/// `data:` images and audio; no inline script or style, no framing, no plugins.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; img-src 'self' data:; \
     media-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The most records per page.
pub const MAX_PER_PAGE: u64 = 500;
/// Records per page when not given.
pub const DEFAULT_PER_PAGE: u64 = 50;
/// The most shards whose health is checked by `HEAD` (stores that cannot list).
pub const MAX_HEALTH_HEADS: usize = 1000;

const APP_CSS: &str = include_str!("../../static/app.css");
const APP_JS: &str = include_str!("../../static/app.js");

/// How the viewer is set up.
#[derive(Debug, Clone)]
pub struct ViewerOptions {
    /// The snapshot shown by default (else the latest).
    pub snapshot: Option<String>,
    /// Benchmark results for `/bench` and where they came from.
    pub bench: Option<(String, Vec<BenchResult>)>,
    /// Records larger than this are not read (in native shards, whose index gives sizes
    /// first; ArrayRecord records are read and then shown within the render limits).
    pub max_record_bytes: u64,
}

impl Default for ViewerOptions {
    fn default() -> Self {
        ViewerOptions {
            snapshot: None,
            bench: None,
            max_record_bytes: 32 << 20,
        }
    }
}

/// A viewer of one root, ready to bind.
#[derive(Debug, Clone)]
pub struct Viewer {
    state: Arc<State>,
}

/// A viewer bound to its socket: [`local_addr`](Self::local_addr) is known, nothing is
/// served until [`serve`](Self::serve).
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    addr: SocketAddr,
    viewer: Viewer,
}

impl Viewer {
    /// A viewer of `root`, called `name` on its pages (the argument it was opened from:
    /// never give it credentials).
    pub fn new(root: Root, name: impl Into<String>, options: ViewerOptions) -> Self {
        Viewer {
            state: Arc::new(State::new(root, name.into(), options)),
        }
    }

    /// Binds `addr` (port 0: a free port).
    pub async fn bind(self, addr: SocketAddr) -> Result<Bound> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        Ok(Bound {
            listener,
            addr,
            viewer: self,
        })
    }

    /// Answers one request (what the server does per connection; usable without a socket).
    pub async fn respond(&self, request: Request<impl Send>) -> Response<Full<Bytes>> {
        let span = tracing::info_span!(
            "request",
            method = %request.method(),
            path = %request.uri().path()
        );
        let state = self.state.clone();
        async move {
            state.stats.requests.fetch_add(1, Ordering::Relaxed);
            let head = request.method() == Method::HEAD;
            let mut response = route(&state, request.method(), request.uri()).await;
            secure(response.headers_mut());
            if head {
                *response.body_mut() = Full::new(Bytes::new());
            }
            tracing::debug!(status = response.status().as_u16(), "answered");
            response
        }
        .instrument(span)
        .await
    }
}

impl Bound {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then stops accepting and gives open connections
    /// up to two seconds to finish.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let Bound {
            listener,
            addr,
            viewer,
        } = self;
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        // Per-connection failures (a reset before accept, out of file
                        // descriptors for a moment): keep serving.
                        Err(e) if is_transient(&e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        Err(source) => return Err(Error::Accept { addr, source }),
                    };
                    let viewer = viewer.clone();
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let viewer = viewer.clone();
                        async move { Ok::<_, Infallible>(viewer.respond(request).await) }
                    });
                    let connection = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        if let Err(e) = connection.await {
                            tracing::debug!(%peer, error = %e, "connection ended");
                        }
                    });
                }
            }
        }
        drop(listener);
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
        Ok(())
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock | TimedOut
    ) || e.raw_os_error().is_some_and(|c| c == 23 || c == 24)
}

/// Completes at Ctrl-C (SIGINT) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

/// The security headers of every response.
fn secure(headers: &mut http::HeaderMap) {
    use http::HeaderValue;
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

async fn route(state: &State, method: &Method, uri: &http::Uri) -> Response<Full<Bytes>> {
    let path = uri.path();
    if method != Method::GET && method != Method::HEAD {
        let mut r = respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "405 method not allowed: this viewer is read-only (GET and HEAD only)\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let query = Query::parse(uri.query().unwrap_or(""));
    let result = match path {
        "/" => pages::overview(state).await,
        "/shards" => pages::shards(state, &query).await,
        "/records" => pages::records(state, &query).await,
        "/card" => pages::card(state, &query).await,
        "/bench" => pages::bench(state),
        "/api/overview" => api::overview(state).await,
        "/api/shards" => api::shards(state, &query).await,
        "/api/records" => api::records(state, &query).await,
        "/api/card" => api::card(state, &query).await,
        "/api/bench" => api::bench(state),
        "/api/stats" => api::stats(state),
        // Browsers ask for it by themselves: no icon, and no error in their console.
        "/favicon.ico" => Ok(respond(
            StatusCode::NO_CONTENT,
            "image/x-icon",
            Bytes::new(),
        )),
        "/static/app.css" => Ok(respond(StatusCode::OK, "text/css; charset=utf-8", APP_CSS)),
        "/static/app.js" => Ok(respond(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            APP_JS,
        )),
        p if p.starts_with("/record/") => match p["/record/".len()..].parse::<u64>() {
            Ok(index) => pages::record(state, &query, index).await,
            Err(_) => Err(Fail::bad(format!(
                "{:?} is not a record index",
                &p["/record/".len()..]
            ))),
        },
        _ => Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!("no page {path:?}"),
        )),
    };
    match result {
        Ok(r) => r,
        Err(fail) if path.starts_with("/api/") => respond(
            fail.status,
            "application/json",
            serde_json::to_vec(&json!({"error": fail.message})).unwrap_or_default(),
        ),
        Err(fail) => respond(
            fail.status,
            "text/html; charset=utf-8",
            html::render_error_page(fail.status.as_u16(), &fail.message),
        ),
    }
}
