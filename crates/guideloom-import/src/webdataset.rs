//! WebDataset tar shards, as written by `webdataset.TarWriter`, read as Arrow
//! [`RecordBatch`]es, grouped exactly as `webdataset.WebDataset(urls)` groups them.
//!
//! # Samples
//!
//! A tar's regular members, in archive order, form samples as webdataset 1.0.2's
//! `tariterators.py` forms them (`tar_file_iterator`, `base_plus_ext`, `group_by_keys`):
//!
//! - Members that are not regular files (directories, links, devices) are skipped, and so is
//!   metadata: a top-level name that starts and ends with `__` (`__index__`) and a name whose
//!   first path segment does (`__meta__/info.json`).
//! - A name splits at the first dot of its basename into the sample key (with its directories:
//!   `train/000017.seg.png` has key `train/000017`) and the extension (`seg.png`), which is
//!   lower-cased. A name without a dot in its basename (`README`) is skipped. A basename that
//!   starts with a dot keys on its directory (`part/.hidden` → key `part/`, extension
//!   `hidden`), as webdataset's regular expression does.
//! - Consecutive members with the same key form one sample. A key that comes back after
//!   another key starts a new sample: webdataset yields two samples with that key, and so does
//!   this reader (two rows, never merged). Samples never span two tars.
//! - A sample with the same extension twice (`a.jpg`, `a.JPG`) is [`Error::Corrupt`]: webdataset
//!   raises `duplicate file name in tar file`.
//!
//! # Schema
//!
//! Column `__key__` (Utf8, not nullable), then one column per extension, in the order they come
//! in the first sample of the first tar (`TarWriter` writes them sorted) or in the order given
//! to [`WebDatasetReader::with_fields`]: Binary, or Utf8 for [`WebDatasetOptions::text_fields`]
//! (UTF-8 checked), nullable (a sample without that member has a null). Each field's metadata
//! has the MIME type of its extension's last part under [`MEDIA_KEY`] (see [`media_type`]) and
//! the extension under [`EXTENSION_KEY`].
//!
//! # Refused
//!
//! By name, never by a panic: a member whose extension is not in the schema
//! ([`Error::Unsupported`], hinting at [`WebDatasetReader::with_fields`]); an extension that is
//! one of webdataset's own sample keys (`__key__`, `__url__`, `__local_path__`, `__bad__`:
//! webdataset raises or drops the sample); a member over
//! [`max_member_bytes`](WebDatasetOptions::max_member_bytes) ([`Error::Unsupported`]); a
//! truncated archive, a damaged header, a member claiming more bytes than the file holds
//! ([`Error::Corrupt`], naming the tar and the member, checked before anything is allocated);
//! an empty file (Python's `tarfile` refuses it too); members on which Python's `tarfile` and
//! the `tar` crate would disagree (a link or directory with data, a global pax header setting
//! `path` or `size`, GNU sparse members, a member name with a newline or not in UTF-8); a
//! gzip-compressed tar followed by a second gzip member (webdataset silently reads the first
//! only); bzip2, xz and zstd tars. Where Python's `tarfile` stops silently at a damaged header
//! after the first, this reader reports it.
//!
//! # Bounds
//!
//! A tar is read as a stream (plain, or gzip-compressed: `.tar.gz`, `.tgz`, told apart by their
//! first bytes as webdataset's `tarfile.open(mode="r|*")` does): memory holds one batch (at most
//! `batch_rows` samples and under 2 GiB per column) and one member's headers (at most 1 MiB).

mod members;
mod names;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::{ArrayRef, BinaryArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use self::members::{Head, MemberStream, Take, member_path};
pub use self::names::media_type;
use crate::MEDIA_KEY;
use crate::error::{Error, Result};

/// Field-metadata key of the WebDataset extension a column holds (`jpg`, `seg.png`).
pub const EXTENSION_KEY: &str = "guideloom.webdataset.extension";

/// The name of the key column, webdataset's `__key__`.
pub const KEY_COLUMN: &str = "__key__";

/// The keys that webdataset's `group_by_keys` sets in a sample dict itself: an extension with
/// one of these names collides with them (webdataset raises, or drops the sample for `__bad__`).
const RESERVED: [&str; 4] = ["__key__", "__url__", "__local_path__", "__bad__"];

/// The most bytes of one Binary or Utf8 column of a batch (its offsets are `i32`).
const MAX_COLUMN_BYTES: u64 = 0x7fff_ffff;

/// How a [`WebDatasetReader`] reads its tars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebDatasetOptions {
    /// Extensions stored as Utf8 rather than Binary (`txt`, `json`, `cls`); a member of one
    /// that is not valid UTF-8 is [`Error::Corrupt`], naming it.
    pub text_fields: Vec<String>,
    /// The most rows of one batch (at least 1).
    pub batch_rows: usize,
    /// The largest member read (default 1 GiB, at most 2 GiB - 1 as one Arrow value can hold);
    /// a larger one is [`Error::Unsupported`], naming it.
    pub max_member_bytes: u64,
}

