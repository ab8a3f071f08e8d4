//! The viewer's HTTP/1.1 server: read-only pages over one root.
//!
//! | path | what |
//! |---|---|
//! | `/` | overview: dataset id, snapshots (seq, id, mode, records, shards, bytes), sets |
//! | `/shards?snapshot=ID` | a snapshot's shards, sizes and health (listing or HEAD) |
//! | `/records?snapshot=ID&page=N&per=50&set=S/V&index=I` | the record browser |
//! | `/record/I?snapshot=ID&set=S/V` | one record |
//! | `/bench` | benchmark bar charts (`ViewerOptions::bench`) |
//! | `/api/overview`, `/api/shards`, `/api/records`, `/api/stats` | the same as JSON |
//! | `/static/app.css`, `/static/app.js` | the stylesheet and script |
//!
//! Only `GET` and `HEAD` are answered (anything else is `405`). Every response carries
//! [`CONTENT_SECURITY_POLICY`], `X-Content-Type-Options: nosniff`, `Referrer-Policy:
//! no-referrer` and `Cache-Control: no-store`. A page reads only the records it shows
//! (`Dataset::get_many_async` of the page's indices); a record larger than
//! [`ViewerOptions::max_record_bytes`] in a native shard is not read at all (its size comes
//! from the shard's index). Each request runs in a `request` tracing span.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use guideloom::publish::{AnnotationSet, Snapshot};
use guideloom::{Dataset, Root};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::html::{self, BenchResult, RecordContent, RecordEntry, RecordFormat};

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
/// Snapshots whose datasets (opened shards) are kept open.
const OPEN_DATASETS: usize = 8;
/// Annotation sets kept downloaded.
const OPEN_SETS: usize = 8;

const APP_CSS: &str = include_str!("../static/app.css");
const APP_JS: &str = include_str!("../static/app.js");

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

/// Counters of what the server did, for `/api/stats` and tests.
#[derive(Debug, Default)]
struct Stats {
    requests: AtomicU64,
    records_read: AtomicU64,
    records_skipped: AtomicU64,
}

/// An opened annotation set's key: `set/version` and the snapshot it is read for.
type SetKey = (String, String);

#[derive(Debug)]
struct State {
    root: Root,
    name: String,
    options: ViewerOptions,
    datasets: Mutex<Vec<(String, Dataset)>>,
    sets: Mutex<Vec<(SetKey, Arc<AnnotationSet>)>>,
    stats: Stats,
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

/// An error answered as a page (or JSON under `/api/`).
#[derive(Debug)]
struct Fail {
    status: StatusCode,
    message: String,
}

impl Fail {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Fail {
            status,
            message: message.into(),
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Fail::new(StatusCode::BAD_REQUEST, message)
    }

