//! The shard protocol, in the native format (`guideloom-format`): writing one into a root,
//! uploading an encoded one, opening one checked against its reference, and inspecting
//! published shards (by their footers, or whole). Free functions over the store trait;
//! [`Root`](crate::Root) delegates to them.
//!
//! How a shard is written ([`write`]): records, pulled on the writing task and handed in
//! batches to a blocking thread ([`crate::shard_pipe`], when the store makes a pending object
//! that borrows nothing, [`RootStore::begin_create_owned`]) → [`ShardEncoder`] → [`Tally`] (size limit:
//! the write that passes it stops the encoder) → the store's [`PendingObject`] (a local
//! root's create-only temporary file, or for stores that need one PUT a spool: memory, then
//! an unnamed file in the staging directory) → commit (fsync + link, or the PUT from the
//! spool file's mapping) → [`create_streamed`]'s comparison only if the key was taken. Each
//! byte is encoded once and written once, and none is hashed (an ArrayRecord shard's bytes
//! are, since its reference publishes their SHA-256); anonymous memory is the index (12
//! bytes per record) and a write buffer.

use std::fmt::Debug;
use std::io::Write;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use guideloom_arrayrecord::{ArrayRecordWriter, ArrayRecordWriterOptions};
use guideloom_format::spec::{FOOTER_LEN, HEADER_LEN};
use guideloom_format::{Encoded, Footer, ShardEncoder, ShardMetadata, ShardProbe, element_width};
use guideloom_format::{KIND_DOCUMENTS, KIND_STREAM};
use tracing::{Instrument, info_span};

use crate::error::{Error, Result};
use crate::key::{check_name, hex, key_problem, sha256_hex};
use crate::manifest::{
    Checksum, CompanionRef, MAX_TAIL_CHECK_BYTES, ShardFormat, ShardRef, StreamRef, TailChecksum,
    array_record_shard_key, shard_key,
};
use crate::opened::{open_array_record, open_array_record_tail};
use crate::shard_pipe::{Feed, Next, Piped, can_pipe, pipe};
use crate::store::{Digest256, PendingObject, RootStore, create_object, create_streamed};

/// What a [`ShardInspector`] found in a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardFacts {
    /// Records in the shard.
    pub record_count: u64,
    /// Checksum found, comparable with the reference's.
    pub checksum: Option<Checksum>,
}

/// Reads a shard's facts for `verify_record_counts`. The format crate provides the footer
/// reader (one small tail read per shard); [`Sha256Inspector`] reads whole shards.
#[async_trait]
pub trait ShardInspector: Send + Sync + Debug + 'static {
    /// Inspects `shard` (whose size has already been checked) in `store`.
    async fn inspect(&self, store: &dyn RootStore, shard: &ShardRef) -> Result<ShardFacts>;
}

/// Downloads each shard whole and computes its SHA-256; takes the record count from the
/// reference. Checks content for shards published with [`Checksum::Sha256`]; it costs a
/// full read per shard, so it is meant for tests and audits, not routine publishing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sha256Inspector;

#[async_trait]
impl ShardInspector for Sha256Inspector {
    async fn inspect(&self, store: &dyn RootStore, shard: &ShardRef) -> Result<ShardFacts> {
        let obj = store.get(&shard.key, shard.size).await?;
        Ok(ShardFacts {
            record_count: shard.record_count,
            checksum: Some(Checksum::Sha256(sha256_hex(&obj.body))),
        })
    }
}

/// Checks shards by their footers: for a native shard one ranged read of the last 64 bytes
/// (no download), giving the record count and the footer's CRC32C (which covers the index
/// and metadata checksums, the layout and the count); for an ArrayRecord shard one tail read
/// (guideloom-arrayrecord's open: postscript and footer, every hash checked), giving the
/// record count (and no checksum: a reference's SHA-256 is [`Sha256Inspector`]'s to check).
#[derive(Debug, Clone, Copy, Default)]
pub struct FooterInspector;

