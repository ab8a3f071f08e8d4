//! Compaction throughput on a local root of small shards, beside a ceiling measured in the
//! same run: a plain sequential copy of the same shard files with `std::fs` (read each
//! whole, append it to an output file, a new output file every target size, fsync each).
//!
//! `cargo run --release -p guideloom-publish --example compact_timing -- DIR [MIB] [SHARD_KIB] [RECORD_BYTES]`
//! (defaults: 1024 MiB of 256 KiB shards of 1 KiB records). DIR is emptied first. Without
//! arguments it runs on 16 MiB in a temporary directory (a smoke run, not a measurement).

#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // timing arithmetic

use std::io::Write;
use std::time::Instant;

use guideloom_format::ShardMetadata;
use guideloom_publish::{
    CompactRequest, PublicationOptions, PublishMode, PublishRequest, Root, RootOptions,
    StoreOptions,
};

const TARGET: u64 = 256 << 20;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map_or(default, |a| a.parse().expect("a number"))
}

/// Copies `files` into `out`, a new file each [`TARGET`] bytes, each fsynced: the ceiling.
fn copy(files: &[std::path::PathBuf], out: &std::path::Path) -> u64 {
    std::fs::create_dir_all(out).unwrap();
    let (mut n, mut written, mut total) = (0, 0u64, 0u64);
    let mut file = std::fs::File::create(out.join("0")).unwrap();
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        if written + bytes.len() as u64 > TARGET {
            file.sync_all().unwrap();
            n += 1;
            file = std::fs::File::create(out.join(n.to_string())).unwrap();
            written = 0;
        }
        file.write_all(&bytes).unwrap();
        written += bytes.len() as u64;
        total += bytes.len() as u64;
    }
    file.sync_all().unwrap();
    total
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> guideloom_publish::Result<()> {
    // Without DIR (as `cargo xtask ci`'s examples step runs it): a temporary directory and
    // a small root, so the example is exercised; the measurement takes DIR and 1 GiB.
    let scratch = tempfile::tempdir().unwrap();
    let (dir, default_mib) = match std::env::args().nth(1) {
        Some(d) => (std::path::PathBuf::from(d), 1024),
        None => (scratch.path().join("compact"), 16),
    };
    let (mib, shard_kib, record) = (arg(2, default_mib), arg(3, 256), arg(4, 1024));
    let _ = std::fs::remove_dir_all(&dir);
    let root_dir = dir.join("root");
    std::fs::create_dir_all(&root_dir).unwrap();
    let root = Root::open(
        root_dir.to_str().unwrap(),
        &StoreOptions::default(),
        RootOptions::default(),
    )?;
    let per_shard = (shard_kib << 10) / record;
    let shards_n = (mib << 20) / (shard_kib << 10);
    let started = Instant::now();
    let mut shards = Vec::new();
    for s in 0..shards_n {
        let records = (0..per_shard).map(|r| vec![(s * 7 + r) as u8; record as usize]);
        shards.push(
            root.write_shard("w", s, ShardMetadata::new("raw", "documents"), records)
                .await?,
        );
    }
    let request = PublishRequest {
        dataset_id: "d".into(),
        snapshot_id: "s1".into(),
        shards,
        mode: PublishMode::Full,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await?;
    let source = root.snapshot("s1").await?;
    let bytes: u64 = source.shards().iter().map(|s| s.size).sum();
    println!(
        "wrote {} shards, {} records, {:.1} MB in {:.1} s",
        shards_n,
        source.total_records(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let files: Vec<_> = source
        .shards()
        .iter()
        .map(|s| root_dir.join(&s.key))
        .collect();
    let rate = |b: u64, s: f64| b as f64 / s / 1e6;
    for round in 0..2 {
        let t = Instant::now();
        let copied = copy(&files, &dir.join(format!("copy{round}")));
        let ceiling = t.elapsed().as_secs_f64();
        let id = format!("c{round}");
        let request = CompactRequest::new(&id).with_target_shard_bytes(TARGET);
        let done = root.compact(Some("s1"), &request).await?;
        let secs = done.elapsed.as_secs_f64();
        println!(
            "round {round}: ceiling copy {:.1} MB in {ceiling:.2} s = {:.0} MB/s; compaction {} -> {} shards, {:.1} MB in {secs:.2} s = {:.0} MB/s ({:.2} of the ceiling)",
            copied as f64 / 1e6,
            rate(copied, ceiling),
            done.input_shards,
            done.output_shards,
            done.input_bytes as f64 / 1e6,
            rate(done.input_bytes, secs),
            rate(done.input_bytes, secs) / rate(copied, ceiling),
        );
        std::fs::remove_dir_all(dir.join(format!("copy{round}"))).unwrap();
    }
    Ok(())
}