    fn from_publish(e: &guideloom::publish::Error) -> Self {
        let status = match e.kind() {
            guideloom::ErrorKind::NotFound | guideloom::ErrorKind::OutOfRange => {
                StatusCode::NOT_FOUND
            }
            guideloom::ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        };
        Fail::new(status, e.to_string())
    }
}

type Reply = Result<Response<Full<Bytes>>, Fail>;

impl Viewer {
    /// A viewer of `root`, called `name` on its pages (the argument it was opened from:
    /// never give it credentials).
    pub fn new(root: Root, name: impl Into<String>, options: ViewerOptions) -> Self {
        Viewer {
            state: Arc::new(State {
                root,
                name: name.into(),
                options,
                datasets: Mutex::new(Vec::new()),
                sets: Mutex::new(Vec::new()),
                stats: Stats::default(),
            }),
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

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    r
}

fn html_page(body: String) -> Reply {
    Ok(respond(StatusCode::OK, "text/html; charset=utf-8", body))
}

fn json_reply(value: &serde_json::Value) -> Reply {
    Ok(respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    ))
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
    let api = path.starts_with("/api/");
    let result = match path {
        "/" => overview(state)
            .await
            .and_then(|s| html_page(html::render_overview_page(&s))),
        "/api/overview" => overview(state).await.and_then(|s| json_reply(&json!(s))),
        "/shards" | "/api/shards" => shards(state, &query, api).await,
        "/records" | "/api/records" => records(state, &query, api).await,
        "/bench" => html_page(html::render_bench_page(
            state.options.bench.as_ref().map_or(&[][..], |b| &b.1),
            state.options.bench.as_ref().map(|b| b.0.as_str()),
        )),
        "/api/bench" => json_reply(&json!(
            state.options.bench.as_ref().map_or(&[][..], |b| &b.1)
        )),
        "/api/stats" => json_reply(&json!({
            "requests": state.stats.requests.load(Ordering::Relaxed),
            "records_read": state.stats.records_read.load(Ordering::Relaxed),
            "records_skipped": state.stats.records_skipped.load(Ordering::Relaxed),
        })),
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
            Ok(index) => record(state, &query, index).await,
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
        Err(fail) if api => respond(
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

/// A request's query parameters, percent-decoded (`+` is a space).
#[derive(Debug, Default)]
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Self {
        Query(
            query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn number(&self, key: &str) -> Result<Option<u64>, Fail> {
        self.get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| Fail::bad(format!("{key}={v:?} is not a whole number")))
            })
            .transpose()
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn overview(state: &State) -> Result<html::Summary, Fail> {
    let root = &state.root;
    let identity = root.identity().await.map_err(|e| Fail::from_publish(&e))?;
    let snapshots = match root.snapshots().await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => return Err(Fail::from_publish(&e)),
    };
    let catalog = root.catalog().await.map_err(|e| Fail::from_publish(&e))?;
    let latest = snapshots.last().map(Snapshot::seq);
    Ok(html::Summary {
        root: state.name.clone(),
        dataset_id: identity.dataset_id,
        snapshots: snapshots
            .iter()
            .map(|s| snapshot_row(s, Some(s.seq()) == latest))
            .collect(),
        sets: catalog
            .entries
            .iter()
            .map(|e| html::SetRow {
                set: e.set.clone(),
                version: e.version.clone(),
                snapshot_id: e.snapshot_id.clone(),
                values: e.value_count,
                bytes: e.size,
            })
            .collect(),
        bench: state.options.bench.is_some(),
    })
}

fn snapshot_row(s: &Snapshot, latest: bool) -> html::SnapshotRow {
    html::SnapshotRow {
        seq: s.seq(),
        id: s.id().to_owned(),
        mode: match s.manifest.mode {
            guideloom::PublishMode::Full => "full".into(),
            guideloom::PublishMode::Append => "append".into(),
        },
        records: s.total_records(),
        shards: s.shards().len() as u64,
        bytes: s.shards().iter().map(|r| r.size).sum(),
        latest,
    }
}

/// The dataset of the snapshot asked for (`snapshot=`), the viewer's default, or the latest;
/// kept open across requests so its opened shards are reused.
async fn dataset(state: &State, query: &Query) -> Result<Dataset, Fail> {
    let id = query
        .get("snapshot")
        .or(state.options.snapshot.as_deref())
        .map(str::to_owned);
    if let Some(id) = &id {
        let open = state.datasets.lock().await;
        if let Some((_, d)) = open.iter().find(|(k, _)| k == id) {
            return Ok(d.clone());
        }
    }
    let snapshot = match &id {
        Some(id) => state.root.snapshot(id).await,
        None => state.root.latest().await,
    }
    .map_err(|e| Fail::from_publish(&e))?;
    let key = snapshot.id().to_owned();
    let mut open = state.datasets.lock().await;
    if let Some((_, d)) = open.iter().find(|(k, _)| *k == key) {
        return Ok(d.clone());
    }
    let d = state.root.reader(snapshot);
    if open.len() >= OPEN_DATASETS {
        open.remove(0);
    }
    open.push((key, d.clone()));
    Ok(d)
}

async fn snapshot_ids(state: &State) -> Result<Vec<String>, Fail> {
    match state.root.snapshots().await {
        Ok(s) => Ok(s.iter().map(|s| s.id().to_owned()).collect()),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(Fail::from_publish(&e)),
    }
}

async fn shards(state: &State, query: &Query, api: bool) -> Reply {
    let d = dataset(state, query).await?;
    let snapshot = d.snapshot();
    let store = state.root.store();
    let refs = snapshot.shards();
    let mut sizes: HashMap<String, Option<u64>> = HashMap::new();
    let note;
    if store.capabilities().list {
        // One listing per directory holding shards.
        let mut dirs: Vec<&str> = refs
            .iter()
            .map(|r| r.key.rsplit_once('/').map_or("", |(d, _)| d))
            .collect();
        dirs.sort_unstable();
        dirs.dedup();
        for dir in dirs {
            let listed = store.list(dir).await.map_err(|e| Fail::from_publish(&e))?;
            for o in listed {
                sizes.insert(o.key, Some(o.size));
            }
        }
        note = None;
    } else {
        let heads: Vec<_> = refs
            .iter()
            .take(MAX_HEALTH_HEADS)
            .map(|r| {
                let (store, key) = (store.clone(), r.key.clone());
                async move {
                    let size = match store.head(&key).await {
                        Ok(info) => Ok(Some(info.size)),
                        Err(e) if e.is_not_found() => Ok(None),
                        Err(e) => Err(e.to_string()),
                    };
                    (key, size)
                }
            })
            .collect();
        let heads: Vec<(String, Result<Option<u64>, String>)> = futures::stream::iter(heads)
            .buffer_unordered(8)
            .collect()
            .await;
        let mut failed = None;
        for (key, size) in heads {
            match size {
                Ok(s) => {
                    sizes.insert(key, s);
                }
                Err(e) => failed = Some(e),
            }
        }
        note = failed;
    }
    let rows: Vec<html::ShardRow> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let health = match sizes.get(&r.key) {
                Some(Some(size)) if *size == r.size => html::Health::Ok,
                Some(Some(size)) => html::Health::SizeMismatch { actual: *size },
                Some(None) => html::Health::Missing,
                None if store.capabilities().list => html::Health::Missing,
                None if i >= MAX_HEALTH_HEADS => html::Health::Unknown {
                    why: format!("only the first {MAX_HEALTH_HEADS} shards are checked"),
                },
                None => html::Health::Unknown {
                    why: note.clone().unwrap_or_else(|| "HEAD failed".into()),
                },
            };
            html::ShardRow {
                key: r.key.clone(),
                size: r.size,
                records: r.record_count,
                format: r.format.name().to_owned(),
                health,
            }
        })
        .collect();
    let latest = snapshot_ids(state).await?.last().map(String::as_str) == Some(snapshot.id());
    let row = snapshot_row(snapshot, latest);
    if api {
        return json_reply(&json!({"snapshot": row, "shards": rows}));
    }
    html_page(html::render_shard_list(&row, &rows))
}

/// The annotation set `set/version`, downloaded once and kept (for `snapshot`'s records).
async fn annotation_set(
    state: &State,
    name: &str,
    snapshot: &Snapshot,
) -> Result<Arc<AnnotationSet>, String> {
    let (set, version) = name
        .split_once('/')
        .ok_or_else(|| format!("{name:?}: expected SET/VERSION"))?;
    let key = (name.to_owned(), snapshot.id().to_owned());
    {
        let open = state.sets.lock().await;
        if let Some((_, s)) = open.iter().find(|(k, _)| *k == key) {
            return Ok(s.clone());
        }
    }
    let opened = state
        .root
        .annotations(set, Some(version), snapshot, true)
        .await
        .map_err(|e| e.to_string())?;
    let opened = Arc::new(opened);
    let mut open = state.sets.lock().await;
    if open.len() >= OPEN_SETS {
        open.remove(0);
    }
    open.push((key, opened.clone()));
    Ok(opened)
}

/// What reading one record gave.
#[derive(Debug)]
enum Read {
    Bytes(Bytes, RecordFormat),
    TooLarge(u64),
    Error(String),
}

impl Read {
    fn content(&self) -> RecordContent<'_> {
        match self {
            Read::Bytes(b, f) => RecordContent::Bytes(b, *f),
            Read::TooLarge(n) => RecordContent::TooLarge(*n),
            Read::Error(e) => RecordContent::Error(e),
        }
    }
}

/// Records `indices` (ascending, in range) of `d`: only these are read, in one batched read
/// per shard; records over the size cap in native shards are left unread.
async fn read_records(state: &State, d: &Dataset, indices: &[u64]) -> Vec<Read> {
    let snapshot = d.snapshot();
    let schema = snapshot.manifest.schema.is_some();
    let cap = state.options.max_record_bytes;
    let mut out: Vec<Option<Read>> = indices.iter().map(|_| None).collect();
    let mut wanted = Vec::new();
    let mut formats: HashMap<usize, RecordFormat> = HashMap::new();
    for (slot, &i) in indices.iter().enumerate() {
        let Some(located) = d.table().locate(i) else {
            out[slot] = Some(Read::Error(format!("record {i} is out of range")));
            continue;
        };
        let n = located.shard;
        let shard_ref = &snapshot.shards()[n];
        // A shard no larger than the cap cannot hold a record over it: no need to look.
        if shard_ref.size > cap {
            match d.open_shard_async(n).await {
                Ok(opened) => {
                    formats.insert(n, format_of(opened.record_format(), schema));
                    if let Some(native) = opened.native() {
                        let local = i - d.table().starts()[n];
                        let range = native.index().range(local);
                        let len = range.end - range.start;
                        if len > cap {
                            state.stats.records_skipped.fetch_add(1, Ordering::Relaxed);
                            out[slot] = Some(Read::TooLarge(len));
                            continue;
                        }
                    }
                }
                Err(e) => {
                    out[slot] = Some(Read::Error(format!("shard {}: {e}", shard_ref.key)));
                    continue;
                }
            }
        }
        wanted.push((slot, i, n));
    }
    let to_read: Vec<u64> = wanted.iter().map(|w| w.1).collect();
    if !to_read.is_empty() {
        state
            .stats
            .records_read
            .fetch_add(to_read.len() as u64, Ordering::Relaxed);
        match d.get_many_async(&to_read).await {
            Ok(records) => {
                for ((slot, _, n), bytes) in wanted.iter().zip(records) {
                    let format = match formats.get(n) {
                        Some(f) => *f,
                        None => {
                            let f = match d.open_shard_async(*n).await {
                                Ok(o) => format_of(o.record_format(), schema),
                                Err(_) => RecordFormat::Unknown,
                            };
                            formats.insert(*n, f);
                            f
                        }
                    };
                    out[*slot] = Some(Read::Bytes(bytes, format));
                }
            }
            Err(e) => {
                let e = e.to_string();
                for (slot, _, _) in &wanted {
                    out[*slot] = Some(Read::Error(e.clone()));
                }
            }
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Read::Error("not read".into())))
        .collect()
}

fn format_of(name: &str, schema: bool) -> RecordFormat {
    if schema {
        RecordFormat::Cbor
    } else {
        RecordFormat::from_name(name)
    }
}

/// Each shown set's value for each of `indices`.
async fn annotations(
    state: &State,
    sets: &[String],
    snapshot: &Snapshot,
    indices: &[u64],
) -> Vec<Vec<Result<Vec<u8>, String>>> {
    let mut columns = Vec::new();
    for name in sets {
        let column = match annotation_set(state, name, snapshot).await {
            Ok(set) => indices
                .iter()
                .map(|&i| set.raw(i).map(<[u8]>::to_vec).map_err(|e| e.to_string()))
                .collect(),
            Err(e) => indices.iter().map(|_| Err(e.clone())).collect(),
        };
        columns.push(column);
    }
    columns
}

async fn records(state: &State, query: &Query, api: bool) -> Reply {
    let d = dataset(state, query).await?;
    let snapshot = d.snapshot().clone();
    let total = d.len();
    let per = query
        .number("per")?
        .unwrap_or(DEFAULT_PER_PAGE)
        .clamp(1, MAX_PER_PAGE);
    let highlight = query.number("index")?;
    if let Some(i) = highlight
        && i >= total
    {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "record {i} out of range: snapshot {} has {total} records",
                snapshot.id()
            ),
        ));
    }
    let pages = total.div_ceil(per).max(1);
    let page = match highlight {
        Some(i) => i / per,
        None => query.number("page")?.unwrap_or(0),
    };
    if page >= pages {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "page {page} out of range: snapshot {} has {pages} pages of {per}",
                snapshot.id()
            ),
        ));
    }
    let indices: Vec<u64> = (page * per..((page + 1) * per).min(total)).collect();
    let sets = query.all("set");
    let reads = read_records(state, &d, &indices).await;
    let columns = annotations(state, &sets, &snapshot, &indices).await;
    if api {
        let rows: Vec<_> = indices
            .iter()
            .zip(&reads)
            .enumerate()
            .map(|(row, (i, r))| {
                let values: serde_json::Map<String, serde_json::Value> = sets
                    .iter()
                    .zip(&columns)
                    .map(|(s, c)| {
                        let v = match &c[row] {
                            Ok(raw) => serde_json::from_slice(raw).unwrap_or(serde_json::Value::Null),
                            Err(e) => json!({"error": e}),
                        };
                        (s.clone(), v)
                    })
                    .collect();
                json!({
                    "index": i,
                    "bytes": match r { Read::Bytes(b, _) => Some(b.len() as u64), Read::TooLarge(n) => Some(*n), Read::Error(_) => None },
                    "error": match r { Read::Error(e) => Some(e.as_str()), _ => None },
                    "annotations": values,
                })
            })
            .collect();
        return json_reply(&json!({
            "snapshot": snapshot.id(), "total": total, "page": page, "per": per, "records": rows,
        }));
    }
    let all_sets: Vec<String> = state
        .root
        .catalog()
        .await
        .map_err(|e| Fail::from_publish(&e))?
        .entries
        .iter()
        .map(|e| format!("{}/{}", e.set, e.version))
        .collect();
    let ids = snapshot_ids(state).await?;
    let entries = indices
        .iter()
        .zip(&reads)
        .enumerate()
        .map(|(row, (&index, r))| RecordEntry {
            index,
            content: r.content(),
            annotations: columns
                .iter()
                .map(|c| c[row].as_ref().map(Vec::as_slice).map_err(Clone::clone))
                .collect(),
        })
        .collect();
    html_page(html::render_records_page(&html::RecordsView {
        snapshot: snapshot.id(),
        snapshots: &ids,
        total,
        page,
        per,
        all_sets: &all_sets,
        sets: &sets,
        highlight,
        records: entries,
        schema: snapshot.manifest.schema.as_ref(),
    }))
}

