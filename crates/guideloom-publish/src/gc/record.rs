//! Collection records (`gc/<run>.json`, create-only) and their done markers
//! (`gc/<run>.done`), and the publisher's side of the handshake with a running collection:
//! [`snapshot_records`] before verifying shards, [`check_after_claim`] after claiming.
//!
//! A collection writes its record (everything it may delete) **before** it reads the
//! claims a second time and deletes; a publisher creates its claim **before** it reads the
//! records a second time. Whichever write comes first, the other side's read sees it: the
//! collection spares the shards the claim covers, or the publisher finds its shards in the
//! record and stops ([`Error::Collected`]). docs/publication.md, "Garbage collection", has
//! the argument; `model/publication.pml` checks it.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::annotations::ExpiredEntry;
use crate::error::{Error, Result};
use crate::key::check_key;
use crate::manifest::{CONTROL_VERSION, parse_json, to_json};
use crate::store::{RootStore, Written, create_object};

/// The prefix of collection records.
pub(crate) const GC_PREFIX: &str = "gc";
/// `format` of a collection record.
pub(crate) const RECORD_FORMAT: &str = "guideloom-gc-record";
/// `format` of a done marker.
pub(crate) const DONE_FORMAT: &str = "guideloom-gc-done";
/// Largest record a reader downloads (about 4 M keys).
pub(crate) const MAX_RECORD_BYTES: u64 = 512 << 20;

/// One object a collection deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doomed {
    /// Its key.
    pub key: String,
    /// Its size when the collection listed it.
    pub size: u64,
    /// For a stale claim: its nonce when the collection read it. The claim is deleted only if
    /// the one there at the sweep still has it (a claim deleted and created again by a new
    /// request since is another claim, and stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

/// `gc/<run>.json`: what one collection decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) format: String,
    pub(crate) version: u32,
    pub(crate) dataset_id: String,
    pub(crate) run: String,
    /// Wall-clock time (informational).
    pub(crate) created_at_unix_ms: u64,
    /// Snapshots this collection expired (also in the catalog where it has one).
    pub(crate) expired: Vec<ExpiredEntry>,
    /// Everything it may delete (a superset of what it deletes: its second reading of the
    /// claims spares some).
    pub(crate) delete: Vec<Doomed>,
}

impl Record {
    pub(crate) fn parse(key: &str, body: &[u8], dataset_id: &str) -> Result<Self> {
        let r: Record = parse_json(key, body)?;
        if r.format != RECORD_FORMAT || r.version != CONTROL_VERSION {
            return Err(Error::corrupt(key, "unknown gc record format or version"));
        }
        if r.dataset_id != dataset_id {
            return Err(Error::corrupt(key, "gc record of another dataset"));
        }
        if record_key(&r.run) != key {
            return Err(Error::corrupt(key, "its run does not match its key"));
        }
        for d in &r.delete {
            check_key(&d.key)
                .map_err(|_| Error::corrupt(key, format!("names a bad key {:?}", d.key)))?;
        }
        Ok(r)
    }
}

/// `gc/<run>.done`: the collection finished deleting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Done {
    pub(crate) format: String,
    pub(crate) version: u32,
    pub(crate) run: String,
    pub(crate) deleted: u64,
    pub(crate) bytes: u64,
}

pub(crate) fn record_key(run: &str) -> String {
    format!("{GC_PREFIX}/{run}.json")
}

pub(crate) fn done_key(run: &str) -> String {
    format!("{GC_PREFIX}/{run}.done")
}

/// The runs under `gc/` and whether each has finished (its done marker exists).
pub(crate) type Runs = BTreeMap<String, bool>;

/// One LIST of `gc/`: every run with a record, and whether it is done.
pub(crate) async fn snapshot_records(store: &dyn RootStore) -> Result<Runs> {
    let listed = match store.list(GC_PREFIX).await {
        Ok(l) => l,
        Err(Error::Unsupported { .. }) if !store.capabilities().list => return Ok(Runs::new()),
        Err(e) => return Err(e),
    };
    let mut runs = Runs::new();
    let mut done = BTreeSet::new();
    for o in listed {
        let Some(name) = o.key.strip_prefix("gc/") else {
            continue;
        };
        if let Some(run) = name.strip_suffix(".json") {
            runs.entry(run.to_owned()).or_insert(false);
        } else if let Some(run) = name.strip_suffix(".done") {
            done.insert(run.to_owned());
        }
    }
    for run in done {
        if let Some(d) = runs.get_mut(&run) {
            *d = true;
        }
    }
    Ok(runs)
}

/// Reads run `run`'s record (bounded).
pub(crate) async fn read_record(
    store: &dyn RootStore,
    run: &str,
    dataset_id: &str,
) -> Result<Record> {
    let key = record_key(run);
    let obj = store.get(&key, MAX_RECORD_BYTES).await?;
    Record::parse(&key, &obj.body, dataset_id)
}

/// Step 2 of the handshake, for a publication that listed `before` before verifying its
/// shards and has now claimed: every record listed now that was not done then is read, and
/// one that may delete any of `keys` stops the publication ([`Error::Collected`]). A record
/// that was done before the shards were verified deleted nothing after that (the HEADs saw
/// what it left).
pub(crate) async fn check_after_claim(
    store: &dyn RootStore,
    before: &Runs,
    dataset_id: &str,
    keys: &BTreeSet<String>,
) -> Result<()> {
    let now = snapshot_records(store).await?;
    for run in now.keys() {
        if before.get(run) == Some(&true) {
            continue;
        }
        let record = match read_record(store, run, dataset_id).await {
            Ok(record) => record,
            // On a store without atomic writes (a declared mount) a record still being
            // written reads incomplete: its collection has not read the claims again yet,
            // and ours is already there, so that reading will spare what it covers.
            Err(Error::Corrupt { .. }) if !store.capabilities().atomic_writes => continue,
            Err(e) => return Err(e),
        };
        if let Some(d) = record.delete.iter().find(|d| keys.contains(d.key.as_str())) {
            return Err(Error::Collected {
                key: d.key.clone(),
                by: record_key(run),
            });
        }
    }
    Ok(())
}

/// Creates the record (create-only; identical bytes are ours).
pub(crate) async fn write_record(store: &dyn RootStore, record: &Record) -> Result<Written> {
    create_object(
        store,
        &record_key(&record.run),
        Bytes::from(to_json(record)),
    )
    .await
}

/// Creates the done marker of `run`.
pub(crate) async fn write_done(store: &dyn RootStore, done: &Done) -> Result<Written> {
    create_object(store, &done_key(&done.run), Bytes::from(to_json(done))).await
}
