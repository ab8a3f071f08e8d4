//! A small, deliberately misbehaving HTTP/1.1 origin on 127.0.0.1:0 for fault-path tests.
//!
//! It serves `/obj.bin` (the bytes given at start), `/empty.bin` (zero bytes), objects
//! added with [`Origin::put`], and 404 for everything else, honouring single and multi-range requests like nginx unless a [`Mode`]
//! tells it to misbehave. It runs on the test's tokio runtime and stops when dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How the origin answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // the tests use a subset
pub(crate) enum Mode {
    /// Like nginx: 206 single part, multipart for several ranges, 416, 404.
    Honest,
    /// Ignores `Range`: 200 with the whole body.
    IgnoreRange,
    /// 206 whose Content-Range claims the full range but whose body (and Content-Length)
    /// holds only half of it.
    Truncate,
    /// 416 to every ranged GET.
    Always416,
    /// The first `n` requests get this status, then honest answers.
    FailThen(usize, u16),
    /// The first `n` GETs send the head and half the body, then drop the connection.
    DropMidBody(usize),
    /// Content-Length larger than the body sent, then the connection is closed.
    LongContentLength,
    /// Multi-range answers list their parts in reverse order.
    MultipartReordered,
    /// Multi-range answers are one multipart part covering every range.
    MultipartMerged,
    /// Multi-range answers are a plain 206 for the first range only (no multipart).
    SingleForMulti,
    /// Multi-range answers are a plain 206 for one range covering all of them.
    SingleCoveringAll,
    /// 302 to another host.
    RedirectElsewhere,
    /// Accepts the request, never answers.
    Stall,
    /// HEAD without Content-Length (chunked).
    HeadNoLength,
}

/// Objects served, by URL path (`/obj.bin`).
type Files = Mutex<HashMap<String, Arc<Vec<u8>>>>;

/// What the origin saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Requests received.
    pub(crate) requests: AtomicUsize,
    /// Connections accepted.
    pub(crate) connections: AtomicUsize,
    /// `METHOD path range authorization` per request.
    pub(crate) log: Mutex<Vec<String>>,
}

/// A running origin.
pub(crate) struct Origin {
    pub(crate) addr: SocketAddr,
    pub(crate) seen: Arc<Seen>,
    files: Arc<Files>,
    task: JoinHandle<()>,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Origin {
    /// Starts an origin serving `data` as `/obj.bin` in `mode`.
    pub(crate) async fn start(data: Vec<u8>, mode: Mode) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let mut map = HashMap::new();
        map.insert("/obj.bin".to_owned(), Arc::new(data));
        map.insert("/empty.bin".to_owned(), Arc::new(Vec::new()));
        let files = Arc::new(Mutex::new(map));
        let s = Arc::clone(&seen);
        let f = Arc::clone(&files);
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                s.connections.fetch_add(1, Ordering::SeqCst);
                let (files, seen) = (Arc::clone(&f), Arc::clone(&s));
                tokio::spawn(async move {
                    let _ = serve(sock, &files, mode, &seen).await;
                });
            }
        });
        Origin {
            addr,
            seen,
            files,
            task,
        }
    }

    /// Adds (or replaces) the object served at `/{name}`.
    pub(crate) fn put(&self, name: &str, bytes: &[u8]) {
        self.files
            .lock()
            .unwrap()
            .insert(format!("/{name}"), Arc::new(bytes.to_vec()));
    }

    /// `http://127.0.0.1:PORT/`.
    pub(crate) fn base(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub(crate) fn requests(&self) -> usize {
        self.seen.requests.load(Ordering::SeqCst)
    }

    pub(crate) fn connections(&self) -> usize {
        self.seen.connections.load(Ordering::SeqCst)
    }

    pub(crate) fn log(&self) -> Vec<String> {
        self.seen.log.lock().unwrap().clone()
    }
}

struct Req {
    method: String,
    path: String,
    range: Option<String>,
}

