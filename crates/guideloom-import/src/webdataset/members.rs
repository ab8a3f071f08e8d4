//! The members of one tar file that webdataset groups into samples, read with the `tar` crate
//! as webdataset's `tar_file_iterator` reads them with Python's `tarfile` (`mode="r|*"`), or a
//! typed error where the two readers would disagree.
//!
//! Each member is parsed by a fresh [`tar::Archive`] over the same stream, positioned at its
//! header (the archive type lends out its entries only while borrowed, so one archive cannot
//! live across the calls of an iterator): the stream is at the next header once a member's
//! data and its padding to the 512-byte block have been read.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use flate2::bufread::GzDecoder;

use super::names::{base_plus_ext, is_meta};
use crate::error::{Error, Result};

/// The most bytes the headers of one member may take (its header block, GNU long names and
/// pax records): a hostile long name or pax header cannot make the reader buffer more.
const HEADER_LIMIT: u64 = 1 << 20;

/// The most decompressed bytes read past the end of a gzip-compressed archive to reach the end
/// of its gzip member (tar's padding to a record), to see whether a second member follows.
const TRAILER_LIMIT: u64 = 1 << 20;

/// The tar block size.
const BLOCK: u64 = 512;

/// A member that webdataset groups into samples.
#[derive(Debug)]
pub(super) struct Head {
    /// The member's name.
    pub(super) name: String,
    /// Its sample key (`base_plus_ext`'s first part).
    pub(super) key: String,
    /// Its extension, lower-cased as webdataset's `group_by_keys` does.
    pub(super) ext: String,
}

/// What to do with a member, once its [`Head`] is known.
pub(super) enum Take {
    /// Read its data.
    Read,
    /// Skip its data and go on.
    Skip,
    /// Stop reading the archive (its data is left unread).
    Stop,
}

/// The bytes read so far and the limit past which a read fails (the header limit). Atomics
/// (used from one thread) keep the member stream `Send`.
#[derive(Debug, Default)]
struct Meter {
    pos: AtomicU64,
    limit: AtomicU64,
    tripped: AtomicBool,
    /// An I/O error of the file itself (not of its decompression) happened.
    io_error: AtomicBool,
}

#[derive(Debug)]
enum Source {
    Plain(BufReader<File>),
    Gzip(GzDecoder<BufReader<File>>),
}

/// The decompressed archive, metered.
#[derive(Debug)]
struct Metered {
    source: Source,
    meter: Arc<Meter>,
}

impl Read for Metered {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (pos, limit) = (self.meter.pos.load(Relaxed), self.meter.limit.load(Relaxed));
        let room = usize::try_from(limit.saturating_sub(pos)).unwrap_or(usize::MAX);
        if room == 0 && !buf.is_empty() {
            self.meter.tripped.store(true, Relaxed);
            return Err(io::Error::other("tar headers over the limit"));
        }
        let len = buf.len().min(room);
        let read = match &mut self.source {
            Source::Plain(file) => file.read(&mut buf[..len]),
            Source::Gzip(gzip) => gzip.read(&mut buf[..len]),
        };
        match read {
            Ok(n) => {
                self.meter.pos.store(pos + n as u64, Relaxed);
                Ok(n)
            }
            Err(e) => {
                let data_error = matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData
                        | io::ErrorKind::InvalidInput
                        | io::ErrorKind::UnexpectedEof
                );
                if !data_error {
                    self.meter.io_error.store(true, Relaxed);
                }
                Err(e)
            }
        }
    }
}

/// The members of one tar file, in archive order.
#[derive(Debug)]
pub(super) struct MemberStream {
    tar: PathBuf,
    input: Metered,
    meter: Arc<Meter>,
    /// The length of an uncompressed archive (a member claiming more is refused unread).
    file_len: Option<u64>,
    max_member_bytes: u64,
    /// The name of the last member read, for errors between members.
    last: Option<String>,
    done: bool,
}

/// `archive.tar/member`, the path of a member's errors.
pub(super) fn member_path(tar: &Path, member: &str) -> PathBuf {
    let mut path = tar.as_os_str().to_owned();
    path.push("/");
    path.push(member);
    PathBuf::from(path)
}

