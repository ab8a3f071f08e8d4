//! `UringIo` (buffered and `O_DIRECT`): the conformance kit and the edge cases of batches on a
//! ring (queue refills, short reads, alignment, file systems without direct IO).
#![allow(clippy::cast_possible_truncation)] // test sizes are small

use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::uring::{refused_for_tests, ring_support};
use crate::conformance::{self, DirFixture};
use crate::{Backend, CoalescePolicy, Error, SyncReader, UringIo};

/// Whether `test` can run: io_uring is allowed here. A kernel or sandbox that refuses it
/// (seccomp, `kernel.io_uring_disabled`, an old kernel) skips the test with a `skipped:`
/// line, except under `GUIDELOOM_CI=1`, where CI's machine must have it.
fn allowed(test: &str) -> bool {
    match ring_support() {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
                "GUIDELOOM_CI=1 but io_uring is refused here ({why})"
            );
            println!("skipped: {test}: io_uring refused here ({why})");
            false
        }
    }
}

/// A file of `len` bytes where byte `i` is a hash of `i`, so misplaced bytes show.
fn patterned(dir: &Path, len: usize) -> (PathBuf, Vec<u8>) {
    let data: Vec<u8> = (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect();
    let path = dir.join("patterned.bin");
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

fn expect(data: &[u8], ranges: &[Range<u64>], got: &[Bytes]) {
    assert_eq!(got.len(), ranges.len());
    for (r, b) in ranges.iter().zip(got) {
        assert_eq!(
            &b[..],
            &data[r.start as usize..r.end as usize],
            "range {r:?}"
        );
    }
}

/// Both modes, with a shallow queue and no merging so a batch refills the queue many times.
fn modes() -> Vec<UringIo> {
    let shallow = UringIo::new()
        .with_queue_depth(3)
        .with_coalesce(CoalescePolicy::NEVER);
    vec![
        UringIo::new(),
        UringIo::new().direct(),
        shallow,
        shallow.direct(),
    ]
}

fn assert_full_pass(report: &conformance::ConformanceReport) {
    assert!(report.skipped.is_empty(), "{report}");
    assert_eq!(
        report.passed.len(),
        2 * conformance::CHECKS.len(),
        "{report}"
    );
}

#[test]
fn uring_io_passes_the_kit() {
    if !allowed("uring_io_passes_the_kit") {
        return;
    }
    assert!(UringIo::new().is_supported(), "io_uring_setup refused here");
    let dir = tempfile::tempdir().unwrap();
    let report = conformance::run_all(&UringIo::new(), &DirFixture::new(dir.path())).unwrap();
    assert_full_pass(&report);
}

#[test]
fn uring_io_direct_passes_the_kit() {
    if !allowed("uring_io_direct_passes_the_kit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report =
        conformance::run_all(&UringIo::new().direct(), &DirFixture::new(dir.path())).unwrap();
    assert_full_pass(&report);
}

#[test]
fn shallow_queues_without_merging_pass_the_kit() {
    if !allowed("shallow_queues_without_merging_pass_the_kit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for b in &modes()[2..] {
        conformance::run_sync(b, &DirFixture::new(dir.path())).unwrap();
    }
}

#[test]
fn batches_larger_than_the_queue_read_every_range() {
    if !allowed("batches_larger_than_the_queue_read_every_range") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = patterned(dir.path(), 3 << 20);
    // 300 ranges, unsorted, overlapping, some empty, some unaligned, one at the very end.
    let mut ranges: Vec<Range<u64>> = (0..300u64)
        .map(|i| {
            let start = (i * 7919 * 37) % (3 << 20);
            let len = [0, 1, 511, 4096, 4097, 70_000][i as usize % 6];
            start..(start + len).min(3 << 20)
        })
        .collect();
    ranges.push((3 << 20) - 3..3 << 20);
    for b in modes() {
        let r = b.open(&path).unwrap();
        expect(&data, &ranges, &r.read_ranges(&ranges).unwrap());
        let single = r.read(4095, 2).unwrap();
        assert_eq!(&single[..], &data[4095..4097], "{b:?}");
    }
}

#[test]
fn arena_sizes_do_not_change_the_bytes() {
    if !allowed("arena_sizes_do_not_change_the_bytes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = patterned(dir.path(), 1 << 20);
    let ranges = [10..5000, 900_000..1_000_000, 3..4, 200_000..700_000];
    for b in modes() {
        for arena in [0, 4096, 64 << 20] {
            let r = b.with_batch_arena(arena).open(&path).unwrap();
            let first = r.read_ranges(&ranges).unwrap();
            let second = r.read_ranges(&ranges).unwrap(); // while `first` is held
            expect(&data, &ranges, &first);
            expect(&data, &ranges, &second);
        }
    }
}

#[test]
fn a_file_that_shrank_is_a_short_read_naming_it() {
    if !allowed("a_file_that_shrank_is_a_short_read_naming_it") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = patterned(dir.path(), 100_000);
    for b in modes() {
        let r = b.open(&path).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(50_000).unwrap();
        let err = r.read_ranges(&[0..10, 40_000..60_000]).unwrap_err();
        assert!(
            matches!(&err, Error::ShortRead { location, offset: 40_000, requested: 20_000, got: 10_000 }
                if location.ends_with("patterned.bin")),
            "{b:?}: {err:?}"
        );
        let err = r.read(60_000, 1).unwrap_err();
        assert!(
            matches!(err, Error::ShortRead { got: 0, .. }),
            "{b:?}: {err:?}"
        );
        std::fs::write(&path, patterned(dir.path(), 100_000).1).unwrap();
    }
}

/// tmpfs accepts `O_DIRECT` since Linux 6.6 but reads through the page cache: the direct
/// mode refuses it with `Unsupported`, naming the file, and the buffered mode reads it.
#[test]
fn tmpfs_refuses_the_direct_mode_with_unsupported() {
    if !allowed("tmpfs_refuses_the_direct_mode_with_unsupported") {
        return;
    }
    let shm = Path::new("/dev/shm");
    if !is_tmpfs(shm) {
        eprintln!("no tmpfs at /dev/shm: skipped");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let path = dir.path().join("on-tmpfs");
    std::fs::write(&path, b"hello").unwrap();
    let err = UringIo::new().direct().open(&path).unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { backend: "UringIo", operation: "O_DIRECT reads", reason }
            if reason.contains("on-tmpfs") && reason.contains("tmpfs")),
        "{err:?}"
    );
    let r = UringIo::new().open(&path).unwrap();
    assert_eq!(&r.read_ranges(&[1..4, 0..0]).unwrap()[0][..], b"ell");
}

#[allow(unsafe_code)]
fn is_tmpfs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `statfs` is plain data; zeroes are a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `fs` is valid for writes for the call.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut fs) };
    rc == 0 && fs.f_type == libc::TMPFS_MAGIC
}

