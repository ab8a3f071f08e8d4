//! Storage benchmarks: `DocumentStorage` and `StreamStorage` beside raw-IO ceilings measured
//! in the same run on the same bytes.
//!
//! Run with `cargo xtask bench` (which prints the table with ratios) or
//! `cargo bench -p guideloom-storage --bench storage`. (Moved from guideloom-format with the
//! storages; the group ids keep their `format/` prefix so results stay comparable.)
//!
//! # What is measured
//! Document storages of 1 KiB and of 256 KiB raw records (64 MiB of payload each by default,
//! one shard, the payload generator of the IO bench), and a stream of `u32` (64 MiB).
//! Groups, `format/documents/<record>/<pattern>` and `format/stream/<slice>/<pattern>`:
//! - `random_read`: `DocumentReader::read(i)` of one random record per iteration;
//! - `random_read_2threads`: the same from 2 threads at once (always wall time: this group
//!   is about scaling);
//! - `read_many`: `read_many` of 64 random indices per iteration;
//! - `iterate`: the whole storage in order (`iter`);
//! - `write`: 16 MiB of records through `DocumentWriter` (push, then `finish`: fsync and
//!   publish) per iteration;
//! - `format/stream/8KiB/slice_2048_u32`: `StreamReader::read` of 2048 `u32` at a random
//!   element offset.
//!
//! Readers are `<backend>_crc` (record CRC32C checked, the default) and `<backend>_nocrc`
//! (`ReadOptions::with_verify_records(false)`), for `PreadIo` and `MmapIo`. Ceilings, each in the
//! group it bounds:
//! - `ceiling_pread`: raw `pread` of the **same byte ranges** (the records' ranges in the shard
//!   file, found through `record_range`) into a fresh `Vec` per range, as a reader hands out
//!   an owned buffer per read;
//! - `ceiling_pread_reused` (`read_many`): the same ranges by raw `pread` into 64 buffers
//!   allocated once and reused, the strictest bound on a batch (no allocation, no page
//!   faults);
//! - `ceiling_read` (`iterate`): `read` of the shard files from start to end, 4 MiB buffer;
//! - `ceiling_write` (`write`): the same payloads through a 1 MiB `BufWriter` (the shard
//!   writer's buffer size) into a new file, then `fsync`, as the shard writer does.
//!
//! After the timed runs, `read_many` is repeated untimed to count minor page faults per record
//! (`getrusage`) for the ceiling and every reader; the table is printed and, under
//! `cargo xtask bench`, written to `format.md` for the summary (counts survive a noisy
//! machine where times do not).
//!
//! Every bench hands the bytes it gets to the same consumer (one byte per 4 KiB page), so a
//! zero-copy reader cannot win by never touching its bytes. Each bench re-reads the files it
//! uses right before it is measured (idle files get paged out on these machines).
//!
//! # Knobs (environment)
//! As the IO bench: `GUIDELOOM_BENCH_FILE_MIB` (64), `GUIDELOOM_BENCH_MEASURE_SECS` (1.5),
//! `GUIDELOOM_BENCH_WARMUP_SECS` (0.3), `GUIDELOOM_BENCH_SAMPLES` (20), `GUIDELOOM_BENCH_DIR`,
//! `GUIDELOOM_BENCH_CLOCK` (`wall` or `cpu`), read by `guideloom-benchkit` with the clock, the
//! ceiling `pread` and the shared consumer.

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::hint::black_box;
    use std::io::{BufWriter, Read, Write};
    use std::ops::Range;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use criterion::{BatchSize, BenchmarkGroup, Criterion, Throughput};
    use guideloom_benchkit::{
        BenchDir, CHUNK, Clock, env_u64, files, minor_faults, pread, random_bytes, random_indices,
        touch, touch_all, us, warm_dir as warm, write_counts,
    };
    use guideloom_format::{RawFormat, ReadOptions};
    use guideloom_io::{MmapIo, PreadIo};
    use guideloom_storage::{
        DocumentReader, DocumentStorage, StreamReader, StreamStorage, WriterOptions,
    };
    use rand::rngs::StdRng;
    use rand::{Rng, RngCore, SeedableRng};

    /// Records per `read_many`.
    const BATCH: usize = 64;
    /// Length of the random index sequence every random bench cycles through.
    const SEQUENCE: usize = 1 << 14;
    /// Payload written per `write` iteration.
    const WRITE_BYTES: u64 = 16 << 20;
    /// Elements per stream slice.
    const SLICE: u64 = 2048;

    /// Deterministic payloads, `count` records of `record` bytes.
    fn payloads(record: u64, count: u64) -> impl Iterator<Item = Bytes> {
        let mut rng = StdRng::seed_from_u64(record);
        (0..count).map(move |_| Bytes::from(random_bytes(&mut rng, us(record))))
    }

    type Docs<B> = DocumentStorage<RawFormat, B>;

    /// A document storage on disk and where its records lie, for the ceilings.
    struct DocSet {
        label: &'static str,
        record: u64,
        dir: PathBuf,
        /// Payload bytes in the storage.
        payload: u64,
        /// The random index sequence.
        indices: Vec<u64>,
        /// `(file, byte range)` of each record of `indices`, in the same order.
        ranges: Vec<(usize, Range<u64>)>,
        files: Vec<File>,
    }

    impl DocSet {
        fn create(root: &Path, label: &'static str, record: u64, file_mib: u64) -> DocSet {
            let dir = root.join(format!("docs-{label}"));
            let storage = Docs::new(dir.clone(), RawFormat, PreadIo::new());
            let count = (file_mib << 20) / record;
            let mut w = storage.sync_writer().expect("document writer");
            for p in payloads(record, count) {
                w.push(&p).expect("push");
            }
            w.finish().expect("finish");
            let reader = storage.sync_reader().expect("reader");
            assert_eq!(reader.len(), count);
            let mut rng = StdRng::seed_from_u64(record ^ 0x5eed);
            let indices = random_indices(&mut rng, count, SEQUENCE);
            let ranges = indices.iter().map(|&i| locate_record(&reader, i)).collect();
            let files = files(&dir)
                .iter()
                .map(|p| File::open(p).expect("open shard"))
                .collect();
            DocSet {
                label,
                record,
                dir,
                payload: count * record,
                indices,
                ranges,
                files,
            }
        }

        fn reader(&self, backend: &str, crc: bool) -> DocumentReader<RawFormat> {
            let options = ReadOptions::default().with_verify_records(crc);
            let reader = match backend {
                "pread" => Docs::new(self.dir.clone(), RawFormat, PreadIo::new())
                    .with_read_options(options)
                    .sync_reader(),
                "mmap" => Docs::new(self.dir.clone(), RawFormat, MmapIo::new())
                    .with_read_options(options)
                    .sync_reader(),
                other => panic!("no backend {other}"),
            }
            .expect("open document reader");
            // A fast wrong reader must not pass unnoticed.
            for (k, &i) in self.indices.iter().take(BATCH).enumerate() {
                let got = reader.read(i).expect("read");
                assert_eq!(got, self.pread(k), "{backend} read({i})");
            }
            reader
        }

        /// The ceiling's read of sequence position `k`: the record's bytes by raw `pread`.
        fn pread(&self, k: usize) -> Vec<u8> {
            let (f, r) = &self.ranges[k];
            pread(&self.files[*f], r.clone())
        }

        fn group<'c>(
            &self,
            c: &'c mut Criterion<Clock>,
            pattern: &str,
        ) -> BenchmarkGroup<'c, Clock> {
            c.benchmark_group(format!("format/documents/{}/{pattern}", self.label))
        }
    }

    /// Shard number and absolute byte range of record `i`.
    fn locate_record(reader: &DocumentReader<RawFormat>, mut i: u64) -> (usize, Range<u64>) {
        for (k, shard) in reader.shards().iter().enumerate() {
            if i < shard.len() {
                return (k, shard.record_range(i).expect("record range"));
            }
            i -= shard.len();
        }
        panic!("record past the end")
    }

    const READERS: [(&str, bool); 4] = [
        ("pread", true),
        ("pread", false),
        ("mmap", true),
        ("mmap", false),
    ];

    fn reader_id(backend: &str, crc: bool) -> String {
        format!("{backend}_{}", if crc { "crc" } else { "nocrc" })
    }

    fn random_read(c: &mut Criterion<Clock>, d: &DocSet) {
        let mut g = d.group(c, "random_read");
        g.throughput(Throughput::Bytes(d.record));
        warm(&d.dir);
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let buf = d.pread(k);
                black_box(touch(&buf));
                buf
            })
        });
        for (backend, crc) in READERS {
            let reader = d.reader(backend, crc);
            warm(&d.dir);
            g.bench_function(reader_id(backend, crc), |b| {
                let mut k = 0;
                b.iter(|| {
                    k = (k + 1) % SEQUENCE;
                    let got = reader.read(d.indices[k]).expect("read");
                    black_box(touch(&got));
                    got
                })
            });
        }
        g.finish();
    }

    /// Runs `per_thread(t, iters)` on 2 threads at once; returns the wall time.
    fn two_threads(iters: u64, per_thread: impl Fn(usize, u64) + Sync) -> Duration {
        let start = Instant::now();
        std::thread::scope(|s| {
            for t in 0..2 {
                let per_thread = &per_thread;
                s.spawn(move || per_thread(t, iters));
            }
        });
        start.elapsed()
    }

    fn random_read_2threads(c: &mut Criterion<Clock>, d: &DocSet) {
        let mut g = d.group(c, "random_read_2threads");
        // One iteration is one read on each of the 2 threads.
        g.throughput(Throughput::Bytes(2 * d.record));
        warm(&d.dir);
        g.bench_function("ceiling_pread", |b| {
            b.iter_custom(|iters| {
                two_threads(iters, |t, n| {
                    for j in 0..n {
                        let k = (us(j) + t * SEQUENCE / 2) % SEQUENCE;
                        black_box(touch(&d.pread(k)));
                    }
                })
            })
        });
        for (backend, crc) in READERS {
            let reader = d.reader(backend, crc);
            warm(&d.dir);
            g.bench_function(reader_id(backend, crc), |b| {
                b.iter_custom(|iters| {
                    two_threads(iters, |t, n| {
                        for j in 0..n {
                            let k = (us(j) + t * SEQUENCE / 2) % SEQUENCE;
                            black_box(touch(&reader.read(d.indices[k]).expect("read")));
                        }
                    })
                })
            });
        }
        g.finish();
    }

    /// Batches per fault count of [`read_many_faults`].
    const FAULT_BATCHES: usize = 32;

    /// Minor page faults per record of `FAULT_BATCHES` batches of `batch` (after one untimed
    /// batch), or `None` where the platform does not count them.
    fn faults_per_record(mut batch: impl FnMut(usize) -> u64) -> Option<f64> {
        black_box(batch(0));
        let before = minor_faults()?;
        for n in 1..=FAULT_BATCHES {
            black_box(batch(n * BATCH % (SEQUENCE - BATCH)));
        }
        let faults = minor_faults()?.saturating_sub(before);
        Some(faults as f64 / (FAULT_BATCHES * BATCH) as f64)
    }

    /// The table row of `read_many`'s minor faults per record, ceiling first.
    fn read_many_faults(d: &DocSet) -> String {
        let show = |f: Option<f64>| f.map_or_else(|| "n/a".to_owned(), |f| format!("{f:.2}"));
        let mut row = format!("| {} | ", d.label);
        row += &show(faults_per_record(|at| {
            let out: Vec<Vec<u8>> = (at..at + BATCH).map(|k| d.pread(k)).collect();
            touch_all(&out)
        }));
        for (backend, crc) in READERS {
            let reader = d.reader(backend, crc);
            row += " | ";
            row += &show(faults_per_record(|at| {
                let out = reader
                    .read_many(&d.indices[at..at + BATCH])
                    .expect("read_many");
                touch_all(&out)
            }));
        }
        row + " |\n"
    }

    fn read_many(c: &mut Criterion<Clock>, d: &DocSet) {
        let mut g = d.group(c, "read_many");
        g.throughput(Throughput::Bytes(BATCH as u64 * d.record));
        warm(&d.dir);
        g.bench_function("ceiling_pread", |b| {
            let mut at = 0;
            b.iter(|| {
                at = (at + BATCH) % (SEQUENCE - BATCH);
                let out: Vec<Vec<u8>> = (at..at + BATCH).map(|k| d.pread(k)).collect();
                black_box(touch_all(&out));
                out
            })
        });
        // The strictest ceiling: the same ranges into buffers allocated once and reused (no
        // allocation, no zeroing, no page faults per batch).
        g.bench_function("ceiling_pread_reused", |b| {
            use std::os::unix::fs::FileExt;
            let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; us(d.record)]; BATCH];
            let mut at = 0;
            b.iter(|| {
                at = (at + BATCH) % (SEQUENCE - BATCH);
                for (buf, k) in bufs.iter_mut().zip(at..at + BATCH) {
                    let (f, r) = &d.ranges[k];
                    buf.resize(us(r.end - r.start), 0);
                    d.files[*f].read_exact_at(buf, r.start).expect("pread");
                }
                black_box(touch_all(&bufs))
            })
        });
        for (backend, crc) in READERS {
            let reader = d.reader(backend, crc);
            warm(&d.dir);
            g.bench_function(reader_id(backend, crc), |b| {
                let mut at = 0;
                b.iter(|| {
                    at = (at + BATCH) % (SEQUENCE - BATCH);
                    let out = reader
                        .read_many(&d.indices[at..at + BATCH])
                        .expect("read_many");
                    black_box(touch_all(&out));
                    out
                })
            });
        }
        g.finish();
    }

    fn iterate(c: &mut Criterion<Clock>, d: &DocSet) {
        let mut g = d.group(c, "iterate");
        g.throughput(Throughput::Bytes(d.payload));
        warm(&d.dir);
        g.bench_function("ceiling_read", |b| {
            let paths = files(&d.dir);
            let mut buf = vec![0u8; CHUNK];
            b.iter(|| {
                let mut sum = 0;
                for p in &paths {
                    let mut file = File::open(p).expect("open shard");
                    loop {
                        let n = file.read(&mut buf).expect("read");
                        if n == 0 {
                            break;
                        }
                        sum += touch(&buf[..n]);
                    }
                }
                black_box(sum)
            })
        });
        for (backend, crc) in READERS {
            let reader = d.reader(backend, crc);
            warm(&d.dir);
            g.bench_function(reader_id(backend, crc), |b| {
                b.iter(|| {
                    let mut sum = 0;
                    for rec in reader.iter() {
                        sum += touch(&rec.expect("record"));
                    }
                    black_box(sum)
                })
            });
        }
        g.finish();
    }

    /// A directory removed when dropped (after criterion has stopped the clock).
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(c: &mut Criterion<Clock>, root: &Path, label: &'static str, record: u64) {
        let count = (WRITE_BYTES / record).max(1);
        let records: Vec<Bytes> = payloads(record, count).collect();
        let mut g = c.benchmark_group(format!("format/documents/{label}/write"));
        g.throughput(Throughput::Bytes(count * record));
        g.sample_size(10);
        let n = AtomicU64::new(0);
        let fresh = || {
            let dir = root.join(format!(
                "write-{label}-{}",
                n.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).expect("create scratch dir");
            Scratch(dir)
        };
        g.bench_function("ceiling_write", |b| {
            b.iter_batched(
                fresh,
                |dir| {
                    let file = File::create(dir.0.join("raw.bin")).expect("create");
                    let mut w = BufWriter::with_capacity(1 << 20, file);
                    for r in &records {
                        w.write_all(r).expect("write");
                    }
                    let file = w.into_inner().expect("flush");
                    file.sync_all().expect("fsync");
                    dir
                },
                BatchSize::PerIteration,
            )
        });
        g.bench_function("write", |b| {
            b.iter_batched(
                fresh,
                |dir| {
                    let storage = Docs::new(dir.0.join("docs"), RawFormat, PreadIo::new());
                    let mut w = storage.sync_writer().expect("writer");
                    for r in &records {
                        w.push(r).expect("push");
                    }
                    w.finish().expect("finish");
                    dir
                },
                BatchSize::PerIteration,
            )
        });
        g.finish();
    }

    /// A `u32` stream in one shard, its data region's start, and random slice offsets.
    struct StreamSet {
        dir: PathBuf,
        file: File,
        data_start: u64,
        offsets: Vec<u64>,
    }

    impl StreamSet {
        fn create(root: &Path, file_mib: u64) -> StreamSet {
            let dir = root.join("stream-u32");
            let elements = (file_mib << 20) / 4;
            let storage = StreamStorage::<u32, _>::new(dir.clone(), PreadIo::new())
                .with_writer_options(WriterOptions::default().max_shard_bytes(u64::MAX >> 1));
            let mut w = storage.sync_writer().expect("stream writer");
            let mut rng = StdRng::seed_from_u64(4);
            let mut chunk = vec![0u32; 1 << 16];
            let mut left = elements;
            while left > 0 {
                let n = us(left.min(chunk.len() as u64));
                chunk[..n].iter_mut().for_each(|x| *x = rng.next_u32());
                w.append(&chunk[..n]).expect("append");
                left -= n as u64;
            }
            w.finish().expect("finish");
            let reader = storage.sync_reader().expect("stream reader");
            assert_eq!(reader.len(), elements);
            assert_eq!(reader.shards().len(), 1, "the ceiling assumes one shard");
            let data_start = reader.shards()[0].record_range(0).expect("range").start;
            let offsets = (0..SEQUENCE)
                .map(|_| rng.random_range(0..elements - SLICE))
                .collect();
            let file = File::open(&files(&dir)[0]).expect("open shard");
            StreamSet {
                dir,
                file,
                data_start,
                offsets,
            }
        }

        fn reader(&self, backend: &str, crc: bool) -> StreamReader<u32> {
            let options = ReadOptions::default().with_verify_records(crc);
            let reader = match backend {
                "pread" => StreamStorage::<u32, _>::new(self.dir.clone(), PreadIo::new())
                    .with_read_options(options)
                    .sync_reader(),
                "mmap" => StreamStorage::<u32, _>::new(self.dir.clone(), MmapIo::new())
                    .with_read_options(options)
                    .sync_reader(),
                other => panic!("no backend {other}"),
            }
            .expect("open stream reader");
            for k in 0..BATCH {
                let got = reader.read(self.offsets[k], SLICE).expect("read");
                assert_eq!(
                    &got.as_bytes()[..],
                    &self.pread(k)[..],
                    "{backend} slice {k}"
                );
            }
            reader
        }

        fn pread(&self, k: usize) -> Vec<u8> {
            let at = self.data_start + self.offsets[k] * 4;
            pread(&self.file, at..at + SLICE * 4)
        }
    }

    fn stream_slices(c: &mut Criterion<Clock>, s: &StreamSet) {
        let mut g = c.benchmark_group("format/stream/8KiB/slice_2048_u32");
        g.throughput(Throughput::Bytes(SLICE * 4));
        warm(&s.dir);
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let buf = s.pread(k);
                black_box(touch(&buf));
                buf
            })
        });
        for (backend, crc) in READERS {
            let reader = s.reader(backend, crc);
            warm(&s.dir);
            g.bench_function(reader_id(backend, crc), |b| {
                let mut k = 0;
                b.iter(|| {
                    k = (k + 1) % SEQUENCE;
                    let got = reader.read(s.offsets[k], SLICE).expect("read");
                    black_box(touch(got.as_bytes()));
                    got
                })
            });
        }
        g.finish();
    }

    /// All format groups.
    pub(crate) fn storages(c: &mut Criterion<Clock>) {
        let file_mib = env_u64("GUIDELOOM_BENCH_FILE_MIB", 64);
        let dir = BenchDir::from_env(Some("format"));
        let root = dir.path();
        let _ = std::fs::remove_dir_all(root);
        let mut faults = format!(
            "### format: minor page faults per record, `read_many` of {BATCH}\n\n\
             | record | ceiling_pread | {} |\n|---|---|---|---|---|---|\n",
            READERS.map(|(b, crc)| reader_id(b, crc)).join(" | ")
        );
        for (label, record) in [("1KiB", 1024), ("256KiB", 256 * 1024)] {
            let d = DocSet::create(root, label, record, file_mib);
            random_read(c, &d);
            random_read_2threads(c, &d);
            read_many(c, &d);
            faults += &read_many_faults(&d);
            iterate(c, &d);
            write(c, root, label, record);
            let _ = std::fs::remove_dir_all(&d.dir);
        }
        let s = StreamSet::create(root, file_mib);
        stream_slices(c, &s);
        let _ = std::fs::remove_dir_all(root);
        println!("{faults}");
        write_counts("format", &faults);
    }

    criterion::criterion_group! {
        name = format;
        config = guideloom_benchkit::config();
        targets = storages
    }
}

#[cfg(unix)]
criterion::criterion_main!(unix::format);

#[cfg(not(unix))]
fn main() {
    eprintln!("skipped: the format benches compare against unix positioned reads (pread)");
}
