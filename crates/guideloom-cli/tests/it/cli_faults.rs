//! The real `guideloom` binary reading an `http://` root (nginx) and an `s3://` root (moto)
//! through the fault-injecting proxy (`guideloom-faultproxy`): with a 1 B/s drip or a stall,
//! `get` and `info` fail with one line that says "timed out" after exactly
//! `--retries + 1` attempts (counted at the proxy), within `--timeout × (retries + 1)`
//! (measured and printed, never asserted); through a pass-through proxy the same flags read
//! the right record. Without the servers' variables the tests print `skipped: ...`; under
//! `GUIDELOOM_CI=1` a missing server is a failure.
#![cfg(all(feature = "s3", feature = "http"))]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{fails, guideloom_env, json, ok};
use guideloom_faultproxy::{Fault, FaultProxy, Script};

/// `--timeout 1 --retries 1`: two attempts of one second per request.
const FLAGS: [&str; 4] = ["--timeout", "1", "--retries", "1"];

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn missing(what: &str) {
    assert!(
        std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
        "GUIDELOOM_CI=1 but {what} are not set"
    );
    println!("skipped: {what} not set");
}

fn unique(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// Writes 20 records and publishes them as snapshot `s1` of dataset `d` into `root`.
fn publish(root: &str, tmp: &Path, extra: &[&str], env: &[(&str, &str)]) {
    let input = tmp.join("in.jsonl");
    let lines: String = (0..20)
        .map(|i| format!("{{\"i\": {i}, \"text\": \"row {i}\"}}\n"))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let run = |args: &[&str]| {
        let all: Vec<&str> = extra.iter().chain(args).copied().collect();
        ok(guideloom_env(&all, env))
    };
    run(&[
        "write",
        "--root",
        root,
        "--work-id",
        "w",
        input.to_str().unwrap(),
    ]);
    run(&[
        "publish",
        "--root",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s1",
    ]);
}

/// Runs `guideloom FLAGS extra args` with `env`: the one error line and the time taken.
fn fails_in_time(args: &[&str], extra: &[&str], env: &[(&str, &str)]) -> (String, Duration) {
    let all: Vec<&str> = FLAGS.iter().chain(extra).chain(args).copied().collect();
    let started = Instant::now();
    let out = guideloom_env(&all, env);
    let took = started.elapsed();
    (fails(out), took)
}

/// Checks a timeout failure and the attempts the proxy saw: `--retries 1` means exactly two
/// of each first request. `get` sends two at once (its first log request and `dataset.json`,
/// read beside it to check the entry's dataset id); `info` one (`dataset.json` first).
fn check_timeout(what: &str, err: &str, proxy: &FaultProxy, took: Duration) {
    let first_requests = if what.ends_with(" get") { 2 } else { 1 };
    assert!(err.contains("timed out"), "{what}: {err}");
    assert!(
        !err.to_ascii_lowercase().contains("corrupt"),
        "{what}: {err}"
    );
    assert_eq!(
        proxy.stats().requests,
        2 * first_requests,
        "{what}: two attempts of each first request: {err}"
    );
    println!("{what}: failed after {took:?}: {err}");
}

/// Removes the published subdirectory of the nginx root whatever the outcome.
struct Served(PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn http_root_through_a_drip_or_a_stall_fails_in_one_timeout_line() {
    let (Some(url), Some(served)) = (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT"))
    else {
        return missing("GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT");
    };
    let subdir = unique("cli-faults");
    let dir = Path::new(&served).join(&subdir);
    let _served = Served(dir.clone());
    let tmp = tempfile::tempdir().unwrap();
    publish(dir.to_str().unwrap(), tmp.path(), &[], &[]);

    for (name, fault) in [
        ("drip 1 B/s", Fault::Drip(Duration::from_secs(1))),
        ("stall", Fault::Stall),
    ] {
        for command in [vec!["get", "ROOT", "7"], vec!["info", "ROOT"]] {
            let proxy = FaultProxy::for_url(&url, Script::always(fault)).unwrap();
            let root = format!("{}{subdir}", proxy.proxied(&url));
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "ROOT" { root.as_str() } else { a })
                .collect();
            let (err, took) = fails_in_time(&args, &[], &[]);
            assert!(err.contains(&root), "names the root: {err}");
            check_timeout(&format!("http {name} {}", command[0]), &err, &proxy, took);
        }
    }

    // The same flags through a proxy that passes: the right record.
    let proxy = FaultProxy::for_url(&url, Script::pass()).unwrap();
    let root = format!("{}{subdir}", proxy.proxied(&url));
    let all: Vec<&str> = FLAGS.iter().copied().chain(["get", &root, "7"]).collect();
    assert_eq!(json(&ok(guideloom_env(&all, &[])))["text"], "row 7");
}

#[test]
fn s3_root_through_a_drip_or_a_stall_fails_in_one_timeout_line() {
    let (Some(endpoint), Some(bucket)) = (var("GUIDELOOM_S3_ENDPOINT"), var("GUIDELOOM_S3_BUCKET"))
    else {
        return missing("GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET");
    };
    let key = var("AWS_ACCESS_KEY_ID").unwrap_or_else(|| "test".into());
    let secret = var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|| "test".into());
    let env = |endpoint: &str| -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT_URL".into(), endpoint.to_owned()),
            ("AWS_ACCESS_KEY_ID".into(), key.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), secret.clone()),
            ("AWS_REGION".into(), "us-east-1".into()),
        ]
    };
    let direct = env(&endpoint);
    let direct_ref: Vec<(&str, &str)> = direct
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let root = format!("s3://{bucket}/{}", unique("cli-faults"));
    let tmp = tempfile::tempdir().unwrap();
    publish(&root, tmp.path(), &["--s3-allow-http"], &direct_ref);

    for (name, fault) in [
        ("drip 1 B/s", Fault::Drip(Duration::from_secs(1))),
        ("stall", Fault::Stall),
    ] {
        for command in [vec!["get", root.as_str(), "7"], vec!["info", root.as_str()]] {
            let proxy = FaultProxy::for_url(&endpoint, Script::always(fault)).unwrap();
            let through = env(&proxy.url());
            let through: Vec<(&str, &str)> = through
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let (err, took) = fails_in_time(&command, &["--s3-allow-http"], &through);
            assert!(err.contains(&root), "names the root: {err}");
            check_timeout(&format!("s3 {name} {}", command[0]), &err, &proxy, took);
        }
    }

    let proxy = FaultProxy::for_url(&endpoint, Script::pass()).unwrap();
    let through = env(&proxy.url());
    let through: Vec<(&str, &str)> = through
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let all: Vec<&str> = FLAGS
        .iter()
        .copied()
        .chain(["--s3-allow-http", "get", &root, "7"])
        .collect();
    assert_eq!(json(&ok(guideloom_env(&all, &through)))["text"], "row 7");
}
