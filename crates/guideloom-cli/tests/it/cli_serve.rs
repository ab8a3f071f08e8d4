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

/// A root of three snapshots: `draft` (expired by `gc`), `preview` (tagged `prod`, with a
/// card whose every field is hostile) and `final` (the latest).
fn kept_root(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("root");
    let r = root.to_str().unwrap();
    for (id, n) in [("draft", 2), ("preview", 3), ("final", 4)] {
        let input = dir.join(format!("{id}.jsonl"));
        let lines: String = (0..n).map(|i| format!("{{\"{id}\":{i}}}\n")).collect();
        std::fs::write(&input, lines).unwrap();
        ok(guideloom(&[
            "write",
            r,
            "--work-id",
            id,
            input.to_str().unwrap(),
        ]));
        ok(guideloom(&[
            "publish",
            r,
            "--dataset-id",
            "d",
            "--snapshot-id",
            id,
        ]));
    }
    let readme = dir.join("README.md");
    std::fs::write(
        &readme,
        "# Preview <script>alert(5)</script>\n\nThree records.\n",
    )
    .unwrap();
    ok(guideloom(&[
        "card",
        r,
        "--snapshot-id",
        "preview",
        "--readme",
        readme.to_str().unwrap(),
        "--licence",
        "CC-BY-4.0 <b>",
        "--description",
        "a \"preview\"",
        "--citation",
        "@misc{x, title={<i>}}",
        "--split",
        "train=0..2",
        "--split",
        "all=final",
    ]));
    ok(guideloom(&["tag", r, "prod", "preview"]));
    ok(guideloom(&["gc", r, "--grace", "0s", "--keep-last", "1"]));
    root
}

#[test]
fn serve_shows_the_card_tags_and_expired_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let root = kept_root(dir.path());
    let served = Served::start(&root, &[]);

    // The overview: the latest card (escaped), the tag and the expired snapshot marked.
    let overview = served.get("/");
    assert_no_foreign_script(&overview);
    assert!(
        overview.contains("<dd id=\"card-licence\">CC-BY-4.0 &lt;b&gt;</dd>"),
        "{overview}"
    );
    assert!(overview.contains("a &quot;preview&quot;"), "{overview}");
    assert!(overview.contains("# Preview &lt;script&gt;alert(5)&lt;/script&gt;"));
    assert!(overview.contains("@misc{x, title={&lt;i&gt;}}"));
    assert!(overview.contains("<tr data-split=\"train\">"), "{overview}");
    assert!(
        overview.contains("<span class=\"tagname\" data-tag=\"prod\">[prod]</span>"),
        "{overview}"
    );
    assert!(
        overview.contains("data-snapshot=\"draft\" class=\"expired\" data-expired=\"1\""),
        "{overview}"
    );
    assert!(!overview.contains("/records?snapshot=draft"), "{overview}");

    // The card page, by tag and by id, and its JSON.
    for name in ["prod", "preview"] {
        let card = served.get(&format!("/card?snapshot={name}"));
        assert_no_foreign_script(&card);
        assert!(card.contains("data-snapshot=\"preview\""), "{card}");
        assert!(card.contains("Three records."), "{card}");
    }
    let api: serde_json::Value = serde_json::from_str(&served.get("/api/card")).unwrap();
    assert_eq!(api["snapshot"], "preview");
    assert_eq!(api["card"]["licence"], "CC-BY-4.0 <b>");
    assert_eq!(api["card"]["splits"]["train"]["range"]["end"], 2);
    let none = served.get("/card?snapshot=final");
    assert!(none.contains("id=\"no-card\""), "{none}");

    // A tag wherever a snapshot id goes.
    let page = served.get("/records?snapshot=prod");
    assert!(
        page.contains("<span id=\"snapshot-id\">preview</span>"),
        "{page}"
    );
    assert!(
        page.contains("<span id=\"snapshot-tag\">prod</span>"),
        "{page}"
    );
    assert!(page.contains("<option value=\"prod\" selected>"), "{page}");
    assert!(page.contains("data-index=\"2\"") && !page.contains("data-index=\"3\""));
    let record = served.get("/record/1?snapshot=prod");
    assert!(record.contains("&quot;preview&quot;"), "{record}");
    let shards = served.get("/shards?snapshot=prod");
    assert!(shards.contains("[prod]"), "{shards}");

    // An expired snapshot: a page that says so (200), not an error page; JSON says 410.
    let page = served.get("/records?snapshot=draft");
    assert_no_foreign_script(&page);
    assert!(page.contains("id=\"expired\""), "{page}");
    assert!(
        page.contains("<option value=\"draft\" selected disabled>"),
        "{page}"
    );
    assert!(!page.contains("id=\"records\""), "{page}");
    let record = served.get("/record/0?snapshot=draft");
    assert!(record.contains("id=\"expired\""), "{record}");
    let (status, headers, body) = served.request("GET", "/api/records?snapshot=draft");
    assert_eq!(status, 410, "{body}");
    assert_secure(&headers);
    assert_eq!(
        served.stats()["records_read"],
        4,
        "a page of preview (3), one record"
    );
}

#[test]
fn a_page_of_a_large_shard_reads_its_index_entries_not_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let input = dir.path().join("in.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    // One shard of 50 000 records: its index is 600 000 bytes.
    for i in 0..50_000 {
        writeln!(f, "{{\"i\":{i}}}").unwrap();
    }
    drop(f);
    let r = root.to_str().unwrap();
    ok(guideloom(&[
        "write",
        r,
        "--work-id",
        "w",
        input.to_str().unwrap(),
    ]));
    ok(guideloom(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "one",
    ]));
    let served = Served::start(&root, &[]);
    served.get("/records?page=0");
    let before = served.stats()["store"]["reader_reads"].clone();
    let page = served.get("/records?page=500&per=50");
    assert!(page.contains("data-index=\"25000\"") && page.contains("data-index=\"25049\""));
    let after = served.stats()["store"]["reader_reads"].clone();
    let bytes =
        after["bytes_received"].as_u64().unwrap() - before["bytes_received"].as_u64().unwrap();
    let requests = after["requests"].as_u64().unwrap() - before["requests"].as_u64().unwrap();
    // Page 0 probed shard 0 and kept the probe (footer, metadata, the entries near page 0):
    // page 500 is one read of its 51 entries and one of its 50 records.
    assert!(bytes < 2 * (4096 + 64) + 51 * 12 + 50 * 16, "{bytes} bytes");
    assert!(requests <= 3, "{requests} reads");
}
