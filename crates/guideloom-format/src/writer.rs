//! Writing one shard file: streamed payloads, index kept in memory (12 bytes per record),
//! published atomically under its final name.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::footer::Footer;
use crate::index::encode_entry;
use crate::metadata::ShardMetadata;
use crate::schema::CompiledSchema;
use crate::spec::{
    HEADER_LEN, INDEX_ENTRY_LEN, INDEX_ENTRY_USIZE, MAX_RECORDS, crc32c, header_bytes,
};

/// Buffer size of the writer's `BufWriter`.
const WRITE_BUFFER: usize = 1 << 20;

/// A finished, published shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    /// Its final path.
    pub path: PathBuf,
    /// Number of records.
    pub records: u64,
    /// File size in bytes.
    pub size: u64,
}

/// What [`ShardEncoder::finish`] wrote: the facts a publisher records about a shard, so that
/// no caller has to parse the bytes back (the layout is this crate's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// Number of records.
    pub records: u64,
    /// Encoded size in bytes: what the sink received.
    pub size: u64,
    /// The footer written last, as [`Footer::decode`] would read it back.
    pub footer: Footer,
}

impl Encoded {
    /// The CRC32C the footer records over its own first 52 bytes (which hold the index and
    /// metadata checksums, the layout and the record count): one number that changes if any
    /// of them does.
    pub fn footer_crc(&self) -> u32 {
        self.footer.checksum()
    }
}

/// Encodes one shard into any [`Write`] sink: header, streamed payloads, then (at
/// [`finish`](ShardEncoder::finish)) index, metadata and footer. Memory stays O(index)
/// (12 bytes per record) whatever the payload size; the sink sees each byte once, in order.
///
/// [`ShardWriter`] is this encoder over a temporary file that is then published under a final
/// name. Use the encoder directly to build a shard in memory (`Vec<u8>`) or in an unnamed
/// temporary file that needs no cleanup after a crash. (The example reads the shard back
/// through `MemReader`, built with the `testing` feature.)
///
/// ```
/// use guideloom_format::{MemReader, ReadOptions, ShardEncoder, ShardMetadata, SyncShard};
///
/// let mut encoder = ShardEncoder::new(Vec::new(), ShardMetadata::new("raw", "documents"))?;
/// encoder.append(b"first")?;
/// encoder.append(b"second")?;
/// let (bytes, encoded) = encoder.finish()?;
/// assert_eq!((encoded.records, encoded.size), (2, bytes.len() as u64));
/// let shard = SyncShard::open(MemReader::new("in memory", bytes), &ReadOptions::default())?;
/// assert_eq!(&shard.read(1)?[..], b"second");
/// # Ok::<(), guideloom_format::Error>(())
/// ```
#[derive(Debug)]
pub struct ShardEncoder<W: Write> {
    /// Names the destination in errors.
    label: PathBuf,
    out: W,
    pos: u64,
    index: Vec<u8>,
    count: u64,
    metadata: ShardMetadata,
    /// The metadata's schema, compiled: every record is checked against it.
    schema: Option<CompiledSchema>,
}

impl<W: Write> ShardEncoder<W> {
    /// Starts a shard in `out` with `metadata` (its `records` field is set at finish);
    /// writes the header now.
    pub fn new(out: W, metadata: ShardMetadata) -> Result<Self> {
        Self::labelled(out, metadata, PathBuf::from("<shard encoder>"))
    }

    fn labelled(mut out: W, metadata: ShardMetadata, label: PathBuf) -> Result<Self> {
        metadata.validate()?;
        let schema = match &metadata.schema {
            Some(schema) => Some(schema.compile().map_err(|e| Error::InvalidArgument {
                message: format!("shard metadata: {e}"),
            })?),
            None => None,
        };
        out.write_all(&header_bytes())
            .map_err(|e| Error::write("write", &label, e))?;
        Ok(ShardEncoder {
            label,
            out,
            pos: HEADER_LEN,
            index: Vec::new(),
            count: 0,
            metadata,
            schema,
        })
    }

