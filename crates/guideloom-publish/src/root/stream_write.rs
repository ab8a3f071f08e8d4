//! Writing stream shards into a root: documents of tokens as one native shard (one record
//! per document), and optionally their metadata as a companion shard.

use std::convert::Infallible;

use guideloom_format::{Element, ShardMetadata};
use guideloom_format::{KIND_DOCUMENTS, KIND_STREAM};
use serde::Serialize;

use super::Root;
use crate::error::{Error, Result};
use crate::key::check_name;
use crate::manifest::{CompanionRef, ShardRef, StreamRef, stream_meta_key};
use crate::shards;

/// The record format name of a stream shard's records (little-endian elements).
const STREAM_RECORD_FORMAT: &str = "raw";
/// The record format name of a companion's records.
const META_RECORD_FORMAT: &str = "cbor";

fn stream_metadata<E: Element>() -> ShardMetadata {
    ShardMetadata::new(STREAM_RECORD_FORMAT, KIND_STREAM).with_element(E::NAME)
}

fn le_bytes<E: Element>(document: &[E]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(document));
    E::extend_le(document, &mut out);
    out
}

impl Root {
    /// Writes `documents` (token slices of element type `E`: `u16`, `u32`, ...) as stream
    /// shard `index` of worker `work_id`, create-only at `shards/<work_id>/<index>.glm`: a
    /// native shard with one record per document (its tokens little-endian, each with a
    /// CRC32C), streamed as [`write_shard`](Self::write_shard) streams (memory: one document
    /// and the index). The reference's [`stream`](ShardRef::stream) records the element
    /// type and count, so a snapshot of stream shards is a token stream its readers slice
    /// without opening shards first ([`Dataset::stream`](crate::Dataset::stream)).
    /// Its records are the documents: [`Dataset::get`](crate::Dataset::get)
    /// of document `i` returns its bytes.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_publish::{PublicationOptions, PublishMode, PublishRequest, Root};
    ///
    /// let root = Root::open("memory://write-stream-doc", &Default::default(), Default::default())?;
    /// let docs: [&[u16]; 3] = [&[1, 2, 3], &[], &[4, 5]];
    /// let shard = root.write_stream_shard("w", 0, docs).await?;
    /// let stream = shard.stream.as_ref().unwrap();
    /// assert_eq!((shard.record_count, stream.element.as_str(), stream.elements), (3, "u16", 5));
    /// let request = PublishRequest {
    ///     dataset_id: "d".into(),
    ///     snapshot_id: "s".into(),
    ///     shards: vec![shard],
    ///     mode: PublishMode::Full,
    ///     schema: None,
    /// };
    /// root.publish(&request, &PublicationOptions::default()).await?;
    /// let reader = root.open_latest().await?;
    /// assert_eq!(reader.stream()?.len(), 5);
    /// assert_eq!(&reader.read_elements_async(2..4).await?[..], &[3, 0, 4, 0]); // little-endian u16s
    /// # Ok(()) }
    /// ```
    pub async fn write_stream_shard<E, I, D>(
        &self,
        work_id: &str,
        index: u64,
        documents: I,
    ) -> Result<ShardRef>
    where
        E: Element,
        I: IntoIterator<Item = D>,
        D: AsRef<[E]>,
    {
        let documents = documents.into_iter().map(Ok::<_, Infallible>);
        let written = self
            .try_write_stream_shard(work_id, index, documents)
            .await?;
        Ok(written.unwrap_or_else(|never| match never {}))
    }

    /// [`write_stream_shard`](Self::write_stream_shard) of documents produced fallibly (read
    /// from another storage, say), as [`try_write_shard`](Self::try_write_shard) is to
    /// `write_shard`: the first `Err` stops the write — nothing appears under the key — and
    /// is returned as the inner `Err`; the outer `Err` is the root's.
    pub async fn try_write_stream_shard<E, I, D, X>(
        &self,
        work_id: &str,
        index: u64,
        documents: I,
    ) -> Result<std::result::Result<ShardRef, X>>
    where
        E: Element,
        I: IntoIterator<Item = std::result::Result<D, X>>,
        D: AsRef<[E]>,
    {
        let mut elements = 0u64;
        let records = documents.into_iter().map(|d| {
            let d = d?;
            let d = d.as_ref();
            elements += d.len() as u64;
            Ok(le_bytes(d))
        });
        let written = self
            .try_write_shard(work_id, index, stream_metadata::<E>(), records)
            .await?;
        Ok(written.map(|mut shard| {
            shard.stream = Some(StreamRef {
                element: E::NAME.to_owned(),
                elements,
                meta: None,
            });
            shard
        }))
    }

