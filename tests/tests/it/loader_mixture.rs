//! Weighted mixtures through the Loader: shares held in every window, exact per-epoch counts
//! for `Choose`/`Repeat`, coverage of each source's records, weight schedules, resume across
//! world sizes 8 → 3 → 16 and at position 10^12, published datasets and ranges, and each
//! refused configuration.
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // test sizes are small

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use guideloom::{
    CborFormat, Dataset, Equalize, Error, Format, Loader, LoaderOptions, LoaderState, MemorySource,
    Mixture, PublishMode, Publisher, Ramp, Take, WeightSchedule,
};

/// Source `tag`'s records `0..n`: each is `[tag, index as 8 bytes LE]`.
fn tagged(tag: u8, n: u64) -> MemorySource {
    MemorySource::new(
        (0..n)
            .map(|i| {
                let mut v = vec![tag];
                v.extend_from_slice(&i.to_le_bytes());
                Bytes::from(v)
            })
            .collect(),
    )
}

/// Decodes `(tag, index)` and checks it is the record `mixture.locate(id)` names.
fn checked(
    mixture: &Mixture,
) -> impl Fn(u64, Bytes) -> Result<(u8, u64), Error> + Send + Sync + 'static {
    let m = mixture.clone();
    move |id, b: Bytes| {
        let got = (
            b[0],
            u64::from_le_bytes(b[1..9].try_into().expect("8 bytes")),
        );
        let (s, i) = m.locate(id).expect("an id of the mixture");
        assert_eq!(got, (s as u8, i), "id {id} is source {s}'s record {i}");
        Ok(got)
    }
}

/// The source of every position of `epoch` (one rank, plan only).
fn sources_of(mixture: &Mixture, opts: &LoaderOptions, epoch: u64) -> Vec<usize> {
    let loader = Loader::mixture(mixture.clone(), opts.clone(), |_i, b: Bytes| {
        Ok::<_, Error>(b)
    })
    .unwrap();
    let plan = loader.plan(epoch, 0);
    (0..plan.rank_batches())
        .flat_map(|k| plan.batch_records(k))
        .map(|id| mixture.locate(id).unwrap().0)
        .collect()
}

#[test]
fn two_sources_hold_their_share_within_one_sample_in_every_window_of_1000_batches() {
    let b = 16u64;
    let mixture = Mixture::new()
        .with_source(tagged(0, 5000), Take::Weight(0.7))
        .with_source(tagged(1, 700), Take::Weight(0.3))
        .with_epoch_size(3000 * b);
    let seq = sources_of(&mixture, &LoaderOptions::new(b).with_seed(3), 0);
    assert_eq!(seq.len() as u64, 3000 * b);
    let mut prefix = vec![0u64];
    for &s in &seq {
        prefix.push(prefix[prefix.len() - 1] + u64::from(s == 1));
    }
    let window = 1000 * b;
    let mut worst = 0.0f64;
    for start in (0..=3000 - 1000).map(|g| g * b) {
        let count = prefix[(start + window) as usize] - prefix[start as usize];
        worst = worst.max((count as f64 - window as f64 * 0.3).abs());
    }
    assert!(worst < 1.0, "off by {worst} samples");
    // And every single batch holds 4 or 5 of its 16 (0.3 · 16 = 4.8).
    for batch in seq.chunks(b as usize) {
        let n = batch.iter().filter(|&&s| s == 1).count();
        assert!((4..=5).contains(&n), "{n}");
    }
}

#[test]
fn choose_and_repeat_take_exact_counts_and_walk_through_each_source() {
    let mixture = Mixture::new()
        .with_source(tagged(0, 100), Take::Choose(50))
        .with_source(tagged(1, 30), Take::Repeat(2.0))
        .with_source(tagged(2, 7), Take::Repeat(0.5)); // floor(3.5 + 0.5) = 4 per epoch
    let opts = LoaderOptions::new(8).with_seed(11).with_workers(3);
    let loader = Loader::mixture(mixture.clone(), opts, checked(&mixture)).unwrap();
    let mut seen: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); 3];
    for epoch in 0..14 {
        let mut counts = [0u64; 3];
        for batch in loader.epoch(epoch).unwrap() {
            for (s, i) in batch.unwrap().records {
                counts[s as usize] += 1;
                *seen[s as usize].entry(i).or_default() += 1;
            }
        }
        assert_eq!(counts, [50, 60, 4], "epoch {epoch}");
        if epoch == 1 {
            // Two epochs of 50 are one pass over the 100 records: each once.
            assert_eq!(seen[0].len(), 100);
            assert!(seen[0].values().all(|&c| c == 1));
        }
    }
    // 14 epochs: source 0 seven passes, source 1 each record 28 times, source 2 eight passes.
    assert!(seen[0].values().all(|&c| c == 7));
    assert!(seen[1].values().all(|&c| c == 28));
    assert_eq!(seen[2].len(), 7);
    assert!(seen[2].values().all(|&c| c == 8));
}

