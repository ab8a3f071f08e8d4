//! The request table of the publication benchmarks: each operation once more through a
//! [`CountingStore`], after the timed runs.

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use guideloom_publish::{PublicationOptions, Root, Sha256Inspector};
use tokio::runtime::Runtime;

use crate::target::{DATASET, RECORDS, SHARDS, Target};
use crate::{Published, open_first_record, publication, publish, upload};
use guideloom_publish::{CountingStore, Counts};

/// Random gets counted in the steady-state row.
const GETS: u64 = 64;

/// One target's rows and notes.
pub(crate) struct Economy {
    rows: String,
    notes: String,
}

/// Counts, and the bucket's own request counter, across one operation.
struct Meter<'a> {
    t: &'a Target,
    store: &'a CountingStore,
    counts: Counts,
    http: Option<u64>,
}

impl<'a> Meter<'a> {
    fn start(t: &'a Target, store: &'a CountingStore) -> Meter<'a> {
        Meter {
            t,
            store,
            counts: store.counts(),
            http: t.http_requests(),
        }
    }

    /// The counts since `start` (or the last `lap`), and the bucket requests.
    fn lap(&mut self) -> (Counts, Option<u64>) {
        let now = self.store.counts();
        let http = self.t.http_requests();
        let delta = now - self.counts;
        let http_delta = http.zip(self.http).map(|(a, b)| a - b);
        self.counts = now;
        self.http = http;
        (delta, http_delta)
    }
}

fn row(out: &mut String, t: &Target, op: &str, c: Counts, http: Option<u64>, per: u64) {
    let per_unit = c.requests() as f64 / per as f64;
    let _ = writeln!(
        out,
        "| {} | {op} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} |",
        t.name,
        c.put_create.requests,
        c.put_cas.requests,
        c.get.requests,
        c.get_range.requests,
        c.head.requests,
        c.list.requests,
        c.reader_reads.requests,
        c.requests(),
        per_unit,
        c.total().bytes_received,
        c.total().bytes_sent,
        http.map_or("—".to_owned(), |h| h.to_string()),
    );
}

/// A fresh counted root with `dataset.json` written (not counted by the caller's meter).
fn counted_root(t: &Target, tag: &str, rt: &Runtime) -> (Root, CountingStore) {
    let (root, store) = t.counted(&t.fresh(tag));
    rt.block_on(root.init(DATASET)).expect("init root");
    (root, store)
}

/// Upload + publish on a fresh root with `options`: the publish's counts.
fn publish_counts(
    rt: &Runtime,
    t: &Target,
    shards: &[Bytes],
    options: &PublicationOptions,
    out: &mut String,
    label: &str,
) -> Counts {
    let (root, store) = counted_root(t, "count", rt);
    let mut m = Meter::start(t, &store);
    let refs = rt.block_on(upload(&root, shards));
    let (up, up_http) = m.lap();
    rt.block_on(publish(&root, refs, "s1", options));
    let (c, http) = m.lap();
    if label == "publish" {
        row(out, t, "upload 16 shards", up, up_http, SHARDS);
    }
    row(out, t, label, c, http, SHARDS);
    c
}

/// The rows of one target.
pub(crate) fn table(rt: &Runtime, t: &Target, shards: &[Bytes], p: &Published) -> Economy {
    let mut rows = String::new();
    let plain = publish_counts(rt, t, shards, &publication(false), &mut rows, "publish");
    let footer = publish_counts(
        rt,
        t,
        shards,
        &publication(true),
        &mut rows,
        "publish, verify (footer)",
    );
    let sha = PublicationOptions {
        verify_record_counts: true,
        inspector: Some(Arc::new(Sha256Inspector)),
        ..PublicationOptions::default()
    };
    let sha = publish_counts(rt, t, shards, &sha, &mut rows, "publish, verify (sha256)");

    let (root, store) = t.counted(&p.sub);
    let mut m = Meter::start(t, &store);
    let first = rt.block_on(open_first_record(root.clone()));
    assert_eq!(first.len(), crate::target::RECORD);
    let (c, http) = m.lap();
    row(&mut rows, t, "open: latest + get(0)", c, http, 1);

    let reader = root.reader(p.snapshot.clone());
    for s in 0..SHARDS {
        rt.block_on(reader.get_async(s * RECORDS))
            .expect("open shard");
    }
    let mut m = Meter::start(t, &store);
    for k in 0..GETS {
        rt.block_on(reader.get_async((k * 37) % (SHARDS * RECORDS)))
            .expect("get");
    }
    let (c, http) = m.lap();
    row(&mut rows, t, "random get ×64 (shards open)", c, http, GETS);

    let per = |n: u64| n as f64 / SHARDS as f64;
    let mut notes = String::new();
    for (name, v) in [("footer", footer), ("sha256", sha)] {
        let _ = writeln!(
            notes,
            "- {}: verify_record_counts ({name}) costs {:+.2} requests and {:+.0} bytes read per shard \
             over the unverified publish ({} → {} requests for {SHARDS} shards).",
            t.name,
            per(v.requests()) - per(plain.requests()),
            per(v.total().bytes_received) - per(plain.total().bytes_received),
            plain.requests(),
            v.requests(),
        );
    }
    Economy { rows, notes }
}

/// The whole table (every target's rows), printed and written to
/// `$GUIDELOOM_BENCH_COUNTS_DIR/publish.md` when that variable is set.
pub(crate) fn emit(parts: &[Economy]) {
    let mut out = String::from(
        "Publication requests (one run of each operation through a counting RootStore; \
         16 shards of 64 × 1 KiB records; `per` = requests per shard, per open or per get; \
         bucket = requests the S3 bucket handle sent, a cross-check):\n\n\
         | store | operation | create puts | cas puts | gets | ranged gets | heads | lists | \
         reader reads | requests | per | bytes read | bytes written | bucket |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in parts {
        out.push_str(&p.rows);
    }
    out.push('\n');
    for p in parts {
        out.push_str(&p.notes);
    }
    println!("\n{out}");
    guideloom_benchkit::write_counts("publish", &out);
}
