//! `index.json`: its bounded parsing, and the checks of every shard entry before any shard is
//! read.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use super::encoding::{Encoding, EncodingError};
use crate::{Error, Result};

/// The largest `index.json` read (64 MiB).
pub(crate) const INDEX_LIMIT: u64 = 64 << 20;

/// The largest shard file: sample offsets are u32, so a shard ends before 4 GiB.
pub(crate) const SHARD_LIMIT: u64 = u32::MAX as u64;

/// A shard's compression family (`streaming.base.compression`), any level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    Brotli,
    Bzip2,
    Gzip,
    Snappy,
    Zstd,
}

impl Compression {
    /// Parses `family` or `family:level`; `None` for an unknown family.
    pub(crate) fn parse(text: &str) -> Option<Compression> {
        let family = text.split_once(':').map_or(text, |(family, _)| family);
        Some(match family {
            "br" => Compression::Brotli,
            "bz2" => Compression::Bzip2,
            "gz" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Compression::Brotli => "br",
            Compression::Bzip2 => "bz2",
            Compression::Gzip => "gz",
            Compression::Snappy => "snappy",
            Compression::Zstd => "zstd",
        }
    }
}

/// A column of the dataset.
#[derive(Debug, Clone)]
pub(crate) struct ColumnSpec {
    pub(crate) name: String,
    /// The encoding as written in `index.json`.
    pub(crate) text: String,
    pub(crate) encoding: Encoding,
    /// The fixed size of every value, or `None` if each sample stores it.
    pub(crate) size: Option<usize>,
}

/// A file of a shard: its path under the dataset directory and its declared size.
#[derive(Debug, Clone)]
pub(crate) struct FileSpec {
    pub(crate) path: PathBuf,
    pub(crate) bytes: u64,
}

/// A shard entry, checked.
#[derive(Debug, Clone)]
pub(crate) struct ShardSpec {
    pub(crate) raw: FileSpec,
    pub(crate) zip: Option<(FileSpec, Compression)>,
    pub(crate) samples: u64,
}

/// The checked index of a dataset.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    pub(crate) columns: Vec<ColumnSpec>,
    pub(crate) shards: Vec<ShardSpec>,
    pub(crate) samples: u64,
}

#[derive(Deserialize)]
struct RawIndex {
    version: serde_json::Value,
    shards: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawShard {
    version: serde_json::Value,
    column_names: Vec<String>,
    column_encodings: Vec<String>,
    column_sizes: Vec<Option<u64>>,
    compression: Option<String>,
    raw_data: RawFile,
    zip_data: Option<RawFile>,
    samples: u64,
}

#[derive(Deserialize)]
struct RawFile {
    basename: String,
    bytes: u64,
}

/// Reads the index of the dataset at `dir`: `dir/index.json`, or where there is none, the
/// `index.json` of each sub-directory (in name order) as `streaming.base.util.merge_index`
/// would merge them.
pub(crate) fn load(dir: &Path) -> Result<Index> {
    let root = dir.join("index.json");
    match fs::metadata(&root) {
        Ok(_) => return parse_file(&root, Path::new("")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(root, e)),
    }
    let mut parts = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let sub = entry.path();
        if sub.join("index.json").is_file() {
            parts.push(entry.file_name());
        }
    }
    if parts.is_empty() {
        let not_found = std::io::Error::new(std::io::ErrorKind::NotFound, "no MDS index.json");
        return Err(Error::io(root, not_found));
    }
    parts.sort();
    let mut merged = Index::default();
    for part in parts {
        let path = dir.join(&part).join("index.json");
        let index = parse_file(&path, Path::new(&part))?;
        merged = merge(merged, index, &path)?;
    }
    Ok(merged)
}

fn merge(mut into: Index, index: Index, path: &Path) -> Result<Index> {
    if into.shards.is_empty() && into.columns.is_empty() {
        return Ok(index);
    }
    if !index.shards.is_empty() && !same_columns(&into.columns, &index.columns) {
        let detail = "its columns differ from the other partitions' (one schema is needed)";
        return Err(Error::unsupported(path, detail));
    }
    into.samples = into
        .samples
        .checked_add(index.samples)
        .ok_or_else(|| Error::corrupt(path, "the sample counts add up past 2^64"))?;
    into.shards.extend(index.shards);
    Ok(into)
}

fn same_columns(a: &[ColumnSpec], b: &[ColumnSpec]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| a.name == b.name && a.text == b.text)
}

