//! CSV and JSON Lines files in, as Arrow batches.
//!
//! The schema is given ([`TextOptions::schema`]) or inferred from the first
//! [`TextOptions::infer_rows`] records of the first file (`arrow-csv`'s
//! `Format::infer_schema`, with a header row; `arrow-json`'s `infer_json_schema`, columns in
//! the order their keys first appear, struct members by name); a column inferred as all
//! nulls becomes a nullable `utf8`. Every file is then read with the same
//! schema, streamed through `arrow-csv`'s and `arrow-json`'s push decoders in batches of
//! [`TextOptions::batch_rows`] records: memory is one batch and its text.
//!
//! A record that does not parse under the schema (a value of another type, a missing or
//! extra column, a JSON field the schema lacks — JSON is read in strict mode, so no field is
//! dropped silently — or malformed text) stops the read with [`Error::Parse`] naming the
//! file and the 1-based line the record starts on (a CSV header is line 1). The decoders
//! report rows, not lines, so the batch's text is kept and, on an error, decoded again one
//! record at a time to find the line.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, SchemaRef};
use guideloom_format::schema::Schema;

use crate::error::{Error, Result};
use crate::sink::schema_of;

/// The default records per batch.
pub const DEFAULT_BATCH_ROWS: usize = 1024;
/// The default number of records the schema is inferred from.
pub const DEFAULT_INFER_ROWS: usize = 1000;
/// Bytes read from a file at a time.
const READ_BUFFER: usize = 1 << 20;

/// The text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextFormat {
    /// Comma-separated values with a header row (RFC 4180 quoting).
    Csv,
    /// One JSON object per line.
    JsonLines,
}

/// How text files are read.
#[derive(Debug, Clone)]
pub struct TextOptions {
    /// Records per batch (at least 1). Default [`DEFAULT_BATCH_ROWS`].
    pub batch_rows: usize,
    /// Records of the first file the schema is inferred from when none is given (at least
    /// 1). Default [`DEFAULT_INFER_ROWS`].
    pub infer_rows: usize,
    /// The Arrow schema of the records (CSV: its fields in column order, named as the
    /// header names them), instead of inferring one.
    pub schema: Option<SchemaRef>,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            batch_rows: DEFAULT_BATCH_ROWS,
            infer_rows: DEFAULT_INFER_ROWS,
            schema: None,
        }
    }
}

/// One or many CSV or JSON Lines files of one schema, read as Arrow batches.
#[derive(Debug, Clone)]
pub struct TextInput {
    format: TextFormat,
    paths: Vec<PathBuf>,
    sizes: Vec<u64>,
    arrow: SchemaRef,
    schema: Schema,
    batch_rows: usize,
    read: Arc<AtomicU64>,
}

impl TextInput {
    /// Opens `paths` (at least one) as `format`: the schema is `options.schema` or inferred
    /// from the first file, and refused, naming the file and field, if guideloom does not
    /// store one of its types. Nothing else is read until the batches are.
    pub fn open(format: TextFormat, paths: &[PathBuf], options: TextOptions) -> Result<Self> {
        let Some(first) = paths.first() else {
            return Err(Error::unsupported("", "no input file given"));
        };
        let mut sizes = Vec::with_capacity(paths.len());
        for path in paths {
            let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
            if meta.is_dir() {
                return Err(Error::unsupported(path, "is a directory, not a file"));
            }
            sizes.push(meta.len());
        }
        let arrow = match options.schema {
            Some(schema) => schema,
            None => Arc::new(infer(format, first, options.infer_rows.max(1))?),
        };
        let schema = schema_of(first, &arrow)?;
        Ok(TextInput {
            format,
            paths: paths.to_vec(),
            sizes,
            arrow,
            schema,
            batch_rows: options.batch_rows.max(1),
            read: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The schema of every record.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The Arrow schema the files are decoded with (given or inferred).
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::clone(&self.arrow)
    }

    /// The files, in order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Bytes of all files (their sizes when opened).
    pub fn input_bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }

    /// Bytes decoded so far, by every reader of this input (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// The records of file `file`, in batches.
    pub fn file_batches(&self, file: usize) -> Result<TextBatches> {
        let path = self.paths.get(file).ok_or_else(|| {
            Error::unsupported(
                "",
                format!("no input file {file} ({} given)", self.paths.len()),
            )
        })?;
        let reader = File::open(path).map_err(|e| Error::io(path, e))?;
        let decoder =
            Decoder::new(self.format, &self.arrow, self.batch_rows, true).map_err(|e| {
                Error::Parse {
                    path: path.clone(),
                    line: 1,
                    detail: e.to_string(),
                }
            })?;
        Ok(TextBatches {
            path: path.clone(),
            format: self.format,
            schema: Arc::clone(&self.arrow),
            reader: BufReader::with_capacity(READ_BUFFER, reader),
            decoder,
            pending: Vec::new(),
            lines_before: 0,
            first: true,
            done: false,
            read: Arc::clone(&self.read),
        })
    }

    /// Every record of every file, in order.
    pub fn batches(&self) -> impl Iterator<Item = Result<RecordBatch>> + '_ {
        (0..self.paths.len()).flat_map(move |f| match self.file_batches(f) {
            Ok(batches) => Box::new(batches) as Box<dyn Iterator<Item = Result<RecordBatch>>>,
            Err(e) => Box::new(std::iter::once(Err(e))),
        })
    }
}

