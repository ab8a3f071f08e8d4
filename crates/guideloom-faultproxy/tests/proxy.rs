//! The proxy against a tiny HTTP/1.1 upstream (and a raw echo server) on loopback: what each
//! fault does to the bytes a raw client sees, what reaches the upstream, the counters, and a
//! clean stop; the link's delays and rate caps. Every test runs under a generous hang
//! detector; no wall-clock upper bounds (a "nothing arrives within 300 ms" check is only made
//! where the proxy would otherwise wait an hour or forever), and the link's tests assert only
//! that it made things at least as slow as it should.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use guideloom_faultproxy::{BlackHole, Fault, FaultProxy, Link, Script};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const HANG: Duration = Duration::from_secs(60);
const QUIET: Duration = Duration::from_millis(300);

/// What the upstream saw.
#[derive(Debug, Default)]
struct Seen {
    /// Complete requests: (method, path, body length).
    requests: Vec<(String, String, usize)>,
    /// Bytes read, all connections.
    bytes: usize,
    /// Connections accepted, and closed by the peer.
    accepted: usize,
    closed: usize,
}

/// A keep-alive HTTP/1.1 upstream: `GET /len/N` answers N bytes `b'a' + i % 26`; any other
/// request answers `ok`.
async fn upstream() -> (SocketAddr, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            s.lock().unwrap().accepted += 1;
            tokio::spawn(serve(sock, Arc::clone(&s)));
        }
    });
    (addr, seen)
}

fn body_of(path: &str) -> Vec<u8> {
    match path
        .strip_prefix("/len/")
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) => (0..n)
            .map(|i| b"abcdefghijklmnopqrstuvwxyz"[i % 26])
            .collect(),
        None => b"ok".to_vec(),
    }
}

async fn serve(mut sock: TcpStream, seen: Arc<Mutex<Seen>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        seen.lock().unwrap().bytes += n;
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() < end + 4 + len {
                break;
            }
            let mut words = head.split_whitespace();
            let method = words.next().unwrap_or_default().to_owned();
            let path = words.next().unwrap_or_default().to_owned();
            buf.drain(..end + 4 + len);
            let body = body_of(&path);
            seen.lock()
                .unwrap()
                .requests
                .push((method.clone(), path, len));
            let mut resp =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
            if method != "HEAD" {
                resp.extend_from_slice(&body);
            }
            if sock.write_all(&resp).await.is_err() {
                return;
            }
        }
    }
    seen.lock().unwrap().closed += 1;
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

fn put(path: &str, len: usize) -> Vec<u8> {
    let mut r =
        format!("PUT {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n").into_bytes();
    r.extend(std::iter::repeat_n(b'x', len));
    r
}

/// Reads one response whose body has a Content-Length; `Err` with what arrived when the
/// connection ends first.
async fn response(c: &mut TcpStream) -> Result<(String, Vec<u8>), (Vec<u8>, Option<ErrorKind>)> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= end + 4 + len {
                let body = got[end + 4..end + 4 + len].to_vec();
                return Ok((head, body));
            }
        }
        match c.read(&mut chunk).await {
            Ok(0) => return Err((got, None)),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) => return Err((got, Some(e.kind()))),
        }
    }
}

async fn connect(p: &FaultProxy) -> TcpStream {
    TcpStream::connect(p.addr()).await.unwrap()
}

/// Waits (under the hang detector) until `cond` holds for what the upstream saw.
async fn until(seen: &Arc<Mutex<Seen>>, cond: impl Fn(&Seen) -> bool) {
    while !cond(&seen.lock().unwrap()) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn guard<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(HANG, f).await.expect("hang detector");
        });
}

