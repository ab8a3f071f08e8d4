//! Reading command input with bounded memory: JSON Lines files (or stdin) line by line, and
//! directories of raw records file by file.
//!
//! A line is never held beyond its limit: a longer one is refused naming the file, the line
//! and the limit after at most `limit + 1` of its bytes were read, and buffers grow with
//! `try_reserve`, so a failed allocation is an error, never an abort.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

use guideloom_cli::grow::grow_within;

use crate::error::{CliError, Result};
use crate::json::json_to_cbor;

/// The most bytes one annotation value (one input line of `annotate`) may have.
pub(crate) const MAX_ANNOTATION_LINE: usize = 64 << 20;

/// Opens an input file, or stdin for `-`.
pub(crate) fn open_input(path: &Path) -> Result<Box<dyn BufRead>> {
    if path == Path::new("-") {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            std::io::stdin(),
        )));
    }
    let file = File::open(path).map_err(|e| CliError::file(path, e))?;
    Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
}

/// The lines of an input, 1-based, each at most `limit` bytes (without its `\n`).
pub(crate) struct Lines {
    reader: Box<dyn BufRead>,
    path: PathBuf,
    limit: usize,
    what: String,
    buf: Vec<u8>,
    number: u64,
    done: bool,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("path", &self.path)
            .field("limit", &self.limit)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

impl Lines {
    /// Lines of `reader` (read from `path`, for messages); `what` says where the limit comes
    /// from in the refusal (e.g. `"--max-shard-bytes 1024"`).
    pub(crate) fn new(
        reader: Box<dyn BufRead>,
        path: &Path,
        limit: usize,
        what: impl Into<String>,
    ) -> Self {
        Self {
            reader,
            path: path.to_path_buf(),
            limit,
            what: what.into(),
            buf: Vec::new(),
            number: 0,
            done: false,
        }
    }

    fn input_error(&self, what: String) -> CliError {
        CliError::Input {
            path: self.path.clone(),
            line: self.number,
            what,
        }
    }

    /// The next line as text (number, line without `\n`/`\r\n`), or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<(u64, &str)>> {
        if self.done {
            return Ok(None);
        }
        self.buf.clear();
        self.number += 1;
        let mut any = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(CliError::file(&self.path, e)),
            };
            if chunk.is_empty() {
                self.done = true;
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let (take, newline) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            if self.buf.len() + take > self.limit {
                return Err(self.input_error(format!(
                    "line longer than {} bytes ({}): refused without reading the rest of it",
                    self.limit, self.what
                )));
            }
            if let Err(e) = grow_within(&mut self.buf, take, self.limit) {
                let len = self.buf.len() + take;
                return Err(
                    self.input_error(format!("cannot allocate {len} bytes for the line: {e}"))
                );
            }
            self.buf.extend_from_slice(&chunk[..take]);
            self.reader.consume(take + usize::from(newline));
            if newline {
                break;
            }
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Ok(Some((self.number, s))),
            Err(e) => Err(self.input_error(format!(
                "not valid UTF-8 (at byte {} of the line)",
                e.valid_up_to() + 1
            ))),
        }
    }

    /// The file name and line number, for messages and record origins.
    pub(crate) fn origin(&self) -> String {
        format!("{}:{}", self.path.display(), self.number)
    }
}

