//! Token streams read as datasets: a snapshot of stream shards
//! ([`Publisher::write_stream_shard`](crate::Publisher::write_stream_shard)) read by
//! document, by token slice across document and shard boundaries, and with per-document
//! metadata. The reads are guideloom-publish's [`SnapshotReader`] token reads
//! ([`SnapshotReader::read_elements`]); this module types them by element.

use std::ops::Range;

use guideloom_format::{Element, Elements};
use guideloom_publish::{SnapshotReader, StreamLayout};
use serde::de::DeserializeOwned;

use crate::dataset::{AsyncDataset, Dataset};
use crate::error::{Error, Result};

/// The stream layout of `reader`'s snapshot, checked to hold elements `E`.
pub(crate) fn layout_of<E: Element>(reader: &SnapshotReader) -> Result<&StreamLayout> {
    let layout = reader.stream()?;
    if layout.element() != E::NAME {
        return Err(Error::ElementMismatch {
            stream: layout.element().to_owned(),
            requested: E::NAME,
        });
    }
    Ok(layout)
}

/// [`Error::TokensOutOfRange`] unless `range` lies within a stream of `len` tokens.
pub(crate) fn check_tokens(range: &Range<u64>, len: u64) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(Error::TokensOutOfRange {
            start: range.start,
            end: range.end,
            len,
        });
    }
    Ok(())
}

impl AsyncDataset {
    /// The stream's element type name (`"u16"`, ...), from the manifest; [`Error::NotAStream`]
    /// unless every shard is a stream shard of one element type.
    pub fn stream_element(&self) -> Result<&str> {
        Ok(self.reader().stream()?.element())
    }

    /// Tokens in the stream (all documents), from the manifest: no request.
    pub fn num_tokens(&self) -> Result<u64> {
        Ok(self.reader().stream()?.len())
    }

    /// The tokens of document `index` (the dataset's record `index`): one ranged read.
    /// [`Error::ElementMismatch`] when the stream does not hold `E`s.
    pub async fn document<E: Element>(&self, index: u64) -> Result<Elements<E>> {
        layout_of::<E>(self.reader())?;
        Ok(Elements::from_le_bytes(self.get(index).await?))
    }

    /// The token range document `index` covers in the stream (its shard opened if it was
    /// not: one tail read).
    pub async fn document_range(&self, index: u64) -> Result<Range<u64>> {
        Ok(self.reader().document_range(index).await?)
    }

    /// The metadata of document `index` (written with
    /// [`Publisher::write_stream_shard_with_meta`](crate::Publisher::write_stream_shard_with_meta)),
    /// decoded from CBOR into `M`: one ranged read of its companion shard.
    pub async fn document_meta<M: DeserializeOwned>(&self, index: u64) -> Result<M> {
        let bytes = self.reader().document_meta(index).await?;
        guideloom_format::cbor::decode_one(&bytes).map_err(|e| Error::Decode {
            index,
            source: Box::new(e),
        })
    }

    /// Tokens `range` of the stream, across document and shard boundaries: one ranged read
    /// per shard touched, shards read concurrently (with record CRCs verified, widened to
    /// the whole documents touched). [`Error::TokensOutOfRange`] past the end,
    /// [`Error::ElementMismatch`] for another element type.
    pub async fn tokens<E: Element>(&self, range: Range<u64>) -> Result<Elements<E>> {
        let layout = layout_of::<E>(self.reader())?;
        check_tokens(&range, layout.len())?;
        Ok(Elements::from_le_bytes(
            self.reader().read_elements(range).await?,
        ))
    }
}

impl Dataset {
    /// See [`AsyncDataset::stream_element`].
    pub fn stream_element(&self) -> Result<&str> {
        self.as_async().stream_element()
    }

    /// See [`AsyncDataset::num_tokens`].
    pub fn num_tokens(&self) -> Result<u64> {
        self.as_async().num_tokens()
    }

    /// See [`AsyncDataset::document`].
    pub fn document<E: Element>(&self, index: u64) -> Result<Elements<E>> {
        self.block_on(self.as_async().document(index))
    }

    /// See [`AsyncDataset::document_range`].
    pub fn document_range(&self, index: u64) -> Result<Range<u64>> {
        self.block_on(self.as_async().document_range(index))
    }

    /// See [`AsyncDataset::document_meta`].
    pub fn document_meta<M: DeserializeOwned>(&self, index: u64) -> Result<M> {
        self.block_on(self.as_async().document_meta(index))
    }

    /// Tokens `range` of the stream, across document and shard boundaries (see
    /// [`AsyncDataset::tokens`]).
    ///
    /// ```
    /// # fn main() -> guideloom::Result<()> {
    /// use guideloom::{PublishMode, Publisher};
    ///
    /// let publisher = Publisher::open("memory://dataset-tokens-doc")?;
    /// let first: [&[u32]; 2] = [&[1, 2, 3], &[4]];
    /// let second: [&[u32]; 1] = [&[5, 6]];
    /// let shards = vec![
    ///     publisher.write_stream_shard("w", 0, first)?,
    ///     publisher.write_stream_shard("w", 1, second)?,
    /// ];
    /// publisher.publish("tokens", "v1", shards, PublishMode::Full)?;
    /// let ds = publisher.dataset()?;
    /// assert_eq!((ds.len(), ds.num_tokens()?), (3, 6)); // 3 documents, 6 tokens
    /// assert_eq!(&*ds.document::<u32>(1)?, &[4]);
    /// assert_eq!(&*ds.tokens::<u32>(2..6)?, &[3, 4, 5, 6]); // across documents and shards
    /// assert!(matches!(ds.tokens::<u16>(0..1), Err(guideloom::Error::ElementMismatch { .. })));
    /// # Ok(()) }
    /// ```
    pub fn tokens<E: Element>(&self, range: Range<u64>) -> Result<Elements<E>> {
        self.block_on(self.as_async().tokens(range))
    }
}
