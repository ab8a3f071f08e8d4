//! ArrayRecord random reads beside raw `pread` of the same chunks, measured in the same run.
//!
//! Run with `cargo xtask bench --bench arrayrecord` (which prints the table with ratios) or
//! `cargo bench -p guideloom-arrayrecord --bench arrayrecord`.
//!
//! # What is measured
//! Two files of 1 KiB random records (`GUIDELOOM_BENCH_FILE_MIB`, default 64 MiB of payload),
//! written by `ArrayRecordWriter` with `group_size:1,uncompressed` (byte-identical to what the
//! `array_record` package writes with those options) and with the Python defaults
//! (`group_size:1,zstd:3,window_log:20`). Groups `arrayrecord/<pattern>/<options>`:
//! - `random_get`: `get(i)` of one random record per iteration;
//! - `random_get/default_256k`: the same over a third file of 256 KiB records written with
//!   `group_size:1` (zstd by default, as the `array_record` package writes), beside
//!   `ceiling_pread_zstd` (the chunk's `pread` plus a zstd decode of the record compressed
//!   alone at level 3: the work no reader of the file skips; the data hash every read
//!   checks comes on top);
//! - `get_many_64`: `get_many` of 64 random records per iteration;
//! - `write/<options>`: `ArrayRecordWriter` writing 4 MiB of 1 KiB records to a new file, beside
//!   `ceiling_write`, a buffered `std::fs` write of the same bytes (no fsync on either).
//!
//! Readers: `pread` (`ArrayRecordReader` over `PreadIo`) and `mmap` (over `MmapIo`), with the
//! chunk cache off so every read is a read. The ceiling, `ceiling_pread`, is a raw `pread` of
//! the **same chunk ranges** (the footer's `[offset_i, offset_{i+1})`) into a fresh `Vec`: the
//! bytes a reader must fetch, without hashing, decoding or decompressing them. Every bench
//! touches one byte per 4 KiB page of what it gets.
//!
//! The request counts (open, get, get_many) go to the counts table of `cargo xtask bench`.
//!
//! # Knobs (environment)
//! As the other benches: `GUIDELOOM_BENCH_FILE_MIB`, `GUIDELOOM_BENCH_MEASURE_SECS`,
//! `GUIDELOOM_BENCH_WARMUP_SECS`, `GUIDELOOM_BENCH_SAMPLES`, `GUIDELOOM_BENCH_DIR`,
//! `GUIDELOOM_BENCH_CLOCK`.

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::hint::black_box;
    use std::ops::Range;
    use std::path::PathBuf;

    use criterion::{BenchmarkGroup, Criterion, Throughput};
    use guideloom_arrayrecord::{ArrayRecordReadOptions, ArrayRecordReader, ArrayRecordWriter};
    use guideloom_benchkit::{
        BenchDir, Clock, env_u64, pread, random_bytes, random_indices, touch, touch_all, us,
        warm_file,
    };
    use guideloom_io::{Backend, CountingReader, MmapIo, PreadIo, SyncReader};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const RECORD: u64 = 1024;
    /// Records of the large-record set (`random_get/default_256k`).
    const LARGE_RECORD: u64 = 256 * 1024;
    const SEQUENCE: usize = 4096;
    const BATCH: usize = 64;

    struct Set {
        name: &'static str,
        /// Bytes per record.
        record: u64,
        /// Each record compressed alone with zstd level 3 (the writer's default), for the
        /// decode ceiling of the large-record set; empty for the others.
        frames: Vec<Vec<u8>>,
        path: PathBuf,
        file: File,
        /// The chunk range of each record (group size 1: one chunk per record).
        chunks: Vec<Range<u64>>,
        indices: Vec<u64>,
    }

    fn options() -> ArrayRecordReadOptions {
        ArrayRecordReadOptions::default().with_cache_chunks(0)
    }

    impl Set {
        fn create(
            dir: &std::path::Path,
            name: &'static str,
            opts: &str,
            mib: u64,
            record: u64,
        ) -> Set {
            let path = dir.join(format!("{name}.array_record"));
            let count = mib * 1024 * 1024 / record;
            let mut rng = StdRng::seed_from_u64(7);
            let mut w =
                ArrayRecordWriter::create(&path, opts.parse().expect("options")).expect("create");
            let mut frames = Vec::new();
            for _ in 0..count {
                let r = random_bytes(&mut rng, us(record));
                w.write(&r).expect("write");
                if record > RECORD {
                    frames.push(zstd::bulk::compress(&r, 3).expect("zstd"));
                }
            }
            w.finish().expect("finish");
            let ar = ArrayRecordReader::open(PreadIo::new().open(&path).expect("open"), &options())
                .expect("open");
            let chunks = ar
                .layout()
                .chunks()
                .iter()
                .map(|c| c.offset..c.end)
                .collect();
            Set {
                name,
                record,
                frames,
                file: File::open(&path).expect("open"),
                path,
                chunks,
                indices: random_indices(&mut rng, count, SEQUENCE * BATCH),
            }
        }

        fn readers(&self) -> Vec<(&'static str, ArrayRecordReader)> {
            vec![
                (
                    "pread",
                    ArrayRecordReader::open(
                        PreadIo::new().open(&self.path).expect("open"),
                        &options(),
                    )
                    .expect("open"),
                ),
                (
                    "mmap",
                    ArrayRecordReader::open(
                        MmapIo::new().open(&self.path).expect("open"),
                        &options(),
                    )
                    .expect("open"),
                ),
            ]
        }

        fn group<'a>(
            &self,
            c: &'a mut Criterion<Clock>,
            pattern: &str,
        ) -> BenchmarkGroup<'a, Clock> {
            c.benchmark_group(format!("arrayrecord/{pattern}/{}", self.name))
        }
    }

    fn random_get(c: &mut Criterion<Clock>, s: &Set) {
        let mut g = s.group(c, "random_get");
        g.throughput(Throughput::Bytes(s.record));
        warm_file(&s.path);
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let buf = pread(&s.file, s.chunks[us(s.indices[k])].clone());
                black_box(touch(&buf));
                buf
            })
        });
        for (name, reader) in s.readers() {
            g.bench_function(name, |b| {
                let mut k = 0;
                b.iter(|| {
                    k = (k + 1) % SEQUENCE;
                    let got = reader.get(s.indices[k]).expect("get");
                    black_box(touch(&got));
                    got
                })
            });
        }
        g.finish();
    }

    /// `random_get` of large zstd records, beside a second ceiling: the raw `pread` of the
    /// chunk followed by a zstd decode of the record compressed alone at the same level
    /// (`ceiling_pread_zstd`: the IO and decoding no reader of the file skips).
    fn random_get_large(c: &mut Criterion<Clock>, s: &Set) {
        let mut g = s.group(c, "random_get");
        g.throughput(Throughput::Bytes(s.record));
        warm_file(&s.path);
        let mut dctx = zstd::bulk::Decompressor::new().expect("zstd context");
        let mut decode = |frame: &[u8]| {
            let mut out = Vec::with_capacity(us(s.record));
            dctx.decompress_to_buffer(frame, &mut out).expect("zstd");
            out
        };
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let buf = pread(&s.file, s.chunks[us(s.indices[k])].clone());
                black_box(touch(&buf));
                buf
            })
        });
        g.bench_function("ceiling_pread_zstd", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let i = us(s.indices[k]);
                let buf = pread(&s.file, s.chunks[i].clone());
                black_box(touch(&buf));
                let out = decode(&s.frames[i]);
                black_box(touch(&out));
                (buf, out)
            })
        });
        for (name, reader) in s.readers() {
            g.bench_function(name, |b| {
                let mut k = 0;
                b.iter(|| {
                    k = (k + 1) % SEQUENCE;
                    let got = reader.get(s.indices[k]).expect("get");
                    black_box(touch(&got));
                    got
                })
            });
        }
        g.finish();
    }

    fn get_many(c: &mut Criterion<Clock>, s: &Set) {
        let mut g = s.group(c, "get_many_64");
        g.throughput(Throughput::Bytes(RECORD * BATCH as u64));
        warm_file(&s.path);
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let bufs: Vec<Vec<u8>> = s.indices[k * BATCH..(k + 1) * BATCH]
                    .iter()
                    .map(|&i| pread(&s.file, s.chunks[us(i)].clone()))
                    .collect();
                black_box(touch_all(&bufs));
                bufs
            })
        });
        for (name, reader) in s.readers() {
            g.bench_function(name, |b| {
                let mut k = 0;
                b.iter(|| {
                    k = (k + 1) % SEQUENCE;
                    let got = reader
                        .get_many(&s.indices[k * BATCH..(k + 1) * BATCH])
                        .expect("get_many");
                    black_box(touch_all(&got));
                    got
                })
            });
        }
        g.finish();
    }

    /// Calls on the reader for open, one get and one get_many, per file.
    fn counts(sets: &[Set]) -> String {
        let mut table = String::from(
            "| file | open: calls (bytes) | get: calls (bytes) | get_many(64): calls (bytes) |\n|---|---|---|---|\n",
        );
        for s in sets {
            let counted = CountingReader::new(PreadIo::new().open(&s.path).expect("open"));
            let stats = std::sync::Arc::clone(counted.stats());
            let ar = ArrayRecordReader::open(counted, &options()).expect("open");
            let open = stats.reset();
            ar.get(s.indices[0]).expect("get");
            let get = stats.reset();
            ar.get_many(&s.indices[..BATCH]).expect("get_many");
            let many = stats.reset();
            table.push_str(&format!(
                "| {} | {} ({}) | {} ({}) | {} ({}) |\n",
                s.name,
                open.requests,
                open.bytes_received,
                get.requests,
                get.bytes_received,
                many.requests,
                many.bytes_received
            ));
            let _ = ar.reader().close();
        }
        table
    }

    /// Writes 4 MiB of 1 KiB records with each option string, beside a buffered raw write.
    fn write(c: &mut Criterion<Clock>, dir: &std::path::Path) {
        use std::io::Write;
        let mut rng = StdRng::seed_from_u64(11);
        let records: Vec<Vec<u8>> = (0..4096)
            .map(|_| random_bytes(&mut rng, us(RECORD)))
            .collect();
        let path = dir.join("write.array_record");
        let mut g = c.benchmark_group("arrayrecord/write");
        g.throughput(Throughput::Bytes(4096 * RECORD));
        g.bench_function("ceiling_write", |b| {
            b.iter(|| {
                let mut f = std::io::BufWriter::new(File::create(&path).expect("create"));
                for r in &records {
                    f.write_all(r).expect("write");
                }
                f.flush().expect("flush");
            })
        });
        for (name, opts) in [
            ("g1_uncompressed", "group_size:1,uncompressed"),
            ("default", ""),
        ] {
            g.bench_function(name, |b| {
                b.iter(|| {
                    let mut w = ArrayRecordWriter::create(&path, opts.parse().expect("options"))
                        .expect("create");
                    for r in &records {
                        w.write(r).expect("write");
                    }
                    black_box(w.finish().expect("finish"));
                })
            });
        }
        g.finish();
        let _ = std::fs::remove_file(&path);
    }

    pub(crate) fn arrayrecord(c: &mut Criterion<Clock>) {
        let dir = BenchDir::from_env(Some("arrayrecord"));
        std::fs::create_dir_all(dir.path()).expect("bench dir");
        let mib = env_u64("GUIDELOOM_BENCH_FILE_MIB", 64);
        let sets = [
            Set::create(
                dir.path(),
                "g1_uncompressed",
                "group_size:1,uncompressed",
                mib,
                RECORD,
            ),
            Set::create(dir.path(), "default", "", mib, RECORD),
        ];
        let table = counts(&sets);
        println!("{table}");
        guideloom_benchkit::write_counts("arrayrecord", &table);
        for s in &sets {
            random_get(c, s);
            get_many(c, s);
        }
        let large = Set::create(
            dir.path(),
            "default_256k",
            "group_size:1",
            mib,
            LARGE_RECORD,
        );
        random_get_large(c, &large);
        write(c, dir.path());
        for s in sets.iter().chain([&large]) {
            let _ = std::fs::remove_file(&s.path);
        }
    }

    criterion::criterion_group! {
        name = benches;
        config = guideloom_benchkit::config();
        targets = arrayrecord
    }
}

#[cfg(unix)]
criterion::criterion_main!(unix::benches);

#[cfg(not(unix))]
fn main() {
    eprintln!("skipped: the arrayrecord benches compare against unix positioned reads (pread)");
}