/// Reads JSON Lines from `path` (`-`: stdin), one CBOR record per non-blank line, each line
/// and each record at most `limit` bytes; a line that is not JSON, or not exactly
/// representable, is an error naming the file and line.
pub(crate) fn jsonl_records(
    path: &Path,
    limit: usize,
) -> Result<impl Iterator<Item = Result<InputRecord>>> {
    let mut lines = Lines::new(
        open_input(path)?,
        path,
        limit,
        format!("--max-shard-bytes {limit}"),
    );
    let mut scratch = Vec::new();
    // Bytes of blank lines not yet counted by a record (progress only).
    let mut blank_bytes = 0u64;
    Ok(std::iter::from_fn(move || {
        loop {
            let (n, line) = match lines.next_line() {
                Ok(Some(x)) => x,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            let input_bytes = line.len() as u64 + 1;
            if line.trim().is_empty() {
                blank_bytes += input_bytes;
                continue;
            }
            let input_bytes = input_bytes + std::mem::take(&mut blank_bytes);
            scratch.clear();
            let encoded = json_to_cbor(line.as_bytes(), &mut scratch, limit);
            return Some(
                encoded
                    .map_err(|e| CliError::Input {
                        path: lines.path.clone(),
                        line: n,
                        what: e.to_string(),
                    })
                    .and_then(|()| {
                        let mut record = Vec::new();
                        record
                            .try_reserve_exact(scratch.len())
                            .map_err(|e| CliError::Input {
                                path: lines.path.clone(),
                                line: n,
                                what: format!(
                                    "cannot allocate {} bytes for the record: {e}",
                                    scratch.len()
                                ),
                            })?;
                        record.extend_from_slice(&scratch);
                        Ok(InputRecord {
                            origin: lines.origin(),
                            payload: record,
                            input_bytes,
                        })
                    }),
            );
        }
    }))
}

/// Key of a native shard's user metadata under which `write --format raw` keeps the input
/// file name of each record: an array with one entry per record of the shard, in order
/// (text, or bytes for a name that is not UTF-8).
pub(crate) const INPUT_NAMES_KEY: &str = "input_names";

/// The input file name of record `local` of `shard`, when `write --format raw` kept it (see
/// [`INPUT_NAMES_KEY`]; a name that is not UTF-8 is given with U+FFFD replacements).
pub(crate) fn input_name(shard: &guideloom_publish::OpenedShard, local: u64) -> Option<String> {
    use guideloom_format::Value;
    let names = shard.native()?.metadata().user.get(INPUT_NAMES_KEY)?;
    let Value::Array(names) = names else {
        return None;
    };
    match names.get(usize::try_from(local).ok()?)? {
        Value::Text(t) => Some(t.clone()),
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// One input record: where it came from (for messages), its bytes and how many input bytes
/// it consumed (for progress).
#[derive(Debug)]
pub(crate) struct InputRecord {
    pub(crate) origin: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) input_bytes: u64,
}

/// What kind of entry a raw-record directory held that is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SkippedKind {
    Directory,
    Symlink,
    Fifo,
    Socket,
    Device,
    Other,
}

impl SkippedKind {
    fn of(ft: std::fs::FileType) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if ft.is_fifo() {
                return Self::Fifo;
            }
            if ft.is_socket() {
                return Self::Socket;
            }
            if ft.is_block_device() || ft.is_char_device() {
                return Self::Device;
            }
        }
        if ft.is_symlink() {
            Self::Symlink
        } else if ft.is_dir() {
            Self::Directory
        } else {
            Self::Other
        }
    }

    /// Stable name (the `--json` key).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Directory => "subdirectories",
            Self::Symlink => "symlinks",
            Self::Fifo => "fifos",
            Self::Socket => "sockets",
            Self::Device => "devices",
            Self::Other => "other",
        }
    }
}

/// The files of a raw-record directory, sorted by name, and what was left out.
#[derive(Debug)]
pub(crate) struct RawDir {
    /// Regular files with their sizes at listing time.
    files: Vec<(PathBuf, u64)>,
    /// Entries that are not regular files (FIFOs, devices, sockets, symlinks, directories,
    /// which get a trailing `/`), by name, with their kind: never opened.
    pub(crate) skipped: Vec<(String, SkippedKind)>,
    limit: u64,
}