/// The schema inferred from the first `rows` records of `path`.
fn infer(format: TextFormat, path: &Path, rows: usize) -> Result<arrow_schema::Schema> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader = BufReader::with_capacity(READ_BUFFER, file);
    let inferred = match format {
        TextFormat::Csv => arrow_csv::reader::Format::default()
            .with_header(true)
            .infer_schema(reader, Some(rows))
            .map(|(schema, _)| schema)
            .map_err(|e| Error::Parse {
                path: path.to_owned(),
                line: line_in_message(&e.to_string()).unwrap_or(1),
                detail: format!("inferring the schema: {}", strip_lines(&e.to_string())),
            })?,
        TextFormat::JsonLines => match arrow_json::reader::infer_json_schema(reader, Some(rows)) {
            // arrow-json sorts the fields by name: put them in the order the lines have them.
            Ok((schema, _)) => in_key_order(schema, &json_key_order(path, rows)?),
            Err(e) => {
                return Err(Error::Parse {
                    path: path.to_owned(),
                    line: first_bad_json_line(path, rows)?.unwrap_or(1),
                    detail: format!("inferring the schema: {e}"),
                });
            }
        },
    };
    if inferred.fields().is_empty() {
        return Err(Error::unsupported(
            path,
            "no columns to infer a schema from",
        ));
    }
    Ok(arrow_schema::Schema::new_with_metadata(
        nulls_as_text(inferred.fields()),
        inferred.metadata().clone(),
    ))
}

/// Fields whose type was inferred as `null` (no value in the sample) as nullable `utf8`.
fn nulls_as_text(fields: &Fields) -> Fields {
    fields.iter().map(null_as_text).collect()
}

fn null_as_text(field: &FieldRef) -> FieldRef {
    let data_type = match field.data_type() {
        DataType::Null => DataType::Utf8,
        DataType::List(item) => DataType::List(null_as_text(item)),
        DataType::Struct(members) => DataType::Struct(nulls_as_text(members)),
        other => other.clone(),
    };
    Arc::new(Field::new(field.name(), data_type, true).with_metadata(field.metadata().clone()))
}

/// The top-level keys of the first `rows` objects of `path`, in the order first seen.
fn json_key_order(path: &Path, rows: usize) -> Result<Vec<String>> {
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> serde::de::Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<serde::de::IgnoredAny>()?;
                if !self.0.contains(&key) {
                    self.0.push(key);
                }
            }
            Ok(())
        }
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut keys = Vec::new();
    let mut seen = 0;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut de = serde_json::Deserializer::from_slice(&line);
        // A line that is not an object was refused by the inference already.
        let _ = serde::Deserializer::deserialize_map(&mut de, Keys(&mut keys));
        seen += 1;
        if seen >= rows {
            break;
        }
    }
    Ok(keys)
}

