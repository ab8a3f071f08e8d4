//! Opening roots, selecting snapshots, and reading published records.
//!
//! Records are read through the facade's [`Dataset`] (guideloom-publish's
//! `Dataset` underneath): each shard is opened once per command (one tail read), then
//! a record is one ranged read.

use std::sync::Arc;

use guideloom::Dataset;
use guideloom_format::ReadOptions;
use guideloom_publish::RootStore;
use guideloom_publish::{
    AzureOptions, GcsOptions, RetryPolicy, Root, RootOptions, RootUri, S3Addressing, S3Environment,
    S3Options, Snapshot, StoreOptions,
};

use crate::cli::Global;
use crate::error::{CliError, Result};
use crate::json;

/// A record read by [`OpenRoot::get_record_named`].
#[derive(Debug)]
pub(crate) struct NamedRecord {
    /// Its exact stored bytes.
    pub(crate) bytes: bytes::Bytes,
    /// Its shard's record format (`cbor`, `raw`, ...).
    pub(crate) format: String,
    /// Its shard's key.
    pub(crate) key: String,
    /// The input file name `write --format raw` kept for it.
    pub(crate) name: Option<String>,
}

/// A root opened from a command-line argument.
#[derive(Debug, Clone)]
pub(crate) struct OpenRoot {
    /// The argument as given (for messages).
    pub(crate) name: String,
    /// The parsed URI.
    pub(crate) uri: RootUri,
    /// The publication-layer root.
    pub(crate) root: Root,
}

/// S3 options from the standard AWS environment plus the CLI flags.
pub(crate) fn s3_options(global: &Global) -> Result<S3Options> {
    // object_store's conventions, read as every S3 store build reads them.
    let environment = S3Environment::read();
    let endpoint = environment.endpoint.as_ref().map(|(_, url)| url.clone());
    let region = environment.region.clone();
    let allow_http = global.s3_allow_http || environment.allow_http;
    if let Some((variable, ep)) = &environment.endpoint
        && ep.starts_with("http://")
        && !allow_http
    {
        return Err(CliError::argument(
            *variable,
            format!(
                "{ep} is plain HTTP; pass --s3-allow-http (or set AWS_ALLOW_HTTP=true) to use it"
            ),
        ));
    }
    let addressing = if global.s3_path_style || endpoint.is_some() {
        S3Addressing::Path
    } else {
        S3Addressing::VirtualHosted
    };
    Ok(S3Options {
        // A named profile's region wins over the environment's (resolved by the AWS chain).
        region: if global.s3_profile.is_some() {
            None
        } else {
            region
        },
        endpoint,
        addressing,
        allow_http,
        profile: global.s3_profile.clone(),
    })
}

/// A process environment: a variable's value by name (`std::env::var` in the binary, a
/// table in the tests).
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The value of variable `name` in `env`, if set and not empty.
fn env_var(env: Env<'_>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

/// Whether variable `name` is true by object_store's reading of booleans (`true`, `1`, `yes`,
/// `on`, `y`, any case), as its `from_env` builders read it.
fn env_true(env: Env<'_>, name: &str) -> bool {
    env_var(env, name).is_some_and(|v| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "1" | "true" | "on" | "yes" | "y"
        )
    })
}

/// A plain-HTTP `endpoint` (from `source`, a flag or a variable) is refused unless allowed,
/// naming what allows it: the same rule and words as an S3 endpoint's.
fn check_plain_http(source: &str, endpoint: &str, allowed: bool, allow: &str) -> Result<()> {
    if endpoint.starts_with("http://") && !allowed {
        return Err(CliError::argument(
            source,
            format!("{endpoint} is plain HTTP; pass {allow} to use it"),
        ));
    }
    Ok(())
}

