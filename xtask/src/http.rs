//! A minimal HTTP/1.1 client over `std::net`, enough to health-check loopback servers.
//!
//! One request per connection (`Connection: close`), the response read to EOF. No chunked
//! decoding, no TLS: the servers it talks to are ours, on 127.0.0.1.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// A parsed response.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` with `headers` to `127.0.0.1:port` and reads the whole response.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> io::Result<Response> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         User-Agent: guideloom-xtask\r\nContent-Length: 0\r\n"
    );
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw, method == "HEAD")
}

/// Parses a complete raw response.
fn parse(raw: &[u8], head_only: bool) -> io::Result<Response> {
    let invalid = |msg: &str| io::Error::new(io::ErrorKind::InvalidData, msg.to_owned());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("response ended before its header did"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| invalid("header is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(invalid("not an HTTP/1.x status line"));
    }
    let status = parts
        .next()
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("status line has no status code"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut response = Response {
        status,
        headers,
        body: if head_only {
            Vec::new()
        } else {
            raw[end + 4..].to_vec()
        },
    };
    if let Some(len) = response
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        if response.body.len() < len && !head_only {
            return Err(invalid("body shorter than Content-Length"));
        }
        response.body.truncate(len);
    }
    Ok(response)
}

/// A port on 127.0.0.1 that was free a moment ago (bind port 0, read it, release it).
///
/// Another process could take it before the server binds; servers retry on that.
pub(crate) fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn parses_status_headers_and_body() {
        let raw = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\n\
                    content-range: bytes 1-3/10\r\n\r\nabcXYZ";
        let response = parse(raw, false).unwrap();
        assert_eq!(response.status, 206);
        assert_eq!(response.header("Content-Range"), Some("bytes 1-3/10"));
        assert_eq!(response.body, b"abc");
    }

    #[test]
    fn rejects_garbage_and_truncated_bodies() {
        assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n", false).is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", false).is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", false).is_err());
        // A HEAD response announces a length it never sends.
        let head = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).unwrap();
        assert_eq!(head.status, 200);
        assert!(head.body.is_empty());
    }

    #[test]
    fn talks_to_a_real_socket() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "client closed before sending a full request");
                seen.extend_from_slice(&buf[..n]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            String::from_utf8(seen).unwrap()
        });
        let response = request(
            port,
            "PUT",
            "/bucket",
            &[("X-Test", "1")],
            Duration::from_secs(5),
        )
        .unwrap();
        let sent = server.join().unwrap();
        assert!(sent.starts_with("PUT /bucket HTTP/1.1\r\n"), "{sent}");
        assert!(sent.contains("X-Test: 1\r\n"), "{sent}");
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"ok");
    }

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
