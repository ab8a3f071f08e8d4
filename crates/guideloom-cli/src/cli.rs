//! Command-line syntax (clap derive).

mod keep;
mod maintain;
mod serve;
mod transfer;

pub(crate) use keep::{GcArgs, TagArgs};
pub(crate) use maintain::{CardArgs, CompactArgs};
pub(crate) use serve::ServeArgs;
pub(crate) use transfer::{ExportArgs, ExportFormat, ImportArgs, ImportFormat, ImportMode};

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The most seconds `--timeout`, `--connect-timeout` and `--deadline` take: one day. A
/// bound is for a stalled server; a day is longer than any one request or read of a shard
/// (5 GiB at 100 KB/s takes 15 hours) and keeps every deadline computable.
pub(crate) const MAX_SECS: f64 = 86_400.0;
/// The most `--retries`: retries are for transient faults (resets, 5xx, 429), and a request
/// that failed 100 times in a row is not transient.
pub(crate) const MAX_RETRIES: u32 = 100;
/// The largest `--max-shard-bytes`: the library's largest encoded shard by default
/// (`RootOptions::max_encoded_shard_bytes`, S3's single-PUT cap of 5 GiB). A larger limit
/// could only end in that refusal after the shard was written.
pub(crate) const MAX_SHARD_BYTES: u64 = 5 << 30;
/// The most random reads `bench --reads` takes: each read keeps its range for three rounds
/// (about 50 bytes of bookkeeping) and is timed through four backends; a million reads are
/// more than any median needs.
pub(crate) const MAX_BENCH_READS: u64 = 1_000_000;
/// The most records a quickstart builds, per worker and in all (`--workers ×
/// --records-per-worker`): a quickstart is a demonstration of a few seconds to a minute,
/// and it keeps one annotation value per record in memory.
pub(crate) const MAX_QUICKSTART_RECORDS: u64 = 1_000_000;

/// Sharded datasets of records: write, publish, inspect, read, verify, annotate, benchmark.
///
/// ROOT (given positionally or as `--root ROOT`, to every command) is a local directory,
/// `file:///abs/path`, `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`,
/// or (read-only: info, get, cat, verify, annotations) an `http(s)://` base URL where a root
/// is served. Credentials and endpoints come from each cloud's standard environment: AWS_*
/// (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
/// AWS_SESSION_TOKEN), GOOGLE_* (GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_SERVICE_ACCOUNT) and
/// AZURE_* (AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY, ...). `--mount` declares
/// that a local ROOT is a mounted bucket (e.g. Mountpoint for S3).
#[derive(Debug, Parser)]
#[command(name = "guideloom", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes, before or after the command's name. Listed once, under
/// "Global options" in `guideloom --help` (see [`command`]).
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
    /// standard chain. Needs a build with feature aws-profile (not a default).
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) s3_profile: Option<String>,
    /// gs://: base URL of a GCS-compatible server such as fake-gcs-server. Default:
    /// GOOGLE_BASE_URL, else Google Cloud Storage.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) gcs_endpoint: Option<String>,
    /// gs://: allow a plain `http://` endpoint (GOOGLE_ALLOW_HTTP=true does the same).
    #[arg(long, global = true)]
    pub(crate) gcs_allow_http: bool,
    /// gs://: send requests unsigned, fetching no token (an emulator, or a public bucket read
    /// anonymously; GOOGLE_SKIP_SIGNATURE=true does the same).
    #[arg(long, global = true)]
    pub(crate) gcs_anonymous: bool,
    /// az://: the blob service's URL. With --azure-emulator, the emulator's base URL without
    /// the account (default: AZURITE_BLOB_STORAGE_URL, else http://127.0.0.1:10000);
    /// otherwise the account's URL (default: AZURE_STORAGE_ENDPOINT, else
    /// https://ACCOUNT.blob.core.windows.net).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) azure_endpoint: Option<String>,
    /// az://: the Azurite emulator, with its well-known development account and key
    /// (AZURE_STORAGE_USE_EMULATOR=true does the same); plain HTTP is allowed.
    #[arg(long, global = true)]
    pub(crate) azure_emulator: bool,
    /// az://: allow a plain `http://` endpoint (AZURE_ALLOW_HTTP=true does the same).
    #[arg(long, global = true)]
    pub(crate) azure_allow_http: bool,
    /// The local ROOT is a mounted bucket (Mountpoint for S3 or similar): shards and
    /// snapshots are written create-only with sequential writes; annotations are refused
    /// (publish them through the bucket's s3:// root).
    #[arg(long, global = true)]
    pub(crate) mount: bool,
    /// Remote roots (http(s)://, s3://, gs://, az://): seconds allowed for one request attempt, from
    /// connecting to the end of the body. Default: 30.
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) timeout: Option<Duration>,
    /// Remote roots: seconds allowed to connect. Default: 10 (HTTP), 5 (S3, GCS, Azure).
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) connect_timeout: Option<Duration>,
    /// Remote roots: retries of a failed attempt (timeouts, resets, HTTP 5xx and 429), at
    /// most 100. Default: 3 (HTTP), 4 (S3, GCS, Azure).
    #[arg(long, global = true, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_RETRIES)))]
    pub(crate) retries: Option<u32>,
    /// Remote roots: seconds after which no retry starts (HTTP: the read itself ends then,
    /// whatever attempts remain). Default: 60.
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) deadline: Option<Duration>,
    /// http(s):// roots: the server lists directories as JSON (nginx `autoindex on;
    /// autoindex_format json;`, Caddy `file_server browse`), so the latest snapshot is found
    /// with 2 requests at any sequence number instead of probing.
    #[arg(long, global = true)]
    pub(crate) http_listing: bool,
}