/// A build without `aws-profile` reads no AWS config files: with AWS_PROFILE set (and no
/// `--s3-profile`), `root` is refused like `--s3-profile` is, naming the feature (so the
/// error line ends with the install command that adds it), rather than signed by whatever
/// else the environment holds or failing at the instance-metadata fallback. Keys in the
/// environment win over a profile in the AWS chain too, so with AWS_ACCESS_KEY_ID set the
/// profile is moot and nothing is refused.
fn check_aws_profile(global: &Global, root: &str, env: Env<'_>) -> Result<()> {
    if cfg!(feature = "aws-profile") || global.s3_profile.is_some() {
        return Ok(());
    }
    match env_var(env, "AWS_PROFILE") {
        Some(profile) if env_var(env, "AWS_ACCESS_KEY_ID").is_none() => Err(CliError::root(
            root,
            guideloom_publish::Error::Unsupported {
                what: format!(
                    "AWS_PROFILE={profile:?}: AWS profiles are read only with feature \
                     `aws-profile` (or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                ),
            },
        )),
        _ => Ok(()),
    }
}

/// GCS options from the flags, completed from `env`: `--gcs-endpoint` else GOOGLE_BASE_URL;
/// `--gcs-allow-http` and `--gcs-anonymous`, else GOOGLE_ALLOW_HTTP and GOOGLE_SKIP_SIGNATURE
/// as the library reads them ([`GcsOptions::with_environment`], applied here too so that a
/// plain-HTTP endpoint is refused before any request, naming the flag). object_store reads the
/// credential variables itself.
pub(crate) fn gcs_options(global: &Global, env: Env<'_>) -> Result<GcsOptions> {
    let endpoint = match &global.gcs_endpoint {
        Some(url) => Some(("--gcs-endpoint", url.clone())),
        None => env_var(env, "GOOGLE_BASE_URL").map(|url| ("GOOGLE_BASE_URL", url)),
    };
    let options = GcsOptions::default()
        .with_allow_http(global.gcs_allow_http)
        .with_anonymous(global.gcs_anonymous)
        .with_environment(env);
    if let Some((source, url)) = &endpoint {
        check_plain_http(
            source,
            url,
            options.allow_http,
            "--gcs-allow-http (or set GOOGLE_ALLOW_HTTP=true)",
        )?;
    }
    Ok(GcsOptions {
        endpoint: endpoint.map(|(_, url)| url),
        ..options
    })
}

/// Azure options for `root` from the flags, completed from `env`: `--azure-emulator` or
/// AZURE_STORAGE_USE_EMULATOR (folded in here so that an `--azure-endpoint` is the
/// emulator's), `--azure-endpoint` else AZURE_STORAGE_ENDPOINT (not for the emulator, whose
/// URL object_store reads from AZURITE_BLOB_STORAGE_URL), `--azure-allow-http` or
/// AZURE_ALLOW_HTTP ([`AzureOptions::with_environment`]). object_store reads the account and credential variables itself; without
/// an account (AZURE_STORAGE_ACCOUNT_NAME) or the emulator, `root` is refused naming both (the
/// library refuses it too, in its API's terms).
pub(crate) fn azure_options(global: &Global, root: &str, env: Env<'_>) -> Result<AzureOptions> {
    let emulator = global.azure_emulator || env_true(env, "AZURE_STORAGE_USE_EMULATOR");
    let allow_http = AzureOptions::default()
        .with_allow_http(global.azure_allow_http)
        .with_environment(env)
        .allow_http;
    let endpoint = match &global.azure_endpoint {
        Some(url) => Some(("--azure-endpoint", url.clone())),
        None if emulator => None,
        None => env_var(env, "AZURE_STORAGE_ENDPOINT").map(|url| ("AZURE_STORAGE_ENDPOINT", url)),
    };
    if let Some((source, url)) = &endpoint
        && !emulator
    {
        check_plain_http(
            source,
            url,
            allow_http,
            "--azure-allow-http (or set AZURE_ALLOW_HTTP=true)",
        )?;
    }
    if !emulator && env_var(env, "AZURE_STORAGE_ACCOUNT_NAME").is_none() {
        return Err(CliError::argument(
            root,
            "no Azure storage account: set AZURE_STORAGE_ACCOUNT_NAME (or pass \
             --azure-emulator for Azurite)",
        ));
    }
    Ok(AzureOptions {
        endpoint: endpoint.map(|(_, url)| url),
        use_emulator: emulator,
        allow_http,
        ..AzureOptions::default()
    })
}

/// The retry and time bounds of every remote root (`s3://`, `gs://`, `az://` and `http(s)://` alike, set once
/// on the store options): each client's defaults, with `--timeout`, `--connect-timeout`,
/// `--retries` (attempts = retries + 1, with the default backoff bounds), `--deadline`
/// (object_store's `retry_timeout`; for an HTTP root the deadline of one read) and
/// `--http-listing` applied.
pub(crate) fn remote_options(global: &Global, options: StoreOptions) -> StoreOptions {
    let mut options = options.with_http_listing(global.http_listing);
    if let Some(t) = global.timeout {
        options = options.with_request_timeout(t);
    }
    if let Some(t) = global.connect_timeout {
        options = options.with_connect_timeout(t);
    }
    if let Some(n) = global.retries {
        options = options
            .with_retry(RetryPolicy::remote_request().with_max_attempts(n.saturating_add(1)));
    }
    if let Some(d) = global.deadline {
        options = options.with_retry_timeout(d);
    }
    options
}

/// Opens `arg` as a root. With `must_exist`, a local root that is not a directory is an
/// error naming the path (reading commands); writers create it.
pub(crate) fn open(arg: &str, global: &Global, must_exist: bool) -> Result<OpenRoot> {
    let uri = RootUri::parse(arg).map_err(|e| CliError::root(arg, e))?;
    if let RootUri::Local(path) = &uri
        && must_exist
        && !path.is_dir()
    {
        return Err(CliError::argument(
            arg,
            "no such dataset root (directory does not exist)",
        ));
    }
    if global.mount && !matches!(uri, RootUri::Local(_)) {
        return Err(CliError::argument(
            "--mount",
            format!(
                "{arg} is not a local path: only a local directory can be a declared mounted bucket"
            ),
        ));
    }
    // Each cloud's environment and flags matter only to its own roots (a plain-HTTP
    // AWS_ENDPOINT_URL must not stop a local, mounted or gs:// root), and only in a build
    // that opens them: without the feature, the refusal that names it comes first.
    let mut options = StoreOptions::default().with_mount(global.mount);
    if let RootUri::Bucket { scheme, .. } = &uri {
        match scheme.as_str() {
            "s3" if cfg!(feature = "s3") => {
                check_aws_profile(global, arg, &process_env)?;
                options = options.with_s3(s3_options(global)?);
            }
            "gs" if cfg!(feature = "gcs") => {
                options = options.with_gcs(gcs_options(global, &process_env)?);
            }
            "az" if cfg!(feature = "azure") => {
                options = options.with_azure(azure_options(global, arg, &process_env)?);
            }
            _ => {}
        }
    }
    let options = remote_options(global, options);
    let root =
        Root::open(arg, &options, RootOptions::default()).map_err(|e| CliError::root(arg, e))?;
    Ok(OpenRoot {
        name: arg.to_owned(),
        uri,
        root,
    })
}

impl OpenRoot {
    /// Maps a publication error to a CLI error naming this root.
    pub(crate) fn err(&self, e: guideloom_publish::Error) -> CliError {
        if let guideloom_publish::Error::NotFound { key } = &e
            && (key == "dataset.json" || key == "log/")
        {
            return CliError::argument(
                &self.name,
                format!("no published dataset here ({key} not found)"),
            );
        }
        CliError::root(&self.name, e)
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn RootStore> {
        self.root.store()
    }

    /// The latest snapshot, or `id`.
    pub(crate) async fn snapshot(&self, id: Option<&str>) -> Result<Snapshot> {
        match id {
            Some(id) => self.root.snapshot(id).await.map_err(|e| match e {
                guideloom_publish::Error::NotFound { .. } => {
                    CliError::argument("--snapshot", format!("no snapshot {id:?} in {}", self.name))
                }
                e => self.err(e),
            }),
            None => self.root.latest().await.map_err(|e| self.err(e)),
        }
    }

    /// A dataset over `snapshot` of this root (no request until the first read).
    pub(crate) fn dataset(&self, snapshot: Snapshot) -> Dataset {
        self.root.reader_with(snapshot, ReadOptions::default())
    }

    /// Maps a dataset error to a CLI error naming this root (and `key`, the shard read).
    pub(crate) fn dataset_err(&self, key: &str, e: impl Into<guideloom::Error>) -> CliError {
        match e.into() {
            guideloom::Error::Publish(guideloom_publish::Error::Shard { key, source }) => {
                CliError::shard(&self.name, &key, *source)
            }
            guideloom::Error::Publish(e) => self.err(e),
            guideloom::Error::Format(e) => CliError::shard(&self.name, key, e),
            guideloom::Error::Io(e) => CliError::io(format!("{}: shard {key}", self.name), e),
            other => CliError::Dataset {
                root: self.name.clone(),
                source: Box::new(other),
            },
        }
    }

    /// Record `index` of `dataset`: its exact stored bytes and the number of the shard
    /// holding it (one ranged read). An index past the end is an error saying the length.
    pub(crate) async fn get_record(
        &self,
        dataset: &Dataset,
        index: u64,
    ) -> Result<(bytes::Bytes, usize)> {
        let snapshot = dataset.snapshot();
        let n = dataset
            .table()
            .locate(index)
            .map(|l| l.shard)
            .ok_or_else(|| {
                CliError::argument(
                    "INDEX",
                    format!(
                        "record {index} out of range: snapshot {} has {} records",
                        snapshot.id(),
                        dataset.len()
                    ),
                )
            })?;
        let key = &snapshot.shards()[n].key;
        let bytes = dataset
            .get_async(index)
            .await
            .map_err(|e| self.dataset_err(key, e))?;
        Ok((bytes, n))
    }

    /// Record `index` of `dataset` with what printing it needs: its bytes (one ranged
    /// read), its shard's record format (from the footer, read when the shard was opened),
    /// the shard's key and, for a raw record written from a file, that file's name (see
    /// [`crate::input::input_name`]).
    pub(crate) async fn get_record_named(
        &self,
        dataset: &Dataset,
        index: u64,
    ) -> Result<NamedRecord> {
        let (bytes, n) = self.get_record(dataset, index).await?;
        let key = dataset.snapshot().shards()[n].key.clone();
        let shard = dataset.open_shard_async(n).await.map_err(|e| self.err(e))?;
        let local = index - dataset.table().starts()[n];
        Ok(NamedRecord {
            bytes,
            format: shard.record_format().to_owned(),
            key,
            name: crate::input::input_name(shard, local),
        })
    }

    /// The error of record `index` (in shard `key`) that JSON cannot carry.
    pub(crate) fn record_error(&self, index: u64, key: &str, e: &json::EmitError) -> CliError {
        CliError::Record {
            root: self.name.clone(),
            index,
            key: key.to_owned(),
            what: e.to_string(),
        }
    }

    /// Record `index` of `dataset` as its exact JSON text, whole in memory (for small
    /// records the quickstart checks; `get` and `cat` stream instead). A record JSON cannot
    /// carry is an error naming it.
    pub(crate) async fn get_json_text(&self, dataset: &Dataset, index: u64) -> Result<Vec<u8>> {
        let record = self.get_record_named(dataset, index).await?;
        let mut text = Vec::new();
        json::record_json(&record.format, &record.bytes, &mut text)
            .map_err(|e| self.record_error(index, &record.key, &e))?;
        Ok(text)
    }

    /// Record `index` as a `serde_json::Value`, for checking fields (see
    /// [`json::record_to_json`]: never print it, print [`Self::get_json_text`]).
    pub(crate) async fn get_json(
        &self,
        dataset: &Dataset,
        index: u64,
    ) -> Result<serde_json::Value> {
        let text = self.get_json_text(dataset, index).await?;
        serde_json::from_slice(&text).map_err(|e| CliError::Record {
            root: self.name.clone(),
            index,
            key: dataset
                .table()
                .locate(index)
                .map(|l| dataset.snapshot().shards()[l.shard].key.clone())
                .unwrap_or_default(),
            what: format!("its JSON text does not parse back: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["guideloom"].iter().chain(args).chain(&["info", "r"]))
    }

    #[test]
    fn time_flags_reach_http_and_s3_roots_alike() {
        let cli = parse(&[
            "--timeout",
            "1.5",
            "--connect-timeout",
            "0.25",
            "--retries",
            "2",
            "--deadline",
            "7",
            "--http-listing",
        ])
        .unwrap();
        // One set of bounds on the store options, for both kinds of client.
        let o = remote_options(&cli.global, StoreOptions::default());
        assert!(o.http_listing);
        assert_eq!(o.request_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(o.connect_timeout, Some(Duration::from_millis(250)));
        assert_eq!(o.retry.map(|r| r.max_retries()), Some(2));
        assert_eq!(o.retry_timeout, Some(Duration::from_secs(7)));
        assert_eq!(o.object_store_retry().max_attempts, 3);
        #[cfg(feature = "http")]
        {
            let http = o.http_options();
            assert_eq!(http.request_timeout(), Duration::from_millis(1500));
            assert_eq!(http.connect_timeout(), Duration::from_millis(250));
            assert_eq!(http.retry().max_attempts, 3);
            assert_eq!(http.operation_timeout(), Duration::from_secs(7));
        }

        // No flag: each client's own defaults.
        let none = parse(&[]).unwrap();
        assert_eq!(
            remote_options(&none.global, StoreOptions::default()),
            StoreOptions::default()
        );
    }

    /// An environment of `vars` only.
    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    /// The GCS and Azure flags, and the variables beside them, reach the store options (a
    /// flag wins); a plain-HTTP endpoint needs allowing (the emulator allows it); an Azure
    /// root needs an account or the emulator.
    #[test]
    fn gcs_and_azure_flags_and_variables_reach_the_store_options() {
        let none = env_of(&[]);
        let cli = parse(&[
            "--gcs-endpoint",
            "http://127.0.0.1:4443",
            "--gcs-allow-http",
            "--gcs-anonymous",
        ])
        .unwrap();
        let gcs = gcs_options(&cli.global, &none).unwrap();
        assert_eq!(gcs.endpoint.as_deref(), Some("http://127.0.0.1:4443"));
        assert!(gcs.allow_http && gcs.anonymous);

        let bare = parse(&[]).unwrap();
        let env = env_of(&[
            ("GOOGLE_BASE_URL", "http://127.0.0.1:1"),
            ("GOOGLE_ALLOW_HTTP", "TRUE"),
        ]);
        let gcs = gcs_options(&bare.global, &env).unwrap();
        assert_eq!(gcs.endpoint.as_deref(), Some("http://127.0.0.1:1"));
        assert!(gcs.allow_http && !gcs.anonymous);
        let flag = parse(&["--gcs-endpoint", "https://gcs.example"]).unwrap();
        let gcs = gcs_options(&flag.global, &env).unwrap();
        assert_eq!(gcs.endpoint.as_deref(), Some("https://gcs.example"));
        assert_eq!(
            gcs_options(&bare.global, &none).unwrap(),
            GcsOptions::default()
        );

        let cli = parse(&["--gcs-endpoint", "http://127.0.0.1:4443"]).unwrap();
        let e = gcs_options(&cli.global, &none).unwrap_err().to_string();
        assert!(
            e.starts_with("--gcs-endpoint:") && e.contains("--gcs-allow-http"),
            "{e}"
        );
        let e = gcs_options(&bare.global, &env_of(&[("GOOGLE_BASE_URL", "http://h")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("GOOGLE_BASE_URL:") && e.contains("GOOGLE_ALLOW_HTTP=true"),
            "{e}"
        );

        let cli = parse(&[
            "--azure-emulator",
            "--azure-endpoint",
            "http://127.0.0.1:10000",
        ])
        .unwrap();
        let azure = azure_options(&cli.global, "az://c", &none).unwrap();
        assert!(azure.use_emulator);
        assert_eq!(azure.endpoint.as_deref(), Some("http://127.0.0.1:10000"));
        // The emulator from the environment makes a flag's endpoint the emulator's.
        let cli = parse(&["--azure-endpoint", "http://127.0.0.1:10000"]).unwrap();
        let emulated = env_of(&[("AZURE_STORAGE_USE_EMULATOR", "1")]);
        let azure = azure_options(&cli.global, "az://c", &emulated).unwrap();
        assert!(azure.use_emulator);
        assert_eq!(azure.endpoint.as_deref(), Some("http://127.0.0.1:10000"));

        let account = env_of(&[("AZURE_STORAGE_ACCOUNT_NAME", "acct")]);
        let cli = parse(&["--azure-endpoint", "http://127.0.0.1:10000/acct"]).unwrap();
        let e = azure_options(&cli.global, "az://c", &account)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--azure-endpoint:") && e.contains("--azure-allow-http"),
            "{e}"
        );
        let cli = parse(&[
            "--azure-endpoint",
            "http://127.0.0.1:10000/acct",
            "--azure-allow-http",
        ])
        .unwrap();
        let azure = azure_options(&cli.global, "az://c", &account).unwrap();
        assert!(azure.allow_http && !azure.use_emulator);

        let e = azure_options(&bare.global, "az://c/p", &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("az://c/p: no Azure storage account")
                && e.contains("AZURE_STORAGE_ACCOUNT_NAME")
                && e.contains("--azure-emulator"),
            "{e}"
        );
        assert_eq!(
            azure_options(&bare.global, "az://c", &account).unwrap(),
            AzureOptions::default()
        );
    }

    /// Without `aws-profile`, AWS_PROFILE alone is refused naming the feature; keys in the
    /// environment, or `--s3-profile` (refused by the library), leave it to them.
    #[cfg(not(feature = "aws-profile"))]
    #[test]
    fn aws_profile_without_the_feature_is_refused_unless_keys_are_set() {
        use guideloom_io::ErrorKind;
        let bare = parse(&[]).unwrap();
        let e = check_aws_profile(&bare.global, "s3://b/p", &env_of(&[("AWS_PROFILE", "dev")]))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let line = e.one_line();
        assert!(
            line.starts_with("s3://b/p: unsupported: AWS_PROFILE=\"dev\"")
                && line.contains("feature `aws-profile`"),
            "{line}"
        );
        assert!(
            e.feature_hint()
                .unwrap()
                .ends_with("--features aws-profile")
        );
        let keys = env_of(&[("AWS_PROFILE", "dev"), ("AWS_ACCESS_KEY_ID", "k")]);
        assert!(check_aws_profile(&bare.global, "s3://b/p", &keys).is_ok());
        assert!(check_aws_profile(&bare.global, "s3://b/p", &env_of(&[])).is_ok());
    }

    #[test]
    fn time_flags_must_be_positive_seconds() {
        for bad in ["0", "-1", "abc", "inf", "NaN"] {
            let flag = format!("--timeout={bad}");
            let e = parse(&[&flag]).unwrap_err();
            assert!(e.to_string().contains("--timeout"), "{bad}: {e}");
        }
        assert!(parse(&["--retries=-1"]).is_err());
        assert!(parse(&["--retries", "0"]).is_ok());
    }
}
