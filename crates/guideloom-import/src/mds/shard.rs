//! One shard file: read (or decompressed) in full within its declared size, its header and
//! offsets table checked, its samples split into column values.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::index::{ColumnSpec, Compression, ShardSpec};
use crate::{Error, Result};

/// A shard's bytes, with its header checked.
#[derive(Clone)]
pub(crate) struct Shard {
    /// The file the bytes came from (the compressed one if decompressed), for errors.
    pub(crate) path: PathBuf,
    data: Vec<u8>,
    samples: usize,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("path", &self.path)
            .field("bytes", &self.data.len())
            .field("samples", &self.samples)
            .finish()
    }
}

fn u32_at(data: &[u8], at: usize) -> Option<usize> {
    let bytes: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(bytes)).ok()
}

impl Shard {
    /// Reads the shard `spec` of the dataset at `dir` (the raw file if present, else the
    /// decompressed zip file) and checks its header against the index.
    pub(crate) fn load(dir: &Path, spec: &ShardSpec, columns: &[ColumnSpec]) -> Result<Shard> {
        let raw_path = dir.join(&spec.raw.path);
        let (path, data) = match (fs::File::open(&raw_path), &spec.zip) {
            (Ok(file), _) => (
                raw_path.clone(),
                read_exact_size(&raw_path, file, spec.raw.bytes)?,
            ),
            (Err(e), Some((zip, algo))) if e.kind() == io::ErrorKind::NotFound => {
                let zip_path = dir.join(&zip.path);
                let file = fs::File::open(&zip_path).map_err(|e| Error::io(&zip_path, e))?;
                let data = decompress(&zip_path, file, zip.bytes, *algo, spec.raw.bytes)?;
                (zip_path, data)
            }
            (Err(e), _) => return Err(Error::io(raw_path, e)),
        };
        let shard = Shard {
            path,
            data,
            samples: 0,
        };
        shard.check(spec.samples, columns)
    }

    /// Checks the header: the sample count, then the offsets (from the end of the header,
    /// never decreasing, the last at the end of the file), then the writer's config if any.
    fn check(mut self, samples: u64, columns: &[ColumnSpec]) -> Result<Shard> {
        let bad = |detail: String| Error::corrupt(&self.path, detail);
        let count = u32_at(&self.data, 0).ok_or_else(|| bad("no sample count".into()))?;
        if u64::try_from(count).ok() != Some(samples) {
            return Err(bad(format!("{count} samples, index.json says {samples}")));
        }
        let header_end = count
            .checked_add(2)
            .and_then(|n| n.checked_mul(4))
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| bad(format!("the offsets of {count} samples run past the end")))?;
        let mut previous = header_end;
        for i in 0..=count {
            let offset = u32_at(&self.data, 4 + 4 * i).unwrap_or(usize::MAX);
            if offset < previous || offset > self.data.len() {
                let what = if i == count {
                    "end".to_owned()
                } else {
                    format!("sample {i}")
                };
                return Err(bad(format!(
                    "offset of {what} is {offset}, outside {previous}..={}",
                    self.data.len()
                )));
            }
            previous = offset;
        }
        if previous != self.data.len() {
            let trailing = self.data.len() - previous;
            return Err(bad(format!("{trailing} bytes after the last sample")));
        }
        let first = u32_at(&self.data, 4).unwrap_or(header_end);
        check_config(&self.data[header_end..first], columns).map_err(bad)?;
        self.samples = count;
        Ok(self)
    }

    /// The number of samples.
    pub(crate) fn len(&self) -> usize {
        self.samples
    }

    /// The bytes of sample `i` (checked by `check`).
    pub(crate) fn sample(&self, i: usize) -> &[u8] {
        let begin = u32_at(&self.data, 4 + 4 * i).unwrap_or(0);
        let end = u32_at(&self.data, 8 + 4 * i).unwrap_or(0);
        self.data.get(begin..end).unwrap_or_default()
    }
}