impl RawDir {
    /// Lists `dir`; each file will be read only if it has at most `limit` bytes.
    pub(crate) fn list(dir: &Path, limit: u64) -> Result<Self> {
        if !dir.is_dir() {
            return Err(CliError::argument(
                dir.display().to_string(),
                "--format raw takes a directory of files (one record per file)",
            ));
        }
        let mut files = Vec::new();
        let mut skipped = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| CliError::file(dir, e))? {
            let entry = entry.map_err(|e| CliError::file(dir, e))?;
            // The entry's own type: a symlink is a symlink, not what it points at.
            let ft = entry
                .file_type()
                .map_err(|e| CliError::file(entry.path(), e))?;
            if ft.is_file() {
                // The size is for the progress bar only; the read checks it again.
                let size = entry.metadata().map_or(0, |m| m.len());
                files.push((entry.path(), size));
            } else {
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if ft.is_dir() {
                    name.push('/');
                }
                skipped.push((name, SkippedKind::of(ft)));
            }
        }
        files.sort();
        skipped.sort();
        Ok(Self {
            files,
            skipped,
            limit,
        })
    }

    /// The bytes of the files listed (their sizes at listing time).
    pub(crate) fn total_bytes(&self) -> u64 {
        self.files.iter().map(|(_, s)| s).sum()
    }

    /// The files listed, in name order, with their sizes at listing time.
    pub(crate) fn files(&self) -> &[(PathBuf, u64)] {
        &self.files
    }

    /// The name `write` keeps for the file at `path` (its file name; bytes when it is not
    /// UTF-8).
    pub(crate) fn name_of(path: &Path) -> Option<guideloom_format::Value> {
        use guideloom_format::Value;
        path.file_name().map(|n| match n.to_str() {
            Some(t) => Value::Text(t.to_owned()),
            #[cfg(unix)]
            None => Value::Bytes(std::os::unix::ffi::OsStrExt::as_bytes(n).to_vec()),
            #[cfg(not(unix))]
            None => Value::Text(n.to_string_lossy().into_owned()),
        })
    }

    /// Reads file `index` of the listing as a record (its name is in the shard's metadata,
    /// made from the listing). Its size must still be the listed one, which
    /// decided its shard: a file that changed since is refused, naming it.
    pub(crate) fn read(&self, index: usize) -> Result<InputRecord> {
        let (path, listed) = &self.files[index];
        let bytes = read_bounded(path, self.limit)?;
        if bytes.len() as u64 != *listed {
            return Err(CliError::argument(
                path.display().to_string(),
                format!(
                    "changed after the directory was listed ({listed} bytes listed, {} read): \
                     its shard was planned from the listing; re-run the write",
                    bytes.len()
                ),
            ));
        }
        Ok(InputRecord {
            origin: path.display().to_string(),
            payload: bytes,
            input_bytes: *listed,
        })
    }

    /// The refusal of a file larger than the shard limit (as [`Self::read`] would refuse
    /// it), so that a plan can refuse it before anything is written.
    pub(crate) fn too_large(&self, index: usize) -> Option<CliError> {
        let (path, size) = &self.files[index];
        (*size > self.limit).then(|| file_too_large(path, *size, self.limit))
    }
}

fn file_too_large(path: &Path, size: u64, limit: u64) -> CliError {
    CliError::argument(
        path.display().to_string(),
        format!("file of {size} bytes does not fit in a shard of --max-shard-bytes {limit}"),
    )
}

/// The skipped entries counted by kind, each kind with its names:
/// `1 fifo (a.fifo), 1 symlink (link), 1 subdirectory (sub/)` (`--json`: kind → names).
pub(crate) fn skipped_by_kind(
    skipped: &[(String, SkippedKind)],
) -> std::collections::BTreeMap<SkippedKind, Vec<&str>> {
    let mut by_kind: std::collections::BTreeMap<SkippedKind, Vec<&str>> =
        std::collections::BTreeMap::new();
    for (name, kind) in skipped {
        by_kind.entry(*kind).or_default().push(name);
    }
    by_kind
}

