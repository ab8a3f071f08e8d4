//! The facade's per-call cost (issue 15's third row): random 1 KiB `Dataset::get` on a local
//! root (mmap, record CRC off) beside its ceiling in the same group, the format crate's
//! synchronous `SyncShard<MmapIo>::read` of the same records in the same shard files, and a raw
//! `pread` of the same byte ranges. `Dataset::get_many(64)` sits beside `SyncShard::read_many`
//! grouped by shard the same way.
//!
//! `write_shard/16MiB` puts `Publisher::write_raw_shard` into a local root beside a raw
//! buffered write + fsync of the same bytes (issue 15's write row).
//!
//! `cargo bench -p guideloom --bench facade` (or through `cargo xtask bench`);
//! `GUIDELOOM_BENCH_RECORDS` (default 100 000) sets the dataset size.

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::hint::black_box;
    use std::io::Write;
    use std::ops::Range;

    use criterion::{Criterion, Throughput};
    use guideloom::format::SyncShard;
    use guideloom::io::MmapIo;
    use guideloom::io::{Backend, SyncReader};
    use guideloom::{
        Bytes, Dataset, DatasetOptions, Loader, LoaderOptions, LocalReads, PublishMode, Publisher,
        ReadOptions, ShardMetadata, StoreOptions,
    };
    use guideloom_benchkit::{
        BenchDir, Clock, env_u64, pread, random_bytes, random_indices, touch, warm_dir,
    };
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const RECORD: usize = 1024;
    const PER_SHARD: u64 = 10_000;
    const SEQUENCE: usize = 4096;
    const BATCH: usize = 64;

    struct Fixture {
        _dir: BenchDir,
        ds: Dataset,
        /// The same root opened with `LocalReads::Pread` (the default on a declared mount).
        ds_pread: Dataset,
        shards: Vec<SyncShard<Box<dyn SyncReader>>>,
        files: Vec<File>,
        /// Global index -> (shard, record within the shard).
        indices: Vec<u64>,
        bounds: Vec<u64>,
    }

    impl Fixture {
        fn create(records: u64) -> Fixture {
            let dir = BenchDir::from_env(Some("facade"));
            let root = dir.path().join("root");
            let _ = std::fs::remove_dir_all(&root);
            let uri = root.to_str().expect("UTF-8 bench dir").to_owned();
            let publisher = Publisher::open(&uri).expect("publisher");
            let mut rng = StdRng::seed_from_u64(15);
            let mut refs = Vec::new();
            let mut written = 0;
            for n in 0.. {
                if written >= records {
                    break;
                }
                let count = PER_SHARD.min(records - written);
                let batch: Vec<Vec<u8>> =
                    (0..count).map(|_| random_bytes(&mut rng, RECORD)).collect();
                refs.push(
                    publisher
                        .write_raw_shard("bench", n, ShardMetadata::new("raw", "documents"), batch)
                        .expect("write shard"),
                );
                written += count;
            }
            publisher
                .publish("facade-bench", "s1", refs, PublishMode::Full)
                .expect("publish");
            let read = ReadOptions::default().with_verify_records(false);
            let ds = Dataset::open_with(&uri, DatasetOptions::default().with_read(read))
                .expect("open dataset");
            let pread_reads = StoreOptions {
                local_reads: LocalReads::Pread,
                ..StoreOptions::default()
            };
            let ds_pread = Dataset::open_with(
                &uri,
                DatasetOptions::default()
                    .with_read(read)
                    .with_store(pread_reads),
            )
            .expect("open dataset (pread)");
            let paths: Vec<std::path::PathBuf> = ds
                .snapshot()
                .shards()
                .iter()
                .map(|s| root.join(&s.key))
                .collect();
            let shards = paths
                .iter()
                .map(|p| {
                    let reader = MmapIo::new().open(p).expect("mmap open");
                    SyncShard::open(reader, &read).expect("shard open")
                })
                .collect();
            let files = paths.iter().map(|p| File::open(p).expect("open")).collect();
            let indices = random_indices(&mut rng, records, SEQUENCE);
            let bounds = ds.shard_bounds().to_vec();
            warm_dir(&root);
            let f = Fixture {
                _dir: dir,
                ds,
                ds_pread,
                shards,
                files,
                indices,
                bounds,
            };
            // A fast wrong reader must not pass unnoticed.
            for &i in f.indices.iter().take(BATCH) {
                let (s, j) = f.locate(i);
                let want = f.shards[s].read(j).expect("read");
                assert_eq!(f.ds.get(i).expect("get"), want, "get({i})");
                assert_eq!(f.ds_pread.get(i).expect("get"), want, "pread get({i})");
                let (s, r) = f.range(i);
                assert_eq!(pread(&f.files[s], r), want.as_ref(), "pread of record {i}");
            }
            f
        }

        /// (shard, record within it) of global record `i`.
        fn locate(&self, i: u64) -> (usize, u64) {
            let s = self.bounds.partition_point(|&b| b <= i) - 1;
            (s, i - self.bounds[s])
        }

        fn range(&self, i: u64) -> (usize, Range<u64>) {
            let (s, j) = self.locate(i);
            (s, self.shards[s].record_range(j).expect("range"))
        }
    }

    fn random_get(c: &mut Criterion<Clock>, f: &Fixture) {
        let mut g = c.benchmark_group("facade/1KiB/random_get");
        g.throughput(Throughput::Bytes(RECORD as u64));
        let ranges: Vec<(usize, Range<u64>)> = f.indices.iter().map(|&i| f.range(i)).collect();
        g.bench_function("ceiling_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let (s, r) = &ranges[k];
                let buf = pread(&f.files[*s], r.clone());
                black_box(touch(&buf));
                buf
            })
        });
        g.bench_function("ceiling_syncshard_mmap", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let (s, j) = f.locate(f.indices[k]);
                let got = f.shards[s].read(j).expect("read");
                black_box(touch(&got));
                got
            })
        });
        g.bench_function("dataset_get", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let got = f.ds.get(f.indices[k]).expect("get");
                black_box(touch(&got));
                got
            })
        });
        // Issue 15's first row: `Dataset` with `LocalReads::Pread`, beside `ceiling_pread`.
        g.bench_function("dataset_get_pread", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % SEQUENCE;
                let got = f.ds_pread.get(f.indices[k]).expect("get");
                black_box(touch(&got));
                got
            })
        });
        g.finish();
    }

    fn get_many(c: &mut Criterion<Clock>, f: &Fixture) {
        let mut g = c.benchmark_group("facade/1KiB/get_many_64");
        g.throughput(Throughput::Bytes((RECORD * BATCH) as u64));
        let batches: Vec<&[u64]> = f.indices.chunks(BATCH).collect();
        g.bench_function("ceiling_syncshard_mmap", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % batches.len();
                let mut per_shard: Vec<Vec<u64>> = vec![Vec::new(); f.shards.len()];
                for &i in batches[k] {
                    let (s, j) = f.locate(i);
                    per_shard[s].push(j);
                }
                let mut n = 0;
                for (s, js) in per_shard.iter().enumerate() {
                    if !js.is_empty() {
                        let got = f.shards[s].read_many(js).expect("read_many");
                        n += got.iter().map(|b| touch(b)).sum::<u64>();
                    }
                }
                black_box(n)
            })
        });
        g.bench_function("dataset_get_many", |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 1) % batches.len();
                let got = f.ds.get_many(batches[k]).expect("get_many");
                black_box(got.iter().map(|b| touch(b)).sum::<u64>())
            })
        });
        g.finish();
    }

    /// One shuffled epoch (the loader's own order, batches of 64): the loader with 1 and 2
    /// workers against one thread's `get_many` loop over the same batches.
    fn loader_epoch(c: &mut Criterion<Clock>, f: &Fixture) {
        let mut g = c.benchmark_group("facade/1KiB/loader_epoch");
        g.sample_size(10);
        g.throughput(Throughput::Bytes(RECORD as u64 * f.ds.len()));
        let decode = |_i, b: Bytes| Ok::<u64, guideloom::Error>(touch(&b));
        let options = |workers| {
            LoaderOptions::new(BATCH as u64)
                .with_seed(7)
                .with_workers(workers)
        };
        let order: Vec<Vec<u64>> = Loader::new(f.ds.clone(), options(1), |i, _b: Bytes| {
            Ok::<u64, guideloom::Error>(i)
        })
        .expect("loader")
        .epoch(0)
        .expect("epoch")
        .map(|b| b.expect("batch").records)
        .collect();
        let get_many = |batches: &[Vec<u64>]| {
            let mut n = 0;
            for batch in batches {
                let got = f.ds.get_many(batch).expect("get_many");
                n += got.iter().map(|b| touch(b)).sum::<u64>();
            }
            n
        };
        g.bench_function("ceiling_get_many_1thread", |b| {
            b.iter(|| black_box(get_many(&order)))
        });
        g.bench_function("ceiling_get_many_2threads", |b| {
            let (left, right) = order.split_at(order.len() / 2);
            b.iter(|| {
                std::thread::scope(|s| {
                    let other = s.spawn(|| get_many(right));
                    black_box(get_many(left) + other.join().expect("thread"))
                })
            })
        });
        for workers in [1, 2] {
            let loader = Loader::new(f.ds.clone(), options(workers), decode).expect("loader");
            g.bench_function(format!("loader_{workers}workers"), |b| {
                b.iter(|| {
                    let mut n = 0u64;
                    for batch in loader.epoch(0).expect("epoch") {
                        n += batch.expect("batch").records.iter().sum::<u64>();
                    }
                    black_box(n)
                })
            });
        }
        g.finish();
    }

    /// Issue 15's write row: `Publisher::write_raw_shard` of a 16 MiB shard (16 384 × 1 KiB)
    /// into a local root, a new shard each iteration, beside the ceiling: the same record bytes through a 1 MiB
    /// `BufWriter` into a new file, then fsync. Peak RSS is the `write_shard_rss` example's
    /// (a process per case); criterion measures time only.
    fn write_shard(c: &mut Criterion<Clock>) {
        let mut g = c.benchmark_group("facade/write_shard/16MiB");
        g.sample_size(10);
        let records: Vec<Vec<u8>> = {
            let mut rng = StdRng::seed_from_u64(16);
            (0..16 * 1024)
                .map(|_| random_bytes(&mut rng, RECORD))
                .collect()
        };
        g.throughput(Throughput::Bytes((records.len() * RECORD) as u64));
        let dir = BenchDir::from_env(Some("facade-write"));
        let mut n = 0u64;
        g.bench_function("ceiling_buffered_write", |b| {
            b.iter(|| {
                n += 1;
                let path = dir.path().join(format!("raw-{n}.bin"));
                let file = File::create(&path).expect("create");
                let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
                for r in &records {
                    out.write_all(r).expect("write");
                }
                out.into_inner().expect("flush").sync_all().expect("fsync");
                std::fs::remove_file(&path).expect("remove");
            })
        });
        // One root, opened (and its directories made) before the clock; each iteration writes
        // a new shard: encode, create-only temporary file, fsync, link, directory fsync.
        let root = dir.path().join("root");
        let publisher = Publisher::open(root.to_str().expect("UTF-8")).expect("open");
        g.bench_function("publisher_write_shard", |b| {
            b.iter(|| {
                n += 1;
                let meta = ShardMetadata::new("raw", "documents");
                let shard = publisher
                    .write_raw_shard("w", n, meta, &records)
                    .expect("write shard");
                assert_eq!(shard.record_count, records.len() as u64);
                std::fs::remove_file(root.join(&shard.key)).expect("remove");
            })
        });
        g.finish();
    }

    pub(crate) fn all(c: &mut Criterion<Clock>) {
        let f = Fixture::create(env_u64("GUIDELOOM_BENCH_RECORDS", 100_000));
        random_get(c, &f);
        get_many(c, &f);
        loader_epoch(c, &f);
        drop(f);
        write_shard(c);
    }

    criterion::criterion_group! {
        name = facade;
        config = guideloom_benchkit::config();
        targets = all
    }
}

#[cfg(unix)]
criterion::criterion_main!(unix::facade);

#[cfg(not(unix))]
fn main() {
    eprintln!("skipped: the facade bench compares against unix positioned reads (pread)");
}
