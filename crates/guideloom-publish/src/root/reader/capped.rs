//! Records read with their lengths known first, so that a caller that shows records (the
//! viewer) never reads one larger than it will show: [`Dataset::get_capped_async`].
//!
//! A native shard that is open gives every length from its index. One that is not open, and
//! whose whole open would read more than the default speculative tail (its index: 12 bytes a
//! record), is not opened: a [`ShardProbe`] reads the footer, the metadata and a window of
//! index entries around the range ([`PROBE_WINDOW_BEFORE`] records before it, at least
//! [`PROBE_WINDOW_RECORDS`] from its start: about 60 KiB) in one call, then the records not
//! over the cap in one more (adjacent records are one range), each CRC32C checked — a page
//! of 50 records of a shard of a million costs about 70 KiB and the page's bytes instead of
//! the 12 MB index. The probe is kept (per shard, for the reader's life), so a later range
//! inside its window is one read of its records, as with an opened shard, and one outside it
//! one read of its entries more. ArrayRecord files have no index of lengths: their records
//! are read, then those over the cap are given as [`Capped::TooLarge`] all the same.

use std::ops::Range;

use bytes::Bytes;
use guideloom_format::ShardProbe;
use guideloom_format::spec::DEFAULT_SPECULATIVE_TAIL;
use tracing::{Instrument, info_span};

use super::Dataset;

/// Records before a range whose index entries a range probe holds (paging back).
pub const PROBE_WINDOW_BEFORE: u64 = 1024;
/// Records from a range's start whose index entries a range probe holds, at least (paging
/// on): with [`PROBE_WINDOW_BEFORE`], a window of about 60 KiB of entries.
pub const PROBE_WINDOW_RECORDS: u64 = 4096;
use super::probe::whole_open_len;
use crate::error::{Error, Result};
use crate::manifest::{ShardFormat, ShardRef};
use crate::opened::{check_native, check_reference, check_stream_shard};

/// One record of [`Dataset::get_capped_async`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capped {
    /// Its bytes.
    Bytes(Bytes),
    /// Longer than the cap: its length (not read, but in ArrayRecord shards).
    TooLarge(u64),
}

/// The records of one shard given by [`Dataset::get_capped_async`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedRun {
    /// The shard's number in the snapshot.
    pub shard: usize,
    /// The snapshot index of the first record.
    pub start: u64,
    /// The shard's record format (its metadata's `format`; `raw` for ArrayRecord).
    pub record_format: String,
    /// Each record, in order.
    pub records: Vec<Capped>,
}

impl Dataset {
    /// Records `range`, each record's length looked at before it is read: one longer than
    /// `max_len` is [`Capped::TooLarge`], unread (but in ArrayRecord shards, which have no
    /// index of lengths). One [`CappedRun`] per shard touched, shards read concurrently. A
    /// native shard not open yet, whose index is larger than the default speculative tail,
    /// is not opened: a probe reads its footer, metadata and the range's index entries, then
    /// the records (see the module's documentation) — what a caller showing a page of a
    /// large shard wants on a remote root. A range past the end is [`Error::OutOfRange`];
    /// an expired snapshot's missing shard is [`Error::SnapshotExpired`].
    pub async fn get_capped_async(
        &self,
        range: Range<u64>,
        max_len: u64,
    ) -> Result<Vec<CappedRun>> {
        if range.end > self.len() {
            return Err(self.out_of_range(range.end - 1));
        }
        if range.start >= range.end {
            return Ok(Vec::new());
        }
        let starts = self.inner.table.starts();
        let (first, _) = self.locate(range.start)?;
        let mut pieces = Vec::new();
        let mut i = first;
        while i + 1 < starts.len() && starts[i] < range.end {
            let from = range.start.max(starts[i]);
            let to = range.end.min(starts[i + 1]);
            if from < to {
                pieces.push((i, from - starts[i]..to - starts[i]));
            }
            i += 1;
        }
        let reads = pieces
            .into_iter()
            .map(|(i, locals)| self.capped_run(i, locals, max_len));
        futures::future::try_join_all(reads).await
    }