impl MemberStream {
    /// Opens `tar`, gzip-compressed or not (told apart by their first bytes, as Python's
    /// `tarfile` does in `r|*` mode); bzip2, xz and zstd are refused by name.
    pub(super) fn open(tar: &Path, max_member_bytes: u64) -> Result<Self> {
        let file = File::open(tar).map_err(|e| Error::io(tar, e))?;
        let len = file.metadata().map_err(|e| Error::io(tar, e))?.len();
        let mut file = BufReader::with_capacity(64 << 10, file);
        let magic = file.fill_buf().map_err(|e| Error::io(tar, e))?;
        let compression = if magic.starts_with(b"\x1f\x8b\x08") {
            "gzip"
        } else if magic.starts_with(b"BZh") && magic.get(4..10) == Some(b"1AY&SY") {
            "bzip2"
        } else if magic.starts_with(b"\x5d\x00\x00\x80") || magic.starts_with(b"\xfd7zXZ") {
            "xz"
        } else if magic.starts_with(b"\x28\xb5\x2f\xfd") {
            "zstd"
        } else {
            ""
        };
        let (source, file_len) = match compression {
            "" => (Source::Plain(file), Some(len)),
            "gzip" => (Source::Gzip(GzDecoder::new(file)), None),
            other => {
                let detail = format!("a {other}-compressed tar (plain and gzip tars are read)");
                return Err(Error::unsupported(tar, detail));
            }
        };
        let meter = Arc::new(Meter::default());
        Ok(MemberStream {
            tar: tar.to_path_buf(),
            input: Metered {
                source,
                meter: Arc::clone(&meter),
            },
            meter,
            file_len,
            max_member_bytes,
            last: None,
            done: false,
        })
    }

    /// The next member webdataset would group, skipping the others (non-regular members,
    /// metadata, names without a key). `take` decides from its head what to do with it: with
    /// [`Take::Read`] its data comes back; after [`Take::Stop`] (or an error) the stream is
    /// over.
    pub(super) fn next(
        &mut self,
        take: impl FnOnce(&Head) -> Result<Take>,
    ) -> Result<Option<(Head, Option<Vec<u8>>)>> {
        if self.done {
            return Ok(None);
        }
        let result = self.next_inner(take);
        if result.is_err() {
            self.done = true;
        }
        result
    }

    fn next_inner(
        &mut self,
        take: impl FnOnce(&Head) -> Result<Take>,
    ) -> Result<Option<(Head, Option<Vec<u8>>)>> {
        let MemberStream {
            tar,
            input,
            meter,
            file_len,
            max_member_bytes,
            last,
            done,
        } = self;
        loop {
            let start = meter.pos.load(Relaxed);
            meter
                .limit
                .store(start.saturating_add(HEADER_LIMIT), Relaxed);
            let mut archive = tar::Archive::new(&mut *input);
            let mut entries = archive
                .entries()
                .map_err(|e| header_error(tar, meter, last, start, e))?;
            let mut entry = match entries.next() {
                Some(Ok(entry)) => entry,
                Some(Err(e)) => return Err(header_error(tar, meter, last, start, e)),
                None => {
                    *done = true;
                    if meter.pos.load(Relaxed) == 0 {
                        return Err(Error::corrupt(&*tar, "empty file (no tar header)"));
                    }
                    check_trailer(tar, input)?;
                    return Ok(None);
                }
            };
            meter.limit.store(u64::MAX, Relaxed);
            let data_start = meter.pos.load(Relaxed);
            let size = entry.size();
            let name = String::from_utf8_lossy(cut_at_nul(&entry.path_bytes())).into_owned();
            let path = member_path(tar, &name);
            if entry.header().entry_type().is_gnu_sparse() {
                let detail = "a GNU sparse member (webdataset reads it expanded; this importer \
                              does not expand sparse members)";
                return Err(Error::unsupported(path, detail));
            }
            // The stream is at the member's data, as the next header is found from here.
            if start.saturating_add(entry.raw_file_position()) != data_start {
                let detail = format!("the data of member {name:?} is not where its header ends");
                return Err(Error::corrupt(path, detail));
            }
            if let Some(len) = *file_len
                && data_start.saturating_add(size) > len
            {
                let detail = format!(
                    "member {name:?} claims {size} bytes from offset {data_start}, past the end \
                     of the {len}-byte file"
                );
                return Err(Error::corrupt(path, detail));
            }
            let head = classify(&mut entry, size).map_err(|r| r.into_error(&path, meter))?;
            let Some(head) = head else {
                io::copy(&mut entry, &mut io::sink()).map_err(|e| data_error(&path, meter, e))?;
                drop(entry);
                finish_member(input, &path, data_start, size)?;
                *last = Some(name);
                continue;
            };
            let data = match take(&head)? {
                Take::Stop => {
                    *done = true;
                    return Ok(Some((head, None)));
                }
                Take::Skip => {
                    io::copy(&mut entry, &mut io::sink())
                        .map_err(|e| data_error(&path, meter, e))?;
                    None
                }
                Take::Read => {
                    if size > *max_member_bytes {
                        let detail = format!(
                            "member {name:?} is {size} bytes, over max_member_bytes \
                             ({max_member_bytes})"
                        );
                        return Err(Error::unsupported(path, detail));
                    }
                    // An uncompressed archive holds the `size` bytes claimed (checked above);
                    // a gzip stream may not: grow as they come.
                    let capacity = if file_len.is_some() {
                        size
                    } else {
                        size.min(1 << 20)
                    };
                    let mut data = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
                    entry
                        .read_to_end(&mut data)
                        .map_err(|e| data_error(&path, meter, e))?;
                    Some(data)
                }
            };
            drop(entry);
            finish_member(input, &path, data_start, size)?;
            *last = Some(name);
            return Ok(Some((head, data)));
        }
    }
}