#[async_trait]
impl ShardInspector for FooterInspector {
    async fn inspect(&self, store: &dyn RootStore, shard: &ShardRef) -> Result<ShardFacts> {
        if shard.format == ShardFormat::ArrayRecord {
            let reader = store.open_reader(&shard.key, shard.size).await?;
            let file = open_array_record(reader, &shard.key).await?;
            return Ok(ShardFacts {
                record_count: file.len(),
                checksum: None,
            });
        }
        if shard.size < FOOTER_LEN {
            return Err(Error::corrupt(&shard.key, "smaller than a shard footer"));
        }
        let tail = store
            .get_range(&shard.key, shard.size - FOOTER_LEN..shard.size)
            .await?;
        let footer = Footer::decode(&shard.key, &tail, shard.size)
            .map_err(|e| Error::shard(&shard.key, e))?;
        Ok(ShardFacts {
            record_count: footer.record_count,
            checksum: Some(Checksum::FooterCrc32c(footer.checksum())),
        })
    }
}

/// The sink between the encoder and the store: forwards bytes while the shard stays within
/// the size limit, counting them (and, for an ArrayRecord shard, hashing them for the
/// reference's SHA-256 and keeping its last bytes for its [`TailChecksum`]). The write that would pass the limit fails instead and nothing
/// more reaches the store: the encoder stops there, so the refusal comes the moment the
/// running size passes the limit, however many records are left.
struct Tally<'p, 'a> {
    out: &'p mut (dyn PendingObject + 'a),
    /// Bytes forwarded.
    len: u64,
    digest: Option<Digest256>,
    /// The last bytes forwarded (at most twice [`MAX_TAIL_CHECK_BYTES`] held), when kept.
    tail: Option<Vec<u8>>,
    limit: u64,
    /// The running size when a write passed the limit.
    refused: Option<u64>,
}

impl<'p, 'a> Tally<'p, 'a> {
    fn new(out: &'p mut (dyn PendingObject + 'a), limit: u64, array_record: bool) -> Self {
        Tally {
            out,
            len: 0,
            digest: array_record.then(Digest256::default),
            tail: array_record.then(Vec::new),
            limit,
            refused: None,
        }
    }

    /// The tail checksum of what was forwarded, when its last bytes were kept.
    fn tail_checksum(&self, format: ShardFormat) -> Option<TailChecksum> {
        let tail = self.tail.as_deref()?;
        let keep = usize::try_from(TailChecksum::covered(format, self.len)).unwrap_or(0);
        Some(TailChecksum::of(&tail[tail.len().saturating_sub(keep)..]))
    }

    /// The error of a write that failed (the encoder's `error`, whatever it wraps): the size
    /// refusal if the limit was passed, else the pending object's typed error (a full
    /// spool or root directory) if it has one, else `error` as the shard's.
    fn failure(self, key: &str, error: impl FnOnce() -> Error) -> Error {
        if let Some(size) = self.refused {
            return Error::ShardTooLarge {
                key: key.to_owned(),
                size,
                limit: self.limit,
            };
        }
        self.out.take_write_error().unwrap_or_else(error)
    }
}