#[test]
fn the_order_is_a_function_of_seed_and_epoch() {
    let mixture = Mixture::new()
        .with_source(tagged(0, 300), Take::Weight(2.0))
        .with_source(tagged(1, 300), Take::Weight(1.0))
        .with_source(tagged(2, 300), Take::Weight(1.0));
    let ids = |seed: u64, epoch: u64, workers: usize| -> Vec<u64> {
        let opts = LoaderOptions::new(7).with_seed(seed).with_workers(workers);
        let loader = Loader::mixture(mixture.clone(), opts, checked(&mixture)).unwrap();
        loader
            .epoch(epoch)
            .unwrap()
            .flat_map(|b| b.unwrap().indices)
            .collect()
    };
    let a = ids(1, 0, 1);
    assert_eq!(a.len(), 900);
    assert_eq!(a, ids(1, 0, 4), "workers change nothing");
    assert_ne!(a, ids(2, 0, 1), "another seed, another order");
    assert_ne!(a, ids(1, 1, 1), "another epoch, another order");
}

/// Runs `world` ranks from `state` for `batches` batches each (all of the rest when `None`);
/// returns what they delivered, keyed by global batch, and the state after.
fn run_world(
    mixture: &Mixture,
    base: &LoaderOptions,
    world: u64,
    state: LoaderState,
    batches: Option<usize>,
) -> (BTreeMap<u64, Vec<u64>>, LoaderState) {
    let mut got = BTreeMap::new();
    let mut states = Vec::new();
    for rank in 0..world {
        let opts = base
            .clone()
            .with_rank(rank, world)
            .with_workers(1 + rank as usize % 3);
        let loader = Loader::mixture(mixture.clone(), opts, checked(mixture)).unwrap();
        let mut epoch = loader.resume(&state).unwrap();
        for batch in epoch.by_ref().take(batches.unwrap_or(usize::MAX)) {
            let batch = batch.unwrap();
            assert!(got.insert(batch.batch, batch.indices).is_none());
        }
        states.push(epoch.state());
    }
    assert!(
        states.windows(2).all(|w| w[0] == w[1]),
        "ranks agree on the state"
    );
    (got, states[0])
}

#[test]
fn a_run_resumed_on_8_then_3_then_16_ranks_delivers_the_single_rank_sequence() {
    let mixture = Mixture::new()
        .with_source(tagged(0, 400), Take::Weight(0.5))
        .with_source(tagged(1, 150), Take::Weight(0.3))
        .with_range(tagged(2, 1000), 200..500, Take::Weight(0.2))
        .with_epoch_size(2000);
    let base = LoaderOptions::new(10).with_seed(77);
    let start = LoaderState {
        seed: 77,
        epoch: 2,
        consumed: 0,
    };
    let (single, end) = run_world(&mixture, &base, 1, start, None);
    assert_eq!(end.consumed, 2000);
    let (mut all, s1) = run_world(&mixture, &base, 8, start, Some(5));
    assert_eq!(s1.consumed, 400);
    let (more, s2) = run_world(&mixture, &base, 3, s1, Some(11));
    assert_eq!(s2.consumed, 400 + 330);
    let (rest, s3) = run_world(&mixture, &base, 16, s2, None);
    assert_eq!(s3.consumed, 2000);
    // Global batch numbers count from the resumed position: renumber them from 0.
    let mut joined: Vec<Vec<u64>> = all.into_values().collect();
    joined.extend(more.into_values());
    joined.extend(rest.into_values());
    all = BTreeMap::new();
    drop(all);
    assert_eq!(joined, single.into_values().collect::<Vec<_>>());
    // The range's ids are records 200..500 of the third source.
    assert!(
        joined
            .iter()
            .flatten()
            .filter_map(|&id| mixture.locate(id))
            .filter(|&(s, _)| s == 2)
            .all(|(_, i)| (200..500).contains(&i))
    );
}

