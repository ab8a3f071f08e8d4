//! A scripted fault-injecting TCP proxy for HTTP/1.x, for tests on loopback (dev-only, never
//! published; no Toxiproxy-like server can be installed here, see
//! `../shared/notes/mounts-and-faults.md` §4).
//!
//! [`FaultProxy::start`] listens on `127.0.0.1:0` and forwards to one upstream address (nginx,
//! moto, Ceph RGW). It frames the client's byte stream into requests (head, then a
//! `Content-Length` or chunked body) and asks its [`Script`] for a [`Fault`] for **each
//! request**, in arrival order, so a fault means the same thing on a fresh connection and on a
//! pooled keep-alive one; [`Exchange::on_connection`] and [`Script::connections`] script by
//! accepted connection instead. Responses are relayed as bytes (never parsed, except for
//! finding the end of a head for [`Fault::TruncateBody`]). A connection that does not speak
//! HTTP/1.x is relayed raw.
//!
//! The faults: pass; reset (RST, `SO_LINGER` 0) after N bytes of the request or of the
//! response; stall (read, never answer); drip (the response one byte per interval); close
//! before the response head; answer a status such as `503` with `Retry-After` without
//! forwarding; truncate the body after K bytes. [`BlackHole`] is a listener that never
//! accepts: connects succeed (the kernel's backlog), nothing is ever read or answered.
//!
//! A far store: [`FaultProxy::start_with`] puts a [`Link`] between the proxy and its upstream,
//! a one-way delay each way and a rate cap per direction shared by all connections (this
//! kernel has no netem), changeable while the proxy runs.
//!
//! The proxy runs on a thread of its own with a current-thread tokio runtime, so it works
//! under any test (sync, `#[tokio::test]`, or driving a child process). Dropping the handle
//! stops it: the accept loop and every connection task end and their sockets close before
//! `drop` returns. Counters ([`FaultProxy::stats`]) and the log of every request with the
//! fault it got ([`FaultProxy::log`]) let a test count retries exactly.
//!
//! ```
//! use std::io::{Read, Write};
//! use guideloom_faultproxy::{FaultProxy, Fault, Script};
//!
//! // A one-shot upstream answering "hello".
//! let upstream = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let addr = upstream.local_addr()?;
//! std::thread::spawn(move || {
//!     for mut s in upstream.incoming().flatten() {
//!         let mut buf = [0u8; 1024];
//!         let _ = s.read(&mut buf);
//!         let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
//!     }
//! });
//!
//! // The first request gets a 503, the second passes.
//! let proxy = FaultProxy::start(addr, Script::requests([Fault::unavailable(1)]))?;
//! let get = |_| -> std::io::Result<String> {
//!     let mut c = std::net::TcpStream::connect(proxy.addr())?;
//!     c.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")?;
//!     let mut out = String::new();
//!     let _ = c.read_to_string(&mut out);
//!     Ok(out)
//! };
//! assert!(get(0)?.starts_with("HTTP/1.1 503"));
//! assert!(get(1)?.ends_with("hello"));
//! assert_eq!((proxy.stats().requests, proxy.stats().faults), (2, 1));
//! # Ok::<(), std::io::Error>(())
//! ```

mod conn;
mod framing;
mod link;
mod script;

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use conn::{Shared, lock};
pub use link::Link;
pub use script::{Applied, Exchange, Fault, Script};

use link::Relay;

/// Counters of a [`FaultProxy`] since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyStats {
    /// Client connections accepted.
    pub connections: u64,
    /// Requests seen (each got a fault, [`Fault::Pass`] included).
    pub requests: u64,
    /// Requests that got a fault other than [`Fault::Pass`].
    pub faults: u64,
    /// Bytes forwarded from clients to the upstream.
    pub bytes_to_upstream: u64,
    /// Bytes written to clients (relayed responses and injected answers; counted as they
    /// are handed to the socket).
    pub bytes_to_client: u64,
}

/// A running fault-injecting proxy. Dropping it stops it (see the crate docs).
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    /// The link to the upstream, when started with one ([`FaultProxy::start_with`]).
    relay: Option<Arc<Relay>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The `host:port` of an `http://` URL, resolved.
