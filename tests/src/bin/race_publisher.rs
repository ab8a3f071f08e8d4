//! Helper process of `tests/tests/it/publish_races.rs` (`local_publishers_in_separate_processes`):
//! uploads one shard of its own into the local root given on the command line, waits until the
//! parent creates the file `go` at the root's top level (so that the publications of all the
//! children overlap), publishes it as snapshot `run-001` and prints one line:
//! `CHILD-RESULT ok <shard key>`, `CHILD-RESULT collision <key>` or `CHILD-RESULT error <text>`.
//!
//! Usage: `race_publisher <root-dir> <child-id>`. Exits 2 on bad arguments, 1 on an
//! unexpected failure before publishing.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use guideloom_publish::{
    Error, PublicationOptions, PublishMode, PublishRequest, Root, RootOptions, StoreOptions,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, id] = args.as_slice() else {
        eprintln!("usage: race_publisher <root-dir> <child-id>");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("race_publisher: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        let root = Root::open(dir, &StoreOptions::default(), RootOptions::default())?;
        let work_id = format!("p{id}");
        let body = Bytes::from(format!("shard of {work_id} with 1 records").into_bytes());
        let shard = root.upload_shard(&work_id, 0, body, 1).await?;
        let go = Path::new(dir).join("go");
        while !go.exists() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let request = PublishRequest {
            dataset_id: "captures".into(),
            snapshot_id: "run-001".into(),
            shards: vec![shard],
            mode: PublishMode::Full,
            schema: None,
        };
        Ok::<_, Error>(root.publish(&request, &PublicationOptions::default()).await)
    });
    match outcome {
        Err(e) => {
            eprintln!("race_publisher: cannot prepare the shard: {e}");
            ExitCode::FAILURE
        }
        Ok(Ok(s)) => {
            println!("CHILD-RESULT ok {}", s.snapshot.shards()[0].key);
            ExitCode::SUCCESS
        }
        Ok(Err(Error::PublicationCollision { key })) => {
            println!("CHILD-RESULT collision {key}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            println!("CHILD-RESULT error {e}");
            ExitCode::SUCCESS
        }
    }
}