fn head(status: &str, headers: &[(&str, String)]) -> Vec<u8> {
    let mut s = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// Resolves a `bytes=` spec against `len`; `None` when malformed, empty when unsatisfiable.
fn resolve(spec: &str, len: u64) -> Option<Vec<(u64, u64)>> {
    let list = spec.trim().strip_prefix("bytes=")?;
    let mut out = Vec::new();
    for item in list.split(',') {
        let (a, b) = item.trim().split_once('-')?;
        let (start, end) = if a.is_empty() {
            let n: u64 = b.parse().ok()?;
            if n == 0 {
                continue;
            }
            (len.saturating_sub(n), len)
        } else {
            let a: u64 = a.parse().ok()?;
            let e = if b.is_empty() {
                len
            } else {
                b.parse::<u64>().ok()?.saturating_add(1).min(len)
            };
            (a, e)
        };
        if start < end {
            out.push((start, end));
        }
    }
    Some(out)
}

async fn serve(sock: TcpStream, files: &Files, mode: Mode, seen: &Seen) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    let mut sock = BufReader::new(sock);
    loop {
        let mut line = String::new();
        if sock.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut range = None;
        let mut auth = String::new();
        loop {
            let mut h = String::new();
            if sock.read_line(&mut h).await? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("range") {
                    range = Some(v.trim().to_owned());
                }
                if k.eq_ignore_ascii_case("authorization") {
                    auth = v.trim().to_owned();
                }
            }
        }
        let n = seen.requests.fetch_add(1, Ordering::SeqCst);
        seen.log.lock().unwrap().push(format!(
            "{method} {path} {} {auth}",
            range.clone().unwrap_or_default()
        ));
        let req = Req {
            method,
            path,
            range,
        };
        let object = files
            .lock()
            .unwrap()
            .get(req.path.split('?').next().unwrap_or_default())
            .cloned();
        let keep = respond(
            sock.get_mut(),
            &req,
            object.as_deref().map(Vec::as_slice),
            mode,
            n,
        )
        .await?;
        if !keep {
            sock.get_mut().shutdown().await.ok();
            return Ok(());
        }
    }
}

