//! What goes into the `guideloom` binary comes back out exactly, or is refused naming the
//! file and line: JSON Lines → `write` (CBOR) → `publish` → `cat`/`get`, annotation values
//! → `annotate` → the published values file; records JSON cannot carry are refused by `cat`.
//! Input lines are bounded while read: a line over the limit is refused without being held
//! (peak RSS checked), and raw directories read only regular files.

#[path = "it/common/mod.rs"]
mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{BIN, fails, guideloom, json, ok, write_and_publish};

/// Writes `lines` as a JSON Lines file, writes and publishes it into a new root; the root.
fn publish_lines(tmp: &Path, lines: &[&str]) -> String {
    let input = tmp.join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let root = tmp.join("root");
    let r = root.to_str().unwrap().to_owned();
    write_and_publish(&r, input.to_str().unwrap());
    r
}

/// Canonical spellings: each comes back as the same text.
const CANONICAL: &[&str] = &[
    r#"{"z":1,"a":2,"m":{"y":[1,2.5,"x"],"b":null}}"#,
    "5e-324",
    "2.2250738585072014e-308",
    "9007199254740991",
    "9007199254740992",
    "9007199254740993",
    "18446744073709551616",
    "-18446744073709551617",
    "1000000000000000000000000000000",
    "1e30",
    "0.30000000000000004",
    "1.7976931348623157e308",
    "-0.0",
    r#"{"é":"😀","":"\u0000","\\":[true,false,null]}"#,
    r#"[{"b":[],"a":{}},-9223372036854775809,123456.0]"#,
];

/// Other spellings and the canonical text of the same values.
const SPELLED: &[(&str, &str)] = &[
    (r#" { "b" : 1 , "a" : 1E2 } "#, r#"{"b":1,"a":100.0}"#),
    ("-0", "-0.0"),
    (r#""\u00e9\/\ud83d\ude00""#, "\"é/😀\""),
    ("4.9406564584124654e-324", "5e-324"),
    ("[1.0e+0,0.1000]", "[1.0,0.1]"),
];

#[test]
fn tricky_values_come_back_line_by_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut lines: Vec<&str> = CANONICAL.to_vec();
    lines.extend(SPELLED.iter().map(|(input, _)| *input));
    let mut expected: Vec<&str> = CANONICAL.to_vec();
    expected.extend(SPELLED.iter().map(|(_, canonical)| *canonical));
    let r = publish_lines(tmp.path(), &lines);

    let out = ok(guideloom(&["cat", &r]));
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got, expected);

    // The --json wrapper embeds the same text.
    let out = ok(guideloom(&["cat", &r, "--json"]));
    for (i, (line, want)) in out.lines().zip(&expected).enumerate() {
        assert_eq!(line, format!("{{\"index\":{i},\"record\":{want}}}"));
    }
    // `get`, plain and --json.
    for (i, want) in expected.iter().enumerate() {
        let i = i.to_string();
        assert_eq!(ok(guideloom(&["get", &r, &i])), format!("{want}\n"));
        let doc = ok(guideloom(&["get", &r, &i, "--json"]));
        assert!(doc.contains(&format!("\"record\": {want}\n")), "{doc}");
        assert_eq!(json(&doc)["index"], i.parse::<u64>().unwrap());
    }
}

/// Finite doubles from random bit patterns (xorshift, fixed seed), some subnormal.
fn random_doubles(n: usize) -> Vec<f64> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let bits = if out.len() % 10 == 0 {
            seed & ((1 << 52) - 1) | (seed & (1 << 63)) // subnormal
        } else {
            seed
        };
        let v = f64::from_bits(bits);
        if v.is_finite() {
            out.push(v);
        }
    }
    out
}

