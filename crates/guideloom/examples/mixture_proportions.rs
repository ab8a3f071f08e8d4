//! How close a mixture's batches keep to their weights, and what a resume costs.
//!
//! For a few mixtures it prints, per source, the largest `|count − share · window|` over
//! every window of 1 000 consecutive batches of 64 (the first 3 000 batches of an epoch),
//! then the time to build a loader, resume at position 10^12 and compute one batch (three
//! sources of 10^6 records), beside the same for one source of 3 · 10^6 records (the
//! ceiling: the single-source order is what a mixture adds its split to).
//!
//! `cargo run --release -p guideloom --example mixture_proportions`

use std::time::Instant;

use guideloom::{Bytes, Loader, LoaderOptions, MemorySource, Mixture, Take};

const BATCH: u64 = 64;
const BATCHES: u64 = 3000;
const WINDOW: usize = 1000;

fn source(n: usize) -> MemorySource {
    MemorySource::new(vec![Bytes::new(); n])
}

fn decode(_id: u64, _b: Bytes) -> Result<(), guideloom::Error> {
    Ok(())
}

/// The largest deviation per source over windows of `WINDOW` batches.
fn deviations(weights: &[f64]) -> Vec<f64> {
    let mut mixture = Mixture::new();
    for &w in weights {
        mixture = mixture.with_source(source(1000), Take::Weight(w));
    }
    let mixture = mixture.with_epoch_size(BATCH * BATCHES);
    let loader = Loader::mixture(mixture.clone(), LoaderOptions::new(BATCH), decode)
        .expect("a valid mixture");
    let plan = loader.plan(0, 0);
    let total: f64 = weights.iter().sum();
    // prefix[s][g]: source s's positions in batches 0..g.
    let mut prefix = vec![vec![0u64]; weights.len()];
    for k in 0..plan.rank_batches() {
        let mut counts = vec![0u64; weights.len()];
        for id in plan.batch_records(k) {
            counts[mixture.locate(id).expect("an id").0] += 1;
        }
        for (p, c) in prefix.iter_mut().zip(counts) {
            let last = p[p.len() - 1];
            p.push(last + c);
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let expected = |s: usize| (WINDOW as u64 * BATCH) as f64 * weights[s] / total;
    (0..weights.len())
        .map(|s| {
            (0..=prefix[s].len() - 1 - WINDOW)
                .map(|g| {
                    let count = prefix[s][g + WINDOW] - prefix[s][g];
                    #[allow(clippy::cast_precision_loss)]
                    let dev = (count as f64 - expected(s)).abs();
                    dev
                })
                .fold(0.0, f64::max)
        })
        .collect()
}

/// Median time of resuming at 10^12 and computing one batch, over `runs`.
fn resume_cost(make: impl Fn() -> Loader<()>, runs: usize) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let loader = make();
            let plan = loader.plan(0, 1_000_000_000_000);
            std::hint::black_box(plan.batch_records(0));
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn main() {
    println!("largest |count - share * window| over every window of {WINDOW} batches of {BATCH}:");
    for weights in [
        vec![0.7, 0.3],
        vec![0.5, 0.3, 0.2],
        vec![1.0, 1.0, 1.0],
        vec![0.6, 0.25, 0.1, 0.05],
        vec![0.45, 0.65, 0.79, 0.09, 0.03, 0.84, 0.43, 0.76],
    ] {
        let dev = deviations(&weights);
        let shown: Vec<String> = dev.iter().map(|d| format!("{d:.2}")).collect();
        println!("  weights {weights:?}: {}", shown.join(" / "));
    }
    let e = 2_000_000_000_000u64;
    let small = source(1_000_000);
    let mixed = || {
        let mixture = Mixture::new()
            .with_source(small.clone(), Take::Choose(e / 2))
            .with_source(small.clone(), Take::Choose(e / 4))
            .with_source(small.clone(), Take::Choose(e / 4));
        Loader::mixture(mixture, LoaderOptions::new(BATCH).with_seed(1), decode).expect("valid")
    };
    // The ceiling: one source of 3 000 000 records (a single source's epoch is its records,
    // so it resumes at position 2 * 10^6 rather than 10^12; the cost does not depend on it).
    let big = source(3_000_000);
    let single =
        || Loader::new(big.clone(), LoaderOptions::new(BATCH).with_seed(1), decode).expect("valid");
    let single_cost = {
        let mut times: Vec<f64> = (0..101)
            .map(|_| {
                let started = Instant::now();
                let loader = single();
                let plan = loader.plan(0, 2_000_000);
                std::hint::black_box(plan.batch_records(0));
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[50]
    };
    println!(
        "resume at position 10^12 and one batch of {BATCH}: mixture of 3 {:.1} us; single source \
         (position 2*10^6 of 3*10^6) {single_cost:.1} us",
        resume_cost(mixed, 101)
    );
}