    /// Appends one record's payload; returns its local record number.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        if self.count >= MAX_RECORDS {
            return Err(Error::InvalidArgument {
                message: format!("a shard holds at most {MAX_RECORDS} records"),
            });
        }
        self.check_schema(self.count, payload)?;
        self.out
            .write_all(payload)
            .map_err(|e| Error::write("write", &self.label, e))?;
        self.pos += payload.len() as u64;
        self.index
            .extend_from_slice(&encode_entry(self.pos, crc32c(payload)));
        self.count += 1;
        Ok(self.count - 1)
    }

    /// Appends the records packed back to back in `data`, record `k` being
    /// `data[ends[k - 1]..ends[k]]` (the first starts at 0), with **one** write of their
    /// bytes: the same shard, byte for byte, as [`append`](Self::append) of each in turn,
    /// for a caller that gathered records in one buffer (a batch handed to another thread).
    /// Returns the local number of the first record (the next one's, when `ends` is empty).
    ///
    /// `ends` must not decrease and must end at `data.len()`, else
    /// [`Error::InvalidArgument`] before anything is written. Past the shard's record limit
    /// the records that fit are written and the rest refused, as one by one.
    ///
    /// ```
    /// use guideloom_format::{ShardEncoder, ShardMetadata};
    ///
    /// let meta = ShardMetadata::new("raw", "documents");
    /// let mut one_by_one = ShardEncoder::new(Vec::new(), meta.clone())?;
    /// one_by_one.append(b"ab")?;
    /// one_by_one.append(b"")?;
    /// one_by_one.append(b"cde")?;
    /// let mut packed = ShardEncoder::new(Vec::new(), meta)?;
    /// packed.append_packed(b"abcde", &[2, 2, 5])?;
    /// assert_eq!(one_by_one.finish()?.0, packed.finish()?.0);
    /// # Ok::<(), guideloom_format::Error>(())
    /// ```
    pub fn append_packed(&mut self, data: &[u8], ends: &[usize]) -> Result<u64> {
        let first = self.count;
        if ends.windows(2).any(|w| w[0] > w[1]) || ends.last().copied().unwrap_or(0) != data.len() {
            return Err(Error::InvalidArgument {
                message: format!(
                    "packed records: {} record ends must not decrease and must end at the \
                     data's {} bytes",
                    ends.len(),
                    data.len()
                ),
            });
        }
        let room = usize::try_from(MAX_RECORDS - self.count).unwrap_or(usize::MAX);
        let fit = &ends[..ends.len().min(room)];
        let len = fit.last().copied().unwrap_or(0);
        if self.schema.is_some() {
            let mut start = 0;
            for (k, &end) in fit.iter().enumerate() {
                self.check_schema(first + k as u64, &data[start..end])?;
                start = end;
            }
        }
        self.out
            .write_all(&data[..len])
            .map_err(|e| Error::write("write", &self.label, e))?;
        let base = self.pos;
        self.index.reserve(fit.len() * INDEX_ENTRY_USIZE);
        let mut start = 0;
        for &end in fit {
            self.index
                .extend_from_slice(&encode_entry(base + end as u64, crc32c(&data[start..end])));
            start = end;
        }
        self.pos = base + len as u64;
        self.count += fit.len() as u64;
        if fit.len() < ends.len() {
            return Err(Error::InvalidArgument {
                message: format!("a shard holds at most {MAX_RECORDS} records"),
            });
        }
        Ok(first)
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.count
    }

    /// Refuses a record that does not match the shard's schema, before any byte is written.
    fn check_schema(&self, index: u64, payload: &[u8]) -> Result<()> {
        match &self.schema {
            Some(schema) => schema
                .check(payload)
                .map_err(|source| Error::SchemaMismatch {
                    label: self.label.clone(),
                    index,
                    source,
                }),
            None => Ok(()),
        }
    }

    /// Payload bytes appended so far.
    pub fn data_len(&self) -> u64 {
        self.pos - HEADER_LEN
    }

    /// The size the shard would have if finished now, excluding metadata.
    pub fn approx_size(&self) -> u64 {
        self.pos + self.count * INDEX_ENTRY_LEN
    }

    /// Writes index, metadata and footer, flushes, and returns the sink with what was
    /// written ([`Encoded`]: record count, size, footer).
    pub fn finish(self) -> Result<(W, Encoded)> {
        let ShardEncoder {
            label,
            mut out,
            pos,
            index,
            count,
            mut metadata,
            ..
        } = self;
        let io = |e| Error::write("write", &label, e);
        metadata.records = count;
        let meta = metadata.encode()?;
        let footer = Footer::new(pos, &index, &meta, count);
        out.write_all(&index).map_err(io)?;
        out.write_all(&meta).map_err(io)?;
        out.write_all(&footer.encode()).map_err(io)?;
        out.flush().map_err(io)?;
        let size = pos + index.len() as u64 + meta.len() as u64 + crate::spec::FOOTER_LEN;
        Ok((
            out,
            Encoded {
                records: count,
                size,
                footer,
            },
        ))
    }
}

