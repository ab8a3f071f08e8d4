//! Times the synchronous `Dataset::get` of a local root once its shards are open (the fast
//! path that reads on the calling thread): 10 shards of 10 000 records of 64 bytes, 1M
//! random gets per round, the best of several rounds, with mapped and with `pread` reads.
//!
//! ```text
//! cargo run --release -p guideloom-publish --example dataset_get_timing -- [rounds]
//! ```
//!
//! Nothing is asserted: the numbers compare builds of the same machine.
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // timing arithmetic

use std::hint::black_box;
use std::time::Instant;

use guideloom_format::ShardMetadata;
use guideloom_publish::{
    Dataset, DatasetOptions, LocalReads, PublicationOptions, PublishMode, PublishRequest, Registry,
    Root, RootOptions, StoreOptions,
};

const SHARDS: u64 = 10;
const PER_SHARD: u64 = 10_000;
const GETS: usize = 1_000_000;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(7, |a| a.parse().expect("rounds"));
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_owned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Registry::new()
            .resolve(&uri, &StoreOptions::default())
            .unwrap();
        let root = Root::new(store, RootOptions::default());
        let mut shards = Vec::new();
        for n in 0..SHARDS {
            let records = (0..PER_SHARD).map(|i| [(n * PER_SHARD + i) as u8; 64]);
            let meta = ShardMetadata::new("raw", "documents");
            shards.push(root.write_shard("w", n, meta, records).await.unwrap());
        }
        let request = PublishRequest {
            dataset_id: "d".into(),
            snapshot_id: "s".into(),
            shards,
            mode: PublishMode::Full,
            schema: None,
        };
        root.publish(&request, &PublicationOptions::default())
            .await
            .unwrap();
    });
    drop(rt);
    // Random indices (an LCG), the same for every build.
    let total = SHARDS * PER_SHARD;
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let indices: Vec<u64> = (0..GETS)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % total
        })
        .collect();
    for reads in [LocalReads::Mmap, LocalReads::Pread] {
        let options = DatasetOptions::default().with_store(StoreOptions {
            local_reads: reads,
            ..StoreOptions::default()
        });
        let ds = Dataset::open_with(&uri, options).unwrap();
        for n in 0..SHARDS {
            ds.get(n * PER_SHARD).unwrap(); // opens every shard
        }
        let mut best = f64::MAX;
        for _ in 0..rounds {
            let start = Instant::now();
            for &i in &indices {
                black_box(ds.get(black_box(i)).unwrap());
            }
            best = best.min(start.elapsed().as_nanos() as f64 / GETS as f64);
        }
        println!("{reads:?}: Dataset::get best {best:.1} ns over {rounds} rounds of {GETS}");
    }
}
