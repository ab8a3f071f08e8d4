//! `guideloom verify`: sizes and footers of every referenced shard (and, `--deep`, every
//! record checksum), annotation values; one line per problem, naming the object.

use std::collections::BTreeMap;
use std::time::Instant;

use guideloom_format::RunBudget;
use guideloom_publish::{Checksum, Dataset, FooterInspector, ShardInspector, ShardRef, Snapshot};
use serde_json::json;

use crate::cli::{Global, VerifyArgs};
use crate::error::{CliError, Result};
use crate::output;
use crate::root::{self, OpenRoot};

/// One problem: the object at fault and what is wrong.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub(crate) object: String,
    pub(crate) what: String,
}

/// What a verification covered.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) snapshots: usize,
    pub(crate) shards: usize,
    pub(crate) records_checked: u64,
    pub(crate) bytes: u64,
    pub(crate) annotation_sets: usize,
    pub(crate) problems: Vec<Problem>,
}

fn problem(report: &mut Report, object: &str, what: impl Into<String>) {
    report.problems.push(Problem {
        object: object.to_owned(),
        what: what.into(),
    });
}

/// Checks shard number `n` of `reader`'s snapshot (`shard` is its reference): size, footer
/// checksum, opening (footer, size and record count against the reference; an ArrayRecord
/// shard's postscript and footer hashes) and, `deep`, every record's CRC32C (every chunk's
/// hashes of an ArrayRecord shard).
async fn check_shard(
    root: &OpenRoot,
    reader: &Dataset,
    n: usize,
    shard: &ShardRef,
    deep: bool,
    report: &mut Report,
) {
    let key = shard.key.as_str();
    match root.store().head(key).await {
        Ok(info) if info.size != shard.size => {
            let what = if info.size < shard.size {
                "truncated"
            } else {
                "larger than published"
            };
            return problem(
                report,
                key,
                format!(
                    "size {} bytes, the snapshot says {} ({what})",
                    info.size, shard.size
                ),
            );
        }
        Ok(_) => {}
        Err(e) if e.is_not_found() => return problem(report, key, "missing"),
        Err(e) => return problem(report, key, CliError::root(&root.name, e).one_line()),
    }
    if let Some(want @ Checksum::FooterCrc32c(_)) = &shard.checksum {
        match FooterInspector.inspect(&**root.store(), shard).await {
            Ok(facts) if facts.checksum.as_ref() != Some(want) => {
                return problem(
                    report,
                    key,
                    format!(
                        "{}, the snapshot says {want} (replaced or corrupt)",
                        facts
                            .checksum
                            .map_or_else(|| "no footer checksum".to_owned(), |c| c.to_string())
                    ),
                );
            }
            Ok(_) => {}
            Err(e) => return problem(report, key, e.to_string()),
        }
    }
    if let Err(e) = reader.open_shard_async(n).await {
        return problem(report, key, CliError::root(&root.name, e).one_line());
    }
    if deep {
        // The shard's records in order through the snapshot reader: each run one read,
        // every record's CRC32C checked by the format crate (for an ArrayRecord shard,
        // every chunk's header and data HighwayHash and its block headers, by the
        // arrayrecord crate).
        let mut runs = match reader.read_in_order(reader.table().bounds(n), RunBudget::default()) {
            Ok(runs) => runs,
            Err(e) => return problem(report, key, CliError::root(&root.name, e).one_line()),
        };
        while let Some(run) = runs.next_run().await {
            match run {
                Ok(run) => report.records_checked += run.records.len() as u64,
                Err(guideloom_publish::Error::Shard { source, .. }) => {
                    return problem(report, key, source.to_string());
                }
                Err(guideloom_publish::Error::ArrayRecordShard { source, .. }) => {
                    return problem(report, key, format!("ArrayRecord: {source}"));
                }
                Err(e) => return problem(report, key, CliError::root(&root.name, e).one_line()),
            }
        }
    }
}

