//! The token reads of a [`Dataset`]: element slices across document and shard
//! boundaries, a document's element range, and document metadata from the companions.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use guideloom_format::spec::HEADER_LEN;
use guideloom_format::{AsyncShard, Element, Elements, Expected};
use serde::de::DeserializeOwned;

use super::Dataset;
use super::reader::{block_on, decode_cbor};
use crate::error::{Error, Result};
use crate::manifest::Checksum;
use crate::stream::StreamLayout;

/// Typed token reads, sync and async.
impl Dataset {
    /// The stream layout ([`stream`](Self::stream)), checked to hold elements `E`
    /// ([`Error::ElementMismatch`]).
    pub fn stream_of<E: Element>(&self) -> Result<&StreamLayout> {
        let layout = self.stream()?;
        if layout.element() != E::NAME {
            return Err(Error::ElementMismatch {
                stream: layout.element().to_owned(),
                requested: E::NAME,
            });
        }
        Ok(layout)
    }

    /// The stream's element type name (`"u16"`, ...), from the manifest;
    /// [`Error::NotAStream`] unless every shard is a stream shard of one element type.
    pub fn stream_element(&self) -> Result<&str> {
        Ok(self.stream()?.element())
    }

    /// Tokens in the stream (all documents), from the manifest: no request.
    pub fn num_tokens(&self) -> Result<u64> {
        Ok(self.stream()?.len())
    }

    /// The tokens of document `index` (the dataset's record `index`): one ranged read.
    /// [`Error::ElementMismatch`] when the stream does not hold `E`s.
    pub fn document<E: Element>(&self, index: u64) -> Result<Elements<E>> {
        self.stream_of::<E>()?;
        Ok(Elements::from_le_bytes(self.get(index)?))
    }

    /// The async twin of [`document`](Self::document).
    pub async fn document_async<E: Element>(&self, index: u64) -> Result<Elements<E>> {
        self.stream_of::<E>()?;
        Ok(Elements::from_le_bytes(self.get_async(index).await?))
    }

    /// The token range document `index` covers in the stream. See
    /// [`document_range_async`](Self::document_range_async).
    pub fn document_range(&self, index: u64) -> Result<Range<u64>> {
        block_on(self.document_range_async(index))?
    }

    /// The metadata of document `index`, decoded from CBOR into `M`: one ranged read of its
    /// companion shard ([`document_meta_bytes_async`](Self::document_meta_bytes_async)).
    pub fn document_meta<M: DeserializeOwned>(&self, index: u64) -> Result<M> {
        block_on(self.document_meta_async(index))?
    }

    /// The async twin of [`document_meta`](Self::document_meta).
    pub async fn document_meta_async<M: DeserializeOwned>(&self, index: u64) -> Result<M> {
        decode_cbor(index, &self.document_meta_bytes_async(index).await?)
    }

    /// Tokens `range` of the stream, across document and shard boundaries: one ranged read
    /// per shard touched, shards read concurrently (with record CRCs verified, widened to
    /// the whole documents touched). [`Error::TokensOutOfRange`] past the end,
    /// [`Error::ElementMismatch`] for another element type.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_publish::{PublicationOptions, PublishMode, PublishRequest, Root};
    ///
    /// let root = Root::open("memory://dataset-tokens-doc", &Default::default(), Default::default())?;
    /// let first: [&[u32]; 2] = [&[1, 2, 3], &[4]];
    /// let second: [&[u32]; 1] = [&[5, 6]];
    /// let shards = vec![
    ///     root.write_stream_shard("w", 0, first).await?,
    ///     root.write_stream_shard("w", 1, second).await?,
    /// ];
    /// let request = PublishRequest { dataset_id: "t".into(), snapshot_id: "v1".into(), shards, mode: PublishMode::Full, schema: None, };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    /// let ds = root.open_latest().await?;
    /// assert_eq!((ds.len(), ds.num_tokens()?), (3, 6)); // 3 documents, 6 tokens
    /// assert_eq!(&*ds.document_async::<u32>(1).await?, &[4]);
    /// assert_eq!(&*ds.tokens_async::<u32>(2..6).await?, &[3, 4, 5, 6]); // across documents and shards
    /// let wrong = ds.tokens_async::<u16>(0..1).await;
    /// assert!(matches!(wrong, Err(guideloom_publish::Error::ElementMismatch { .. })));
    /// # Ok(()) }
    /// ```
    pub fn tokens<E: Element>(&self, range: Range<u64>) -> Result<Elements<E>> {
        block_on(self.tokens_async(range))?
    }

    /// The async twin of [`tokens`](Self::tokens).
    pub async fn tokens_async<E: Element>(&self, range: Range<u64>) -> Result<Elements<E>> {
        let layout = self.stream_of::<E>()?;
        if range.start > range.end || range.end > layout.len() {
            return Err(Error::TokensOutOfRange {
                start: range.start,
                end: range.end,
                len: layout.len(),
            });
        }
        Ok(Elements::from_le_bytes(
            self.read_elements_async(range).await?,
        ))
    }
}

/// Raw token reads.
impl Dataset {
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
    pub async fn read_elements_async(&self, range: Range<u64>) -> Result<Bytes> {
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

    /// [`read_elements_async`](Self::read_elements_async) of many ranges (a batch of token windows),
    /// all read concurrently; results in the order asked.
    pub async fn read_elements_many_async(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let reads = ranges.iter().map(|r| self.read_elements_async(r.clone()));
        futures::future::try_join_all(reads).await
    }

    /// The element range of document `index` in the stream (the first call for a shard
    /// opens it: one tail read). A document past the end is [`Error::OutOfRange`].
    pub async fn document_range_async(&self, index: u64) -> Result<Range<u64>> {
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
    pub async fn document_meta_bytes_async(&self, index: u64) -> Result<Bytes> {
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
        let opened = self.open_shard_async(i).await?;
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