/// The header's copy of the writer's config (`MDSWriter.get_config()`), where present, must
/// name the index's columns.
fn check_config(config: &[u8], columns: &[ColumnSpec]) -> Result<(), String> {
    if config.is_empty() {
        return Ok(());
    }
    let value: serde_json::Value =
        serde_json::from_slice(config).map_err(|e| format!("the header's config: {e}"))?;
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let texts: Vec<&str> = columns.iter().map(|c| c.text.as_str()).collect();
    let listed = |key: &str| -> Option<Vec<&str>> {
        value
            .get(key)?
            .as_array()?
            .iter()
            .map(serde_json::Value::as_str)
            .collect()
    };
    if value.get("column_names").is_some() && listed("column_names") != Some(names) {
        return Err("the header's column_names differ from index.json's".into());
    }
    if value.get("column_encodings").is_some() && listed("column_encodings") != Some(texts) {
        return Err("the header's column_encodings differ from index.json's".into());
    }
    Ok(())
}

/// Reads `file`, which must be exactly `bytes` long.
fn read_exact_size(path: &Path, file: fs::File, bytes: u64) -> Result<Vec<u8>> {
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len != bytes {
        return Err(Error::corrupt(
            path,
            format!("{len} bytes, index.json says {bytes}"),
        ));
    }
    let capacity = usize::try_from(bytes).map_err(|_| Error::corrupt(path, "too large"))?;
    let mut data = Vec::with_capacity(capacity);
    file.take(bytes.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|e| Error::io(path, e))?;
    if data.len() != capacity {
        return Err(Error::corrupt(
            path,
            format!("read {} bytes, expected {bytes}", data.len()),
        ));
    }
    Ok(data)
}

/// Decompresses `file` (`zip_bytes` long) into at most `raw_bytes` bytes, which it must make.
fn decompress(
    path: &Path,
    file: fs::File,
    zip_bytes: u64,
    algo: Compression,
    raw_bytes: u64,
) -> Result<Vec<u8>> {
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len != zip_bytes {
        return Err(Error::corrupt(
            path,
            format!("{len} bytes, index.json says {zip_bytes}"),
        ));
    }
    let name = algo.name();
    let bad = |e: io::Error| Error::corrupt(path, format!("cannot decompress ({name}): {e}"));
    let input = io::BufReader::new(file.take(zip_bytes));
    let limit = raw_bytes.saturating_add(1);
    let mut out = Vec::new();
    match algo {
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(input).map_err(bad)?;
            decoder.take(limit).read_to_end(&mut out).map_err(bad)?;
        }
        Compression::Gzip => {
            flate2::bufread::MultiGzDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out)
                .map_err(bad)?;
        }
        Compression::Bzip2 => {
            bzip2::bufread::MultiBzDecoder::new(input)
                .take(limit)
                .read_to_end(&mut out)
                .map_err(bad)?;
        }
        Compression::Brotli => {
            brotli::Decompressor::new(input, 1 << 16)
                .take(limit)
                .read_to_end(&mut out)
                .map_err(bad)?;
        }
        Compression::Snappy => {
            // Held whole: no larger than snappy's bound for `raw_bytes` of input.
            let bound = raw_bytes.saturating_add(raw_bytes / 6).saturating_add(32);
            if zip_bytes > bound {
                let d = format!("{zip_bytes} bytes, past snappy's bound for {raw_bytes} raw bytes");
                return Err(Error::corrupt(path, d));
            }
            let mut zipped = Vec::new();
            input
                .take(zip_bytes)
                .read_to_end(&mut zipped)
                .map_err(|e| Error::io(path, e))?;
            let n = snap::raw::decompress_len(&zipped).map_err(|e| bad(io::Error::other(e)))?;
            if u64::try_from(n).ok() != Some(raw_bytes) {
                let d = format!("snappy data of {n} bytes, index.json says {raw_bytes}");
                return Err(Error::corrupt(path, d));
            }
            out = snap::raw::Decoder::new()
                .decompress_vec(&zipped)
                .map_err(|e| bad(io::Error::other(e)))?;
        }
    }
    if u64::try_from(out.len()).ok() != Some(raw_bytes) {
        let more = if out.len() as u64 > raw_bytes {
            "more than"
        } else {
            "only"
        };
        let d = format!(
            "decompresses to {more} {} bytes, index.json says {raw_bytes}",
            out.len()
        );
        return Err(Error::corrupt(path, d));
    }
    Ok(out)
}

