//! HTTP requests that publishing costs over an S3-compatible server, counted from the
//! server's own request log: `Publisher::open_with`, one `Publisher::write_shard` per shard
//! (2 000 CBOR records of ~1 KiB each, as in `read_paths`), one `Publisher::publish` of all of
//! them, one more shard appended by a second publication, then `Dataset::open_with` and one
//! `get`. Each phase's count is the number of log lines
//! naming this run's unique prefix, so other clients of the same server do not count. A bulk
//! delete (`POST /BUCKET?delete`) names its keys in its body, not its path, so it is not
//! counted: the one such request is the deletion of the conditional-put probe object that the
//! first write of a process makes (the probe's 4 PUTs and 1 GET are counted).
//!
//! Needs `GUIDELOOM_S3_ENDPOINT`, `GUIDELOOM_S3_BUCKET` (an existing bucket), the AWS
//! credential variables, and `GUIDELOOM_S3_REQUEST_LOG`: the path of the server's request log,
//! one line per request naming its path (moto's server log as `cargo xtask servers up` writes
//! it, `.xtask/servers/up/moto/moto.log`). Without them it prints "skipped: ..." and exits 0.
//! Uses only the stable public API, so the same file builds at commits before and after a
//! refactor (compare in one session).
//!
//! `cargo run --release -p guideloom --example publish_requests -- [SHARDS]`

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use guideloom::{Dataset, DatasetOptions, PublishMode, Publisher, S3Options, StoreOptions};

const RECORDS_PER_SHARD: u64 = 2_000;

fn records(shard: u64) -> Vec<String> {
    (shard * RECORDS_PER_SHARD..(shard + 1) * RECORDS_PER_SHARD)
        .map(|i| format!("{i:08}-{}", "x".repeat(1000)))
        .collect()
}

/// Request log lines naming `tag`, by HTTP method.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Requests {
    get: u64,
    head: u64,
    put: u64,
    post: u64,
    delete: u64,
}

impl Requests {
    fn total(self) -> u64 {
        self.get + self.head + self.put + self.post + self.delete
    }

    fn minus(self, earlier: Requests) -> Requests {
        Requests {
            get: self.get - earlier.get,
            head: self.head - earlier.head,
            put: self.put - earlier.put,
            post: self.post - earlier.post,
            delete: self.delete - earlier.delete,
        }
    }
}

/// Counts the lines of the log at `path` that contain `tag`, by the `METHOD /` in each (moto
/// colours the request of a non-2xx response, so the method does not always follow the quote).
/// The server writes a line per request; a short pause lets the last one land before the file
/// is read.
fn count(path: &Path, tag: &str) -> Requests {
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(path).expect("read the request log");
    let mut r = Requests::default();
    for line in log.lines().filter(|l| l.contains(tag)) {
        if line.contains("GET /") {
            r.get += 1;
        } else if line.contains("HEAD /") {
            r.head += 1;
        } else if line.contains("PUT /") {
            r.put += 1;
        } else if line.contains("POST /") {
            r.post += 1;
        } else if line.contains("DELETE /") {
            r.delete += 1;
        }
    }
    r
}

fn print(phase: &str, r: Requests, per: u64) {
    println!(
        "{phase:<22} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>9.2}",
        r.get,
        r.head,
        r.put,
        r.post,
        r.delete,
        r.total(),
        r.total() as f64 / per as f64
    );
}

fn main() {
    let (Ok(endpoint), Ok(bucket), Ok(log)) = (
        std::env::var("GUIDELOOM_S3_ENDPOINT"),
        std::env::var("GUIDELOOM_S3_BUCKET"),
        std::env::var("GUIDELOOM_S3_REQUEST_LOG"),
    ) else {
        println!(
            "skipped: set GUIDELOOM_S3_ENDPOINT, GUIDELOOM_S3_BUCKET and GUIDELOOM_S3_REQUEST_LOG"
        );
        return;
    };
    let log = Path::new(&log);
    let shards: u64 = std::env::args()
        .nth(1)
        .map_or(8, |a| a.parse().expect("SHARDS"));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let tag = format!("publish-requests-{nanos}");
    let uri = format!("s3://{bucket}/{tag}");
    let storage = StoreOptions {
        s3: S3Options {
            endpoint: Some(endpoint.clone()),
            allow_http: endpoint.starts_with("http://"),
            ..S3Options::default()
        },
        ..StoreOptions::default()
    };
    println!("{shards} shards of {RECORDS_PER_SHARD} records to {uri}");
    println!("phase                    GET  HEAD   PUT  POST   DEL  total  per unit");
    let start = count(log, &tag);
    let publisher = Publisher::open_with(&uri, storage.clone()).expect("open publisher");
    let opened = count(log, &tag);
    print("open publisher", opened.minus(start), 1);
    let refs = (0..shards)
        .map(|n| {
            publisher
                .write_shard("bench", n, records(n))
                .expect("write shard")
        })
        .collect();
    let written = count(log, &tag);
    print("write_shard (per shard)", written.minus(opened), shards);
    publisher
        .publish("bench", "s1", refs, PublishMode::Full)
        .expect("publish");
    let published = count(log, &tag);
    print("publish (one)", published.minus(written), 1);
    print("publish per shard", published.minus(written), shards);
    print("write+publish/shard", published.minus(opened), shards);
    // Steady state: one more shard, appended by a second publication of the same publisher.
    let more = publisher
        .write_shard("bench", shards, records(shards))
        .expect("write shard");
    let written = count(log, &tag);
    print("write_shard again", written.minus(published), 1);
    publisher
        .publish("bench", "s2", vec![more], PublishMode::Append)
        .expect("append");
    let published = count(log, &tag);
    print("publish append (1)", published.minus(written), 1);
    let ds = Dataset::open_with(&uri, DatasetOptions::default().with_store(storage)).expect("open");
    ds.get(0).expect("get");
    let read = count(log, &tag);
    print("open dataset + get(0)", read.minus(published), 1);
}
