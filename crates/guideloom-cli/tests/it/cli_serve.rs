//! `guideloom serve`: the real binary on a published local root, asked over plain HTTP/1.1
//! (std `TcpStream`): pages and their content, the security headers on every response,
//! escaping of hostile records, annotation values and query values, `405` for writes, and
//! that a page of a large root reads only the page's records (`/api/stats`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::{BIN, guideloom, ok};

/// A `guideloom serve` child on a free port of 127.0.0.1, killed when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Served {
    fn start(root: &Path, extra: &[&str]) -> Served {
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg(root)
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start guideloom serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("first line {line:?}"))
            .to_owned();
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        Served { child, addr }
    }

    /// `METHOD path` → (status, headers lower-cased, body).
    fn request(&self, method: &str, path: &str) -> (u16, Vec<(String, String)>, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        (status, headers, body.to_owned())
    }

    fn get(&self, path: &str) -> String {
        let (status, headers, body) = self.request("GET", path);
        assert_eq!(status, 200, "GET {path}: {body}");
        assert_secure(&headers);
        body
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::from_str(&self.get("/api/stats")).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[track_caller]
fn assert_secure(headers: &[(String, String)]) {
    assert_eq!(
        header(headers, "content-security-policy"),
        Some(guideloom_view_csp()),
        "{headers:?}"
    );
    assert_eq!(header(headers, "x-content-type-options"), Some("nosniff"));
}

/// The policy docs/viewer.md promises (kept here as text: the test checks the binary
/// against the document, not against the crate's constant).
fn guideloom_view_csp() -> &'static str {
    "default-src 'none'; img-src 'self' data:; media-src 'self' data:; style-src 'self'; \
     script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'"
}

/// A 1×1 PNG's first bytes (the viewer recognises PNG by its magic number).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";

/// A root with snapshot `text` (CBOR records, one hostile) annotated with `q/v1`, then
/// snapshot `pics` of raw records (a PNG and a text file).
fn hostile_root(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("root");
    let input = dir.join("in.jsonl");
    std::fs::write(
        &input,
        "{\"id\":\"a\",\"text\":\"<script>alert(1)</script>\"}\n\
         {\"id\":\"b\",\"text\":\"\\\"><img src=x onerror=alert(2)>\"}\n\
         {\"id\":\"c\",\"n\":3}\n",
    )
    .unwrap();
    let r = root.to_str().unwrap();
    ok(guideloom(&[
        "write",
        r,
        "--work-id",
        "w0",
        input.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "text",
    ]));
    let values = dir.join("q.jsonl");
    std::fs::write(
        &values,
        "\"</td><script>alert(3)</script>\"\n0.5\n{\"k\":[1,2]}\n",
    )
    .unwrap();
    ok(guideloom(&[
        "annotate",
        r,
        "--name",
        "q",
        values.to_str().unwrap(),
    ]));
    let raw = dir.join("raw");
    std::fs::create_dir(&raw).unwrap();
    std::fs::write(raw.join("0.png"), PNG).unwrap();
    std::fs::write(raw.join("1.txt"), "plain <b>text</b>").unwrap();
    ok(guideloom(&[
        "write",
        r,
        "--work-id",
        "w1",
        "--format",
        "raw",
        raw.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "pics",
    ]));
    root
}

/// The `<script` tags of a page: only the one of `/static/app.js`.
#[track_caller]
fn assert_no_foreign_script(body: &str) {
    assert_eq!(body.matches("<script").count(), 1, "{body}");
    assert!(body.contains("<script src=\"/static/app.js\" defer></script>"));
    assert!(!body.contains("<img src=x"), "{body}");
    assert!(!body.contains("style="), "{body}");
}

