//! `guideloom gc` and `guideloom tag`: retention, garbage collection and tags.

use std::collections::BTreeMap;

use guideloom_publish::{GcReport, RetentionPolicy, RetryPolicy};
use serde_json::json;

use crate::cli::{GcArgs, Global, TagArgs};
use crate::error::Result;
use crate::output;
use crate::root;

/// The kind of an object a collection deletes, by its key.
fn kind(key: &str) -> &'static str {
    if key.starts_with("shards/") {
        "shards"
    } else if key.starts_with("claims/") {
        "stale claims"
    } else if key.starts_with("annotations/") {
        "orphaned annotation values"
    } else if key.starts_with("_probe/") {
        "probes"
    } else {
        "other"
    }
}

/// Runs `guideloom gc`.
pub(crate) async fn gc(args: GcArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let policy = RetentionPolicy {
        keep_last: usize::try_from(args.keep_last).unwrap_or(usize::MAX),
        keep_younger_than: args.keep_younger_than,
        keep_annotated: !args.no_keep_annotated,
        grace: args.grace,
    };
    let report = root
        .root
        .gc(&policy, args.dry_run, &RetryPolicy::contended_update())
        .await
        .map_err(|e| root.err(e))?;
    print_report(&root.name, &report, args.list, global)
}

fn print_report(name: &str, r: &GcReport, list: bool, global: &Global) -> Result<()> {
    let mut kinds: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for d in &r.deleted {
        let k = kinds.entry(kind(&d.key)).or_default();
        k.0 += 1;
        k.1 += d.size;
    }
    if global.json {
        return output::print_json(&json!({
            "root": name,
            "dry_run": r.dry_run,
            "run": (!r.run.is_empty()).then_some(&r.run),
            "kept": r.kept,
            "expired": r.expired.iter().map(|e| json!({"snapshot_id": e.snapshot_id, "seq": e.seq})).collect::<Vec<_>>(),
            "deleted": r.deleted.iter().map(|d| json!({"key": d.key, "bytes": d.size})).collect::<Vec<_>>(),
            "by_kind": kinds.iter().map(|(k, (n, b))| (k.to_string(), json!({"objects": n, "bytes": b}))).collect::<serde_json::Map<_, _>>(),
            "bytes": r.bytes,
            "spared": r.spared,
            "resumed": r.resumed,
            "temporaries": r.temporaries,
        }));
    }
    let verb = if r.dry_run { "would delete" } else { "deleted" };
    output::line(&format!("root:     {name}"))?;
    output::line(&format!(
        "kept:     {} snapshot(s): {}",
        r.kept.len(),
        r.kept.join(", ")
    ))?;
    let expired: Vec<String> = r
        .expired
        .iter()
        .map(|e| format!("{} (#{})", e.snapshot_id, e.seq))
        .collect();
    output::line(&format!(
        "expired:  {} snapshot(s){}{}",
        expired.len(),
        if expired.is_empty() { "" } else { ": " },
        expired.join(", ")
    ))?;
    output::line(&format!(
        "{verb}: {} object(s), {}",
        r.deleted.len(),
        output::bytes(r.bytes)
    ))?;
    for (k, (n, b)) in &kinds {
        output::line(&format!("  {k:<28} {n:>8}  {:>12}", output::bytes(*b)))?;
    }
    if list {
        for d in &r.deleted {
            output::line(&format!("  {:<60} {:>12}", d.key, output::bytes(d.size)))?;
        }
    }
    if r.spared > 0 {
        output::line(&format!(
            "spared:   {} object(s) a publication claimed meanwhile",
            r.spared
        ))?;
    }
    if !r.resumed.is_empty() {
        output::line(&format!("finished earlier runs: {}", r.resumed.join(", ")))?;
    }
    if !r.run.is_empty() {
        output::line(&format!("record:   gc/{}.json", r.run))?;
    }
    Ok(())
}

/// Runs `guideloom tag`.
pub(crate) async fn tag(args: TagArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let retry = RetryPolicy::contended_update();
    let r = &root.root;
    match (args.name, args.snapshot, args.delete) {
        (Some(name), _, true) => {
            let gone = r.untag(&name, &retry).await.map_err(|e| root.err(e))?;
            if global.json {
                return output::print_json(
                    &json!({"tag": name, "removed": gone.snapshot_id, "seq": gone.seq}),
                );
            }
            output::line(&format!(
                "removed tag {name} (was {} #{})",
                gone.snapshot_id, gone.seq
            ))
        }
        (Some(name), Some(snapshot), false) => {
            let previous = r
                .tag(&name, &snapshot, &retry)
                .await
                .map_err(|e| root.err(e))?;
            let now = r.snapshot(&name).await.map_err(|e| root.err(e))?;
            if global.json {
                return output::print_json(&json!({
                    "tag": name, "snapshot_id": now.id(), "seq": now.seq(),
                    "previous": previous.map(|p| p.snapshot_id),
                }));
            }
            let was = previous.map_or_else(String::new, |p| {
                format!(" (was {} #{})", p.snapshot_id, p.seq)
            });
            output::line(&format!("tag {name} -> {} #{}{was}", now.id(), now.seq()))
        }
        (Some(name), None, false) => {
            let s = r.snapshot(&name).await.map_err(|e| root.err(e))?;
            if global.json {
                return output::print_json(
                    &json!({"tag": name, "snapshot_id": s.id(), "seq": s.seq()}),
                );
            }
            output::line(&format!("{name} -> {} #{}", s.id(), s.seq()))
        }
        (None, _, _) => {
            let tags = r.tags().await.map_err(|e| root.err(e))?;
            if global.json {
                return output::print_json(&json!({
                    "root": root.name,
                    "tags": tags.iter().map(|(n, t)| (n.clone(), json!({"snapshot_id": t.snapshot_id, "seq": t.seq}))).collect::<serde_json::Map<_, _>>(),
                }));
            }
            if tags.is_empty() {
                return output::line("no tags");
            }
            for (n, t) in &tags {
                output::line(&format!("{n:<24} {} #{}", t.snapshot_id, t.seq))?;
            }
            Ok(())
        }
    }
}
