//! `guideloom publish`: written shards become a snapshot.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use guideloom_publish::{
    FooterInspector, PublicationOptions, PublishMode, PublishOutcome, PublishRequest, ShardRef,
    Snapshot,
};
use serde_json::json;

use crate::cli::{Global, PublishArgs};
use crate::error::{CliError, Result};
use crate::output;
use crate::root::{self, OpenRoot};
use crate::work::{self, Survey};

/// Keys referenced by any snapshot of the root (empty if nothing is published).
pub(crate) async fn published_keys(root: &OpenRoot) -> Result<(HashSet<String>, Vec<Snapshot>)> {
    let snapshots = match root.root.snapshots().await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => return Err(root.err(e)),
    };
    let keys = snapshots
        .iter()
        .flat_map(|s| s.shards().iter().map(|r| r.key.clone()))
        .collect();
    Ok((keys, snapshots))
}

/// The reference of a listed shard, as its writer returned it ([`Root::adopt_shard`]: one
/// tail read; a stream shard keeps its element type, count and metadata companion).
///
/// [`Root::adopt_shard`]: guideloom_publish::Root::adopt_shard
pub(crate) async fn shard_ref(root: &OpenRoot, key: &str, size: u64) -> Result<ShardRef> {
    root.root
        .adopt_shard(key, size)
        .await
        .map_err(|e| root.err(e))
}

/// What `publish` did: the new snapshot, whether this call committed it or found it
/// committed by an identical request, the latest it replaced (a full publication over an
/// existing snapshot), and the work ids it skipped as incomplete.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) snapshot: Snapshot,
    pub(crate) outcome: PublishOutcome,
    pub(crate) replaced: Option<Snapshot>,
    pub(crate) survey: Survey,
}

/// Which shards `publish` takes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Choice<'a> {
    /// Every shard of these workers; empty: every shard not yet in any snapshot.
    pub(crate) work_ids: &'a [String],
    /// Also named work ids whose write did not finish.
    pub(crate) include_incomplete: bool,
    /// ArrayRecord files already in the root, adopted as they are (after the shards above).
    pub(crate) adopt_array_record: &'a [String],
}

/// Publishes the chosen shards: those of the named work ids, or every shard a completion
/// marker lists that no snapshot holds yet, then the ArrayRecord files to adopt. Incomplete
/// work ids are never taken unasked, and naming one is an error.
pub(crate) async fn publish(
    root: &OpenRoot,
    dataset_id: &str,
    snapshot_id: &str,
    choice: Choice<'_>,
    append: bool,
    verify_record_counts: bool,
) -> Result<Published> {
    let Choice {
        work_ids,
        include_incomplete,
        adopt_array_record,
    } = choice;
    // An http(s):// root is read-only: refused before any request.
    root.store().check_writable().map_err(|e| root.err(e))?;
    for w in work_ids {
        guideloom_publish::check_name("work id", w)
            .map_err(|e| CliError::argument("--work-id", e.to_string()))?;
    }
    let survey = work::survey(root, work_ids).await?;
    let mut survey = survey;
    for w in work_ids {
        if include_incomplete && let Some(shards) = survey.incomplete.remove(w) {
            survey.complete.insert(w.clone(), shards);
        }
        if let Some(shards) = survey.incomplete.get(w) {
            return Err(CliError::argument(
                format!("--work-id {w}"),
                format!(
                    "work id {w} is incomplete: its write did not finish ({} shard(s), no {}); \
                     re-run that write to finish it, write under a new work id, or pass \
                     --include-incomplete for shards another tool wrote",
                    shards.len(),
                    work::marker_key(w)
                ),
            ));
        }
        if !survey.complete.contains_key(w) {
            return Err(CliError::argument(
                "--work-id",
                format!(
                    "worker {w} wrote no shards in {} (shards/{w}/ is empty)",
                    root.name
                ),
            ));
        }
    }
    let (published, snapshots) = published_keys(root).await?;
    let chosen: Vec<(String, u64)> = survey
        .complete
        .values()
        .flatten()
        .filter(|(k, _)| !work_ids.is_empty() || !published.contains(k))
        .cloned()
        .collect();
    if chosen.is_empty() && adopt_array_record.is_empty() {
        let mut what =
            "no unpublished shards under shards/ (write some with `guideloom write`, or \
                        name workers with --work-id)"
                .to_owned();
        if let Some(line) = survey.incomplete_line() {
            what = format!("{what}; {line}");
        }
        return Err(CliError::argument(&root.name, what));
    }
    let mut shards = Vec::with_capacity(chosen.len());
    for (key, size) in &chosen {
        shards.push(shard_ref(root, key, *size).await?);
    }
    for key in adopt_array_record {
        // One HEAD and one tail read each: size and record count from the footer.
        let shard = root
            .root
            .adopt_array_record(key)
            .await
            .map_err(|e| root.err(e))?;
        shards.push(shard);
    }
    let request = PublishRequest {
        dataset_id: dataset_id.to_owned(),
        snapshot_id: snapshot_id.to_owned(),
        shards,
        mode: if append {
            PublishMode::Append
        } else {
            PublishMode::Full
        },
        schema: None,
    };
    let options = PublicationOptions {
        verify_record_counts,
        inspector: Some(Arc::new(FooterInspector)),
        ..PublicationOptions::default()
    };
    let published = root
        .root
        .publish(&request, &options)
        .await
        .map_err(|e| root.err(e))?;
    let (snapshot, outcome) = (published.snapshot, published.outcome);
    // Only the call that committed the snapshot replaced anything.
    let replaced = if append || outcome != PublishOutcome::Committed {
        None
    } else {
        snapshots
            .into_iter()
            .filter(|s| s.seq() < snapshot.seq())
            .max_by_key(Snapshot::seq)
    };
    Ok(Published {
        snapshot,
        outcome,
        replaced,
        survey,
    })
}

