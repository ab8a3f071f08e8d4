//! Token windows over a stream dataset (issue 15, "Streams are datasets too"): one shuffled
//! epoch of 2048 + 1-token windows of `u16` tokens from a local root (mmap), through
//! `Dataset::tokens` one window at a time (record CRC off and on) and through the `Loader`
//! (`Loader::token_windows`, 1 and 2 workers), beside the ceiling in the same group: a raw
//! `pread` of the same byte ranges in the same order (two where a window spans shards).
//!
//! `cargo bench -p guideloom --bench tokens` (or through `cargo xtask bench`);
//! `GUIDELOOM_BENCH_TOKENS` (default 8 Mi tokens, 16 MiB) sets the stream size.

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::hint::black_box;
    use std::ops::Range;

    use criterion::{Criterion, Throughput};
    use guideloom::{
        Dataset, DatasetOptions, Loader, LoaderOptions, PublishMode, Publisher, ReadOptions,
        TokenWindows,
    };
    use guideloom_benchkit::{BenchDir, Clock, env_u64, pread, touch, warm_dir};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const WINDOW: u64 = 2048;
    const SHARDS: usize = 4;
    const BATCH: u64 = 16;

    struct Fixture {
        _dir: BenchDir,
        /// Record CRCs off, and on.
        fast: Dataset,
        checked: Dataset,
        files: Vec<File>,
        /// Cumulative token starts of the shards.
        starts: Vec<u64>,
        /// The epoch's windows, in the loader's order.
        order: Vec<u64>,
    }

    impl Fixture {
        fn create(tokens: u64) -> Fixture {
            let dir = BenchDir::from_env(Some("tokens"));
            let root = dir.path().join("root");
            let _ = std::fs::remove_dir_all(&root);
            let uri = root.to_str().expect("UTF-8 bench dir").to_owned();
            let publisher = Publisher::open(&uri).expect("publisher");
            let mut rng = StdRng::seed_from_u64(15);
            let mut docs: Vec<Vec<u16>> = Vec::new();
            let mut written = 0u64;
            while written < tokens {
                let len = rng.random_range(50..4000u64).min(tokens - written);
                docs.push((0..len).map(|_| rng.random()).collect());
                written += len;
            }
            let per = docs.len().div_ceil(SHARDS);
            let refs = docs
                .chunks(per)
                .enumerate()
                .map(|(n, c)| publisher.write_stream_shard("bench", n as u64, c))
                .collect::<guideloom::Result<Vec<_>>>()
                .expect("write shards");
            publisher
                .publish("tokens-bench", "s1", refs, PublishMode::Full)
                .expect("publish");
            let open = |verify| {
                let read = ReadOptions::default().with_verify_records(verify);
                Dataset::open_with(&uri, DatasetOptions::default().with_read(read)).expect("open")
            };
            let (fast, checked) = (open(false), open(true));
            let files = fast
                .snapshot()
                .shards()
                .iter()
                .map(|s| File::open(root.join(&s.key)).expect("open shard file"))
                .collect();
            let starts = fast.stream().expect("stream").table().starts().to_vec();
            let windows =
                TokenWindows::<u16>::with_next_token_labels(fast.clone(), WINDOW).expect("windows");
            let loader = Loader::token_windows(windows, LoaderOptions::new(BATCH).with_seed(7))
                .expect("loader");
            let plan = loader.plan(0, 0);
            let order = (0..plan.rank_batches())
                .flat_map(|k| plan.batch_records(k))
                .collect();
            warm_dir(&root);
            let f = Fixture {
                _dir: dir,
                fast,
                checked,
                files,
                starts,
                order,
            };
            // A fast wrong reader must not pass unnoticed.
            let all = docs.concat();
            for &k in f.order.iter().take(64) {
                let r = window(k);
                let want = &all[usize::try_from(r.start).unwrap()..usize::try_from(r.end).unwrap()];
                assert_eq!(&*f.fast.tokens::<u16>(r.clone()).expect("tokens"), want);
                let raw: Vec<u8> = f.pread_window(r).concat();
                let le: Vec<u8> = want.iter().flat_map(|t| t.to_le_bytes()).collect();
                assert_eq!(raw, le, "pread of window {k}");
            }
            f
        }

        /// Raw `pread`s of the byte ranges holding tokens `r` (one per shard spanned).
        fn pread_window(&self, r: Range<u64>) -> Vec<Vec<u8>> {
            let mut out = Vec::with_capacity(1);
            let mut at = r.start;
            while at < r.end {
                let s = self.starts.partition_point(|&b| b <= at) - 1;
                let end = r.end.min(self.starts[s + 1]);
                let local = (at - self.starts[s])..(end - self.starts[s]);
                // Data starts after the 16-byte header; u16 tokens are 2 bytes.
                out.push(pread(
                    &self.files[s],
                    16 + local.start * 2..16 + local.end * 2,
                ));
                at = end;
            }
            out
        }
    }

    fn window(k: u64) -> Range<u64> {
        k * WINDOW..k * WINDOW + WINDOW + 1
    }

    fn epoch(c: &mut Criterion<Clock>, f: &Fixture) {
        let mut g = c.benchmark_group("facade/tokens/window_2049_epoch");
        g.sample_size(10);
        g.throughput(Throughput::Bytes(f.order.len() as u64 * (WINDOW + 1) * 2));
        g.bench_function("ceiling_pread", |b| {
            b.iter(|| {
                let mut n = 0u64;
                for &k in &f.order {
                    n += f
                        .pread_window(window(k))
                        .iter()
                        .map(|p| touch(p))
                        .sum::<u64>();
                }
                black_box(n)
            })
        });
        for (name, ds) in [("tokens_crc_off", &f.fast), ("tokens_crc_on", &f.checked)] {
            g.bench_function(name, |b| {
                b.iter(|| {
                    let mut n = 0u64;
                    for &k in &f.order {
                        let got = ds.tokens::<u16>(window(k)).expect("tokens");
                        n += touch(got.as_bytes());
                    }
                    black_box(n)
                })
            });
        }
        for workers in [1, 2] {
            let windows = TokenWindows::<u16>::with_next_token_labels(f.fast.clone(), WINDOW)
                .expect("windows");
            let options = LoaderOptions::new(BATCH).with_seed(7).with_workers(workers);
            let loader = Loader::token_windows(windows, options).expect("loader");
            g.bench_function(format!("loader_{workers}workers_crc_off"), |b| {
                b.iter(|| {
                    let mut n = 0u64;
                    for batch in loader.epoch(0).expect("epoch") {
                        for w in batch.expect("batch").records {
                            n += touch(w.as_bytes());
                        }
                    }
                    black_box(n)
                })
            });
        }
        g.finish();
    }

    pub(crate) fn all(c: &mut Criterion<Clock>) {
        let f = Fixture::create(env_u64("GUIDELOOM_BENCH_TOKENS", 8 << 20));
        epoch(c, &f);
    }

    criterion::criterion_group! {
        name = tokens;
        config = guideloom_benchkit::config();
        targets = all
    }
}

#[cfg(unix)]
criterion::criterion_main!(unix::tokens);

#[cfg(not(unix))]
fn main() {
    eprintln!("skipped: the tokens bench compares against unix positioned reads (pread)");
}
