//! Memory bounded by the record, not by the output or the shard: `get` and `cat` stream a
//! record's JSON text to stdout, and `write` streams records into their shard as they are
//! read. Each command runs under an address-space limit (`RLIMIT_AS`) that the streaming
//! code fits in with room to spare and that the code which built the whole text or held a
//! whole shard's records could not (it needed 500–700 MiB here, or 260–400 MiB for `write`).
//! See docs/cli.md, "Memory".

#![cfg(target_os = "linux")]

use crate::common;

use common::*;

const MIB: u64 = 1 << 20;
/// The record `get`/`cat` print: 32 MiB, whose JSON text is 192 MiB (a CBOR string of
/// U+0001, each printed as `\u0001`) or 64 MiB (a raw record that is not UTF-8, as hex).
const RECORD: usize = 32 << 20;
/// The limit for reading it: the record, the binary's own footprint (under 64 MiB of address
/// space for a one-line record) and slack, far below the text.
const READ_LIMIT: u64 = 192 * MIB;
/// The limit for writing 96 MiB of records into one shard: the binary's own footprint and
/// one 1 MiB input buffer, with slack.
const WRITE_LIMIT: u64 = 128 * MIB;

/// Checks streamed output against an expected text made of a head, `count` repeats of a
/// unit and a tail, without holding either (slices compared, not bytes one by one).
struct Expect {
    head: Vec<u8>,
    /// The unit repeated to 64 KiB and one unit more.
    block: Vec<u8>,
    unit: usize,
    body: usize,
    tail: Vec<u8>,
    at: usize,
    bad: Option<usize>,
}

impl Expect {
    fn new(head: &[u8], unit: &'static [u8], count: usize, tail: &[u8]) -> Self {
        Expect {
            head: head.to_vec(),
            block: unit.repeat((64 << 10) / unit.len() + 1),
            unit: unit.len(),
            body: unit.len() * count,
            tail: tail.to_vec(),
            at: 0,
            bad: None,
        }
    }

    fn len(&self) -> usize {
        self.head.len() + self.body + self.tail.len()
    }

    /// The expected bytes from `at` on (at least one, unless past the end).
    fn segment(&self, at: usize) -> &[u8] {
        let (h, b) = (self.head.len(), self.body);
        if at < h {
            &self.head[at..]
        } else if at < h + b {
            let offset = (at - h) % self.unit;
            let n = (h + b - at).min(self.block.len() - offset);
            &self.block[offset..offset + n]
        } else {
            self.tail.get(at - h - b..).unwrap_or_default()
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.bad.is_none() {
            let want = self.segment(self.at);
            let n = want.len().min(bytes.len());
            if n == 0 || want[..n] != bytes[..n] {
                self.bad = Some(self.at);
                return;
            }
            self.at += n;
            bytes = &bytes[n..];
        }
    }

    #[track_caller]
    fn check(&self, what: &str) {
        assert_eq!(
            self.bad, None,
            "{what}: the output differs at byte {:?}",
            self.bad
        );
        assert_eq!(self.at, self.len(), "{what}: output length");
    }
}

/// Runs `args` under `limit` bytes of address space, checking stdout against `expect`.
fn streamed(args: &[&str], limit: u64, mut expect: Expect) {
    let limits = Limits {
        address_space: Some(limit),
        file_size: None,
    };
    let (status, stderr) = guideloom_limited(args, limits, None, &mut |b| expect.feed(b));
    assert!(
        status.success(),
        "{args:?} under {limit} bytes: {status:?}: {stderr}"
    );
    expect.check(&format!("{args:?}"));
}

#[test]
fn get_and_cat_stream_a_large_record_within_a_limit_below_its_text() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    // Record 0: a CBOR string of RECORD × U+0001, written from a JSON line on stdin.
    let feed: Feed = Box::new(|w| {
        let piece = b"\\u0001".repeat(1 << 16);
        let _ = w.write_all(b"\"");
        for _ in 0..RECORD >> 16 {
            if w.write_all(&piece).is_err() {
                return;
            }
        }
        let _ = w.write_all(b"\"\n");
    });
    let args = [
        "write",
        r,
        "-",
        "--work-id",
        "a-text",
        "--max-shard-bytes",
        "268435456",
    ];
    let (status, stderr) = guideloom_limited(&args, Limits::default(), Some(feed), &mut |_| {});
    assert!(status.success(), "{stderr}");
    // Record 1: a raw record of RECORD × 0xff (not UTF-8: printed as hex).
    let raw = tmp.path().join("raw");
    std::fs::create_dir(&raw).unwrap();
    std::fs::write(raw.join("ff.bin"), vec![0xffu8; RECORD]).unwrap();
    ok(guideloom(&[
        "write",
        r,
        raw.to_str().unwrap(),
        "--format",
        "raw",
        "--work-id",
        "b-raw",
        "--max-shard-bytes",
        "268435456",
    ]));
    std::fs::remove_dir_all(&raw).unwrap();
    ok(guideloom(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));

