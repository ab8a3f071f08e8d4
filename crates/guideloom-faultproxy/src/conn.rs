//! One accepted connection: frame the client's requests, choose a fault for each, forward
//! to the upstream (connected lazily, on the first request that needs it) and relay or
//! mangle what comes back.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::framing::{Framer, Head, HeadEnd, Step};
use crate::script::{Applied, Exchange, Fault, Script};

/// How long a cleanly closed connection waits for the client to close its side.
const LINGER_AFTER_CLOSE: Duration = Duration::from_secs(10);
/// Read buffer size, each direction.
const BUF: usize = 64 * 1024;

/// State shared by the accept loop, every connection and the [`FaultProxy`](crate::FaultProxy)
/// handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) upstream: SocketAddr,
    pub(crate) script: Mutex<Script>,
    pub(crate) log: Mutex<Vec<Applied>>,
    pub(crate) connections: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) faults: AtomicU64,
    pub(crate) to_upstream: AtomicU64,
    pub(crate) to_client: AtomicU64,
}

/// Locks a mutex, ignoring poisoning (a panicking script must not wedge the proxy).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(upstream: SocketAddr, script: Script) -> Self {
        Shared {
            upstream,
            script: Mutex::new(script),
            log: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            to_upstream: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
        }
    }

    /// Numbers the request and asks the script (under one lock, so numbers follow the
    /// order in which faults are chosen).
    fn choose(&self, connection: u64, on_connection: u64, head: &Head) -> Fault {
        let mut script = lock(&self.script);
        let exchange = Exchange {
            request: self.requests.fetch_add(1, Ordering::Relaxed),
            connection,
            on_connection,
            method: head.method.clone(),
            target: head.target.clone(),
            range: head.range.clone(),
        };
        let fault = script.choose(&exchange);
        drop(script);
        if !fault.is_pass() {
            self.faults.fetch_add(1, Ordering::Relaxed);
        }
        lock(&self.log).push(Applied { exchange, fault });
        fault
    }
}

/// What happens to the bytes of the request being received.
#[derive(Debug, Clone, Copy)]
enum Request {
    /// Forward them.
    Forward,
    /// Forward up to this many in total, then reset.
    ResetAfter(u64),
    /// Discard them; answer with this status when the request is complete.
    Answer { code: u16, retry_after: Option<u64> },
    /// Discard them, and everything after, forever.
    Stalled,
}

/// What happens to the bytes the upstream sends.
#[derive(Debug)]
enum Response {
    Pass,
    Drip(Duration),
    ResetAfter(u64),
    CloseOnFirstByte,
    Truncate { head: HeadEnd, left: u64 },
}

/// How a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Reset the client's connection (and the upstream's).
    Reset,
    /// Close the client's connection cleanly (FIN), then wait for it to close its side.
    Close,
    /// Both sides are done (or failed): just drop the sockets.
    Drop,
}

enum Event {
    Client(std::io::Result<usize>),
    Upstream(std::io::Result<usize>),
}

struct Conn {
    shared: Arc<Shared>,
    number: u64,
    client: TcpStream,
    upstream: Option<TcpStream>,
    framer: Framer,
    inbuf: Vec<u8>,
    on_connection: u64,
    request: Request,
    /// Bytes of the current request forwarded so far.
    sent: u64,
    response: Response,
    client_eof: bool,
    upstream_eof: bool,
}