/// Checks that a member's data was all there and reads its padding to the next block.
fn finish_member(input: &mut Metered, path: &Path, data_start: u64, size: u64) -> Result<()> {
    let read = input.meter.pos.load(Relaxed) - data_start;
    if read != size {
        let detail =
            format!("truncated: the member claims {size} bytes, the archive ends after {read}");
        return Err(Error::corrupt(path, detail));
    }
    let padding = (BLOCK - size % BLOCK) % BLOCK;
    let meter = Arc::clone(&input.meter);
    let skipped = io::copy(&mut input.by_ref().take(padding), &mut io::sink())
        .map_err(|e| data_error(path, &meter, e))?;
    if skipped != padding {
        return Err(Error::corrupt(
            path,
            "truncated: the archive ends in the padding after this member",
        ));
    }
    Ok(())
}

/// A gzip-compressed archive followed by a second gzip member: Python's `tarfile` (and so
/// webdataset) reads the first member only and silently drops the rest; refused by name.
fn check_trailer(tar: &Path, input: &mut Metered) -> Result<()> {
    let Source::Gzip(gzip) = &mut input.source else {
        return Ok(());
    };
    // The rest of the first member (tar's padding to a record), within bounds: past them, or
    // if that rest is damaged, nothing more is looked at (webdataset reads none of it).
    match io::copy(&mut gzip.by_ref().take(TRAILER_LIMIT + 1), &mut io::sink()) {
        Ok(n) if n <= TRAILER_LIMIT => {}
        _ => return Ok(()),
    }
    let rest = gzip.get_mut().fill_buf().map_err(|e| Error::io(tar, e))?;
    if rest.starts_with(b"\x1f\x8b") {
        let detail = "a second gzip member follows the first: webdataset reads only the first \
                      and silently drops the rest (recompress the tar as one gzip stream)";
        return Err(Error::unsupported(tar, detail));
    }
    Ok(())
}

/// Why a member is refused, before the member's path is attached.
enum Refusal {
    Corrupt(String),
    Unsupported(String),
    Io(io::Error),
}

impl Refusal {
    fn into_error(self, path: &Path, meter: &Meter) -> Error {
        match self {
            Refusal::Corrupt(detail) => Error::corrupt(path, detail),
            Refusal::Unsupported(detail) => Error::unsupported(path, detail),
            Refusal::Io(e) => data_error(path, meter, e),
        }
    }
}