/// Reports gaps in the snapshot log (entries deleted by hand): every reader still opens the
/// same latest snapshot, the one before the gap, and publication is refused until repaired.
async fn check_log(root: &OpenRoot, report: &mut Report) {
    let audit = match root.root.audit_log().await {
        Ok(audit) => audit,
        Err(e) => return problem(report, "log/", CliError::root(&root.name, e).one_line()),
    };
    let latest = audit
        .latest
        .map_or_else(|| "no snapshot".to_owned(), |s| format!("snapshot #{s}"));
    for gap in &audit.gaps {
        let missing = if gap.end - gap.start == 1 {
            format!("entry {} is missing", gap.start)
        } else {
            format!("entries {}..={} are missing", gap.start, gap.end - 1)
        };
        problem(
            report,
            "log/",
            format!(
                "{missing} (deleted by hand?): every reader opens {latest} as the latest, and \
                 publication is refused until the log is repaired"
            ),
        );
    }
    if !audit.unreachable.is_empty() {
        problem(
            report,
            "log/",
            format!(
                "{} entr{} after the gap ({}) are not reachable as the latest snapshot",
                audit.unreachable.len(),
                if audit.unreachable.len() == 1 {
                    "y"
                } else {
                    "ies"
                },
                audit
                    .unreachable
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
}

/// Verifies `snapshots` of `root`.
pub(crate) async fn verify(
    root: &OpenRoot,
    snapshots: &[Snapshot],
    deep: bool,
    json: bool,
) -> Result<Report> {
    let mut report = Report {
        snapshots: snapshots.len(),
        ..Report::default()
    };
    check_log(root, &mut report).await;
    // One reader per snapshot; each distinct shard is checked once, through the reader
    // of the first snapshot that references it.
    let readers: Vec<Dataset> = snapshots
        .iter()
        .map(|s| root.root.reader(s.clone()))
        .collect();
    let mut shards: BTreeMap<&str, (&ShardRef, usize, usize)> = BTreeMap::new();
    for (i, s) in snapshots.iter().enumerate() {
        for (n, r) in s.shards().iter().enumerate() {
            let first = *shards.entry(&r.key).or_insert((r, i, n));
            if first.0 != r {
                problem(
                    &mut report,
                    &r.key,
                    format!(
                        "referenced with different sizes or counts by two snapshots (one is snapshot {})",
                        s.id()
                    ),
                );
            }
        }
    }
    // Each snapshot's pointer must lead to its log entry (what `--snapshot ID` opens).
    for s in snapshots {
        match root.root.snapshot(s.id()).await {
            Ok(by_id) if by_id == *s => {}
            Ok(by_id) => problem(
                &mut report,
                &format!("snapshots/{}.json", s.id()),
                format!(
                    "opens log entry #{} instead of #{} (the pointer is missing or stale)",
                    by_id.seq(),
                    s.seq()
                ),
            ),
            Err(e) => problem(
                &mut report,
                &format!("snapshots/{}.json", s.id()),
                CliError::root(&root.name, e).one_line(),
            ),
        }
    }
    report.shards = shards.len();
    report.bytes = shards.values().map(|(s, _, _)| s.size).sum();
    let bar = output::progress(json, Some(shards.len() as u64), "shards");
    for (shard, i, n) in shards.values() {
        check_shard(root, &readers[*i], *n, shard, deep, &mut report).await;
        bar.inc(1);
    }
    bar.finish_and_clear();

    let catalog = match root.root.catalog().await {
        Ok(c) => Some(c),
        Err(e) => {
            problem(
                &mut report,
                "annotations/catalog.json",
                CliError::root(&root.name, e).one_line(),
            );
            None
        }
    };
    for entry in catalog.iter().flat_map(|c| &c.entries) {
        report.annotation_sets += 1;
        let Some(snapshot) = snapshots.iter().find(|s| s.id() == entry.snapshot_id) else {
            continue; // annotates a snapshot outside this verification
        };
        if let Err(e) = root
            .root
            .annotations(&entry.set, Some(&entry.version), snapshot, false)
            .await
        {
            problem(&mut report, &entry.key, e.to_string());
        }
    }
    Ok(report)
}

/// Runs `guideloom verify`.
pub(crate) async fn run(args: VerifyArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    let started = Instant::now();
    root.root.identity().await.map_err(|e| root.err(e))?;
    let snapshots = match &args.snapshot {
        Some(id) => vec![root.snapshot(Some(id)).await?],
        None => root.root.snapshots().await.map_err(|e| root.err(e))?,
    };
    // Expired snapshots' shards may be gone (garbage collection): their log entries are
    // history, not damage. They are counted, not checked.
    let expired: std::collections::BTreeSet<String> = if root.store().capabilities().list {
        root.root
            .expired()
            .await
            .map_err(|e| root.err(e))?
            .into_iter()
            .map(|e| e.snapshot_id)
            .collect()
    } else {
        Default::default()
    };
    let (expired_snapshots, snapshots): (Vec<_>, Vec<_>) = snapshots
        .into_iter()
        .partition(|s| expired.contains(s.id()));
    let report = verify(&root, &snapshots, args.deep, global.json).await?;
    let sound = report.problems.is_empty();
    if global.json {
        output::print_json(&json!({
            "root": root.name,
            "sound": sound,
            "deep": args.deep,
            "snapshots": report.snapshots,
            "expired_snapshots": expired_snapshots.iter().map(|s| s.id()).collect::<Vec<_>>(),
            "shards": report.shards,
            "bytes": report.bytes,
            "records_checked": report.records_checked,
            "annotation_sets": report.annotation_sets,
            "problems": report.problems.iter().map(|p| json!({"object": p.object, "problem": p.what})).collect::<Vec<_>>(),
            "seconds": started.elapsed().as_secs_f64(),
        }))?;
    } else {
        for p in &report.problems {
            output::line(&format!("PROBLEM {}: {}", p.object, p.what))?;
        }
        if !expired_snapshots.is_empty() {
            output::line(&format!(
                "expired (retention policy; shards not checked): {}",
                expired_snapshots
                    .iter()
                    .map(|s| s.id())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))?;
        }
        if sound {
            output::line(&format!(
                "ok: {} snapshot(s), {} shard(s), {}{}, {} annotation set(s) sound in {}",
                report.snapshots,
                report.shards,
                output::bytes(report.bytes),
                if args.deep {
                    format!(", {} record checksums", report.records_checked)
                } else {
                    String::new()
                },
                report.annotation_sets,
                output::secs(started.elapsed())
            ))?;
        }
    }
    if sound {
        Ok(())
    } else {
        Err(CliError::Unsound {
            root: root.name.clone(),
            count: report.problems.len(),
        })
    }
}
