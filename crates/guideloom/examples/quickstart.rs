//! Quickstart: write records → publish a snapshot → open the dataset → read it → train-loop
//! batches with the Loader. Everything in a fresh temporary directory; no server needed.
//!
//! `cargo run -p guideloom --example quickstart`

use guideloom::{CborFormat, Dataset, Loader, LoaderOptions, PublishMode, Publisher};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Sample {
    text: String,
    label: u8,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("captures");
    let root = root.to_str().ok_or("non-UTF-8 temp path")?;

    // 1. Write and publish: 1000 CBOR records in shards of 250, snapshot "v1".
    let records: Vec<Sample> = (0..1000u32)
        .map(|i| Sample {
            text: format!("sample {i}"),
            label: u8::try_from(i % 10).unwrap_or(0),
        })
        .collect();
    // Publisher is synchronous (it owns a small runtime): no async code here.
    let publisher = Publisher::open(root)?;
    let shards = records
        .chunks(250)
        .zip(0u64..)
        .map(|(chunk, n)| publisher.write_shard("writer-0", n, chunk))
        .collect::<Result<Vec<_>, _>>()?;
    let snapshot = publisher.publish("captures", "v1", shards, PublishMode::Full)?;
    println!(
        "published snapshot {} with {} records in {} shards under {root}",
        snapshot.id(),
        snapshot.total_records(),
        snapshot.shards().len()
    );

    // 2. Open (latest snapshot) and read: by index, many at once, in order.
    let ds = Dataset::open(root)?;
    let s: Sample = ds.get_as(42)?;
    assert_eq!(s, records[42]);
    println!("record 42: {s:?}");
    let many = ds.get_many(&[999, 0, 500])?;
    println!(
        "get_many: {} records, {} bytes",
        many.len(),
        many.iter().map(|b| b.len()).sum::<usize>()
    );
    let labels: u64 = ds
        .iter_as::<Sample>()
        .map(|r| r.map(|s| u64::from(s.label)))
        .sum::<Result<u64, _>>()?;
    println!("sum of labels over an in-order pass: {labels}");

    // 3. Train-loop batches: shuffled by (seed, epoch), 2 workers, rank 0 of 1.
    let loader = Loader::with_format(
        ds.clone(),
        LoaderOptions::new(64).with_seed(2024).with_workers(2),
        CborFormat::<Sample>::new(),
    )?;
    let mut epoch = loader.epoch(0)?;
    let first = epoch.next().ok_or("empty epoch")??;
    println!(
        "first batch of epoch 0: {} records, indices start {:?}",
        first.records.len(),
        &first.indices[..4]
    );
    let state = epoch.state();
    println!(
        "resumable state after one batch: {}",
        serde_json::to_string(&state)?
    );
    let rest: usize = epoch
        .map(|b| b.map(|b| b.records.len()))
        .sum::<Result<usize, _>>()?;
    assert_eq!(first.records.len() + rest, 1000);
    println!(
        "epoch 0 delivered {} records; quickstart OK",
        first.records.len() + rest
    );
    Ok(())
}