/// `schema`'s fields in the order of `keys` (fields not among them last, as they were).
fn in_key_order(schema: arrow_schema::Schema, keys: &[String]) -> arrow_schema::Schema {
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    fields.sort_by_key(|f| {
        keys.iter()
            .position(|k| k == f.name())
            .unwrap_or(usize::MAX)
    });
    arrow_schema::Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The first of the first `rows` non-blank lines of `path` that is not a JSON value.
fn first_bad_json_line(path: &Path, rows: usize) -> Result<Option<u64>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut seen = 0;
    for (i, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_err() {
            return Ok(Some(i as u64 + 1));
        }
        seen += 1;
        if seen >= rows {
            break;
        }
    }
    Ok(None)
}

/// The number after the last `at line ` in an error message (the csv crate's position).
fn line_in_message(message: &str) -> Option<u64> {
    let at = message.rfind("at line ")? + "at line ".len();
    let digits: String = message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `message` without the decoders' own `at line N` / `for line N` (counted from the
/// record they were handed, not the file's line: [`Error::Parse`] says that).
fn strip_lines(message: &str) -> String {
    let mut out = message.to_owned();
    for pattern in [" at line ", " for line "] {
        while let Some(at) = out.find(pattern) {
            let end = at + pattern.len();
            let digits = out[end..].chars().take_while(char::is_ascii_digit).count();
            if digits == 0 {
                break;
            }
            out.replace_range(at..end + digits, "");
        }
    }
    out
}

/// Either push decoder.
enum Decoder {
    Csv(Box<arrow_csv::reader::Decoder>),
    Json(arrow_json::reader::Decoder),
}

impl Decoder {
    /// A decoder of `batch_rows` records per batch; `header`: the text starts with a CSV
    /// header row (checked against the schema's names, then skipped).
    fn new(
        format: TextFormat,
        schema: &SchemaRef,
        batch_rows: usize,
        header: bool,
    ) -> Result<Self, ArrowError> {
        Ok(match format {
            TextFormat::Csv => Decoder::Csv(Box::new(
                arrow_csv::ReaderBuilder::new(Arc::clone(schema))
                    .with_header(header)
                    .with_header_validation(header)
                    .with_batch_size(batch_rows)
                    .build_decoder(),
            )),
            TextFormat::JsonLines => Decoder::Json(
                arrow_json::ReaderBuilder::new(Arc::clone(schema))
                    .with_batch_size(batch_rows)
                    .with_strict_mode(true)
                    .build_decoder()?,
            ),
        })
    }

    fn decode(&mut self, buf: &[u8]) -> Result<usize, ArrowError> {
        match self {
            Decoder::Csv(d) => d.decode(buf),
            Decoder::Json(d) => d.decode(buf),
        }
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        match self {
            Decoder::Csv(d) => d.flush(),
            Decoder::Json(d) => d.flush(),
        }
    }
}

/// The batches of one text file: an iterator of `Result<RecordBatch>`.
pub struct TextBatches {
    path: PathBuf,
    format: TextFormat,
    schema: SchemaRef,
    reader: BufReader<File>,
    decoder: Decoder,
    /// The text of the batch being decoded (from the end of the last batch).
    pending: Vec<u8>,
    /// Newlines before `pending` in the file.
    lines_before: u64,
    /// Whether `pending` starts at the beginning of the file (a CSV header).
    first: bool,
    done: bool,
    read: Arc<AtomicU64>,
}

impl std::fmt::Debug for TextBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextBatches")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("lines_before", &self.lines_before)
            .finish_non_exhaustive()
    }
}

