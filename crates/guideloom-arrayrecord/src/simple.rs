//! Simple chunks (`'r'`): a compression byte, the compressed record sizes (length-prefixed)
//! and the compressed concatenated values.

use std::ops::Range;

use bytes::Bytes;

use crate::chunk::Chunk;
use crate::codec::{self, CompressionType, Decoded, Source};
use crate::error::{Error, Result};
use crate::options::Compression;
use crate::varint;

/// Decoding more than the records asked for is worth it (one call into the codec instead of
/// a stream) while the rest is at most this many bytes: a single record of a chunk of many
/// is streamed, the decoder's output not kept beyond the record.
const DECODE_WHOLE_SLACK: u64 = 1 << 20;

/// Compressed record sizes up to this many decoded bytes are decoded at once (a chunk of up
/// to ~32 000 records); more are streamed.
const SIZES_AT_ONCE: u64 = 64 << 10;

/// Every record of a simple chunk. `limit` bounds the decoded values before any
/// allocation; records are zero-copy slices of the decoded values (or of the chunk's bytes,
/// uncompressed).
pub(crate) fn decode(location: &str, chunk: &Chunk<'_>, limit: u64) -> Result<Vec<Bytes>> {
    let n = usize::try_from(chunk.header.num_records).unwrap_or(usize::MAX);
    decode_range(location, chunk, limit, 0..n)
}

/// Records `range` of a simple chunk, checked as [`walk`] checks them.
pub(crate) fn decode_range(
    location: &str,
    chunk: &Chunk<'_>,
    limit: u64,
    range: Range<usize>,
) -> Result<Vec<Bytes>> {
    let count = range.len();
    let mut records = Vec::new();
    walk(location, chunk, limit, range, |r| {
        // Reserved once the sizes have proved the records exist.
        if records.capacity() == 0 {
            records.reserve_exact(count);
        }
        records.push(r);
        Ok(())
    })?;
    Ok(records)
}

/// Record `within` of a simple chunk, checked as [`walk`] checks it, without a `Vec`.
pub(crate) fn decode_one(
    location: &str,
    chunk: &Chunk<'_>,
    limit: u64,
    within: usize,
) -> Result<Bytes> {
    let mut found = None;
    walk(
        location,
        chunk,
        limit,
        within..within.saturating_add(1),
        |r| {
            found = Some(r);
            Ok(())
        },
    )?;
    found.ok_or_else(|| Error::corrupt(location, chunk.begin, "simple chunk: record missing"))
}

/// The parts of a simple chunk's data: compression and the ranges (in the chunk's bytes) of
/// the sizes and the values.
struct Parts {
    ctype: CompressionType,
    sizes: Range<usize>,
    values: Range<usize>,
}

#[inline]
fn parts(location: &str, chunk: &Chunk<'_>) -> Result<Parts> {
    let corrupt =
        |what: &str| Error::corrupt(location, chunk.begin, format!("simple chunk: {what}"));
    let (whole, at) = chunk.data();
    let data = &whole[at.clone()];
    let (&ctype_byte, rest) = data.split_first().ok_or_else(|| corrupt("no data"))?;
    let ctype = CompressionType::from_byte(ctype_byte)
        .ok_or_else(|| corrupt(&format!("unknown compression type {ctype_byte:#04x}")))?;
    let (sizes_len, used) = varint::get(rest).ok_or_else(|| corrupt("bad sizes length"))?;
    let sizes_start = 1 + used;
    let sizes_end = u64::try_from(sizes_start)
        .ok()
        .and_then(|s| s.checked_add(sizes_len))
        .filter(|&e| e <= data.len() as u64)
        .ok_or_else(|| corrupt("sizes run past the chunk data"))?;
    // At most `data.len()`, so it fits in `usize`.
    let sizes_end = usize::try_from(sizes_end).unwrap_or(usize::MAX);
    Ok(Parts {
        ctype,
        sizes: at.start + sizes_start..at.start + sizes_end,
        values: at.start + sizes_end..at.end,
    })
}