#[test]
fn pass_relays_keep_alive_requests_and_counts_bytes() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start(up, Script::pass()).unwrap();
        let mut c = connect(&p).await;
        let (r1, r2) = (get("/len/1000"), put("/obj", 300));
        c.write_all(&r1).await.unwrap();
        let (head, body) = response(&mut c).await.unwrap();
        assert!(head.starts_with("HTTP/1.1 200"));
        assert_eq!(body, body_of("/len/1000"));
        c.write_all(&r2).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, b"ok");
        let s = p.stats();
        assert_eq!((s.connections, s.requests, s.faults), (1, 2, 0));
        assert_eq!(s.bytes_to_upstream, (r1.len() + r2.len()) as u64);
        let resp_len =
            |n: usize| format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").len() + n;
        assert_eq!(s.bytes_to_client, (resp_len(1000) + resp_len(2)) as u64);
        let log = p.log();
        assert_eq!(log.len(), 2);
        assert_eq!(
            (
                log[1].exchange.method.as_str(),
                log[1].exchange.on_connection
            ),
            ("PUT", 1)
        );
        assert_eq!(seen.lock().unwrap().requests.len(), 2);
        assert_eq!(seen.lock().unwrap().requests[1].2, 300);
    });
}

#[test]
fn reset_after_response_bytes_cuts_the_response_with_a_reset() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start(
            up,
            Script::requests([
                Fault::ResetAfterResponseBytes(50),
                Fault::ResetAfterResponseBytes(0),
            ]),
        )
        .unwrap();
        let mut c = connect(&p).await;
        c.write_all(&get("/len/1000")).await.unwrap();
        let (got, err) = response(&mut c).await.unwrap_err();
        assert_eq!(got.len(), 50);
        assert_eq!(err, Some(ErrorKind::ConnectionReset));

        // 0 bytes: the upstream answered (it acted on the request), the client saw nothing.
        let mut c = connect(&p).await;
        c.write_all(&put("/stored", 10)).await.unwrap();
        let (got, err) = response(&mut c).await.unwrap_err();
        assert!(got.is_empty());
        assert_eq!(err, Some(ErrorKind::ConnectionReset));
        assert_eq!(seen.lock().unwrap().requests.len(), 2);
        assert_eq!(p.stats().faults, 2);
    });
}

#[test]
fn reset_after_request_bytes_never_delivers_the_whole_request() {
    guard(async {
        let (up, seen) = upstream().await;
        let p =
            FaultProxy::start(up, Script::requests([Fault::ResetAfterRequestBytes(100)])).unwrap();
        let mut c = connect(&p).await;
        let req = put("/obj", 1000);
        let _ = c.write_all(&req).await;
        let (got, err) = response(&mut c).await.unwrap_err();
        assert!(got.is_empty());
        assert_eq!(err, Some(ErrorKind::ConnectionReset));
        until(&seen, |s| s.closed == 1).await;
        let s = seen.lock().unwrap();
        assert!(s.bytes <= 100, "{}", s.bytes);
        assert!(s.requests.is_empty());
        assert_eq!(p.stats().bytes_to_upstream, 100);
    });
}

#[test]
fn stall_reads_and_never_answers() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start(up, Script::requests([Fault::Stall])).unwrap();
        let mut c = connect(&p).await;
        c.write_all(&put("/obj", 5000)).await.unwrap();
        let mut b = [0u8; 16];
        assert!(tokio::time::timeout(QUIET, c.read(&mut b)).await.is_err());
        drop(c);
        // The next connection passes; the stalled request never reached the upstream.
        let mut c = connect(&p).await;
        c.write_all(&get("/len/3")).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, b"abc");
        let s = seen.lock().unwrap();
        assert_eq!((s.accepted, s.requests.len()), (1, 1));
    });
}

