//! Feature `aws-profile` against moto: a named profile in temporary `AWS_CONFIG_FILE` /
//! `AWS_SHARED_CREDENTIALS_FILE` files signs the requests of an `s3://` root and sets its
//! region, with no `AWS_ACCESS_KEY_ID` anywhere in the process.
//!
//! moto accepts any keys, so "the profile is used" is proven by (a) the credentials the bridge
//! hands to object_store carrying the profile's key id while the environment holds another,
//! (b) the resolved region being the profile's while `AWS_REGION` names another, and (c) the
//! publish succeeding once the environment holds no keys at all (nothing else could sign).
//!
//! This binary mutates the process environment, so it holds exactly ONE test: nextest runs it
//! in its own process, and under `cargo test` no other test thread of this binary exists.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use guideloom_publish::credentials::{AwsChain, RegionSource};
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, PublishRequest, Registry, Root, RootOptions,
    StoreOptions,
};
use guideloom_tests::unique;
use object_store::CredentialProvider;

const PROFILE: &str = "guideloom-profile-test";
const PROFILE_KEY_ID: &str = "AKIDFROMPROFILE";
const PROFILE_REGION: &str = "eu-north-1";
const ENV_KEY_ID: &str = "AKIDFROMENVIRONMENT";
const ENV_REGION: &str = "ap-southeast-2";

/// Sets (or, with `None`, removes) an environment variable.
#[allow(unsafe_code)] // set_var/remove_var are unsafe in edition 2024; see SAFETY below.
fn set_env(key: &str, value: Option<&str>) {
    // SAFETY: this test binary holds a single test and calls this before it starts any
    // runtime or thread of its own, so no other thread reads or writes the environment
    // concurrently (nextest also runs each test in its own process).
    unsafe {
        match value {
            Some(v) => std::env::set_var(key, v),
            None => std::env::remove_var(key),
        }
    }
}

/// A profile whose `credential_process` prints credentials expiring `valid_secs` from now and
/// counts its invocations in a file: the config section and the counter's path.
fn process_profile(dir: &Path, name: &str, valid_secs: u64) -> (String, PathBuf) {
    let counter = dir.join(format!("{name}.count"));
    let script = dir.join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!(
            "echo fetched >> '{counter}'\n\
             exp=$(date -u -d \"@$(( $(date +%s) + {valid_secs} ))\" +%Y-%m-%dT%H:%M:%SZ)\n\
             printf '{{\"Version\": 1, \"AccessKeyId\": \"AKIDPROCESS\", \
             \"SecretAccessKey\": \"process-secret\", \"SessionToken\": \"process-token\", \
             \"Expiration\": \"%s\"}}\\n' \"$exp\"\n",
            counter = counter.display()
        ),
    )
    .unwrap();
    let section = format!(
        "[profile {name}]\nregion = {PROFILE_REGION}\ncredential_process = /bin/sh {}\n",
        script.display()
    );
    (section, counter)
}

fn invocations(counter: &Path) -> usize {
    std::fs::read_to_string(counter).map_or(0, |s| s.lines().count())
}

fn options(endpoint: &str, profile: Option<&str>) -> StoreOptions {
    let mut opts = StoreOptions::default();
    opts.s3.endpoint = Some(endpoint.to_owned());
    opts.s3.allow_http = true;
    opts.retry = Some(guideloom_publish::RetryPolicy::remote_request().with_max_attempts(2));
    opts.s3.profile = profile.map(str::to_owned);
    opts
}

async fn publish_and_read_back(root: &Root, tag: &str) {
    let body = Bytes::from(format!(
        "shard written with AWS profile credentials ({tag})"
    ));
    let shard = root
        .upload_shard("worker-000", 0, body.clone(), 2)
        .await
        .unwrap();
    let request = PublishRequest {
        dataset_id: "profiles".into(),
        snapshot_id: "run-001".into(),
        shards: vec![shard.clone()],
        mode: PublishMode::Full,
        schema: None,
    };
    let snapshot = root
        .publish(&request, &PublicationOptions::default())
        .await
        .unwrap()
        .snapshot;
    assert_eq!(root.latest().await.unwrap(), snapshot);
    assert_eq!(snapshot.total_records(), 2);
    let read = root.store().get(&shard.key, shard.size).await.unwrap();
    assert_eq!(read.body, body, "{tag}: the shard reads back byte for byte");
}