impl Default for WebDatasetOptions {
    fn default() -> Self {
        WebDatasetOptions {
            text_fields: Vec::new(),
            batch_rows: 1024,
            max_member_bytes: 1 << 30,
        }
    }
}

/// WebDataset tars read as Arrow batches of one schema; see the [module](self) documentation.
#[derive(Debug, Clone)]
pub struct WebDatasetReader {
    tars: Vec<PathBuf>,
    fields: Vec<String>,
    text: Vec<bool>,
    schema: SchemaRef,
    options: WebDatasetOptions,
}

impl WebDatasetReader {
    /// Reads `tars` with the extensions of the first sample of the first tar as fields (read
    /// up to the next sample's first header, nothing else). A later sample with another
    /// extension is refused: pass the full list to [`with_fields`](Self::with_fields) then.
    pub fn open(tars: &[PathBuf], options: WebDatasetOptions) -> Result<Self> {
        let Some(first) = tars.first() else {
            return Err(Error::unsupported(
                PathBuf::new(),
                "no tar to infer the WebDataset fields from (pass the field list)",
            ));
        };
        check_options(first, &options)?;
        let fields = first_sample_fields(first, options.max_member_bytes)?;
        Self::build(tars, fields, options)
    }

    /// Reads `tars` with `fields` (extensions as webdataset names them: lower-case, `seg.png`)
    /// as the columns after `__key__`, in that order; nothing is read yet.
    pub fn with_fields(
        tars: &[PathBuf],
        fields: &[String],
        options: WebDatasetOptions,
    ) -> Result<Self> {
        let at = tars.first().cloned().unwrap_or_default();
        check_options(&at, &options)?;
        for (i, field) in fields.iter().enumerate() {
            let problem = if fields[..i].contains(field) {
                Some("is listed twice")
            } else if RESERVED.contains(&field.as_str()) {
                Some("is one of webdataset's own sample keys")
            } else if field.contains('/') || field.contains('\n') {
                Some("cannot be an extension (it has a slash or a newline)")
            } else if *field != field.to_lowercase() {
                Some("is not lower-case (webdataset lower-cases extensions)")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(Error::unsupported(
                    at,
                    format!("WebDataset field {field:?} {problem}"),
                ));
            }
        }
        Self::build(tars, fields.to_vec(), options)
    }

    fn build(tars: &[PathBuf], fields: Vec<String>, options: WebDatasetOptions) -> Result<Self> {
        let at = tars.first().cloned().unwrap_or_default();
        if let Some(missing) = options.text_fields.iter().find(|t| !fields.contains(t)) {
            let detail = format!(
                "text field {missing:?} is not among the fields {fields:?} (pass the field list)"
            );
            return Err(Error::unsupported(at, detail));
        }
        let text: Vec<bool> = fields
            .iter()
            .map(|f| options.text_fields.contains(f))
            .collect();
        let mut columns = vec![Field::new(KEY_COLUMN, DataType::Utf8, false)];
        for (field, &is_text) in fields.iter().zip(&text) {
            let data_type = if is_text {
                DataType::Utf8
            } else {
                DataType::Binary
            };
            let metadata = HashMap::from([
                (MEDIA_KEY.to_owned(), media_type(field).to_owned()),
                (EXTENSION_KEY.to_owned(), field.clone()),
            ]);
            columns.push(Field::new(field, data_type, true).with_metadata(metadata));
        }
        let schema = Arc::new(Schema::new(columns));
        Ok(WebDatasetReader {
            tars: tars.to_vec(),
            fields,
            text,
            schema,
            options,
        })
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The tars, in order.
    pub fn tars(&self) -> &[PathBuf] {
        &self.tars
    }

    /// The extensions, one per column after `__key__`.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// The batches of tar `tar` (an index into [`tars`](Self::tars)): the fan-out unit, one
    /// import task per tar. Streaming: memory holds one batch. After an error the iterator
    /// ends.
    pub fn tar_batches(&self, tar: usize) -> Result<TarBatches<'_>> {
        let Some(path) = self.tars.get(tar) else {
            let detail = format!("no tar {tar}: there are {}", self.tars.len());
            return Err(Error::unsupported(PathBuf::new(), detail));
        };
        let members = MemberStream::open(path, self.options.max_member_bytes)?;
        Ok(TarBatches {
            reader: self,
            path,
            members: Some(members),
            sample: None,
            batch: Builder::new(self),
            ready: VecDeque::new(),
        })
    }

