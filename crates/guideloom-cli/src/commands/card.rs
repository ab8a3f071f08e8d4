//! `guideloom card`: writes a snapshot's dataset card
//! ([`Root::write_card`](guideloom_publish::Root::write_card)); `info` prints the latest one.

use std::io::Read;
use std::path::Path;

use guideloom_publish::{Card, MAX_CARD_README_BYTES, Split};
use serde_json::json;

use crate::cli::{CardArgs, Global};
use crate::error::{CliError, Result};
use crate::output;
use crate::root;

/// The README lines `info` prints.
pub(crate) const SUMMARY_LINES: usize = 5;

/// Reads the README at `path`: at most [`MAX_CARD_README_BYTES`], UTF-8.
fn read_readme(path: &Path) -> Result<String> {
    let file = std::fs::File::open(path).map_err(|e| CliError::file(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_CARD_README_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::file(path, e))?;
    let name = path.display().to_string();
    if bytes.len() as u64 > MAX_CARD_README_BYTES {
        return Err(CliError::argument(
            name,
            format!("a card's README is at most {MAX_CARD_README_BYTES} bytes (1 MiB)"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| CliError::argument(name, format!("not UTF-8: {e}")))
}

/// The card summary `info --json` carries (`null` without a card).
pub(crate) fn summary_json(card: Option<&(String, Card)>) -> serde_json::Value {
    match card {
        None => serde_json::Value::Null,
        Some((id, card)) => json!({
            "snapshot_id": id,
            "licence": card.licence,
            "description": card.description,
            "citation": card.citation,
            "splits": card.splits,
            "first_lines": card.first_lines(SUMMARY_LINES),
        }),
    }
}

/// The card summary `info` prints.
pub(crate) fn print_summary(card: Option<&(String, Card)>) -> Result<()> {
    let Some((id, card)) = card else {
        return output::line("card:       none");
    };
    output::line(&format!("card:       of snapshot {id}"))?;
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
    output::line(&format!("  licence:     {}", or_none(&card.licence)))?;
    output::line(&format!("  description: {}", or_none(&card.description)))?;
    for line in card.first_lines(SUMMARY_LINES) {
        output::line(&format!("  | {line}"))?;
    }
    Ok(())
}

/// Runs `guideloom card`.
pub(crate) async fn run(args: CardArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let mut card = Card::new(read_readme(&args.readme)?);
    card.licence = args.licence;
    card.description = args.description;
    card.citation = args.citation;
    for split in &args.splits {
        let Some((name, value)) = split.split_once('=') else {
            return Err(CliError::argument(
                "--split",
                format!("{split:?}: expected NAME=SNAPSHOT_ID or NAME=START..END"),
            ));
        };
        let value = Split::parse(value)
            .map_err(|e| CliError::argument("--split", format!("{split:?}: {e}")))?;
        if name.is_empty() || card.splits.insert(name.to_owned(), value).is_some() {
            return Err(CliError::argument(
                "--split",
                format!("{split:?}: each split needs a name of its own"),
            ));
        }
    }
    root.root
        .write_card(&args.snapshot_id, &card)
        .await
        .map_err(|e| match e {
            guideloom_publish::Error::NotFound { key } if key.starts_with("snapshots/") => {
                CliError::argument(
                    "--snapshot-id",
                    format!("no snapshot {:?} in {}", args.snapshot_id, root.name),
                )
            }
            e => root.err(e),
        })?;
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "snapshot_id": args.snapshot_id,
            "readme_key": guideloom_publish::card_readme_key(&args.snapshot_id),
            "card_key": guideloom_publish::card_json_key(&args.snapshot_id),
            "readme_bytes": card.readme.len(),
        }));
    }
    output::line(&format!(
        "wrote the card of snapshot {} ({}, {} bytes of README)",
        args.snapshot_id,
        guideloom_publish::card_json_key(&args.snapshot_id),
        card.readme.len()
    ))
}