#[test]
fn a_named_profile_signs_requests_and_sets_the_region() {
    let Some(moto) = guideloom_tests::moto("a_named_profile_signs_requests_and_sets_the_region")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let credentials = dir.path().join("credentials");
    let (long_lived, long_count) = process_profile(dir.path(), "process-long", 3600);
    let (short_lived, short_count) = process_profile(dir.path(), "process-short", 60);
    std::fs::write(
        &config,
        format!(
            "[profile {PROFILE}]\nregion = {PROFILE_REGION}\n\n[default]\nregion = us-west-1\n\n\
             {long_lived}\n{short_lived}"
        ),
    )
    .unwrap();
    std::fs::write(
        &credentials,
        format!(
            "[{PROFILE}]\naws_access_key_id = {PROFILE_KEY_ID}\naws_secret_access_key = profile-secret\n"
        ),
    )
    .unwrap();

    // Only the temporary files: no user config, no ambient profile, no CA bundle override.
    set_env("AWS_CONFIG_FILE", Some(config.to_str().unwrap()));
    set_env(
        "AWS_SHARED_CREDENTIALS_FILE",
        Some(credentials.to_str().unwrap()),
    );
    for key in [
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_CA_BUNDLE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_DEFAULT_REGION",
    ] {
        set_env(key, None);
    }
    // Decoys: the environment names other keys and another region.
    set_env("AWS_ACCESS_KEY_ID", Some(ENV_KEY_ID));
    set_env("AWS_SECRET_ACCESS_KEY", Some("environment-secret"));
    set_env("AWS_REGION", Some(ENV_REGION));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // (a) + (b): the named profile beats the environment's keys and region.
    let named = options(&moto.endpoint, Some(PROFILE));
    let chain = AwsChain::resolve(&named.s3).unwrap();
    let region = chain.region.clone().unwrap();
    assert_eq!(region.region, PROFILE_REGION);
    assert_eq!(region.source, RegionSource::NamedProfile);
    let credential = runtime
        .block_on(chain.credentials.get_credential())
        .unwrap();
    assert_eq!(credential.key_id, PROFILE_KEY_ID);
    assert!(!format!("{chain:?}").contains("profile-secret"));
    // An explicit region still beats the profile's.
    let mut explicit = named.s3.clone();
    explicit.region = Some("ca-central-1".into());
    let region = AwsChain::resolve(&explicit).unwrap().region.unwrap();
    assert_eq!(
        (region.region.as_str(), region.source),
        ("ca-central-1", RegionSource::Options)
    );

    // A missing profile is a typed error naming it, when the root is resolved.
    let err = Registry::new()
        .resolve(
            "s3://any-bucket/x",
            &options(&moto.endpoint, Some("no-such-profile")),
        )
        .map(|store| Root::new(store, RootOptions::default()))
        .unwrap_err();
    assert!(
        matches!(&err, Error::AwsProfile { profile, what, .. }
            if profile == "no-such-profile" && what.contains(PROFILE)),
        "{err}"
    );

    // (c): no keys in the environment at all; the profile signs a publish against moto.
    set_env("AWS_ACCESS_KEY_ID", None);
    set_env("AWS_SECRET_ACCESS_KEY", None);
    let named_prefix = unique("aws-profile-named");
    let uri = format!("s3://{}/{named_prefix}", moto.bucket);
    let root = Root::new(
        Registry::new().resolve(&uri, &named).unwrap(),
        RootOptions::default(),
    );
    let described = root.store().describe();
    assert!(described.contains(PROFILE), "{described}");
    runtime.block_on(publish_and_read_back(&root, "named profile"));

    // Refresh, end to end through aws-config's credential_process provider: credentials valid
    // for an hour are fetched once for a whole publish; credentials expiring inside the
    // refresh window (60 s < 5 min) are fetched again for every request.
    let process_prefix = unique("aws-profile-process");
    let root = Root::new(
        Registry::new()
            .resolve(
                &format!("s3://{}/{process_prefix}/long", moto.bucket),
                &options(&moto.endpoint, Some("process-long")),
            )
            .unwrap(),
        RootOptions::default(),
    );
    runtime.block_on(publish_and_read_back(&root, "credential_process, 1 h"));
    assert_eq!(
        invocations(&long_count),
        1,
        "one fetch for the whole publish"
    );
    let root = Root::new(
        Registry::new()
            .resolve(
                &format!("s3://{}/{process_prefix}/short", moto.bucket),
                &options(&moto.endpoint, Some("process-short")),
            )
            .unwrap(),
        RootOptions::default(),
    );
    runtime.block_on(publish_and_read_back(&root, "credential_process, 60 s"));
    println!(
        "credential_process fetches: valid 1 h: {}, valid 60 s: {}",
        invocations(&long_count),
        invocations(&short_count)
    );
    assert!(
        invocations(&short_count) >= 5,
        "expiring credentials are refetched per request: {} fetches",
        invocations(&short_count)
    );

    // The ambient profile (AWS_PROFILE) through the default chain: its keys sign, but the
    // environment's region beats the ambient profile's, as in the AWS CLI.
    set_env("AWS_PROFILE", Some(PROFILE));
    let ambient = options(&moto.endpoint, None);
    let chain = AwsChain::resolve(&ambient.s3).unwrap();
    let region = chain.region.clone().unwrap();
    assert_eq!(
        (region.region.as_str(), region.source),
        (ENV_REGION, RegionSource::Environment)
    );
    let credential = runtime
        .block_on(chain.credentials.get_credential())
        .unwrap();
    assert_eq!(credential.key_id, PROFILE_KEY_ID);
    set_env("AWS_REGION", None);
    let region = AwsChain::resolve(&ambient.s3).unwrap().region.unwrap();
    assert_eq!(
        (region.region.as_str(), region.source),
        (PROFILE_REGION, RegionSource::AmbientProfile)
    );
    let ambient_prefix = unique("aws-profile-ambient");
    let uri = format!("s3://{}/{ambient_prefix}", moto.bucket);
    let root = Root::new(
        Registry::new().resolve(&uri, &ambient).unwrap(),
        RootOptions::default(),
    );
    runtime.block_on(publish_and_read_back(&root, "ambient profile"));

    // Unparsable shared config files: fatal for a named profile, ignored (with a warning) for
    // the ambient one, as in the AWS SDKs.
    let broken = dir.path().join("broken-config");
    std::fs::write(&broken, "this line is outside any [profile] section\n").unwrap();
    set_env("AWS_CONFIG_FILE", Some(broken.to_str().unwrap()));
    set_env("AWS_PROFILE", None);
    set_env("AWS_REGION", Some(ENV_REGION));
    let err = AwsChain::resolve(&named.s3).unwrap_err();
    assert!(
        matches!(&err, Error::AwsProfile { profile, source: Some(_), .. } if profile == PROFILE),
        "{err}"
    );
    let region = AwsChain::resolve(&ambient.s3).unwrap().region.unwrap();
    assert_eq!(
        (region.region.as_str(), region.source),
        (ENV_REGION, RegionSource::Environment)
    );

    // Clean up what this test wrote to the shared bucket.
    runtime.block_on(async {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;
        for prefix in [named_prefix, ambient_prefix, process_prefix] {
            let prefix = object_store::path::Path::from(prefix);
            let listed: Vec<_> = moto.store.list(Some(&prefix)).try_collect().await.unwrap();
            assert!(!listed.is_empty(), "{prefix}: the test wrote objects");
            for meta in listed {
                moto.store.delete(&meta.location).await.unwrap();
            }
        }
    });
}