#[test]
fn resuming_at_position_10_to_the_12_costs_one_batch() {
    let e = 2_000_000_000_000u64;
    let mixture = Mixture::new()
        .with_source(tagged(0, 1000), Take::Choose(e / 4 * 3))
        .with_source(tagged(1, 10), Take::Choose(e / 4));
    let opts = LoaderOptions::new(64).with_seed(5).with_workers(2);
    let loader = Loader::mixture(mixture.clone(), opts, checked(&mixture)).unwrap();
    let state = LoaderState {
        seed: 5,
        epoch: 0,
        consumed: 1_000_000_000_000,
    };
    let started = Instant::now();
    let batch = loader.resume(&state).unwrap().next().unwrap().unwrap();
    let took = started.elapsed();
    assert_eq!(
        batch.batch,
        state.consumed / 64,
        "global batch numbers are absolute"
    );
    let plan = loader.plan(0, 0);
    let at: Vec<u64> = (0..64)
        .map(|i| plan.record_at(state.consumed + i))
        .collect();
    assert_eq!(batch.indices, at);
    // 3:1 at every scale: 48 of 64 from source 0.
    assert_eq!(batch.records.iter().filter(|(s, _)| *s == 0).count(), 48);
    eprintln!("resume at 10^12 and one batch of 64: {took:?}");
}

#[test]
fn a_step_schedule_switches_at_its_step_across_epochs() {
    let b = 10u64;
    let schedule = WeightSchedule {
        points: vec![(7, vec![0.0, 1.0]), (12, vec![1.0, 1.0])],
        ramp: Ramp::Step,
    };
    let mixture = Mixture::new()
        .with_source(tagged(0, 100), Take::Weight(1.0))
        .with_source(tagged(1, 100), Take::Weight(0.0))
        .with_epoch_size(50)
        .with_schedule(schedule);
    let opts = LoaderOptions::new(b);
    let mut steps = Vec::new();
    for epoch in 0..3 {
        let seq = sources_of(&mixture, &opts, epoch);
        steps.extend(seq.chunks(b as usize).map(<[usize]>::to_vec));
    }
    assert!(
        steps[..7].iter().flatten().all(|&s| s == 0),
        "steps 0..7: the sources' weights"
    );
    assert!(
        steps[7..12].iter().flatten().all(|&s| s == 1),
        "steps 7..12: only source 1"
    );
    for step in &steps[12..] {
        assert_eq!(
            step.iter().filter(|&&s| s == 1).count(),
            5,
            "then half and half"
        );
    }
}

#[test]
fn a_linear_schedule_moves_the_share_in_stages() {
    let b = 100u64;
    let schedule = WeightSchedule {
        points: vec![(0, vec![1.0, 0.0]), (10, vec![0.0, 1.0])],
        ramp: Ramp::Linear { every: 2 },
    };
    let mixture = Mixture::new()
        .with_source(tagged(0, 50), Take::Weight(1.0))
        .with_source(tagged(1, 50), Take::Weight(1.0))
        .with_epoch_size(1400)
        .with_schedule(schedule);
    let seq = sources_of(&mixture, &LoaderOptions::new(b), 0);
    let share: Vec<usize> = seq
        .chunks(2 * b as usize)
        .map(|stage| stage.iter().filter(|&&s| s == 1).count())
        .collect();
    // Stages of 2 steps at weights 0, 0.2, 0.4, 0.6, 0.8 for source 1, then all of it.
    assert_eq!(share, [0, 40, 80, 120, 160, 200, 200]);
}