async fn record(state: &State, query: &Query, index: u64) -> Reply {
    let d = dataset(state, query).await?;
    let snapshot = d.snapshot().clone();
    let Some(located) = d.table().locate(index) else {
        return Err(Fail::new(
            StatusCode::NOT_FOUND,
            format!(
                "record {index} out of range: snapshot {} has {} records",
                snapshot.id(),
                d.len()
            ),
        ));
    };
    let sets = query.all("set");
    let read = read_records(state, &d, &[index]).await;
    let columns = annotations(state, &sets, &snapshot, &[index]).await;
    let entry = RecordEntry {
        index,
        content: read[0].content(),
        annotations: columns
            .iter()
            .map(|c| c[0].as_ref().map(Vec::as_slice).map_err(Clone::clone))
            .collect(),
    };
    html_page(html::render_record_page(&html::RecordDetail {
        snapshot: snapshot.id(),
        total: d.len(),
        entry,
        sets: &sets,
        schema: snapshot.manifest.schema.as_ref(),
        shard: &snapshot.shards()[located.shard].key,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_decoded() {
        let q = Query::parse("snapshot=v%22%3E1&set=q%2Fv1&set=&page=2&x=a+b&bad=%zz%4&u=%\u{e9}");
        assert_eq!(q.get("snapshot"), Some("v\">1"));
        assert_eq!(q.all("set"), ["q/v1"]);
        assert_eq!(q.number("page").unwrap(), Some(2));
        assert_eq!(q.get("x"), Some("a b"));
        assert_eq!(q.get("bad"), Some("%zz%4"));
        assert_eq!(q.get("u"), Some("%\u{e9}"));
        assert!(q.number("x").is_err());
    }
}