#[test]
fn drip_sends_one_byte_per_interval() {
    guard(async {
        let (up, _) = upstream().await;
        let p = FaultProxy::start(
            up,
            Script::requests([
                Fault::Drip(Duration::from_secs(3600)),
                Fault::Drip(Duration::from_millis(1)),
            ]),
        )
        .unwrap();
        let mut c = connect(&p).await;
        c.write_all(&get("/len/10")).await.unwrap();
        let mut b = [0u8; 64];
        assert_eq!(c.read(&mut b).await.unwrap(), 1);
        assert_eq!(b[0], b'H');
        assert!(tokio::time::timeout(QUIET, c.read(&mut b)).await.is_err());

        let mut c = connect(&p).await;
        c.write_all(&get("/len/20")).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, body_of("/len/20"));
    });
}

#[test]
fn close_before_headers_closes_cleanly_after_the_upstream_acted() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start(up, Script::requests([Fault::CloseBeforeHeaders])).unwrap();
        let mut c = connect(&p).await;
        c.write_all(&put("/obj", 64)).await.unwrap();
        let (got, err) = response(&mut c).await.unwrap_err();
        assert!(got.is_empty());
        assert_eq!(err, None, "a clean EOF, not a reset");
        assert_eq!(
            seen.lock().unwrap().requests,
            [("PUT".into(), "/obj".into(), 64)]
        );
    });
}

#[test]
fn status_bursts_answer_without_forwarding() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start(
            up,
            Script::requests([Fault::unavailable(2), Fault::internal_error()]),
        )
        .unwrap();
        let mut c = connect(&p).await;
        c.write_all(&put("/obj", 2000)).await.unwrap();
        let (head, body) = response(&mut c).await.unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable"),
            "{head}"
        );
        assert!(head.contains("Retry-After: 2"), "{head}");
        assert!(head.contains("Connection: close"), "{head}");
        assert!(String::from_utf8_lossy(&body).contains("HTTP 503"));
        let mut rest = Vec::new();
        assert_eq!(
            c.read_to_end(&mut rest).await.unwrap(),
            0,
            "closed after the answer"
        );

        let mut c = connect(&p).await;
        c.write_all(&get("/len/5")).await.unwrap();
        let (head, _) = response(&mut c).await.unwrap();
        assert!(head.starts_with("HTTP/1.1 500"), "{head}");
        assert!(!head.contains("Retry-After"), "{head}");

        let mut c = connect(&p).await;
        c.write_all(&get("/len/5")).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, b"abcde");
        assert_eq!(seen.lock().unwrap().requests.len(), 1);
        let s = p.stats();
        assert_eq!((s.connections, s.requests, s.faults), (3, 3, 2));
    });
}

#[test]
fn truncate_body_keeps_the_head_and_k_bytes() {
    guard(async {
        let (up, _) = upstream().await;
        let p = FaultProxy::start(up, Script::requests([Fault::TruncateBody(10)])).unwrap();
        let mut c = connect(&p).await;
        c.write_all(&get("/len/100")).await.unwrap();
        let (got, err) = response(&mut c).await.unwrap_err();
        assert_eq!(err, None);
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        assert_eq!(&got[..head.len()], head);
        assert_eq!(&got[head.len()..], &body_of("/len/100")[..10]);
    });
}

#[test]
fn connection_scripts_and_matching_scripts() {
    guard(async {
        let (up, _) = upstream().await;
        let p = FaultProxy::start(
            up,
            Script::connections([Fault::Pass, Fault::unavailable(0)]),
        )
        .unwrap();
        let mut c = connect(&p).await;
        for _ in 0..3 {
            c.write_all(&get("/len/2")).await.unwrap();
            assert_eq!(response(&mut c).await.unwrap().1, b"ab");
        }
        let mut c2 = connect(&p).await;
        c2.write_all(&get("/len/2")).await.unwrap();
        assert!(
            response(&mut c2)
                .await
                .unwrap()
                .0
                .starts_with("HTTP/1.1 503")
        );
        // The first connection's later requests still pass.
        c.write_all(&get("/len/2")).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, b"ab");

        p.set_script(Script::matching(
            |e| e.method == "PUT",
            [Fault::internal_error()],
        ));
        c.write_all(&get("/len/1")).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, b"a");
        c.write_all(&put("/x", 3)).await.unwrap();
        assert!(
            response(&mut c)
                .await
                .unwrap()
                .0
                .starts_with("HTTP/1.1 500")
        );
        assert_eq!(p.count(|a| !a.fault.is_pass()), 2);
        assert_eq!(p.count(|a| a.exchange.connection == 0), 6);
    });
}

