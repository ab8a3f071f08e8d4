//! Simple chunks (`'r'`): a compression byte, the compressed record sizes (length-prefixed)
//! and the compressed concatenated values.

use bytes::Bytes;

use crate::chunk::Chunk;
use crate::codec::{self, CompressionType, Source};
use crate::error::{Error, Result};
use crate::options::Compression;
use crate::varint;

/// Decodes the records of a simple chunk. `limit` bounds the decoded values before any
/// allocation; records are zero-copy slices of the decoded values.
pub(crate) fn decode(location: &str, chunk: &Chunk, limit: u64) -> Result<Vec<Bytes>> {
    let offset = chunk.begin;
    let corrupt = |what: &str| Error::corrupt(location, offset, format!("simple chunk: {what}"));
    let header = &chunk.header;
    let data = &chunk.data;
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
    let sizes = codec::decompress(
        &Source {
            location,
            offset,
            what: "record sizes",
            limit: sizes_limit,
        },
        ctype,
        data.slice(sizes_start..sizes_end),
        None,
    )?;
    if header.num_records > sizes.len() as u64 {
        return Err(corrupt("fewer size bytes than records"));
    }
    let values = codec::decompress(
        &Source {
            location,
            offset,
            what: "record values",
            limit,
        },
        ctype,
        data.slice(sizes_end..),
        Some(header.decoded_data_size),
    )?;
    let mut records = Vec::with_capacity(usize::try_from(header.num_records).unwrap_or(0));
    let mut at = 0usize;
    let mut pos: u64 = 0;
    for _ in 0..header.num_records {
        let (size, n) = varint::get(&sizes[at..]).ok_or_else(|| corrupt("bad record size"))?;
        at += n;
        let end = pos
            .checked_add(size)
            .filter(|&e| e <= values.len() as u64)
            .ok_or_else(|| corrupt("record sizes exceed the decoded data size"))?;
        records.push(values.slice(
            usize::try_from(pos).unwrap_or(usize::MAX)..usize::try_from(end).unwrap_or(usize::MAX),
        ));
        pos = end;
    }
    if at != sizes.len() {
        return Err(corrupt("bytes left after the record sizes"));
    }
    if pos != values.len() as u64 {
        return Err(corrupt(
            "record sizes add up to less than the decoded data size",
        ));
    }
    Ok(records)
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

    fn chunk(data: Vec<u8>, num_records: u64, decoded: u64) -> Chunk {
        let header = ChunkHeader::new(&data, SIMPLE, num_records, decoded);
        Chunk {
            header,
            data: Bytes::from(data),
            begin: 64,
        }
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
            let got = decode("m", &chunk(data, n, decoded), 1 << 20).unwrap();
            prop_assert_eq!(got.len(), records.len());
            for (g, r) in got.iter().zip(&records) {
                prop_assert_eq!(&g[..], &r[..]);
            }
        }
    }
}
