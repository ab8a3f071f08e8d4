//! Command-line syntax (clap derive).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Sharded datasets of records: write, publish, inspect, read, verify, annotate, benchmark.
///
/// ROOT is a local directory, `file:///abs/path`, `s3://bucket/prefix`, or (read-only: info,
/// get, cat, verify) an `http(s)://` base URL where a root is served. S3-compatible
/// endpoints come from the standard AWS environment variables (AWS_ENDPOINT_URL, AWS_REGION,
/// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). `--mount` declares that a
/// local ROOT is a mounted bucket (e.g. Mountpoint for S3).
#[derive(Debug, Parser)]
#[command(name = "guideloom", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Machine-readable output: one JSON document (or JSON Lines for `cat`) on stdout.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// S3: path-style addressing (`endpoint/bucket/key`). Default: path style when
    /// AWS_ENDPOINT_URL is set, virtual-hosted style for AWS itself.
    #[arg(long, global = true)]
    pub(crate) s3_path_style: bool,
    /// S3: allow a plain `http://` endpoint.
    #[arg(long, global = true)]
    pub(crate) s3_allow_http: bool,
    /// S3: sign with this profile of the shared AWS config and credentials files (its keys
    /// and region win over AWS_ACCESS_KEY_ID / AWS_REGION). Default: AWS_PROFILE, then the
    /// standard chain.
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) s3_profile: Option<String>,
    /// The local ROOT is a mounted bucket (Mountpoint for S3 or similar): shards and
    /// snapshots are written create-only with sequential writes; annotations are refused
    /// (publish them through the bucket's s3:// root).
    #[arg(long, global = true)]
    pub(crate) mount: bool,
    /// Remote roots (http(s)://, s3://): seconds allowed for one request attempt, from
    /// connecting to the end of the body. Default: 30.
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) timeout: Option<Duration>,
    /// Remote roots: seconds allowed to connect. Default: 10 (HTTP), 5 (S3).
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) connect_timeout: Option<Duration>,
    /// Remote roots: retries of a failed attempt (timeouts, resets, HTTP 5xx and 429).
    /// Default: 3 (HTTP), 4 (S3).
    #[arg(long, global = true, value_name = "N")]
    pub(crate) retries: Option<u32>,
    /// Remote roots: seconds after which no retry starts (HTTP: the read itself ends then,
    /// whatever attempts remain). Default: 60.
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) deadline: Option<Duration>,
}

/// A positive, finite number of seconds (fractions allowed: `0.5`).
fn parse_secs(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{text:?}: the number of seconds must be positive"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{text:?}: {e}"))
}

/// Record format of `write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RecordFormat {
    /// One JSON value per input line, stored as CBOR.
    Cbor,
    /// One file per record, from a directory (sorted by name), stored as raw bytes.
    Raw,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write records into shards under ROOT/shards/WORK_ID/ (create-only).
    Write(WriteArgs),
    /// Publish written shards as a new snapshot.
    Publish(PublishArgs),
    /// Show the dataset id, snapshots, shards, records, bytes and annotation sets.
    Info(InfoArgs),
    /// Print one record as JSON.
    Get(GetArgs),
    /// Print records as JSON Lines.
    Cat(CatArgs),
    /// Check every shard's size and footer (`--deep`: every record checksum too).
    Verify(VerifyArgs),
    /// Publish an annotation set: one JSON value per line, one line per record.
    Annotate(AnnotateArgs),
    /// Measure random and sequential read throughput beside the raw ceiling.
    Bench(BenchArgs),
    /// Build, publish, annotate, read and verify a small realistic dataset.
    Quickstart(QuickstartArgs),
    /// Convert one shard file between the native format (.glm) and ArrayRecord
    /// (.array_record), keeping every record's bytes.
    Convert(ConvertArgs),
}

/// `guideloom write`.
#[derive(Debug, Args)]
pub(crate) struct WriteArgs {
    /// The dataset root.
    #[arg(long)]
    pub(crate) root: String,
    /// This worker's id: shards go to shards/WORK_ID/N.glm.
    #[arg(long)]
    pub(crate) work_id: String,
    /// Record format.
    #[arg(long, value_enum, default_value_t = RecordFormat::Cbor)]
    pub(crate) format: RecordFormat,
    /// Start a new shard before one would exceed this many bytes.
    #[arg(long, default_value_t = 64 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub(crate) max_shard_bytes: u64,
    /// JSON Lines file (`-` for stdin) for cbor; a directory of files for raw.
    pub(crate) input: PathBuf,
}

