//! Dataset cards: a markdown `README.md` and structured `card.json` per snapshot, at
//! `cards/<snapshot_id>/README.md` and `cards/<snapshot_id>/card.json`, both create-only.
//!
//! The README is written first and `card.json` last: a card exists when its `card.json`
//! does (a writer stopped in between leaves a README that [`Root::card`] does not report,
//! and the same write completes it). Both objects are read as hostile input: each is capped
//! before its body is read ([`MAX_CARD_README_BYTES`], [`MAX_CARD_JSON_BYTES`]), and a README
//! that is not UTF-8, or a `card.json` that is not the shape below, is
//! [`Error::Corrupt`] naming the object.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::Root;
use crate::error::{Error, Result};
use crate::key::check_name;
use crate::snapshot_log;
use crate::store::create_object;

/// The largest `README.md` of a card: 1 MiB.
pub const MAX_CARD_README_BYTES: u64 = 1 << 20;
/// The largest `card.json` of a card: 1 MiB.
pub const MAX_CARD_JSON_BYTES: u64 = 1 << 20;
/// How many snapshots [`Root::latest_card`] looks at, newest first, before it answers
/// `None`.
pub const MAX_CARD_WALK: usize = 64;
/// `format` field of `card.json`.
pub const CARD_FORMAT: &str = "guideloom-card";
/// Version of `card.json`.
const CARD_VERSION: u32 = 1;

/// Key of the README of `snapshot_id`'s card.
pub fn card_readme_key(snapshot_id: &str) -> String {
    format!("cards/{snapshot_id}/README.md")
}

/// Key of the `card.json` of `snapshot_id`'s card.
pub fn card_json_key(snapshot_id: &str) -> String {
    format!("cards/{snapshot_id}/card.json")
}

/// What a split of a card names: a snapshot, or a range of record indices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Split {
    /// Every record of snapshot `id`.
    Snapshot(String),
    /// Records `start..end` of the card's snapshot.
    Range {
        /// First index.
        start: u64,
        /// One past the last index.
        end: u64,
    },
}

impl Split {
    /// Parses `ID` (a snapshot id) or `START..END` (a range of record indices).
    ///
    /// ```
    /// use guideloom_publish::Split;
    ///
    /// assert_eq!(Split::parse("0..100")?, Split::Range { start: 0, end: 100 });
    /// assert_eq!(Split::parse("run-002")?, Split::Snapshot("run-002".into()));
    /// assert!(Split::parse("9..3").is_err());
    /// # Ok::<(), guideloom_publish::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        if let Some((start, end)) = text.split_once("..") {
            let number = |s: &str| {
                s.trim().parse::<u64>().map_err(|e| {
                    Error::invalid(format!("split range {text:?}: {s:?} is not an index: {e}"))
                })
            };
            return Split::range(number(start)?..number(end)?);
        }
        check_name("split snapshot id", text)?;
        Ok(Split::Snapshot(text.to_owned()))
    }

    /// A range split; an empty or reversed range is [`Error::InvalidArgument`].
    pub fn range(range: Range<u64>) -> Result<Self> {
        if range.start >= range.end {
            return Err(Error::invalid(format!(
                "split range {}..{} holds no record",
                range.start, range.end
            )));
        }
        Ok(Split::Range {
            start: range.start,
            end: range.end,
        })
    }

    fn problem(&self) -> Option<String> {
        match self {
            Split::Snapshot(id) => check_name("split snapshot id", id)
                .err()
                .map(|e| e.to_string()),
            Split::Range { start, end } if start >= end => {
                Some(format!("split range {start}..{end} holds no record"))
            }
            Split::Range { .. } => None,
        }
    }
}