/// Writes one answer; returns whether the connection stays open.
async fn respond(
    sock: &mut TcpStream,
    req: &Req,
    object: Option<&[u8]>,
    mode: Mode,
    n: usize,
) -> std::io::Result<bool> {
    let Some(object) = object else {
        // A small error page, like real origins send.
        let page = b"<html><body><h1>404 Not Found</h1></body></html>\n";
        let h = head(
            "404 Not Found",
            &[
                ("Content-Type", "text/html".into()),
                ("Content-Length", page.len().to_string()),
            ],
        );
        sock.write_all(&h).await?;
        if req.method != "HEAD" {
            sock.write_all(page).await?;
        }
        return Ok(true);
    };
    let len = object.len() as u64;
    match mode {
        Mode::FailThen(k, status) if n < k => {
            let h = head(
                &format!("{status} Failing"),
                &[("Content-Length", "4".into())],
            );
            sock.write_all(&h).await?;
            sock.write_all(b"oops").await?;
            return Ok(true);
        }
        Mode::RedirectElsewhere => {
            let h = head(
                "302 Found",
                &[
                    (
                        "Location",
                        "http://other-host.invalid/obj.bin?token=SECRET".into(),
                    ),
                    ("Content-Length", "0".into()),
                ],
            );
            sock.write_all(&h).await?;
            return Ok(true);
        }
        Mode::Stall => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Ok(false);
        }
        _ => {}
    }
    if req.method == "HEAD" {
        let h = if mode == Mode::HeadNoLength {
            head("200 OK", &[("Transfer-Encoding", "chunked".into())])
        } else {
            head(
                "200 OK",
                &[
                    ("Content-Length", len.to_string()),
                    ("Accept-Ranges", "bytes".into()),
                ],
            )
        };
        sock.write_all(&h).await?;
        if mode == Mode::HeadNoLength {
            return Ok(false);
        }
        return Ok(true);
    }
    let Some(spec) = &req.range else {
        sock.write_all(&head("200 OK", &[("Content-Length", len.to_string())]))
            .await?;
        sock.write_all(object).await?;
        return Ok(true);
    };
    if mode == Mode::IgnoreRange {
        sock.write_all(&head("200 OK", &[("Content-Length", len.to_string())]))
            .await?;
        sock.write_all(object).await?;
        return Ok(true);
    }
    let ranges = resolve(spec, len).unwrap_or_default();
    if ranges.is_empty() || mode == Mode::Always416 {
        let h = head(
            "416 Range Not Satisfiable",
            &[
                ("Content-Range", format!("bytes */{len}")),
                ("Content-Length", "0".into()),
            ],
        );
        sock.write_all(&h).await?;
        return Ok(true);
    }
    let slice = |(a, b): (u64, u64)| &object[a as usize..b as usize];
    if ranges.len() == 1 || matches!(mode, Mode::SingleForMulti | Mode::SingleCoveringAll) {
        let (a, b) = if mode == Mode::SingleCoveringAll {
            let start = ranges.iter().map(|p| p.0).min().unwrap_or(0);
            (start, ranges.iter().map(|p| p.1).max().unwrap_or(0))
        } else {
            ranges[0]
        };
        let cr = format!("bytes {a}-{}/{len}", b - 1);
        let body = slice((a, b));
        match mode {
            Mode::Truncate => {
                let half = &body[..body.len() / 2];
                let h = head(
                    "206 Partial Content",
                    &[
                        ("Content-Range", cr),
                        ("Content-Length", half.len().to_string()),
                    ],
                );
                sock.write_all(&h).await?;
                sock.write_all(half).await?;
                Ok(true)
            }
            Mode::DropMidBody(k) if n < k => {
                let h = head(
                    "206 Partial Content",
                    &[
                        ("Content-Range", cr),
                        ("Content-Length", body.len().to_string()),
                    ],
                );
                sock.write_all(&h).await?;
                sock.write_all(&body[..body.len() / 2]).await?;
                sock.flush().await?;
                Ok(false)
            }
            Mode::LongContentLength => {
                let h = head(
                    "206 Partial Content",
                    &[
                        ("Content-Range", cr),
                        ("Content-Length", (body.len() + 100).to_string()),
                    ],
                );
                sock.write_all(&h).await?;
                sock.write_all(body).await?;
                Ok(false)
            }
            _ => {
                let h = head(
                    "206 Partial Content",
                    &[
                        ("Content-Range", cr),
                        ("Content-Length", body.len().to_string()),
                    ],
                );
                sock.write_all(&h).await?;
                sock.write_all(body).await?;
                Ok(true)
            }
        }
    } else {
        let mut parts = ranges.clone();
        match mode {
            Mode::MultipartReordered => parts.reverse(),
            Mode::MultipartMerged => {
                let start = parts.iter().map(|p| p.0).min().unwrap_or(0);
                let end = parts.iter().map(|p| p.1).max().unwrap_or(0);
                parts = vec![(start, end)];
            }
            _ => {}
        }
        let boundary = "3d6b6a416f9b5";
        let mut body = b"preamble to ignore\r\n".to_vec();
        for &(a, b) in &parts {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Type: application/octet-stream\r\n\
                     Content-Range: bytes {a}-{}/{len}\r\n\r\n",
                    b - 1
                )
                .as_bytes(),
            );
            body.extend_from_slice(slice((a, b)));
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let h = head(
            "206 Partial Content",
            &[
                (
                    "Content-Type",
                    format!("multipart/byteranges; boundary={boundary}"),
                ),
                ("Content-Length", body.len().to_string()),
            ],
        );
        sock.write_all(&h).await?;
        sock.write_all(&body).await?;
        Ok(true)
    }
}