    /// The batches of every tar, in order; after an error the iterator ends.
    pub fn batches(&self) -> impl Iterator<Item = Result<RecordBatch>> + '_ {
        let mut current: Option<TarBatches<'_>> = None;
        let mut next_tar = 0;
        let mut failed = false;
        std::iter::from_fn(move || {
            while !failed {
                if let Some(batches) = current.as_mut() {
                    match batches.next() {
                        Some(Ok(batch)) => return Some(Ok(batch)),
                        Some(Err(e)) => {
                            failed = true;
                            return Some(Err(e));
                        }
                        None => current = None,
                    }
                }
                if next_tar == self.tars.len() {
                    return None;
                }
                match self.tar_batches(next_tar) {
                    Ok(batches) => current = Some(batches),
                    Err(e) => {
                        failed = true;
                        return Some(Err(e));
                    }
                }
                next_tar += 1;
            }
            None
        })
    }
}

fn check_options(at: &Path, options: &WebDatasetOptions) -> Result<()> {
    if options.batch_rows == 0 {
        return Err(Error::unsupported(at, "batch_rows is 0"));
    }
    if options.max_member_bytes > MAX_COLUMN_BYTES {
        let detail = format!(
            "max_member_bytes {} is over {MAX_COLUMN_BYTES} (an Arrow Binary value)",
            options.max_member_bytes
        );
        return Err(Error::unsupported(at, detail));
    }
    Ok(())
}

/// The refusal of an extension that is one of webdataset's own sample keys, or a repeat.
fn check_extension(tar: &Path, head: &Head, seen: bool) -> Result<()> {
    if RESERVED.contains(&head.ext.as_str()) {
        let detail = format!(
            "extension {:?} is one of webdataset's own sample keys (webdataset raises or drops the sample)",
            head.ext
        );
        return Err(Error::unsupported(member_path(tar, &head.name), detail));
    }
    if seen {
        let detail = format!(
            "sample {:?} has extension {:?} twice (webdataset: duplicate file name in tar file)",
            head.key, head.ext
        );
        return Err(Error::corrupt(member_path(tar, &head.name), detail));
    }
    Ok(())
}

/// The extensions of the first sample of `tar`, in order; its data is skipped, not read.
fn first_sample_fields(tar: &Path, max_member_bytes: u64) -> Result<Vec<String>> {
    let mut members = MemberStream::open(tar, max_member_bytes)?;
    let mut key: Option<String> = None;
    let mut fields: Vec<String> = Vec::new();
    loop {
        let member = members.next(|head| {
            if key.as_ref().is_some_and(|k| *k != head.key) {
                return Ok(Take::Stop);
            }
            check_extension(tar, head, fields.contains(&head.ext))?;
            Ok(Take::Skip)
        })?;
        match member {
            Some((head, None)) if key.as_ref().is_none_or(|k| *k == head.key) => {
                key = Some(head.key);
                fields.push(head.ext);
            }
            _ => break,
        }
    }
    if fields.is_empty() {
        let detail = "no sample to infer the WebDataset fields from (pass the field list)";
        return Err(Error::unsupported(tar, detail));
    }
    Ok(fields)
}

/// The batches of one tar, from [`WebDatasetReader::tar_batches`].
pub struct TarBatches<'r> {
    reader: &'r WebDatasetReader,
    path: &'r Path,
    /// `None` once the tar is read or has failed.
    members: Option<MemberStream>,
    /// The sample being gathered: its key and a value per field.
    sample: Option<(String, Vec<Option<Vec<u8>>>)>,
    batch: Builder,
    ready: VecDeque<RecordBatch>,
}

impl std::fmt::Debug for TarBatches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TarBatches")
            .field("path", &self.path)
            .field("done", &self.members.is_none())
            .field("rows", &self.batch.rows)
            .finish_non_exhaustive()
    }
}

impl Iterator for TarBatches<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Some(Ok(batch));
            }
            self.members.as_ref()?;
            if let Err(e) = self.step() {
                self.members = None;
                self.ready.clear();
                return Some(Err(e));
            }
        }
    }
}

