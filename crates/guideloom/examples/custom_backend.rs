//! A downstream backend author's view: implement `guideloom::io::Backend` for your own
//! storage (here, an in-memory object map), prove it with the conformance kit, then read
//! guideloom shards through it. No server needed.
//!
//! `cargo run -p guideloom --example custom_backend`

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use guideloom::io::check_range;
use guideloom::io::conformance::{FnFixture, run_all};
use guideloom::io::{BoxError, Capabilities, Error, Result};
use guideloom::{
    AsyncReader, Backend, Bytes, CborFormat, DocumentStorage, Location, SyncReader, WriterOptions,
};

/// Where an object lives in the map: a `/`-separated key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key(String);

impl Location for Key {
    fn child(&self, name: &str) -> Self {
        Key(format!("{}/{name}", self.0))
    }
    fn describe(&self) -> String {
        format!("blobmap://{}", self.0)
    }
}

/// The backend: a shared map of immutable blobs.
#[derive(Debug, Clone, Default)]
struct BlobMapIo {
    blobs: Arc<RwLock<HashMap<Key, Bytes>>>,
}

impl BlobMapIo {
    fn put(&self, key: Key, bytes: Bytes) {
        self.blobs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, bytes);
    }
    fn reader(&self, key: &Key) -> Result<BlobReader> {
        let blob = self
            .blobs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        let blob = blob.ok_or_else(|| Error::NotFound {
            location: key.describe(),
            source: None,
        })?;
        Ok(BlobReader {
            location: key.describe(),
            blob: RwLock::new(Some(blob)),
        })
    }
}

#[async_trait]
impl Backend for BlobMapIo {
    type Location = Key;
    fn name(&self) -> &'static str {
        "BlobMapIo"
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        caps.sync = true;
        caps.r#async = true;
        caps.zero_copy = true; // reads are slices of the stored Bytes
        caps
    }
    fn open(&self, key: &Key) -> Result<Box<dyn SyncReader>> {
        Ok(Box::new(self.reader(key)?))
    }
    async fn open_async(&self, key: &Key) -> Result<Box<dyn AsyncReader>> {
        Ok(Box::new(self.reader(key)?))
    }
}

/// One open blob; `None` once closed.
#[derive(Debug)]
struct BlobReader {
    location: String,
    blob: RwLock<Option<Bytes>>,
}

impl BlobReader {
    fn blob(&self) -> Result<Bytes> {
        let blob = self.blob.read().unwrap_or_else(|p| p.into_inner()).clone();
        blob.ok_or_else(|| Error::Closed {
            location: self.location.clone(),
        })
    }
}

impl SyncReader for BlobReader {
    fn location(&self) -> &str {
        &self.location
    }
    fn size(&self) -> Result<u64> {
        Ok(self.blob()?.len() as u64)
    }
    fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        let blob = self.blob()?;
        // Exact-length contract: anything not inside the object is OutOfRange.
        check_range(&self.location, offset, len, blob.len() as u64)?;
        let start = usize::try_from(offset).map_err(|e| Error::InvalidArgument {
            message: e.to_string(),
        })?;
        let end = usize::try_from(offset + len).map_err(|e| Error::InvalidArgument {
            message: e.to_string(),
        })?;
        Ok(blob.slice(start..end))
    }
    fn close(&self) -> Result<()> {
        self.blob.write().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }
}

#[async_trait]
impl AsyncReader for BlobReader {
    fn location(&self) -> &str {
        &self.location
    }
    async fn size(&self) -> Result<u64> {
        SyncReader::size(self)
    }
    async fn read(&self, offset: u64, len: u64) -> Result<Bytes> {
        SyncReader::read(self, offset, len)
    }
    async fn close(&self) -> Result<()> {
        SyncReader::close(self)
    }
    fn close_sync(&self) {
        // Closing an in-memory blob cannot fail.
        let _ = SyncReader::close(self);
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // 1. The conformance kit: every check of the sync and async reader contract.
    let io = BlobMapIo::default();
    let store = io.clone();
    let fixture = FnFixture::new(
        move |name: &str, bytes: &[u8]| -> std::result::Result<Key, BoxError> {
            let key = Key(format!("conformance/{name}"));
            store.put(key.clone(), Bytes::copy_from_slice(bytes));
            Ok(key)
        },
        Key("conformance/missing".into()),
    );
    let report = run_all(&io, &fixture)?;
    println!("conformance: {report}");

    // 2. Serve guideloom shards from it: write locally, upload the files, read through it.
    let tmp = tempfile::tempdir()?;
    let local = DocumentStorage::local(tmp.path(), CborFormat::<String>::new())
        .with_writer_options(WriterOptions::default().max_shard_records(40));
    let mut writer = local.sync_writer()?;
    for i in 0..100u64 {
        writer.append(i, &format!("doc {i}"))?;
    }
    for shard in writer.finish()? {
        let name = shard
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("shard name")?
            .to_owned();
        io.put(
            Key(format!("dataset/{name}")),
            Bytes::from(std::fs::read(&shard.path)?),
        );
    }
    let remote = DocumentStorage::new(Key("dataset".into()), CborFormat::<String>::new(), io);
    let reader = remote.sync_reader()?;
    assert_eq!(reader.len(), 100);
    assert_eq!(reader.read(77)?, "doc 77");
    println!(
        "read {} records of guideloom shards through BlobMapIo",
        reader.len()
    );
    Ok(())
}