fn upstream_of(url: &str) -> io::Result<SocketAddr> {
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an http:// URL with a host: {url}"),
        )
    };
    let rest = url.strip_prefix("http://").ok_or_else(invalid)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let with_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:80")
    };
    with_port.to_socket_addrs()?.next().ok_or_else(invalid)
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1:0` in front of `upstream`, with `script`.
    pub fn start(upstream: SocketAddr, script: Script) -> io::Result<Self> {
        Self::launch(upstream, script, None)
    }

    /// Starts a proxy on `127.0.0.1:0` in front of `upstream`, with `script`, reaching the
    /// upstream over `link` (a delay each way and a rate cap: a far store on loopback; see
    /// [`Link`]). The link can be changed later ([`set_link`](Self::set_link)).
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::time::{Duration, Instant};
    /// use guideloom_faultproxy::{FaultProxy, Link, Script};
    ///
    /// let upstream = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let addr = upstream.local_addr()?;
    /// std::thread::spawn(move || {
    ///     for mut s in upstream.incoming().flatten() {
    ///         let mut buf = [0u8; 1024];
    ///         let _ = s.read(&mut buf);
    ///         let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
    ///     }
    /// });
    /// let rtt = Duration::from_millis(30);
    /// let proxy = FaultProxy::start_with(addr, Script::pass(), Link::round_trip(rtt))?;
    /// let started = Instant::now();
    /// let mut c = std::net::TcpStream::connect(proxy.addr())?;
    /// c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")?;
    /// let mut out = String::new();
    /// c.read_to_string(&mut out)?;
    /// assert!(out.ends_with("hi"));
    /// assert!(started.elapsed() >= rtt); // at least one round trip, however fast the machine
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_with(upstream: SocketAddr, script: Script, link: Link) -> io::Result<Self> {
        Self::launch(upstream, script, Some(link))
    }

    fn launch(upstream: SocketAddr, script: Script, link: Option<Link>) -> io::Result<Self> {
        let listener = StdListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        // With a link, connections reach the upstream through the relay's own listener.
        let hop = match link {
            Some(link) => {
                let hop = StdListener::bind("127.0.0.1:0")?;
                hop.set_nonblocking(true)?;
                let relay = Arc::new(Relay::new(upstream, link));
                Some((hop.local_addr()?, hop, relay))
            }
            None => None,
        };
        let connect_to = hop.as_ref().map_or(upstream, |(at, _, _)| *at);
        let relay = hop.as_ref().map(|(_, _, relay)| Arc::clone(relay));
        let shared = Arc::new(Shared::new(connect_to, script));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let loop_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("faultproxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let proxy = accept_loop(listener, loop_shared, stopped);
                    let Some((_, hop, relay)) = hop else {
                        return proxy.await;
                    };
                    let Ok(hop) = TcpListener::from_std(hop) else {
                        return;
                    };
                    // The relay ends with the proxy: dropping its future drops its tasks.
                    tokio::select! {
                        () = proxy => {}
                        () = link::serve(hop, relay) => {}
                    }
                });
            })?;
        Ok(FaultProxy {
            addr,
            upstream,
            shared,
            relay,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Starts a proxy in front of the host and port of an `http://` URL (e.g. the nginx or
    /// moto test server's).
    pub fn for_url(url: &str, script: Script) -> io::Result<Self> {
        Self::start(upstream_of(url)?, script)
    }

    /// [`for_url`](Self::for_url) over `link` ([`start_with`](Self::start_with)).
    pub fn for_url_with(url: &str, script: Script, link: Link) -> io::Result<Self> {
        Self::start_with(upstream_of(url)?, script, link)
    }

    /// The link to the upstream: `None` for a proxy started without one.
    pub fn link(&self) -> Option<Link> {
        self.relay.as_ref().map(|r| r.link())
    }

    /// Replaces the link; bytes that arrive from now on cross the new one. Only a proxy
    /// started with a link has one to change: otherwise `InvalidInput`.
    pub fn set_link(&self, link: Link) -> io::Result<()> {
        let relay = self.relay.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "this proxy was started without a link (use FaultProxy::start_with)",
            )
        })?;
        relay.set_link(link);
        Ok(())
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` of the proxy (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `url` (an `http://` URL of the upstream) with its host and port replaced by the
    /// proxy's: the same object, reached through the proxy.
    pub fn proxied(&self, url: &str) -> String {
        let Some(rest) = url.strip_prefix("http://") else {
            return url.to_owned();
        };
        let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        format!("http://{}{}", self.addr, &rest[cut..])
    }

    /// The upstream address.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Replaces the script; requests that arrive from now on follow it.
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }

    /// The counters.
    pub fn stats(&self) -> ProxyStats {
        let s = &self.shared;
        ProxyStats {
            connections: s.connections.load(Ordering::Relaxed),
            requests: s.requests.load(Ordering::Relaxed),
            faults: s.faults.load(Ordering::Relaxed),
            bytes_to_upstream: s.to_upstream.load(Ordering::Relaxed),
            bytes_to_client: s.to_client.load(Ordering::Relaxed),
        }
    }

    /// Every request seen so far, with the fault it got, in arrival order.
    pub fn log(&self) -> Vec<Applied> {
        lock(&self.shared.log).clone()
    }

    /// How many requests seen so far satisfy `select`.
    pub fn count(&self, select: impl Fn(&Applied) -> bool) -> usize {
        lock(&self.shared.log).iter().filter(|a| select(a)).count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: StdListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => {
                    let n = shared.connections.fetch_add(1, Ordering::Relaxed);
                    tasks.spawn(conn::serve(Arc::clone(&shared), n, socket));
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    tasks.shutdown().await;
}

/// A listener on `127.0.0.1:0` that never accepts: a black-holed server. Connects succeed
/// (the kernel completes them into its backlog) and requests are buffered, but nothing is
/// ever read or answered, so a client waits until its own timeout. Dropping it closes the
/// listener (the kernel then resets the pending connections).
#[derive(Debug)]
pub struct BlackHole {
    listener: StdListener,
}

impl BlackHole {
    /// Binds it.
    pub fn start() -> io::Result<Self> {
        Ok(BlackHole {
            listener: StdListener::bind("127.0.0.1:0")?,
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_and_proxied_urls() {
        let up = upstream_of("http://u:p@127.0.0.1:8080/a/b?q=1").unwrap();
        assert_eq!(up, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(upstream_of("http://127.0.0.1/").unwrap().port(), 80);
        assert!(upstream_of("https://127.0.0.1:1/").is_err());
        let p = FaultProxy::start(up, Script::pass()).unwrap();
        let port = p.addr().port();
        assert_eq!(
            p.proxied("http://127.0.0.1:8080/root/?x=1"),
            format!("http://127.0.0.1:{port}/root/?x=1")
        );
        assert_eq!(
            p.proxied("http://127.0.0.1:8080"),
            format!("http://127.0.0.1:{port}")
        );
        assert_eq!(p.url(), format!("http://127.0.0.1:{port}"));
        assert_eq!(p.upstream(), up);
    }
}
