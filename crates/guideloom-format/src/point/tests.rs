use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;

use async_trait::async_trait;
use proptest::prelude::*;

use super::*;
use crate::metadata::Value;
use crate::{AsyncShard, MemReader, ReadOptions, ShardEncoder};

/// A [`MemReader`] that records every call: `(ranges asked for in one call)`.
#[derive(Debug)]
struct Counted {
    inner: MemReader,
    calls: Mutex<Vec<Vec<Range<u64>>>>,
}

impl Counted {
    fn new(bytes: &[u8]) -> Self {
        Counted {
            inner: MemReader::new("s", bytes.to_vec()),
            calls: Mutex::default(),
        }
    }
    fn take(&self) -> Vec<Vec<Range<u64>>> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

#[async_trait]
impl AsyncReader for Counted {
    fn location(&self) -> &str {
        "s"
    }
    async fn size(&self) -> guideloom_io::Result<u64> {
        self.inner.size().await
    }
    async fn read(&self, offset: u64, len: u64) -> guideloom_io::Result<Bytes> {
        self.calls
            .lock()
            .unwrap()
            .push(std::iter::once(offset..offset + len).collect());
        self.inner.read(offset, len).await
    }
    async fn read_ranges(&self, ranges: &[Range<u64>]) -> guideloom_io::Result<Vec<Bytes>> {
        self.calls.lock().unwrap().push(ranges.to_vec());
        let mut out = Vec::new();
        for r in ranges {
            out.push(self.inner.read(r.start, r.end - r.start).await?);
        }
        Ok(out)
    }
    async fn close(&self) -> guideloom_io::Result<()> {
        Ok(())
    }
    fn close_sync(&self) {}
}

fn record(i: u64) -> Vec<u8> {
    let len = usize::try_from(i % 37).unwrap() * 4;
    (0..len as u64).map(|b| (b ^ i).to_le_bytes()[0]).collect()
}

/// A shard of `n` records whose metadata carries `extra` bytes of user metadata.
fn shard(n: u64, extra: usize, element: Option<&str>) -> Vec<u8> {
    let mut meta = match element {
        Some(e) => ShardMetadata::new("raw", "stream").with_element(e),
        None => ShardMetadata::new("raw", "documents"),
    };
    if extra > 0 {
        let mut user = BTreeMap::new();
        user.insert("pad".to_owned(), Value::Bytes(vec![7; extra]));
        meta = meta.with_user(user);
    }
    let mut encoder = ShardEncoder::new(Vec::new(), meta).unwrap();
    for i in 0..n {
        encoder.append(&record(i)).unwrap();
    }
    encoder.finish().unwrap().0
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_probe_reads_footer_metadata_and_entries_in_one_call_and_the_record_in_one_more() {
    block_on(async {
        let n = 10_000;
        let bytes = shard(n, 0, None);
        let reader = Counted::new(&bytes);
        for i in [0, 1, 1234, 5000, n - 2, n - 1] {
            let probe = ShardProbe::open(&reader, bytes.len() as u64, n, i)
                .await
                .unwrap();
            let first = reader.take();
            assert_eq!(first.len(), 1, "one call: {first:?}");
            let got: u64 = first[0].iter().map(|r| r.end - r.start).sum();
            assert!(
                got <= 2 * (FOOTER_LEN + PROBE_METADATA_ALLOWANCE + 24),
                "{got} bytes"
            );
            assert_eq!(probe.read(&reader, i).await.unwrap(), record(i));
            let second = reader.take();
            assert_eq!(second.len(), 1, "the record only: {second:?}");
            assert_eq!(probe.len(), n);
        }
    });
}

#[test]
fn metadata_past_the_allowance_and_a_wrong_count_cost_reads_not_answers() {
    block_on(async {
        let n = 3_000;
        let bytes = shard(n, 10_000, None);
        let reader = Counted::new(&bytes);
        let probe = ShardProbe::open(&reader, bytes.len() as u64, n, 100)
            .await
            .unwrap();
        assert_eq!(
            reader.take().len(),
            2,
            "the metadata needed a read of its own"
        );
        assert_eq!(probe.metadata().user.len(), 1);
        assert_eq!(probe.read(&reader, 100).await.unwrap(), record(100));
        assert_eq!(reader.take().len(), 2, "entries, then the record");

        // A hint far from the truth: still the right record.
        let bytes = shard(n, 0, None);
        let reader = Counted::new(&bytes);
        let probe = ShardProbe::open(&reader, bytes.len() as u64, 2 * n, 100)
            .await
            .unwrap();
        assert_eq!(probe.len(), n);
        assert_eq!(probe.read(&reader, 100).await.unwrap(), record(100));
        let probe = ShardProbe::open(&reader, bytes.len() as u64, 0, 100)
            .await
            .unwrap();
        assert_eq!(probe.read(&reader, 100).await.unwrap(), record(100));
        let err = probe.read(&reader, n).await.unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { index, len } if index == n && len == n));
    });
}