/// Calls `each` with records `range` of a simple chunk, in order.
///
/// Every size is read and checked first, in full, without keeping them: `num_records`
/// sizes, no byte left after them, adding up to exactly the decoded data size (which the
/// values' prefix states). Only then are the values decoded, up to the end of `range`:
/// at once when little else is in the buffer, else streamed past the records before
/// `range`, so memory holds the records asked for, not the buffer; the values after
/// `range` are not decoded (the data hash covers them; the whole-chunk decode checks that
/// the codec ends exactly there). Nothing is allocated from a count or size the chunk states
/// before the bytes that back it have been decoded: `each` is first called once the sizes
/// have proved that `range` exists.
pub(crate) fn walk(
    location: &str,
    chunk: &Chunk<'_>,
    limit: u64,
    range: Range<usize>,
    mut each: impl FnMut(Bytes) -> Result<()>,
) -> Result<()> {
    let offset = chunk.begin;
    let corrupt = |what: &str| Error::corrupt(location, offset, format!("simple chunk: {what}"));
    let header = &chunk.header;
    let n = header.num_records;
    if range.end as u64 > n {
        return Err(corrupt(&format!(
            "record {} asked of a chunk of {n}",
            range.end - 1
        )));
    }
    let parts = parts(location, chunk)?;
    let (whole, _) = chunk.data();
    // Each size is a varint of at most 10 bytes and at least 1.
    let sizes_src = Source {
        location,
        offset,
        what: "record sizes",
        limit: n.saturating_mul(10).min(limit),
    };
    let open_sizes = || {
        Decoded::open(
            &sizes_src,
            parts.ctype,
            whole,
            parts.sizes.clone(),
            None,
            |stated| stated <= SIZES_AT_ONCE,
        )
    };
    let mut sizes = open_sizes()?;
    if sizes.stated() < n {
        return Err(corrupt(&format!(
            "{} bytes of record sizes cannot hold {n} records",
            sizes.stated()
        )));
    }
    // Pass 1: every size; where `range` begins and ends in the values.
    let (mut first, mut first_size_at, mut last) = (0u64, 0u64, 0u64);
    let mut pos: u64 = 0;
    for k in 0..n {
        if k == range.start as u64 {
            first = pos;
            first_size_at = sizes.position();
        }
        let size = sizes
            .varint(&sizes_src)?
            .ok_or_else(|| corrupt("fewer record sizes than records"))?;
        pos = pos
            .checked_add(size)
            .filter(|&e| e <= header.decoded_data_size)
            .ok_or_else(|| corrupt("record sizes exceed the decoded data size"))?;
        if k + 1 == range.end as u64 {
            last = pos;
        }
    }
    sizes
        .finish(&sizes_src)
        .map_err(|_| corrupt("bytes left after the record sizes"))?;
    if pos != header.decoded_data_size {
        return Err(corrupt(
            "record sizes add up to less than the decoded data size",
        ));
    }
    if range.is_empty() {
        return Ok(());
    }
    let values_src = Source {
        location,
        offset,
        what: "record values",
        limit,
    };
    let wanted = last - first;
    let mut values = Decoded::open(
        &values_src,
        parts.ctype,
        whole,
        parts.values.clone(),
        Some(header.decoded_data_size),
        |stated| stated - wanted <= DECODE_WHOLE_SLACK,
    )?;
    // Pass 2: the sizes of `range`, from where pass 1 found the first. A chunk of one
    // record (group size 1, the common case) has nothing to skip: its record is the values.
    if n == 1 {
        each(values.take(&values_src, header.decoded_data_size)?)?;
        return values.finish(&values_src);
    }
    if !sizes.rewind() {
        sizes = open_sizes()?;
    }
    sizes.skip(&sizes_src, first_size_at)?;
    values.skip(&values_src, first)?;
    for _ in range.clone() {
        let size = sizes
            .varint(&sizes_src)?
            .ok_or_else(|| corrupt("fewer record sizes than records"))?;
        each(values.take(&values_src, size)?)?;
    }
    if range.end as u64 == n {
        values.finish(&values_src)?;
    }
    Ok(())
}

/// Records gathered for one simple chunk.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    sizes: Vec<u8>,
    values: Vec<u8>,
    num_records: u64,
}