#[test]
fn non_http_is_relayed_raw() {
    guard(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut b = [0u8; 1024];
            while let Ok(n) = s.read(&mut b).await {
                if n == 0 || s.write_all(&b[..n]).await.is_err() {
                    break;
                }
            }
        });
        let p = FaultProxy::start(up, Script::always(Fault::Stall)).unwrap();
        let mut c = connect(&p).await;
        let msg = b"\x16\x03\x01 not http at all\r\n\r\n";
        c.write_all(msg).await.unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back).await.unwrap();
        assert_eq!(back, msg);
        assert_eq!(
            p.stats().requests,
            0,
            "no request was framed, so no fault applied"
        );
    });
}

#[test]
fn drop_stops_the_proxy_and_closes_every_socket() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start(
            up,
            Script::requests([
                Fault::Pass,
                Fault::Stall,
                Fault::Drip(Duration::from_secs(3600)),
            ]),
        )
        .unwrap();
        let addr = p.addr();
        let mut idle = connect(&p).await;
        idle.write_all(&get("/len/1")).await.unwrap();
        response(&mut idle).await.unwrap();
        let mut stalled = connect(&p).await;
        stalled.write_all(&get("/len/1")).await.unwrap();
        let mut dripping = connect(&p).await;
        dripping.write_all(&get("/len/100")).await.unwrap();
        let mut b = [0u8; 8];
        assert_eq!(dripping.read(&mut b).await.unwrap(), 1);
        until(&seen, |s| s.accepted == 2).await;

        drop(p);
        for c in [&mut idle, &mut stalled, &mut dripping] {
            let mut rest = Vec::new();
            // Closed (EOF or reset), not left hanging.
            let _ = c.read_to_end(&mut rest).await;
        }
        until(&seen, |s| s.closed == 2).await;
        let refused = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    });
}

#[test]
fn black_hole_accepts_nothing() {
    guard(async {
        let hole = BlackHole::start().unwrap();
        let addr = hole.addr();
        assert!(hole.url().ends_with(&addr.port().to_string()));
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&get("/len/1")).await.unwrap();
        let mut b = [0u8; 8];
        assert!(tokio::time::timeout(QUIET, c.read(&mut b)).await.is_err());
        drop(hole);
        let refused = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    });
}

// ---------------------------------------------------------------------------------------------
// The link: delays and rate caps. Only lower bounds are asserted (a loaded machine is slower,
// never faster than the link allows).

/// A request and its response over a link pay at least one round trip, and the bytes come
/// through intact; keep-alive requests each pay theirs.
#[test]
fn a_link_delays_each_way() {
    guard(async {
        let (up, seen) = upstream().await;
        let (to_up, to_client) = (Duration::from_millis(40), Duration::from_millis(60));
        let link = Link::default().with_delay(to_up, to_client);
        let p = FaultProxy::start_with(up, Script::pass(), link).unwrap();
        assert_eq!(p.link(), Some(link));
        assert_eq!(p.upstream(), up);
        let mut c = connect(&p).await;
        for _ in 0..3 {
            let started = Instant::now();
            c.write_all(&get("/len/100000")).await.unwrap();
            let (head, body) = response(&mut c).await.unwrap();
            assert!(head.starts_with("HTTP/1.1 200"));
            assert_eq!(body, body_of("/len/100000"));
            let took = started.elapsed();
            assert!(took >= to_up + to_client, "a round trip took {took:?}");
        }
        assert_eq!(seen.lock().unwrap().requests.len(), 3);
        assert_eq!(p.stats().requests, 3);
    });
}