#[test]
fn damage_to_what_a_probe_reads_is_a_typed_error() {
    block_on(async {
        let n = 2_000;
        let clean = shard(n, 0, None);
        let footer = Footer::decode("s", &clean[clean.len() - 64..], clean.len() as u64).unwrap();
        // Record 778 is 4 bytes long (777 is empty).
        let i = 778;
        let entry = usize::try_from(footer.index_offset + i * 12).unwrap();
        let full = AsyncShard::open(MemReader::new("s", clean.clone()), &ReadOptions::default())
            .await
            .unwrap();
        let at = usize::try_from(full.record_range(i).unwrap().start).unwrap();
        // (byte flipped, what must be reported)
        type Check = fn(&Error) -> bool;
        let cases: [(usize, Check); 5] = [
            (at, |e| {
                matches!(
                    e,
                    Error::Corrupt {
                        what: Corruption::RecordChecksum { index: 778 },
                        ..
                    }
                )
            }),
            (entry + 8, |e| {
                matches!(
                    e,
                    Error::Corrupt {
                        what: Corruption::RecordChecksum { .. },
                        ..
                    }
                )
            }),
            // The end moves: the record's bytes no longer match its CRC, or the end leaves
            // the data region.
            (entry, |e| matches!(e, Error::Corrupt { .. })),
            (entry + 7, |e| {
                matches!(
                    e,
                    Error::Corrupt {
                        what: Corruption::IndexOffset { index: 778, .. },
                        ..
                    }
                )
            }),
            (entry - 5, |e| {
                matches!(
                    e,
                    Error::Corrupt {
                        what: Corruption::IndexOffset { index: 777, .. },
                        ..
                    }
                )
            }),
        ];
        for (byte, check) in cases {
            let mut bad = clean.clone();
            bad[byte] ^= 0x40;
            let reader = MemReader::new("s", bad);
            let probe = ShardProbe::open(&reader, clean.len() as u64, n, i)
                .await
                .unwrap();
            let err = probe.read(&reader, i).await.unwrap_err();
            assert!(check(&err), "byte {byte}: {err:?}");
        }
        // Damage to the footer or the metadata fails the probe's open.
        for byte in [
            clean.len() - 20,
            usize::try_from(footer.metadata_offset).unwrap() + 3,
        ] {
            let mut bad = clean.clone();
            bad[byte] ^= 1;
            let err = ShardProbe::open(&MemReader::new("s", bad), clean.len() as u64, n, i)
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "byte {byte}: {err:?}");
        }
    });
}

#[test]
fn a_stream_record_that_is_not_whole_elements_is_refused() {
    block_on(async {
        // Records of 0, 4, 8... bytes are whole u32s; rewrite entry 5's end to cut one.
        let n = 50;
        let mut bytes = shard(n, 0, Some("u32"));
        let footer = Footer::decode("s", &bytes[bytes.len() - 64..], bytes.len() as u64).unwrap();
        let reader = MemReader::new("s", bytes.clone());
        let probe = ShardProbe::open(&reader, bytes.len() as u64, n, 5)
            .await
            .unwrap();
        assert_eq!(probe.read(&reader, 5).await.unwrap(), record(5));
        let entry = usize::try_from(footer.index_offset + 5 * 12).unwrap();
        let end = le_u64(&bytes, entry) - 1;
        bytes[entry..entry + 8].copy_from_slice(&end.to_le_bytes());
        let size = bytes.len() as u64;
        let reader = MemReader::new("s", bytes);
        let probe = ShardProbe::open(&reader, size, n, 5).await.unwrap();
        let err = probe.read(&reader, 5).await.unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    });
}

