//! Peak memory and throughput of writing one shard to a local root through [`Publisher`],
//! beside a raw buffered write of the same bytes to a file in the same run.
//!
//! ```text
//! cargo run --release -p guideloom --example write_shard_rss -- [DIR] [MIB] [REPS]
//! ```
//!
//! Each case runs in its own child process (so each peak RSS, read from `VmHWM` in
//! `/proc/self/status`, is that case's alone): a raw `BufWriter` write of the record bytes to
//! a file (then fsync), and `Publisher::write_raw_shard` (the raw-bytes form of
//! `Publisher::write_shard`; both go through `Root::write_shard`) of the same records to a fresh local
//! root under `DIR` (default: the system's temporary directory), for two shapes of a
//! `MIB`-MiB shard: 1 Ki x 1 KiB and 4 x 256 KiB records per MiB. The defaults (64 MiB, one
//! run) keep `cargo xtask ci`'s run of every example short; the measurement in
//! `docs/ARCHITECTURE.md` is `-- DIR 1024 5` (a 1 GiB shard, median of 5). The records are
//! slices of one pool of pseudo-random bytes, so producing them costs nothing in either case.
//! Linux only (it reads `/proc`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use guideloom::{Publisher, ShardMetadata};

const POOL: usize = 4 << 20;

fn pool() -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..POOL)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Record `i` of size `len`: a slice of the pool at a position that varies with `i`.
fn record(pool: &[u8], i: usize, len: usize) -> &[u8] {
    let start = (i.wrapping_mul(7919) * 64) % (pool.len() - len);
    &pool[start..start + len]
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn run_case(case: &str, dir: &Path, count: usize, len: usize) {
    let pool = pool();
    let records = (0..count).map(|i| record(&pool, i, len));
    let start = Instant::now();
    let bytes = match case {
        "raw" => {
            let path = dir.join("raw.bin");
            let file = std::fs::File::create(&path).expect("create raw file");
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let mut n = 0u64;
            for r in records {
                out.write_all(r).expect("write");
                n += r.len() as u64;
            }
            let file = out.into_inner().expect("flush");
            file.sync_all().expect("fsync");
            n
        }
        "publisher" => {
            let root = dir.join("root");
            let publisher = Publisher::open(root.to_str().expect("utf-8 path")).expect("open");
            let shard = publisher
                .write_raw_shard("w", 0, ShardMetadata::new("raw", "documents"), records)
                .expect("write shard");
            assert_eq!(shard.record_count, count as u64);
            shard.size
        }
        other => panic!("unknown case {other}"),
    };
    let secs = start.elapsed().as_secs_f64();
    println!("{case} {count} {len} {bytes} {secs:.3} {}", peak_rss_kib());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--case") {
        let dir = PathBuf::from(&args[3]);
        run_case(
            &args[2],
            &dir,
            args[4].parse().unwrap(),
            args[5].parse().unwrap(),
        );
        return;
    }
    let base = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let mib: usize = args.get(2).map_or(64, |m| m.parse().expect("MIB"));
    let reps: usize = args.get(3).map_or(1, |r| r.parse().expect("REPS"));
    let exe = std::env::current_exe().expect("current exe");
    println!("median of {reps} runs, alternating; peak RSS is the largest of the runs");
    println!("case        records  record   MiB/s  peak RSS MiB  ratio to raw");
    for (count, len) in [(mib << 10, 1usize << 10), (mib << 2, 256 << 10)] {
        let mut rates = [Vec::new(), Vec::new()];
        let mut rss = [0f64; 2];
        for _ in 0..reps {
            for (c, case) in ["raw", "publisher"].into_iter().enumerate() {
                let dir = tempfile::tempdir_in(&base).expect("temporary directory");
                let out = std::process::Command::new(&exe)
                    .args(["--case", case])
                    .arg(dir.path())
                    .args([count.to_string(), len.to_string()])
                    .output()
                    .expect("run case");
                assert!(
                    out.status.success(),
                    "{case}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let line = String::from_utf8_lossy(&out.stdout);
                let f: Vec<&str> = line.split_whitespace().collect();
                let bytes: f64 = f[3].parse().expect("bytes");
                let secs: f64 = f[4].parse().expect("seconds");
                rates[c].push(bytes / secs / f64::from(1u32 << 20));
                rss[c] = rss[c].max(f[5].parse::<f64>().expect("rss") / 1024.0);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let raw = median(&mut rates[0]);
        let publisher = median(&mut rates[1]);
        println!(
            "raw        {count:>8} {len:>7} {raw:>7.0} {:>12.1}  1.00",
            rss[0]
        );
        println!(
            "publisher  {count:>8} {len:>7} {publisher:>7.0} {:>12.1}  {:.2}",
            rss[1],
            publisher / raw
        );
    }
}