/// A positive number of seconds of at most [`MAX_SECS`] (fractions allowed: `0.5`).
fn parse_secs(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{text:?}: the number of seconds must be positive"));
    }
    if secs > MAX_SECS {
        return Err(format!(
            "{text:?}: at most {MAX_SECS} seconds (one day) are allowed"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{text:?}: {e}"))
}

/// The dataset root of a command, given either way: positional `ROOT` or `--root ROOT`
/// (`write` and `publish` took `--root`, the others a positional; both spellings work
/// everywhere). [`Command::resolve_root`] checks that exactly one value was given.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct RootArg {
    /// The dataset root (or `--root ROOT`).
    #[arg(id = "root_pos", value_name = "ROOT")]
    pub(crate) pos: Option<String>,
    /// The dataset root, as an option (the same as the positional ROOT).
    #[arg(id = "root_flag", long = "root", value_name = "ROOT")]
    pub(crate) flag: Option<String>,
}

impl RootArg {
    /// The root given (after [`Command::resolve_root`] succeeded: the one value).
    pub(crate) fn name(&self) -> &str {
        self.flag
            .as_deref()
            .or(self.pos.as_deref())
            .unwrap_or_default()
    }

    /// Exactly one root: the positional, `--root`, or both with the same value.
    fn check(&self) -> Result<(), String> {
        match (&self.pos, &self.flag) {
            (Some(p), Some(f)) if p != f => Err(format!(
                "the root was given twice with different values: positional ROOT {p:?} and \
                 --root {f:?}; give it once"
            )),
            (None, None) => Err(
                "a dataset ROOT is required: give it as the positional ROOT or as --root ROOT"
                    .to_owned(),
            ),
            _ => Ok(()),
        }
    }
}

/// Splits `[ROOT] OPERAND` (one or two positionals) of `write`, `get` and `annotate`: with
/// two, the first is the positional ROOT; with one, it is `what` and the root must come from
/// `--root` (checked by [`RootArg::check`] in [`Command::resolve_root`]).
fn split_operands(
    flag: Option<String>,
    operands: &[String],
    what: &str,
) -> Result<(RootArg, String), String> {
    match operands {
        [root, last] => Ok((
            RootArg {
                pos: Some(root.clone()),
                flag,
            },
            last.clone(),
        )),
        [last] => Ok((RootArg { pos: None, flag }, last.clone())),
        _ => Err(format!(
            "expected [ROOT] {what}, got {} values",
            operands.len()
        )),
    }
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
    #[command(
        override_usage = "guideloom write [OPTIONS] --work-id <WORK_ID> <ROOT> <INPUT>\n       \
                                guideloom write [OPTIONS] --work-id <WORK_ID> --root <ROOT> <INPUT>"
    )]
    Write(WriteArgs),
    /// Publish written shards as a new snapshot.
    Publish(PublishArgs),
    /// Show the dataset id, snapshots, shards, records, bytes and annotation sets.
    Info(InfoArgs),
    /// Print one record as JSON (`--raw`: its exact bytes).
    #[command(override_usage = "guideloom get [OPTIONS] <ROOT> <INDEX>\n       \
                                guideloom get [OPTIONS] --root <ROOT> <INDEX>")]
    Get(GetArgs),
    /// Print records as JSON Lines (`--raw-dir DIR`: one file of exact bytes per record).
    Cat(CatArgs),
    /// Check every shard's size and footer (`--deep`: every record checksum too).
    Verify(VerifyArgs),
    /// Publish an annotation set: one JSON value per line, one line per record.
    #[command(
        override_usage = "guideloom annotate [OPTIONS] --name <NAME> <ROOT> <INPUT>\n       \
                                guideloom annotate [OPTIONS] --name <NAME> --root <ROOT> <INPUT>"
    )]
    Annotate(AnnotateArgs),
    /// Measure random and sequential read throughput beside the raw ceiling.
    Bench(BenchArgs),
    /// Build, publish, annotate, read and verify a small realistic dataset.
    Quickstart(QuickstartArgs),
    /// Convert one shard file between the native format (.glm) and ArrayRecord
    /// (.array_record), keeping every record's bytes; or, with --stream-storage, migrate a
    /// stream storage directory into a root's stream snapshot.
    Convert(ConvertArgs),
    /// List the annotation sets, or print one set's values as JSON Lines.
    Annotations(AnnotationsArgs),
    /// Import Parquet, CSV, JSON Lines, MDS or WebDataset files as a new snapshot of
    /// schema-bound records (written, then published).
    #[command(
        override_usage = "guideloom import [OPTIONS] --dataset <ID> --snapshot <ID> <FORMAT> <INPUT>... <ROOT>\n       \
                                guideloom import [OPTIONS] --dataset <ID> --snapshot <ID> --root <ROOT> <FORMAT> <INPUT>..."
    )]
    Import(ImportArgs),
    /// Export a snapshot of schema-bound records (or a range of it) as Parquet or JSON Lines.
    #[command(
        override_usage = "guideloom export [OPTIONS] <FORMAT> <ROOT> <OUT>\n       \
                                guideloom export [OPTIONS] --root <ROOT> <FORMAT> <OUT>"
    )]
    Export(ExportArgs),
    /// Expire snapshots under a retention policy and delete what nothing kept references
    /// (expired snapshots' shards, failed writes, stale claims, orphaned annotation values).
    Gc(GcArgs),
    /// List tags, point tag NAME at a snapshot, or remove it (`--delete`).
    Tag(TagArgs),
    /// Rewrite a snapshot's small shards into fewer shards of about a target size, published
    /// as a new full snapshot with the same records in the same order.
    Compact(CompactArgs),
    /// Write the dataset card (README and card.json) of a snapshot.
    Card(CardArgs),
    /// Serve a local, read-only web viewer of ROOT: snapshots, shards, records (paged),
    /// annotation sets beside the records, benchmark charts. Prints `listening on URL` first.
    Serve(ServeArgs),
}