/// Serves one accepted connection until it ends.
pub(crate) async fn serve(shared: Arc<Shared>, number: u64, client: TcpStream) {
    let _ = client.set_nodelay(true);
    let mut conn = Conn {
        shared,
        number,
        client,
        upstream: None,
        framer: Framer::new(),
        inbuf: Vec::new(),
        on_connection: 0,
        request: Request::Forward,
        sent: 0,
        response: Response::Pass,
        client_eof: false,
        upstream_eof: false,
    };
    let end = conn.run().await.unwrap_or(End::Drop);
    match end {
        End::Reset => {
            let _ = conn.client.set_zero_linger();
            if let Some(up) = &conn.upstream {
                let _ = up.set_zero_linger();
            }
        }
        End::Close => {
            drop(conn.upstream.take());
            let _ = conn.client.shutdown().await;
            let mut sink = vec![0u8; BUF];
            let _ = tokio::time::timeout(LINGER_AFTER_CLOSE, async {
                while matches!(conn.client.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
        End::Drop => {}
    }
}

async fn read_opt(stream: &mut Option<TcpStream>, buf: &mut [u8]) -> std::io::Result<usize> {
    match stream {
        Some(s) => s.read(buf).await,
        None => std::future::pending().await,
    }
}

impl Conn {
    async fn run(&mut self) -> std::io::Result<End> {
        let mut cbuf = vec![0u8; BUF];
        let mut ubuf = vec![0u8; BUF];
        loop {
            if let Some(end) = self.process().await? {
                return Ok(end);
            }
            if self.client_eof && (self.upstream.is_none() || self.upstream_eof) {
                return Ok(End::Drop);
            }
            let event = tokio::select! {
                r = self.client.read(&mut cbuf), if !self.client_eof => Event::Client(r),
                r = read_opt(&mut self.upstream, &mut ubuf), if !self.upstream_eof => {
                    Event::Upstream(r)
                }
                else => return Ok(End::Drop),
            };
            match event {
                Event::Client(r) => match r? {
                    0 => {
                        self.client_eof = true;
                        if let Some(up) = &mut self.upstream {
                            let _ = up.shutdown().await;
                        }
                    }
                    n => self.inbuf.extend_from_slice(&cbuf[..n]),
                },
                Event::Upstream(r) => match r? {
                    0 => {
                        self.upstream_eof = true;
                        let _ = self.client.shutdown().await;
                    }
                    n => {
                        if let Some(end) = self.respond(&ubuf[..n]).await? {
                            return Ok(end);
                        }
                    }
                },
            }
        }
    }

    async fn ensure_upstream(&mut self) -> std::io::Result<()> {
        if self.upstream.is_none() {
            let up = TcpStream::connect(self.shared.upstream).await?;
            let _ = up.set_nodelay(true);
            self.upstream = Some(up);
            self.upstream_eof = false;
        }
        Ok(())
    }

    async fn forward(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.ensure_upstream().await?;
        if let Some(up) = &mut self.upstream {
            up.write_all(bytes).await?;
        }
        self.sent += bytes.len() as u64;
        self.shared
            .to_upstream
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    async fn send_client(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        // Counted before the write: a client that has read the bytes sees them counted.
        self.shared
            .to_client
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.client.write_all(bytes).await
    }

    /// Frames and handles what the client sent so far.
    async fn process(&mut self) -> std::io::Result<Option<End>> {
        loop {
            if matches!(self.request, Request::Stalled) {
                self.inbuf.clear();
                return Ok(None);
            }
            match self.framer.step(&self.inbuf) {
                Step::More => return Ok(None),
                Step::Raw => {
                    let data = std::mem::take(&mut self.inbuf);
                    self.forward(&data).await?;
                    return Ok(None);
                }
                Step::Head(head) => {
                    let n = head.len;
                    self.begin(&head).await?;
                    if let Some(end) = self.request_bytes(n).await? {
                        return Ok(Some(end));
                    }
                }
                Step::Body(n) => {
                    if let Some(end) = self.request_bytes(n).await? {
                        return Ok(Some(end));
                    }
                }
                Step::End => {
                    if let Some(end) = self.request_end().await? {
                        return Ok(Some(end));
                    }
                }
            }
        }
    }

    /// A new request: choose its fault and set up both directions.
    async fn begin(&mut self, head: &Head) -> std::io::Result<()> {
        let fault = self.shared.choose(self.number, self.on_connection, head);
        self.on_connection += 1;
        self.sent = 0;
        let (request, response) = match fault {
            Fault::Pass => (Request::Forward, Response::Pass),
            Fault::ResetAfterRequestBytes(n) => (Request::ResetAfter(n), Response::Pass),
            Fault::ResetAfterResponseBytes(n) => (Request::Forward, Response::ResetAfter(n)),
            Fault::Stall => (Request::Stalled, Response::Pass),
            Fault::Drip(interval) => (Request::Forward, Response::Drip(interval)),
            Fault::CloseBeforeHeaders => (Request::Forward, Response::CloseOnFirstByte),
            Fault::Status { code, retry_after } => {
                (Request::Answer { code, retry_after }, Response::Pass)
            }
            Fault::TruncateBody(left) => (
                Request::Forward,
                Response::Truncate {
                    head: HeadEnd::default(),
                    left,
                },
            ),
        };
        self.request = request;
        self.response = response;
        if matches!(request, Request::Forward | Request::ResetAfter(_)) {
            self.ensure_upstream().await?;
        }
        Ok(())
    }

    /// The next `n` bytes of the current request.
    async fn request_bytes(&mut self, n: usize) -> std::io::Result<Option<End>> {
        let data: Vec<u8> = self.inbuf.drain(..n).collect();
        match self.request {
            Request::Forward => self.forward(&data).await?,
            Request::ResetAfter(limit) => {
                let room = usize::try_from(limit.saturating_sub(self.sent)).unwrap_or(usize::MAX);
                self.forward(&data[..room.min(data.len())]).await?;
                if self.sent >= limit {
                    return Ok(Some(End::Reset));
                }
            }
            Request::Answer { .. } | Request::Stalled => {}
        }
        Ok(None)
    }

    /// The current request is complete.
    async fn request_end(&mut self) -> std::io::Result<Option<End>> {
        match self.request {
            Request::Answer { code, retry_after } => {
                let answer = canned(code, retry_after);
                self.send_client(answer.as_bytes()).await?;
                Ok(Some(End::Close))
            }
            // The whole request was shorter than the limit: it went through; reset now.
            Request::ResetAfter(_) => Ok(Some(End::Reset)),
            Request::Forward | Request::Stalled => Ok(None),
        }
    }

    /// Bytes from the upstream, through the current response mode.
    async fn respond(&mut self, bytes: &[u8]) -> std::io::Result<Option<End>> {
        let mut mode = std::mem::replace(&mut self.response, Response::Pass);
        let end = match &mut mode {
            Response::Pass => {
                self.send_client(bytes).await?;
                None
            }
            Response::Drip(interval) => {
                for b in bytes {
                    self.send_client(std::slice::from_ref(b)).await?;
                    tokio::time::sleep(*interval).await;
                }
                None
            }
            Response::ResetAfter(left) => {
                let k = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                self.send_client(&bytes[..k]).await?;
                *left -= k as u64;
                (*left == 0).then_some(End::Reset)
            }
            Response::CloseOnFirstByte => Some(End::Close),
            Response::Truncate { head, left } => {
                let in_head = head.feed(bytes);
                self.send_client(&bytes[..in_head]).await?;
                if head.done() {
                    let rest = &bytes[in_head..];
                    let k = usize::try_from(*left).unwrap_or(usize::MAX).min(rest.len());
                    self.send_client(&rest[..k]).await?;
                    *left -= k as u64;
                    (*left == 0).then_some(End::Close)
                } else {
                    None
                }
            }
        };
        self.response = mode;
        Ok(end)
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Injected Fault",
    }
}

/// A complete `Connection: close` answer with a short text body.
fn canned(code: u16, retry_after: Option<u64>) -> String {
    let body = format!("fault injected by guideloom-faultproxy: HTTP {code}\n");
    let retry = retry_after.map_or_else(String::new, |s| format!("Retry-After: {s}\r\n"));
    format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n{retry}\r\n{body}",
        reason(code),
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_answers_are_complete_responses() {
        let a = canned(503, Some(2));
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut resp = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(head) = resp.parse(a.as_bytes()).unwrap() else {
            panic!("partial: {a}");
        };
        assert_eq!(resp.code, Some(503));
        let get = |n: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(n))
                .map(|h| std::str::from_utf8(h.value).unwrap().to_owned())
        };
        assert_eq!(get("retry-after").as_deref(), Some("2"));
        assert_eq!(get("content-length"), Some((a.len() - head).to_string()));
        assert!(!canned(500, None).contains("Retry-After"));
    }
}