    /// [`write_stream_shard`](Self::write_stream_shard) of documents each with metadata `M`
    /// (any serde type, stored as CBOR): the tokens as the stream shard, the metadata as
    /// its companion, a native shard of one CBOR record per document at
    /// `shards/<work_id>/<index>.meta.glm`, referenced from the stream shard's
    /// [`StreamRef::meta`] (published with it, its size checked by `publish`). The shape of
    /// guideloom-storage's `StreamWithMetaStorage`, in a root. Memory: one document, the
    /// index, and the encoded metadata of the shard (written once the tokens are). Metadata
    /// that does not encode stops the write ([`Error::InvalidArgument`] naming the
    /// document), nothing published under either key.
    ///
    /// Read back with [`Dataset::document_meta`](crate::Dataset::document_meta).
    pub async fn write_stream_shard_with_meta<E, M, I, D>(
        &self,
        work_id: &str,
        index: u64,
        documents: I,
    ) -> Result<ShardRef>
    where
        E: Element,
        M: Serialize,
        I: IntoIterator<Item = (D, M)>,
        D: AsRef<[E]>,
    {
        let documents = documents.into_iter().map(Ok::<_, Infallible>);
        let written = self
            .try_write_stream_shard_with_meta(work_id, index, documents)
            .await?;
        Ok(written.unwrap_or_else(|never| match never {}))
    }

    /// [`write_stream_shard_with_meta`](Self::write_stream_shard_with_meta) of documents
    /// produced fallibly (read from another storage, say), as
    /// [`try_write_shard`](Self::try_write_shard) is to `write_shard`: the first `Err` stops
    /// the write — nothing appears under either key — and is returned as the inner `Err`;
    /// the outer `Err` is the root's (metadata that does not encode included).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> guideloom_publish::Result<()> {
    /// use guideloom_publish::Root;
    ///
    /// let root = Root::open("memory://try-write-stream-meta", &Default::default(), Default::default())?;
    /// let good = [Ok::<_, String>((vec![1u32, 2], "a")), Ok((vec![], "b"))];
    /// let shard = root.try_write_stream_shard_with_meta("w", 0, good).await?.unwrap();
    /// assert_eq!((shard.record_count, shard.stream.unwrap().elements), (2, 2));
    /// let bad = [Ok((vec![3u32], "c")), Err("document 1 is unreadable".to_owned())];
    /// let err = root.try_write_stream_shard_with_meta("w", 1, bad).await?.unwrap_err();
    /// assert_eq!(err, "document 1 is unreadable");
    /// assert!(root.store().head("shards/w/00000001.glm").await.is_err());
    /// assert!(root.store().head("shards/w/00000001.meta.glm").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn try_write_stream_shard_with_meta<E, M, I, D, X>(
        &self,
        work_id: &str,
        index: u64,
        documents: I,
    ) -> Result<std::result::Result<ShardRef, X>>
    where
        E: Element,
        M: Serialize,
        I: IntoIterator<Item = std::result::Result<(D, M), X>>,
        D: AsRef<[E]>,
    {
        /// Why the token shard's write stopped: the caller's document or its metadata.
        enum Stop<X> {
            Source(X),
            Root(Error),
        }
        check_name("work id", work_id)?;
        let mut elements = 0u64;
        let mut metas: Vec<Vec<u8>> = Vec::new();
        let records = documents.into_iter().map(|item| {
            let (d, m) = item.map_err(Stop::Source)?;
            let mut encoded = Vec::new();
            guideloom_format::cbor::encode_into(&m, &mut encoded).map_err(|e| {
                Stop::Root(Error::invalid(format!(
                    "metadata of document {} of stream shard {work_id}/{index} does not \
                     encode as CBOR: {e}",
                    metas.len()
                )))
            })?;
            metas.push(encoded);
            let d = d.as_ref();
            elements += d.len() as u64;
            Ok::<_, Stop<X>>(le_bytes(d))
        });
        let written = self
            .try_write_shard(work_id, index, stream_metadata::<E>(), records)
            .await?;
        let mut shard = match written {
            Ok(shard) => shard,
            Err(Stop::Source(x)) => return Ok(Err(x)),
            Err(Stop::Root(e)) => return Err(e),
        };
        let key = stream_meta_key(work_id, index);
        let meta_records = metas.into_iter().map(Ok::<Vec<u8>, Infallible>);
        let companion = shards::try_write_key(
            &**self.store(),
            &self.shard_write(),
            key,
            ShardMetadata::new(META_RECORD_FORMAT, KIND_DOCUMENTS),
            meta_records,
        )
        .await?
        .unwrap_or_else(|never| match never {});
        shard.stream = Some(StreamRef {
            element: E::NAME.to_owned(),
            elements,
            meta: Some(CompanionRef {
                key: companion.key,
                size: companion.size,
                checksum: companion.checksum,
            }),
        });
        Ok(Ok(shard))
    }
}
