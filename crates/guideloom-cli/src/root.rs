//! Opening roots, selecting snapshots, and reading published records.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_format::{AsyncShard, ReadOptions};
use guideloom_io::{AsyncReader, Backend, PreadIo};
use guideloom_publish::store::RootStore;
use guideloom_publish::{
    Registry, Root, RootUri, S3Addressing, S3Options, ShardRef, Snapshot, StorageOptions,
};

use crate::cli::Global;
use crate::error::{CliError, Result};
use crate::json;

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
    let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    let region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    if let Some(ep) = &endpoint
        && ep.starts_with("http://")
        && !global.s3_allow_http
    {
        return Err(CliError::argument(
            "AWS_ENDPOINT_URL",
            format!("{ep} is plain HTTP; pass --s3-allow-http to use it"),
        ));
    }
    let addressing = if global.s3_path_style || endpoint.is_some() {
        S3Addressing::Path
    } else {
        S3Addressing::VirtualHosted
    };
    Ok(S3Options {
        region,
        endpoint,
        addressing,
        allow_http: global.s3_allow_http,
        ..S3Options::default()
    })
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
    let options = StorageOptions {
        s3: s3_options(global)?,
        ..StorageOptions::default()
    };
    let root = Registry::global()
        .resolve(arg, &options)
        .map_err(|e| CliError::root(arg, e))?;
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

    /// The local directory of a local root.
    pub(crate) fn local_dir(&self) -> Option<&PathBuf> {
        match &self.uri {
            RootUri::Local(p) => Some(p),
            _ => None,
        }
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

    /// A reader of shard `shard`: `pread` for local roots, ranged GETs through the root's
    /// store otherwise. The size is the reference's; a local file of another size is an
    /// error naming the shard.
    pub(crate) async fn reader(&self, shard: &ShardRef) -> Result<Box<dyn AsyncReader>> {
        if let Some(dir) = self.local_dir() {
            let path = dir.join(&shard.key);
            let reader = PreadIo::new()
                .open_async(&path)
                .await
                .map_err(|e| CliError::io(format!("{}: shard {}", self.name, shard.key), e))?;
            return Ok(reader);
        }
        Ok(Box::new(StoreReader {
            store: Arc::clone(self.store()),
            key: shard.key.clone(),
            size: shard.size,
        }))
    }

    /// Opens `shard` (one tail read), checking that it holds the records its reference says.
    pub(crate) async fn open_shard(
        &self,
        shard: &ShardRef,
        options: &ReadOptions,
    ) -> Result<AsyncShard> {
        let reader = self.reader(shard).await?;
        let size = reader
            .size()
            .await
            .map_err(|e| CliError::io(format!("{}: shard {}", self.name, shard.key), e))?;
        if size != shard.size {
            return Err(CliError::root(
                &self.name,
                guideloom_publish::Error::Verification {
                    key: shard.key.clone(),
                    what: "size",
                    expected: shard.size.to_string(),
                    actual: size.to_string(),
                },
            ));
        }
        let opened = AsyncShard::open(reader, options)
            .await
            .map_err(|e| CliError::shard(&self.name, &shard.key, e))?;
        if opened.len() != shard.record_count {
            return Err(CliError::root(
                &self.name,
                guideloom_publish::Error::Verification {
                    key: shard.key.clone(),
                    what: "record count",
                    expected: shard.record_count.to_string(),
                    actual: opened.len().to_string(),
                },
            ));
        }
        Ok(opened)
    }
}

/// An [`AsyncReader`] over one object of a root store (ranged GETs).
#[derive(Debug)]
pub(crate) struct StoreReader {
    store: Arc<dyn RootStore>,
    key: String,
    size: u64,
}

#[async_trait]
impl AsyncReader for StoreReader {
    fn location(&self) -> &str {
        &self.key
    }

    async fn size(&self) -> guideloom_io::Result<u64> {
        Ok(self.size)
    }

    async fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        let end = offset
            .checked_add(len)
            .filter(|end| *end <= self.size)
            .ok_or_else(|| guideloom_io::Error::OutOfRange {
                location: self.key.clone(),
                offset,
                len,
                size: self.size,
            })?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        let bytes = self
            .store
            .get_range(&self.key, offset..end)
            .await
            .map_err(|e| guideloom_io::Error::Remote {
                location: self.key.clone(),
                message: e.to_string(),
                retryable: false,
                source: Some(Box::new(e)),
            })?;
        if bytes.len() as u64 != len {
            return Err(guideloom_io::Error::ShortRead {
                location: self.key.clone(),
                offset,
                requested: len,
                got: bytes.len() as u64,
            });
        }
        Ok(bytes)
    }

    async fn close(&self) -> guideloom_io::Result<()> {
        Ok(())
    }

    fn close_sync(&self) {}
}

/// The records of one snapshot, by global index.
#[derive(Debug)]
pub(crate) struct Records<'a> {
    root: &'a OpenRoot,
    snapshot: &'a Snapshot,
    /// Start index of each shard, plus the total at the end.
    starts: Vec<u64>,
    options: ReadOptions,
}

impl<'a> Records<'a> {
    pub(crate) fn new(root: &'a OpenRoot, snapshot: &'a Snapshot, options: ReadOptions) -> Self {
        let mut starts = Vec::with_capacity(snapshot.shards().len() + 1);
        let mut total = 0u64;
        for s in snapshot.shards() {
            starts.push(total);
            total += s.record_count;
        }
        starts.push(total);
        Records {
            root,
            snapshot,
            starts,
            options,
        }
    }

    /// Records in the snapshot.
    pub(crate) fn len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The shard number and the index inside it of global record `index`.
    pub(crate) fn locate(&self, index: u64) -> Option<(usize, u64)> {
        if index >= self.len() {
            return None;
        }
        // The last start <= index whose shard is non-empty.
        let shard = self.starts.partition_point(|s| *s <= index) - 1;
        Some((shard, index - self.starts[shard]))
    }

    /// The reference of shard number `n`.
    pub(crate) fn shard_ref(&self, n: usize) -> &ShardRef {
        &self.snapshot.shards()[n]
    }

    /// Opens shard number `n`.
    pub(crate) async fn open(&self, n: usize) -> Result<AsyncShard> {
        self.root.open_shard(self.shard_ref(n), &self.options).await
    }

    /// Global record range of shard `n`.
    pub(crate) fn shard_range(&self, n: usize) -> Range<u64> {
        self.starts[n]..self.starts[n + 1]
    }

    /// Record `index` decoded as JSON.
    pub(crate) async fn get_json(&self, index: u64) -> Result<serde_json::Value> {
        let (n, local) = self.locate(index).ok_or_else(|| {
            CliError::argument(
                "INDEX",
                format!(
                    "record {index} out of range: snapshot {} has {} records",
                    self.snapshot.id(),
                    self.len()
                ),
            )
        })?;
        let shard = self.open(n).await?;
        let key = &self.shard_ref(n).key;
        let bytes = shard
            .read(local)
            .await
            .map_err(|e| CliError::shard(&self.root.name, key, e))?;
        json::record_to_json(&shard.metadata().format, &bytes).map_err(|what| CliError::Record {
            root: self.root.name.clone(),
            index,
            key: key.clone(),
            what,
        })
    }
}