/// Splits a sample into its columns' values: a u32 size per variable-size column, then the
/// values in column order, nothing after. `values` is cleared and refilled.
pub(crate) fn split_sample<'a>(
    sample: &'a [u8],
    columns: &[ColumnSpec],
    sizes: &mut Vec<usize>,
    values: &mut Vec<&'a [u8]>,
) -> Result<(), String> {
    sizes.clear();
    values.clear();
    let mut at = 0;
    for column in columns {
        let size = match column.size {
            Some(size) => size,
            None => {
                let size = u32_at(sample, at).ok_or_else(|| {
                    format!(
                        "sample of {} bytes has no size for column {:?}",
                        sample.len(),
                        column.name
                    )
                })?;
                at += 4;
                size
            }
        };
        sizes.push(size);
    }
    for (column, &size) in columns.iter().zip(sizes.iter()) {
        let end = at
            .checked_add(size)
            .filter(|&end| end <= sample.len())
            .ok_or_else(|| {
                format!(
                    "column {:?}: {size} bytes at {at} run past the sample's {} bytes",
                    column.name,
                    sample.len()
                )
            })?;
        values.push(&sample[at..end]);
        at = end;
    }
    if at != sample.len() {
        return Err(format!("{} bytes after the last column", sample.len() - at));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::encoding::Encoding;
    use super::*;

    fn columns() -> Vec<ColumnSpec> {
        ["int", "str", "bytes"]
            .iter()
            .map(|t| {
                let encoding = Encoding::parse(t).unwrap();
                let size = encoding.fixed_size();
                ColumnSpec {
                    name: (*t).to_owned(),
                    text: (*t).to_owned(),
                    encoding,
                    size,
                }
            })
            .collect()
    }

    #[test]
    fn samples_split_exactly() {
        let cols = columns();
        let mut sample: Vec<u8> = vec![2, 0, 0, 0, 1, 0, 0, 0];
        sample.extend(7i64.to_le_bytes());
        sample.extend(b"hiX");
        let (mut sizes, mut values) = (Vec::new(), Vec::new());
        split_sample(&sample, &cols, &mut sizes, &mut values).unwrap();
        assert_eq!(values, vec![&7i64.to_le_bytes()[..], b"hi", b"X"]);
        let short = &sample[..sample.len() - 1];
        assert!(split_sample(short, &cols, &mut sizes, &mut Vec::new()).is_err());
        let mut long = sample.clone();
        long.push(0);
        assert!(split_sample(&long, &cols, &mut sizes, &mut Vec::new()).is_err());
        assert!(split_sample(&[0xff; 7], &cols, &mut sizes, &mut Vec::new()).is_err());
    }

    fn shard(data: Vec<u8>) -> Shard {
        Shard {
            path: PathBuf::from("s.mds"),
            data,
            samples: 0,
        }
    }

    #[test]
    fn headers_are_checked() {
        let cols = columns();
        // 1 sample of 2 bytes, no config: [1][12][14][aa bb].
        let good = vec![1, 0, 0, 0, 12, 0, 0, 0, 14, 0, 0, 0, 0xaa, 0xbb];
        let s = shard(good.clone()).check(1, &cols).unwrap();
        assert_eq!(s.sample(0), &[0xaa, 0xbb]);
        assert!(shard(good.clone()).check(2, &cols).is_err());
        let mut huge = good.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(shard(huge).check(u64::from(u32::MAX), &cols).is_err());
        let mut past = good.clone();
        past[8] = 15;
        assert!(shard(past).check(1, &cols).is_err());
        let mut backwards = good.clone();
        backwards[4] = 13;
        backwards[8] = 12;
        assert!(shard(backwards).check(1, &cols).is_err());
        assert!(shard(good[..13].to_vec()).check(1, &cols).is_err());
        assert!(shard(vec![0, 0]).check(0, &cols).is_err());
    }

    #[test]
    fn configs_are_compared() {
        let cols = columns();
        let good = br#"{"column_names": ["int", "str", "bytes"], "column_encodings": ["int", "str", "bytes"]}"#;
        assert!(check_config(good, &cols).is_ok());
        let bad = br#"{"column_names": ["int", "bytes", "str"]}"#;
        assert!(check_config(bad, &cols).is_err());
        assert!(check_config(b"{", &cols).is_err());
    }
}
