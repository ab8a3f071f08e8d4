//! Property tests: whatever the records and options, the writer's file reads back exactly;
//! whatever is done to a file's bytes, the reader returns the original records or a typed
//! error, never a wrong record and never a panic.

use bytes::Bytes;
use guideloom_arrayrecord::{
    ArrayRecordReadOptions, ArrayRecordReader, ArrayRecordWriter, ArrayRecordWriterOptions,
    Compression, Error,
};
use guideloom_io::check_range;
use guideloom_io::{Result as IoResult, SyncReader};
use proptest::prelude::*;

/// A file in memory.
#[derive(Debug)]
struct Mem(Bytes);

impl SyncReader for Mem {
    fn location(&self) -> &str {
        "mem"
    }
    fn size(&self) -> IoResult<u64> {
        Ok(self.0.len() as u64)
    }
    fn read(&self, offset: u64, len: u64) -> IoResult<Bytes> {
        check_range("mem", offset, len, self.0.len() as u64)?;
        let start = usize::try_from(offset).unwrap();
        Ok(self.0.slice(start..start + usize::try_from(len).unwrap()))
    }
    fn close(&self) -> IoResult<()> {
        Ok(())
    }
}

fn options() -> impl Strategy<Value = ArrayRecordWriterOptions> {
    let compression = prop_oneof![
        Just(Compression::Uncompressed),
        Just(Compression::Snappy),
        (-3i32..4, 10u32..24)
            .prop_map(|(level, window_log)| Compression::Zstd { level, window_log }),
        (0u32..5, 10u32..26)
            .prop_map(|(level, window_log)| Compression::Brotli { level, window_log }),
    ];
    (compression, 1u32..40, any::<bool>()).prop_map(|(c, g, pad)| {
        ArrayRecordWriterOptions::default()
            .with_compression(c)
            .with_group_size(g)
            .with_pad_to_block_boundary(pad)
    })
}

fn records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let small = proptest::collection::vec(any::<u8>(), 0..300);
    let big = (0usize..140_000, any::<u8>()).prop_map(|(n, b)| vec![b; n]);
    proptest::collection::vec(prop_oneof![8 => small, 1 => big], 0..120)
}

fn write(records: &[Vec<u8>], options: ArrayRecordWriterOptions) -> Vec<u8> {
    let mut w = ArrayRecordWriter::new(Vec::new(), options);
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap()
}

/// Read options with the cache on (the default) or off (every read decodes only what it
/// needs: a different path).
fn read_options(tail: u64, cache: bool) -> ArrayRecordReadOptions {
    let o = ArrayRecordReadOptions::default().with_tail_len(tail);
    if cache { o } else { o.with_cache_chunks(0) }
}

/// Every record, one by one, or the first error.
fn read(file: Bytes, tail: u64) -> Result<Vec<Bytes>, Error> {
    read_with(file, tail, true)
}

/// Every record, one by one and then in one batch, or the first error.
fn read_with(file: Bytes, tail: u64, cache: bool) -> Result<Vec<Bytes>, Error> {
    let ar = ArrayRecordReader::open(Mem(file), &read_options(tail, cache))?;
    let one_by_one = (0..ar.len())
        .map(|i| ar.get(i))
        .collect::<Result<Vec<_>, _>>()?;
    let all: Vec<u64> = (0..ar.len()).collect();
    assert_eq!(ar.get_many(&all)?, one_by_one);
    Ok(one_by_one)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn written_files_read_back(
        records in records(),
        options in options(),
        tail in 0u64..400_000,
        cache in any::<bool>(),
    ) {
        let file = write(&records, options);
        prop_assert_eq!(file.len() % 65536, 0);
        let ar = ArrayRecordReader::open(Mem(Bytes::from(file)), &read_options(tail, cache)).unwrap();
        prop_assert_eq!(ar.len(), records.len() as u64);
        prop_assert_eq!(ar.layout().writer_options(), options.to_string());
        // The footer tells the group size by the first chunk's record count.
        let group = u64::from(options.group_size()).min(records.len() as u64);
        prop_assert_eq!(ar.layout().group_size(), group);
        for (i, r) in records.iter().enumerate() {
            prop_assert_eq!(&ar.get(i as u64).unwrap()[..], &r[..]);
        }
        let all: Vec<u64> = (0..records.len() as u64).rev().collect();
        let got = ar.get_many(&all).unwrap();
        prop_assert!(got.iter().rev().zip(&records).all(|(g, r)| g[..] == r[..]));
        if let Some(last) = records.len().checked_sub(1) {
            // Repeats, and several records of one chunk in one batch.
            let places = [last, 0, last, last / 2, 0];
            let asked: Vec<u64> = places.iter().map(|&i| i as u64).collect();
            let got = ar.get_many(&asked).unwrap();
            for (g, &i) in got.iter().zip(&places) {
                prop_assert_eq!(&g[..], &records[i][..]);
            }
        }
    }

    #[test]
    fn damaged_files_never_give_wrong_records(
        records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 1..60),
        options in options(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        cache in any::<bool>(),
    ) {
        let mut file = write(&records, options);
        for (at, xor) in &edits {
            let i = at.index(file.len());
            file[i] ^= xor;
        }
        if let Some(cut) = cut {
            file.truncate(cut.index(file.len()));
        }
        match read_with(Bytes::from(file), 256 << 10, cache) {
            Ok(got) => {
                prop_assert_eq!(got.len(), records.len());
                prop_assert!(got.iter().zip(&records).all(|(g, r)| g[..] == r[..]));
            }
            Err(e) => prop_assert!(
                matches!(e, Error::Corrupt { .. } | Error::Codec { .. } | Error::TooLarge { .. } | Error::Unsupported { .. }),
                "{e}"
            ),
        }
    }

    #[test]
    fn arbitrary_bytes_are_refused_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200_000)) {
        prop_assert!(read(Bytes::from(bytes), 65536).is_err());
    }
}
