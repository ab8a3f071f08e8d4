//! The token reads of a [`SnapshotReader`]: element slices across document and shard
//! boundaries, a document's element range, and document metadata from the companions.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use guideloom_format::spec::HEADER_LEN;
use guideloom_format::{AsyncShard, Expected};

use super::SnapshotReader;
use crate::error::{Error, Result};
use crate::manifest::Checksum;
use crate::stream::StreamLayout;

impl SnapshotReader {
    /// The token layout of the snapshot (element type, where every element lives), from
    /// the manifest: no request. [`Error::NotAStream`] unless every shard is a stream shard
    /// ([`Root::write_stream_shard`](crate::Root::write_stream_shard)) of one element type.
    pub fn stream(&self) -> Result<&StreamLayout> {
        self.stream_state()
            .layout
            .as_ref()
            .map_err(|reason| Error::NotAStream {
                snapshot: self.snapshot().id().to_owned(),
                reason: reason.clone(),
            })
    }

    /// Elements `range` of the stream (the snapshot's documents concatenated), as
    /// little-endian bytes: one ranged read per shard the range touches, shards read
    /// concurrently (the first read of a shard also opens it: one tail read). With record
    /// CRCs verified (the default [`ReadOptions`](guideloom_format::ReadOptions)) each read
    /// is widened to the whole documents it touches, which are checked. A range past the end
    /// is [`Error::InvalidArgument`]; damaged bytes [`Error::Shard`].
    pub async fn read_elements(&self, range: Range<u64>) -> Result<Bytes> {
        let layout = self.stream()?;
        if range.start > range.end || range.end > layout.len() {
            return Err(Error::invalid(format!(
                "element range {range:?} outside the stream of {} elements of snapshot {}",
                layout.len(),
                self.snapshot().id()
            )));
        }
        let width = layout.width();
        let pieces = layout.table().runs(range).map(|run| async move {
            let shard = self.native(run.shard).await?;
            let key = &self.snapshot().shards()[run.shard].key;
            shard
                .read_data(run.first * width, run.count * width)
                .await
                .map_err(|e| Error::shard(key, e))
        });
        let mut pieces = futures::future::try_join_all(pieces).await?;
        if pieces.len() <= 1 {
            return Ok(pieces.pop().unwrap_or_default());
        }
        let mut out = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
        for p in &pieces {
            out.extend_from_slice(p);
        }
        Ok(out.freeze())
    }

    /// [`read_elements`](Self::read_elements) of many ranges (a batch of token windows),
    /// all read concurrently; results in the order asked.
    pub async fn read_elements_many(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let reads = ranges.iter().map(|r| self.read_elements(r.clone()));
        futures::future::try_join_all(reads).await
    }

    /// The element range of document `index` in the stream (the first call for a shard
    /// opens it: one tail read). A document past the end is [`Error::OutOfRange`].
    pub async fn document_range(&self, index: u64) -> Result<Range<u64>> {
        let layout = self.stream()?;
        let (i, local) = self.locate(index)?;
        let shard = self.native(i).await?;
        let key = &self.snapshot().shards()[i].key;
        let record = shard
            .record_range(local)
            .map_err(|e| Error::shard(key, e))?;
        let base = layout.table().bounds(i).start;
        let w = layout.width();
        Ok(base + (record.start - HEADER_LEN) / w..base + (record.end - HEADER_LEN) / w)
    }

    /// The metadata of document `index` as written by
    /// [`Root::write_stream_shard_with_meta`](crate::Root::write_stream_shard_with_meta):
    /// one CBOR item (one ranged read of the companion shard, opened once with one tail
    /// read, its size, kind and record count checked). A shard written without metadata is
    /// [`Error::InvalidArgument`] naming it.
    pub async fn document_meta(&self, index: u64) -> Result<Bytes> {
        let (i, local) = self.locate(index)?;
        let companion = self.companion(i).await?;
        let key = companion.name().to_owned();
        companion
            .read(local)
            .await
            .map_err(|e| Error::shard(&key, e))
    }

    /// Shard `i`, which a validated stream reference says is native.
    async fn native(&self, i: usize) -> Result<&AsyncShard> {
        let opened = self.open_shard(i).await?;
        opened.native().ok_or_else(|| {
            Error::invalid(format!(
                "shard {:?} is not a native shard",
                self.snapshot().shards()[i].key
            ))
        })
    }

    /// The metadata companion of shard `i`, opened once and checked against its reference
    /// and the stream shard's record count.
    async fn companion(&self, i: usize) -> Result<&AsyncShard> {
        let reference = &self.snapshot().shards()[i];
        let Some(meta) = reference.stream.as_ref().and_then(|s| s.meta.as_ref()) else {
            return Err(Error::invalid(format!(
                "shard {:?} was written without document metadata",
                reference.key
            )));
        };
        self.stream_state().companions[i]
            .get_or_try_init(|| async {
                let key = &meta.key;
                let reader = self.root().store().open_reader(key, meta.size).await?;
                let shard = AsyncShard::open(reader, self.read_options())
                    .await
                    .map_err(|e| Error::shard(key, e))?;
                let size = shard
                    .reader()
                    .size()
                    .await
                    .map_err(|e| Error::read(key, e))?;
                let checks = [
                    ("size", meta.size, size),
                    ("record count", reference.record_count, shard.len()),
                ];
                for (what, expected, actual) in checks {
                    if expected != actual {
                        return Err(Error::Verification {
                            key: key.clone(),
                            what,
                            expected: expected.to_string(),
                            actual: actual.to_string(),
                        });
                    }
                }
                shard
                    .expect(&Expected::Documents("cbor".to_owned()))
                    .map_err(|e| Error::shard(key, e))?;
                if let Some(Checksum::FooterCrc32c(want)) = meta.checksum {
                    let got = shard.footer().checksum();
                    if got != want {
                        return Err(Error::Verification {
                            key: key.clone(),
                            what: "footer checksum",
                            expected: format!("{want:08x}"),
                            actual: format!("{got:08x}"),
                        });
                    }
                }
                Ok(shard)
            })
            .await
    }
}
