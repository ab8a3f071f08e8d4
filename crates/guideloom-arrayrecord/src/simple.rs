//! Simple chunks (`'r'`): a compression byte, the compressed record sizes (length-prefixed)
//! and the compressed concatenated values.

use std::ops::Range;

use bytes::Bytes;

use crate::chunk::Chunk;
use crate::codec::{self, CompressionType, Source};
use crate::error::{Error, Result};
use crate::options::Compression;
use crate::varint;

/// Decodes the records of a simple chunk. `limit` bounds the decoded values before any
/// allocation; records are zero-copy slices of the decoded values.
pub(crate) fn decode(location: &str, chunk: &Chunk<'_>, limit: u64) -> Result<Vec<Bytes>> {
    let mut records = Vec::with_capacity(usize::try_from(chunk.header.num_records).unwrap_or(0));
    walk(location, chunk, limit, |values, r| {
        records.push(values.slice(r))
    })?;
    Ok(records)
}

/// Record `within` of a simple chunk, checked as [`decode`] checks the whole chunk (every
/// record size, and that they add up to the decoded size) but without a `Vec` of its records.
pub(crate) fn decode_one(
    location: &str,
    chunk: &Chunk<'_>,
    limit: u64,
    within: usize,
) -> Result<Bytes> {
    let mut k = 0usize;
    let mut found = None;
    walk(location, chunk, limit, |values, r| {
        if k == within {
            found = Some(values.slice(r));
        }
        k += 1;
    })?;
    found.ok_or_else(|| {
        Error::corrupt(
            location,
            chunk.begin,
            format!("simple chunk: record {within} missing from a chunk of {k}"),
        )
    })
}

/// Decodes a simple chunk's values and calls `each` with them and the byte range of every
/// record, in order; fails (after some calls, maybe) unless the sizes describe the values
/// exactly.
fn walk(
    location: &str,
    chunk: &Chunk<'_>,
    limit: u64,
    mut each: impl FnMut(&Bytes, Range<usize>),
) -> Result<()> {
    let offset = chunk.begin;
    let corrupt = |what: &str| Error::corrupt(location, offset, format!("simple chunk: {what}"));
    let header = &chunk.header;
    // The chunk's data is `whole[at]`; offsets below are into `data`.
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
    let sizes_end = usize::try_from(sizes_end).unwrap_or(usize::MAX);
    // Each size is a varint of at most 10 bytes, so the decoded sizes are bounded by the
    // record count, itself bounded below by the sizes' length (at least a byte per record).
    let sizes_limit = header.num_records.saturating_mul(10).min(limit);
    // Uncompressed, the sizes and values are read in place: no slice of the chunk's bytes
    // is taken but the records themselves.
    let plain = ctype == CompressionType::None;
    let sizes_src = Source {
        location,
        offset,
        what: "record sizes",
        limit: sizes_limit,
    };
    let decompressed_sizes;
    let sizes: &[u8] = if plain {
        codec::check_size(&sizes_src, (sizes_end - sizes_start) as u64, None)?;
        &data[sizes_start..sizes_end]
    } else {
        let input = whole.slice(at.start + sizes_start..at.start + sizes_end);
        decompressed_sizes = codec::decompress(&sizes_src, ctype, input, None)?;
        &decompressed_sizes
    };
    if header.num_records > sizes.len() as u64 {
        return Err(corrupt("fewer size bytes than records"));
    }
    let values_src = Source {
        location,
        offset,
        what: "record values",
        limit,
    };
    let expected = Some(header.decoded_data_size);
    let decompressed_values;
    // The values are `values[base..base + values_len]`.
    let (values, base): (&Bytes, usize) = if plain {
        (whole, at.start + sizes_end)
    } else {
        let input = whole.slice(at.start + sizes_end..at.end);
        decompressed_values = codec::decompress(&values_src, ctype, input, expected)?;
        (&decompressed_values, 0)
    };
    let values_len = if plain {
        let len = (data.len() - sizes_end) as u64;
        codec::check_size(&values_src, len, expected)?;
        len
    } else {
        values.len() as u64
    };
    let mut at = 0usize;
    let mut pos: u64 = 0;
    for _ in 0..header.num_records {
        let (size, n) = varint::get(&sizes[at..]).ok_or_else(|| corrupt("bad record size"))?;
        at += n;
        let end = pos
            .checked_add(size)
            .filter(|&e| e <= values_len)
            .ok_or_else(|| corrupt("record sizes exceed the decoded data size"))?;
        // Both are at most `values_len`, so they fit in `usize`.
        each(
            values,
            base + usize::try_from(pos).unwrap_or(usize::MAX)
                ..base + usize::try_from(end).unwrap_or(usize::MAX),
        );
        pos = end;
    }
    if at != sizes.len() {
        return Err(corrupt("bytes left after the record sizes"));
    }
    if pos != values_len {
        return Err(corrupt(
            "record sizes add up to less than the decoded data size",
        ));
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
