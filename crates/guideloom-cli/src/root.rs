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
    RetryPolicy, Root, RootOptions, RootUri, S3Addressing, S3Environment, S3Options, Snapshot,
    StoreOptions,
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

/// The retry and time bounds of every remote root (`s3://` and `http(s)://` alike, set once
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
    // The S3 environment matters only to s3:// roots: a plain-HTTP AWS_ENDPOINT_URL must not
    // stop a local or mounted root.
    let s3 = if matches!(&uri, RootUri::Bucket { scheme, .. } if scheme == "s3") {
        s3_options(global)?
    } else {
        S3Options::default()
    };
    let options = remote_options(
        global,
        StoreOptions::default().with_s3(s3).with_mount(global.mount),
    );
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
