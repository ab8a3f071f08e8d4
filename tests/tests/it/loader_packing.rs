//! Best-fit packing of whole documents into windows (`guideloom::Packing`,
//! `PackedWindows`, `Loader::packed_windows`): coverage (every token, or every next-token
//! pair, exactly once per epoch), windows never above their capacity, position ids that
//! restart at every document, the padding on a corpus of mixed lengths, determinism per
//! seed and epoch, and resume across world sizes.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use guideloom::order::mix64;
use guideloom::{
    Dataset, Equalize, Error, Loader, LoaderOptions, LoaderState, PackOptions, PackedWindow,
    PackedWindows, Packing, PublishMode, Publisher,
};
use proptest::prelude::*;

fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "memory://packing-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn ix(v: u64) -> usize {
    usize::try_from(v).unwrap()
}

/// Publishes documents of `lengths` whose tokens are their stream positions (`u32`), in
/// shards of `per_shard` documents.
fn publish(uri: &str, lengths: &[u64], per_shard: usize) -> Dataset {
    let mut next = 0u32;
    let docs: Vec<Vec<u32>> = lengths
        .iter()
        .map(|&n| {
            let d: Vec<u32> = (next..next + u32::try_from(n).unwrap()).collect();
            next += u32::try_from(n).unwrap();
            d
        })
        .collect();
    let publisher = Publisher::open(uri).unwrap();
    let shards = docs
        .chunks(per_shard)
        .enumerate()
        .map(|(n, chunk)| publisher.write_stream_shard("w", n as u64, chunk).unwrap())
        .collect();
    publisher
        .publish("corpus", "v1", shards, PublishMode::Full)
        .unwrap();
    Dataset::open(uri).unwrap()
}

/// Mixed document lengths, deterministic: mostly short (chat turns, functions), some long
/// (files, articles) and a few longer than a window of `seq_len`, some empty.
fn mixed_lengths(n: u64, seq_len: u64, salt: u64) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let r = mix64(i ^ (salt << 32));
            match r % 100 {
                0..=2 => 0,
                3..=59 => 1 + (r >> 8) % (seq_len / 8),
                60..=89 => 1 + (r >> 8) % seq_len,
                _ => 1 + (r >> 8) % (3 * seq_len),
            }
        })
        .collect()
}

