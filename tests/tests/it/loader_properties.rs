//! Properties of the guideloom Loader over in-memory sources: exactly-once across ranks,
//! equalisation, determinism, elastic invariance, resume equivalence, bounded prefetch,
//! errors and panics surfacing (never a hang), and prompt shutdown.
#![allow(clippy::cast_possible_truncation)] // test sizes are small

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use bytes::Bytes;
use guideloom::{
    Equalize, Error, Loader, LoaderOptions, LoaderState, MemorySource, RecordSource, ShuffleMode,
};
use proptest::prelude::*;

/// Records `0..n`, each the 8-byte little-endian of its index.
fn source(n: u64) -> MemorySource {
    MemorySource::new(
        (0..n)
            .map(|i| Bytes::from(i.to_le_bytes().to_vec()))
            .collect(),
    )
}

fn sharded(sizes: &[u64], remote: bool) -> MemorySource {
    let n: u64 = sizes.iter().sum();
    source(n).with_shards(sizes, remote).unwrap()
}

fn decode(i: u64, b: Bytes) -> Result<u64, Error> {
    let v = u64::from_le_bytes(b[..].try_into().expect("8 bytes"));
    assert_eq!(v, i, "the loader decodes the record it asked for");
    Ok(v)
}

/// Every batch of one rank's epoch: (global batch number, records).
fn run_rank<S: RecordSource + Clone>(
    src: &S,
    opts: &LoaderOptions,
    epoch: u64,
) -> Vec<(u64, Vec<u64>)> {
    let loader = Loader::new(src.clone(), opts.clone(), decode).unwrap();
    loader
        .epoch(epoch)
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            assert_eq!(b.indices, b.records);
            (b.batch, b.records)
        })
        .collect()
}

/// The global sequence: all ranks' batches merged by global batch number.
fn global_sequence<S: RecordSource + Clone>(src: &S, opts: &LoaderOptions, epoch: u64) -> Vec<u64> {
    let mut by_batch = BTreeMap::new();
    for rank in 0..opts.world_size {
        let o = opts.clone().with_rank(rank, opts.world_size);
        for (b, recs) in run_rank(src, &o, epoch) {
            assert!(
                by_batch.insert(b, recs).is_none(),
                "batch {b} delivered twice"
            );
        }
    }
    let expected: Vec<u64> = (0..by_batch.len() as u64).collect();
    assert_eq!(by_batch.keys().copied().collect::<Vec<_>>(), expected);
    by_batch.into_values().flatten().collect()
}

fn mode_strategy() -> impl Strategy<Value = ShuffleMode> {
    prop_oneof![
        Just(ShuffleMode::Full),
        Just(ShuffleMode::Sequential),
        (1u32..4).prop_map(|window| ShuffleMode::ShardWindow { window }),
        Just(ShuffleMode::Auto),
    ]
}