impl Command {
    /// The root argument of this command, if it takes one.
    fn root_arg(&self) -> Option<&RootArg> {
        match self {
            Command::Write(a) => Some(&a.root),
            Command::Publish(a) => Some(&a.root),
            Command::Info(a) => Some(&a.root),
            Command::Get(a) => Some(&a.root),
            Command::Cat(a) => Some(&a.root),
            Command::Verify(a) => Some(&a.root),
            Command::Annotate(a) => Some(&a.root),
            Command::Bench(a) => Some(&a.root),
            Command::Annotations(a) => Some(&a.root),
            Command::Import(a) => Some(&a.root),
            Command::Export(a) => Some(&a.root),
            Command::Gc(a) => Some(&a.root),
            Command::Tag(a) => Some(&a.root),
            Command::Compact(a) => Some(&a.root),
            Command::Card(a) => Some(&a.root),
            Command::Serve(a) => Some(&a.root),
            Command::Quickstart(_) | Command::Convert(_) => None,
        }
    }

    /// Checks the command's root: exactly one value, given positionally, as `--root`, or
    /// both alike. `annotations --root R NAME` puts NAME in the first positional slot; it is
    /// moved to NAME here. The message is for a usage error (exit status 2).
    pub(crate) fn resolve_root(&mut self) -> Result<(), String> {
        match self {
            Command::Write(a) => {
                let (root, input) = split_operands(a.root_flag.take(), &a.operands, "INPUT")?;
                a.root = root;
                a.input = PathBuf::from(input);
            }
            Command::Annotate(a) => {
                let (root, input) = split_operands(a.root_flag.take(), &a.operands, "INPUT")?;
                a.root = root;
                a.input = PathBuf::from(input);
            }
            Command::Get(a) => {
                let (root, index) = split_operands(a.root_flag.take(), &a.operands, "INDEX")?;
                a.root = root;
                a.index = index.parse().map_err(|e| {
                    format!("invalid value {index:?} for INDEX (a record number from 0): {e}")
                })?;
            }
            Command::Import(a) => a.resolve()?,
            Command::Export(a) => a.resolve()?,
            Command::Tag(a) => a.resolve()?,
            _ => {}
        }
        if let Command::Annotations(a) = self
            && a.name.is_none()
            && a.root.flag.is_some()
            && a.root.pos.is_some()
            && a.root.pos != a.root.flag
        {
            a.name = a.root.pos.take();
        }
        if let Command::Annotations(a) = self
            && a.name.is_none()
            && (a.set_version.is_some()
                || a.index.is_some()
                || a.start.is_some()
                || a.end.is_some())
        {
            return Err(
                "--set-version, --index, --start and --end select values of a set: give its NAME"
                    .to_owned(),
            );
        }
        self.root_arg().map_or(Ok(()), RootArg::check)
    }

