//! Work ids and their completion markers: what makes a failed `write` harmless.
//!
//! `guideloom write` writes the shards of one work id, then, only when every record went in,
//! the create-only marker `shards/<work_id>/complete.json` listing them. `publish` without
//! `--work-id` takes only shards that a marker lists; a work id without one (its write failed
//! or is still running) is skipped and named. `publish --work-id W` refuses an incomplete `W`.
//! Re-running the same write resumes it: identical shards are accepted as already written
//! (create-only writes are idempotent for the same bytes), a different one is a collision
//! that names it.

use std::collections::BTreeMap;

use bytes::Bytes;
use guideloom_publish::{ShardRef, create_object};
use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};
use crate::root::OpenRoot;

/// `format` of a completion marker.
const COMPLETION_FORMAT: &str = "guideloom-cli-work-complete";
/// Version of the marker format.
const COMPLETION_VERSION: u32 = 1;
/// Largest marker read (about 200 000 shard references).
const MAX_COMPLETION_BYTES: u64 = 64 << 20;

/// Key of `work_id`'s completion marker.
pub(crate) fn marker_key(work_id: &str) -> String {
    format!("shards/{work_id}/complete.json")
}

/// `shards/<work_id>/complete.json`: the shards one finished `write` produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Completion {
    format: String,
    version: u32,
    /// The work id.
    pub(crate) work_id: String,
    /// Every shard the write produced, in order.
    pub(crate) shards: Vec<ShardRef>,
}

/// Writes the completion marker of `work_id` (create-only; identical bytes from an earlier
/// attempt are accepted).
pub(crate) async fn mark_complete(
    root: &OpenRoot,
    work_id: &str,
    shards: &[ShardRef],
) -> Result<()> {
    let marker = Completion {
        format: COMPLETION_FORMAT.to_owned(),
        version: COMPLETION_VERSION,
        work_id: work_id.to_owned(),
        shards: shards.to_vec(),
    };
    let body = serde_json::to_vec_pretty(&marker).map_err(|e| CliError::Output {
        source: std::io::Error::other(e),
    })?;
    create_object(&**root.store(), &marker_key(work_id), Bytes::from(body))
        .await
        .map_err(|e| root.err(e))?;
    Ok(())
}

/// The completion marker of `work_id`, or `None` if its write never finished.
pub(crate) async fn completion(root: &OpenRoot, work_id: &str) -> Result<Option<Completion>> {
    let key = marker_key(work_id);
    let obj = match root.store().get(&key, MAX_COMPLETION_BYTES).await {
        Ok(obj) => obj,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(root.err(e)),
    };
    let marker: Completion = serde_json::from_slice(&obj.body).map_err(|e| {
        CliError::argument(
            &key,
            format!("not a completion marker of this tool ({e}); remove it or use a new work id"),
        )
    })?;
    if marker.format != COMPLETION_FORMAT
        || marker.version != COMPLETION_VERSION
        || marker.work_id != work_id
        || marker
            .shards
            .iter()
            .any(|s| !s.key.starts_with(&format!("shards/{work_id}/")))
    {
        return Err(CliError::argument(
            &key,
            "not a completion marker of this work id (wrong format, version, work id or shard keys)",
        ));
    }
    Ok(Some(marker))
}

/// The shards under `shards/`, by work id: complete ones (with the shards their marker lists
/// and the listing shows) and incomplete ones (shards without a marker).
#[derive(Debug, Default)]
pub(crate) struct Survey {
    /// Work id → its marker's shards that exist, with listed sizes.
    pub(crate) complete: BTreeMap<String, Vec<(String, u64)>>,
    /// Work id → its shards (`.glm` objects, not `.meta.glm` companions) written without a
    /// marker.
    pub(crate) incomplete: BTreeMap<String, Vec<(String, u64)>>,
}

impl Survey {
    /// One line naming the incomplete work ids, for `publish` and `info` output.
    pub(crate) fn incomplete_line(&self) -> Option<String> {
        if self.incomplete.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .incomplete
            .iter()
            .map(|(w, shards)| format!("{w} ({} shard(s))", shards.len()))
            .collect();
        Some(format!(
            "skipped incomplete work id(s) {}: their write did not finish (no \
             shards/<work id>/complete.json); re-run that write to finish it, or write under a \
             new work id",
            names.join(", ")
        ))
    }
}

/// Lists `shards/` (or only `work_ids`' directories) and sorts the shards by completeness.
pub(crate) async fn survey(root: &OpenRoot, work_ids: &[String]) -> Result<Survey> {
    let prefixes: Vec<String> = if work_ids.is_empty() {
        vec!["shards".to_owned()]
    } else {
        work_ids.iter().map(|w| format!("shards/{w}")).collect()
    };
    let mut by_work: BTreeMap<String, (bool, Vec<(String, u64)>)> = BTreeMap::new();
    for w in work_ids {
        by_work.entry(w.clone()).or_default();
    }
    for prefix in &prefixes {
        for o in root.store().list(prefix).await.map_err(|e| root.err(e))? {
            let Some((work, name)) = o
                .key
                .strip_prefix("shards/")
                .and_then(|rest| rest.split_once('/'))
            else {
                continue;
            };
            let entry = by_work.entry(work.to_owned()).or_default();
            if name == "complete.json" {
                entry.0 = true;
            } else if name.ends_with(".glm") && !name.ends_with(".meta.glm") {
                // A `.meta.glm` is a stream shard's metadata companion, published through
                // its stream shard's reference, never as a shard of its own.
                entry.1.push((o.key.clone(), o.size));
            }
        }
    }
    let mut survey = Survey::default();
    for (work, (marked, mut shards)) in by_work {
        shards.sort();
        if !marked {
            if !shards.is_empty() {
                survey.incomplete.insert(work, shards);
            }
            continue;
        }
        let Some(marker) = completion(root, &work).await? else {
            // Listed, then gone: treat as never finished.
            survey.incomplete.insert(work, shards);
            continue;
        };
        let listed: BTreeMap<&str, u64> = shards.iter().map(|(k, s)| (k.as_str(), *s)).collect();
        let mut chosen = Vec::with_capacity(marker.shards.len());
        for s in &marker.shards {
            match listed.get(s.key.as_str()) {
                Some(&size) => chosen.push((s.key.clone(), size)),
                None => {
                    return Err(CliError::argument(
                        marker_key(&work),
                        format!("lists {} but it does not exist in {}", s.key, root.name),
                    ));
                }
            }
        }
        survey.complete.insert(work, chosen);
    }
    Ok(survey)
}
