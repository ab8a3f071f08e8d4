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
use crate::spec::{HEADER_LEN, INDEX_ENTRY_LEN, MAX_RECORDS, crc32c, header_bytes};

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

/// Writes one shard.
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
    file: BufWriter<NamedTempFile>,
    pos: u64,
    index: Vec<u8>,
    count: u64,
    metadata: ShardMetadata,
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
        let mut file = BufWriter::with_capacity(WRITE_BUFFER, tmp);
        file.write_all(&header_bytes())
            .map_err(|e| Error::write("write", &final_path, e))?;
        Ok(ShardWriter {
            final_path,
            file,
            pos: HEADER_LEN,
            index: Vec::new(),
            count: 0,
            metadata,
        })
    }

    /// Appends one record's payload; returns its local record number.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        if self.count >= MAX_RECORDS {
            return Err(Error::InvalidArgument {
                message: format!("a shard holds at most {MAX_RECORDS} records"),
            });
        }
        self.file
            .write_all(payload)
            .map_err(|e| Error::write("write", &self.final_path, e))?;
        self.pos += payload.len() as u64;
        self.index
            .extend_from_slice(&encode_entry(self.pos, crc32c(payload)));
        self.count += 1;
        Ok(self.count - 1)
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.count
    }

    /// Payload bytes appended so far.
    pub fn data_len(&self) -> u64 {
        self.pos - HEADER_LEN
    }

    /// The size the shard would have if finished now, excluding metadata.
    pub fn approx_size(&self) -> u64 {
        self.pos + self.count * INDEX_ENTRY_LEN
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.final_path
    }

    /// Writes index, metadata and footer and publishes the shard under its final name.
    pub fn finish(self) -> Result<ShardInfo> {
        let ShardWriter {
            final_path,
            mut file,
            pos,
            index,
            count,
            mut metadata,
        } = self;
        let io = |op, e| Error::write(op, &final_path, e);
        metadata.records = count;
        let meta = metadata.encode()?;
        let footer = Footer::new(pos, &index, &meta, count);
        file.write_all(&index).map_err(|e| io("write", e))?;
        file.write_all(&meta).map_err(|e| io("write", e))?;
        file.write_all(&footer.encode())
            .map_err(|e| io("write", e))?;
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
        let size = pos + index.len() as u64 + meta.len() as u64 + crate::spec::FOOTER_LEN;
        tracing::debug!(path = %final_path.display(), records = count, size, "published shard");
        Ok(ShardInfo {
            path: final_path,
            records: count,
            size,
        })
    }
}
