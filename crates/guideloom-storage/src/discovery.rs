//! Shard naming and discovery: through any backend (readers) and on the local disk
//! ([`FileSystemDocument`], [`FileSystemStream`]) for users who manage files themselves.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use guideloom_io::{Backend, Location, SeekIo};

use guideloom_format::spec::SHARD_EXTENSION;
use guideloom_format::{
    AsyncShard, Element, Error, Expected, ReadOptions, Result, ShardWriter, SyncShard,
};
use guideloom_format::{KIND_DOCUMENTS, KIND_STREAM, ShardMetadata};

/// Prefix of record shards: `shard-000000.glm`.
pub const SHARD_PREFIX: &str = "shard";

/// Prefix of the per-document metadata shards of a stream with metadata: `meta-000000.glm`.
pub const META_PREFIX: &str = "meta";

/// The file name of shard `n`: `<prefix>-<n, zero-padded to 6 digits>.glm`.
pub fn shard_name(prefix: &str, n: u64) -> String {
    format!("{prefix}-{n:06}.{SHARD_EXTENSION}")
}

/// Opens shards `first, first + 1, ...` (named [`shard_name`]`(prefix, n)`) of `dir` through
/// `backend` until the first that does not exist (a not-found error from `open` or, for lazy
/// backends, from the first read), checking each holds `expected`. Any other error (a damaged
/// shard, a transport failure) is returned, not taken for the end. This is how the storages
/// discover their shards; it is public for users who manage shard files themselves and read
/// them through a backend other than the local disk.
pub fn discover_sync<B: Backend + ?Sized>(
    backend: &B,
    dir: &B::Location,
    prefix: &str,
    first: u64,
    options: &ReadOptions,
    expected: &Expected,
) -> Result<Vec<SyncShard>> {
    let mut shards = Vec::new();
    for n in first.. {
        match open_sync(backend, &dir.child(&shard_name(prefix, n)), options)? {
            Some(s) => {
                s.expect(expected)?;
                shards.push(s);
            }
            None => break,
        }
    }
    Ok(shards)
}