fn shard_sizes(n: u64, cut: u64) -> Vec<u64> {
    let cut = cut.max(1);
    let mut sizes = vec![cut; (n / cut) as usize];
    if !n.is_multiple_of(cut) {
        sizes.push(n % cut);
    }
    if sizes.is_empty() {
        sizes.push(0);
    }
    sizes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_record_exactly_once_across_ranks(
        n in 0u64..150, world in 1u64..6, batch in 1u64..13, drop_last: bool,
        workers in 1usize..4, seed: u64, epoch in 0u64..4, mode in mode_strategy(),
        cut in 1u64..40, remote: bool,
    ) {
        let src = sharded(&shard_sizes(n, cut), remote);
        let opts = LoaderOptions::new(batch).with_seed(seed).with_workers(workers).with_shuffle(mode)
            .with_drop_last(drop_last).with_rank(0, world);
        let mut counts = Vec::new();
        let mut all = Vec::new();
        for rank in 0..world {
            let o = opts.clone().with_rank(rank, world);
            let batches = run_rank(&src, &o, epoch);
            counts.push(batches.len());
            for (_, recs) in batches {
                prop_assert!(recs.len() as u64 <= batch);
                if drop_last { prop_assert_eq!(recs.len() as u64, batch); }
                all.extend(recs);
            }
        }
        all.sort_unstable();
        let expected_len = if drop_last { n / batch * batch } else { n };
        prop_assert_eq!(all.len() as u64, expected_len);
        let before = all.len();
        all.dedup();
        prop_assert_eq!(all.len(), before, "no duplicates");
        if !drop_last {
            prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
        }
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        prop_assert!(hi - lo <= 1, "uneven by at most one batch: {counts:?}");
    }

    #[test]
    fn equalisation_gives_every_rank_the_same_batch_count(
        n in 0u64..120, world in 1u64..6, batch in 1u64..11, drop_last: bool,
        pad: bool, seed: u64,
    ) {
        let src = source(n);
        let eq = if pad { Equalize::Pad } else { Equalize::Drop };
        let opts = LoaderOptions::new(batch).with_seed(seed).with_drop_last(drop_last).with_equalize(eq);
        let mut counts = Vec::new();
        let mut all = Vec::new();
        for rank in 0..world {
            let batches = run_rank(&src, &opts.clone().with_rank(rank, world), 1);
            counts.push(batches.len());
            for (_, recs) in batches {
                if pad || drop_last { prop_assert_eq!(recs.len() as u64, batch, "full batches"); }
                all.extend(recs);
            }
        }
        prop_assert!(counts.iter().all(|&c| c == counts[0]), "equal counts: {counts:?}");
        let mut distinct = all.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if pad {
            // Every record at least once (except what drop_last drops from the real records).
            let full = if drop_last { n / batch * batch } else { n };
            prop_assert!(distinct.len() as u64 >= full);
            if !drop_last { prop_assert_eq!(distinct, (0..n).collect::<Vec<_>>()); }
        } else {
            prop_assert_eq!(distinct.len(), all.len(), "drop never duplicates");
            // docs/loader.md: keep the largest multiple of world_size global batches.
            let batches = if drop_last { n / batch } else { n.div_ceil(batch) };
            let base = if drop_last { batches * batch } else { n };
            prop_assert_eq!(all.len() as u64, base.min(batches / world * world * batch));
        }
    }

    #[test]
    fn global_sequence_is_the_same_for_any_world_size_and_worker_count(
        n in 0u64..150, w1 in 1u64..6, w2 in 1u64..6, k1 in 1usize..4, k2 in 1usize..4,
        batch in 1u64..13, seed: u64, mode in mode_strategy(), cut in 1u64..40,
        drop_last: bool, ordered: bool, caller_builds: bool,
    ) {
        let src = sharded(&shard_sizes(n, cut), true);
        let a = LoaderOptions::new(batch).with_seed(seed).with_shuffle(mode).with_drop_last(drop_last)
            .with_workers(k1).with_rank(0, w1).with_ordered(ordered).with_caller_builds(caller_builds);
        let b = a.clone().with_workers(k2).with_rank(0, w2).with_ordered(true).with_caller_builds(!caller_builds);
        let sa = global_sequence(&src, &a, 5);
        let sb = global_sequence(&src, &b, 5);
        prop_assert_eq!(&sa, &sb);
        // And it is the plan's pure order.
        let plan = Loader::new(src.clone(), a, decode).unwrap().plan(5, 0);
        let pure: Vec<u64> = (0..plan.total_positions()).map(|p| plan.record_at(p)).collect();
        prop_assert_eq!(sa, pure);
    }

    #[test]
    fn resume_delivers_exactly_the_rest(
        n in 1u64..150, world in 1u64..4, batch in 1u64..9, seed: u64, take in 0u64..30,
        w1 in 1usize..4, w2 in 1usize..4, world2 in 1u64..4, eq in 0u8..3, caller_builds: bool,
    ) {
        let equalize = [Equalize::None, Equalize::Pad, Equalize::Drop][usize::from(eq)];
        let src = source(n);
        let opts = LoaderOptions::new(batch).with_seed(seed).with_rank(0, world).with_equalize(equalize)
            .with_caller_builds(caller_builds);
        // Uninterrupted, all ranks.
        let full = global_sequence(&src, &opts.clone().with_workers(w1), 2);
        // Interrupted: every rank takes `take` batches (lockstep), then saves its state.
        let mut prefix: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut states = Vec::new();
        for rank in 0..world {
            let loader = Loader::new(src.clone(), opts.clone().with_workers(w1).with_rank(rank, world), decode)
                .unwrap();
            let mut ep = loader.epoch(2).unwrap();
            for b in ep.by_ref().take(take as usize) {
                let b = b.unwrap();
                prefix.insert(b.batch, b.records);
            }
            states.push(serde_json::to_string(&ep.state()).unwrap());
        }
        prop_assert!(states.iter().all(|s| *s == states[0]), "ranks agree on the state");
        let state: LoaderState = serde_json::from_str(&states[0]).unwrap();
        // Resume on the same world size with another worker count: exact continuation.
        let mut rest: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for rank in 0..world {
            let loader = Loader::new(src.clone(), opts.clone().with_workers(w2).with_rank(rank, world), decode)
                .unwrap();
            for b in loader.resume(&state).unwrap() {
                let b = b.unwrap();
                prop_assert!(!prefix.contains_key(&b.batch), "no replay of batch {}", b.batch);
                rest.insert(b.batch, b.records);
            }
        }
        let joined: Vec<u64> = prefix.into_values().chain(rest.into_values()).flatten().collect();
        prop_assert_eq!(&joined, &full);
        // Elastic resume (another world size): the real records of the rest are the same.
        if equalize == Equalize::None {
            let mut elastic = BTreeMap::new();
            for rank in 0..world2 {
                let o = opts.clone().with_workers(w2).with_rank(rank, world2);
                for b in Loader::new(src.clone(), o, decode).unwrap().resume(&state).unwrap() {
                    let b = b.unwrap();
                    elastic.insert(b.batch, b.records);
                }
            }
            let tail: Vec<u64> = elastic.into_values().flatten().collect();
            let consumed = usize::try_from(state.consumed).unwrap();
            prop_assert_eq!(&tail[..], &full[consumed..]);
        }
    }
}

