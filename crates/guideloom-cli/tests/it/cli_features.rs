//! A binary built without a root's cargo feature (`cargo test -p guideloom-cli
//! --no-default-features`, run by `cargo xtask features`) refuses that root in words, names
//! the feature, and ends its one line with the `cargo install` command that builds a binary
//! with it: the plain install for a default feature (`s3`, `gcs`, `azure`, `http`: only a
//! `--no-default-features` build lacks one), `--features aws-profile` for the one that is
//! not a default. Local roots need no feature. Each test exists only in the builds that lack
//! its feature; what the default build opens is `cli_clouds.rs`.

use crate::common;

#[allow(unused_imports)]
use common::{fails, guideloom, json, ok, stderr, write_and_publish, write_jsonl};

/// The refusal of `args` names `feature` and ends with `install`, the command that adds it.
#[allow(dead_code)]
#[track_caller]
fn refused_with(args: &[&str], feature: &str, install: &str) {
    let out = guideloom(args);
    let err = fails(out);
    assert!(
        err.contains(&format!("feature `{feature}`")),
        "names the feature {feature}: {err}"
    );
    assert!(
        err.trim_end().ends_with(install),
        "the install command, ending the error's one line: {err}"
    );
}

/// A default feature's refusal: built with `--no-default-features`; the plain install has it.
#[allow(dead_code)]
#[track_caller]
fn refused_with_hint(args: &[&str], feature: &str) {
    refused_with(args, feature, "cargo install --path crates/guideloom-cli");
    let err = stderr(&guideloom(args));
    assert!(err.contains("--no-default-features"), "{err}");
}

#[cfg(not(feature = "gcs"))]
#[test]
fn a_gs_root_without_gcs_names_the_feature_and_the_install_line() {
    refused_with_hint(&["info", "gs://bucket/prefix"], "gcs");
}

#[cfg(not(feature = "azure"))]
#[test]
fn an_az_root_without_azure_names_the_feature_and_the_install_line() {
    refused_with_hint(&["info", "az://container/prefix"], "azure");
}

#[cfg(not(feature = "s3"))]
#[test]
fn an_s3_root_without_s3_names_the_feature_and_the_install_line() {
    refused_with_hint(&["info", "s3://bucket/prefix"], "s3");
}

#[cfg(not(feature = "http"))]
#[test]
fn an_http_root_without_http_names_the_feature_and_the_install_line() {
    refused_with_hint(&["info", "http://127.0.0.1:9/data"], "http");
}

/// In the default build too: `aws-profile` is not a default feature.
#[cfg(all(feature = "s3", not(feature = "aws-profile")))]
#[test]
fn an_s3_profile_without_aws_profile_names_the_feature_and_the_install_line() {
    refused_with(
        &["--s3-profile", "dev", "info", "s3://bucket/prefix"],
        "aws-profile",
        "cargo install --path crates/guideloom-cli --features aws-profile",
    );
}

/// AWS_PROFILE alone (no keys in the environment) is refused the same way: a build without
/// `aws-profile` would otherwise ignore it.
#[cfg(all(feature = "s3", not(feature = "aws-profile")))]
#[test]
fn aws_profile_in_the_environment_without_aws_profile_names_the_feature() {
    let out = std::process::Command::new(common::BIN)
        .args(["info", "s3://bucket/prefix"])
        .env("AWS_PROFILE", "dev")
        .env_remove("AWS_ACCESS_KEY_ID")
        .output()
        .unwrap();
    let err = fails(out);
    assert!(err.contains("AWS_PROFILE=\"dev\""), "{err}");
    assert!(
        err.trim_end()
            .ends_with("cargo install --path crates/guideloom-cli --features aws-profile"),
        "{err}"
    );
}

/// Whatever the features, a local root works, and an error that is not about a feature
/// (here: no such root) gets no install hint.
#[test]
fn local_roots_need_no_feature_and_other_errors_get_no_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let root = root.to_str().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_jsonl(&input, "r", 3);
    write_and_publish(root, input.to_str().unwrap());
    let info = json(&ok(guideloom(&["--json", "info", root])));
    assert_eq!(info["dataset_id"], "d", "{info}");
    assert_eq!(info["latest"], "s", "{info}");
    let missing = tmp.path().join("missing");
    let out = guideloom(&["info", missing.to_str().unwrap()]);
    assert!(!stderr(&out).contains("cargo install"), "{}", stderr(&out));
    fails(out);
}
