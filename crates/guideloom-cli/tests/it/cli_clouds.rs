//! The remote roots of the default build (issue 29: the CLI as installed opens remote roots),
//! through the real `guideloom` binary:
//!
//! - The binary `cargo test -p guideloom-cli` builds has the default features, and it opens
//!   `s3://`, `gs://`, `az://` and `http://` roots: pointed at a port where nothing listens,
//!   each fails with the backend's own `connection refused`, never with a feature refusal or
//!   an install hint. Every endpoint is on 127.0.0.1 (no request leaves the machine; gs://
//!   goes unsigned so that no token is fetched from a metadata server).
//! - `gs://` and `az://` roots are written, published and read back on the emulators that
//!   `cargo xtask servers` starts (fake-gcs-server: `GUIDELOOM_GCS_ENDPOINT` /
//!   `GUIDELOOM_GCS_BUCKET`; Azurite: `GUIDELOOM_AZURE_ENDPOINT` / `GUIDELOOM_AZURE_CONTAINER`),
//!   once through the CLI's flags and once through the standard variables alone; skipped
//!   without them, a failure under `GUIDELOOM_CI=1`.
//!
//! The refusals of a build without a feature are `cli_features.rs`.

#![cfg(unix)]

use crate::common;

#[allow(unused_imports)]
use common::{fails, guideloom, guideloom_env, json, ok, stdout, write_jsonl};

/// A port on 127.0.0.1 where nothing listens (bound, then let go).
#[allow(dead_code)]
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The default build opens every remote scheme: `info` of a root whose endpoint refuses
/// connections fails as a remote `connection refused` (kind `remote`), from the backend
/// itself. Compiled whenever the default features are on (so it fails, rather than vanishes,
/// if a scheme leaves the defaults); `cargo xtask features` runs the feature-off tests.
#[cfg(feature = "default")]
#[test]
fn the_default_build_opens_s3_gs_az_and_http_roots() {
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    let http_root = format!("{endpoint}/data");
    // (root, flags, environment): each backend pointed at the closed port.
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: [Case<'_>; 4] = [
        (
            "s3://some-bucket/data",
            vec!["--s3-allow-http", "--s3-path-style"],
            vec![
                ("AWS_ENDPOINT_URL", endpoint.as_str()),
                ("AWS_ACCESS_KEY_ID", "test"),
                ("AWS_SECRET_ACCESS_KEY", "test"),
                ("AWS_REGION", "us-east-1"),
            ],
        ),
        (
            "gs://some-bucket/data",
            vec![
                "--gcs-endpoint",
                endpoint.as_str(),
                "--gcs-allow-http",
                "--gcs-anonymous",
            ],
            vec![],
        ),
        (
            "az://some-container/data",
            vec!["--azure-emulator", "--azure-endpoint", endpoint.as_str()],
            vec![],
        ),
        (http_root.as_str(), vec![], vec![]),
    ];
    for (root, flags, env) in cases {
        let mut args = vec!["info", root, "--retries", "0", "--connect-timeout", "2"];
        args.extend(&flags);
        let err = fails(guideloom_env(&args, &env));
        assert!(
            !err.contains("feature `") && !err.contains("cargo install"),
            "{root}: a backend error, not a feature refusal: {err}"
        );
        assert!(err.contains(root), "{root} named: {err}");
        assert!(err.contains("connection refused"), "{root}: {err}");
        args.push("--json");
        let out = guideloom_env(&args, &env);
        assert_eq!(out.status.code(), Some(1), "{root}");
        let doc = json(&stdout(&out));
        assert_eq!(doc["error"]["kind"], "remote", "{root}: {doc}");
        assert_eq!(doc["error"]["cause"], "connection_refused", "{root}: {doc}");
    }
}

/// Without an account or the emulator, an `az://` root is refused before any request, naming
/// the variable to set and the flag for the emulator, not the feature (no network at all).
#[cfg(feature = "azure")]
#[test]
fn an_az_root_without_an_account_names_the_variable() {
    let out = std::process::Command::new(common::BIN)
        .args(["info", "az://some-container/data"])
        .env_remove("AZURE_STORAGE_ACCOUNT_NAME")
        .env_remove("AZURE_STORAGE_USE_EMULATOR")
        .output()
        .unwrap();
    let err = fails(out);
    assert!(
        err.starts_with("error: az://some-container/data: no Azure storage account"),
        "{err}"
    );
    assert!(
        err.contains("AZURE_STORAGE_ACCOUNT_NAME") && err.contains("--azure-emulator"),
        "{err}"
    );
    assert!(!err.contains("cargo install"), "{err}");
}

/// A plain-HTTP endpoint is refused unless allowed, for each cloud as for S3: the line names
/// where the endpoint came from and how to allow it; nothing is sent.
#[cfg(all(feature = "gcs", feature = "azure"))]
#[test]
fn plain_http_endpoints_need_allowing() {
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    let no_allow = [("GOOGLE_ALLOW_HTTP", ""), ("AZURE_ALLOW_HTTP", "")];
    let err = fails(guideloom_env(
        &["info", "gs://b/p", "--gcs-endpoint", &endpoint],
        &no_allow,
    ));
    assert!(
        err.contains("--gcs-endpoint") && err.contains("--gcs-allow-http"),
        "{err}"
    );
    let mut env = no_allow.to_vec();
    env.push(("GOOGLE_BASE_URL", &endpoint));
    let err = fails(guideloom_env(&["info", "gs://b/p"], &env));
    assert!(
        err.contains("GOOGLE_BASE_URL") && err.contains("GOOGLE_ALLOW_HTTP=true"),
        "{err}"
    );
    let account = format!("{endpoint}/acct");
    let mut env = no_allow.to_vec();
    env.push(("AZURE_STORAGE_ACCOUNT_NAME", "acct"));
    env.push(("AZURE_STORAGE_USE_EMULATOR", ""));
    let err = fails(guideloom_env(
        &["info", "az://c/p", "--azure-endpoint", &account],
        &env,
    ));
    assert!(
        err.contains("--azure-endpoint") && err.contains("--azure-allow-http"),
        "{err}"
    );
}