#[test]
fn a_page_of_records_costs_one_call_for_its_entries_and_one_for_its_bytes() {
    block_on(async {
        let n = 10_000;
        let bytes = shard(n, 0, None);
        let size = bytes.len() as u64;
        let reader = Counted::new(&bytes);
        let full = AsyncShard::open(MemReader::new("s", bytes.clone()), &ReadOptions::default())
            .await
            .unwrap();
        for page in [0..50, 1..51, 4_321..4_821, n - 50..n, n - 1..n] {
            let probe = ShardProbe::open_for(&reader, size, n, page.clone())
                .await
                .unwrap();
            assert_eq!(
                reader.take().len(),
                1,
                "footer, metadata and entries: one call"
            );
            let spans = probe.spans(&reader, page.clone()).await.unwrap();
            assert!(reader.take().is_empty(), "the entries were held");
            assert_eq!(spans.len() as u64, page.end - page.start);
            for s in &spans {
                assert_eq!(s.range, full.record_range(s.index).unwrap(), "{s:?}");
                assert_eq!(s.len(), record(s.index).len() as u64);
            }
            let got = probe.read_spans(&reader, &spans).await.unwrap();
            let calls = reader.take();
            assert_eq!(calls.len(), 1, "{calls:?}");
            assert_eq!(calls[0].len(), 1, "consecutive records: one range");
            for (s, b) in spans.iter().zip(&got) {
                assert_eq!(b, &record(s.index));
            }
        }
        // Leaving records out (too large for a caller) splits the range; the rest still
        // come back in one call, each right.
        let probe = ShardProbe::open_for(&reader, size, n, 100..200)
            .await
            .unwrap();
        let spans = probe.spans(&reader, 100..200).await.unwrap();
        let kept: Vec<RecordSpan> = spans.into_iter().filter(|s| s.len() < 100).collect();
        reader.take();
        let got = probe.read_spans(&reader, &kept).await.unwrap();
        let calls = reader.take();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].len() > 1, "{calls:?}");
        for (s, b) in kept.iter().zip(&got) {
            assert_eq!(b, &record(s.index));
        }
        // Entries the probe does not hold: exactly one read of them.
        let probe = ShardProbe::open_tail(&reader, size).await.unwrap();
        reader.take();
        let spans = probe.spans(&reader, 7_000..7_500).await.unwrap();
        let calls = reader.take();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0][0].end - calls[0][0].start, 501 * 12);
        assert_eq!(spans[0].range, full.record_range(7_000).unwrap());
        // Empty and out-of-range pages.
        assert!(probe.spans(&reader, 5..5).await.unwrap().is_empty());
        let err = probe.spans(&reader, n - 1..n + 1).await.unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { index, len } if index == n && len == n));
    });
}