impl TextBatches {
    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let buf = self
                .reader
                .fill_buf()
                .map_err(|e| Error::io(&self.path, e))?;
            let eof = buf.is_empty();
            let len = buf.len();
            let used = match self.decoder.decode(buf) {
                Ok(used) => used,
                Err(e) => {
                    self.pending.extend_from_slice(buf);
                    return Err(self.locate(e));
                }
            };
            self.pending.extend_from_slice(&buf[..used]);
            self.reader.consume(used);
            self.read.fetch_add(used as u64, Ordering::Relaxed);
            if used == len && !eof {
                continue;
            }
            // A full batch (the decoder stopped short of the buffer), or the end of the file.
            match self.decoder.flush() {
                Ok(Some(batch)) => {
                    self.lines_before += newlines(&self.pending);
                    self.pending.clear();
                    self.first = false;
                    return Ok(Some(batch));
                }
                Ok(None) if eof => return Ok(None),
                // The CSV header was skipped: nothing to flush yet.
                Ok(None) => {}
                Err(e) => return Err(self.locate(e)),
            }
        }
    }

    /// The error `e` of the batch in `pending`, at the line of the first record that fails
    /// alone.
    fn locate(&self, e: ArrowError) -> Error {
        let found = match self.format {
            TextFormat::Csv => locate_csv(&self.schema, &self.pending, self.first),
            TextFormat::JsonLines => locate_json(&self.schema, &self.pending),
        };
        let (line, error) = match found {
            Some((offset, error)) => (
                self.lines_before + newlines(&self.pending[..offset]) + 1,
                error,
            ),
            None => (self.lines_before + 1, e),
        };
        Error::Parse {
            path: self.path.clone(),
            line,
            detail: strip_lines(&error.to_string()),
        }
    }
}

impl Iterator for TextBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_batch();
        if !matches!(next, Ok(Some(_))) {
            self.done = true;
        }
        next.transpose()
    }
}

fn newlines(text: &[u8]) -> u64 {
    text.iter().filter(|&&b| b == b'\n').count() as u64
}

/// `offset` moved past line ends (a CRLF's `\n`, blank lines): where a record's text starts.
fn record_start(text: &[u8], offset: usize) -> usize {
    offset
        + text[offset..]
            .iter()
            .take_while(|&&b| b == b'\n' || b == b'\r')
            .count()
}

/// The offset of the first record of `text` that fails to decode alone, and its error.
fn locate_csv(schema: &SchemaRef, text: &[u8], header: bool) -> Option<(usize, ArrowError)> {
    let mut decoder = Decoder::new(TextFormat::Csv, schema, 1, header).ok()?;
    let mut offset = 0;
    if header {
        match decoder.decode(text) {
            Ok(used) => offset = used,
            Err(e) => return Some((0, e)),
        }
    }
    let mut start = offset;
    loop {
        let eof = offset >= text.len();
        let input = if eof { &[][..] } else { &text[offset..] };
        match decoder.decode(input) {
            Ok(used) => offset += used,
            Err(e) => return Some((record_start(text, start), e)),
        }
        if eof || offset < text.len() || matches!(&decoder, Decoder::Csv(d) if d.capacity() == 0) {
            match decoder.flush() {
                Err(e) => return Some((record_start(text, start), e)),
                Ok(None) if eof => return None,
                Ok(_) => start = offset,
            }
            if eof {
                return None;
            }
        }
    }
}

/// The offset of the first line of `text` that fails to decode alone, and its error.
fn locate_json(schema: &SchemaRef, text: &[u8]) -> Option<(usize, ArrowError)> {
    let mut offset = 0;
    for line in text.split(|&b| b == b'\n') {
        let start = offset;
        offset += line.len() + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let fail = |e| Some((start, e));
        let Ok(mut decoder) = Decoder::new(TextFormat::JsonLines, schema, 1, false) else {
            return None;
        };
        let mut rest = line;
        loop {
            let used = match decoder.decode(rest) {
                Ok(used) => used,
                Err(e) => return fail(e),
            };
            if let Err(e) = decoder.flush() {
                return fail(e);
            }
            rest = &rest[used..];
            if rest.is_empty() || used == 0 {
                break;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_line_numbers_are_stripped() {
        assert_eq!(
            strip_lines("incorrect number of fields for line 3, expected 2 got 1"),
            "incorrect number of fields, expected 2 got 1"
        );
        assert_eq!(
            strip_lines("parsing 'x' as type 'Int64' for column 1 at line 7. Row data: '[x]'"),
            "parsing 'x' as type 'Int64' for column 1. Row data: '[x]'"
        );
        assert_eq!(line_in_message("unequal lengths at line 12"), Some(12));
        assert_eq!(line_in_message("no position"), None);
    }

    #[test]
    fn record_starts_skip_line_ends() {
        assert_eq!(record_start(b"a\r\n\nb", 1), 4);
        assert_eq!(record_start(b"ab", 0), 0);
    }
}