/// Opens one shard through `backend` (one tail read); `None` when it does not exist.
pub fn open_sync<B: Backend + ?Sized>(
    backend: &B,
    location: &B::Location,
    options: &ReadOptions,
) -> Result<Option<SyncShard>> {
    let reader = match backend.open(location) {
        Ok(r) => r,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match SyncShard::open(reader, options) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Async twin of [`discover_sync`].
pub async fn discover_async<B: Backend + ?Sized>(
    backend: &B,
    dir: &B::Location,
    prefix: &str,
    first: u64,
    options: &ReadOptions,
    expected: &Expected,
) -> Result<Vec<AsyncShard>> {
    let mut shards = Vec::new();
    for n in first.. {
        match open_async(backend, &dir.child(&shard_name(prefix, n)), options).await? {
            Some(s) => {
                s.expect(expected)?;
                shards.push(s);
            }
            None => break,
        }
    }
    Ok(shards)
}

/// Async twin of [`open_sync`].
pub async fn open_async<B: Backend + ?Sized>(
    backend: &B,
    location: &B::Location,
    options: &ReadOptions,
) -> Result<Option<AsyncShard>> {
    let reader = match backend.open_async(location).await {
        Ok(r) => r,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match AsyncShard::open(reader, options).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A finished shard found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalShard {
    /// Its number.
    pub number: u64,
    /// Its path.
    pub path: PathBuf,
    /// Records in it.
    pub records: u64,
    /// Bytes in its data region.
    pub data_len: u64,
}

fn discover_local(dir: &Path, prefix: &str, expected: &Expected) -> Result<Vec<LocalShard>> {
    let options = ReadOptions::default();
    let mut found = Vec::new();
    for number in 0.. {
        let path = dir.join(shard_name(prefix, number));
        let reader = match SeekIo::new().open(&path) {
            Ok(r) => r,
            Err(e) if e.is_not_found() => break,
            Err(e) => return Err(e.into()),
        };
        let shard = SyncShard::open(reader, &options)?;
        shard.expect(expected)?;
        found.push(LocalShard {
            number,
            path,
            records: shard.len(),
            data_len: shard.data_len(),
        });
    }
    Ok(found)
}

/// Opens the shard at `path` with [`SeekIo`], checking it holds `expected`.
fn open_local(path: &Path, options: &ReadOptions, expected: &Expected) -> Result<SyncShard> {
    let reader = match SeekIo::new().open(&path.to_path_buf()) {
        Ok(r) => r,
        Err(e) if e.is_not_found() => {
            return Err(Error::NotFound {
                location: path.display().to_string(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let shard = SyncShard::open(reader, options)?;
    shard.expect(expected)?;
    Ok(shard)
}

fn ensure_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        operation: "create directory",
        path: dir.to_owned(),
        source,
    })
}

/// Document shards in a local directory: naming, discovery and shard writers.
#[derive(Debug, Clone)]
pub struct FileSystemDocument {
    dir: PathBuf,
    prefix: String,
    format: String,
}

impl FileSystemDocument {
    /// Shards `shard-NNNNNN.glm` of record format `format` (its [`Format::name`](guideloom_format::Format::name)) in `dir`.
    pub fn new(dir: impl Into<PathBuf>, format: impl Into<String>) -> Self {
        Self::with_prefix(dir, SHARD_PREFIX, format)
    }

    /// Shards `<prefix>-NNNNNN.glm`.
    pub fn with_prefix(dir: impl Into<PathBuf>, prefix: &str, format: impl Into<String>) -> Self {
        FileSystemDocument {
            dir: dir.into(),
            prefix: prefix.to_owned(),
            format: format.into(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of shard `n`.
    pub fn shard_path(&self, n: u64) -> PathBuf {
        self.dir.join(shard_name(&self.prefix, n))
    }

    /// Finished shards `0, 1, ...` up to the first missing one (none if the directory does
    /// not exist), each checked to hold this format.
    pub fn discover(&self) -> Result<Vec<LocalShard>> {
        discover_local(
            &self.dir,
            &self.prefix,
            &Expected::Documents(self.format.clone()),
        )
    }

    /// Opens finished shard `n` for reading ([`Error::NotFound`] if it does not exist).
    pub fn open_shard(&self, n: u64, options: &ReadOptions) -> Result<SyncShard> {
        open_local(
            &self.shard_path(n),
            options,
            &Expected::Documents(self.format.clone()),
        )
    }

    /// Starts writing shard `n` (creating the directory if needed) with `user` metadata.
    pub fn create_shard(
        &self,
        n: u64,
        user: std::collections::BTreeMap<String, ciborium::Value>,
    ) -> Result<ShardWriter> {
        ensure_dir(&self.dir)?;
        let meta = ShardMetadata::new(self.format.clone(), KIND_DOCUMENTS).with_user(user);
        ShardWriter::create(self.shard_path(n), meta)
    }
}

/// Stream shards of element type `E` in a local directory: naming, discovery and writers.
#[derive(Debug, Clone)]
pub struct FileSystemStream<E> {
    dir: PathBuf,
    _element: PhantomData<fn() -> E>,
}

impl<E: Element> FileSystemStream<E> {
    /// Stream shards `shard-NNNNNN.glm` in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileSystemStream {
            dir: dir.into(),
            _element: PhantomData,
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of shard `n`.
    pub fn shard_path(&self, n: u64) -> PathBuf {
        self.dir.join(shard_name(SHARD_PREFIX, n))
    }

    /// Finished shards up to the first missing one, each checked to hold `E`.
    pub fn discover(&self) -> Result<Vec<LocalShard>> {
        discover_local(&self.dir, SHARD_PREFIX, &Expected::stream::<E>())
    }

    /// Opens finished shard `n` for reading ([`Error::NotFound`] if it does not exist).
    pub fn open_shard(&self, n: u64, options: &ReadOptions) -> Result<SyncShard> {
        open_local(&self.shard_path(n), options, &Expected::stream::<E>())
    }

    /// Starts writing shard `n`; append runs of elements encoded with
    /// [`Element::extend_le`]. Record lengths must be multiples of the element width.
    pub fn create_shard(
        &self,
        n: u64,
        user: std::collections::BTreeMap<String, ciborium::Value>,
    ) -> Result<ShardWriter> {
        ensure_dir(&self.dir)?;
        let meta = ShardMetadata::new("raw", KIND_STREAM)
            .with_element(E::NAME)
            .with_user(user);
        ShardWriter::create(self.shard_path(n), meta)
    }
}