/// `guideloom publish`.
#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    /// The dataset root.
    #[arg(long)]
    pub(crate) root: String,
    /// The dataset's id (must match the root's dataset.json; written on first publication).
    #[arg(long)]
    pub(crate) dataset_id: String,
    /// The new snapshot's id.
    #[arg(long)]
    pub(crate) snapshot_id: String,
    /// Also check each shard's record count and footer checksum (one 64-byte read each).
    #[arg(long)]
    pub(crate) verify_record_counts: bool,
    /// Extend the latest snapshot with the shards instead of replacing it.
    #[arg(long)]
    pub(crate) append: bool,
    /// Publish every shard of these workers (repeatable). Default: every shard not yet in
    /// any snapshot.
    #[arg(long = "work-id")]
    pub(crate) work_ids: Vec<String>,
    /// Also take named work ids whose write did not finish (no completion marker), e.g.
    /// shards written by the library or another tool. Without it they are refused.
    #[arg(long, requires = "work_ids")]
    pub(crate) include_incomplete: bool,
    /// Adopt the ArrayRecord file at KEY (relative to the root; repeatable) as a shard,
    /// without rewriting it: its size and record count come from its footer (one tail
    /// read). Adopted files follow the other shards, in the order given.
    #[arg(long = "adopt-array-record", value_name = "KEY")]
    pub(crate) adopt_array_record: Vec<String>,
}

/// `guideloom info`.
#[derive(Debug, Args)]
pub(crate) struct InfoArgs {
    /// The dataset root.
    pub(crate) root: String,
}

/// `guideloom get`.
#[derive(Debug, Args)]
pub(crate) struct GetArgs {
    /// The dataset root.
    pub(crate) root: String,
    /// Record index (0-based).
    pub(crate) index: u64,
    /// Read this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
}

/// `guideloom cat`.
#[derive(Debug, Args)]
pub(crate) struct CatArgs {
    /// The dataset root.
    pub(crate) root: String,
    /// First record (inclusive).
    #[arg(long, default_value_t = 0)]
    pub(crate) start: u64,
    /// Last record (exclusive; default: the end).
    #[arg(long)]
    pub(crate) end: Option<u64>,
    /// Read this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
}

/// `guideloom verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The dataset root.
    pub(crate) root: String,
    /// Also read every record and check its CRC32C.
    #[arg(long)]
    pub(crate) deep: bool,
    /// Verify only this snapshot (default: every snapshot).
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
}

/// `guideloom annotate`.
#[derive(Debug, Args)]
pub(crate) struct AnnotateArgs {
    /// The dataset root.
    pub(crate) root: String,
    /// The annotation set's name.
    #[arg(long)]
    pub(crate) name: String,
    /// The set's version (default: v1, or the next vN after the set's latest).
    #[arg(long = "set-version")]
    pub(crate) set_version: Option<String>,
    /// Annotate this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// One JSON value per line (`-` for stdin), line i for record i.
    pub(crate) input: PathBuf,
}

/// `guideloom bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The dataset root.
    pub(crate) root: String,
    /// Random record reads per backend.
    #[arg(long, default_value_t = 2000)]
    pub(crate) reads: u64,
    /// Seed of the random record choice.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Read this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
}

/// `guideloom quickstart`.
#[derive(Debug, Args)]
pub(crate) struct QuickstartArgs {
    /// Where to build (must be absent or empty). Default: a fresh directory under the
    /// system's temporary directory.
    pub(crate) dir: Option<PathBuf>,
    /// Records per worker.
    #[arg(long, default_value_t = 1000)]
    pub(crate) records_per_worker: u64,
    /// Number of workers.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub(crate) workers: u64,
}

/// The format `convert` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ConvertTo {
    /// An ArrayRecord file, readable by the `array_record` package and Grain.
    Arrayrecord,
    /// A native guideloom shard (raw records).
    Native,
}

/// `guideloom convert`.
#[derive(Debug, Args)]
pub(crate) struct ConvertArgs {
    /// The shard file to read.
    pub(crate) src: PathBuf,
    /// The file to write (must not exist).
    pub(crate) dst: PathBuf,
    /// The output format. Default: from the names, the side whose name contains
    /// `.array_record` is the ArrayRecord file.
    #[arg(long, value_enum)]
    pub(crate) to: Option<ConvertTo>,
    /// ArrayRecord output: array_record's option string, e.g. `group_size:1,zstd:3`
    /// (the default) or `group_size:64,snappy`.
    #[arg(long, default_value = "")]
    pub(crate) options: String,
}
