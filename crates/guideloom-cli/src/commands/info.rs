//! `guideloom info`.

use std::collections::BTreeMap;

use guideloom_publish::{AnnotationEntry, Catalog, Snapshot};
use serde_json::json;

use crate::cli::{Global, InfoArgs};
use crate::commands::publish::published_keys;
use crate::error::{CliError, Result};
use crate::output;
use crate::root;

/// How many shards of `snapshot` have each format (`native`, `array_record`).
fn formats(snapshot: &Snapshot) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for shard in snapshot.shards() {
        *counts.entry(shard.format.name()).or_default() += 1;
    }
    counts
}

/// The most shards listed by name in the text output (`--json` lists every one).
const LISTED_SHARDS: usize = 20;

/// Prints the shards of `shards` (key, size) by name, at most [`LISTED_SHARDS`] of them.
fn list_shards(shards: &[&(String, u64)]) -> Result<()> {
    for (key, size) in shards.iter().take(LISTED_SHARDS) {
        output::line(&format!("  {key:<40} {:>12}", output::bytes(*size)))?;
    }
    if shards.len() > LISTED_SHARDS {
        output::line(&format!(
            "  ... and {} more (--json lists every one)",
            shards.len() - LISTED_SHARDS
        ))?;
    }
    Ok(())
}

