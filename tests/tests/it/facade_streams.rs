//! Token streams as datasets: stream shards written through the facade's `Publisher`,
//! published as a snapshot, read back by document and by token slice across document and
//! shard boundaries (local and `memory://` roots), typed errors, and the loader's token
//! windows (coverage and tail, determinism, ranks, resume).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use guideloom::publish::Error as PublishError;
use guideloom::{
    Dataset, Elements, Equalize, Error, Loader, LoaderOptions, PublishMode, Publisher, ShuffleMode,
    TokenWindows,
};
use proptest::prelude::*;

fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "memory://streams-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Documents of the given lengths with distinct tokens (token = its stream position).
fn documents(lengths: &[usize]) -> Vec<Vec<u32>> {
    let mut next = 0u32;
    lengths
        .iter()
        .map(|&n| {
            let n = u32::try_from(n).unwrap();
            let d: Vec<u32> = (next..next + n).collect();
            next += n;
            d
        })
        .collect()
}

/// Writes `docs` as stream shards of `per_shard` documents each and publishes them.
fn publish(uri: &str, docs: &[Vec<u32>], per_shard: usize) -> Dataset {
    let publisher = Publisher::open(uri).unwrap();
    let shards = docs
        .chunks(per_shard.max(1))
        .enumerate()
        .map(|(n, chunk)| publisher.write_stream_shard("w", n as u64, chunk).unwrap())
        .collect();
    publisher
        .publish("tokens", "v1", shards, PublishMode::Full)
        .unwrap();
    Dataset::open(uri).unwrap()
}

fn check_round_trip(ds: &Dataset, docs: &[Vec<u32>]) {
    let all: Vec<u32> = docs.concat();
    assert_eq!(ds.len(), docs.len() as u64);
    assert_eq!(ds.num_tokens().unwrap(), all.len() as u64);
    assert_eq!(ds.stream_element().unwrap(), "u32");
    let mut at = 0u64;
    for (i, d) in docs.iter().enumerate() {
        let i = i as u64;
        assert_eq!(&*ds.document::<u32>(i).unwrap(), &d[..]);
        assert_eq!(ds.document_range(i).unwrap(), at..at + d.len() as u64);
        at += d.len() as u64;
    }
    let n = all.len();
    for (a, b) in [
        (0, n),
        (0, 0),
        (n, n),
        (1, n - 1),
        (n / 3, 2 * n / 3),
        (n - 1, n),
    ] {
        let got = ds.tokens::<u32>(a as u64..b as u64).unwrap();
        assert_eq!(&*got, &all[a..b], "tokens {a}..{b}");
    }
}