/// A rate cap holds one download to it, and two downloads at once share it (the link's, not
/// each connection's).
#[test]
fn a_link_caps_the_rate_over_all_connections() {
    guard(async {
        let (up, _) = upstream().await;
        let rate: u64 = 4 << 20;
        let p = FaultProxy::start_with(
            up,
            Script::pass(),
            Link::default().with_rate_to_client(rate),
        )
        .unwrap();
        let len = 1 << 20;
        let least = |bytes: u64| Duration::from_secs_f64(bytes as f64 / rate as f64 * 0.98);

        let started = Instant::now();
        let mut c = connect(&p).await;
        c.write_all(&get(&format!("/len/{len}"))).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1.len(), len);
        let one = started.elapsed();
        assert!(one >= least(len as u64), "1 MiB at 4 MiB/s took {one:?}");

        let started = Instant::now();
        let (mut a, mut b) = (connect(&p).await, connect(&p).await);
        a.write_all(&get(&format!("/len/{len}"))).await.unwrap();
        b.write_all(&get(&format!("/len/{len}"))).await.unwrap();
        let (ra, rb) = tokio::join!(response(&mut a), response(&mut b));
        assert_eq!(ra.unwrap().1, body_of(&format!("/len/{len}")));
        assert_eq!(rb.unwrap().1.len(), len);
        let two = started.elapsed();
        assert!(
            two >= least(2 * len as u64),
            "2 × 1 MiB at 4 MiB/s took {two:?}"
        );
    });
}

/// Uploads are capped on their own way; faults still apply in front of the link; the link can
/// be changed on a running proxy, and a proxy without one refuses.
#[test]
fn uploads_faults_and_a_changed_link() {
    guard(async {
        let (up, seen) = upstream().await;
        let rate: u64 = 1 << 20;
        let link = Link::default().with_rate_to_upstream(rate);
        let p =
            FaultProxy::start_with(up, Script::requests([Fault::unavailable(1)]), link).unwrap();
        let mut c = connect(&p).await;
        c.write_all(&put("/obj", 10)).await.unwrap();
        let (head, _) = response(&mut c).await.unwrap();
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        assert!(
            seen.lock().unwrap().requests.is_empty(),
            "a 503 is not forwarded"
        );

        let len = 512 << 10;
        let started = Instant::now();
        let mut c = connect(&p).await;
        c.write_all(&put("/obj", len)).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, b"ok");
        let took = started.elapsed();
        let least = Duration::from_secs_f64(len as f64 / rate as f64 * 0.98);
        assert!(took >= least, "512 KiB up at 1 MiB/s took {took:?}");
        assert_eq!(seen.lock().unwrap().requests[0].2, len);

        let far = Link::round_trip(Duration::from_millis(80));
        p.set_link(far).unwrap();
        assert_eq!(p.link(), Some(far));
        let started = Instant::now();
        c.write_all(&get("/len/10")).await.unwrap();
        assert_eq!(response(&mut c).await.unwrap().1, body_of("/len/10"));
        assert!(started.elapsed() >= Duration::from_millis(80));

        let plain = FaultProxy::start(up, Script::pass()).unwrap();
        assert_eq!(plain.link(), None);
        let refused = plain.set_link(far).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::InvalidInput);
    });
}

/// Dropping a proxy with a link closes the connections carried over it too.
#[test]
fn drop_stops_the_link_too() {
    guard(async {
        let (up, seen) = upstream().await;
        let p = FaultProxy::start_with(
            up,
            Script::pass(),
            Link::round_trip(Duration::from_millis(10)),
        )
        .unwrap();
        let mut c = connect(&p).await;
        c.write_all(&get("/len/1")).await.unwrap();
        response(&mut c).await.unwrap();
        until(&seen, |s| s.accepted == 1).await;
        drop(p);
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest).await;
        until(&seen, |s| s.closed == 1).await;
    });
}