    /// Checks bounds that join several arguments (each argument's own bound is its value
    /// parser's): `quickstart --workers × --records-per-worker` at most
    /// [`MAX_QUICKSTART_RECORDS`]. The message is for a usage error (exit status 2).
    pub(crate) fn check_bounds(&self) -> Result<(), String> {
        if let Command::Quickstart(a) = self {
            let total = a.workers.saturating_mul(a.records_per_worker);
            if total > MAX_QUICKSTART_RECORDS {
                return Err(format!(
                    "--workers {} × --records-per-worker {} is {total} records; a quickstart \
                     builds at most {MAX_QUICKSTART_RECORDS}",
                    a.workers, a.records_per_worker
                ));
            }
        }
        Ok(())
    }
}

/// The command line's definition, with the global options shown once: in `guideloom
/// --help`, under "Global options", and not in each command's own help (which points
/// there instead). They stay global, so they are accepted before or after the command's
/// name.
///
/// clap shows a global option in every subcommand's help. So the options are hidden before
/// clap propagates them (a hidden option still parses), and the top level's help lists
/// them from their own definitions.
pub(crate) fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let mut listing = String::from("Global options (before or after the command's name):\n");
    for arg in &globals {
        let mut spelling = format!("      --{}", arg.get_long().unwrap_or_default());
        if arg.get_action().takes_values() {
            let names = arg.get_value_names().unwrap_or_default();
            for name in names {
                spelling.push_str(&format!(" <{name}>"));
            }
        }
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        listing.push_str(&format!("{spelling}\n          {help}\n\n"));
        cmd = cmd.mut_arg(arg.get_id().clone(), |a| a.hide(true));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |sub| {
            sub.after_help(
                "Global options (JSON output, mounted buckets, S3, GCS and Azure settings, \
                 timeouts and retries of remote roots) are listed once, in `guideloom --help`; they may be \
                 given before or after the command's name.",
            )
        });
    }
    cmd.override_usage("guideloom [GLOBAL OPTIONS] <COMMAND> [ARGS]")
        .after_help(listing.trim_end().to_owned())
}