/// Writes one shard file.
///
/// Payloads are streamed to a temporary file in the destination directory (named
/// `.<final name>.<random>.tmp`), so memory stays O(index) whatever the shard size.
/// [`finish`](ShardWriter::finish) writes index, metadata and footer, fsyncs, and links the
/// file to its final name — failing with [`Error::AlreadyExists`] rather than replacing an
/// existing shard — then fsyncs the directory. Dropping an unfinished writer deletes the
/// temporary file: nothing ever appears at the final name unless complete.
#[derive(Debug)]
pub struct ShardWriter {
    final_path: PathBuf,
    encoder: ShardEncoder<BufWriter<NamedTempFile>>,
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl ShardWriter {
    /// Starts a shard that will be published at `final_path`, with `metadata` (its
    /// `records` field is set at finish). The directory must exist.
    pub fn create(final_path: impl Into<PathBuf>, metadata: ShardMetadata) -> Result<Self> {
        let final_path = final_path.into();
        if final_path.exists() {
            return Err(Error::AlreadyExists { path: final_path });
        }
        let dir = parent_of(&final_path);
        let name = final_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| Error::write("create a temporary file in", dir, e))?;
        let file = BufWriter::with_capacity(WRITE_BUFFER, tmp);
        let encoder = ShardEncoder::labelled(file, metadata, final_path.clone())?;
        Ok(ShardWriter {
            final_path,
            encoder,
        })
    }