/// Parses one `index.json`, its shard basenames taken under `prefix`.
fn parse_file(path: &Path, prefix: &Path) -> Result<Index> {
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len > INDEX_LIMIT {
        return Err(Error::corrupt(
            path,
            format!("{len} bytes, over the {INDEX_LIMIT} limit"),
        ));
    }
    let mut text = Vec::new();
    file.take(INDEX_LIMIT + 1)
        .read_to_end(&mut text)
        .map_err(|e| Error::io(path, e))?;
    if text.len() as u64 > INDEX_LIMIT {
        return Err(Error::corrupt(
            path,
            format!("over the {INDEX_LIMIT} byte limit"),
        ));
    }
    parse(&text, prefix).map_err(|e| match e {
        Problem::Corrupt(detail) => Error::corrupt(path, detail),
        Problem::Unsupported(detail) => Error::unsupported(path, detail),
    })
}

/// What is wrong with an index, before the path is known.
#[derive(Debug)]
pub(crate) enum Problem {
    Corrupt(String),
    Unsupported(String),
}

/// Parses and checks the text of an `index.json`.
pub(crate) fn parse(text: &[u8], prefix: &Path) -> Result<Index, Problem> {
    let raw: RawIndex = serde_json::from_slice(text)
        .map_err(|e| Problem::Corrupt(format!("not an MDS index: {e}")))?;
    if raw.version != 2 {
        return Err(Problem::Unsupported(format!(
            "index version {}, not 2",
            raw.version
        )));
    }
    let mut index = Index::default();
    for (i, value) in raw.shards.into_iter().enumerate() {
        let format = value.get("format").and_then(serde_json::Value::as_str);
        if format != Some("mds") {
            let format = value
                .get("format")
                .map_or_else(|| "none".to_owned(), |f| f.to_string());
            return Err(Problem::Unsupported(format!(
                "shard {i} has format {format}, not \"mds\""
            )));
        }
        let shard: RawShard = serde_json::from_value(value)
            .map_err(|e| Problem::Corrupt(format!("shard {i}: {e}")))?;
        let (columns, spec) = check_shard(i, shard, prefix)?;
        if i == 0 {
            index.columns = columns;
        } else if !same_columns(&index.columns, &columns) {
            let d = format!("shard {i}'s columns differ from shard 0's (one schema is needed)");
            return Err(Problem::Unsupported(d));
        }
        index.samples = index
            .samples
            .checked_add(spec.samples)
            .ok_or_else(|| Problem::Corrupt("the sample counts add up past 2^64".into()))?;
        index.shards.push(spec);
    }
    Ok(index)
}

fn check_shard(
    i: usize,
    s: RawShard,
    prefix: &Path,
) -> Result<(Vec<ColumnSpec>, ShardSpec), Problem> {
    let bad = |detail: String| Problem::Corrupt(format!("shard {i}: {detail}"));
    if s.version != 2 {
        return Err(Problem::Unsupported(format!(
            "shard {i}: version {}, not 2",
            s.version
        )));
    }
    let n = s.column_names.len();
    if s.column_encodings.len() != n || s.column_sizes.len() != n {
        return Err(bad(format!(
            "{n} column names, {} encodings, {} sizes",
            s.column_encodings.len(),
            s.column_sizes.len()
        )));
    }
    if n == 0 {
        return Err(Problem::Unsupported(format!("shard {i}: no columns")));
    }
    let mut seen = HashSet::new();
    let mut columns = Vec::with_capacity(n);
    for ((name, text), size) in s
        .column_names
        .into_iter()
        .zip(s.column_encodings)
        .zip(s.column_sizes)
    {
        if !seen.insert(name.clone()) {
            return Err(bad(format!("column {name:?} twice")));
        }
        let encoding = Encoding::parse(&text).map_err(|e| match e {
            EncodingError::Unsupported(d) => {
                Problem::Unsupported(format!("shard {i}, column {name:?}: {d}"))
            }
            EncodingError::Invalid(d) => bad(format!("column {name:?}: {d}")),
        })?;
        let fixed = encoding.fixed_size();
        if size.map(usize::try_from).transpose().ok() != Some(fixed) {
            let size = size.map_or_else(|| "null".to_owned(), |s| s.to_string());
            let fixed = fixed.map_or_else(|| "null".to_owned(), |s| s.to_string());
            return Err(bad(format!(
                "column {name:?} ({text}) has size {size}, not {fixed}"
            )));
        }
        columns.push(ColumnSpec {
            name,
            text,
            encoding,
            size: fixed,
        });
    }
    let raw = file_spec(&s.raw_data, prefix).map_err(|d| bad(format!("raw_data: {d}")))?;
    if raw.bytes > SHARD_LIMIT {
        return Err(bad(format!(
            "raw_data of {} bytes, past u32 offsets",
            raw.bytes
        )));
    }
    // A shard holds its sample count and `samples + 1` u32 offsets.
    let capacity = raw.bytes.checked_sub(8).map(|b| b / 4);
    if capacity.is_none_or(|c| s.samples > c) {
        return Err(bad(format!(
            "{} samples cannot fit in {} bytes",
            s.samples, raw.bytes
        )));
    }
    let zip = match (s.compression.as_deref(), &s.zip_data) {
        (None, None) => None,
        (Some(c), Some(zip)) => {
            let algo = Compression::parse(c)
                .ok_or_else(|| Problem::Unsupported(format!("shard {i}: compression {c:?}")))?;
            Some((
                file_spec(zip, prefix).map_err(|d| bad(format!("zip_data: {d}")))?,
                algo,
            ))
        }
        (None, Some(_)) => return Err(bad("zip_data without compression".into())),
        (Some(c), None) => return Err(bad(format!("compression {c:?} without zip_data"))),
    };
    Ok((
        columns,
        ShardSpec {
            raw,
            zip,
            samples: s.samples,
        },
    ))
}

