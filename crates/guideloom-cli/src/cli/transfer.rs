//! The arguments of `guideloom import` and `guideloom export` (clap), beside the other
//! commands' in `cli.rs`; the commands themselves are `commands::import` and
//! `commands::export`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{MAX_SHARD_BYTES, RootArg};

/// The most rows `--batch-rows` takes.
const MAX_BATCH_ROWS: u64 = 1 << 20;

/// The input formats of `import`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ImportFormat {
    /// Parquet files (read by row group).
    Parquet,
    /// CSV files with a header row.
    Csv,
    /// JSON Lines files (one object per line).
    Jsonl,
    /// MDS (MosaicML Streaming) dataset directories.
    Mds,
    /// WebDataset tar files (plain or gzip-compressed).
    Webdataset,
}

/// How `import` publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ImportMode {
    /// The new snapshot holds only the imported records.
    Full,
    /// The new snapshot extends the latest one (its schema must evolve from the latest's).
    Append,
}

/// `guideloom import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The input format.
    #[arg(value_enum)]
    pub(crate) format: ImportFormat,
    /// INPUT... ROOT: the input files (directories for mds), then the dataset root (unless
    /// given as --root).
    #[arg(value_names = ["INPUT", "ROOT"], num_args = 1.., required = true)]
    operands: Vec<String>,
    /// The dataset root, as an option (then every positional is an input).
    #[arg(id = "root_flag", long = "root", value_name = "ROOT")]
    root_flag: Option<String>,
    /// The root, from `operands` or `--root` ([`ImportArgs::resolve`]).
    #[arg(skip)]
    pub(crate) root: RootArg,
    /// The inputs, from `operands`.
    #[arg(skip)]
    pub(crate) inputs: Vec<PathBuf>,
    /// The dataset's id (must match the root's dataset.json; written on first publication).
    #[arg(long = "dataset", visible_alias = "dataset-id", value_name = "ID")]
    pub(crate) dataset: String,
    /// The new snapshot's id.
    #[arg(long = "snapshot", visible_alias = "snapshot-id", value_name = "ID")]
    pub(crate) snapshot: String,
    /// full: the snapshot holds only these records; append: it extends the latest snapshot
    /// (whose schema the input's must evolve from: same fields and types, new fields
    /// nullable and last).
    #[arg(long, value_enum, default_value_t = ImportMode::Full)]
    pub(crate) mode: ImportMode,
    /// Rows per batch read from the input (1 to 1048576): memory holds one batch.
    #[arg(long, default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH_ROWS))]
    pub(crate) batch_rows: u64,
    /// Start a new shard before its records would pass this many bytes (1024 to 5 GiB).
    #[arg(long, default_value_t = 64 << 20,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_SHARD_BYTES))]
    pub(crate) shard_bytes: u64,
    /// The work id the shards are written under (shards/<WORK_ID>/N.glm). Default:
    /// import-<snapshot id>.
    #[arg(long)]
    pub(crate) work_id: Option<String>,
    /// csv, jsonl: records of the first file the schema is inferred from.
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH_ROWS))]
    pub(crate) infer_rows: u64,
    /// webdataset: an extension stored as text (utf8) instead of bytes (repeatable:
    /// `--text-field txt --text-field json`).
    #[arg(long = "text-field", value_name = "EXT")]
    pub(crate) text_fields: Vec<String>,
}

impl ImportArgs {
    /// Splits `INPUT... [ROOT]`: with `--root` every positional is an input, without it the
    /// last positional is the root. The message is for a usage error.
    pub(crate) fn resolve(&mut self) -> Result<(), String> {
        let mut operands = self.operands.clone();
        let pos = match &self.root_flag {
            Some(_) => None,
            None if operands.len() >= 2 => operands.pop(),
            None => {
                return Err(
                    "expected INPUT... ROOT: give at least one input and the dataset root (or \
                     --root ROOT)"
                        .to_owned(),
                );
            }
        };
        self.root = RootArg {
            pos,
            flag: self.root_flag.clone(),
        };
        self.inputs = operands.into_iter().map(PathBuf::from).collect();
        Ok(())
    }
}

/// The most records `--batch-records` takes.
const MAX_BATCH_RECORDS: u64 = 1 << 20;

/// The output formats of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// One Parquet file (zstd), the Arrow schema and field metadata kept.
    Parquet,
    /// JSON Lines: one object per record, bytes as lowercase hex strings.
    Jsonl,
}

/// `guideloom export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The output format.
    #[arg(value_enum)]
    pub(crate) format: ExportFormat,
    /// [ROOT] OUT: the dataset root (unless given as --root), then the file to write (which
    /// must not exist).
    #[arg(value_names = ["ROOT", "OUT"], num_args = 1..=2, required = true)]
    operands: Vec<String>,
    /// The dataset root, as an option (instead of the positional ROOT).
    #[arg(id = "root_flag", long = "root", value_name = "ROOT")]
    root_flag: Option<String>,
    /// The root, from `operands` or `--root` ([`ExportArgs::resolve`]).
    #[arg(skip)]
    pub(crate) root: RootArg,
    /// The file to write (the last of `operands`).
    #[arg(skip)]
    pub(crate) out: PathBuf,
    /// Export this snapshot instead of the latest.
    #[arg(long)]
    pub(crate) snapshot: Option<String>,
    /// Export records A..B only (B exclusive; `A..` to the end, `..B` from the start); an end
    /// past the last record is clamped.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    pub(crate) range: Option<(Option<u64>, Option<u64>)>,
    /// Records read and decoded per batch (1 to 1048576).
    #[arg(long, default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH_RECORDS))]
    pub(crate) batch_records: u64,
}

/// `A..B`, `A..`, `..B` or `..`.
fn parse_range(text: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?} is not a range A..B (e.g. 0..1000, 500.., ..100)"))?;
    let bound = |s: &str| -> Result<Option<u64>, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        s.parse()
            .map(Some)
            .map_err(|e| format!("{s:?} in {text:?} is not a record number: {e}"))
    };
    let (a, b) = (bound(a)?, bound(b)?);
    if let (Some(a), Some(b)) = (a, b)
        && a > b
    {
        return Err(format!("{text:?}: the start is after the end"));
    }
    Ok((a, b))
}

impl ExportArgs {
    /// Splits `[ROOT] OUT` (the message is for a usage error).
    pub(crate) fn resolve(&mut self) -> Result<(), String> {
        let (pos, out) = match self.operands.as_slice() {
            [root, out] => (Some(root.clone()), out.clone()),
            [out] => (None, out.clone()),
            other => return Err(format!("expected [ROOT] OUT, got {} values", other.len())),
        };
        self.root = RootArg {
            pos,
            flag: self.root_flag.clone(),
        };
        self.out = PathBuf::from(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges_parse() {
        assert_eq!(super::parse_range("3..7"), Ok((Some(3), Some(7))));
        assert_eq!(super::parse_range("3.."), Ok((Some(3), None)));
        assert_eq!(super::parse_range("..7"), Ok((None, Some(7))));
        assert!(super::parse_range("7..3").is_err());
        assert!(super::parse_range("7").is_err());
        assert!(super::parse_range("a..3").is_err());
    }
}