#[test]
fn documents_and_token_slices_round_trip_on_local_and_memory_roots() {
    let docs = documents(&[5, 0, 17, 3, 1, 40, 0, 9, 12, 2, 7]);
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("root");
    for uri in [local.to_str().unwrap().to_owned(), unique("round-trip")] {
        let ds = publish(&uri, &docs, 3); // 4 shards, one of 2 documents
        assert_eq!(ds.snapshot().shards().len(), 4);
        check_round_trip(&ds, &docs);
        // Documents are the snapshot's records: the raw bytes are the little-endian tokens.
        let le: Vec<u8> = docs[3].iter().flat_map(|t| t.to_le_bytes()).collect();
        assert_eq!(&ds.get(3).unwrap()[..], &le[..]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any document lengths, any shard split, any slice: the slice equals the concatenation's.
    #[test]
    fn token_slices_equal_the_concatenation(
        lengths in prop::collection::vec(0usize..40, 1..24),
        per_shard in 1usize..6,
        cuts in prop::collection::vec((0usize..=1000, 0usize..=1000), 1..8),
    ) {
        let docs = documents(&lengths);
        let all = docs.concat();
        let ds = publish(&unique("prop"), &docs, per_shard);
        prop_assert_eq!(ds.num_tokens().unwrap(), all.len() as u64);
        for (x, y) in cuts {
            let (a, b) = (x * all.len() / 1000, y * all.len() / 1000);
            let (a, b) = (a.min(b), a.max(b));
            let got = ds.tokens::<u32>(a as u64..b as u64).unwrap();
            prop_assert_eq!(&*got, &all[a..b]);
        }
        for (i, d) in docs.iter().enumerate() {
            prop_assert_eq!(&*ds.document::<u32>(i as u64).unwrap(), &d[..]);
        }
    }
}

#[test]
fn metadata_rides_with_its_documents() {
    let uri = unique("meta");
    let publisher = Publisher::open(&uri).unwrap();
    let docs: Vec<(Vec<u16>, String)> = (0..9u16)
        .map(|d| (vec![d; usize::from(d)], format!("doc {d}")))
        .collect();
    let shards = docs
        .chunks(4)
        .enumerate()
        .map(|(n, c)| {
            publisher
                .write_stream_shard_with_meta("w", n as u64, c.to_vec())
                .unwrap()
        })
        .collect::<Vec<_>>();
    let companion = shards[0].stream.as_ref().unwrap().meta.as_ref().unwrap();
    assert_eq!(companion.key, "shards/w/00000000.meta.glm");
    publisher
        .publish("meta", "v1", shards, PublishMode::Full)
        .unwrap();
    let ds = Dataset::open(&uri).unwrap();
    for (i, (tokens, meta)) in docs.iter().enumerate() {
        assert_eq!(&ds.document_meta::<String>(i as u64).unwrap(), meta);
        assert_eq!(&*ds.document::<u16>(i as u64).unwrap(), &tokens[..]);
    }
    // A stream written without metadata says so by name.
    let plain = publish(&unique("plain"), &documents(&[3]), 1);
    let err = Error::from(plain.document_meta::<String>(0).unwrap_err());
    assert!(
        matches!(&err, Error::Publish(PublishError::InvalidArgument { what }) if what.contains("without document metadata")),
        "{err}"
    );
}

#[test]
fn typed_errors_for_wrong_element_range_window_and_non_streams() {
    let docs = documents(&[4, 6]);
    let ds = publish(&unique("errors"), &docs, 1);
    let mismatch = |e: &Error| matches!(e, Error::Publish(PublishError::ElementMismatch { stream, requested: "u16" }) if stream == "u32");
    assert!(mismatch(&ds.tokens::<u16>(0..2).unwrap_err().into()));
    assert!(mismatch(&ds.document::<u16>(0).unwrap_err().into()));
    assert!(mismatch(
        &TokenWindows::<u16>::new(ds.clone(), 2).unwrap_err()
    ));
    assert!(matches!(
        ds.tokens::<u32>(5..11).map_err(Error::from),
        Err(Error::Publish(PublishError::TokensOutOfRange {
            start: 5,
            end: 11,
            len: 10
        }))
    ));
    assert!(matches!(
        TokenWindows::<u32>::new(ds.clone(), 11),
        Err(Error::WindowTooLarge {
            span: 11,
            tokens: 10
        })
    ));
    assert!(matches!(
        TokenWindows::<u32>::with_next_token_labels(ds.clone(), 10),
        Err(Error::WindowTooLarge {
            span: 11,
            tokens: 10
        })
    ));
    assert!(TokenWindows::<u32>::new(ds.clone(), 10).is_ok());
    assert!(matches!(
        TokenWindows::<u32>::new(ds.clone(), 0),
        Err(Error::InvalidOptions { .. })
    ));
    // A dataset of records is not a stream.
    let uri = unique("records");
    let publisher = Publisher::open(&uri).unwrap();
    let shard = publisher.write_shard("w", 0, ["a", "b"]).unwrap();
    publisher
        .publish("records", "v1", vec![shard], PublishMode::Full)
        .unwrap();
    let records = Dataset::open(&uri).unwrap();
    assert!(matches!(
        records.tokens::<u32>(0..1).map_err(Error::from),
        Err(Error::Publish(PublishError::NotAStream { .. }))
    ));
    assert!(matches!(
        records.num_tokens().map_err(Error::from),
        Err(Error::Publish(PublishError::NotAStream { .. }))
    ));
}

/// Replaces a published (read-only) shard file's bytes.
fn overwrite(path: &std::path::Path, bytes: &[u8]) {
    let mut writable = std::fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    writable.set_readonly(false);
    std::fs::set_permissions(path, writable).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A manifest whose stream reference disagrees with the shard it names (another element
/// type, the same bytes) is caught when the shard is opened.
#[test]
fn a_reference_naming_another_element_type_fails_verification() {
    let uri = unique("lying-ref");
    let publisher = Publisher::open(&uri).unwrap();
    let mut shard = publisher
        .write_stream_shard("w", 0, documents(&[4, 4]))
        .unwrap();
    let stream = shard.stream.as_mut().unwrap();
    stream.element = "u16".into();
    stream.elements *= 2;
    publisher
        .publish("lying", "v1", vec![shard], PublishMode::Full)
        .unwrap();
    let ds = Dataset::open(&uri).unwrap();
    let err = Error::from(ds.tokens::<u16>(0..4).unwrap_err());
    assert!(
        matches!(
            &err,
            Error::Publish(PublishError::Verification { what: "stream element type", expected, actual, .. })
                if expected == "stream<u16>" && actual == "stream<u32>"
        ),
        "{err:?}"
    );
}

#[test]
fn corrupt_and_truncated_stream_shards_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let uri = root.to_str().unwrap();
    let docs = documents(&[64, 64]);
    let ds = publish(uri, &docs, 1);
    drop(ds);
    // Flip a token byte of shard 0 (the data starts after the 16-byte header).
    let path = root.join("shards/w/00000000.glm");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[16 + 10] ^= 0xff;
    overwrite(&path, &bytes);
    let ds = Dataset::open(uri).unwrap();
    let err = Error::from(ds.tokens::<u32>(0..8).unwrap_err());
    assert!(
        matches!(&err, Error::Publish(PublishError::Shard { key, source }) if key == "shards/w/00000000.glm" && source.is_corrupt()),
        "{err}"
    );
    // The other shard still reads.
    assert_eq!(&*ds.tokens::<u32>(64..128).unwrap(), &docs[1][..]);
    // Truncate shard 1: its size no longer matches the manifest.
    let path = root.join("shards/w/00000001.glm");
    let bytes = std::fs::read(&path).unwrap();
    overwrite(&path, &bytes[..bytes.len() - 9]);
    let ds = Dataset::open(uri).unwrap();
    let err = Error::from(ds.tokens::<u32>(100..101).unwrap_err());
    // The local store checks the file's size against the manifest's when it opens it.
    assert!(
        matches!(
            &err,
            Error::Publish(PublishError::Verification { key, what: "size", .. })
                if key == "shards/w/00000001.glm"
        ),
        "{err:?}"
    );
}

/// Every window of one epoch, by window number, with its tokens.
fn epoch_windows(loader: &Loader<Elements<u32>>, epoch: u64) -> Vec<(u64, Vec<u32>)> {
    loader
        .epoch(epoch)
        .unwrap()
        .flat_map(|b| {
            let b = b.unwrap();
            b.indices
                .into_iter()
                .zip(b.records.into_iter().map(|w| w.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn windows_tile_the_stream_once_per_epoch_and_leave_a_short_tail() {
    let docs = documents(&[13, 0, 29, 7, 50, 1, 28]); // 128 tokens
    let all = docs.concat();
    let ds = publish(&unique("tile"), &docs, 2);
    for labels in [false, true] {
        let windows = if labels {
            TokenWindows::<u32>::with_next_token_labels(ds.clone(), 16).unwrap()
        } else {
            TokenWindows::<u32>::new(ds.clone(), 16).unwrap()
        };
        let (count, tail) = (windows.len(), windows.tail());
        // 128 tokens tile exactly into 8 windows of 16; with labels the last token has none,
        // so 7 windows and a tail of a whole window.
        assert_eq!((count, tail), if labels { (7, 16) } else { (8, 0) });
        let loader = Loader::token_windows(windows, LoaderOptions::new(3).with_seed(4)).unwrap();
        for epoch in 0..2 {
            let got = epoch_windows(&loader, epoch);
            let mut covered = vec![0u32; all.len()];
            for (k, w) in &got {
                let start = usize::try_from(k * 16).unwrap();
                let span = if labels { 17 } else { 16 };
                assert_eq!(&w[..], &all[start..start + span], "window {k}");
                for c in &mut covered[start..start + 16] {
                    *c += 1;
                }
            }
            // Every input position before the tail exactly once; the tail never.
            let body = usize::try_from(count * 16).unwrap();
            assert!(covered[..body].iter().all(|&c| c == 1));
            assert!(covered[body..].iter().all(|&c| c == 0));
        }
    }
}

#[test]
fn window_order_is_deterministic_and_differs_by_seed_and_epoch() {
    let docs = documents(&[100, 90, 80, 70]);
    let ds = publish(&unique("order"), &docs, 1);
    let order = |seed: u64, epoch: u64, mode: ShuffleMode| {
        let windows = TokenWindows::<u32>::new(ds.clone(), 5).unwrap();
        let options = LoaderOptions::new(4)
            .with_seed(seed)
            .with_workers(2)
            .with_shuffle(mode);
        let loader = Loader::token_windows(windows, options).unwrap();
        epoch_windows(&loader, epoch)
            .into_iter()
            .map(|(k, _)| k)
            .collect::<Vec<u64>>()
    };
    // The window order is the loader's specified record order (docs/loader.md §1, the same
    // on every machine and run) over window numbers: no second shuffler.
    let spec = guideloom::order::EpochOrder::new(ShuffleMode::Full, 7, 0, 68, None);
    let expected: Vec<u64> = (0..68).map(|p| spec.record(p)).collect();
    assert_eq!(order(7, 0, ShuffleMode::Full), expected);
    for mode in [ShuffleMode::Full, ShuffleMode::Auto] {
        let a = order(7, 0, mode);
        assert_eq!(a, order(7, 0, mode), "same seed and epoch, same order");
        assert_ne!(a, order(8, 0, mode));
        assert_ne!(a, order(7, 1, mode));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..68).collect::<Vec<u64>>()); // 340 tokens / 5
    }
}

#[test]
fn ranks_get_disjoint_equal_shares() {
    let docs = documents(&[61, 44, 97, 12]); // 214 tokens: 26 windows of 8
    let ds = publish(&unique("ranks"), &docs, 1);
    for equalize in [Equalize::Drop, Equalize::Pad] {
        let world = 3;
        let per_rank: Vec<Vec<u64>> = (0..world)
            .map(|rank| {
                let windows = TokenWindows::<u32>::new(ds.clone(), 8).unwrap();
                let options = LoaderOptions::new(4)
                    .with_seed(11)
                    .with_rank(rank, world)
                    .with_equalize(equalize);
                let loader = Loader::token_windows(windows, options).unwrap();
                epoch_windows(&loader, 0)
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect()
            })
            .collect();
        let lens: BTreeSet<usize> = per_rank.iter().map(Vec::len).collect();
        assert_eq!(lens.len(), 1, "{equalize:?}: equal counts {per_rank:?}");
        let union: BTreeSet<u64> = per_rank.iter().flatten().copied().collect();
        if equalize == Equalize::Drop {
            // Disjoint: no window on two ranks.
            assert_eq!(union.len(), per_rank.iter().map(Vec::len).sum::<usize>());
        } else {
            // Every window at least once; only the padding repeats.
            assert_eq!(union, (0..26).collect());
        }
    }
}

#[test]
fn resuming_from_a_state_delivers_exactly_the_rest() {
    let docs = documents(&[300, 211, 5, 170]);
    let ds = publish(&unique("resume"), &docs, 2);
    let loader = |workers: usize| {
        let windows = TokenWindows::<u32>::with_next_token_labels(ds.clone(), 12).unwrap();
        let options = LoaderOptions::new(5).with_seed(3).with_workers(workers);
        Loader::token_windows(windows, options).unwrap()
    };
    let full = epoch_windows(&loader(2), 1);
    for k in [0usize, 1, 4, 9] {
        let first = loader(2);
        let mut epoch = first.epoch(1).unwrap();
        let head: Vec<(u64, Vec<u32>)> = epoch
            .by_ref()
            .take(k)
            .flat_map(|b| {
                let b = b.unwrap();
                b.indices
                    .into_iter()
                    .zip(b.records.into_iter().map(|w| w.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let state = epoch.state();
        drop(epoch);
        let saved = serde_json::to_string(&state).unwrap();
        let state = serde_json::from_str(&saved).unwrap();
        let rest: Vec<(u64, Vec<u32>)> = loader(1)
            .resume(&state)
            .unwrap()
            .flat_map(|b| {
                let b = b.unwrap();
                b.indices
                    .into_iter()
                    .zip(b.records.into_iter().map(|w| w.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!([head, rest].concat(), full, "stopped after {k} batches");
    }
}

/// Request counts on a `memory://` root (ranged reads counted by its `ObjectStoreIo`): a
/// slice opens only the shards it touches (one tail read each) and reads each once.
#[test]
fn a_token_slice_costs_one_read_per_shard_touched() {
    use std::sync::Arc;

    use guideloom::{DatasetOptions, Registry};

    let registry = Arc::new(Registry::new());
    let name = format!("streams-requests-{}", std::process::id());
    let uri = format!("memory://{name}");
    let options = DatasetOptions::default().with_registry(Arc::clone(&registry));
    let publisher =
        Publisher::open_in(&uri, Default::default(), Some(Arc::clone(&registry))).unwrap();
    let docs = documents(&[100, 100, 100, 100, 100, 100]); // 3 shards of 200 tokens
    let shards = docs
        .chunks(2)
        .enumerate()
        .map(|(n, c)| publisher.write_stream_shard("w", n as u64, c).unwrap())
        .collect();
    publisher
        .publish("tokens", "v1", shards, PublishMode::Full)
        .unwrap();
    let ds = Dataset::open_with(&uri, options).unwrap();
    let stats = Arc::clone(registry.lookup("memory", &name).unwrap().io().stats());
    let all = docs.concat();
    let cost = |range: std::ops::Range<u64>| {
        stats.reset();
        let got = ds.tokens::<u32>(range.clone()).unwrap();
        let a = usize::try_from(range.start).unwrap();
        let b = usize::try_from(range.end).unwrap();
        assert_eq!(&*got, &all[a..b]);
        stats.snapshot().requests
    };
    // Fresh: shard 2 only, opened (one tail read) and read (one ranged read).
    assert_eq!(cost(450..460), 2);
    assert_eq!(cost(450..460), 1); // open now: one read
    // Across shards 0 and 1: both opened, one read each; then one read per shard.
    assert_eq!(cost(150..250), 4);
    assert_eq!(cost(150..250), 2);
    assert_eq!(cost(0..600), 3);
}

#[test]
fn stream_types_are_send_sync_debug() {
    fn check<T: Send + Sync + std::fmt::Debug + 'static>() {}
    check::<TokenWindows<u16>>();
    check::<Loader<Elements<u32>>>();
    check::<Elements<u16>>();
    check::<guideloom::StreamLayout>();
    check::<guideloom::StreamRef>();
}