#[test]
fn a_mixture_of_published_datasets_reads_each_root() {
    let tmp = tempfile::tempdir().unwrap();
    let mut datasets = Vec::new();
    for (tag, n) in [(0u8, 300u64), (1, 120)] {
        let path = tmp.path().join(format!("root{tag}"));
        let publisher = Publisher::open(path.to_str().unwrap()).unwrap();
        let records: Vec<(u8, u64)> = (0..n).map(|i| (tag, i)).collect();
        let shards = records
            .chunks(50)
            .enumerate()
            .map(|(k, chunk)| publisher.write_shard("w", k as u64, chunk).unwrap())
            .collect();
        publisher
            .publish("mix", "v1", shards, PublishMode::Full)
            .unwrap();
        datasets.push(Dataset::open(path.to_str().unwrap()).unwrap());
    }
    let mixture = Mixture::new()
        .with_source(datasets[0].clone(), Take::Repeat(1.0))
        .with_range(datasets[1].clone(), 20..120, Take::Repeat(1.5));
    let m = mixture.clone();
    let cbor = CborFormat::<(u8, u64)>::new();
    let decode = move |id: u64, b: Bytes| -> Result<(u8, u64), guideloom::BoxError> {
        let got = cbor.decode(b)?;
        let (s, i) = m.locate(id).expect("an id of the mixture");
        assert_eq!(got, (s as u8, i), "id {id} is source {s}'s record {i}");
        Ok(got)
    };
    let options = LoaderOptions::new(32)
        .with_workers(2)
        .with_equalize(Equalize::Pad)
        .with_rank(1, 2);
    let loader = Loader::mixture(mixture.clone(), options, decode).unwrap();
    let mut counts = [0u64; 2];
    for batch in loader.epoch(0).unwrap() {
        for (s, _) in batch.unwrap().records {
            counts[s as usize] += 1;
        }
    }
    // 300 + 150 = 450 positions, 15 batches of 32, padded to 16 for 2 ranks: rank 1 has 8.
    assert_eq!(counts.iter().sum::<u64>(), 8 * 32);
    // Without padding, one rank: exactly 300 and 150.
    let loader = Loader::mixture(mixture.clone(), LoaderOptions::new(32), |id, _b: Bytes| {
        Ok::<u64, Error>(id)
    })
    .unwrap();
    let mut counts = [0u64; 2];
    for batch in loader.epoch(3).unwrap() {
        for id in batch.unwrap().records {
            counts[mixture.locate(id).unwrap().0] += 1;
        }
    }
    assert_eq!(counts, [300, 150]);
}

#[test]
fn bad_mixtures_are_refused_by_name() {
    let opts = LoaderOptions::new(4);
    let refused = |m: Mixture, says: &str| {
        let err = Loader::mixture(m, opts.clone(), |_i, b: Bytes| Ok::<_, Error>(b)).unwrap_err();
        assert!(matches!(err, Error::InvalidOptions { .. }), "{err}");
        assert!(err.to_string().contains(says), "{err} should say {says:?}");
    };
    refused(Mixture::new(), "at least one source");
    refused(
        Mixture::new()
            .with_source(tagged(0, 5), Take::Weight(1.0))
            .with_source(tagged(1, 5), Take::Choose(3)),
        "Take::Weight, or none",
    );
    refused(
        Mixture::new().with_source(tagged(0, 5), Take::Weight(f64::NAN)),
        "finite",
    );
    refused(
        Mixture::new().with_source(tagged(0, 5), Take::Weight(0.0)),
        "one positive",
    );
    refused(
        Mixture::new().with_source(tagged(0, 5), Take::Repeat(-1.0)),
        "repeat",
    );
    refused(
        Mixture::new().with_source(tagged(0, 5), Take::Choose(0)),
        "no samples",
    );
    refused(
        Mixture::new().with_range(tagged(0, 5), 2..9, Take::Weight(1.0)),
        "range 2..9",
    );
    refused(
        Mixture::new()
            .with_source(tagged(0, 5), Take::Weight(1.0))
            .with_source(tagged(1, 0), Take::Weight(1.0)),
        "no records",
    );
    let schedule = |points: Vec<(u64, Vec<f64>)>, ramp| WeightSchedule { points, ramp };
    let two = || {
        Mixture::new()
            .with_source(tagged(0, 5), Take::Weight(1.0))
            .with_source(tagged(1, 5), Take::Weight(1.0))
    };
    refused(
        two().with_schedule(schedule(vec![(3, vec![1.0])], Ramp::Step)),
        "1 weights for 2",
    );
    refused(
        two().with_schedule(schedule(
            vec![(3, vec![1.0, 1.0]), (3, vec![1.0, 0.0])],
            Ramp::Step,
        )),
        "increase strictly",
    );
    refused(
        two().with_schedule(schedule(
            vec![(0, vec![1.0, 0.0]), (u64::MAX / 8, vec![0.0, 1.0])],
            Ramp::Linear { every: 1 },
        )),
        "stages",
    );
    refused(
        Mixture::new()
            .with_source(tagged(0, 5), Take::Choose(2))
            .with_schedule(schedule(vec![(1, vec![1.0])], Ramp::Step)),
        "every source taken by Take::Weight",
    );
}