/// The stderr note of `write --format raw`: counts by kind, with names.
pub(crate) fn skipped_note(dir: &Path, skipped: &[(String, SkippedKind)]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let parts: Vec<String> = skipped_by_kind(skipped)
        .iter()
        .map(|(kind, names)| {
            let n = names.len();
            let label = match (kind, n == 1) {
                (SkippedKind::Directory, true) => "subdirectory",
                (SkippedKind::Directory, false) => "subdirectories",
                (SkippedKind::Symlink, true) => "symlink",
                (SkippedKind::Symlink, false) => "symlinks",
                (SkippedKind::Fifo, true) => "FIFO",
                (SkippedKind::Fifo, false) => "FIFOs",
                (SkippedKind::Socket, true) => "socket",
                (SkippedKind::Socket, false) => "sockets",
                (SkippedKind::Device, true) => "device",
                (SkippedKind::Device, false) => "devices",
                (SkippedKind::Other, _) => "other",
            };
            format!("{n} {label} ({})", names.join(", "))
        })
        .collect();
    Some(format!(
        "note: {}: skipped {} {} not regular files (never opened): {}",
        dir.display(),
        skipped.len(),
        if skipped.len() == 1 {
            "entry that is"
        } else {
            "entries that are"
        },
        parts.join(", ")
    ))
}

/// Reads the regular file `path` whole if it has at most `limit` bytes. It is opened
/// without following a symlink and without blocking (a FIFO put in its place after the
/// listing is refused, not waited on), checked to be a regular file, and read through
/// `take(limit + 1)` so a file that grows meanwhile is still refused, not read whole.
fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| CliError::file(path, e))?;
    let meta = file.metadata().map_err(|e| CliError::file(path, e))?;
    let too_long = |size: u64| file_too_large(path, size, limit);
    if !meta.is_file() {
        return Err(CliError::argument(
            path.display().to_string(),
            "is no longer a regular file (changed after the directory was listed)",
        ));
    }
    if meta.len() > limit {
        return Err(too_long(meta.len()));
    }
    let mut bytes = Vec::new();
    let size = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    bytes.try_reserve_exact(size).map_err(|e| {
        CliError::argument(
            path.display().to_string(),
            format!("cannot allocate {size} bytes for the file: {e}"),
        )
    })?;
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::file(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_long(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &'static [u8], limit: usize) -> Lines {
        Lines::new(
            Box::new(text),
            Path::new("in.jsonl"),
            limit,
            format!("--max-shard-bytes {limit}"),
        )
    }

    #[test]
    fn lines_are_split_numbered_and_bounded() {
        let mut l = lines(b"ab\r\n\ncdef\nlast", 4);
        assert_eq!(l.next_line().unwrap(), Some((1, "ab")));
        assert_eq!(l.next_line().unwrap(), Some((2, "")));
        assert_eq!(l.next_line().unwrap(), Some((3, "cdef")));
        assert_eq!(l.next_line().unwrap(), Some((4, "last")));
        assert_eq!(l.next_line().unwrap(), None);
        assert_eq!(l.next_line().unwrap(), None);

        let mut l = lines(b"1234\n12345\n", 4);
        assert_eq!(l.next_line().unwrap(), Some((1, "1234")));
        let err = l.next_line().unwrap_err().to_string();
        assert_eq!(
            err,
            "in.jsonl:2: line longer than 4 bytes (--max-shard-bytes 4): refused without reading \
             the rest of it"
        );
    }

    #[test]
    fn a_long_line_is_refused_without_being_held() {
        // A reader that yields 64 KiB chunks forever: the refusal comes after the limit.
        struct Endless(Vec<u8>);
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                Ok(n)
            }
        }
        let reader = BufReader::with_capacity(1 << 16, Endless(vec![b'x'; 1 << 16]));
        let mut l = Lines::new(Box::new(reader), Path::new("-"), 1 << 20, "the cap");
        let err = l.next_line().unwrap_err().to_string();
        assert!(
            err.starts_with("-:1: line longer than 1048576 bytes"),
            "{err}"
        );
        assert!(l.buf.capacity() <= 1 << 20, "{}", l.buf.capacity());
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let mut l = lines(b"ok\n\"\xff\"\n", 100);
        l.next_line().unwrap();
        let err = l.next_line().unwrap_err().to_string();
        assert_eq!(err, "in.jsonl:2: not valid UTF-8 (at byte 2 of the line)");
    }
}