/// A dataset card: the README's markdown and the structured fields of `card.json`.
///
/// ```
/// use guideloom_publish::{Card, Split};
///
/// let mut card = Card::new("# Captures\n\nTwo weeks of captures.\n");
/// card.licence = Some("CC-BY-4.0".into());
/// card.splits.insert("train".into(), Split::range(0..900)?);
/// let (readme, json) = card.to_bytes()?;
/// assert_eq!(Card::parse("s1", &readme, &json)?, card);
/// # Ok::<(), guideloom_publish::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Card {
    /// `README.md`: markdown, UTF-8, at most [`MAX_CARD_README_BYTES`].
    pub readme: String,
    /// The licence (an SPDX identifier or a name).
    pub licence: Option<String>,
    /// A short description.
    pub description: Option<String>,
    /// The records' schema, for people (informational: readers use the manifest's).
    pub schema: Option<serde_json::Value>,
    /// Named splits.
    pub splits: BTreeMap<String, Split>,
    /// How to cite the dataset.
    pub citation: Option<String>,
    /// Anything else, free-form.
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// `card.json` as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CardJson {
    format: String,
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    licence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schema: Option<serde_json::Value>,
    #[serde(default)]
    splits: BTreeMap<String, Split>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    citation: Option<String>,
    #[serde(default)]
    extra: BTreeMap<String, serde_json::Value>,
}

impl Card {
    /// A card of `readme` with no other field.
    pub fn new(readme: impl Into<String>) -> Self {
        Card {
            readme: readme.into(),
            ..Card::default()
        }
    }

    /// The README's first `n` non-blank lines (a summary for tools).
    pub fn first_lines(&self, n: usize) -> Vec<&str> {
        self.readme
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(n)
            .collect()
    }

    /// The two objects' bytes: `README.md` and `card.json` (pretty JSON, keys in a fixed
    /// order, so the same card always gives the same bytes). A card past the size caps or
    /// with an empty split name or range is [`Error::InvalidArgument`].
    pub fn to_bytes(&self) -> Result<(Bytes, Bytes)> {
        let json = CardJson {
            format: CARD_FORMAT.to_owned(),
            version: CARD_VERSION,
            licence: self.licence.clone(),
            description: self.description.clone(),
            schema: self.schema.clone(),
            splits: self.splits.clone(),
            citation: self.citation.clone(),
            extra: self.extra.clone(),
        };
        if let Some(what) = splits_problem(&json.splits) {
            return Err(Error::invalid(what));
        }
        let json = serde_json::to_vec_pretty(&json)
            .map_err(|e| Error::invalid(format!("card does not encode as JSON: {e}")))?;
        for (what, len, cap) in [
            ("README.md", self.readme.len() as u64, MAX_CARD_README_BYTES),
            ("card.json", json.len() as u64, MAX_CARD_JSON_BYTES),
        ] {
            if len > cap {
                return Err(Error::invalid(format!(
                    "the card's {what} is {len} bytes (at most {cap})"
                )));
            }
        }
        Ok((
            Bytes::from(self.readme.clone().into_bytes()),
            Bytes::from(json),
        ))
    }

    /// Parses the card of `snapshot_id` from its two objects' bytes, checking the caps,
    /// UTF-8 and the JSON's shape: a violation is [`Error::Corrupt`] naming the object.
    pub fn parse(snapshot_id: &str, readme: &[u8], card_json: &[u8]) -> Result<Self> {
        let readme_key = card_readme_key(snapshot_id);
        let json_key = card_json_key(snapshot_id);
        for (key, len, cap) in [
            (&readme_key, readme.len() as u64, MAX_CARD_README_BYTES),
            (&json_key, card_json.len() as u64, MAX_CARD_JSON_BYTES),
        ] {
            if len > cap {
                return Err(Error::corrupt(key, format!("{len} bytes (at most {cap})")));
            }
        }
        let readme = std::str::from_utf8(readme)
            .map_err(|e| Error::corrupt(&readme_key, format!("not UTF-8: {e}")))?;
        let json: CardJson = serde_json::from_slice(card_json)
            .map_err(|e| Error::corrupt(&json_key, format!("not a card: {e}")))?;
        if json.format != CARD_FORMAT || json.version != CARD_VERSION {
            return Err(Error::corrupt(
                &json_key,
                format!(
                    "format {:?} version {} (expected {CARD_FORMAT:?} version {CARD_VERSION})",
                    json.format, json.version
                ),
            ));
        }
        if let Some(what) = splits_problem(&json.splits) {
            return Err(Error::corrupt(&json_key, what));
        }
        Ok(Card {
            readme: readme.to_owned(),
            licence: json.licence,
            description: json.description,
            schema: json.schema,
            splits: json.splits,
            citation: json.citation,
            extra: json.extra,
        })
    }
}