/// Records `(tag, i)` for `i < n` published as CBOR into `uri`, 40 per shard.
fn publish_tagged(uri: &str, tag: u8, n: u64) -> Dataset {
    let publisher = Publisher::open(uri).unwrap();
    let records: Vec<(u8, u64)> = (0..n).map(|i| (tag, i)).collect();
    let shards = records
        .chunks(40)
        .enumerate()
        .map(|(k, chunk)| publisher.write_shard("w", k as u64, chunk).unwrap())
        .collect();
    publisher
        .publish("mix", "v1", shards, PublishMode::Full)
        .unwrap();
    Dataset::open(uri).unwrap()
}

/// A batch's ids and its records, `(source tag, index)`.
type IdsAndRecords = (Vec<u64>, Vec<(u8, u64)>);

/// One epoch's batches, one worker that alone builds batches.
fn epoch_of(mixture: &Mixture, options: LoaderOptions) -> Vec<IdsAndRecords> {
    let cbor = CborFormat::<(u8, u64)>::new();
    let m = mixture.clone();
    let decode = move |id: u64, b: Bytes| -> Result<(u8, u64), guideloom::BoxError> {
        let got = cbor.decode(b)?;
        let (s, i) = m.locate(id).expect("an id of the mixture");
        assert_eq!(got, (s as u8, i), "id {id} is source {s}'s record {i}");
        Ok(got)
    };
    let options = options.with_workers(1).with_caller_builds(false);
    Loader::mixture(mixture.clone(), options, decode)
        .unwrap()
        .epoch(1)
        .unwrap()
        .map(|b| b.map(|b| (b.indices, b.records)))
        .collect::<guideloom::Result<_>>()
        .unwrap()
}

#[test]
fn remote_sources_read_their_shares_ahead_and_deliver_the_same_batches() {
    let uri = |tag: &str| format!("memory://{}", guideloom_tests::unique(tag));
    let mixture = Mixture::new()
        .with_source(publish_tagged(&uri("mix-a"), 0, 300), Take::Weight(0.5))
        .with_source(tagged_cbor(1, 50), Take::Weight(0.2)) // local: read when taken
        .with_range(
            publish_tagged(&uri("mix-b"), 2, 200),
            50..200,
            Take::Weight(0.3),
        );
    let options = LoaderOptions::new(16).with_seed(3);
    let ahead = epoch_of(&mixture, options.clone().with_read_ahead(4, 1 << 20));
    let direct = epoch_of(&mixture, options.with_read_ahead(0, 0));
    assert_eq!(ahead, direct);
    assert_eq!(ahead.iter().map(|(ids, _)| ids.len()).sum::<usize>(), 500);
}

/// `(tag, i)` records as CBOR, in memory.
fn tagged_cbor(tag: u8, n: u64) -> MemorySource {
    let cbor = CborFormat::<(u8, u64)>::new();
    let encode = |i: u64| {
        let mut out = Vec::new();
        cbor.encode(&(tag, i), &mut out).unwrap();
        Bytes::from(out)
    };
    MemorySource::new((0..n).map(encode).collect())
}

/// A mixture of an `http://` root behind a 20 ms link and a local source reads the remote
/// shares ahead: the same batches, with requests overlapped.
#[test]
fn a_far_source_of_a_mixture_is_read_ahead() {
    use std::time::Duration;

    use guideloom_faultproxy::{FaultProxy, Link, Script};

    let Some((url, served_root)) = guideloom_tests::nginx("mixture_far") else {
        return;
    };
    let subdir = guideloom_tests::unique("mixture-far");
    let dir = served_root.join(&subdir);
    struct Served(std::path::PathBuf);
    impl Drop for Served {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _served = Served(dir.clone());
    publish_tagged(dir.to_str().unwrap(), 0, 400);
    let link = Link::round_trip(Duration::from_millis(20));
    let proxy = FaultProxy::for_url_with(&url, Script::pass(), link).unwrap();
    let far = Dataset::open(&proxy.proxied(&format!("{url}{subdir}"))).unwrap();
    assert!(far.is_remote());
    let mixture = Mixture::new()
        .with_source(far, Take::Choose(320))
        .with_source(tagged_cbor(1, 80), Take::Repeat(1.0));
    let options = LoaderOptions::new(20).with_seed(8);
    let before = proxy.stats().connections;
    let ahead = epoch_of(&mixture, options.clone());
    let ahead_connections = proxy.stats().connections - before;
    let direct = epoch_of(&mixture, options.with_read_ahead(0, 0));
    assert_eq!(ahead, direct);
    assert_eq!(ahead.len(), 20);
    // One worker that alone builds: only the read-ahead puts two requests in flight.
    assert!(ahead_connections >= 2, "{ahead_connections} connections");
}
