//! `guideloom compact`: a snapshot's small shards rewritten into fewer, published as a new
//! full snapshot ([`Root::compact`](guideloom_publish::Root::compact)).

use guideloom_publish::{CompactRequest, Compacted, PlannedShard, PublishOutcome};
use serde_json::json;

use crate::cli::{CompactArgs, Global};
use crate::error::{CliError, Result};
use crate::output;
use crate::root;

/// The most plan lines the text output prints (`--json` has every one).
const LISTED: usize = 20;

/// One plan entry as `--json` prints it.
fn planned_json(p: &PlannedShard) -> serde_json::Value {
    match p {
        PlannedShard::Kept {
            source,
            key,
            bytes,
            records,
        } => json!({"action": "keep", "sources": [source, source + 1], "key": key,
                    "input_bytes": bytes, "records": records}),
        PlannedShard::Rewritten {
            sources,
            key,
            input_bytes,
            records,
        } => json!({"action": "rewrite", "sources": [sources.start, sources.end], "key": key,
                    "input_bytes": input_bytes, "records": records}),
        _ => json!({"key": p.key()}),
    }
}

/// One plan entry as a line of text.
fn planned_line(p: &PlannedShard) -> String {
    match p {
        PlannedShard::Kept { source, bytes, .. } => format!(
            "  keep     shard {source:<6} {:>12}  {}",
            output::bytes(*bytes),
            p.key()
        ),
        PlannedShard::Rewritten {
            sources,
            input_bytes,
            ..
        } => format!(
            "  rewrite  shards {}..{} ({}) {:>12}  -> {}",
            sources.start,
            sources.end,
            sources.len(),
            output::bytes(*input_bytes),
            p.key()
        ),
        _ => format!("  {}", p.key()),
    }
}

fn mb_per_s(done: &Compacted) -> f64 {
    let secs = done.elapsed.as_secs_f64();
    if secs > 0.0 {
        done.input_bytes as f64 / secs / 1e6
    } else {
        0.0
    }
}

/// Runs `guideloom compact`.
pub(crate) async fn run(args: CompactArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let mut request = CompactRequest::new(&args.snapshot_id)
        .with_target_shard_bytes(args.target_shard_bytes)
        .with_dry_run(args.dry_run);
    if let Some(w) = &args.work_id {
        request = request.with_work_id(w);
    }
    let done = root
        .root
        .compact(args.from.as_deref(), &request)
        .await
        .map_err(|e| match e {
            guideloom_publish::Error::NotFound { key } if key.starts_with("snapshots/") => {
                CliError::argument(
                    "--from",
                    format!(
                        "no snapshot {:?} in {}",
                        args.from.as_deref().unwrap_or_default(),
                        root.name
                    ),
                )
            }
            e => root.err(e),
        })?;
    let rewritten = done
        .plan
        .iter()
        .filter(|p| matches!(p, PlannedShard::Rewritten { .. }))
        .count();
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "source": done.source,
            "snapshot_id": done.snapshot_id,
            "dry_run": args.dry_run,
            "outcome": done.outcome.map(|o| match o {
                PublishOutcome::AlreadyPublished => "already_published",
                _ => "committed",
            }),
            "seq": done.snapshot.as_ref().map(|s| s.seq()),
            "input_shards": done.input_shards,
            "input_bytes": done.input_bytes,
            "output_shards": done.output_shards,
            "output_bytes": done.output_bytes,
            "rewritten_shards": rewritten,
            "written_bytes": done.written_bytes,
            "records": done.records,
            "seconds": done.elapsed.as_secs_f64(),
            "plan": done.plan.iter().map(planned_json).collect::<Vec<_>>(),
        }));
    }
    let head = if args.dry_run {
        format!(
            "plan (dry run, nothing written): snapshot {} -> {}",
            done.source, done.snapshot_id
        )
    } else {
        let how = match done.outcome {
            Some(PublishOutcome::AlreadyPublished) => "already published by an identical request",
            _ => "published",
        };
        format!(
            "compacted snapshot {} -> {} ({how}, #{})",
            done.source,
            done.snapshot_id,
            done.snapshot.as_ref().map_or(0, |s| s.seq())
        )
    };
    output::line(&head)?;
    output::line(&format!(
        "  {} shard(s), {} -> {} shard(s), {} ({} rewritten, {} kept); {} records; {} ({:.1} MB/s)",
        done.input_shards,
        output::bytes(done.input_bytes),
        done.output_shards,
        output::bytes(done.output_bytes),
        rewritten,
        done.output_shards - rewritten,
        done.records,
        output::secs(done.elapsed),
        mb_per_s(&done),
    ))?;
    for p in done.plan.iter().take(LISTED) {
        output::line(&planned_line(p))?;
    }
    if done.plan.len() > LISTED {
        output::line(&format!(
            "  ... and {} more (--json lists every one)",
            done.plan.len() - LISTED
        ))?;
    }
    Ok(())
}
