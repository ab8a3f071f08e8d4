//! A shard's first record read from a remote root without its whole index: guideloom-format's
//! [`ShardProbe`] (footer, metadata and the record's index entries in one call, then the
//! record, whose CRC32C is always checked).
//!
//! When: the first [`get`](Dataset::get) of a native shard, on a store whose reads
//! are network requests, when the shard's index is larger than the default speculative tail
//! (so a whole open would read more than 64 KiB). Measured on nginx (`cargo xtask bench`,
//! `publish` HTTP table): a fresh `latest + get` of one 1 KiB record of a 10 000-record shard
//! receives 11 899 bytes instead of 127 364, in the same 4 requests. The shard's next read
//! opens it whole (one request for index, metadata and footer), so every later read is one
//! request again: a shard read once costs its probe; a shard read often costs one request
//! more in all than before.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use guideloom_format::ShardProbe;
use guideloom_format::spec::{DEFAULT_SPECULATIVE_TAIL, FOOTER_LEN, INDEX_ENTRY_LEN};
use tracing::{Instrument, info_span};

use super::Dataset;
use crate::error::{Error, Result};
use crate::manifest::{ShardFormat, ShardRef};
use crate::opened::{check_native, check_reference, check_stream_shard};

impl Dataset {
    /// Whether the read of a record of unopened shard `i` should be a probe: see the module
    /// documentation. `true` at most once per shard.
    pub(super) fn probes(&self, i: usize) -> bool {
        let reference = &self.inner.snapshot.shards()[i];
        reference.format == ShardFormat::Native
            && self.inner.root.store().capabilities().remote_reads
            && self.inner.root.read_cache().is_none()
            && whole_open_len(reference)
                > DEFAULT_SPECULATIVE_TAIL.max(self.inner.options.tail_len())
            && !self.inner.probed[i].swap(true, Ordering::Relaxed)
    }

    /// Record `local` of shard `i` by a probe, the shard checked against its reference
    /// (size, record count, footer checksum, stream type and length) as a whole open checks
    /// it.
    pub(super) async fn probe_read(&self, i: usize, local: u64) -> Result<Bytes> {
        let reference: &ShardRef = &self.inner.snapshot.shards()[i];
        let key = &reference.key;
        let read = async {
            let reader = self
                .inner
                .root
                .store()
                .open_reader(key, reference.size)
                .await?;
            let probe =
                match ShardProbe::open(&*reader, reference.size, reference.record_count, local)
                    .await
                {
                    Ok(probe) => probe,
                    Err(e) => {
                        // An object of another size than the reference's fails the probe's
                        // reads (placed by that size): name the size, as a whole open does.
                        if let Ok(size) = reader.size().await {
                            check_reference(reference, size, reference.record_count)?;
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
            probe
                .read(&*reader, local)
                .await
                .map_err(|e| Error::shard(key, e))
        }
        .instrument(info_span!("probe_shard", key = %key, record = local))
        .await;
        match read {
            Ok(bytes) => Ok(bytes),
            Err(e) => Err(self.expired_or(e).await),
        }
    }
}

impl Dataset {
    /// The record format shard `i` names (its metadata's `format`; an ArrayRecord file's
    /// records are raw bytes): from the opened shard; when opening it would make the node
    /// cache download the whole shard, from its footer and metadata alone (one ranged read,
    /// the footer checked against the reference), leaving the fill to the shard's first
    /// read; otherwise by opening it (one tail read, kept for the reads to come). What
    /// Python's `guideloom.open` asks to decode records, so that opening a cached remote root
    /// does not download a shard. An `i` past the last shard is [`Error::InvalidArgument`].
    pub async fn record_format_async(&self, i: usize) -> Result<String> {
        let (Some(opened), Some(reference)) = (
            self.inner.shards.get(i),
            self.inner.snapshot.shards().get(i),
        ) else {
            return Ok(self.open_shard_async(i).await?.record_format().to_owned());
        };
        if let Some(shard) = opened.get() {
            return Ok(shard.record_format().to_owned());
        }
        let store = self.inner.root.store();
        let fills = reference.format == ShardFormat::Native
            && self
                .inner
                .root
                .read_cache()
                .is_some_and(|cache| !cache.holds(store.as_ref(), reference));
        if !fills {
            return Ok(self.open_shard_async(i).await?.record_format().to_owned());
        }
        let key = &reference.key;
        let reader = store.open_reader(key, reference.size).await?;
        let probe = ShardProbe::open_tail(&*reader, reference.size)
            .await
            .map_err(|e| Error::shard(key, e))?;
        check_native(reference, probe.footer())?;
        Ok(probe.metadata().format.clone())
    }
}

/// What a whole open of `reference`'s shard reads at least: its index and footer.
pub(super) fn whole_open_len(reference: &ShardRef) -> u64 {
    reference
        .record_count
        .saturating_mul(INDEX_ENTRY_LEN)
        .saturating_add(FOOTER_LEN)
}
