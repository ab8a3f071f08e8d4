//! Helper process of `tests/tests/it/publish_crash.rs`, which kills it with SIGKILL at a random
//! moment: on the root given on the command line it repeatedly writes a shard
//! (`write_shard`), publishes it as a snapshot (`publish`, alternating full and append) and,
//! unless the root is a declared mount, publishes an annotation set over that snapshot.
//! Before each phase it prints `<phase> <k>` on stdout (see `guideloom_tests::crash`).
//!
//! Usage: `crash_writer <root-dir> <local|mount> <run-tag>`. It exits by itself
//! after `MAX_ITERATIONS` iterations, with status 1 and a message on stderr if a step fails.

use std::io::Write;
use std::process::ExitCode;

use guideloom_format::ShardMetadata;
use guideloom_publish::{
    PublicationOptions, PublishMode, PublishRequest, Registry, RetryPolicy, Root, RootOptions,
    StoreOptions,
};
use guideloom_tests::crash;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, kind, tag] = args.as_slice() else {
        eprintln!("usage: crash_writer <root-dir> <local|mount> <run-tag>");
        return ExitCode::from(2);
    };
    let mount = match kind.as_str() {
        "local" => false,
        "mount" => true,
        other => {
            eprintln!("crash_writer: unknown root kind `{other}` (local or mount)");
            return ExitCode::from(2);
        }
    };
    let options = StoreOptions {
        mount,
        ..StoreOptions::default()
    };
    let uri = if mount {
        format!("file://{dir}")
    } else {
        dir.clone()
    };
    let root = match Registry::new()
        .resolve(&uri, &options)
        .map(|store| Root::new(store, RootOptions::default()))
    {
        Ok(root) => root,
        Err(e) => {
            eprintln!("crash_writer: cannot open {uri}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("crash_writer: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&root, mount, tag)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crash_writer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Announces a phase; fails (ending the run) once the test stopped reading.
fn mark(phase: &str, k: u64) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{phase} {k}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

async fn run(root: &Root, mount: bool, tag: &str) -> Result<(), String> {
    for k in 0..crash::MAX_ITERATIONS {
        let work_id = crash::work_id(tag, k);
        mark("shard", k)?;
        let records = (0..crash::record_count(k)).map(|j| crash::record(&work_id, j));
        let shard = root
            .write_shard(&work_id, 0, ShardMetadata::new("raw", "documents"), records)
            .await
            .map_err(|e| format!("write_shard {work_id}: {e}"))?;
        mark("publish", k)?;
        let snapshot_id = crash::snapshot_id(tag, k);
        let request = PublishRequest {
            dataset_id: crash::DATASET.into(),
            snapshot_id: snapshot_id.clone(),
            shards: vec![shard],
            mode: if k % 2 == 0 {
                PublishMode::Full
            } else {
                PublishMode::Append
            },
            schema: None,
        };
        let snapshot = root
            .publish(&request, &PublicationOptions::default())
            .await
            .map_err(|e| format!("publish {snapshot_id}: {e}"))?
            .snapshot;
        if !mount {
            mark("annotate", k)?;
            let values: Vec<String> = (0..snapshot.total_records())
                .map(|i| crash::annotation_value(&snapshot_id, i))
                .collect();
            let set = crash::annotation_set(tag, k);
            root.publish_annotations(
                &set,
                crash::ANNOTATION_VERSION,
                &snapshot,
                &values,
                &RetryPolicy::contended_update(),
            )
            .await
            .map_err(|e| format!("publish_annotations {set}: {e}"))?;
        }
        mark("done", k)?;
    }
    Ok(())
}