#[test]
fn a_thousand_random_floats_come_back_bit_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let values = random_doubles(1000);
    let texts: Vec<String> = values
        .iter()
        .map(|v| ryu::Buffer::new().format_finite(*v).to_owned())
        .collect();
    let lines: Vec<&str> = texts.iter().map(String::as_str).collect();
    let r = publish_lines(tmp.path(), &lines);
    let out = ok(guideloom(&["cat", &r]));
    let mut wrong = Vec::new();
    for ((line, text), v) in out.lines().zip(&texts).zip(&values) {
        let back: f64 = line.parse().unwrap();
        if back.to_bits() != v.to_bits() || line != text {
            wrong.push(format!("{text} came back as {line}"));
        }
    }
    assert_eq!(out.lines().count(), 1000);
    assert!(
        wrong.is_empty(),
        "{} of 1000 changed: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

#[test]
fn inexpressible_lines_are_refused_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
    let long = "1".repeat(4097);
    let cases: Vec<(&str, &str)> = vec![
        ("1e400", "number 1e400 is too large for a 64-bit float"),
        ("[1e-400]", "number 1e-400 is too small for a 64-bit float"),
        (r#""\ud800""#, "lone surrogate escape \\ud800"),
        (r#"{"a":1,"a":2}"#, "duplicate key \"a\""),
        (&long, "integer literal of 4097 digits"),
        (&deep, "nested more than 128 deep"),
        ("NaN", "malformed JSON at column 1"),
        ("{\"a\":1", "malformed JSON at column 7"),
    ];
    for (i, (line, message)) in cases.iter().enumerate() {
        let input = tmp.path().join(format!("bad{i}.jsonl"));
        std::fs::write(&input, format!("{{\"ok\":1}}\n{line}\n")).unwrap();
        let root = tmp.path().join(format!("root{i}"));
        let err = fails(guideloom(&[
            "write",
            "--root",
            root.to_str().unwrap(),
            "--work-id",
            "w",
            input.to_str().unwrap(),
        ]));
        let at = format!("{}:2: ", input.display());
        assert!(err.contains(&at), "{line}: {err}");
        assert!(err.contains(message), "{line}: {err}");
    }
    // Invalid UTF-8 names the line too.
    let input = tmp.path().join("utf8.jsonl");
    std::fs::write(&input, b"1\n\"\xc3\x28\"\n").unwrap();
    let err = fails(guideloom(&[
        "write",
        "--root",
        tmp.path().join("r8").to_str().unwrap(),
        "--work-id",
        "w",
        input.to_str().unwrap(),
    ]));
    assert!(err.contains("utf8.jsonl:2: not valid UTF-8"), "{err}");
}

#[test]
fn annotation_values_are_published_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let r = publish_lines(tmp.path(), &["1", "2", "3", "4", "5", "6"]);
    let values = [
        "0.30000000000000004",
        "18446744073709551616",
        r#"{"z":1,"a":[1e300,-0.0,5e-324]}"#,
        r#""é\u00e9""#,
        "1E2",
        "  [ 1 ,\t2 ]  ",
    ];
    let input = tmp.path().join("values.jsonl");
    std::fs::write(&input, values.join("\n") + "\n").unwrap();
    ok(guideloom(&[
        "annotate",
        &r,
        "--name",
        "q",
        input.to_str().unwrap(),
    ]));
    let published =
        std::fs::read_to_string(Path::new(&r).join("annotations/q/v1/values.jsonl")).unwrap();
    let want: Vec<&str> = values.iter().map(|v| v.trim()).collect();
    assert_eq!(published.lines().collect::<Vec<_>>(), want);
    ok(guideloom(&["verify", &r]));

    // The same rules as `write`: refused by line.
    std::fs::write(&input, "1\n2\n3\n1e400\n5\n6\n").unwrap();
    let err = fails(guideloom(&[
        "annotate",
        &r,
        "--name",
        "bad",
        input.to_str().unwrap(),
    ]));
    assert!(
        err.contains("values.jsonl:4: number 1e400 is too large"),
        "{err}"
    );
}

#[test]
fn records_json_cannot_carry_are_refused_by_cat() {
    use ciborium::Value;
    use guideloom_format::KIND_DOCUMENTS;
    use guideloom_format::ShardMetadata;
    use guideloom_publish::{Root, RootOptions, StoreOptions};

    let tmp = tempfile::tempdir().unwrap();
    let root_dir = tmp.path().join("root");
    let r = root_dir.to_str().unwrap();
    let cbor = |v: &Value| {
        let mut buf = Vec::new();
        ciborium::into_writer(v, &mut buf).unwrap();
        buf
    };
    let records = [
        cbor(&Value::Map(vec![(
            Value::Text("b".into()),
            Value::Integer(1.into()),
        )])),
        cbor(&Value::Map(vec![(
            Value::Text("x".into()),
            Value::Float(f64::NAN),
        )])),
        cbor(&Value::Tag(1, Box::new(Value::Integer(0.into())))),
        cbor(&Value::Map(vec![(Value::Integer(7.into()), Value::Null)])),
        cbor(&Value::Array(vec![Value::Float(f64::INFINITY)])),
    ];
    let root = Root::open(r, &StoreOptions::default(), RootOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(root.write_shard(
        "odd",
        0,
        ShardMetadata::new("cbor", KIND_DOCUMENTS),
        records.iter(),
    ))
    .unwrap();
    ok(guideloom(&[
        "publish",
        "--root",
        r,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
        // Written by the library, not by `guideloom write`: no completion marker.
        "--work-id",
        "odd",
        "--include-incomplete",
    ]));
    assert_eq!(ok(guideloom(&["get", r, "0"])), "{\"b\":1}\n");
    let expect = [
        (
            1,
            "record 1 (shard shards/odd/00000000.glm): holds a NaN float at \"/x\"",
        ),
        (
            2,
            "record 2 (shard shards/odd/00000000.glm): holds CBOR tag 1 at the top level",
        ),
        (3, "holds a map key that is an integer, not text"),
        (4, "holds an infinite float (+inf) at \"/0\""),
    ];
    for (i, message) in expect {
        let err = fails(guideloom(&["get", r, &i.to_string()]));
        assert!(err.contains(message), "{err}");
        assert!(err.contains("which JSON cannot carry"), "{err}");
        let o = guideloom(&["cat", r, "--start", &i.to_string()]);
        assert!(
            common::stdout(&o).is_empty(),
            "nothing of a refused record is printed"
        );
        assert!(fails(o).contains(message));
    }
    // cat prints the records before the refused one, then stops naming it: with --json the
    // last line is the error as a JSON document.
    let o = guideloom(&["cat", r, "--json"]);
    let out = common::stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "{\"index\":0,\"record\":{\"b\":1}}");
    assert_eq!(lines.len(), 2, "{out}");
    let error = common::json(lines[1]);
    assert_eq!(error["error"]["kind"], "encode", "{error}");
    assert!(fails(o).contains("record 1 "));
}

/// Runs the binary with `stdin` fed from a thread (ignoring a closed pipe: the binary may
/// refuse before reading everything).
fn run_with_stdin(args: &[&str], stdin: Vec<u8>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// Runs the binary with `stdin` read from the file `path`.
fn run_with_stdin_file(args: &[&str], path: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(std::fs::File::open(path).unwrap())
        .output()
        .unwrap()
}

/// The largest peak RSS (bytes) of the children this test process has waited for.
#[cfg(target_os = "linux")]
fn children_peak_rss() -> u64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    u64::try_from(usage.max_rss()).unwrap() * 1024 // KiB on Linux
}

#[cfg(target_os = "linux")]
#[test]
fn a_line_over_the_limit_is_refused_without_being_held() {
    const LINE: usize = 32 << 20;
    let tmp = tempfile::tempdir().unwrap();
    // Written in pieces: this process must stay small, because a child's peak RSS as
    // getrusage reports it includes the parent's at the moment the child execs.
    let input = tmp.path().join("long.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    file.write_all(b"{\"ok\":1}\n\"").unwrap();
    let piece = vec![b'x'; 1 << 20];
    for _ in 0..LINE >> 20 {
        file.write_all(&piece).unwrap();
    }
    file.write_all(b"\"\n").unwrap();
    file.into_inner().unwrap().sync_all().unwrap();
    drop(piece);
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    // The binary's own footprint, from a one-line write.
    let small = tmp.path().join("small.jsonl");
    std::fs::write(&small, "{\"ok\":1}\n").unwrap();
    ok(guideloom(&[
        "write",
        "--root",
        r,
        "--work-id",
        "w0",
        small.to_str().unwrap(),
    ]));
    let baseline = children_peak_rss();

    let err = fails(guideloom(&[
        "write",
        "--root",
        r,
        "--work-id",
        "w",
        "--max-shard-bytes",
        "1048576",
        input.to_str().unwrap(),
    ]));
    assert!(
        err.contains(&format!(
            "{}:2: line longer than 1048576 bytes (--max-shard-bytes 1048576)",
            input.display()
        )),
        "{err}"
    );
    let err = fails(run_with_stdin_file(
        &[
            "write",
            "--root",
            r,
            "--work-id",
            "w2",
            "--max-shard-bytes",
            "1048576",
            "-",
        ],
        &input,
    ));
    assert!(err.contains("-:2: line longer than 1048576 bytes"), "{err}");
    // Neither run held the 32 MiB line: above the binary's own footprint the peak grew by
    // at most the 1 MiB line, the 1 MiB read buffer and some slack.
    let peak = children_peak_rss();
    eprintln!("peak RSS: {baseline} bytes for a one-line write, {peak} bytes with the refusals");
    assert!(
        peak < baseline + (8 << 20),
        "peak RSS {peak} bytes (baseline {baseline}) for a {LINE}-byte line"
    );

    // A line of the limit is read (its record is then too big for such a shard: refused as
    // a record); one byte more is refused as a line.
    let short = format!("\"{}\"\n", "y".repeat(2046));
    ok(run_with_stdin(
        &[
            "write",
            "--root",
            r,
            "--work-id",
            "w3",
            "--max-shard-bytes",
            "4096",
            "-",
        ],
        short.into_bytes(),
    ));
    let at_limit = format!("\"{}\"\n", "y".repeat(4094));
    let err = fails(run_with_stdin(
        &[
            "write",
            "--root",
            r,
            "--work-id",
            "w5",
            "--max-shard-bytes",
            "4096",
            "-",
        ],
        at_limit.into_bytes(),
    ));
    assert!(
        err.contains("-:1: the record would exceed 4096 bytes as CBOR"),
        "{err}"
    );
    let over = format!("\"{}\"\n", "y".repeat(4095));
    let err = fails(run_with_stdin(
        &[
            "write",
            "--root",
            r,
            "--work-id",
            "w4",
            "--max-shard-bytes",
            "4096",
            "-",
        ],
        over.into_bytes(),
    ));
    assert!(err.contains("-:1: line longer than 4096 bytes"), "{err}");
}

#[cfg(unix)]
#[test]
fn raw_directories_read_only_regular_files_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("files");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "first").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    nix::unistd::mkfifo(&dir.join("a.fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink(dir.join("a.txt"), dir.join("link")).unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let raw = |work_id: &str, extra: &[&str]| {
        let mut args = vec![
            "write",
            "--root",
            r,
            "--work-id",
            work_id,
            "--format",
            "raw",
        ];
        args.extend_from_slice(extra);
        args.push(dir.to_str().unwrap());
        guideloom(&args)
    };
    let o = raw("w", &[]);
    let err = common::stderr(&o);
    ok(o);
    assert!(
        err.contains("skipped 3 entries that are not regular files (never opened): 1 subdirectory (sub/), 1 symlink (link), 1 FIFO (a.fifo)"),
        "{err}"
    );
    let v = json(&ok(raw("w2", &["--json"])));
    assert_eq!(v["records"], 1);
    assert_eq!(v["skipped"], serde_json::json!(["a.fifo", "link", "sub/"]));

    // A file over the limit is refused by its size, naming it.
    std::fs::write(dir.join("b.bin"), vec![7u8; 5000]).unwrap();
    let err = fails(raw("w3", &["--max-shard-bytes", "4096"]));
    assert!(
        err.contains("b.bin: file of 5000 bytes does not fit in a shard of --max-shard-bytes 4096"),
        "{err}"
    );
}