    /// Appends one record's payload; returns its local record number.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        self.encoder.append(payload)
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.encoder.records()
    }

    /// Payload bytes appended so far.
    pub fn data_len(&self) -> u64 {
        self.encoder.data_len()
    }

    /// The size the shard would have if finished now, excluding metadata.
    pub fn approx_size(&self) -> u64 {
        self.encoder.approx_size()
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.final_path
    }

    /// Writes index, metadata and footer and publishes the shard under its final name.
    pub fn finish(self) -> Result<ShardInfo> {
        let ShardWriter {
            final_path,
            encoder,
        } = self;
        let io = |op, e| Error::write(op, &final_path, e);
        let (
            file,
            Encoded {
                records: count,
                size,
                ..
            },
        ) = encoder.finish()?;
        let tmp = file.into_inner().map_err(|e| io("write", e.into_error()))?;
        tmp.as_file().sync_all().map_err(|e| io("fsync", e))?;
        match tmp.persist_noclobber(&final_path) {
            Ok(_) => {}
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::AlreadyExists { path: final_path });
            }
            Err(e) => return Err(io("publish", e.error)),
        }
        let dir = parent_of(&final_path);
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::write("fsync directory", dir, e))?;
        tracing::debug!(path = %final_path.display(), records = count, size, "published shard");
        Ok(ShardInfo {
            path: final_path,
            records: count,
            size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta() -> ShardMetadata {
        ShardMetadata::new("raw", "documents")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// The in-memory encoder and the file writer produce the same bytes.
        #[test]
        fn encoder_bytes_equal_the_published_file(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..40)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("shard-000000.glm");
            let mut writer = ShardWriter::create(&path, meta()).unwrap();
            let mut encoder = ShardEncoder::new(Vec::new(), meta()).unwrap();
            for r in &records {
                prop_assert_eq!(writer.append(r).unwrap(), encoder.append(r).unwrap());
            }
            prop_assert_eq!(writer.approx_size(), encoder.approx_size());
            let info = writer.finish().unwrap();
            let (bytes, encoded) = encoder.finish().unwrap();
            prop_assert_eq!(encoded.records, records.len() as u64);
            prop_assert_eq!(info.size, bytes.len() as u64);
            prop_assert_eq!(encoded.size, bytes.len() as u64);
            // The facts are those a reader decodes from the bytes.
            let tail = &bytes[bytes.len() - crate::spec::FOOTER_USIZE..];
            let decoded = Footer::decode("encoded", tail, encoded.size).unwrap();
            prop_assert_eq!(decoded, encoded.footer);
            prop_assert_eq!(
                encoded.footer_crc(),
                u32::from_le_bytes(tail[52..56].try_into().unwrap())
            );
            prop_assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Packed batches (cut anywhere) and one record at a time encode the same bytes.
        #[test]
        fn packed_batches_encode_the_bytes_of_one_record_at_a_time(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..60),
            cuts in proptest::collection::vec(0usize..60, 0..6),
        ) {
            let mut one = ShardEncoder::new(Vec::new(), meta()).unwrap();
            for r in &records {
                one.append(r).unwrap();
            }
            let mut packed = ShardEncoder::new(Vec::new(), meta()).unwrap();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(records.len())).collect();
            cuts.push(records.len());
            cuts.sort_unstable();
            let mut from = 0;
            for cut in cuts {
                let batch = &records[from..cut];
                let data: Vec<u8> = batch.concat();
                let ends: Vec<usize> = batch
                    .iter()
                    .scan(0, |end, r| {
                        *end += r.len();
                        Some(*end)
                    })
                    .collect();
                prop_assert_eq!(packed.append_packed(&data, &ends).unwrap(), from as u64);
                from = cut;
            }
            prop_assert_eq!(packed.records(), one.records());
            prop_assert_eq!(packed.approx_size(), one.approx_size());
            let (a, ea) = one.finish().unwrap();
            let (b, eb) = packed.finish().unwrap();
            prop_assert_eq!(ea, eb);
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn packed_records_need_ends_that_cover_the_data() {
        let mut encoder = ShardEncoder::new(Vec::new(), meta()).unwrap();
        for (data, ends) in [
            (&b"abc"[..], &[2usize, 1, 3][..]),
            (b"abc", &[1, 2]),
            (b"abc", &[]),
            (b"", &[1]),
        ] {
            assert!(
                matches!(
                    encoder.append_packed(data, ends),
                    Err(Error::InvalidArgument { .. })
                ),
                "{ends:?}"
            );
        }
        // Nothing was written: the header alone.
        assert_eq!((encoder.records(), encoder.data_len()), (0, 0));
        assert_eq!(encoder.append_packed(b"", &[]).unwrap(), 0);
        assert_eq!(encoder.append_packed(b"xy", &[0, 2]).unwrap(), 0);
        assert_eq!(encoder.append_packed(b"z", &[1]).unwrap(), 2);
        let (bytes, _) = encoder.finish().unwrap();
        // The same shard as the three records appended one at a time (the reader's tests
        // read such shards back).
        let mut one_by_one = ShardEncoder::new(Vec::new(), meta()).unwrap();
        for record in [&b""[..], b"xy", b"z"] {
            one_by_one.append(record).unwrap();
        }
        assert_eq!(bytes, one_by_one.finish().unwrap().0);
    }

    /// A sink that fails after `budget` bytes, like a full disk.
    struct Full {
        budget: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if buf.len() > self.budget {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "no space left",
                ));
            }
            self.budget -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_sink_is_a_typed_write_error() {
        let mut encoder = ShardEncoder::new(Full { budget: 40 }, meta()).unwrap();
        let err = encoder.append(&[7u8; 100]).unwrap_err();
        assert!(
            matches!(&err, Error::Write { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
            "{err:?}"
        );
        let encoder = ShardEncoder::new(Full { budget: 20 }, meta()).unwrap();
        assert!(matches!(encoder.finish(), Err(Error::Write { .. })));
    }
}
