//! Byte-range IO benchmarks: every local backend beside ceilings measured in the same run.
//!
//! Run with `cargo xtask bench` (which also prints the table with ratios) or
//! `cargo bench -p guideloom-io --bench io`.
//!
//! # What is measured
//! Two files of fixed-size records (1 KiB and 256 KiB records, 64 MiB each by default), written
//! to a temporary directory and kept warm in the page cache. The records start after a 16-byte
//! header, like a shard's payloads, so a quarter of the 1 KiB records straddle a 4 KiB page.
//!
//! Per file, three criterion groups (`io/<record>/<pattern>`):
//! - `random_single`: one read of a random record per iteration (the same seeded sequence of
//!   records for every bench in the group);
//! - `random_batched`: one batched read of 64 random records per iteration (the next 64 of the
//!   same sequence); `<backend>_sync_loop` reads the same 64 with `read` one by one, which
//!   separates the cost of `read_ranges` itself from the cost of the reads;
//! - `sequential`: the whole file in 4 MiB chunks per iteration.
//!
//! Every group holds its ceilings, measured on the same bytes with the same range sequence:
//! - `ceiling_pread`: raw `pread` (`FileExt::read_exact_at`) into a **fresh** `Vec` per read.
//!   This is the "same work" ceiling the report divides by: our readers hand out an owned
//!   buffer per read (`Bytes`), so a ceiling that skips the allocation would charge the reader
//!   for work the contract requires of it;
//! - `ceiling_pread_reused`: raw `pread` into one reused buffer (the pure system-call cost,
//!   shown so the allocation share is visible);
//! - `ceiling_mmap_memcpy`: a copy out of a private `mmap` of the file (into a fresh `Vec` for
//!   random reads, into a reused buffer for sequential ones);
//! - `ceiling_read` (sequential only): `read` with a 4 MiB reused buffer from offset 0.
//!
//! Every bench, ceilings included, hands each buffer it gets to the same consumer, which
//! reads one byte per 4 KiB page: the bytes must really be there, so a zero-copy reader is
//! credited for the copy it saves but not for pages it never touches.
//!
//! Backends appear as `<backend>_sync` and `<backend>_async`; async readers run on a tokio
//! current-thread runtime, one `block_on` per iteration, so `async - sync` is the per-read
//! cost of the async flavour (thread hand-off included).
//!
//! Files idle for about a minute get paged out on these machines, so each bench re-reads its
//! file sequentially right before it is measured.
//!
//! # Knobs (environment)
//! `GUIDELOOM_BENCH_FILE_MIB` (64), `GUIDELOOM_BENCH_MEASURE_SECS` (1.5),
//! `GUIDELOOM_BENCH_WARMUP_SECS` (0.3), `GUIDELOOM_BENCH_SAMPLES` (20),
//! `GUIDELOOM_BENCH_DIR` (where the files go; a fresh temporary directory by default),
//! `GUIDELOOM_BENCH_CLOCK` (`wall`, the default, or `cpu`: the process's CPU time, for ratios
//! that survive a machine busy with other work).
//! Criterion's own flags (after `--`) override the first three.
//! The knobs, the clock, the ceiling `pread` and the fixture helpers are `guideloom-benchkit`'s,
//! shared by every bench.

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::hint::black_box;
    use std::io::{Read, Seek, SeekFrom};
    use std::ops::Range;
    use std::os::unix::fs::FileExt;
    use std::path::{Path, PathBuf};

    use criterion::{BenchmarkGroup, Criterion, Throughput};
    use guideloom_benchkit::{
        BenchDir, Clock, env_u64, pread, random_records, touch, touch_all, us, warm_file,
        write_random_file,
    };
    use guideloom_io::{AsyncReader, Backend, SyncReader};
    use guideloom_io::{PreadIo, SeekIo};
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use tokio::runtime::Runtime;

    /// Bytes before the first record (a shard header stands there).
    const HEADER: u64 = 16;
    /// Ranges per batched read.
    const BATCH: usize = 64;
    /// Chunk size of sequential reads.
    const CHUNK: u64 = 4 * 1024 * 1024;
    /// Length of the random record sequence every random bench cycles through.
    const SEQUENCE: usize = 1 << 14;

    /// One bench file: fixed-size records after a header, and a seeded random record sequence.
    struct Dataset {
        /// `1KiB` / `256KiB`: the record size as it appears in group names.
        label: &'static str,
        record: u64,
        path: PathBuf,
        size: u64,
        /// Random record ranges, the same for every bench in a group.
        ranges: Vec<Range<u64>>,
    }

    impl Dataset {
        fn create(dir: &Path, label: &'static str, record: u64, file_mib: u64) -> Dataset {
            let count = (file_mib * 1024 * 1024 / record).max(BATCH as u64);
            let size = HEADER + count * record;
            let path = dir.join(format!("records-{label}.bin"));
            let mut rng = StdRng::seed_from_u64(record);
            write_random_file(&path, size, &mut rng);
            // Drawn after the contents, from the same generator.
            let ranges = random_records(&mut rng, HEADER, record, count, SEQUENCE);
            Dataset {
                label,
                record,
                path,
                size,
                ranges,
            }
        }

        /// Reads the whole file sequentially so it is in the page cache.
        fn warm(&self) {
            warm_file(&self.path);
        }

        fn group<'c>(
            &self,
            c: &'c mut Criterion<Clock>,
            pattern: &str,
        ) -> BenchmarkGroup<'c, Clock> {
            c.benchmark_group(format!("io/{}/{pattern}", self.label))
        }
    }

    /// Cycles through a range sequence, one range (or window) per call.
    struct Cursor<'a> {
        ranges: &'a [Range<u64>],
        at: usize,
    }

    impl<'a> Cursor<'a> {
        fn new(ranges: &'a [Range<u64>]) -> Self {
            Cursor { ranges, at: 0 }
        }

        fn next_one(&mut self) -> (u64, u64) {
            let r = &self.ranges[self.at];
            self.at = (self.at + 1) % self.ranges.len();
            (r.start, r.end - r.start)
        }

        fn next_batch(&mut self) -> &'a [Range<u64>] {
            if self.at + BATCH > self.ranges.len() {
                self.at = 0;
            }
            let batch = &self.ranges[self.at..self.at + BATCH];
            self.at += BATCH;
            batch
        }
    }

    /// A private read-only map of the whole file, for the memcpy ceiling.
    struct Map(memmap2::Mmap);

    impl Map {
        #[allow(unsafe_code)]
        fn new(path: &Path) -> Map {
            let file = File::open(path).expect("open bench file");
            // SAFETY: the bench file is created by this process in its own directory and
            // nobody truncates or writes it while it is mapped.
            let map = unsafe { memmap2::Mmap::map(&file) }.expect("map bench file");
            Map(map)
        }

        fn slice(&self, offset: u64, len: u64) -> &[u8] {
            &self.0[us(offset)..us(offset + len)]
        }
    }

    /// A local backend under test, by its bench-id prefix.
    struct Subject {
        name: &'static str,
        backend: Box<dyn Backend<Location = PathBuf>>,
    }

    fn subjects() -> Vec<Subject> {
        // Only the `mmap` feature adds a subject below.
        #[cfg_attr(not(feature = "mmap"), allow(unused_mut))]
        let mut all = vec![
            Subject {
                name: "seek",
                backend: Box::new(SeekIo::new()),
            },
            Subject {
                name: "pread",
                backend: Box::new(PreadIo::new()),
            },
        ];
        #[cfg(feature = "mmap")]
        all.push(Subject {
            name: "mmap",
            backend: Box::new(guideloom_io::MmapIo::new()),
        });
        all.into_iter()
            .filter(|s| s.backend.is_supported())
            .collect()
    }

    /// Open readers of one backend on one file, checked against the file's bytes.
    struct Readers {
        sync: Box<dyn SyncReader>,
        r#async: Box<dyn AsyncReader>,
    }

    fn open(subject: &Subject, data: &Dataset, rt: &Runtime) -> Readers {
        let sync = subject.backend.open(&data.path).expect("open sync reader");
        let r#async = rt
            .block_on(subject.backend.open_async(&data.path))
            .expect("open async reader");
        // The bench measures speed, but a fast wrong reader must not pass unnoticed.
        let file = File::open(&data.path).expect("open bench file");
        let batch = &data.ranges[..BATCH];
        let got_sync = sync.read_ranges(batch).expect("sync read_ranges");
        let got_async = rt
            .block_on(r#async.read_ranges(batch))
            .expect("async read_ranges");
        for (i, r) in batch.iter().enumerate() {
            let want = pread(&file, r.clone());
            let one = sync.read(r.start, r.end - r.start).expect("sync read");
            let one_async = rt
                .block_on(r#async.read(r.start, r.end - r.start))
                .expect("async read");
            assert!(
                one == want && got_sync[i] == want && got_async[i] == want && one_async == want,
                "{} returned wrong bytes for {r:?}",
                subject.name
            );
        }
        assert_eq!(sync.size().expect("size"), data.size);
        Readers { sync, r#async }
    }

    fn runtime() -> Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("tokio runtime")
    }

    fn random_single(c: &mut Criterion<Clock>, data: &Dataset, subjects: &[Subject], rt: &Runtime) {
        let file = File::open(&data.path).expect("open bench file");
        let map = Map::new(&data.path);
        let mut g = data.group(c, "random_single");
        g.throughput(Throughput::Bytes(data.record));

        data.warm();
        g.bench_function("ceiling_pread", |b| {
            let mut cur = Cursor::new(&data.ranges);
            b.iter(|| {
                let (off, len) = cur.next_one();
                let buf = pread(&file, off..off + len);
                black_box(touch(&buf));
                buf
            })
        });
        data.warm();
        g.bench_function("ceiling_pread_reused", |b| {
            let mut cur = Cursor::new(&data.ranges);
            let mut buf = vec![0u8; us(data.record)];
            b.iter(|| {
                let (off, len) = cur.next_one();
                let buf = &mut buf[..us(len)];
                file.read_exact_at(buf, off).expect("pread");
                black_box(touch(buf))
            })
        });
        data.warm();
        g.bench_function("ceiling_mmap_memcpy", |b| {
            let mut cur = Cursor::new(&data.ranges);
            b.iter(|| {
                let (off, len) = cur.next_one();
                let buf = map.slice(off, len).to_vec();
                black_box(touch(&buf));
                buf
            })
        });
        for s in subjects {
            let readers = open(s, data, rt);
            data.warm();
            g.bench_function(format!("{}_sync", s.name), |b| {
                let mut cur = Cursor::new(&data.ranges);
                b.iter(|| {
                    let (off, len) = cur.next_one();
                    let got = readers.sync.read(off, len).expect("read");
                    black_box(touch(&got));
                    got
                })
            });
            data.warm();
            g.bench_function(format!("{}_async", s.name), |b| {
                let mut cur = Cursor::new(&data.ranges);
                b.iter(|| {
                    let (off, len) = cur.next_one();
                    let got = rt.block_on(readers.r#async.read(off, len)).expect("read");
                    black_box(touch(&got));
                    got
                })
            });
        }
        g.finish();
    }

    fn random_batched(
        c: &mut Criterion<Clock>,
        data: &Dataset,
        subjects: &[Subject],
        rt: &Runtime,
    ) {
        let file = File::open(&data.path).expect("open bench file");
        let map = Map::new(&data.path);
        let mut g = data.group(c, "random_batched");
        g.throughput(Throughput::Bytes(data.record * BATCH as u64));

        data.warm();
        g.bench_function("ceiling_pread", |b| {
            let mut cur = Cursor::new(&data.ranges);
            b.iter(|| {
                let out: Vec<Vec<u8>> = cur
                    .next_batch()
                    .iter()
                    .map(|r| pread(&file, r.clone()))
                    .collect();
                black_box(touch_all(&out));
                out
            })
        });
        data.warm();
        g.bench_function("ceiling_pread_reused", |b| {
            let mut cur = Cursor::new(&data.ranges);
            let mut buf = vec![0u8; us(data.record)];
            b.iter(|| {
                let mut sum = 0;
                for r in cur.next_batch() {
                    let buf = &mut buf[..us(r.end - r.start)];
                    file.read_exact_at(buf, r.start).expect("pread");
                    sum += touch(buf);
                }
                black_box(sum)
            })
        });
        data.warm();
        g.bench_function("ceiling_mmap_memcpy", |b| {
            let mut cur = Cursor::new(&data.ranges);
            b.iter(|| {
                let out: Vec<Vec<u8>> = cur
                    .next_batch()
                    .iter()
                    .map(|r| map.slice(r.start, r.end - r.start).to_vec())
                    .collect();
                black_box(touch_all(&out));
                out
            })
        });
        for s in subjects {
            let readers = open(s, data, rt);
            data.warm();
            g.bench_function(format!("{}_sync", s.name), |b| {
                let mut cur = Cursor::new(&data.ranges);
                b.iter(|| {
                    let out = readers.sync.read_ranges(cur.next_batch()).expect("read");
                    black_box(touch_all(&out));
                    out
                })
            });
            data.warm();
            // Diagnostic: the same 64 ranges through `read` one by one, to tell the cost of
            // `read_ranges` (planning, coalescing, splitting) from the cost of the reads.
            g.bench_function(format!("{}_sync_loop", s.name), |b| {
                let mut cur = Cursor::new(&data.ranges);
                b.iter(|| {
                    let out: Vec<_> = cur
                        .next_batch()
                        .iter()
                        .map(|r| readers.sync.read(r.start, r.end - r.start).expect("read"))
                        .collect();
                    black_box(touch_all(&out));
                    out
                })
            });
            data.warm();
            g.bench_function(format!("{}_async", s.name), |b| {
                let mut cur = Cursor::new(&data.ranges);
                b.iter(|| {
                    let batch = cur.next_batch();
                    let out = rt
                        .block_on(readers.r#async.read_ranges(batch))
                        .expect("read");
                    black_box(touch_all(&out));
                    out
                })
            });
        }
        g.finish();
    }

    fn sequential(c: &mut Criterion<Clock>, data: &Dataset, subjects: &[Subject], rt: &Runtime) {
        let map = Map::new(&data.path);
        let chunks: Vec<(u64, u64)> = (0..data.size)
            .step_by(us(CHUNK))
            .map(|off| (off, CHUNK.min(data.size - off)))
            .collect();
        let mut g = data.group(c, "sequential");
        g.throughput(Throughput::Bytes(data.size));

        data.warm();
        g.bench_function("ceiling_pread", |b| {
            let file = File::open(&data.path).expect("open bench file");
            b.iter(|| {
                let mut sum = 0;
                for &(off, len) in &chunks {
                    sum += touch(&pread(&file, off..off + len));
                }
                black_box(sum)
            })
        });
        data.warm();
        g.bench_function("ceiling_read", |b| {
            let mut file = File::open(&data.path).expect("open bench file");
            let mut buf = vec![0u8; us(CHUNK)];
            b.iter(|| {
                file.seek(SeekFrom::Start(0)).expect("seek");
                let (mut total, mut sum) = (0u64, 0u64);
                loop {
                    let n = file.read(&mut buf).expect("read");
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                    sum += touch(&buf[..n]);
                }
                assert_eq!(total, data.size);
                black_box(sum)
            })
        });
        data.warm();
        g.bench_function("ceiling_mmap_memcpy", |b| {
            let mut buf = vec![0u8; us(CHUNK)];
            b.iter(|| {
                let mut sum = 0;
                for &(off, len) in &chunks {
                    let buf = &mut buf[..us(len)];
                    buf.copy_from_slice(map.slice(off, len));
                    sum += touch(buf);
                }
                black_box(sum)
            })
        });
        for s in subjects {
            let readers = open(s, data, rt);
            data.warm();
            g.bench_function(format!("{}_sync", s.name), |b| {
                b.iter(|| {
                    let mut sum = 0;
                    for &(off, len) in &chunks {
                        sum += touch(&readers.sync.read(off, len).expect("read"));
                    }
                    black_box(sum)
                })
            });
            data.warm();
            g.bench_function(format!("{}_async", s.name), |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let mut sum = 0;
                        for &(off, len) in &chunks {
                            sum += touch(&readers.r#async.read(off, len).await.expect("read"));
                        }
                        black_box(sum)
                    })
                })
            });
        }
        g.finish();
    }

    /// All IO groups: per file, random single, random batched and sequential reads.
    pub(crate) fn local(c: &mut Criterion<Clock>) {
        let file_mib = env_u64("GUIDELOOM_BENCH_FILE_MIB", 64);
        let dir = BenchDir::from_env(None);
        let datasets = [
            Dataset::create(dir.path(), "1KiB", 1024, file_mib),
            Dataset::create(dir.path(), "256KiB", 256 * 1024, file_mib),
        ];
        let subjects = subjects();
        let rt = runtime();
        for data in &datasets {
            random_single(c, data, &subjects, &rt);
            random_batched(c, data, &subjects, &rt);
            sequential(c, data, &subjects, &rt);
        }
        for data in &datasets {
            let _ = std::fs::remove_file(&data.path);
        }
    }

    criterion::criterion_group! {
        name = io;
        config = guideloom_benchkit::config();
        targets = local
    }
}

#[cfg(unix)]
criterion::criterion_main!(unix::io);

#[cfg(not(unix))]
fn main() {
    eprintln!("skipped: the IO benches compare against unix positioned reads (pread)");
}