    /// Records `locals` of shard `i` (within it), capped.
    async fn capped_run(&self, i: usize, locals: Range<u64>, max_len: u64) -> Result<CappedRun> {
        let start = self.inner.table.starts()[i] + locals.start;
        let reference: &ShardRef = &self.inner.snapshot.shards()[i];
        if self.inner.shards[i].get().is_none() && self.probes_ranges(i) {
            let probed = self
                .capped_probe(i, reference, locals, max_len)
                .instrument(info_span!("probe_range", key = %reference.key))
                .await;
            return match probed {
                Ok((record_format, records)) => Ok(CappedRun {
                    shard: i,
                    start,
                    record_format,
                    records,
                }),
                Err(e) => Err(self.expired_or(e).await),
            };
        }
        let shard = self.shard(i).await?;
        let key = &reference.key;
        let all: Vec<u64> = locals.collect();
        let records = match shard.native() {
            Some(native) => {
                let lens: Vec<u64> = all
                    .iter()
                    .map(|&l| {
                        let r = native.index().range(l);
                        r.end - r.start
                    })
                    .collect();
                let wanted: Vec<u64> = all
                    .iter()
                    .zip(&lens)
                    .filter(|&(_, &len)| len <= max_len)
                    .map(|(&l, _)| l)
                    .collect();
                let mut got = shard
                    .read_many(key, &wanted)
                    .await
                    .map_err(|e| self.forget_damaged(i, e))?
                    .into_iter();
                lens.iter()
                    .map(|&len| match len <= max_len {
                        true => got.next().map_or(Capped::TooLarge(len), Capped::Bytes),
                        false => Capped::TooLarge(len),
                    })
                    .collect()
            }
            None => shard
                .read_many(key, &all)
                .await
                .map_err(|e| self.forget_damaged(i, e))?
                .into_iter()
                .map(|b| match b.len() as u64 {
                    len if len > max_len => Capped::TooLarge(len),
                    _ => Capped::Bytes(b),
                })
                .collect(),
        };
        Ok(CappedRun {
            shard: i,
            start,
            record_format: shard.record_format().to_owned(),
            records,
        })
    }

    /// Whether records of unopened shard `i` are read by a probe rather than by opening it:
    /// a native shard whose whole open reads more than the speculative tail, on a root
    /// without a node cache (there an open fills the cache, and later reads are local).
    fn probes_ranges(&self, i: usize) -> bool {
        let reference = &self.inner.snapshot.shards()[i];
        reference.format == ShardFormat::Native
            && self.inner.root.read_cache().is_none()
            && whole_open_len(reference)
                > DEFAULT_SPECULATIVE_TAIL.max(self.inner.options.tail_len())
    }

    /// Records `locals` of `reference`'s shard `i` by its range probe (opened at the first
    /// call, the shard checked against its reference as [`probe_read`](Self::probe_read)
    /// checks it, then kept): the record format and the records.
    async fn capped_probe(
        &self,
        i: usize,
        reference: &ShardRef,
        locals: Range<u64>,
        max_len: u64,
    ) -> Result<(String, Vec<Capped>)> {
        let key = &reference.key;
        let reader = self
            .inner
            .root
            .store()
            .open_reader(key, reference.size)
            .await?;
        let probe = self.inner.range_probes[i]
            .get_or_try_init(|| async {
                let count = reference.record_count;
                let window = locals.start.saturating_sub(PROBE_WINDOW_BEFORE)
                    ..locals
                        .end
                        .max(locals.start.saturating_add(PROBE_WINDOW_RECORDS))
                        .min(count);
                let probe =
                    match ShardProbe::open_for(&*reader, reference.size, count, window).await {
                        Ok(probe) => probe,
                        Err(e) => {
                            if let Ok(size) = reader.size().await {
                                check_reference(reference, size, count)?;
                            }
                            return Err(Error::shard(key, e));
                        }
                    };
                let size = reader.size().await.map_err(|e| Error::read(key, e))?;
                check_reference(reference, size, probe.len())?;
                check_native(reference, probe.footer())?;
                if let Some(stream) = &reference.stream {
                    check_stream_shard(key, stream, probe.metadata(), probe.footer().data_len())?;
                }
                Ok::<_, Error>(probe)
            })
            .await?;
        let spans = probe
            .spans(&*reader, locals)
            .await
            .map_err(|e| Error::shard(key, e))?;
        let wanted: Vec<_> = spans
            .iter()
            .filter(|s| s.len() <= max_len)
            .cloned()
            .collect();
        let mut got = probe
            .read_spans(&*reader, &wanted)
            .await
            .map_err(|e| Error::shard(key, e))?
            .into_iter();
        let records = spans
            .iter()
            .map(|s| match s.len() <= max_len {
                true => got.next().map_or(Capped::TooLarge(s.len()), Capped::Bytes),
                false => Capped::TooLarge(s.len()),
            })
            .collect();
        Ok((probe.metadata().format.clone(), records))
    }
}