impl TarBatches<'_> {
    /// Reads one member into the current sample, or closes the tar.
    fn step(&mut self) -> Result<()> {
        let (reader, path) = (self.reader, self.path);
        let Some(members) = self.members.as_mut() else {
            return Ok(());
        };
        let sample = &self.sample;
        let member = members.next(|head| {
            let Some(index) = reader.fields.iter().position(|f| *f == head.ext) else {
                check_extension(path, head, false)?;
                let detail = format!(
                    "member {:?} has extension {:?}, not among the fields {:?} (pass the full \
                     field list to WebDatasetReader::with_fields)",
                    head.name, head.ext, reader.fields
                );
                return Err(Error::unsupported(member_path(path, &head.name), detail));
            };
            let seen = sample
                .as_ref()
                .is_some_and(|(key, values)| *key == head.key && values[index].is_some());
            check_extension(path, head, seen)?;
            Ok(Take::Read)
        })?;
        let Some((head, Some(data))) = member else {
            self.members = None;
            if let Some(sample) = self.sample.take() {
                self.push(sample)?;
            }
            if self.batch.rows > 0 {
                let batch = self.batch.finish(reader, path)?;
                self.ready.push_back(batch);
            }
            return Ok(());
        };
        let index = reader
            .fields
            .iter()
            .position(|f| *f == head.ext)
            .unwrap_or_default();
        if reader.text[index]
            && let Err(e) = std::str::from_utf8(&data)
        {
            let detail = format!("text field {:?} is not UTF-8: {e}", head.ext);
            return Err(Error::corrupt(member_path(path, &head.name), detail));
        }
        if self.sample.as_ref().is_none_or(|(key, _)| *key != head.key) {
            if let Some(sample) = self.sample.take() {
                self.push(sample)?;
            }
            self.sample = Some((head.key, vec![None; reader.fields.len()]));
        }
        if let Some((_, values)) = self.sample.as_mut() {
            values[index] = Some(data);
        }
        Ok(())
    }

    /// Appends a whole sample to the batch, first closing a batch it would not fit in.
    fn push(&mut self, (key, values): (String, Vec<Option<Vec<u8>>>)) -> Result<()> {
        if !self.batch.fits(&key, &values) {
            let batch = self.batch.finish(self.reader, self.path)?;
            self.ready.push_back(batch);
        }
        self.batch.append(&key, &values);
        if self.batch.rows >= self.reader.options.batch_rows {
            let batch = self.batch.finish(self.reader, self.path)?;
            self.ready.push_back(batch);
        }
        Ok(())
    }
}

/// The columns of the batch being made.
struct Builder {
    keys: StringBuilder,
    columns: Vec<BinaryBuilder>,
    /// The bytes in `keys`, then in each column.
    bytes: Vec<u64>,
    rows: usize,
}

impl Builder {
    fn new(reader: &WebDatasetReader) -> Self {
        Builder {
            keys: StringBuilder::new(),
            columns: reader.fields.iter().map(|_| BinaryBuilder::new()).collect(),
            bytes: vec![0; reader.fields.len() + 1],
            rows: 0,
        }
    }

    /// Whether a sample fits in every column's `i32` offsets (always, in an empty batch: one
    /// value is at most `max_member_bytes`).
    fn fits(&self, key: &str, values: &[Option<Vec<u8>>]) -> bool {
        let lens =
            std::iter::once(key.len()).chain(values.iter().map(|v| v.as_ref().map_or(0, Vec::len)));
        self.rows == 0
            || self
                .bytes
                .iter()
                .zip(lens)
                .all(|(&b, len)| b + len as u64 <= MAX_COLUMN_BYTES)
    }

    fn append(&mut self, key: &str, values: &[Option<Vec<u8>>]) {
        self.keys.append_value(key);
        self.bytes[0] += key.len() as u64;
        for ((column, bytes), value) in self
            .columns
            .iter_mut()
            .zip(&mut self.bytes[1..])
            .zip(values)
        {
            column.append_option(value.as_deref());
            *bytes += value.as_ref().map_or(0, |v| v.len() as u64);
        }
        self.rows += 1;
    }

    fn finish(&mut self, reader: &WebDatasetReader, tar: &Path) -> Result<RecordBatch> {
        let arrow = |source| Error::Arrow {
            path: tar.to_path_buf(),
            source,
        };
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(self.keys.finish())];
        for (column, &is_text) in self.columns.iter_mut().zip(&reader.text) {
            let binary: BinaryArray = column.finish();
            arrays.push(if is_text {
                Arc::new(StringArray::try_from_binary(binary).map_err(arrow)?)
            } else {
                Arc::new(binary)
            });
        }
        self.bytes.iter_mut().for_each(|b| *b = 0);
        self.rows = 0;
        RecordBatch::try_new(reader.schema(), arrays).map_err(arrow)
    }
}