/// What webdataset makes of a member: `Some` for one it groups, `None` for one it skips.
fn classify<R: Read>(entry: &mut tar::Entry<'_, R>, size: u64) -> Result<Option<Head>, Refusal> {
    let kind = entry.header().entry_type().as_byte();
    match kind {
        // REGTYPE, AREGTYPE, CONTTYPE: tarfile's REGULAR_TYPES but GNUTYPE_SPARSE.
        b'0' | b'\0' | b'7' => regular(entry, kind),
        b'X' => Err(Refusal::Unsupported(
            "a Solaris extended header (type X)".into(),
        )),
        // Links, devices, directories, FIFOs: Python's tarfile does not skip data after these
        // (`_proc_builtin`), the tar crate does: a size makes the two read different members.
        b'1'..=b'6' if size > 0 => Err(Refusal::Corrupt(format!(
            "a member of type {:?} with {size} bytes of data (Python's tarfile would read \
             them as the next header)",
            char::from(kind)
        ))),
        b'g' => {
            if size > HEADER_LIMIT {
                let detail = format!("a global pax header of {size} bytes (over {HEADER_LIMIT})");
                return Err(Refusal::Unsupported(detail));
            }
            let pax = pax_keys(entry)?;
            if let Some(key) = pax
                .iter()
                .find(|k| *k == "path" || *k == "size" || k.starts_with("GNU.sparse."))
            {
                return Err(Refusal::Unsupported(format!(
                    "a global pax header setting {key:?}, which Python's tarfile applies to \
                     every later member"
                )));
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// A regular member: skipped as metadata or for want of a key, or grouped.
fn regular<R: Read>(entry: &mut tar::Entry<'_, R>, kind: u8) -> Result<Option<Head>, Refusal> {
    // tarfile's frombuf: "Old V7 tar format represents a directory as a regular file with a
    // trailing slash" (its own name field, before any long name).
    if kind == b'\0' && cut_at_nul(&entry.header().as_old().name).ends_with(b"/") {
        return Ok(None);
    }
    let pax = pax_keys(entry)?;
    if let Some(key) = pax.iter().find(|k| k.starts_with("GNU.sparse.")) {
        return Err(Refusal::Unsupported(format!("a pax sparse member ({key})")));
    }
    let raw = entry.path_bytes();
    let mut name = cut_at_nul(&raw);
    if pax.iter().any(|k| k == "path") {
        // tarfile's _apply_pax_info: `value.rstrip("/")` for a pax path.
        while let Some(stripped) = name.strip_suffix(b"/") {
            name = stripped;
        }
    }
    let lossy = String::from_utf8_lossy(name);
    if lossy.contains('\n') {
        return Err(Refusal::Unsupported("a member name with a newline".into()));
    }
    if is_meta(&lossy) {
        return Ok(None);
    }
    let Some((key, ext)) = base_plus_ext(&lossy) else {
        return Ok(None);
    };
    if std::str::from_utf8(name).is_err() {
        return Err(Refusal::Unsupported(
            "a member name that is not UTF-8".into(),
        ));
    }
    Ok(Some(Head {
        name: lossy.to_string(),
        key: key.to_owned(),
        ext: ext.to_lowercase(),
    }))
}

/// The keys of the pax records of `entry` (its own, for a pax header; else the ones before it).
fn pax_keys<R: Read>(entry: &mut tar::Entry<'_, R>) -> Result<Vec<String>, Refusal> {
    let Some(records) = entry.pax_extensions().map_err(Refusal::Io)? else {
        return Ok(Vec::new());
    };
    let mut keys = Vec::new();
    for record in records {
        let record = record.map_err(|e| Refusal::Corrupt(format!("a bad pax record: {e}")))?;
        keys.push(String::from_utf8_lossy(record.key_bytes()).into_owned());
    }
    Ok(keys)
}

/// A name field up to its first NUL, as tarfile's `nts` reads it.
fn cut_at_nul(bytes: &[u8]) -> &[u8] {
    bytes
        .iter()
        .position(|&b| b == 0)
        .map_or(bytes, |nul| &bytes[..nul])
}

/// An error reading a header, named by the file, its offset and the member before it.
fn header_error(
    tar: &Path,
    meter: &Meter,
    last: &Option<String>,
    start: u64,
    e: io::Error,
) -> Error {
    let after = last
        .as_ref()
        .map(|name| format!(", after member {name:?}"))
        .unwrap_or_default();
    if meter.tripped.load(Relaxed) {
        let detail = format!(
            "the headers at offset {start}{after} take more than {HEADER_LIMIT} bytes \
             (a GNU long name or pax records)"
        );
        return Error::corrupt(tar, detail);
    }
    if meter.io_error.load(Relaxed) {
        return Error::io(tar, e);
    }
    Error::corrupt(
        tar,
        format!("a bad tar header at offset {start}{after}: {e}"),
    )
}

/// An error reading a member's data.
fn data_error(path: &Path, meter: &Meter, e: io::Error) -> Error {
    if meter.io_error.load(Relaxed) {
        return Error::io(path, e);
    }
    Error::corrupt(path, format!("unreadable data: {e}"))
}
