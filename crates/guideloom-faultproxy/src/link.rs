//! A far store on loopback: [`Link`], a one-way delay each way and a rate cap between the
//! proxy and its upstream.
//!
//! No netem here (the kernel has no `sch_netem`), so the proxy carries the link itself. When a
//! [`FaultProxy`](crate::FaultProxy) has a link, its connections reach the upstream through a
//! relay on the proxy's own thread: every chunk read from one side is written to the other
//! `delay` after it arrived (a delay line, so a long response is late once, not once per
//! chunk), and then only as fast as the direction's rate allows. The rate is the link's, shared
//! by every connection in that direction, as one network path would be: two downloads at
//! once each get about half. Faults are chosen on the client's side of the link, so a fault
//! means the same with a link or without.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::conn::lock;

/// Largest chunk the link moves at once: the rate's granularity (16 KiB at 10 MB/s is
/// 1.6 ms).
const CHUNK: usize = 16 * 1024;

/// Chunks in flight per direction of one connection (4 MiB): room for a bandwidth-delay
/// product of 100 MB/s × 40 ms; past it the relay stops reading and TCP pushes back.
const IN_FLIGHT: usize = 256;

/// A network link between the proxy and its upstream: a one-way delay and an optional rate
/// cap in each direction. The default is no link at all (loopback as it is).
///
/// ```
/// use std::time::Duration;
/// use guideloom_faultproxy::Link;
///
/// // S3 from a nearby region: 20 ms round trips, 100 MB/s down, 20 MB/s up.
/// let far = Link::round_trip(Duration::from_millis(20))
///     .with_rate_to_client(100_000_000)
///     .with_rate_to_upstream(20_000_000);
/// assert_eq!(far.delay_to_upstream(), Duration::from_millis(10));
/// assert_eq!(far.rate_to_client(), Some(100_000_000));
/// assert!(Link::default().is_none());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Link {
    delay_to_upstream: Duration,
    delay_to_client: Duration,
    rate_to_upstream: Option<u64>,
    rate_to_client: Option<u64>,
}

impl Link {
    /// A link whose round trip is `rtt` (half of it each way), without a rate cap.
    pub fn round_trip(rtt: Duration) -> Self {
        Link::default().with_delay(rtt / 2, rtt - rtt / 2)
    }

    /// The one-way delays: of requests on their way to the upstream, and of responses on
    /// their way back.
    #[must_use]
    pub fn with_delay(mut self, to_upstream: Duration, to_client: Duration) -> Self {
        self.delay_to_upstream = to_upstream;
        self.delay_to_client = to_client;
        self
    }

    /// Caps what reaches the client (responses) at `bytes_per_second`, over all connections.
    ///
    /// # Panics
    /// If `bytes_per_second` is 0.
    #[must_use]
    pub fn with_rate_to_client(mut self, bytes_per_second: u64) -> Self {
        assert!(bytes_per_second > 0, "a rate of 0 would never deliver");
        self.rate_to_client = Some(bytes_per_second);
        self
    }

    /// Caps what reaches the upstream (requests and their bodies) at `bytes_per_second`, over
    /// all connections.
    ///
    /// # Panics
    /// If `bytes_per_second` is 0.
    #[must_use]
    pub fn with_rate_to_upstream(mut self, bytes_per_second: u64) -> Self {
        assert!(bytes_per_second > 0, "a rate of 0 would never deliver");
        self.rate_to_upstream = Some(bytes_per_second);
        self
    }

    /// The one-way delay of requests.
    pub fn delay_to_upstream(&self) -> Duration {
        self.delay_to_upstream
    }

    /// The one-way delay of responses.
    pub fn delay_to_client(&self) -> Duration {
        self.delay_to_client
    }

    /// The cap on requests' bytes per second, if any.
    pub fn rate_to_upstream(&self) -> Option<u64> {
        self.rate_to_upstream
    }

    /// The cap on responses' bytes per second, if any.
    pub fn rate_to_client(&self) -> Option<u64> {
        self.rate_to_client
    }

    /// Whether this link adds nothing (no delay, no cap).
    pub fn is_none(&self) -> bool {
        *self == Link::default()
    }
}

/// The pace of one direction of the link, shared by its connections: when the link is next
/// free to send.
#[derive(Debug)]
struct Pace {
    free_at: Mutex<Instant>,
}

impl Pace {
    fn new() -> Self {
        Pace {
            free_at: Mutex::new(Instant::now()),
        }
    }

