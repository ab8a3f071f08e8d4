//! Concurrent annotation: several threads publish annotation sets (and new versions of
//! them) against one snapshot at the same time; the catalog's compare-and-swap keeps every
//! one of them. Runs on a local root in a temporary directory (no server needed); set
//! `GUIDELOOM_ROOT` to use another root URI (e.g. `memory://demo` or an `s3://` URI).
//!
//! `cargo run -p guideloom --example concurrent_annotation`

use std::sync::Arc;

use guideloom::{Dataset, DatasetOptions, RetryPolicy, publish_cbor, resolve_root};

const WRITERS: u64 = 4;
const VERSIONS: u64 = 3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let uri = match std::env::var("GUIDELOOM_ROOT") {
        Ok(uri) => uri,
        Err(_) => tmp
            .path()
            .join("root")
            .to_str()
            .ok_or("non-UTF-8 path")?
            .to_owned(),
    };
    let runtime = Arc::new(tokio::runtime::Runtime::new()?);
    let texts: Vec<String> = (0..100).map(|i| format!("document {i}")).collect();
    let snapshot = runtime.block_on(async {
        let root = resolve_root(&uri, &DatasetOptions::default())?;
        publish_cbor(&root, "docs", "s1", &texts, 40, "w").await
    })?;

    // WRITERS threads, each publishing VERSIONS versions of its own set, all at once.
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (runtime, uri, snapshot) = (Arc::clone(&runtime), uri.clone(), snapshot.clone());
            std::thread::spawn(move || -> guideloom::Result<()> {
                let root = resolve_root(&uri, &DatasetOptions::default())?;
                for v in 0..VERSIONS {
                    let values: Vec<u64> = (0..100).map(|i| i * 1000 + w * 10 + v).collect();
                    runtime.block_on(root.publish_annotations(
                        &format!("score-{w}"),
                        &format!("v{v}"),
                        &snapshot,
                        &values,
                        &RetryPolicy::contended_update(),
                    ))?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "annotation thread panicked")??;
    }

    // Every set survived, each at its last version.
    let ds = Dataset::open(&uri)?;
    let catalog = runtime.block_on(ds.root().catalog())?;
    for w in 0..WRITERS {
        let value: u64 = ds.annotation(&format!("score-{w}"), 7)?;
        assert_eq!(
            value,
            7000 + w * 10 + (VERSIONS - 1),
            "latest version of score-{w}"
        );
        for v in 0..VERSIONS {
            assert!(
                catalog
                    .find(&format!("score-{w}"), Some(&format!("v{v}")))
                    .is_some()
            );
        }
    }
    println!(
        "{WRITERS} writers x {VERSIONS} versions published concurrently to {uri}: all {} entries in the catalog",
        WRITERS * VERSIONS
    );
    Ok(())
}