impl Write for Tally<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let reached = self.len + buf.len() as u64;
        if self.refused.is_some() || reached > self.limit {
            self.refused.get_or_insert(reached);
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!("the shard passed its {}-byte limit", self.limit),
            ));
        }
        self.out.write_all(buf)?;
        self.len = reached;
        if let Some(digest) = &mut self.digest {
            digest.update(buf);
        }
        if let Some(tail) = &mut self.tail {
            let keep = usize::try_from(MAX_TAIL_CHECK_BYTES).unwrap_or(usize::MAX);
            tail.extend_from_slice(&buf[buf.len().saturating_sub(keep)..]);
            if tail.len() > 2 * keep {
                tail.drain(..tail.len() - keep);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// What a shard write takes from its root's options: the size limit, and the directory a
/// store that needs one PUT spools the shard in.
#[derive(Debug, Clone)]
pub(crate) struct WriteOptions {
    /// `RootOptions::max_encoded_shard_bytes`.
    pub(crate) max_bytes: u64,
    /// `RootOptions::staging`'s directory.
    pub(crate) spool_dir: PathBuf,
}

/// A shard ready for its create-only write: whole bytes from the caller, or a pending
/// object the encoder has filled (with the encoder's facts).
enum Body<'a> {
    Encoded {
        bytes: Bytes,
        records: u64,
    },
    Streamed {
        pending: Box<dyn PendingObject + 'a>,
        encoded: Encoded,
    },
}

/// Writes `records` as shard `index` of worker `work_id` (see
/// [`Root::write_shard`](crate::Root::write_shard)).
pub(crate) async fn write<I, R>(
    store: &dyn RootStore,
    options: &WriteOptions,
    work_id: &str,
    index: u64,
    metadata: ShardMetadata,
    records: I,
) -> Result<ShardRef>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[u8]>,
{
    let records = records.into_iter().map(Ok::<R, std::convert::Infallible>);
    match try_write(store, options, work_id, index, metadata, records).await? {
        Ok(shard) => Ok(shard),
        Err(never) => match never {},
    }
}

/// Writes fallibly produced `records` (see
/// [`Root::try_write_shard`](crate::Root::try_write_shard)): the first `Err` stops the write
/// before any request and is the inner `Err`.
pub(crate) async fn try_write<I, R, E>(
    store: &dyn RootStore,
    options: &WriteOptions,
    work_id: &str,
    index: u64,
    metadata: ShardMetadata,
    records: I,
) -> Result<std::result::Result<ShardRef, E>>
where
    I: IntoIterator<Item = std::result::Result<R, E>>,
    R: AsRef<[u8]>,
{
    check_name("work id", work_id)?;
    let key = shard_key(work_id, index);
    try_write_key(store, options, key, metadata, records).await
}

/// [`try_write`] under a `key` the caller made (a stream shard's metadata companion).
pub(crate) async fn try_write_key<I, R, E>(
    store: &dyn RootStore,
    options: &WriteOptions,
    key: String,
    metadata: ShardMetadata,
    records: I,
) -> Result<std::result::Result<ShardRef, E>>
where
    I: IntoIterator<Item = std::result::Result<R, E>>,
    R: AsRef<[u8]>,
{
    store.check_writable()?;
    let limit = options.max_bytes;
    if limit >= HEADER_LEN
        && can_pipe()
        && let Some(pending) = store.begin_create_owned(&key, &options.spool_dir)?
    {
        return write_piped(store, limit, key, metadata, records, pending).await;
    }
    // A store without an owned pending object (or no tokio runtime): encoded and written
    // on this task.
    let mut pending = store.begin_create(&key, &options.spool_dir)?;
    let mut tally = Tally::new(&mut *pending, limit, false);
    let encoded = {
        let encode = |tally: &mut Tally<'_, '_>| {
            let mut encoder = ShardEncoder::new(tally, metadata)?;
            for r in records {
                match r {
                    Ok(r) => encoder.append(r.as_ref())?,
                    // Dropping `pending` discards what reached it.
                    Err(e) => return Ok(Err(e)),
                };
            }
            encoder.finish().map(|(_, encoded)| Ok(encoded))
        };
        match encode(&mut tally) {
            Ok(Ok(encoded)) => encoded,
            Ok(Err(e)) => return Ok(Err(e)),
            Err(e) => return Err(tally.failure(&key, || Error::shard(&key, e))),
        }
    };
    debug_assert_eq!(tally.len, encoded.size);
    let body = Body::Streamed { pending, encoded };
    create(store, limit, key, body).await.map(Ok)
}

/// [`try_write_key`] with the encoder and the writes into `pending` on a blocking thread,
/// the records pulled here ([`pipe`]): the same bytes, reference and errors.
async fn write_piped<I, R, E>(
    store: &dyn RootStore,
    limit: u64,
    key: String,
    metadata: ShardMetadata,
    records: I,
    pending: Box<dyn PendingObject>,
) -> Result<std::result::Result<ShardRef, E>>
where
    I: IntoIterator<Item = std::result::Result<R, E>>,
    R: AsRef<[u8]>,
{
    // The header, then each payload, reach the sink as they are appended: the running
    // size that passes `limit` is the one the encoder's `Tally` refuses.
    let mut running = HEADER_LEN;
    let passes = |len: usize| {
        running += len as u64;
        running > limit
    };
    let thread_key = key.clone();
    let encode = move |mut feed: Feed| {
        let mut pending = pending;
        let encoded = {
            let mut tally = Tally::new(&mut *pending, limit, false);
            let run = |tally: &mut Tally<'_, '_>| {
                let mut encoder = ShardEncoder::new(tally, metadata)?;
                loop {
                    match feed.next() {
                        Next::Records(batch) => {
                            encoder.append_packed(&batch.data, &batch.ends)?;
                            feed.recycle(batch);
                        }
                        Next::Finish => return encoder.finish().map(|(_, e)| Some(e)),
                        Next::Stopped => return Ok(None),
                    }
                }
            };
            match run(&mut tally) {
                Ok(encoded) => encoded.map(Ok),
                Err(e) => Some(Err(
                    tally.failure(&thread_key, || Error::shard(&thread_key, e))
                )),
            }
        };
        // Dropping `pending` here, on a failure or a stop, discards what reached it.
        encoded.map(|r| r.map(|encoded| (pending, encoded)))
    };
    match pipe(&key, records, passes, encode).await? {
        Piped::Record(e) => Ok(Err(e)),
        Piped::Done(Err(e)) => Err(e),
        Piped::Done(Ok((pending, encoded))) => {
            let body = Body::Streamed { pending, encoded };
            create(store, limit, key, body).await.map(Ok)
        }
        Piped::Passed => Err(Error::ShardTooLarge {
            key,
            size: running,
            limit,
        }),
    }
}

/// Uploads an encoded shard as shard `index` of worker `work_id` (see
/// [`Root::upload_shard`](crate::Root::upload_shard)).
pub(crate) async fn upload(
    store: &dyn RootStore,
    max_shard_bytes: u64,
    work_id: &str,
    index: u64,
    body: Bytes,
    record_count: u64,
) -> Result<ShardRef> {
    check_name("work id", work_id)?;
    store.check_writable()?;
    let key = shard_key(work_id, index);
    let body = Body::Encoded {
        bytes: body,
        records: record_count,
    };
    create(store, max_shard_bytes, key, body).await
}

/// The one create-only write of a shard, encoded here or uploaded as bytes:
/// [`create_streamed`] or [`create_object`] under an `upload_shard` span, returning the
/// reference (the footer CRC when the encoder's facts are known, else the SHA-256).
async fn create(
    store: &dyn RootStore,
    max_shard_bytes: u64,
    key: String,
    body: Body<'_>,
) -> Result<ShardRef> {
    let (size, record_count, checksum, tail) = match body {
        Body::Streamed { pending, encoded } => {
            create_streamed(store, &key, pending, encoded.size)
                .instrument(info_span!("upload_shard", key, size = encoded.size))
                .await?;
            let crc = Checksum::FooterCrc32c(encoded.footer_crc());
            (encoded.size, encoded.records, crc, None)
        }
        Body::Encoded { bytes, records } => {
            let size = bytes.len() as u64;
            let limit = max_shard_bytes;
            if size > limit {
                return Err(Error::ShardTooLarge { key, size, limit });
            }
            let checksum = Checksum::Sha256(sha256_hex(&bytes));
            // The footer's CRC32C: what a reader checks at open, since it cannot check a
            // SHA-256 without downloading the shard. Bytes that are no shard have none (and
            // fail every open anyway).
            let tail = size
                .checked_sub(FOOTER_LEN)
                .and_then(|at| usize::try_from(at).ok())
                .and_then(|at| Footer::decode(&key, &bytes[at..], size).ok())
                .map(|footer| TailChecksum::native(footer.checksum()));
            create_object(store, &key, bytes)
                .instrument(info_span!("upload_shard", key, size))
                .await?;
            (size, records, checksum, tail)
        }
    };
    Ok(ShardRef {
        key,
        size,
        record_count,
        checksum: Some(checksum),
        tail,
        format: ShardFormat::Native,
        stream: None,
    })
}

/// A reference to the native shard already at `key`, of `size` bytes (see
/// [`Root::adopt_shard`](crate::Root::adopt_shard)): the reference its writer returned.
/// One tail read (footer and metadata; a second only for metadata over 4 KiB);
/// for a stream shard also one HEAD for its metadata companion and, when there is one, one
/// tail read of it.
pub(crate) async fn adopt(store: &dyn RootStore, key: &str, size: u64) -> Result<ShardRef> {
    if let Some(problem) = key_problem(key) {
        return Err(Error::invalid(format!("shard key {key:?}: {problem}")));
    }
    let (footer, metadata) = footer_and_metadata(store, key, size).await?;
    let mut shard = ShardRef {
        key: key.to_owned(),
        size,
        record_count: footer.record_count,
        checksum: Some(Checksum::FooterCrc32c(footer.checksum())),
        tail: None,
        format: ShardFormat::Native,
        stream: None,
    };
    if metadata.kind != KIND_STREAM {
        return Ok(shard);
    }
    // The metadata decoded, so a stream names one of the format's element types.
    let element = metadata.element.unwrap_or_default();
    let width = element_width(&element).unwrap_or(1);
    if !footer.data_len().is_multiple_of(width) {
        return Err(Error::corrupt(
            key,
            format!(
                "stream data of {} bytes is not a whole number of {element} elements",
                footer.data_len()
            ),
        ));
    }
    shard.stream = Some(StreamRef {
        element,
        elements: footer.data_len() / width,
        meta: adopt_companion(store, &shard).await?,
    });
    Ok(shard)
}

/// The metadata companion of stream shard `shard` (`<n>.meta.glm` beside `<n>.glm`), if it
/// exists: a native shard of one CBOR record per document.
async fn adopt_companion(store: &dyn RootStore, shard: &ShardRef) -> Result<Option<CompanionRef>> {
    let Some(stem) = shard
        .key
        .strip_suffix(".glm")
        .filter(|stem| !stem.ends_with(".meta"))
    else {
        return Ok(None);
    };
    let key = format!("{stem}.meta.glm");
    let size = match store.head(&key).await {
        Ok(info) => info.size,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let (footer, metadata) = footer_and_metadata(store, &key, size).await?;
    if metadata.kind != KIND_DOCUMENTS || metadata.format != "cbor" {
        return Err(Error::Verification {
            key,
            what: "companion record format",
            expected: format!("{KIND_DOCUMENTS} of cbor"),
            actual: format!("{} of {}", metadata.kind, metadata.format),
        });
    }
    if footer.record_count != shard.record_count {
        return Err(Error::Verification {
            key,
            what: "companion record count",
            expected: shard.record_count.to_string(),
            actual: footer.record_count.to_string(),
        });
    }
    Ok(Some(CompanionRef {
        key,
        size,
        checksum: Some(Checksum::FooterCrc32c(footer.checksum())),
    }))
}

/// The footer and the metadata of the native shard at `key`, of `size` bytes, each checked
/// (footer layout and checksum, metadata length and CRC32C), without reading the index:
/// guideloom-format's [`ShardProbe::open_tail`].
async fn footer_and_metadata(
    store: &dyn RootStore,
    key: &str,
    size: u64,
) -> Result<(Footer, ShardMetadata)> {
    let reader = store.open_reader(key, size).await?;
    let probe = ShardProbe::open_tail(&*reader, size)
        .await
        .map_err(|e| Error::shard(key, e))?;
    Ok((*probe.footer(), probe.metadata().clone()))
}

/// A reference to the ArrayRecord file already at `key` (see
/// [`Root::adopt_array_record`](crate::Root::adopt_array_record)): one HEAD for the size,
/// one tail read for the footer (every hash of postscript and footer checked), the record
/// count and the [`TailChecksum`] every reader compares at open. Nothing is written or
/// rewritten.
pub(crate) async fn adopt_array_record(store: &dyn RootStore, key: &str) -> Result<ShardRef> {
    if let Some(problem) = key_problem(key) {
        return Err(Error::invalid(format!("shard key {key:?}: {problem}")));
    }
    let size = store.head(key).await?.size;
    let reader = store.open_reader(key, size).await?;
    let (file, tail) = open_array_record_tail(reader, key).await?;
    if file.layout().size() != size {
        return Err(Error::Verification {
            key: key.to_owned(),
            what: "size",
            expected: size.to_string(),
            actual: file.layout().size().to_string(),
        });
    }
    // The tail read of a file of `size` bytes holds its last min(size, 256 KiB) bytes.
    let covered = TailChecksum::covered(ShardFormat::ArrayRecord, size);
    let skip = tail
        .bytes
        .len()
        .saturating_sub(usize::try_from(covered).unwrap_or(0));
    let tail = TailChecksum::of(&tail.bytes[skip..]);
    Ok(ShardRef {
        key: key.to_owned(),
        size,
        record_count: file.len(),
        checksum: None,
        tail: Some(tail),
        format: ShardFormat::ArrayRecord,
        stream: None,
    })
}

/// Writes `records` as an ArrayRecord file, shard `index` of worker `work_id` (see
/// [`Root::write_array_record_shard`](crate::Root::write_array_record_shard)): the same
/// create-only streamed write as a native shard's, through guideloom-arrayrecord's writer.
pub(crate) async fn write_array_record<I, R>(
    store: &dyn RootStore,
    options: &WriteOptions,
    work_id: &str,
    index: u64,
    writer_options: ArrayRecordWriterOptions,
    records: I,
) -> Result<ShardRef>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[u8]>,
{
    let records = records.into_iter().map(Ok::<R, std::convert::Infallible>);
    let written =
        try_write_array_record(store, options, work_id, index, writer_options, records).await?;
    match written {
        Ok(shard) => Ok(shard),
        Err(never) => match never {},
    }
}

/// [`write_array_record`] of fallibly produced `records` (see
/// [`Root::try_write_array_record_shard`](crate::Root::try_write_array_record_shard)): the
/// first `Err` stops the write before any request and is the inner `Err`.
pub(crate) async fn try_write_array_record<I, R, E>(
    store: &dyn RootStore,
    options: &WriteOptions,
    work_id: &str,
    index: u64,
    writer_options: ArrayRecordWriterOptions,
    records: I,
) -> Result<std::result::Result<ShardRef, E>>
where
    I: IntoIterator<Item = std::result::Result<R, E>>,
    R: AsRef<[u8]>,
{
    check_name("work id", work_id)?;
    store.check_writable()?;
    let key = array_record_shard_key(work_id, index);
    if can_pipe()
        && let Some(pending) = store.begin_create_owned(&key, &options.spool_dir)?
    {
        let limit = options.max_bytes;
        return write_array_record_piped(store, limit, key, writer_options, records, pending).await;
    }
    let mut pending = store.begin_create(&key, &options.spool_dir)?;
    let mut tally = Tally::new(&mut *pending, options.max_bytes, true);
    // The outer `Err` is the write's failure; `Ok(Err)` the first record that failed to be
    // produced (dropping `pending` discards what reached it).
    let written = {
        let mut writer = ArrayRecordWriter::new(&mut tally, writer_options).named(key.clone());
        (|| {
            for r in records {
                match r {
                    Ok(r) => writer.write(r.as_ref())?,
                    Err(e) => return Ok(Err(e)),
                }
            }
            let record_count = writer.len();
            writer.finish().map(|_| Ok(record_count))
        })()
    };
    let record_count = match written {
        Ok(Ok(count)) => count,
        Ok(Err(e)) => return Ok(Err(e)),
        Err(e) => return Err(tally.failure(&key, || Error::array_record_shard(&key, e))),
    };
    let size = tally.len;
    let tail = tally.tail_checksum(ShardFormat::ArrayRecord);
    let digest = tally
        .digest
        .take()
        .map(Digest256::finish)
        .unwrap_or_default();
    create_streamed(store, &key, pending, size)
        .instrument(info_span!("upload_shard", key, size))
        .await?;
    Ok(Ok(ShardRef {
        key,
        size,
        record_count,
        checksum: Some(Checksum::Sha256(hex(&digest))),
        tail,
        format: ShardFormat::ArrayRecord,
        stream: None,
    }))
}

/// What the encoder's thread of an ArrayRecord shard returns: the pending object and the
/// reference's facts.
struct ArrayRecordFacts {
    pending: Box<dyn PendingObject>,
    record_count: u64,
    size: u64,
    tail: Option<TailChecksum>,
    digest: [u8; 32],
}

/// [`try_write_array_record`] with the writer and the writes into `pending` on a blocking
/// thread, the records pulled here ([`pipe`]). The writer meets the size cap at a chunk's
/// write, which the task cannot foresee: it learns of the refusal at its next batch, so up
/// to two batches of records more may have been pulled than one at a time (none is
/// written).
async fn write_array_record_piped<I, R, E>(
    store: &dyn RootStore,
    limit: u64,
    key: String,
    writer_options: ArrayRecordWriterOptions,
    records: I,
    pending: Box<dyn PendingObject>,
) -> Result<std::result::Result<ShardRef, E>>
where
    I: IntoIterator<Item = std::result::Result<R, E>>,
    R: AsRef<[u8]>,
{
    let thread_key = key.clone();
    let encode =
        move |mut feed: Feed| {
            let mut pending = pending;
            let facts =
                {
                    let mut tally = Tally::new(&mut *pending, limit, true);
                    let written = {
                        let mut writer = ArrayRecordWriter::new(&mut tally, writer_options)
                            .named(thread_key.clone());
                        (|| loop {
                            match feed.next() {
                                Next::Records(batch) => {
                                    for record in batch.records() {
                                        writer.write(record)?;
                                    }
                                    feed.recycle(batch);
                                }
                                Next::Finish => {
                                    let record_count = writer.len();
                                    return writer.finish().map(|_| Some(record_count));
                                }
                                Next::Stopped => return Ok(None),
                            }
                        })()
                    };
                    match written {
                        Ok(None) => None,
                        Ok(Some(record_count)) => Some(Ok((
                            record_count,
                            tally.len,
                            tally.tail_checksum(ShardFormat::ArrayRecord),
                            tally
                                .digest
                                .take()
                                .map(Digest256::finish)
                                .unwrap_or_default(),
                        ))),
                        Err(e) => Some(Err(tally
                            .failure(&thread_key, || Error::array_record_shard(&thread_key, e)))),
                    }
                };
            facts.map(|r| {
                r.map(|(record_count, size, tail, digest)| ArrayRecordFacts {
                    pending,
                    record_count,
                    size,
                    tail,
                    digest,
                })
            })
        };
    let facts = match pipe(&key, records, |_| false, encode).await? {
        Piped::Record(e) => return Ok(Err(e)),
        Piped::Done(facts) => facts?,
        // `passes` never answers `true` here, so the records always end with a finish or a
        // failure; were the writer to stop otherwise, nothing was written.
        Piped::Passed => {
            return Err(Error::Io {
                path: key.into(),
                source: std::io::Error::other("the ArrayRecord writer stopped before the end"),
            });
        }
    };
    create_streamed(store, &key, facts.pending, facts.size)
        .instrument(info_span!("upload_shard", key, size = facts.size))
        .await?;
    Ok(Ok(ShardRef {
        key,
        size: facts.size,
        record_count: facts.record_count,
        checksum: Some(Checksum::Sha256(hex(&facts.digest))),
        tail: facts.tail,
        format: ShardFormat::ArrayRecord,
        stream: None,
    }))
}