/// Checks a packing against the documents it packed: pieces inside one document, windows
/// within capacity, and coverage — without labels every token exactly once; with labels
/// every next-token pair of a document inside exactly one piece.
fn check_coverage(p: &Packing, lengths: &[u64]) {
    let mut bounds = vec![0u64];
    for l in lengths {
        bounds.push(bounds.last().unwrap() + l);
    }
    let total = *bounds.last().unwrap();
    let labels = p.options().next_token_labels;
    let mut tokens = vec![0u8; usize::try_from(total).unwrap()];
    let mut pairs = vec![0u8; usize::try_from(total).unwrap()]; // pair (t, t + 1) at t
    let mut held = 0u64;
    for k in 0..p.len() {
        let pieces: Vec<Range<u64>> = p.pieces(k).collect();
        assert!(!pieces.is_empty(), "window {k} is empty");
        let size: u64 = pieces.iter().map(|r| r.end - r.start).sum();
        assert!(
            size <= p.capacity(),
            "window {k} holds {size} > {}",
            p.capacity()
        );
        assert_eq!(size, p.window_tokens(k));
        held += size;
        for r in pieces {
            let d = bounds.partition_point(|&b| b <= r.start) - 1;
            assert!(r.end <= bounds[d + 1], "piece {r:?} leaves document {d}");
            for t in r.clone() {
                tokens[ix(t)] += 1;
            }
            for t in r.start..r.end - 1 {
                pairs[ix(t)] += 1;
            }
        }
    }
    assert_eq!(held, p.tokens());
    assert_eq!(p.len() * p.capacity() - held, p.padding_tokens());
    if labels {
        for d in 0..lengths.len() {
            for t in bounds[d]..bounds[d + 1] {
                assert!(tokens[ix(t)] >= 1, "token {t} missing");
                if t + 1 < bounds[d + 1] {
                    assert_eq!(pairs[ix(t)], 1, "pair at token {t} (document {d})");
                }
            }
        }
    } else {
        assert!(tokens.iter().all(|&c| c == 1), "every token exactly once");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_token_is_in_exactly_one_window_that_never_overflows(
        lengths in prop::collection::vec(0u64..200, 0..120),
        seq_len in 1u64..70,
        labels in any::<bool>(),
        seed in any::<u64>(),
        epoch in 0u64..4,
        buffer in 1u64..50,
    ) {
        let mut o = PackOptions::new(seq_len).with_seed(seed).with_epoch(epoch).with_buffer(buffer);
        if labels {
            o = o.with_next_token_labels();
        }
        let p = Packing::from_document_lengths(&lengths, o).unwrap();
        check_coverage(&p, &lengths);
        check_coverage(&p.repack(epoch + 1), &lengths);
    }
}

#[test]
fn padding_stays_below_two_percent_on_mixed_lengths() {
    let seq_len = 2048;
    for (salt, labels) in [(0u64, false), (1, true), (2, true)] {
        let lengths = mixed_lengths(20_000, seq_len, salt);
        let mut o = PackOptions::new(seq_len).with_seed(salt);
        if labels {
            o = o.with_next_token_labels();
        }
        for epoch in 0..2 {
            let p = Packing::from_document_lengths(&lengths, o.with_epoch(epoch)).unwrap();
            check_coverage(&p, &lengths);
            let padding = p.padding_fraction();
            println!(
                "salt {salt} labels {labels} epoch {epoch}: {} tokens in {} windows of {}, \
                 padding {:.3} %",
                p.tokens(),
                p.len(),
                p.capacity(),
                padding * 100.0
            );
            assert!(padding <= 0.02, "padding {padding}");
        }
        // Plain online best-fit (buffer 1) in the shuffled order, for comparison: the sort
        // within a buffer is what keeps the padding low.
        let online = Packing::from_document_lengths(&lengths, o.with_buffer(1)).unwrap();
        println!(
            "  buffer 1: padding {:.3} %",
            online.padding_fraction() * 100.0
        );
    }
}

#[test]
fn the_packing_is_a_pure_function_of_seed_and_epoch() {
    let lengths = mixed_lengths(500, 64, 9);
    let layout = |seed: u64, epoch: u64| -> Vec<Vec<Range<u64>>> {
        let o = PackOptions::new(64).with_seed(seed).with_epoch(epoch);
        windows_of(&Packing::from_document_lengths(&lengths, o).unwrap())
    };
    let a = layout(5, 0);
    assert_eq!(a, layout(5, 0));
    assert_ne!(a, layout(6, 0));
    assert_ne!(a, layout(5, 1));
    // repack(e) is packing with epoch e.
    let p = Packing::from_document_lengths(&lengths, PackOptions::new(64).with_seed(5)).unwrap();
    let q = p.repack(1);
    assert_eq!(windows_of(&q), layout(5, 1));
    // The dataset's packing is the packing of its document lengths.
    let ds = publish(&unique("pure"), &lengths, 97);
    let o = PackOptions::new(64).with_seed(5);
    let from_ds = PackedWindows::<u32>::new(ds, o).unwrap();
    assert_eq!(windows_of(from_ds.packing()), a);
}

fn windows_of(p: &Packing) -> Vec<Vec<Range<u64>>> {
    (0..p.len()).map(|k| p.pieces(k).collect()).collect()
}

/// One epoch's windows (global batch, window number, window), in delivery order.
fn epoch_of(loader: &Loader<PackedWindow<u32>>, epoch: u64) -> Vec<(u64, u64, PackedWindow<u32>)> {
    collect(loader.epoch(epoch).unwrap())
}

fn collect(
    epoch: impl Iterator<Item = guideloom::Result<guideloom::Batch<PackedWindow<u32>>>>,
) -> Vec<(u64, u64, PackedWindow<u32>)> {
    epoch
        .flat_map(|b| {
            let b = b.unwrap();
            let g = b.batch;
            b.indices
                .into_iter()
                .zip(b.records)
                .map(move |(k, w)| (g, k, w))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn loaded_windows_hold_whole_documents_and_restart_positions_at_each() {
    let lengths = mixed_lengths(300, 48, 4);
    let ds = publish(&unique("whole"), &lengths, 40);
    let total: u64 = lengths.iter().sum();
    let mut starts = vec![0u64];
    for l in &lengths {
        starts.push(starts.last().unwrap() + l);
    }
    for epoch in 0..2 {
        let o = PackOptions::new(48).with_seed(1).with_epoch(epoch);
        let windows = PackedWindows::<u32>::new(ds.clone(), o).unwrap();
        let count = windows.len();
        let loader = Loader::packed_windows(
            windows.clone(),
            LoaderOptions::new(4).with_seed(1).with_workers(2),
        )
        .unwrap();
        let got = epoch_of(&loader, epoch);
        assert_eq!(got.len() as u64, count);
        let mut seen = vec![0u8; ix(total)];
        for (_, k, w) in &got {
            assert_eq!(w.index, *k);
            assert!(w.tokens.len() <= 48);
            assert_eq!(w.padding() + w.tokens.len() as u64, 48);
            assert_eq!(w.padded(u32::MAX).len(), 48);
            let pieces: Vec<Range<u64>> = windows.packing().pieces(*k).collect();
            let expected: Vec<u32> = pieces
                .iter()
                .flat_map(|r| u32::try_from(r.start).unwrap()..u32::try_from(r.end).unwrap())
                .collect();
            assert_eq!(&w.tokens[..], &expected[..], "window {k}");
            // Position ids restart at every piece; a piece that starts a document starts at
            // position 0 with the document's first token.
            let (pos, seg) = (w.position_ids(), w.segment_ids());
            assert_eq!(pos.len(), w.tokens.len());
            for (t, &tok) in w.tokens.iter().enumerate() {
                let new_piece = t == 0 || seg[t] != seg[t - 1];
                assert_eq!(pos[t] == 0, new_piece, "window {k} token {t}");
                if new_piece && lengths.iter().all(|&l| l <= 48) {
                    assert!(starts.binary_search(&u64::from(tok)).is_ok());
                }
                seen[tok as usize] += 1;
            }
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "every token exactly once per epoch"
        );
    }
}

#[test]
fn resume_after_k_batches_equals_the_uninterrupted_run_across_world_sizes() {
    let lengths = mixed_lengths(400, 32, 7);
    let ds = publish(&unique("resume"), &lengths, 50);
    let windows = PackedWindows::<u32>::new(
        ds,
        PackOptions::new(32)
            .with_next_token_labels()
            .with_seed(2)
            .with_epoch(1),
    )
    .unwrap();
    let loader = |rank: u64, world: u64, workers: usize| {
        let options = LoaderOptions::new(3)
            .with_seed(2)
            .with_rank(rank, world)
            .with_workers(workers);
        Loader::packed_windows(windows.clone(), options).unwrap()
    };
    let key = |v: &[(u64, u64, PackedWindow<u32>)]| -> Vec<(u64, u64, Vec<u32>)> {
        v.iter()
            .map(|(g, k, w)| (*g, *k, w.tokens.to_vec()))
            .collect()
    };
    let full = key(&epoch_of(&loader(0, 1, 2), 1));
    assert_eq!(full.len() as u64, windows.len());
    for (world, world_after) in [(1u64, 1u64), (2, 3), (3, 1), (4, 2)] {
        for k in [0usize, 1, 5] {
            // Every rank takes k batches, then the job stops; all ranks report one state.
            let mut head = Vec::new();
            let mut states = Vec::new();
            for rank in 0..world {
                let first = loader(rank, world, 2);
                let mut epoch = first.epoch(1).unwrap();
                head.extend(key(&collect(epoch.by_ref().take(k))));
                states.push(epoch.state());
            }
            assert!(states.windows(2).all(|s| s[0] == s[1]), "{states:?}");
            let saved = serde_json::to_string(&states[0]).unwrap();
            let state: LoaderState = serde_json::from_str(&saved).unwrap();
            let mut rest = Vec::new();
            for rank in 0..world_after {
                let l = loader(rank, world_after, 1);
                rest.extend(key(&collect(l.resume(&state).unwrap())));
            }
            let mut all = [head, rest].concat();
            all.sort_by_key(|(g, _, _)| *g); // stable: in-batch order kept
            assert_eq!(all, full, "world {world} -> {world_after}, {k} batches");
        }
    }
    // Equalised ranks get equal counts of whole windows.
    let counts: Vec<usize> = (0..3)
        .map(|rank| {
            let options = LoaderOptions::new(3)
                .with_seed(2)
                .with_rank(rank, 3)
                .with_equalize(Equalize::Drop);
            let l = Loader::packed_windows(windows.clone(), options).unwrap();
            epoch_of(&l, 1).len()
        })
        .collect();
    assert!(counts.windows(2).all(|c| c[0] == c[1]), "{counts:?}");
}

#[test]
fn a_packed_mixture_splits_tokens_by_share_and_resumes_across_world_sizes() {
    // Corpus 0: short documents, corpus 1: long ones (a different padding per window).
    let make = |tag: &str, short: bool| {
        let lengths = mixed_lengths(600, if short { 24 } else { 200 }, u64::from(short));
        let ds = publish(&unique(tag), &lengths, 100);
        PackedWindows::<u32>::new(ds, PackOptions::new(64).with_seed(4)).unwrap()
    };
    let (a, b) = (make("mix-a", true), make("mix-b", false));
    let loader = |rank: u64, world: u64| {
        let options = LoaderOptions::new(4).with_seed(8).with_rank(rank, world);
        Loader::packed_mixture(vec![(a.clone(), 0.6), (b.clone(), 0.4)], options).unwrap()
    };
    let full = epoch_of(&loader(0, 1), 0);
    let mut tokens = [0u64; 2];
    for (_, id, w) in &full {
        // Mixture ids: corpus 0's windows first.
        tokens[usize::from(*id >= a.len())] += w.tokens.len() as u64;
    }
    let share = tokens[1] as f64 / (tokens[0] + tokens[1]) as f64;
    println!("token share of corpus 1: {share:.4} (asked 0.4), tokens {tokens:?}");
    assert!((share - 0.4).abs() < 0.01, "{share}");
    // Resume after 5 batches from 2 ranks onto 3.
    let key = |v: &[(u64, u64, PackedWindow<u32>)]| -> Vec<(u64, u64, Vec<u32>)> {
        v.iter()
            .map(|(g, k, w)| (*g, *k, w.tokens.to_vec()))
            .collect()
    };
    let mut head = Vec::new();
    let mut state = None;
    for rank in 0..2 {
        let l = loader(rank, 2);
        let mut epoch = l.epoch(0).unwrap();
        head.extend(key(&collect(epoch.by_ref().take(5))));
        state = Some(epoch.state());
    }
    let state = state.unwrap();
    let mut rest = Vec::new();
    for rank in 0..3 {
        rest.extend(key(&collect(loader(rank, 3).resume(&state).unwrap())));
    }
    let mut all = [head, rest].concat();
    all.sort_by_key(|(g, _, _)| *g);
    assert_eq!(all, key(&full));
    // One window size per mixture.
    let other = PackedWindows::<u32>::new(a.dataset().clone(), PackOptions::new(32)).unwrap();
    let e = Loader::packed_mixture(vec![(a.clone(), 0.5), (other, 0.5)], LoaderOptions::new(4))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidOptions { .. }), "{e}");
}

#[test]
fn typed_errors_for_bad_options_and_wrong_element_types() {
    let ds = publish(&unique("errors"), &[5, 6], 1);
    let e = PackedWindows::<u32>::new(ds.clone(), PackOptions::new(0)).unwrap_err();
    assert!(matches!(e, Error::InvalidOptions { .. }), "{e}");
    let e = PackedWindows::<u16>::new(ds.clone(), PackOptions::new(8)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Publish(guideloom::publish::Error::ElementMismatch { .. })
        ),
        "{e}"
    );
    let w = PackedWindows::<u32>::new(ds, PackOptions::new(8)).unwrap();
    let e = w.get(w.len()).unwrap_err();
    assert_eq!(e.kind(), guideloom::ErrorKind::OutOfRange, "{e}");
    let mut sizes = BTreeMap::new();
    for k in 0..w.len() {
        *sizes.entry(w.get(k).unwrap().tokens.len()).or_insert(0) += 1;
    }
    assert_eq!(sizes, BTreeMap::from([(5, 1), (6, 1)])); // 5 + 6 > 8: two windows
}

#[test]
fn packed_types_are_send_sync_debug() {
    fn check<T: Send + Sync + std::fmt::Debug + 'static>() {}
    check::<Packing>();
    check::<PackOptions>();
    check::<PackedWindows<u16>>();
    check::<PackedWindow<u32>>();
    check::<Loader<PackedWindow<u16>>>();
}
