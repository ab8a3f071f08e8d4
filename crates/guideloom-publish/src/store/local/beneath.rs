//! Confined file-system access beneath a local root (unix).
//!
//! The root directory is opened once by the path the caller gave (its own ancestors are the
//! caller's business). Every component **below** it is opened relative to its parent's
//! descriptor with `O_NOFOLLOW`, so neither a symbolic link nor a renamed directory can lead a
//! read or a write outside the root, and a link swapped in by another process between two
//! calls is refused rather than followed: the check *is* the open, there is no window between
//! them. Only regular files are opened for I/O: FIFOs, devices and sockets are recognised with
//! an `fstatat` that does not open them and refused at once ([`Error::RefusedFile`]), so a
//! FIFO planted where a control object should be cannot hang a reader.
//!
//! With `follow` set (the explicit opt-in `StoreOptions::follow_symlinks`) symbolic links
//! beneath the root are followed; everything else still holds.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, fsync, linkat, unlinkat};

use crate::error::{Error, Result};

/// Most directory levels a listing descends (a guard against link cycles when following
/// symbolic links is opted in; keys are far shallower).
const MAX_DEPTH: usize = 32;

/// What kind of file an entry is, from its mode bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Regular,
    Directory,
    Symlink,
    Other(&'static str),
}

impl Kind {
    fn of(stat: &FileStat) -> Kind {
        let fmt = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        if fmt == SFlag::S_IFREG {
            Kind::Regular
        } else if fmt == SFlag::S_IFDIR {
            Kind::Directory
        } else if fmt == SFlag::S_IFLNK {
            Kind::Symlink
        } else if fmt == SFlag::S_IFIFO {
            Kind::Other("a FIFO (named pipe)")
        } else if fmt == SFlag::S_IFCHR {
            Kind::Other("a character device")
        } else if fmt == SFlag::S_IFBLK {
            Kind::Other("a block device")
        } else if fmt == SFlag::S_IFSOCK {
            Kind::Other("a socket")
        } else {
            Kind::Other("a file of unknown kind")
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Regular => "a regular file",
            Kind::Directory => "a directory",
            Kind::Symlink => "a symbolic link",
            Kind::Other(what) => what,
        }
    }
}

/// One directory entry, as `lstat` (or `stat`, when following links) sees it.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) size: u64,
    pub(super) modified: SystemTime,
}

/// A regular file opened for reading, with the size `fstat` reported.
#[derive(Debug)]
pub(super) struct Regular {
    pub(super) file: File,
    pub(super) size: u64,
}

/// Whether a missing directory is created, and whether its parent is then fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Create {
    No,
    Yes { durable: bool },
}

/// A directory at or beneath a root, held open by descriptor.
#[derive(Debug)]
pub(super) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    follow: bool,
}

fn refused(path: PathBuf, kind: Kind, expected: &'static str) -> Error {
    Error::RefusedFile {
        path,
        kind: kind.describe(),
        expected,
    }
}

fn os(path: &Path, errno: Errno) -> Error {
    Error::io(path, std::io::Error::from(errno))
}