/// Runs `guideloom publish`.
pub(crate) async fn run(args: PublishArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let started = Instant::now();
    let Published {
        snapshot,
        outcome,
        replaced,
        survey,
    } = publish(
        &root,
        &args.dataset_id,
        &args.snapshot_id,
        Choice {
            work_ids: &args.work_ids,
            include_incomplete: args.include_incomplete,
            adopt_array_record: &args.adopt_array_record,
        },
        args.append,
        args.verify_record_counts,
    )
    .await?;
    let bytes: u64 = snapshot.shards().iter().map(|s| s.size).sum();
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "dataset_id": snapshot.manifest.dataset_id,
            "snapshot_id": snapshot.id(),
            "seq": snapshot.seq(),
            "mode": if args.append { "append" } else { "full" },
            "shards": snapshot.shards().len(),
            "records": snapshot.total_records(),
            "bytes": bytes,
            "log_key": snapshot.log_key,
            "outcome": match outcome {
                PublishOutcome::Committed => "committed",
                _ => "already_published",
            },
            "replaced": replaced.as_ref().map(|r| json!({
                "snapshot_id": r.id(), "seq": r.seq(), "records": r.total_records(),
            })),
            "skipped_incomplete_work_ids": survey.incomplete.keys().collect::<Vec<_>>(),
            "seconds": started.elapsed().as_secs_f64(),
        }));
    }
    let what = match outcome {
        PublishOutcome::Committed => "published snapshot",
        // Another process running the same request (or an earlier run of this one) wrote
        // the log entry: this call committed nothing.
        _ => "already published by an identical request: snapshot",
    };
    output::line(&format!(
        "{what} {} (#{}) of dataset {}: {} shard(s), {} records, {} in {}",
        snapshot.id(),
        snapshot.seq(),
        snapshot.manifest.dataset_id,
        snapshot.shards().len(),
        snapshot.total_records(),
        output::bytes(bytes),
        output::secs(started.elapsed())
    ))?;
    if let Some(r) = &replaced {
        output::line(&format!(
            "it replaces snapshot {} (#{}, {} records) as the latest: the new snapshot holds only \
             these shards (pass --append to extend the latest instead)",
            r.id(),
            r.seq(),
            r.total_records()
        ))?;
    }
    match survey.incomplete_line() {
        Some(line) => output::line(&line),
        None => Ok(()),
    }
}
