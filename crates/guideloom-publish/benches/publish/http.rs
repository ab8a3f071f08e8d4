//! Issue 15's HTTP rows, counted: a fresh reader of an `http(s)://` root (nginx serving a
//! local root) opening the latest snapshot and reading one 1 KiB record, then a warm read,
//! then opens at sequence numbers 1 and 3 (the last also where nginx lists directories as
//! JSON, under `/listed/`, opened with listing). The dataset is the facade bench's: 100 000 ×
//! 1 KiB incompressible records in 10 shards of 10 000 (an index of 120 000 bytes each).
//! Each row goes through a new `HttpRootStore` behind a [`CountingStore`], as a new process
//! would. Needs `GUIDELOOM_NGINX_URL`/`GUIDELOOM_NGINX_ROOT` (`cargo xtask bench` sets them).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use guideloom_benchkit::random_bytes;
use guideloom_format::ShardMetadata;
use guideloom_io::{RequestStats, StatsSnapshot};
use guideloom_publish::{
    CountingStore, Counts, HttpRootStore, PublicationOptions, PublishMode, PublishRequest,
    Registry, Root, RootOptions, ShardRef, StoreOptions,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::runtime::Runtime;

use crate::target::{DATASET, RECORD};

const SHARDS: u64 = 10;
const PER_SHARD: u64 = 10_000;
/// The record a fresh reader gets: in the middle of shard 3, far from its index's tail.
const FRESH: u64 = 3 * PER_SHARD + 1234;
/// A second record of the same shard, for the warm read.
const WARM: u64 = 3 * PER_SHARD + 8765;

/// Removes the served directory when the table is done (or a step panics).
struct Served(PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A fresh counted reader of the served root at `url`: the store-level counts, and the
/// HTTP requests on the wire (one multi-range GET is one request there, however many ranges
/// the store level counts).
fn fresh(url: &str) -> (Root, Counted) {
    fresh_with(url, false)
}

/// [`fresh`], declaring (`listing`) that the origin lists directories.
fn fresh_with(url: &str, listing: bool) -> (Root, Counted) {
    let http = HttpRootStore::new(url)
        .expect("http root store")
        .with_listing(listing);
    let wire = Arc::clone(http.stats());
    let counting = CountingStore::new(Arc::new(http));
    let root = Root::new(Arc::new(counting.clone()), RootOptions::default());
    (root, Counted { counting, wire })
}

/// Both counts of one fresh reader.
struct Counted {
    counting: CountingStore,
    wire: Arc<RequestStats>,
}

impl Counted {
    fn counts(&self) -> (Counts, StatsSnapshot) {
        (self.counting.counts(), self.wire.snapshot())
    }
}

fn publish(rt: &Runtime, root: &Root, id: &str, shards: Vec<ShardRef>, mode: PublishMode) {
    let request = PublishRequest {
        dataset_id: DATASET.into(),
        snapshot_id: id.into(),
        shards,
        mode,
        schema: None,
    };
    rt.block_on(root.publish(&request, &PublicationOptions::default()))
        .expect("publish");
}

fn row(out: &mut String, op: &str, (c, wire): &(Counts, StatsSnapshot), target: &str) {
    let _ = writeln!(
        out,
        "| http | {op} | {} | {} | {} | {} | {} | {target} |",
        c.get.requests,
        c.get_range.requests + c.reader_reads.requests,
        wire.requests,
        wire.bytes_received,
        c.total().bytes_received,
    );
}

/// The table, or why it was skipped.
pub(crate) fn table(rt: &Runtime) -> Result<String, String> {
    let (Some(url), Some(served)) = (var("GUIDELOOM_NGINX_URL"), var("GUIDELOOM_NGINX_ROOT"))
    else {
        return Err(
            "GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT not set (run `cargo xtask bench`)".into(),
        );
    };
    let sub = format!(
        "bench-http-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let dir = PathBuf::from(served).join(&sub);
    let _served = Served(dir.clone());
    let local = Root::new(
        Registry::new()
            .resolve(dir.to_str().expect("UTF-8 path"), &StoreOptions::default())
            .expect("local root"),
        RootOptions::default(),
    );
    let mut rng = StdRng::seed_from_u64(15);
    let mut refs = Vec::new();
    for n in 0..SHARDS {
        let records = (0..PER_SHARD).map(|_| random_bytes(&mut rng, RECORD));
        let meta = ShardMetadata::new("raw", "documents");
        refs.push(
            rt.block_on(local.write_shard("w", n, meta, records))
                .expect("write shard"),
        );
    }
    publish(rt, &local, "first", refs, PublishMode::Full);
    // The same root where nginx also lists directories as JSON (`/listed/`).
    let listed_url = format!("{url}listed/{sub}");
    let url = format!("{url}{sub}");

    let mut out = String::from(
        "HTTP root requests (nginx on loopback; 100 000 × 1 KiB records in 10 shards of 10 000; \
         each row a new HttpRootStore behind a counting store, as a fresh process; `gets` = \
         whole-object GETs, the log probes; `ranged` = ranges read from shards (a multi-range \
         GET counts each range); `requests` and `bytes on the wire` = HTTP requests made and \
         response bytes received, as HttpRootStore counts them; `bytes read` = bytes the \
         store handed up):\n\n\
         | store | operation | gets | ranged | requests | bytes on the wire | bytes read | issue 15's target |\n\
         |---|---|---:|---:|---:|---:|---:|---|\n",
    );
    let (root, store) = fresh(&url);
    let snapshot = rt.block_on(root.latest()).expect("latest");
    row(
        &mut out,
        "open: latest (seq 1)",
        &store.counts(),
        "≤ 2 requests",
    );

    let (root, store) = fresh(&url);
    let snapshot_again = rt.block_on(root.latest()).expect("latest");
    assert_eq!(snapshot_again.seq(), snapshot.seq());
    let reader = root.reader(snapshot_again);
    let got = rt.block_on(reader.get_async(FRESH)).expect("fresh get");
    assert_eq!(got.len(), RECORD);
    let fresh_counts = store.counts();
    row(
        &mut out,
        "fresh: latest + get(1 KiB record)",
        &fresh_counts,
        "≤ 4 requests, ≤ 80 KB",
    );
    let got = rt.block_on(reader.get_async(WARM)).expect("warm get");
    assert_eq!(got.len(), RECORD);
    let second = store.counts();
    let opening = (second.0 - fresh_counts.0, second.1 - fresh_counts.1);
    row(
        &mut out,
        "second get (another record, same shard: opens it whole)",
        &opening,
        "—",
    );
    let got = rt.block_on(reader.get_async(WARM + 1)).expect("warm get");
    assert_eq!(got.len(), RECORD);
    let now = store.counts();
    let warm = (now.0 - second.0, now.1 - second.1);
    row(
        &mut out,
        "warm: get(a third record, same shard)",
        &warm,
        "1 request, exactly the record",
    );

    // Two appends: the latest is then seq 3, found by probing.
    for id in ["second", "third"] {
        let n = if id == "second" { SHARDS } else { SHARDS + 1 };
        let meta = ShardMetadata::new("raw", "documents");
        let one = vec![vec![7u8; RECORD]];
        let shard = rt
            .block_on(local.write_shard("w", n, meta, one))
            .expect("write shard");
        publish(rt, &local, id, vec![shard], PublishMode::Append);
    }
    let (root, store) = fresh(&url);
    let latest = rt.block_on(root.latest()).expect("latest");
    assert_eq!(latest.seq(), 3);
    row(
        &mut out,
        "open: latest (seq 3)",
        &store.counts(),
        "≤ 2 requests",
    );
    let (root, store) = fresh_with(&listed_url, true);
    let latest = rt.block_on(root.latest()).expect("latest");
    assert_eq!(latest.seq(), 3);
    row(
        &mut out,
        "open: latest (seq 3), origin with JSON listings (`StoreOptions::http_listing`)",
        &store.counts(),
        "≤ 2 requests",
    );
    Ok(out)
}