/// `info` of a root where shards were written but nothing was published yet (no
/// `dataset.json`): says so and lists the shards present with their sizes. A root holding
/// neither is the usual "no published dataset here" error.
async fn unpublished_only(root: &root::OpenRoot, global: &Global, missing: CliError) -> Result<()> {
    if !root.store().capabilities().list {
        return Err(missing);
    }
    let survey = crate::work::survey(root, &[]).await?;
    if survey.complete.values().all(Vec::is_empty) && survey.incomplete.is_empty() {
        return Err(missing);
    }
    let complete: Vec<&(String, u64)> = survey.complete.values().flatten().collect();
    if global.json {
        return output::print_json(&json!({
            "root": root.name,
            "dataset_id": null,
            "published": false,
            "latest": null,
            "snapshots": [],
            "unpublished_shards": complete.len(),
            "unpublished_bytes": complete.iter().map(|(_, s)| s).sum::<u64>(),
            "unpublished": complete.iter().map(|(k, s)| json!({"key": k, "bytes": s})).collect::<Vec<_>>(),
            "incomplete_work_ids": survey.incomplete.iter().map(|(w, s)| json!({
                "work_id": w,
                "shards": s.len(),
                "keys": s.iter().map(|(k, b)| json!({"key": k, "bytes": b})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "annotation_sets": [],
        }));
    }
    output::line(&format!("root:       {}", root.name))?;
    output::line("dataset id: none yet (no dataset.json: nothing was published)")?;
    output::line("snapshots:  0 (no snapshot is published)")?;
    output::line(&format!(
        "unpublished: {} shard(s), {} (publish them with `guideloom publish`)",
        complete.len(),
        output::bytes(complete.iter().map(|(_, s)| s).sum())
    ))?;
    list_shards(&complete)?;
    for (w, shards) in &survey.incomplete {
        output::line(&format!(
            "incomplete:  work id {w}: {} shard(s) from a write that did not finish (publish \
             skips them; re-run that write to finish it)",
            shards.len()
        ))?;
        list_shards(&shards.iter().collect::<Vec<_>>())?;
    }
    Ok(())
}

/// Runs `guideloom info`.
pub(crate) async fn run(args: InfoArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let identity = match root.root.identity().await {
        Ok(identity) => identity,
        Err(guideloom_publish::Error::NotFound { key }) if key == "dataset.json" => {
            let missing = root.err(guideloom_publish::Error::NotFound { key });
            return unpublished_only(&root, global, missing).await;
        }
        Err(e) => return Err(root.err(e)),
    };
    let (published, snapshots) = published_keys(&root).await?;
    // Unpublished shards are found by listing; a root that cannot list (http://) has none
    // to report.
    let listable = root.store().capabilities().list;
    let survey = if listable {
        crate::work::survey(&root, &[]).await?
    } else {
        crate::work::Survey::default()
    };
    let unpublished: Vec<(String, u64)> = survey
        .complete
        .values()
        .flatten()
        .filter(|(k, _)| !published.contains(k))
        .cloned()
        .collect();
    let catalog = root.root.catalog().await.map_err(|e| root.err(e))?;
    let card = root.root.latest_card().await.map_err(|e| root.err(e))?;
    let latest_seq = snapshots.last().map(|s| s.seq());
    // Expired snapshots: the catalog's and the collection records' (a listing of gc/).
    let expired: std::collections::BTreeSet<String> = if listable {
        root.root.expired().await.map_err(|e| root.err(e))?
    } else {
        catalog.expired.clone()
    }
    .into_iter()
    .map(|e| e.snapshot_id)
    .collect();
    let tagged = |id: &str| -> Vec<&str> {
        catalog
            .tags
            .iter()
            .filter(|(_, t)| t.snapshot_id == id)
            .map(|(n, _)| n.as_str())
            .collect()
    };
    let storage = if args.storage {
        let policy = guideloom_publish::RetentionPolicy::default();
        let retry = guideloom_publish::RetryPolicy::contended_update();
        Some(
            root.root
                .storage(&policy, &retry)
                .await
                .map_err(|e| root.err(e))?,
        )
    } else {
        None
    };

    if global.json {
        let snaps: Vec<_> = snapshots
            .iter()
            .map(|s| {
                json!({
                    "snapshot_id": s.id(),
                    "seq": s.seq(),
                    "latest": Some(s.seq()) == latest_seq,
                    "mode": s.manifest.mode,
                    "shards": s.shards().len(),
                    "records": s.total_records(),
                    "bytes": s.shards().iter().map(|r| r.size).sum::<u64>(),
                    "shard_formats": formats(s),
                    "schema": s.manifest.schema,
                    "expired": expired.contains(s.id()),
                    "tags": tagged(s.id()),
                })
            })
            .collect();
        let sets: Vec<_> = catalog.entries.iter().map(set_json).collect();
        return output::print_json(&json!({
            "root": root.name,
            "dataset_id": identity.dataset_id,
            "published": true,
            "unpublished": listable.then(|| unpublished.iter().map(|(k, s)| json!({"key": k, "bytes": s})).collect::<Vec<_>>()),
            "latest": snapshots.last().map(|s| s.id().to_owned()),
            "snapshots": snaps,
            "unpublished_shards": listable.then_some(unpublished.len()),
            "unpublished_bytes": listable.then(|| unpublished.iter().map(|(_, s)| s).sum::<u64>()),
            "incomplete_work_ids": listable.then(|| survey.incomplete.iter().map(|(w, s)| json!({"work_id": w, "shards": s.len()})).collect::<Vec<_>>()),
            "annotation_sets": sets,
            "tags": catalog.tags.iter().map(|(n, t)| (n.clone(), json!({"snapshot_id": t.snapshot_id, "seq": t.seq}))).collect::<serde_json::Map<_, _>>(),
            "storage": storage.as_ref().map(storage_json),
            "card": crate::commands::card::summary_json(card.as_ref()),
        }));
    }

    output::line(&format!("root:       {}", root.name))?;
    output::line(&format!("dataset id: {}", identity.dataset_id))?;
    output::line(&format!("snapshots:  {}", snapshots.len()))?;
    for s in &snapshots {
        let bytes: u64 = s.shards().iter().map(|r| r.size).sum();
        let mut mark = if Some(s.seq()) == latest_seq {
            "  (latest)".to_owned()
        } else if expired.contains(s.id()) {
            "  (expired)".to_owned()
        } else {
            String::new()
        };
        let tags = tagged(s.id());
        if !tags.is_empty() {
            mark.push_str(&format!("  [tags: {}]", tags.join(", ")));
        }
        // Shard formats are named when any shard is not native (e.g. "2 native, 1 array_record").
        let counts = formats(s);
        let kinds = if counts.keys().all(|f| *f == "native") {
            String::new()
        } else {
            let named: Vec<String> = counts.iter().map(|(f, n)| format!("{n} {f}")).collect();
            format!("  ({})", named.join(", "))
        };
        output::line(&format!(
            "  #{:<4} {:<24} {:>6} shard(s) {:>12} records {:>12}{kinds}{mark}",
            s.seq(),
            s.id(),
            s.shards().len(),
            s.total_records(),
            output::bytes(bytes),
        ))?;
    }
    if let Some(schema) = snapshots.last().and_then(|s| s.manifest.schema.as_ref()) {
        output::line("schema (latest snapshot):")?;
        for line in schema.to_string().lines() {
            output::line(&format!("  {line}"))?;
        }
    }
    if !unpublished.is_empty() {
        output::line(&format!(
            "unpublished: {} shard(s), {} (publish them with `guideloom publish`)",
            unpublished.len(),
            output::bytes(unpublished.iter().map(|(_, s)| s).sum())
        ))?;
        list_shards(&unpublished.iter().collect::<Vec<_>>())?;
    }
    for (w, shards) in &survey.incomplete {
        output::line(&format!(
            "incomplete:  work id {w}: {} shard(s) from a write that did not finish (publish \
             skips them; re-run that write to finish it)",
            shards.len()
        ))?;
    }
    if let Some(st) = &storage {
        print_storage(st)?;
    }
    print_sets(&catalog)?;
    crate::commands::card::print_summary(card.as_ref())
}

fn storage_json(st: &guideloom_publish::StorageReport) -> serde_json::Value {
    json!({
        "live_bytes": st.live_bytes,
        "reclaimable_bytes": st.reclaimable_bytes,
        "shard_bytes": st.shard_bytes,
        "snapshots": st.snapshots.iter().map(|s| json!({
            "snapshot_id": s.snapshot_id, "seq": s.seq, "bytes": s.bytes,
            "unique_bytes": s.unique_bytes, "expired": s.expired, "expires": s.expires,
        })).collect::<Vec<_>>(),
        "work_ids": st.work_ids.iter().map(|(w, b)| (w.clone(), json!({
            "objects": b.objects, "bytes": b.bytes, "live_bytes": b.live_bytes,
            "reclaimable_bytes": b.reclaimable_bytes,
        }))).collect::<serde_json::Map<_, _>>(),
    })
}

fn print_storage(st: &guideloom_publish::StorageReport) -> Result<()> {
    output::line(&format!(
        "storage:    {} in shards/: {} live, {} reclaimable by `guideloom gc` (keep the latest, 7-day grace)",
        output::bytes(st.shard_bytes),
        output::bytes(st.live_bytes),
        output::bytes(st.reclaimable_bytes)
    ))?;
    output::line("  per snapshot (bytes referenced / only by it):")?;
    for s in &st.snapshots {
        output::line(&format!(
            "    #{:<4} {:<24} {:>12} {:>12}{}",
            s.seq,
            s.snapshot_id,
            output::bytes(s.bytes),
            output::bytes(s.unique_bytes),
            if s.expired {
                "  (expired)"
            } else if s.expires {
                "  (gc would expire it)"
            } else {
                ""
            }
        ))?;
    }
    output::line("  per work id (objects, bytes, live, reclaimable):")?;
    for (w, b) in &st.work_ids {
        output::line(&format!(
            "    {w:<24} {:>6} {:>12} {:>12} {:>12}",
            b.objects,
            output::bytes(b.bytes),
            output::bytes(b.live_bytes),
            output::bytes(b.reclaimable_bytes)
        ))?;
    }
    Ok(())
}

/// One annotation set of the catalog as `info --json` and `annotations --json` print it.
pub(super) fn set_json(e: &AnnotationEntry) -> serde_json::Value {
    json!({
        "set": e.set, "version": e.version, "snapshot_id": e.snapshot_id,
        "values": e.value_count, "bytes": e.size,
    })
}

/// The catalog's annotation sets, a count then one line each.
pub(super) fn print_sets(catalog: &Catalog) -> Result<()> {
    output::line(&format!("annotation sets: {}", catalog.entries.len()))?;
    for e in &catalog.entries {
        output::line(&format!(
            "  {}/{} on snapshot {}: {} values, {}",
            e.set,
            e.version,
            e.snapshot_id,
            e.value_count,
            output::bytes(e.size)
        ))?;
    }
    Ok(())
}