#[test]
fn damage_under_a_page_is_a_typed_error() {
    block_on(async {
        let n = 2_000;
        let clean = shard(n, 0, None);
        let size = clean.len() as u64;
        let footer = Footer::decode("s", &clean[clean.len() - 64..], size).unwrap();
        let full = AsyncShard::open(MemReader::new("s", clean.clone()), &ReadOptions::default())
            .await
            .unwrap();
        // A record's byte: its CRC fails, naming it.
        let mut bad = clean.clone();
        let at = usize::try_from(full.record_range(778).unwrap().start).unwrap();
        bad[at] ^= 0x40;
        let reader = MemReader::new("s", bad);
        let probe = ShardProbe::open_for(&reader, size, n, 750..800)
            .await
            .unwrap();
        let spans = probe.spans(&reader, 750..800).await.unwrap();
        let err = probe.read_spans(&reader, &spans).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    what: Corruption::RecordChecksum { index: 778 },
                    ..
                }
            ),
            "{err:?}"
        );
        // An entry's end out of order: the span is refused before any record is read.
        let mut bad = clean.clone();
        let entry = usize::try_from(footer.index_offset + 778 * 12).unwrap();
        bad[entry + 7] ^= 0x40;
        let reader = MemReader::new("s", bad);
        let probe = ShardProbe::open_for(&reader, size, n, 750..800)
            .await
            .unwrap();
        let err = probe.spans(&reader, 750..800).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    what: Corruption::IndexOffset { index: 778, .. },
                    ..
                }
            ),
            "{err:?}"
        );
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every record a probe reads is the one a whole open reads, whatever the count, the
    /// metadata's size and the hint.
    #[test]
    fn probes_read_what_whole_opens_read(
        n in 1u64..3_000,
        extra in prop_oneof![Just(0usize), 0usize..6_000],
        pick in any::<u64>(),
        hint_off in -3i64..3,
        element in prop_oneof![Just(None), Just(Some("u32")), Just(Some("u8"))],
    ) {
        let bytes = shard(n, extra, element);
        let i = pick % n;
        let hint = n.saturating_add_signed(hint_off);
        block_on(async {
            let reader = MemReader::new("s", bytes.clone());
            let full = AsyncShard::open(MemReader::new("s", bytes.clone()), &ReadOptions::default())
                .await
                .unwrap();
            let probe = ShardProbe::open(&reader, bytes.len() as u64, hint, i).await.unwrap();
            prop_assert_eq!(probe.read(&reader, i).await.unwrap(), full.read(i).await.unwrap());
            let j = (i * 7 + 3) % n;
            prop_assert_eq!(probe.read(&reader, j).await.unwrap(), full.read(j).await.unwrap());
            prop_assert_eq!(probe.metadata(), full.metadata());
            Ok(())
        })?;
    }

    /// A probe opened for a range reads every record of it as a whole open does.
    #[test]
    fn pages_read_what_whole_opens_read(
        n in 1u64..3_000,
        extra in prop_oneof![Just(0usize), 0usize..6_000],
        pick in any::<u64>(),
        per in 1u64..600,
    ) {
        let bytes = shard(n, extra, None);
        let start = pick % n;
        let page = start..(start + per).min(n);
        block_on(async {
            let reader = MemReader::new("s", bytes.clone());
            let full = AsyncShard::open(MemReader::new("s", bytes.clone()), &ReadOptions::default())
                .await
                .unwrap();
            let probe = ShardProbe::open_for(&reader, bytes.len() as u64, n, page.clone()).await.unwrap();
            let spans = probe.spans(&reader, page.clone()).await.unwrap();
            let got = probe.read_spans(&reader, &spans).await.unwrap();
            prop_assert_eq!(got.len() as u64, page.end - page.start);
            for (i, b) in page.zip(got) {
                prop_assert_eq!(b, full.read(i).await.unwrap());
            }
            Ok(())
        })?;
    }

    /// The first read's ranges are sorted, disjoint, inside the file and end at its end.
    #[test]
    fn first_reads_are_sorted_disjoint_and_inside(
        size in 0u64..1 << 40,
        records in any::<u64>(),
        i in any::<u64>(),
        count in 0u64..1_000,
    ) {
        let of = ShardProbe::first_reads_of(size, records, i..i.saturating_add(count));
        prop_assert!(!of.is_empty());
        prop_assert_eq!(of.last().unwrap().end, size);
        for w in of.windows(2) {
            prop_assert!(w[0].end < w[1].start);
        }
        let ranges = ShardProbe::first_reads(size, records, i);
        prop_assert!(!ranges.is_empty());
        prop_assert_eq!(ranges.last().unwrap().end, size);
        for w in ranges.windows(2) {
            prop_assert!(w[0].end < w[1].start);
        }
        for r in &ranges {
            prop_assert!(r.start <= r.end && r.end <= size);
        }
    }
}