/// A shard file's path under the dataset directory: relative, with no `..`.
fn file_spec(file: &RawFile, prefix: &Path) -> Result<FileSpec, String> {
    let rel = Path::new(&file.basename);
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    if file.basename.is_empty() || !plain {
        return Err(format!(
            "basename {:?} is not a relative path inside the dataset",
            file.basename
        ));
    }
    Ok(FileSpec {
        path: prefix.join(rel),
        bytes: file.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(extra: &str) -> String {
        let base = r#""format": "mds", "version": 2, "column_names": ["a", "b"],
            "column_encodings": ["int", "str"], "column_sizes": [8, null], "compression": null,
            "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 100, "hashes": {}},
            "zip_data": null, "samples": 3, "size_limit": 67108864"#;
        format!("{{{base}{extra}}}")
    }

    fn index(shards: &[String]) -> Vec<u8> {
        format!(r#"{{"version": 2, "shards": [{}]}}"#, shards.join(",")).into_bytes()
    }

    fn patched(from: &str, to: &str) -> Vec<u8> {
        index(&[shard("").replace(from, to)])
    }

    #[test]
    fn parses_a_writer_index() {
        let ix = parse(&index(&[shard(""), shard("")]), Path::new("p")).unwrap();
        assert_eq!(ix.samples, 6);
        assert_eq!(ix.columns.len(), 2);
        assert_eq!(ix.columns[0].size, Some(8));
        assert_eq!(ix.shards[1].raw.path, Path::new("p/shard.00000.mds"));
    }

    #[test]
    fn refuses_lies() {
        let corrupt =
            |text: Vec<u8>| matches!(parse(&text, Path::new("")), Err(Problem::Corrupt(_)));
        assert!(corrupt(b"{".to_vec()));
        assert!(corrupt(patched(
            "\"samples\": 3",
            "\"samples\": 1152921504606846976"
        )));
        assert!(corrupt(patched("\"samples\": 3", "\"samples\": 24")));
        assert!(corrupt(patched("[8, null]", "[null, null]")));
        assert!(corrupt(patched("[8, null]", "[8]")));
        assert!(corrupt(patched("\"bytes\": 100", "\"bytes\": 4294967296")));
        assert!(corrupt(patched("shard.00000.mds", "../x.mds")));
        assert!(corrupt(patched("shard.00000.mds", "/etc/passwd")));
        assert!(corrupt(patched("\"b\"]", "\"a\"]")));
        assert!(corrupt(patched(
            "\"compression\": null",
            "\"compression\": \"zstd\""
        )));
    }

    #[test]
    fn refuses_the_unknown() {
        let unsupported =
            |text: Vec<u8>| matches!(parse(&text, Path::new("")), Err(Problem::Unsupported(_)));
        assert!(unsupported(patched("\"str\"]", "\"foo\"]")));
        assert!(unsupported(patched(
            "\"format\": \"mds\"",
            "\"format\": \"json\""
        )));
        assert!(unsupported(patched("\"version\": 2", "\"version\": 3")));
        assert!(unsupported(br#"{"version": 1, "shards": []}"#.to_vec()));
        let zip =
            r#""compression": "lz4", "zip_data": {"basename": "a.lz4", "bytes": 1, "hashes": {}}"#;
        let text = shard("").replace("\"compression\": null", "\"compression\": \"lz4\"");
        let text = text.replace(
            "\"zip_data\": null",
            &zip[zip.find("\"zip_data\"").unwrap()..],
        );
        assert!(unsupported(index(&[text])));
    }

    #[test]
    fn compressions() {
        assert_eq!(Compression::parse("zstd:7"), Some(Compression::Zstd));
        assert_eq!(Compression::parse("br"), Some(Compression::Brotli));
        assert_eq!(Compression::parse("lz4"), None);
    }
}
