//! Cold and warm batched reads: `UringIo` (buffered and `O_DIRECT`) beside `PreadIo` and a
//! raw `pread` ceiling, on the same ranges in the same run (feature `uring`, Linux).
//!
//! Run with `cargo bench -p guideloom-io --features uring --bench cold`.
//!
//! # What is measured
//! One file of random bytes (`GUIDELOOM_BENCH_COLD_MIB`, 256 MiB by default), synced to disk.
//! Per record size (4 KiB and 256 KiB, after a 16-byte header as in a shard, so ranges are not
//! block-aligned), every iteration reads the next batch of 64 random records of one seeded
//! sequence:
//! - `uring/cold/<size>`: before each iteration (outside the timed part) the file's pages are
//!   dropped from the page cache with `posix_fadvise(POSIX_FADV_DONTNEED)`; the bench checks
//!   with `mincore` once, at the start, that this leaves none resident and prints it;
//! - `uring/warm/<size>`: the file is read through once first and stays cached.
//!
//! Benches per group: `ceiling_pread` (raw `pread` of each range into a fresh `Vec`, one after
//! another: the ceiling every ratio divides by), `pread_io_sync` (`PreadIo::read_ranges`),
//! `uring_io_sync` (`UringIo::read_ranges`, queue depth 64), `uring_io_qd1_sync` (queue depth
//! 1: what the queue itself buys), `uring_direct_sync` (`UringIo::direct()`, depth 64) and
//! `uring_direct_qd1_sync`. Every buffer is touched once per 4 KiB page.
//!
//! The clock is the wall clock: cold reads wait for the disk, and CPU time would not count
//! the wait that the queue depth is there to overlap.

#[cfg(all(target_os = "linux", feature = "uring"))]
mod linux {
    use std::fs::File;
    use std::hint::black_box;
    use std::ops::Range;
    use std::os::fd::AsRawFd;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput, measurement::WallTime};
    use guideloom_benchkit::{
        BenchDir, env_u64, pread, random_records, touch, us, warm_file, write_random_file,
    };
    use guideloom_io::{Backend, PreadIo, SyncReader, UringIo};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const HEADER: u64 = 16;
    const BATCH: usize = 64;
    /// Batches in the seeded sequence each bench cycles through.
    const BATCHES: usize = 256;

    /// Drops every page of `file` from the page cache (clean pages only: the file is synced).
    #[allow(unsafe_code)]
    fn drop_cache(file: &File) {
        // SAFETY: a plain system call on an open descriptor; no memory is passed.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise(DONTNEED)");
    }

    /// Pages of `file` resident in the page cache, and its page count (`mincore`).
    #[allow(unsafe_code)]
    fn resident(file: &File) -> (usize, usize) {
        // SAFETY: the mapping is read only here, for `mincore`, while the bench's own file is
        // not modified.
        let map = unsafe { memmap2::Mmap::map(file) }.expect("mmap for mincore");
        let pages = map.len().div_ceil(4096);
        let mut vec = vec![0u8; pages];
        // SAFETY: `map` is a live mapping of `map.len()` bytes; `vec` holds one byte per page.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut _, map.len(), vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        (vec.iter().filter(|&&b| b & 1 != 0).count(), pages)
    }

    struct Subject {
        name: &'static str,
        reader: Box<dyn SyncReader>,
    }

    fn subjects(path: &PathBuf) -> Vec<Subject> {
        let mut out = vec![Subject {
            name: "pread_io_sync",
            reader: PreadIo::new().open(path).expect("PreadIo"),
        }];
        let modes = [
            ("uring_io_sync", UringIo::new()),
            ("uring_io_qd1_sync", UringIo::new().with_queue_depth(1)),
            ("uring_direct_sync", UringIo::new().direct()),
            (
                "uring_direct_qd1_sync",
                UringIo::new().direct().with_queue_depth(1),
            ),
        ];
        for (name, backend) in modes {
            match backend.open(path) {
                Ok(reader) => out.push(Subject { name, reader }),
                Err(e) => eprintln!("[cold] {name} skipped: {e}"),
            }
        }
        out
    }

    /// Times `iters` batches, dropping the cache before each one when `cold` (untimed).
    fn timed(
        iters: u64,
        cold: Option<&File>,
        batches: &[Vec<Range<u64>>],
        mut read: impl FnMut(&[Range<u64>]) -> u64,
    ) -> Duration {
        let mut total = Duration::ZERO;
        for batch in batches.iter().cycle().take(us(iters)) {
            if let Some(file) = cold {
                drop_cache(file);
            }
            let start = Instant::now();
            black_box(read(batch));
            total += start.elapsed();
        }
        total
    }

    fn group(
        g: &mut BenchmarkGroup<'_, WallTime>,
        file: &File,
        cold: bool,
        batches: &[Vec<Range<u64>>],
        subjects: &[Subject],
    ) {
        let cold_file = cold.then_some(file);
        g.bench_function("ceiling_pread", |b| {
            b.iter_custom(|iters| {
                timed(iters, cold_file, batches, |batch| {
                    batch.iter().map(|r| touch(&pread(file, r.clone()))).sum()
                })
            })
        });
        for s in subjects {
            g.bench_function(s.name, |b| {
                b.iter_custom(|iters| {
                    timed(iters, cold_file, batches, |batch| {
                        let got = s.reader.read_ranges(batch).expect("read_ranges");
                        got.iter().map(|buf| touch(buf)).sum()
                    })
                })
            });
        }
    }

    pub(crate) fn cold(c: &mut Criterion) {
        let mib = env_u64("GUIDELOOM_BENCH_COLD_MIB", 256);
        let dir = BenchDir::from_env(Some("cold"));
        std::fs::create_dir_all(dir.path()).expect("bench dir");
        let path = dir.path().join("cold.bin");
        let mut rng = StdRng::seed_from_u64(0xC01D);
        write_random_file(&path, mib << 20, &mut rng);
        let file = File::open(&path).expect("open");
        file.sync_all().expect("fsync");
        warm_file(&path);
        let before = resident(&file);
        drop_cache(&file);
        let after = resident(&file);
        eprintln!(
            "[cold] {} MiB file: {} of {} pages resident after a read-through, {} after posix_fadvise(DONTNEED)",
            mib, before.0, before.1, after.0
        );
        let subjects = subjects(&path);
        for (label, record) in [("4KiB", 4096u64), ("256KiB", 256 * 1024)] {
            let count = ((mib << 20) - HEADER) / record;
            let batches: Vec<Vec<Range<u64>>> = (0..BATCHES)
                .map(|_| random_records(&mut rng, HEADER, record, count, BATCH))
                .collect();
            for cold in [true, false] {
                let temp = if cold { "cold" } else { "warm" };
                if !cold {
                    warm_file(&path);
                }
                let mut g = c.benchmark_group(format!("uring/{temp}/{label}"));
                g.sampling_mode(SamplingMode::Flat);
                g.sample_size(10);
                g.throughput(Throughput::Bytes(record * BATCH as u64));
                group(&mut g, &file, cold, &batches, &subjects);
                g.finish();
            }
        }
        drop(subjects);
        let _ = std::fs::remove_file(&path);
    }

    criterion::criterion_group! {
        name = benches;
        config = guideloom_benchkit::wall_config();
        targets = cold
    }
}

#[cfg(all(target_os = "linux", feature = "uring"))]
criterion::criterion_main!(linux::benches);

#[cfg(not(all(target_os = "linux", feature = "uring")))]
fn main() {
    eprintln!("skipped: the cold-read benches need Linux and the `uring` feature");
}