/// `guideloom write`.
#[derive(Debug, Args)]
pub(crate) struct WriteArgs {
    /// The dataset root, as an option (instead of the positional ROOT).
    #[arg(id = "root_flag", long = "root", value_name = "ROOT")]
    root_flag: Option<String>,
    /// [ROOT] INPUT: the dataset root (unless given as --root), then the JSON Lines file
    /// (`-` for stdin) for cbor, or the directory of files for raw.
    #[arg(value_names = ["ROOT", "INPUT"], num_args = 1..=2, required = true)]
    operands: Vec<String>,
    /// The root, from `operands` or `--root` ([`Command::resolve_root`]).
    #[arg(skip)]
    pub(crate) root: RootArg,
    /// This worker's id: shards go to shards/WORK_ID/N.glm.
    #[arg(long)]
    pub(crate) work_id: String,
    /// Record format.
    #[arg(long, value_enum, default_value_t = RecordFormat::Cbor)]
    pub(crate) format: RecordFormat,
    /// Start a new shard before one would exceed this many bytes (1024 to 5 GiB, the
    /// largest shard a root takes).
    #[arg(long, default_value_t = 64 << 20,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_SHARD_BYTES))]
    pub(crate) max_shard_bytes: u64,
    /// JSON Lines file (`-` for stdin) for cbor; a directory of files for raw (the last of
    /// `operands`).
    #[arg(skip)]
    pub(crate) input: PathBuf,
}

/// `guideloom publish`.
#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
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
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// Also account for storage: bytes live and reclaimable (by `gc` with its defaults),
    /// per snapshot and per work id (lists `shards/`, reads every log entry).
    #[arg(long)]
    pub(crate) storage: bool,
}

/// `guideloom get`.
#[derive(Debug, Args)]
pub(crate) struct GetArgs {
    /// The dataset root, as an option (instead of the positional ROOT).
    #[arg(id = "root_flag", long = "root", value_name = "ROOT")]
    root_flag: Option<String>,
    /// [ROOT] INDEX: the dataset root (unless given as --root), then the record index
    /// (0-based).
    #[arg(value_names = ["ROOT", "INDEX"], num_args = 1..=2, required = true)]
    operands: Vec<String>,
    /// The root, from `operands` or `--root` ([`Command::resolve_root`]).
    #[arg(skip)]
    pub(crate) root: RootArg,
    /// Record index (0-based; the last of `operands`).
    #[arg(skip)]
    pub(crate) index: u64,
    /// Read this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// Write the record's exact stored bytes to stdout (no JSON, no newline).
    #[arg(long)]
    pub(crate) raw: bool,
}

/// `guideloom cat`.
#[derive(Debug, Args)]
pub(crate) struct CatArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// First record (inclusive).
    #[arg(long, default_value_t = 0)]
    pub(crate) start: u64,
    /// Last record (exclusive; default: the end). An end past the last record is clamped
    /// to the snapshot's length.
    #[arg(long)]
    pub(crate) end: Option<u64>,
    /// Read this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// Write each record's exact stored bytes to its own file DIR/<index> (8 digits or
    /// more, e.g. 00000042), instead of JSON on stdout. DIR is created if absent; an
    /// existing file is never overwritten (the command stops, naming it).
    #[arg(long, value_name = "DIR")]
    pub(crate) raw_dir: Option<PathBuf>,
}