    let esc: &'static [u8] = b"\\u0001";
    streamed(
        &["get", r, "0"],
        READ_LIMIT,
        Expect::new(b"\"", esc, RECORD, b"\"\n"),
    );
    streamed(
        &["get", r, "0", "--json"],
        READ_LIMIT,
        Expect::new(
            b"{\n  \"snapshot_id\": \"s\",\n  \"index\": 0,\n  \"record\": \"",
            esc,
            RECORD,
            b"\"\n}\n",
        ),
    );
    streamed(
        &["cat", r, "--end", "1"],
        READ_LIMIT,
        Expect::new(b"\"", esc, RECORD, b"\"\n"),
    );
    streamed(
        &["cat", r, "--end", "1", "--json"],
        READ_LIMIT,
        Expect::new(b"{\"index\":0,\"record\":\"", esc, RECORD, b"\"}\n"),
    );
    streamed(
        &["get", r, "1"],
        READ_LIMIT,
        Expect::new(b"{\"hex\":\"", b"ff", RECORD, b"\"}\n"),
    );
    streamed(
        &["cat", r, "--start", "1", "--json"],
        READ_LIMIT,
        Expect::new(
            b"{\"index\":1,\"name\":\"ff.bin\",\"record\":{\"hex\":\"",
            b"ff",
            RECORD,
            b"\"}}\n",
        ),
    );
}

/// Lines of 64 KiB strings: 1536 of them are 96 MiB of records.
const LINE: usize = 64 << 10;
const LINES: usize = 1536;

/// Input line `i`: a JSON string of `LINE` bytes, `i` then `x`s.
fn line(i: usize) -> String {
    let mut text = format!("\"{i}");
    text.extend(std::iter::repeat_n('x', LINE - (text.len() - 1)));
    text.push_str("\"\n");
    text
}

#[test]
fn write_streams_a_shard_larger_than_its_memory_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let limits = Limits {
        address_space: Some(WRITE_LIMIT),
        file_size: None,
    };
    // JSON Lines on stdin, into one shard of 96 MiB.
    let feed: Feed = Box::new(|w| {
        for i in 0..LINES {
            let line = line(i);
            if w.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    let args = [
        "write",
        r,
        "-",
        "--work-id",
        "lines",
        "--max-shard-bytes",
        "1073741824",
    ];
    let (status, stderr) = guideloom_limited(&args, limits, Some(feed), &mut |_| {});
    assert!(
        status.success(),
        "write under {WRITE_LIMIT} bytes: {status:?}: {stderr}"
    );

    // A directory of 48 raw files of 2 MiB, into one shard of 96 MiB.
    let raw = tmp.path().join("raw");
    std::fs::create_dir(&raw).unwrap();
    for i in 0..48u8 {
        std::fs::write(raw.join(format!("f{i:02}")), vec![i; 2 << 20]).unwrap();
    }
    let raw_s = raw.to_str().unwrap();
    let args = [
        "write",
        r,
        raw_s,
        "--format",
        "raw",
        "--work-id",
        "files",
        "--max-shard-bytes",
        "1073741824",
    ];
    let (status, stderr) = guideloom_limited(&args, limits, None, &mut |_| {});
    assert!(
        status.success(),
        "write under {WRITE_LIMIT} bytes: {status:?}: {stderr}"
    );
    std::fs::remove_dir_all(&raw).unwrap();

    // One shard each, every record and name in place, and both work ids complete.
    let shards = files(&root.join("shards"));
    assert_eq!(
        shards,
        [
            "files/00000000.glm",
            "files/complete.json",
            "lines/00000000.glm",
            "lines/complete.json"
        ]
    );
    ok(guideloom(&[
        "publish",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ]));
    let v = json(&ok(guideloom(&["info", r, "--json"])));
    assert_eq!(v["snapshots"][0]["records"], LINES + 48, "{v}");
    // Work ids in name order: the 48 files are records 0..48, the lines follow.
    let first = json(&ok(guideloom(&["get", r, "0", "--json"])));
    assert_eq!(first["name"], "f00", "the first file's name");
    let last_file = std::process::Command::new(BIN)
        .args(["get", r, "47", "--raw"])
        .output()
        .unwrap();
    assert!(
        last_file.stdout == vec![47u8; 2 << 20],
        "the last file's bytes"
    );
    let last_line = ok(guideloom(&["get", r, &(48 + LINES - 1).to_string()]));
    assert!(last_line == line(LINES - 1), "the last line's record");
    ok(guideloom(&["verify", r, "--deep"]));
}