#[test]
fn missing_files_and_directories_are_typed_errors() {
    if !allowed("missing_files_and_directories_are_typed_errors") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for b in modes() {
        let err = b.open(&dir.path().join("nope")).unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
        let err = b.open(&dir.path().to_path_buf()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::NotRegularFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{b:?}: {err:?}"
        );
    }
}

/// Pages of the file at `path` in the page cache (`mincore` over a fresh mapping).
#[allow(unsafe_code)]
fn resident_pages(path: &Path) -> usize {
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: a read-only mapping of a test file nobody modifies meanwhile, used for `mincore`.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let mut vec = vec![0u8; map.len().div_ceil(4096)];
    // SAFETY: `map` is a live mapping of `map.len()` bytes; `vec` holds a byte per page.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut _, map.len(), vec.as_mut_ptr()) };
    assert_eq!(rc, 0);
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[allow(unsafe_code)]
fn drop_pages(path: &Path) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap();
    file.sync_all().unwrap();
    // SAFETY: a plain system call on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

/// The direct mode really bypasses the page cache: after it reads the whole file, no page of it
/// is cached; the buffered mode's reads of the same ranges leave them cached.
#[test]
fn direct_reads_leave_the_page_cache_alone() {
    if !allowed("direct_reads_leave_the_page_cache_alone") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = patterned(dir.path(), 2 << 20);
    drop_pages(&path);
    if resident_pages(&path) != 0 {
        eprintln!("posix_fadvise(DONTNEED) left pages cached here: skipped");
        return;
    }
    let ranges: Vec<Range<u64>> = (0..32u64)
        .map(|i| i * 65_536 + 3..i * 65_536 + 60_000)
        .collect();
    let direct = UringIo::new().direct().open(&path).unwrap();
    expect(&data, &ranges, &direct.read_ranges(&ranges).unwrap());
    assert_eq!(&direct.read(0, data.len() as u64).unwrap()[..], &data[..]);
    assert_eq!(
        resident_pages(&path),
        0,
        "O_DIRECT reads went through the page cache"
    );
    let buffered = UringIo::new().open(&path).unwrap();
    expect(&data, &ranges, &buffered.read_ranges(&ranges).unwrap());
    assert!(
        resident_pages(&path) >= 32 * 14,
        "buffered reads cached nothing"
    );
}

#[test]
fn a_refused_io_uring_is_unsupported_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = patterned(dir.path(), 4096);
    refused_for_tests("io_uring_setup: ENOSYS (test)", || {
        for io in [UringIo::new(), UringIo::new().direct()] {
            assert!(!io.is_supported());
            let caps = io.capabilities();
            assert!(
                !caps.sync && !caps.r#async && !caps.batched_ranges,
                "{caps:?}"
            );
            let err = match io.open(&path) {
                Ok(_) => panic!("a refused ring must not open {path:?}"),
                Err(e) => e,
            };
            assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains("ENOSYS (test)") && text.contains("PreadIo"),
                "{text}"
            );
        }
    });
    // The refusal was this closure's only: the real probe answers again.
    assert_eq!(UringIo::new().is_supported(), ring_support().is_ok());
}
