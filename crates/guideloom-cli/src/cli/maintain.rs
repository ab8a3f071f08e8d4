//! The arguments of `guideloom compact` and `guideloom card` (clap), beside the other
//! commands' in `cli.rs`; the commands themselves are `commands::compact` and
//! `commands::card`.

use std::path::PathBuf;

use clap::Args;

use super::{MAX_SHARD_BYTES, RootArg};

/// `guideloom compact`.
#[derive(Debug, Args)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// The id of the new (full) snapshot.
    #[arg(long, value_name = "NEW")]
    pub(crate) snapshot_id: String,
    /// The snapshot to compact. Default: the latest.
    #[arg(long, value_name = "ID")]
    pub(crate) from: Option<String>,
    /// Group small shards up to this many bytes; shards at least this large are kept as they
    /// are (1024 to 5 GiB). Default: 256 MiB.
    #[arg(long, value_name = "B", default_value_t = 256 << 20,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_SHARD_BYTES))]
    pub(crate) target_shard_bytes: u64,
    /// The work id of the rewritten shards. Default: compact-NEW.
    #[arg(long, value_name = "W")]
    pub(crate) work_id: Option<String>,
    /// Print the plan (source shards → new shards, bytes) and write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `guideloom card`.
#[derive(Debug, Args)]
pub(crate) struct CardArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// The snapshot the card describes (it must exist).
    #[arg(long, value_name = "ID")]
    pub(crate) snapshot_id: String,
    /// The card's text: a markdown file (UTF-8, at most 1 MiB).
    #[arg(long, value_name = "FILE")]
    pub(crate) readme: PathBuf,
    /// The licence (an SPDX identifier or a name).
    #[arg(long, value_name = "L")]
    pub(crate) licence: Option<String>,
    /// A one-paragraph description.
    #[arg(long, value_name = "D")]
    pub(crate) description: Option<String>,
    /// How to cite the dataset.
    #[arg(long, value_name = "C")]
    pub(crate) citation: Option<String>,
    /// A split: NAME=SNAPSHOT_ID or NAME=START..END (record indices); repeatable.
    #[arg(long = "split", value_name = "NAME=VALUE")]
    pub(crate) splits: Vec<String>,
}