fn splits_problem(splits: &BTreeMap<String, Split>) -> Option<String> {
    splits.iter().find_map(|(name, split)| {
        if name.is_empty() {
            return Some("a split has an empty name".to_owned());
        }
        split.problem().map(|p| format!("split {name:?}: {p}"))
    })
}

impl Root {
    /// Writes `card` as the card of snapshot `snapshot_id` (which must exist:
    /// [`Error::NotFound`] otherwise): `cards/<id>/README.md`, then `cards/<id>/card.json`,
    /// both create-only. Writing the same card again succeeds (identical bytes); another
    /// card for the snapshot is [`Error::PublicationCollision`] naming the object that
    /// differs.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_format::ShardMetadata;
    /// use guideloom_publish::{Card, PublicationOptions, PublishMode, PublishRequest, Root};
    ///
    /// let root = Root::open("memory://card-doc", &Default::default(), Default::default())?;
    /// let shard = root.write_shard("w", 0, ShardMetadata::new("raw", "documents"), [b"a"]).await?;
    /// let request = PublishRequest { dataset_id: "d".into(), snapshot_id: "s1".into(),
    ///                                shards: vec![shard], mode: PublishMode::Full, schema: None };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    ///
    /// let mut card = Card::new("# My dataset\n");
    /// card.licence = Some("MIT".into());
    /// root.write_card("s1", &card).await?;
    /// assert_eq!(root.card("s1").await?, Some(card.clone()));
    /// assert_eq!(root.latest_card().await?.map(|(id, _)| id), Some("s1".to_owned()));
    /// card.licence = Some("Apache-2.0".into());
    /// assert!(root.write_card("s1", &card).await.is_err()); // create-only
    /// # Ok(()) }
    /// ```
    pub async fn write_card(&self, snapshot_id: &str, card: &Card) -> Result<()> {
        check_name("snapshot id", snapshot_id)?;
        self.store().check_writable()?;
        let (readme, json) = card.to_bytes()?;
        // The snapshot must exist (its pointer, or a log entry of it).
        self.snapshot(snapshot_id).await?;
        create_object(&**self.store(), &card_readme_key(snapshot_id), readme).await?;
        create_object(&**self.store(), &card_json_key(snapshot_id), json).await?;
        Ok(())
    }

    /// The card of snapshot `snapshot_id`, `None` when it has none (no `card.json`). Each
    /// object is read bounded by its cap; a damaged or hostile card is [`Error::Corrupt`] or
    /// [`Error::TooLarge`] naming the object, a `card.json` without its README
    /// [`Error::Corrupt`] naming the README.
    pub async fn card(&self, snapshot_id: &str) -> Result<Option<Card>> {
        check_name("snapshot id", snapshot_id)?;
        let json_key = card_json_key(snapshot_id);
        let json = match self.store().get(&json_key, MAX_CARD_JSON_BYTES).await {
            Ok(obj) => obj.body,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let readme_key = card_readme_key(snapshot_id);
        let readme = match self.store().get(&readme_key, MAX_CARD_README_BYTES).await {
            Ok(obj) => obj.body,
            Err(e) if e.is_not_found() => {
                return Err(Error::corrupt(
                    &readme_key,
                    "missing, though the card's card.json exists",
                ));
            }
            Err(e) => return Err(e),
        };
        Card::parse(snapshot_id, &readme, &json).map(Some)
    }

    /// The card of the newest snapshot that has one, with that snapshot's id: the log is
    /// walked newest first, at most [`MAX_CARD_WALK`] snapshots (each costs the read of its
    /// log entry and of its `card.json`), so a card older than that is not found (`None`),
    /// as on a root without cards.
    pub async fn latest_card(&self) -> Result<Option<(String, Card)>> {
        let entries = snapshot_log::entries(&**self.store()).await?;
        for (seq, size) in entries.into_iter().rev().take(MAX_CARD_WALK) {
            let snapshot =
                match snapshot_log::read_entry(&**self.store(), &self.identity, seq, size).await {
                    Ok(s) => s,
                    // A hand-made gap (see `audit_log`) hides nothing from this walk.
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(e),
                };
            if let Some(card) = self.card(snapshot.id()).await? {
                return Ok(Some((snapshot.id().to_owned(), card)));
            }
        }
        Ok(None)
    }
}