/// The emulator named by `endpoint`/`bucket`, or `None` after a printed `skipped:` line (a
/// panic under `GUIDELOOM_CI=1`, like every other server-backed test).
#[allow(dead_code)]
fn emulator(test: &str, endpoint: &str, bucket: &str) -> Option<(String, String)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var(endpoint), var(bucket)) {
        (Some(e), Some(b)) => Some((e, b)),
        _ => {
            assert!(
                std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
                "{test}: GUIDELOOM_CI=1 but {endpoint}/{bucket} are not set"
            );
            println!("skipped: {test}: {endpoint}/{bucket} not set (no emulator)");
            None
        }
    }
}

/// A prefix no other run uses.
#[allow(dead_code)]
fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// Writes 40 records as several shards into `root` and publishes them as snapshot `s1`, then
/// appends 10 more as `s2` (a second log entry on the remote store), all with
/// `write_flags`/`env`;
/// then reads them back with `read_flags`/`read_env` only: info, a record, the whole of `s1`
/// in order, and a deep verify.
#[allow(dead_code)]
fn publish_and_read_back(
    root: &str,
    (write_flags, env): (&[&str], &[(&str, &str)]),
    (read_flags, read_env): (&[&str], &[(&str, &str)]),
) {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str], flags: &[&str], env: &[(&str, &str)]| {
        let all: Vec<&str> = flags.iter().chain(args).copied().collect();
        ok(guideloom_env(&all, env))
    };
    for (work, snapshot, n) in [("w1", "s1", 40), ("w2", "s2", 10)] {
        let input = tmp.path().join(format!("{work}.jsonl"));
        write_jsonl(&input, work, n);
        let input = input.to_str().unwrap();
        run(
            &[
                "write",
                "--root",
                root,
                "--work-id",
                work,
                "--max-shard-bytes",
                "1024",
                input,
            ],
            write_flags,
            env,
        );
        let mut publish = vec![
            "publish",
            "--root",
            root,
            "--dataset-id",
            "d",
            "--snapshot-id",
            snapshot,
        ];
        if snapshot == "s2" {
            publish.push("--append");
        }
        run(&publish, write_flags, env);
    }
    let info = json(&run(&["info", root, "--json"], read_flags, read_env));
    assert_eq!(info["dataset_id"], "d", "{info}");
    assert_eq!(info["latest"], "s2", "{info}");
    let rec = json(&run(&["get", root, "45"], read_flags, read_env));
    assert_eq!(rec["id"], "w2-5", "{rec}");
    let lines = run(&["cat", root, "--snapshot", "s1"], read_flags, read_env);
    let ids: Vec<String> = lines
        .lines()
        .map(|l| json(l)["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, (0..40).map(|i| format!("w1-{i}")).collect::<Vec<_>>());
    run(&["verify", root, "--deep"], read_flags, read_env);
}

/// fake-gcs-server: written and published through `--gcs-endpoint --gcs-allow-http
/// --gcs-anonymous`, read back through GOOGLE_BASE_URL, GOOGLE_ALLOW_HTTP and
/// GOOGLE_SKIP_SIGNATURE alone.
#[cfg(feature = "gcs")]
#[test]
fn a_gs_root_publishes_and_reads_back_on_the_emulator() {
    let test = "a_gs_root_publishes_and_reads_back_on_the_emulator";
    let Some((endpoint, bucket)) = emulator(test, "GUIDELOOM_GCS_ENDPOINT", "GUIDELOOM_GCS_BUCKET")
    else {
        return;
    };
    let root = format!("gs://{bucket}/{}", unique("cli-gcs"));
    let flags = [
        "--gcs-endpoint",
        endpoint.as_str(),
        "--gcs-allow-http",
        "--gcs-anonymous",
    ];
    let env = [
        ("GOOGLE_BASE_URL", endpoint.as_str()),
        ("GOOGLE_ALLOW_HTTP", "true"),
        ("GOOGLE_SKIP_SIGNATURE", "true"),
    ];
    publish_and_read_back(&root, (&flags, &[]), (&[], &env));
}

/// Azurite: written and published through `--azure-emulator --azure-endpoint`, read back
/// through AZURE_STORAGE_USE_EMULATOR and AZURITE_BLOB_STORAGE_URL alone.
#[cfg(feature = "azure")]
#[test]
fn an_az_root_publishes_and_reads_back_on_the_emulator() {
    let test = "an_az_root_publishes_and_reads_back_on_the_emulator";
    let Some((endpoint, container)) = emulator(
        test,
        "GUIDELOOM_AZURE_ENDPOINT",
        "GUIDELOOM_AZURE_CONTAINER",
    ) else {
        return;
    };
    // The blob service's base URL, without the account (`AzureOptions::endpoint` with the
    // emulator); accept one given with Azurite's account too.
    let base = endpoint
        .trim_end_matches('/')
        .trim_end_matches("/devstoreaccount1")
        .to_owned();
    let root = format!("az://{container}/{}", unique("cli-azure"));
    let flags = ["--azure-emulator", "--azure-endpoint", base.as_str()];
    let env = [
        ("AZURE_STORAGE_USE_EMULATOR", "true"),
        ("AZURITE_BLOB_STORAGE_URL", base.as_str()),
    ];
    publish_and_read_back(&root, (&flags, &[]), (&[], &env));
}