#[test]
fn same_seed_and_epoch_give_the_same_order_and_other_epochs_differ() {
    let src = source(1000);
    let opts = LoaderOptions::new(10).with_seed(99).with_workers(3);
    let a = global_sequence(&src, &opts, 0);
    let b = global_sequence(&src, &opts.clone().with_workers(1), 0);
    let c = global_sequence(&src, &opts, 1);
    let d = global_sequence(&src, &opts.clone().with_seed(100), 0);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a, d);
    assert_ne!(a, (0..1000).collect::<Vec<_>>(), "shuffled");
}

#[test]
fn shard_window_batches_stay_in_few_shards_and_auto_picks_it_for_remote_sources() {
    let sizes = vec![50u64; 40];
    let bounds: Vec<u64> = (0..=40).map(|s| s * 50).collect();
    let shards_of = |recs: &[u64]| {
        let mut s: Vec<usize> = recs
            .iter()
            .map(|&r| bounds.partition_point(|&b| b <= r) - 1)
            .collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    for (remote, mode, max_shards) in [
        (true, ShuffleMode::Auto, 8),
        (false, ShuffleMode::ShardWindow { window: 2 }, 4),
    ] {
        let src = sharded(&sizes, remote);
        let opts = LoaderOptions::new(32).with_seed(3).with_shuffle(mode);
        for (_, recs) in run_rank(&src, &opts, 0) {
            assert!(
                shards_of(&recs) <= max_shards,
                "{mode:?}: {}",
                shards_of(&recs)
            );
        }
    }
    // Local + Auto is a full permutation: batches spread over many shards.
    let src = sharded(&sizes, false);
    let batches = run_rank(&src, &LoaderOptions::new(32).with_seed(3), 0);
    let spread: usize = batches.iter().map(|(_, r)| shards_of(r)).max().unwrap();
    assert!(spread > 8, "full permutation spreads: {spread}");
}

#[test]
fn unordered_delivery_delivers_every_batch_once() {
    let src = source(500);
    let opts = LoaderOptions::new(7)
        .with_seed(1)
        .with_workers(3)
        .with_ordered(false);
    let loader = Loader::new(src, opts, decode).unwrap();
    let mut batches: Vec<u64> = loader.epoch(0).unwrap().map(|b| b.unwrap().batch).collect();
    batches.sort_unstable();
    assert_eq!(batches, (0..72).collect::<Vec<_>>());
}

/// Counts batches fetched but not yet handed to the consumer.
#[derive(Clone)]
struct Counting {
    inner: MemorySource,
    fetched: Arc<AtomicU64>,
    delivered: Arc<AtomicU64>,
    max_outstanding: Arc<AtomicU64>,
}

impl RecordSource for Counting {
    type Error = guideloom::Error;

    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn get_many(&self, indices: &[u64]) -> guideloom::Result<Vec<Bytes>> {
        let fetched = self.fetched.fetch_add(1, Ordering::SeqCst) + 1;
        let outstanding = fetched - self.delivered.load(Ordering::SeqCst);
        self.max_outstanding
            .fetch_max(outstanding, Ordering::SeqCst);
        self.inner.get_many(indices)
    }
}

#[test]
fn prefetch_bounds_the_batches_held() {
    for (workers, prefetch, caller_builds) in [
        (1usize, 0usize, false),
        (1, 0, true),
        (3, 1, true),
        (4, 4, false),
        (4, 4, true),
    ] {
        let src = Counting {
            inner: source(400),
            fetched: Arc::default(),
            delivered: Arc::default(),
            max_outstanding: Arc::default(),
        };
        let opts = LoaderOptions::new(4)
            .with_workers(workers)
            .with_prefetch(prefetch)
            .with_caller_builds(caller_builds);
        let loader = Loader::new(src.clone(), opts, decode).unwrap();
        for b in loader.epoch(0).unwrap() {
            b.unwrap();
            // A slow consumer: workers run ahead as far as the bound lets them.
            std::thread::sleep(Duration::from_millis(1));
            src.delivered.fetch_add(1, Ordering::SeqCst);
        }
        // The loader holds at most prefetch + workers batches not yet returned by next();
        // the consumer's counter lags by the one batch in its hand.
        let max = src.max_outstanding.load(Ordering::SeqCst);
        assert!(
            max <= (prefetch + workers + 1) as u64,
            "{workers}/{prefetch}: {max}"
        );
    }
}

/// A source whose reads on the loader's worker threads wait until the gate opens; reads on
/// any other thread (the caller's) answer at once. Records which threads read.
#[derive(Clone)]
struct Gated {
    inner: MemorySource,
    open: Arc<(Mutex<bool>, std::sync::Condvar)>,
    on_caller: Arc<AtomicU64>,
    on_workers: Arc<AtomicU64>,
}

impl Gated {
    fn new(n: u64) -> Gated {
        Gated {
            inner: source(n),
            open: Arc::default(),
            on_caller: Arc::default(),
            on_workers: Arc::default(),
        }
    }
    fn open_gate(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

impl RecordSource for Gated {
    type Error = guideloom::Error;

    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn get_many(&self, indices: &[u64]) -> guideloom::Result<Vec<Bytes>> {
        let worker = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("guideloom-loader-"));
        if worker {
            let mut open = self.open.0.lock().unwrap();
            while !*open {
                open = self.open.1.wait(open).unwrap();
            }
            self.on_workers.fetch_add(1, Ordering::SeqCst);
        } else {
            self.on_caller.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.get_many(indices)
    }
}

#[test]
fn the_caller_builds_batches_while_the_workers_are_stuck_and_only_then() {
    // Workers blocked: with caller_builds every batch the window allows is built on the
    // caller's thread, in order; the workers' batches arrive once they are let go.
    let src = Gated::new(40);
    let opts = LoaderOptions::new(4)
        .with_workers(1)
        .with_prefetch(1)
        .with_seed(3);
    let loader = Loader::new(src.clone(), opts.clone(), decode).unwrap();
    let expected: Vec<u64> = {
        let plan = loader.plan(0, 0);
        (0..plan.total_positions())
            .map(|p| plan.record_at(p))
            .collect()
    };
    let mut epoch = loader.epoch(0).unwrap();
    let mut got = Vec::new();
    // The worker holds batch 0 (stuck); the caller builds 1 (the window of prefetch 1 +
    // 1 worker is then full) and must wait for 0: let the worker go only then.
    let first = std::thread::scope(|s| {
        let opener = s.spawn(|| {
            while src.on_caller.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            src.open_gate();
        });
        let first = epoch.next().unwrap().unwrap();
        opener.join().unwrap();
        first
    });
    got.extend(first.records);
    for b in epoch.by_ref() {
        got.extend(b.unwrap().records);
    }
    assert_eq!(got, expected, "the order is the plan's whoever builds");
    let (caller, workers) = (
        src.on_caller.load(Ordering::SeqCst),
        src.on_workers.load(Ordering::SeqCst),
    );
    assert_eq!(caller + workers, 10, "every batch built once");
    assert!(caller >= 1, "the caller built while the worker was stuck");

    // caller_builds(false): every read is a worker's.
    let src = Gated::new(40);
    src.open_gate();
    let loader = Loader::new(src.clone(), opts.with_caller_builds(false), decode).unwrap();
    let all: Vec<u64> = loader
        .epoch(0)
        .unwrap()
        .flat_map(|b| b.unwrap().records)
        .collect();
    assert_eq!(all, expected);
    assert_eq!(src.on_caller.load(Ordering::SeqCst), 0);
    assert_eq!(src.on_workers.load(Ordering::SeqCst), 10);
}

/// Runs `f` on a thread and waits for it with a generous hang guard (not a timing assertion).
fn no_hang<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the loader hung")
}

#[test]
fn decode_errors_and_panics_surface_as_errors_and_end_the_epoch() {
    for (workers, ordered, caller_builds) in [
        (1usize, true, false),
        (1, true, true),
        (3, true, true),
        (3, false, false),
        (3, false, true),
    ] {
        let results = no_hang(move || {
            let opts = LoaderOptions::new(5)
                .with_workers(workers)
                .with_ordered(ordered)
                .with_seed(4)
                .with_caller_builds(caller_builds);
            let failing = Loader::new(source(200), opts.clone(), |i, b: Bytes| {
                if i == 77 {
                    Err(Error::Unsupported {
                        what: "record 77".into(),
                    })
                } else {
                    decode(i, b)
                }
            })
            .unwrap();
            let errs: Vec<String> = failing
                .epoch(0)
                .unwrap()
                .filter_map(|r| r.err().map(|e| format!("{e:?}")))
                .collect();
            let panicking = Loader::new(source(200), opts, |i, b: Bytes| {
                assert!(i != 33, "boom at 33");
                decode(i, b)
            })
            .unwrap();
            let mut it = panicking.epoch(0).unwrap();
            let mut panics = Vec::new();
            for r in it.by_ref() {
                if let Err(e) = r {
                    panics.push(e);
                }
            }
            assert!(it.next().is_none(), "fused after the error");
            (errs, panics)
        });
        let (errs, panics) = results;
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("Decode") && errs[0].contains("77"),
            "{errs:?}"
        );
        assert_eq!(panics.len(), 1);
        assert!(
            matches!(&panics[0], Error::WorkerPanic { message, .. } if message.contains("boom at 33")),
            "{:?}",
            panics[0]
        );
    }
}

struct FailingFetch;

impl RecordSource for FailingFetch {
    type Error = guideloom::Error;

    fn len(&self) -> u64 {
        100
    }
    fn get_many(&self, indices: &[u64]) -> guideloom::Result<Vec<Bytes>> {
        if indices.contains(&50) {
            return Err(Error::fetch("failing", "disk on fire"));
        }
        if indices.contains(&60) {
            // A source that returns the wrong number of records is caught too.
            return Ok(Vec::new());
        }
        Ok(indices
            .iter()
            .map(|i| Bytes::from(i.to_le_bytes().to_vec()))
            .collect())
    }
}

#[test]
fn fetch_errors_surface_and_resume_retries_the_failed_batch() {
    let (err, state) = no_hang(|| {
        let opts = LoaderOptions::new(10)
            .with_shuffle(ShuffleMode::Sequential)
            .with_workers(2);
        let loader = Loader::new(FailingFetch, opts, decode).unwrap();
        let mut ep = loader.epoch(0).unwrap();
        let err = ep.find_map(|r| r.err()).unwrap();
        (err, ep.state())
    });
    assert!(
        matches!(err, Error::Fetch { ref source_name, .. } if source_name == "failing"),
        "{err}"
    );
    assert_eq!(state.consumed, 50, "the failed batch is not consumed");
    let err = no_hang(move || {
        let opts = LoaderOptions::new(10).with_shuffle(ShuffleMode::Sequential);
        let loader = Loader::new(FailingFetch, opts, decode).unwrap();
        let st = LoaderState {
            consumed: 60,
            ..state
        };
        loader.resume(&st).unwrap().find_map(|r| r.err()).unwrap()
    });
    assert!(matches!(err, Error::Fetch { .. }), "{err}");
}

#[test]
fn dropping_an_epoch_mid_way_stops_and_joins_its_workers() {
    let src = Arc::new(source(10_000));
    let calls = Arc::new(Mutex::new(0u64));
    let counter = Arc::clone(&calls);
    let opts = LoaderOptions::new(8).with_workers(4).with_prefetch(8);
    let loader = Loader::new(Arc::clone(&src), opts, move |i, b| {
        *counter.lock().unwrap() += 1;
        decode(i, b)
    })
    .unwrap();
    let mut ep = loader.epoch(0).unwrap();
    assert!(ep.next().unwrap().is_ok());
    drop(ep);
    let after_drop = *calls.lock().unwrap();
    assert!(after_drop < 10_000, "workers stopped early");
    drop(loader);
    assert_eq!(Arc::strong_count(&src), 1, "every worker thread is gone");
    assert_eq!(
        *calls.lock().unwrap(),
        after_drop,
        "nothing runs after drop"
    );
}

#[test]
fn invalid_options_and_mismatched_states_are_refused() {
    let bad = [
        LoaderOptions::new(0),
        LoaderOptions::new(1).with_rank(2, 2),
        LoaderOptions::new(1).with_workers(0),
    ];
    for o in bad {
        assert!(matches!(
            Loader::new(source(3), o, decode),
            Err(Error::InvalidOptions { .. })
        ));
    }
    let loader = Loader::new(source(30), LoaderOptions::new(4).with_seed(1), decode).unwrap();
    let other_seed = LoaderState {
        seed: 2,
        epoch: 0,
        consumed: 0,
    };
    assert!(matches!(
        loader.resume(&other_seed),
        Err(Error::Resume { .. })
    ));
    let odd = LoaderState {
        seed: 1,
        epoch: 0,
        consumed: 3,
    };
    assert!(matches!(loader.resume(&odd), Err(Error::Resume { .. })));
    let done = LoaderState {
        seed: 1,
        epoch: 0,
        consumed: 30,
    };
    assert_eq!(loader.resume(&done).unwrap().count(), 0);
}
