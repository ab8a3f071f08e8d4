//! Hostile counts and sizes on the command line: every numeric argument has a bound, and an
//! absurd value is a usage error (exit status 2) naming the argument and its bound, before
//! any work — nothing is written, read or allocated for it. Counts that are bounded by the
//! dataset (record indexes) fail naming the dataset's length. See docs/cli.md, "Bounds of
//! numeric arguments".

#![cfg(target_os = "linux")]

use crate::common;

use common::*;

const HUGE: &str = "18446744073709551615";

#[test]
fn absurd_counts_are_usage_errors_naming_the_argument_and_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_jsonl(&input, "b", 5);
    write_and_publish(r, input.to_str().unwrap());
    let before = files(&root);
    let quick = tmp.path().join("quick");
    let q = quick.to_str().unwrap();
    let i = input.to_str().unwrap();
    // (arguments, the argument named, its bound as the message says it)
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["bench", r, "--reads", HUGE], "--reads", "1..=1000000"),
        (vec!["bench", r, "--reads", "0"], "--reads", "1..=1000000"),
        (
            vec!["quickstart", q, "--records-per-worker", HUGE],
            "--records-per-worker",
            "1..=1000000",
        ),
        (
            vec![
                "quickstart",
                q,
                "--records-per-worker",
                "1000000",
                "--workers",
                "2",
            ],
            "--records-per-worker",
            "at most 1000000",
        ),
        (
            vec!["quickstart", q, "--workers", "65"],
            "--workers",
            "1..=64",
        ),
        (
            vec!["write", r, i, "--work-id", "big", "--max-shard-bytes", HUGE],
            "--max-shard-bytes",
            "1024..=5368709120",
        ),
        (
            vec!["--timeout", "1e300", "info", r],
            "--timeout",
            "at most 86400 seconds",
        ),
        (
            vec!["--connect-timeout", "1e30", "info", r],
            "--connect-timeout",
            "at most 86400 seconds",
        ),
        (
            vec!["--deadline", "86400.5", "info", r],
            "--deadline",
            "at most 86400 seconds",
        ),
        (
            vec!["--retries", "4294967295", "info", r],
            "--retries",
            "0..=100",
        ),
    ];
    for (args, argument, bound) in cases {
        // A cap on file sizes, so that an unbounded run fails fast instead of filling the
        // disk (`quickstart` used to write gigabytes for a huge --records-per-worker).
        let limits = Limits {
            file_size: Some(16 << 20),
            address_space: None,
        };
        let mut stdout = Vec::new();
        let (status, stderr) =
            guideloom_limited(&args, limits, None, &mut |b| stdout.extend_from_slice(b));
        assert_eq!(
            status.code(),
            Some(2),
            "{args:?}: {status:?}\nstderr: {stderr}"
        );
        assert!(
            stderr.contains(argument),
            "{args:?} names {argument}: {stderr}"
        );
        assert!(
            stderr.contains(bound),
            "{args:?} names the bound {bound}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(!quick.exists(), "{args:?}: quickstart made nothing");
        assert_eq!(files(&root), before, "{args:?}: the root is untouched");
    }
    // The bounds themselves are accepted.
    let v = json(&ok(guideloom(&["bench", r, "--reads", "1", "--json"])));
    assert!(v.is_object(), "{v}");
    ok(guideloom(&[
        "--timeout",
        "86400",
        "--retries",
        "100",
        "info",
        r,
    ]));
}

#[test]
fn record_indexes_are_bounded_by_the_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_jsonl(&input, "b", 5);
    write_and_publish(r, input.to_str().unwrap());
    ok(guideloom(&[
        "annotate",
        r,
        input.to_str().unwrap(),
        "--name",
        "n",
    ]));
    for args in [
        vec!["get", r, HUGE],
        vec!["cat", r, "--start", HUGE],
        vec!["annotations", r, "n", "--index", HUGE],
        vec!["annotations", r, "n", "--start", HUGE],
    ] {
        let err = fails(guideloom(&args));
        assert!(err.contains("5 "), "{args:?} names the length 5: {err}");
    }
    // An end past the last record means "to the end".
    let all = ok(guideloom(&["cat", r, "--end", HUGE]));
    assert_eq!(all.lines().count(), 5);
    let all = ok(guideloom(&["annotations", r, "n", "--end", HUGE]));
    assert_eq!(all.lines().count(), 5);
}
