//! Bytes on disk: the shared consumer, the raw-`pread` ceiling read, page-cache warming and
//! the directory bench files go to.

use std::fs::File;
use std::io::Read;
#[cfg(unix)]
use std::ops::Range;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// The page size the shared consumer ([`touch`]) steps by.
pub const PAGE: usize = 4096;

/// Buffer size of sequential reads (warming, `ceiling_read`): 4 MiB.
pub const CHUNK: usize = 4 << 20;

/// The consumer every bench shares: one byte per 4 KiB page plus the last byte, so a
/// zero-copy reader is credited for the copy it saves but cannot win by never touching the
/// bytes it hands out.
///
/// ```
/// assert_eq!(guideloom_benchkit::touch(&[]), 0);
/// assert_eq!(guideloom_benchkit::touch(&[2, 9, 5]), 2 + 5);
/// ```
pub fn touch(bytes: &[u8]) -> u64 {
    let pages: u64 = bytes.iter().step_by(PAGE).map(|&b| u64::from(b)).sum();
    pages + bytes.last().map_or(0, |&b| u64::from(b))
}

/// [`touch`] over every buffer of a batch, summed.
///
/// ```
/// let batch = vec![vec![1u8, 2], vec![3u8]];
/// assert_eq!(guideloom_benchkit::touch_all(&batch), (1 + 2) + (3 + 3));
/// ```
pub fn touch_all<B: AsRef<[u8]>>(bufs: &[B]) -> u64 {
    bufs.iter().map(|b| touch(b.as_ref())).sum()
}

/// The ceiling read: raw `pread` (`FileExt::read_exact_at`) of `range` into a **fresh**
/// `Vec`, as a reader hands out an owned buffer per read.
///
/// # Panics
/// If the read fails or the file ends before `range.end`.
#[cfg(unix)]
pub fn pread(file: &File, range: Range<u64>) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; crate::us(range.end - range.start)];
    file.read_exact_at(&mut buf, range.start).expect("pread");
    buf
}

/// Reads the file at `path` sequentially, [`CHUNK`] at a time, so it is in the page cache
/// (files idle for about a minute get paged out on the bench machines).
pub fn warm_file(path: &Path) {
    let mut buf = vec![0u8; CHUNK];
    read_through(path, &mut buf);
}

/// [`warm_file`] for every file directly under `dir` ([`files`]).
pub fn warm_dir(dir: &Path) {
    let mut buf = vec![0u8; CHUNK];
    for path in files(dir) {
        read_through(&path, &mut buf);
    }
}

fn read_through(path: &Path, buf: &mut [u8]) {
    let mut file =
        File::open(path).unwrap_or_else(|e| panic!("open {} to warm it: {e}", path.display()));
    while file
        .read(buf)
        .unwrap_or_else(|e| panic!("warm {}: {e}", path.display()))
        > 0
    {}
}

/// The regular files directly under `dir`, in name order.
///
/// # Panics
/// If `dir` cannot be listed.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// Where a bench puts its files: `$GUIDELOOM_BENCH_DIR` (joined with a bench's own
/// subdirectory, if it asks for one), else a fresh temporary directory removed on drop.
#[derive(Debug)]
pub struct BenchDir {
    path: PathBuf,
    _tmp: Option<TempDir>,
}

impl BenchDir {
    /// The directory of `GUIDELOOM_BENCH_DIR` joined with `sub`, or a fresh temporary one
    /// (`sub` is not used there: the directory is the bench's own already). Nothing is
    /// created under `GUIDELOOM_BENCH_DIR`; the bench does that.
    ///
    /// # Panics
    /// If no temporary directory can be created.
    pub fn from_env(sub: Option<&str>) -> BenchDir {
        BenchDir::new(
            std::env::var_os("GUIDELOOM_BENCH_DIR").map(PathBuf::from),
            sub,
        )
    }

    fn new(configured: Option<PathBuf>, sub: Option<&str>) -> BenchDir {
        match configured {
            Some(dir) => BenchDir {
                path: sub.map_or_else(|| dir.clone(), |s| dir.join(s)),
                _tmp: None,
            },
            None => {
                let tmp = tempfile::tempdir().expect("temp dir");
                BenchDir {
                    path: tmp.path().to_path_buf(),
                    _tmp: Some(tmp),
                }
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Minor page faults of this process so far (`getrusage(RUSAGE_SELF).ru_minflt`), or `None`
/// where the platform does not say. Counts are what a shared noisy machine still measures
/// reliably: a reader that faults its buffers in again per batch shows here whatever the
/// clock does.
///
/// ```
/// if let Some(before) = guideloom_benchkit::minor_faults() {
///     let pages = vec![1u8; 1 << 20];
///     assert!(guideloom_benchkit::minor_faults().unwrap() >= before);
///     drop(pages);
/// }
/// ```
pub fn minor_faults() -> Option<u64> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{UsageWho, getrusage};
        let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
        u64::try_from(usage.minor_page_faults()).ok()
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_reads_one_byte_per_page_and_the_last() {
        let mut bytes = vec![0u8; 2 * PAGE + 10];
        bytes[0] = 1;
        bytes[1] = 100; // not on a page boundary: not read
        bytes[PAGE] = 2;
        bytes[2 * PAGE] = 3;
        bytes[2 * PAGE + 9] = 4;
        assert_eq!(touch(&bytes), 1 + 2 + 3 + 4);
        assert_eq!(
            touch(&[7]),
            14,
            "a one-byte buffer is both first page and last byte"
        );
    }

    #[cfg(unix)]
    #[test]
    fn pread_returns_exactly_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        std::fs::write(&path, (0u8..100).collect::<Vec<_>>()).unwrap();
        let file = File::open(&path).unwrap();
        assert_eq!(pread(&file, 10..14), [10, 11, 12, 13]);
        assert!(pread(&file, 5..5).is_empty());
        let past_end = std::panic::catch_unwind(|| pread(&file, 98..102));
        assert!(past_end.is_err(), "a short read must not pass");
    }

    #[test]
    fn files_lists_regular_files_in_name_order_and_warming_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.bin", "a.bin", "c.bin"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let names: Vec<_> = files(dir.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.bin", "b.bin", "c.bin"]);
        warm_dir(dir.path());
        warm_file(&dir.path().join("a.bin"));
    }

    #[test]
    fn bench_dir_uses_the_configured_directory_or_a_temporary_one() {
        let configured = BenchDir::new(Some(PathBuf::from("/some/where")), Some("format"));
        assert_eq!(configured.path(), Path::new("/some/where/format"));
        let plain = BenchDir::new(Some(PathBuf::from("/some/where")), None);
        assert_eq!(plain.path(), Path::new("/some/where"));

        let tmp = BenchDir::new(None, Some("format"));
        let path = tmp.path().to_path_buf();
        assert!(path.is_dir());
        assert!(!path.ends_with("format"));
        drop(tmp);
        assert!(!path.exists(), "the temporary directory is removed on drop");
    }
}