impl Encoder {
    pub(crate) fn add(&mut self, record: &[u8]) {
        varint::put(&mut self.sizes, record.len() as u64);
        self.values.extend_from_slice(record);
        self.num_records += 1;
    }

    pub(crate) fn num_records(&self) -> u64 {
        self.num_records
    }

    /// The chunk data and `(num_records, decoded_data_size)`; the encoder is left empty.
    pub(crate) fn finish(
        &mut self,
        compression: &Compression,
    ) -> std::io::Result<(Vec<u8>, u64, u64)> {
        let mut sizes = Vec::with_capacity(self.sizes.len() + 10);
        codec::compress(compression, &self.sizes, &mut sizes)?;
        let mut data = Vec::with_capacity(self.values.len() / 2 + sizes.len() + 16);
        data.push(compression.ctype().byte());
        varint::put(&mut data, sizes.len() as u64);
        data.extend_from_slice(&sizes);
        codec::compress(compression, &self.values, &mut data)?;
        let counts = (self.num_records, self.values.len() as u64);
        self.sizes.clear();
        self.values.clear();
        self.num_records = 0;
        Ok((data, counts.0, counts.1))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::chunk::{ChunkHeader, SIMPLE};

    fn chunk(data: Vec<u8>, num_records: u64, decoded: u64) -> Chunk<'static> {
        let header = ChunkHeader::new(&data, SIMPLE, num_records, decoded);
        Chunk::new(header, Bytes::from(data), 64)
    }

    #[test]
    fn decodes_a_python_written_chunk() {
        // `uncompressed`, one record `rec0rec0rec0`, as the array_record package wrote it.
        let mut data = vec![0, 1, 12];
        data.extend_from_slice(b"rec0rec0rec0");
        let records = decode("m", &chunk(data, 1, 12), 1 << 20).unwrap();
        assert_eq!(records, [Bytes::from_static(b"rec0rec0rec0")]);
    }

    #[test]
    fn inconsistent_sizes_are_refused() {
        for (data, n, decoded) in [
            (vec![0, 1, 5, b'a', b'b'], 1, 2),
            (vec![0, 2, 1, 1, b'a'], 2, 1),
            (vec![0, 1, 1, b'a', b'b'], 1, 2),
            (vec![0, 9], 0, 0),
            (vec![b'q', 0], 0, 0),
            (vec![], 0, 0),
            (vec![0, 3, 1, 1, 1, b'a', b'b', b'c'], 2, 3),
        ] {
            let err = decode("m", &chunk(data.clone(), n, decoded), 1 << 20).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{data:?}: {err}");
            // One record is refused as the whole chunk is, even when its own bytes are there.
            let err = decode_one("m", &chunk(data.clone(), n, decoded), 1 << 20, 0).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{data:?}: {err}");
        }
        let mut e = Encoder::default();
        e.add(b"abc");
        let (data, n, decoded) = e.finish(&Compression::Uncompressed).unwrap();
        let err = decode("m", &chunk(data, n, decoded), 2).unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    }

    proptest! {
        #[test]
        fn round_trips(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
            which in 0usize..4,
        ) {
            let compression = [
                Compression::Uncompressed,
                Compression::Snappy,
                Compression::Zstd { level: 1, window_log: 20 },
                Compression::Brotli { level: 1, window_log: 22 },
            ][which];
            let mut e = Encoder::default();
            for r in &records {
                e.add(r);
            }
            let (data, n, decoded) = e.finish(&compression).unwrap();
            let c = chunk(data, n, decoded);
            let got = decode("m", &c, 1 << 20).unwrap();
            prop_assert_eq!(got.len(), records.len());
            for (w, (g, r)) in got.iter().zip(&records).enumerate() {
                prop_assert_eq!(&g[..], &r[..]);
                prop_assert_eq!(&decode_one("m", &c, 1 << 20, w).unwrap()[..], &r[..]);
            }
            let past = decode_one("m", &c, 1 << 20, records.len()).unwrap_err();
            prop_assert!(matches!(past, Error::Corrupt { .. }), "{}", past);
        }
    }
}