#[test]
fn serve_shows_a_root_with_its_records_escaped_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let root = hostile_root(dir.path());
    let served = Served::start(&root, &[]);

    let overview = served.get("/");
    assert!(
        overview.contains("<span id=\"dataset-id\">d</span>"),
        "{overview}"
    );
    assert!(
        overview.contains("data-snapshot=\"text\"") && overview.contains("data-snapshot=\"pics\"")
    );
    assert!(
        overview.contains("quality") || overview.contains(">q</a>"),
        "{overview}"
    );
    assert_no_foreign_script(&overview);

    // The record browser with the annotation set beside the records.
    let page = served.get("/records?snapshot=text&set=q%2Fv1");
    assert_no_foreign_script(&page);
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(
        page.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "{page}"
    );
    assert!(
        page.contains("&quot;&lt;/td&gt;&lt;script&gt;alert(3)&lt;/script&gt;&quot;"),
        "{page}"
    );
    assert!(page.contains("<code class=\"ann\">0.5</code>"), "{page}");
    assert!(page.contains("<th class=\"ann-head\">q/v1</th>"));

    // The latest snapshot by default: raw records, the PNG inline.
    let page = served.get("/records");
    assert!(
        page.contains("<span id=\"snapshot-id\">pics</span>"),
        "{page}"
    );
    assert!(
        page.contains("src=\"data:image/png;base64,iVBORw0KGgo"),
        "{page}"
    );
    assert!(page.contains("plain &lt;b&gt;text&lt;/b&gt;"), "{page}");
    let record = served.get("/record/0?snapshot=pics");
    assert!(record.contains("<img class=\"media\""), "{record}");
    let record = served.get("/record/2?snapshot=text&set=q%2Fv1");
    assert!(
        record.contains("&quot;n&quot;") && record.contains("{&quot;k&quot;:[1,2]}"),
        "{record}"
    );

    // Shards and their health.
    let shards = served.get("/shards?snapshot=text");
    assert!(
        shards.contains("<span id=\"healthy\">1</span> of 1"),
        "{shards}"
    );

    // A hostile value in the query is escaped in the error page (status 400), with the headers.
    let (status, headers, body) = served.request(
        "GET",
        "/records?snapshot=v%22%3E%3Cscript%3Ealert(4)%3C%2Fscript%3E",
    );
    assert_eq!(status, 400, "{body}");
    assert_secure(&headers);
    assert_no_foreign_script(&body);
    assert!(body.contains("&quot;&gt;&lt;script&gt;alert(4)"), "{body}");

    // Read-only: writes are 405 with the headers; HEAD has no body.
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let (status, headers, _) = served.request(method, "/records");
        assert_eq!(status, 405, "{method}");
        assert_secure(&headers);
        assert_eq!(header(&headers, "allow"), Some("GET, HEAD"));
    }
    let (status, headers, body) = served.request("HEAD", "/");
    assert_eq!((status, body.as_str()), (200, ""));
    assert_secure(&headers);

    // Static files and unknown pages carry the headers too.
    for path in ["/static/app.js", "/static/app.css"] {
        served.get(path);
    }
    let (status, headers, _) = served.request("GET", "/nope");
    assert_eq!(status, 404);
    assert_secure(&headers);
    // An index past the end: 404, not a panic.
    let (status, _, body) = served.request("GET", "/record/99?snapshot=text");
    assert_eq!(status, 404, "{body}");
}

#[test]
fn a_page_of_a_large_root_reads_only_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let input = dir.path().join("in.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for i in 0..20_000 {
        writeln!(f, "{{\"i\":{i}}}").unwrap();
    }
    drop(f);
    let r = root.to_str().unwrap();
    ok(guideloom(&[
        "write",
        r,
        "--work-id",
        "w",
        "--max-shard-bytes",
        "65536",
        input.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "big",
    ]));
    let served = Served::start(&root, &[]);
    let base = served.stats()["records_read"].as_u64().unwrap();
    assert_eq!(base, 0);
    let page = served.get("/records?page=250&per=50");
    assert!(page.contains("data-index=\"12500\"") && page.contains("data-index=\"12549\""));
    assert!(!page.contains("data-index=\"12550\""));
    assert!(
        page.contains("&quot;i&quot;</span>: <span class=\"n\">12549</span>"),
        "{page}"
    );
    assert_eq!(served.stats()["records_read"], 50);
    // A jump to an index shows its page, highlighted; one record page reads one record.
    let page = served.get("/records?index=19999&per=50");
    assert!(
        page.contains("class=\"row hit\" data-index=\"19999\""),
        "{page}"
    );
    assert_eq!(served.stats()["records_read"], 100);
    served.get("/record/7");
    assert_eq!(served.stats()["records_read"], 101);
    let api: serde_json::Value =
        serde_json::from_str(&served.get("/api/records?page=1&per=2")).unwrap();
    assert_eq!(api["total"], 20_000);
    assert_eq!(api["records"][0]["index"], 2);
}
