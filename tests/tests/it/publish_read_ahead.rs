//! `Dataset::read_ahead`: batches fetched ahead of their reader, in order and exact, on a
//! local root (read when taken) and on an `http://` root served by nginx behind the fault
//! proxy's far link (fetched ahead, concurrently, within the byte bound).

use std::path::PathBuf;
use std::time::Duration;

use guideloom_faultproxy::{FaultProxy, Link, Script};
use guideloom_format::ShardMetadata;
use guideloom_publish::{Dataset, ReadAheadOptions, Registry, Root, RootOptions, StoreOptions};

const RECORDS: u64 = 400;
const RECORD_LEN: usize = 1000;
const BATCH: u64 = 10;

/// Removes the published subdirectory of the nginx root whatever the outcome.
struct Served(PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(i: u64) -> Vec<u8> {
    let mut r = format!("record {i:05} ").into_bytes();
    r.resize(RECORD_LEN, b'a' + u8::try_from(i % 26).unwrap());
    r
}

/// One shard of [`RECORDS`] records published into `dir`.
fn publish(dir: &std::path::Path) {
    let store = Registry::new()
        .resolve(dir.to_str().unwrap(), &StoreOptions::default())
        .unwrap();
    publish_into(&Root::new(store, RootOptions::default()));
}

/// One shard of [`RECORDS`] records published into `root`.
fn publish_into(root: &Root) {
    let bridge = guideloom_io::bridge::Bridge::shared().unwrap();
    bridge.block_on(async {
        let meta = ShardMetadata::new("raw", "documents");
        let shard = root
            .write_shard("w", 0, meta, (0..RECORDS).map(record))
            .await
            .unwrap();
        crate::publish_common::publish(root, "s", vec![shard]).await;
    });
}

/// Batches of [`BATCH`] consecutive records, in a scrambled order.
fn batches() -> Vec<Vec<u64>> {
    (0..RECORDS / BATCH)
        .map(|k| (k * 7) % (RECORDS / BATCH))
        .map(|k| (k * BATCH..(k + 1) * BATCH).collect())
        .collect()
}

fn want(batch: &[u64]) -> Vec<Vec<u8>> {
    batch.iter().map(|&i| record(i)).collect()
}

#[test]
fn a_local_root_reads_each_batch_when_taken() {
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path());
    let ds = Dataset::open(dir.path().to_str().unwrap()).unwrap();
    let ahead = ds
        .read_ahead(batches(), ReadAheadOptions::default())
        .unwrap();
    assert_eq!(ahead.held_bytes(), 0);
    let got: Vec<Vec<Vec<u8>>> = ahead
        .map(|b| b.unwrap().into_iter().map(|r| r.to_vec()).collect())
        .collect();
    let expected: Vec<Vec<Vec<u8>>> = batches().iter().map(|b| want(b)).collect();
    assert_eq!(got, expected);
    // An index past the end is that batch's error; the others still come.
    let mut odd = ds
        .read_ahead(
            vec![vec![0], vec![RECORDS], vec![1]],
            ReadAheadOptions::default(),
        )
        .unwrap();
    assert_eq!(odd.next().unwrap().unwrap()[0], record(0));
    assert!(odd.next().unwrap().is_err());
    assert_eq!(odd.next().unwrap().unwrap()[0], record(1));
    assert!(odd.next().is_none());
}

/// The served dataset behind a far link, opened through the proxy.
fn far_dataset(test: &str) -> Option<(Served, FaultProxy, String)> {
    let (url, served_root) = guideloom_tests::nginx(test)?;
    let subdir = guideloom_tests::unique("read-ahead");
    let dir = served_root.join(&subdir);
    let served = Served(dir.clone());
    publish(&dir);
    let link = Link::round_trip(Duration::from_millis(20));
    let proxy = FaultProxy::for_url_with(&url, Script::pass(), link).unwrap();
    let base = proxy.proxied(&format!("{url}{subdir}"));
    Some((served, proxy, base))
}

/// Ranged GETs of the shard's records (the shard's tail read excluded: its range ends at
/// the end of the file, asked for with a suffix range).
fn record_gets(proxy: &FaultProxy) -> usize {
    proxy.count(|a| {
        a.exchange.target.ends_with(".glm")
            && a.exchange
                .range
                .as_deref()
                .is_some_and(|r| !r.starts_with("bytes=-"))
    })
}

#[test]
fn a_far_root_fetches_ahead_in_order_and_exactly() {
    let Some((_served, proxy, base)) = far_dataset("read_ahead_far") else {
        return;
    };
    let ds = Dataset::open(&base).unwrap();
    assert!(ds.is_remote());
    let options = ReadAheadOptions::default().with_batches(8);
    let mut n = 0;
    for (got, batch) in ds.read_ahead(batches(), options).unwrap().zip(batches()) {
        let got: Vec<Vec<u8>> = got.unwrap().into_iter().map(|r| r.to_vec()).collect();
        assert_eq!(got, want(&batch));
        n += 1;
    }
    assert_eq!(n, batches().len());
    assert_eq!(
        record_gets(&proxy),
        batches().len(),
        "one ranged GET per batch"
    );
    // Batches overlapped: HTTP/1.1 carries one request per connection at a time, and a
    // reader that waited for each batch would have kept reusing one.
    assert!(
        proxy.stats().connections >= 2,
        "{} connections",
        proxy.stats().connections
    );
}