fn modified(stat: &FileStat) -> SystemTime {
    let secs = u64::try_from(stat.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::new(secs, nanos.min(999_999_999))
}

fn dir_flags(follow: bool) -> OFlag {
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    flags
}

impl Dir {
    /// Opens the root directory `root` (its path resolved as given). `None` if it does not
    /// exist and `create` is false; created with its missing ancestors otherwise.
    pub(super) fn root(root: &Path, create: bool, follow: bool) -> Result<Option<Dir>> {
        let open = || {
            nix::fcntl::open(
                root,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        };
        let fd = match open() {
            Ok(fd) => fd,
            Err(Errno::ENOENT) if create => {
                std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
                open().map_err(|e| os(root, e))?
            }
            Err(Errno::ENOENT) => return Ok(None),
            Err(Errno::ENOTDIR) => {
                let kind = std::fs::metadata(root)
                    .map(|m| {
                        if m.is_file() {
                            "a regular file"
                        } else {
                            "not a directory"
                        }
                    })
                    .unwrap_or("not a directory");
                return Err(Error::RefusedFile {
                    path: root.to_path_buf(),
                    kind,
                    expected: "a directory as its root",
                });
            }
            Err(e) => return Err(os(root, e)),
        };
        Ok(Some(Dir {
            fd,
            path: root.to_path_buf(),
            follow,
        }))
    }

    /// The path of `name` in this directory (for messages and logs).
    pub(super) fn child_path(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn stat_entry(&self, name: &str) -> Result<Option<FileStat>> {
        let flags = if self.follow {
            AtFlags::empty()
        } else {
            AtFlags::AT_SYMLINK_NOFOLLOW
        };
        match fstatat(self.fd.as_fd(), name, flags) {
            Ok(stat) => Ok(Some(stat)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(os(&self.child_path(name), e)),
        }
    }

    /// The entry `name` (not following a link unless opted in), or `None` if absent.
    pub(super) fn stat(&self, name: &str) -> Result<Option<Entry>> {
        Ok(self.stat_entry(name)?.map(|stat| Entry {
            name: name.to_owned(),
            kind: Kind::of(&stat),
            size: u64::try_from(stat.st_size).unwrap_or(0),
            modified: modified(&stat),
        }))
    }

    /// The subdirectory `name`: `None` if absent and not created; [`Error::RefusedFile`] if
    /// it is a symbolic link (unless following) or not a directory.
    pub(super) fn subdir(&self, name: &str, create: Create) -> Result<Option<Dir>> {
        let path = self.child_path(name);
        loop {
            match openat(self.fd.as_fd(), name, dir_flags(self.follow), Mode::empty()) {
                Ok(fd) => {
                    return Ok(Some(Dir {
                        fd,
                        path,
                        follow: self.follow,
                    }));
                }
                Err(Errno::ENOENT) => match create {
                    Create::No => return Ok(None),
                    Create::Yes { durable } => {
                        match mkdirat(self.fd.as_fd(), name, Mode::from_bits_truncate(0o777)) {
                            Ok(()) => {
                                if durable {
                                    self.sync()?;
                                }
                            }
                            // A concurrent writer made it: open it on the next turn.
                            Err(Errno::EEXIST) => {}
                            Err(e) => return Err(os(&path, e)),
                        }
                    }
                },
                Err(Errno::ELOOP | Errno::ENOTDIR) => {
                    let kind = self
                        .stat_entry(name)?
                        .map_or(Kind::Other("not a directory"), |s| Kind::of(&s));
                    return Err(refused(path, kind, "real directories"));
                }
                Err(e) => return Err(os(&path, e)),
            }
        }
    }

    /// Descends through `components` (each a plain name, never `.` or `..`).
    pub(super) fn descend(self, components: &[&str], create: Create) -> Result<Option<Dir>> {
        let mut dir = self;
        for component in components {
            if component.is_empty() || *component == "." || *component == ".." {
                return Err(Error::invalid(format!(
                    "path component {component:?} below {} is not a plain name",
                    dir.path.display()
                )));
            }
            match dir.subdir(component, create)? {
                Some(next) => dir = next,
                None => return Ok(None),
            }
        }
        Ok(Some(dir))
    }

    /// Opens the regular file `name` for reading: `None` if absent; [`Error::RefusedFile`] if
    /// it is anything else (checked with `fstatat` before opening, so a FIFO or a device is
    /// never opened, and again with `fstat` on the descriptor, so a swap in between is
    /// caught).
    pub(super) fn open_regular(&self, name: &str) -> Result<Option<Regular>> {
        let path = self.child_path(name);
        let Some(before) = self.stat_entry(name)? else {
            return Ok(None);
        };
        let kind = Kind::of(&before);
        if kind != Kind::Regular {
            return Err(refused(path, kind, "regular files"));
        }
        let mut flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        if !self.follow {
            flags |= OFlag::O_NOFOLLOW;
        }
        let fd = match openat(self.fd.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(None),
            Err(Errno::ELOOP) => return Err(refused(path, Kind::Symlink, "regular files")),
            Err(Errno::ENXIO) => {
                return Err(refused(path, Kind::Other("a socket"), "regular files"));
            }
            Err(e) => return Err(os(&path, e)),
        };
        let after = fstat(fd.as_fd()).map_err(|e| os(&path, e))?;
        let kind = Kind::of(&after);
        if kind != Kind::Regular {
            return Err(refused(path, kind, "regular files"));
        }
        Ok(Some(Regular {
            file: File::from(fd),
            size: u64::try_from(after.st_size).unwrap_or(0),
        }))
    }

    /// Creates `name` exclusively for writing (`O_CREAT | O_EXCL | O_NOFOLLOW`); `None` if an
    /// entry of that name (of any kind, links included) already exists.
    pub(super) fn create_new(&self, name: &str) -> Result<Option<File>> {
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match openat(
            self.fd.as_fd(),
            name,
            flags,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(Errno::EEXIST) => Ok(None),
            Err(e) => Err(os(&self.child_path(name), e)),
        }
    }

    /// Opens (creating if needed) the regular file `name` for reading and writing, never
    /// through a link: the lock files of compare-and-swap.
    pub(super) fn open_or_create(&self, name: &str) -> Result<File> {
        let path = self.child_path(name);
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match openat(
            self.fd.as_fd(),
            name,
            flags,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => return Err(refused(path, Kind::Symlink, "regular files")),
            Err(e) => return Err(os(&path, e)),
        };
        let stat = fstat(fd.as_fd()).map_err(|e| os(&path, e))?;
        let kind = Kind::of(&stat);
        if kind != Kind::Regular {
            return Err(refused(path, kind, "regular files"));
        }
        Ok(File::from(fd))
    }

    /// Hard-links `from` to `to` within this directory (links are not followed): `false`
    /// if `to` exists.
    pub(super) fn link(&self, from: &str, to: &str) -> Result<bool> {
        match linkat(self.fd.as_fd(), from, self.fd.as_fd(), to, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::EEXIST) => Ok(false),
            Err(e) => Err(os(&self.child_path(to), e)),
        }
    }

    /// Renames `from` to `to` within this directory, replacing `to`.
    pub(super) fn rename(&self, from: &str, to: &str) -> Result<()> {
        renameat(self.fd.as_fd(), from, self.fd.as_fd(), to)
            .map_err(|e| os(&self.child_path(to), e))
    }

    /// Removes the file `name`: `false` if it was already gone.
    pub(super) fn remove(&self, name: &str) -> Result<bool> {
        match unlinkat(self.fd.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(os(&self.child_path(name), e)),
        }
    }

    /// fsyncs the directory (its entries are durable afterwards).
    pub(super) fn sync(&self) -> Result<()> {
        fsync(self.fd.as_fd()).map_err(|e| os(&self.path, e))
    }

    /// The entries of this directory (`.` and `..` left out, names that are not UTF-8
    /// skipped), each as [`stat`](Self::stat) sees it.
    pub(super) fn entries(&self) -> Result<Vec<Entry>> {
        let dup = self.fd.try_clone().map_err(|e| Error::io(&self.path, e))?;
        let mut listing = nix::dir::Dir::from_fd(dup).map_err(|e| os(&self.path, e))?;
        let mut names = Vec::new();
        for entry in listing.iter() {
            let entry = entry.map_err(|e| os(&self.path, e))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name != "." && name != ".." {
                names.push(name.to_owned());
            }
        }
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            // An entry removed since the listing is skipped.
            if let Some(entry) = self.stat(&name)? {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// Calls `f(key, dir, entry)` for every entry that is not a directory, recursively;
    /// keys are `/`-joined below `prefix`. Subdirectories that are symbolic links are not
    /// entered (unless following links is opted in); they are passed to `f` as entries of
    /// kind [`Kind::Symlink`] like any other link.
    pub(super) fn walk(
        &self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &Dir, &Entry) -> Result<()>,
    ) -> Result<()> {
        self.walk_at(prefix, 0, f)
    }

    fn walk_at(
        &self,
        prefix: &str,
        depth: usize,
        f: &mut dyn FnMut(&str, &Dir, &Entry) -> Result<()>,
    ) -> Result<()> {
        for entry in self.entries()? {
            let key = if prefix.is_empty() {
                entry.name.clone()
            } else {
                format!("{prefix}/{}", entry.name)
            };
            if entry.kind == Kind::Directory {
                if depth >= MAX_DEPTH {
                    tracing::warn!(path = %self.child_path(&entry.name).display(), "directory nesting too deep; not listed");
                    continue;
                }
                match self.subdir(&entry.name, Create::No) {
                    Ok(Some(sub)) => sub.walk_at(&key, depth + 1, f)?,
                    Ok(None) => {}
                    // Replaced by something else since the listing: not a directory now.
                    Err(Error::RefusedFile { .. }) => {}
                    Err(e) => return Err(e),
                }
            } else {
                f(&key, self, &entry)?;
            }
        }
        Ok(())
    }
}
