//! The contract between the `crash_writer` helper binary (`src/bin/crash_writer.rs`) and the
//! SIGKILL test that runs and kills it (`tests/publish_crash.rs`): names, record contents
//! and the progress markers, so the test can check every object it finds against what the
//! writer must have written.

/// The dataset id the writer publishes under.
pub const DATASET: &str = "crash";

/// Iterations after which the writer stops by itself (a test that forgot to kill it does
/// not leave it running for long).
pub const MAX_ITERATIONS: u64 = 400;

/// The work id of iteration `k` of run `tag` (its shard is `shards/<work id>/00000000.glm`).
pub fn work_id(tag: &str, k: u64) -> String {
    format!("{tag}-w{k}")
}

/// The snapshot id of iteration `k` of run `tag`.
pub fn snapshot_id(tag: &str, k: u64) -> String {
    format!("{tag}-s{k}")
}

/// The annotation set of iteration `k` of run `tag` (version [`ANNOTATION_VERSION`]).
pub fn annotation_set(tag: &str, k: u64) -> String {
    format!("{tag}-a{k}")
}

/// The version of every annotation set the writer publishes.
pub const ANNOTATION_VERSION: &str = "v1";

/// Records in the shard of iteration `k`: 0 to 3, so empty shards occur too.
pub fn record_count(k: u64) -> u64 {
    k % 4
}

/// Record `j` of the shard of `work_id`.
pub fn record(work_id: &str, j: u64) -> Vec<u8> {
    format!("{work_id} record {j}").into_bytes()
}

/// The iteration number `k` of a work id made by [`work_id`].
pub fn iteration_of(work_id: &str) -> Option<u64> {
    work_id.rsplit_once("-w")?.1.parse().ok()
}

/// Annotation value `i` of a set over snapshot `snapshot_id`.
pub fn annotation_value(snapshot_id: &str, i: u64) -> String {
    format!("{snapshot_id}#{i}")
}

/// The phases the writer announces on stdout, one `<phase> <k>` line before each starts.
pub const PHASES: [&str; 4] = ["shard", "publish", "annotate", "done"];