#[test]
fn a_far_root_stops_asking_at_the_byte_bound() {
    let Some((_served, proxy, base)) = far_dataset("read_ahead_bound") else {
        return;
    };
    let ds = Dataset::open(&base).unwrap();
    let batch_bytes = BATCH * RECORD_LEN as u64;
    // Room for three and a half batches, and many more batches allowed by count.
    let bound = batch_bytes * 7 / 2;
    let options = ReadAheadOptions::default()
        .with_batches(64)
        .with_bytes(bound);
    let mut ahead = ds.read_ahead(batches(), options).unwrap();
    let first = ahead.next().unwrap().unwrap();
    assert_eq!(first.len(), usize::try_from(BATCH).unwrap());
    // Take nothing more; give the reader ahead time to ask for all it may.
    std::thread::sleep(Duration::from_millis(500));
    let asked = record_gets(&proxy);
    assert!(
        (2..=5).contains(&asked),
        "{asked} batches asked for: the first, then three more within {bound} bytes"
    );
    assert!(
        ahead.held_bytes() <= bound,
        "{} bytes held",
        ahead.held_bytes()
    );
    // Taking them lets it go on, to the end, in order.
    let rest: Vec<_> = ahead.map(|b| b.unwrap()[0].to_vec()).collect();
    let firsts: Vec<Vec<u8>> = batches()[1..].iter().map(|b| record(b[0])).collect();
    assert_eq!(rest, firsts);
    assert_eq!(record_gets(&proxy), batches().len());
}

/// The facade's `Loader` over a far root reads ahead (the default) and delivers the same
/// batches, records and order as without: one worker, and the caller never builds, so only
/// the read-ahead can put two requests in flight.
#[test]
fn the_loader_reads_a_far_root_ahead() {
    use guideloom::{Bytes, Loader, LoaderOptions};

    let Some((_served, proxy, base)) = far_dataset("read_ahead_loader") else {
        return;
    };
    let options = LoaderOptions::new(BATCH)
        .with_seed(5)
        .with_workers(1)
        .with_caller_builds(false);
    let first_bytes = |_: u64, b: Bytes| Ok::<Vec<u8>, guideloom::Error>(b[..16].to_vec());
    let epoch = |options: LoaderOptions| -> Vec<(Vec<u64>, Vec<Vec<u8>>)> {
        let ds = Dataset::open(&base).unwrap();
        let loader = Loader::new(ds, options, first_bytes).unwrap();
        loader
            .epoch(0)
            .unwrap()
            .map(|b| b.map(|b| (b.indices, b.records)))
            .collect::<guideloom::Result<_>>()
            .unwrap()
    };
    let before = proxy.stats().connections;
    let ahead = epoch(options.clone());
    let ahead_connections = proxy.stats().connections - before;
    let one_at_a_time = epoch(options.with_read_ahead(0, 0));
    assert_eq!(ahead, one_at_a_time);
    assert_eq!(ahead.len(), usize::try_from(RECORDS / BATCH).unwrap());
    for (indices, records) in &ahead {
        for (&i, r) in indices.iter().zip(records) {
            assert_eq!(r[..], record(i)[..16]);
        }
    }
    assert!(ahead_connections >= 2, "{ahead_connections} connections");
}

/// An `s3://` root on moto behind the far link reads ahead too: in order, exact, one ranged
/// GET per batch, requests overlapped.
#[test]
fn an_s3_root_on_moto_reads_ahead() {
    use crate::faults_common::{s3_root, s3_server};

    let Some((endpoint, bucket)) = s3_server("read_ahead_s3_moto", "moto") else {
        return;
    };
    let prefix = guideloom_tests::unique("read-ahead");
    publish_into(&s3_root(&endpoint, &bucket, &prefix));
    let bridge = guideloom_io::bridge::Bridge::shared().unwrap();
    let link = Link::round_trip(Duration::from_millis(20));
    let proxy = FaultProxy::for_url_with(&endpoint, Script::pass(), link).unwrap();
    let ds = bridge
        .block_on(s3_root(&proxy.url(), &bucket, &prefix).open_latest())
        .unwrap();
    assert!(ds.is_remote());
    let options = ReadAheadOptions::default().with_batches(8);
    let got: Vec<Vec<Vec<u8>>> = ds
        .read_ahead(batches(), options)
        .unwrap()
        .map(|b| b.unwrap().into_iter().map(|r| r.to_vec()).collect())
        .collect();
    let expected: Vec<Vec<Vec<u8>>> = batches().iter().map(|b| want(b)).collect();
    assert_eq!(got, expected);
    let ranged = proxy.count(|a| {
        a.exchange.method == "GET"
            && a.exchange.target.contains(".glm")
            && a.exchange.range.is_some()
    });
    // Each batch's one ranged GET, and the shard's open (its tail).
    assert!(
        (batches().len()..=batches().len() + 2).contains(&ranged),
        "{ranged} ranged GETs for {} batches",
        batches().len()
    );
    assert!(proxy.stats().connections >= 2, "{:?}", proxy.stats());
}
