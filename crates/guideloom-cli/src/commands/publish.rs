//! `guideloom publish`: written shards become a snapshot.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use guideloom_publish::{
    FooterInspector, PublicationOptions, PublishMode, PublishRequest, ShardInspector, ShardRef,
    Snapshot,
};
use serde_json::json;

use crate::cli::{Global, PublishArgs};
use crate::error::{CliError, Result};
use crate::output;
use crate::root::{self, OpenRoot};

/// Every shard object under `shards/` (optionally of some workers), sorted by key (worker,
/// then shard number), with sizes from the listing and no record counts yet.
pub(crate) async fn listed_shards(
    root: &OpenRoot,
    work_ids: &[String],
) -> Result<Vec<(String, u64)>> {
    let prefixes: Vec<String> = if work_ids.is_empty() {
        vec!["shards".to_owned()]
    } else {
        work_ids.iter().map(|w| format!("shards/{w}")).collect()
    };
    for w in work_ids {
        guideloom_publish::key::check_name("work id", w)
            .map_err(|e| CliError::argument("--work-id", e.to_string()))?;
    }
    let mut out = Vec::new();
    for (i, prefix) in prefixes.iter().enumerate() {
        let listed = root.store().list(prefix).await.map_err(|e| root.err(e))?;
        let before = out.len();
        out.extend(
            listed
                .into_iter()
                .filter(|o| o.key.ends_with(".glm"))
                .map(|o| (o.key, o.size)),
        );
        if !work_ids.is_empty() && out.len() == before {
            return Err(CliError::argument(
                "--work-id",
                format!(
                    "worker {:?} wrote no shards in {} ({prefix}/ is empty)",
                    work_ids[i], root.name
                ),
            ));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

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

/// Builds a reference for a listed shard from its footer (one 64-byte read).
pub(crate) async fn shard_ref(root: &OpenRoot, key: &str, size: u64) -> Result<ShardRef> {
    let mut shard = ShardRef {
        key: key.to_owned(),
        size,
        record_count: 0,
        checksum: None,
    };
    let facts = FooterInspector
        .inspect(&**root.store(), &shard)
        .await
        .map_err(|e| root.err(e))?;
    shard.record_count = facts.record_count;
    shard.checksum = facts.checksum;
    Ok(shard)
}

/// Publishes the chosen shards; returns the snapshot.
pub(crate) async fn publish(
    root: &OpenRoot,
    dataset_id: &str,
    snapshot_id: &str,
    work_ids: &[String],
    append: bool,
    verify_record_counts: bool,
) -> Result<Snapshot> {
    let listed = listed_shards(root, work_ids).await?;
    let (published, _) = published_keys(root).await?;
    let chosen: Vec<(String, u64)> = if work_ids.is_empty() {
        listed
            .into_iter()
            .filter(|(k, _)| !published.contains(k))
            .collect()
    } else {
        listed
    };
    if chosen.is_empty() {
        return Err(CliError::argument(
            &root.name,
            "no unpublished shards under shards/ (write some with `guideloom write`, or name workers with --work-id)",
        ));
    }
    let mut shards = Vec::with_capacity(chosen.len());
    for (key, size) in &chosen {
        shards.push(shard_ref(root, key, *size).await?);
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
    };
    let options = PublicationOptions {
        verify_record_counts,
        inspector: Some(Arc::new(FooterInspector)),
        ..PublicationOptions::default()
    };
    root.root
        .publish(&request, &options)
        .await
        .map_err(|e| root.err(e))
}

/// Runs `guideloom publish`.
pub(crate) async fn run(args: PublishArgs, global: &Global) -> Result<()> {
    let root = root::open(&args.root, global, true)?;
    let started = Instant::now();
    let snapshot = publish(
        &root,
        &args.dataset_id,
        &args.snapshot_id,
        &args.work_ids,
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
            "seconds": started.elapsed().as_secs_f64(),
        }));
    }
    output::line(&format!(
        "published snapshot {} (#{}) of dataset {}: {} shard(s), {} records, {} in {}",
        snapshot.id(),
        snapshot.seq(),
        snapshot.manifest.dataset_id,
        snapshot.shards().len(),
        snapshot.total_records(),
        output::bytes(bytes),
        output::secs(started.elapsed())
    ))
}