/// `guideloom verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
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
    /// The dataset root, as an option (instead of the positional ROOT).
    #[arg(id = "root_flag", long = "root", value_name = "ROOT")]
    root_flag: Option<String>,
    /// [ROOT] INPUT: the dataset root (unless given as --root), then the values file: one
    /// JSON value per line (`-` for stdin), line i for record i.
    #[arg(value_names = ["ROOT", "INPUT"], num_args = 1..=2, required = true)]
    operands: Vec<String>,
    /// The root, from `operands` or `--root` ([`Command::resolve_root`]).
    #[arg(skip)]
    pub(crate) root: RootArg,
    /// The annotation set's name.
    #[arg(long)]
    pub(crate) name: String,
    /// The set's version (default: v1, or the next vN after the set's latest).
    #[arg(long = "set-version")]
    pub(crate) set_version: Option<String>,
    /// Annotate this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// One JSON value per line (`-` for stdin), line i for record i (the last of
    /// `operands`).
    #[arg(skip)]
    pub(crate) input: PathBuf,
}

/// `guideloom annotations`.
#[derive(Debug, Args)]
pub(crate) struct AnnotationsArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// The annotation set whose values to print (default: list the catalog's sets).
    pub(crate) name: Option<String>,
    /// The set's version (default: its latest).
    #[arg(long = "set-version")]
    pub(crate) set_version: Option<String>,
    /// Print only the value of this record.
    #[arg(long, conflicts_with_all = ["start", "end"])]
    pub(crate) index: Option<u64>,
    /// First record (inclusive).
    #[arg(long)]
    pub(crate) start: Option<u64>,
    /// Last record (exclusive; default and at most: the set's length).
    #[arg(long)]
    pub(crate) end: Option<u64>,
}

/// `guideloom bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// Random record reads per backend (1 to 1000000).
    #[arg(long, default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BENCH_READS))]
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
    /// Records per worker (1 to 1000000; workers × records at most 1000000).
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_QUICKSTART_RECORDS))]
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
    /// The shard file to read (with --stream-storage: the storage directory).
    pub(crate) src: PathBuf,
    /// The file to write, which must not exist (with --stream-storage: the dataset root).
    pub(crate) dst: PathBuf,
    /// The output format. Default: from the names, the side whose name contains
    /// `.array_record` is the ArrayRecord file.
    #[arg(long, value_enum, conflicts_with = "stream_storage")]
    pub(crate) to: Option<ConvertTo>,
    /// ArrayRecord output: array_record's option string, e.g. `group_size:1,zstd:3`
    /// (the default) or `group_size:64,snappy`.
    #[arg(long, default_value = "", conflicts_with = "stream_storage")]
    pub(crate) options: String,
    /// SRC is a StreamStorage or StreamWithMetaStorage directory: write its tokens (and
    /// documents, and their metadata) into the root DST as a stream snapshot, the one
    /// token-stream encoding, and publish it. Needs --dataset-id and --snapshot-id.
    #[arg(long, requires_all = ["dataset_id", "snapshot_id"])]
    pub(crate) stream_storage: bool,
    /// With --stream-storage: the dataset's id (must match the root's dataset.json).
    #[arg(long, requires = "stream_storage")]
    pub(crate) dataset_id: Option<String>,
    /// With --stream-storage: the new snapshot's id.
    #[arg(long, requires = "stream_storage")]
    pub(crate) snapshot_id: Option<String>,
    /// With --stream-storage: the work id the shards are written under
    /// (`shards/<work-id>/N.glm`).
    #[arg(long, default_value = "convert", requires = "stream_storage")]
    pub(crate) work_id: String,
}
