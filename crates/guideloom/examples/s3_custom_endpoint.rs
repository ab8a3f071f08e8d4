//! Publishing to S3 through a custom endpoint (an S3-compatible server such as moto, MinIO
//! or Ceph), then reading it back with the Loader.
//!
//! Needs `GUIDELOOM_S3_ENDPOINT` (e.g. `http://127.0.0.1:9000`) and `GUIDELOOM_S3_BUCKET`
//! (an existing bucket); credentials come from the standard AWS variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`). Without them it prints
//! "skipped: ..." and exits 0 (under `GUIDELOOM_CI=1` it fails instead).
//!
//! `cargo run -p guideloom --example s3_custom_endpoint`

use std::time::{SystemTime, UNIX_EPOCH};

use guideloom::publish::S3Addressing;
use guideloom::{
    CborFormat, Dataset, DatasetOptions, Loader, LoaderOptions, S3Options, StoreOptions,
    publish_cbor, resolve_root,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (Ok(endpoint), Ok(bucket)) = (
        std::env::var("GUIDELOOM_S3_ENDPOINT"),
        std::env::var("GUIDELOOM_S3_BUCKET"),
    ) else {
        if std::env::var("GUIDELOOM_CI").as_deref() == Ok("1") {
            return Err(
                "GUIDELOOM_CI=1 but GUIDELOOM_S3_ENDPOINT/GUIDELOOM_S3_BUCKET are unset".into(),
            );
        }
        println!("skipped: set GUIDELOOM_S3_ENDPOINT and GUIDELOOM_S3_BUCKET to run this example");
        return Ok(());
    };
    // The endpoint is configuration, never a credential: keys come from the AWS chain.
    let options = DatasetOptions::default().with_store(StoreOptions {
        s3: S3Options {
            endpoint: Some(endpoint.clone()),
            addressing: S3Addressing::Path,
            allow_http: endpoint.starts_with("http://"),
            ..S3Options::default()
        },
        ..StoreOptions::default()
    });
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let uri = format!("s3://{bucket}/examples/s3-custom-endpoint-{nanos}");

    let runtime = tokio::runtime::Runtime::new()?;
    let records: Vec<String> = (0..300).map(|i| format!("line {i}")).collect();
    let snap = runtime.block_on(async {
        let root = resolve_root(&uri, &options)?;
        publish_cbor(&root, "lines", "v1", &records, 100, "writer-0").await
    })?;
    drop(runtime);
    println!(
        "published {} records in {} shards to {uri} at {endpoint}",
        snap.total_records(),
        snap.shards().len()
    );

    let ds = Dataset::open_with(&uri, options)?;
    assert_eq!(ds.get_as::<String>(123)?, "line 123");
    // A remote root: the Loader's Auto shuffle reads a few shards at a time.
    let loader = Loader::with_format(
        ds,
        LoaderOptions::new(32).with_seed(1),
        CborFormat::<String>::new(),
    )?;
    let n: usize = loader
        .epoch(0)?
        .map(|b| b.map(|b| b.records.len()))
        .sum::<Result<usize, _>>()?;
    assert_eq!(n, 300);
    println!("read back {n} records through the Loader (shard-window shuffle)");
    Ok(())
}
