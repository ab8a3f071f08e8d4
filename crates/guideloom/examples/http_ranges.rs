//! Reading a dataset over HTTP by byte ranges: shards written into the directory an HTTP
//! origin (nginx) serves are read through `HttpIo`: one tail read per shard to open it, one
//! ranged GET per record, coalesced ranges for batches. Prints the request counts. Then a
//! published dataset in the same directory is opened by its `http://` URL as a read-only
//! root (`Dataset::open`, feature `http`).
//!
//! Needs `GUIDELOOM_NGINX_URL` (the origin's base URL, trailing slash) and
//! `GUIDELOOM_NGINX_ROOT` (the directory it serves). Without them it prints "skipped: ..."
//! and exits 0 (under `GUIDELOOM_CI=1` it fails instead).
//!
//! `cargo run -p guideloom --example http_ranges`

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use guideloom::io::blocking::BlockingIo;
use guideloom::io::http::{HttpIo, HttpPath};
use guideloom::{CborFormat, DocumentStorage, WriterOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (Ok(base), Ok(served)) = (
        std::env::var("GUIDELOOM_NGINX_URL"),
        std::env::var("GUIDELOOM_NGINX_ROOT"),
    ) else {
        if std::env::var("GUIDELOOM_CI").as_deref() == Ok("1") {
            return Err(
                "GUIDELOOM_CI=1 but GUIDELOOM_NGINX_URL/GUIDELOOM_NGINX_ROOT are unset".into(),
            );
        }
        println!("skipped: set GUIDELOOM_NGINX_URL and GUIDELOOM_NGINX_ROOT to run this example");
        return Ok(());
    };
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let name = format!("example-http-ranges-{}-{nanos}", std::process::id());
    let dir = std::path::Path::new(&served).join(&name);

    // Write 500 records (shards of 200) into the served directory.
    let local = DocumentStorage::local(&dir, CborFormat::<String>::new())
        .with_writer_options(WriterOptions::default().max_shard_records(200));
    let mut writer = local.sync_writer()?;
    for i in 0..500u64 {
        writer.append(i, &format!("record {i}"))?;
    }
    let shards = writer.finish()?;
    println!("wrote {} shards under {}", shards.len(), dir.display());
    // Shards are written owner-only; the web server may run as another user.
    #[cfg(unix)]
    for shard in &shards {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shard.path, std::fs::Permissions::from_mode(0o644))?;
    }

    // Read back over HTTP; the served directory is removed whatever the outcome.
    let outcome = read_over_http(&base, &name, shards.len())
        .and_then(|()| dataset_over_http(&base, &name, &dir));
    std::fs::remove_dir_all(&dir)?;
    outcome
}

/// Publishes a dataset root under `dir/dataset` (sync `Publisher`) and reads it back as a
/// read-only `http://` root.
fn dataset_over_http(
    base: &str,
    name: &str,
    dir: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = dir.join("dataset");
    let publisher = guideloom::Publisher::open(root.to_str().ok_or("non-UTF-8 path")?)?;
    let shards = (0..3u64)
        .map(|n| {
            let texts: Vec<String> = (n * 40..n * 40 + 40).map(|i| format!("doc {i}")).collect();
            publisher.write_shard("web", n, &texts)
        })
        .collect::<Result<Vec<_>, _>>()?;
    publisher.publish("web", "v1", shards, guideloom::PublishMode::Full)?;
    let url = format!("{}/{name}/dataset", base.trim_end_matches('/'));
    let ds = guideloom::Dataset::open(&url)?;
    let doc: String = ds.get_as(77)?;
    assert_eq!(doc, "doc 77");
    let batch = ds.get_many(&[119, 0, 40])?;
    println!(
        "dataset over {url}: snapshot {}, {} records; record 77 = {doc:?}; get_many of 3 \
         records in 3 shards: {} bytes",
        ds.snapshot().id(),
        ds.len(),
        batch.iter().map(|b| b.len()).sum::<usize>()
    );
    Ok(())
}

fn read_over_http(base: &str, name: &str, shards: usize) -> Result<(), Box<dyn std::error::Error>> {
    // Read them back over HTTP: HttpIo is async; BlockingIo gives sync readers over it.
    let http = HttpIo::new(base)?;
    let stats = Arc::clone(http.stats());
    let remote = DocumentStorage::new(
        HttpPath::new(name)?,
        CborFormat::<String>::new(),
        BlockingIo::new(http)?,
    );
    let reader = remote.sync_reader()?; // discovery: HEAD/tail per shard, stops at the first 404
    let opened = stats.reset();
    assert_eq!(reader.len(), 500);
    assert_eq!(reader.read(321)?, "record 321");
    let one = stats.reset();
    let batch = reader.read_many(&[10, 11, 12, 13, 250])?;
    assert_eq!(batch[4], "record 250");
    let many = stats.reset();
    println!(
        "open (discovery of {} shards): {} requests, {} bytes",
        shards, opened.requests, opened.bytes_received
    );
    println!(
        "one record: {} request(s), {} bytes",
        one.requests, one.bytes_received
    );
    println!(
        "5 records in 2 shards: {} request(s), {} bytes",
        many.requests, many.bytes_received
    );
    Ok(())
}