    /// Waits until `n` bytes have had their turn on a link of `rate` bytes per second.
    async fn send(&self, n: usize, rate: Option<u64>) {
        let Some(rate) = rate else { return };
        let cost = Duration::from_secs_f64(n as f64 / rate as f64);
        let done = {
            let mut free_at = lock(&self.free_at);
            let start = (*free_at).max(Instant::now());
            *free_at = start + cost;
            *free_at
        };
        tokio::time::sleep_until(done).await;
    }
}

/// The relay that carries a proxy's upstream connections over its [`Link`].
#[derive(Debug)]
pub(crate) struct Relay {
    upstream: SocketAddr,
    link: Mutex<Link>,
    to_upstream: Pace,
    to_client: Pace,
}

impl Relay {
    pub(crate) fn new(upstream: SocketAddr, link: Link) -> Self {
        Relay {
            upstream,
            link: Mutex::new(link),
            to_upstream: Pace::new(),
            to_client: Pace::new(),
        }
    }

    pub(crate) fn link(&self) -> Link {
        *lock(&self.link)
    }

    /// Replaces the link; chunks that arrive from now on cross the new one.
    pub(crate) fn set_link(&self, link: Link) {
        *lock(&self.link) = link;
    }
}

/// Accepts the proxy's own upstream connections on `listener` and carries each over the link
/// until the future is dropped (the proxy stops): its tasks, and their sockets, go with it.
pub(crate) async fn serve(listener: TcpListener, relay: Arc<Relay>) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((near, _)) => {
                    tasks.spawn(carry(Arc::clone(&relay), near));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

/// Which way a chunk travels.
#[derive(Debug, Clone, Copy)]
enum Way {
    ToUpstream,
    ToClient,
}

/// What crosses one direction of a connection.
enum Piece {
    /// Bytes, to be written at the instant.
    Bytes(Instant, Vec<u8>),
    /// The sender closed its side (FIN), noticed at the instant.
    End(Instant),
    /// The sender's side failed (e.g. reset): reset the other side too.
    Failed,
}

/// One connection of the proxy to its upstream, carried over the link.
async fn carry(relay: Arc<Relay>, near: TcpStream) {
    let Ok(far) = TcpStream::connect(relay.upstream).await else {
        let _ = near.set_zero_linger();
        return;
    };
    let _ = near.set_nodelay(true);
    let _ = far.set_nodelay(true);
    let (near_read, near_write) = near.into_split();
    let (far_read, far_write) = far.into_split();
    tokio::join!(
        direction(&relay, Way::ToUpstream, near_read, far_write),
        direction(&relay, Way::ToClient, far_read, near_write),
    );
}

/// One direction: a reader stamps each chunk with the instant it is due, a writer delivers
/// them in order at that instant and at the link's pace.
async fn direction(relay: &Relay, way: Way, mut from: OwnedReadHalf, mut to: OwnedWriteHalf) {
    let (tx, mut rx) = mpsc::channel::<Piece>(IN_FLIGHT);
    let read = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let piece = match from.read(&mut buf).await {
                Ok(0) => Piece::End(due(relay, way)),
                Ok(n) => Piece::Bytes(due(relay, way), buf[..n].to_vec()),
                Err(_) => Piece::Failed,
            };
            let last = !matches!(piece, Piece::Bytes(..));
            if tx.send(piece).await.is_err() || last {
                return;
            }
        }
    };
    let write = async move {
        let pace = match way {
            Way::ToUpstream => &relay.to_upstream,
            Way::ToClient => &relay.to_client,
        };
        while let Some(piece) = rx.recv().await {
            match piece {
                Piece::Bytes(at, bytes) => {
                    tokio::time::sleep_until(at).await;
                    let rate = match way {
                        Way::ToUpstream => relay.link().rate_to_upstream,
                        Way::ToClient => relay.link().rate_to_client,
                    };
                    pace.send(bytes.len(), rate).await;
                    if to.write_all(&bytes).await.is_err() {
                        let _ = to.as_ref().set_zero_linger();
                        return;
                    }
                }
                Piece::End(at) => {
                    tokio::time::sleep_until(at).await;
                    let _ = to.shutdown().await;
                    return;
                }
                Piece::Failed => {
                    let _ = to.as_ref().set_zero_linger();
                    return;
                }
            }
        }
    };
    tokio::join!(read, write);
}

/// When a piece read now is due on the other side.
fn due(relay: &Relay, way: Way) -> Instant {
    let link = relay.link();
    let delay = match way {
        Way::ToUpstream => link.delay_to_upstream,
        Way::ToClient => link.delay_to_client,
    };
    Instant::now() + delay
}
