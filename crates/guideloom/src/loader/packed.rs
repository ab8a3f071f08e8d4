//! [`PackedWindows`]: the windows of a [`Packing`] over a stream dataset as the records of a
//! [`Loader`], and [`PackedWindow`], what such a loader hands out.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use guideloom_format::{Element, Elements, RecordSource};

use super::mixture::{Mixture, Take};
use super::packing::{PackOptions, Packing};
use super::{Loader, LoaderOptions};
use crate::Dataset;
use crate::error::{Error, Result};

/// The windows of a [`Packing`] of a stream [`Dataset`]'s documents: a [`RecordSource`]
/// whose record `k` is window `k`'s pieces back to back (no padding). A [`Loader`] over it
/// ([`Loader::packed_windows`]) shuffles, batches, splits across ranks and resumes windows
/// exactly as it does records (`docs/loader.md`, "Packed windows").
///
/// A packing belongs to one `(seed, epoch)`: build the windows of epoch `e` (or
/// [`repack`](Self::repack)) before `loader.epoch(e)` or `loader.resume(&state)` with
/// `state.epoch == e`. Reading window `k` is one ranged read per piece, all the pieces of a
/// batch concurrently. The windows have no shard locality, so `ShuffleMode::Auto` is a
/// full shuffle of the windows.
pub struct PackedWindows<E> {
    dataset: Dataset,
    packing: Arc<Packing>,
    _element: PhantomData<fn() -> E>,
}

impl<E> fmt::Debug for PackedWindows<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackedWindows")
            .field("dataset", &self.dataset.root().store().describe())
            .field("packing", &self.packing)
            .finish()
    }
}

impl<E> Clone for PackedWindows<E> {
    fn clone(&self) -> Self {
        PackedWindows {
            dataset: self.dataset.clone(),
            packing: Arc::clone(&self.packing),
            _element: PhantomData,
        }
    }
}

impl<E: Element> PackedWindows<E> {
    /// Packs `dataset`'s documents ([`Packing::of`]). `publish::Error::ElementMismatch` if
    /// the stream does not hold `E`s, `publish::Error::NotAStream` if it is not a stream,
    /// [`Error::InvalidOptions`] for bad options.
    pub fn new(dataset: Dataset, options: PackOptions) -> Result<Self> {
        dataset.stream_of::<E>()?;
        let packing = Packing::of(&dataset, options)?;
        Ok(PackedWindows {
            dataset,
            packing: Arc::new(packing),
            _element: PhantomData,
        })
    }

    /// The windows of `packing`, a packing already made of `dataset`'s documents
    /// ([`Packing::of`] or [`Packing::from_document_lengths`] over its document lengths):
    /// what a caller holding both (the Python package's `Packing`) mixes without packing
    /// again. `publish::Error::ElementMismatch` if the stream does not hold `E`s,
    /// [`Error::InvalidOptions`] if the packing counts another number of documents.
    ///
    /// ```
    /// # fn main() -> guideloom::Result<()> {
    /// use std::sync::Arc;
    /// use guideloom::{PackOptions, PackedWindows, Packing, PublishMode, Publisher};
    ///
    /// let publisher = Publisher::open("memory://packed-from-packing")?;
    /// let docs: Vec<Vec<u16>> = (1..=40u16).map(|d| vec![d; usize::from(d)]).collect();
    /// let shard = publisher.write_stream_shard("w", 0, &docs)?;
    /// publisher.publish("docs", "v1", vec![shard], PublishMode::Full)?;
    /// let dataset = publisher.dataset()?;
    /// let packing = Arc::new(Packing::of(&dataset, PackOptions::new(64))?);
    /// let windows = PackedWindows::<u16>::from_packing(dataset.clone(), Arc::clone(&packing))?;
    /// assert_eq!(windows.len(), packing.len());
    /// let tokens: u64 = packing.pieces(0).map(|r| r.end - r.start).sum();
    /// assert_eq!(windows.get(0)?.tokens.len() as u64, tokens);
    /// // Another element type than the stream's, or a packing of other documents, is refused.
    /// assert!(PackedWindows::<u32>::from_packing(dataset.clone(), packing).is_err());
    /// let other = Arc::new(Packing::from_document_lengths(&[5, 9], PackOptions::new(64))?);
    /// assert!(PackedWindows::<u16>::from_packing(dataset, other).is_err());
    /// # Ok(()) }
    /// ```
    pub fn from_packing(dataset: Dataset, packing: Arc<Packing>) -> Result<Self> {
        dataset.stream_of::<E>()?;
        if packing.documents() != dataset.len() {
            return Err(Error::InvalidOptions {
                reason: format!(
                    "a packing of {} documents cannot be of a stream of {}",
                    packing.documents(),
                    dataset.len()
                ),
            });
        }
        Ok(PackedWindows {
            dataset,
            packing,
            _element: PhantomData,
        })
    }

    /// The same documents packed for `epoch` (no read).
    #[must_use]
    pub fn repack(&self, epoch: u64) -> Self {
        PackedWindows {
            dataset: self.dataset.clone(),
            packing: Arc::new(self.packing.repack(epoch)),
            _element: PhantomData,
        }
    }

    /// The layout: which token ranges each window holds.
    pub fn packing(&self) -> &Packing {
        &self.packing
    }

    /// Number of windows.
    pub fn len(&self) -> u64 {
        self.packing.len()
    }

    /// `true` when there is no window (no document has a token).
    pub fn is_empty(&self) -> bool {
        self.packing.is_empty()
    }

    /// The dataset read.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// The [`Mixture`] weight that gives these windows `share` of a mixture's *tokens*
    /// (not of its windows): `share` divided by the mean tokens per window, so a corpus whose
    /// windows carry more padding gets proportionally more windows. See
    /// [`Loader::packed_mixture`].
    pub fn token_share(&self, share: f64) -> Take {
        Take::Weight(self.packing.token_weight(share))
    }

    /// Window `k`. `publish::Error::OutOfRange` past the last window.
    pub fn get(&self, k: u64) -> Result<PackedWindow<E>> {
        let bytes = self.get_many(&[k])?.pop().unwrap_or_default();
        Ok(PackedWindow::new(&self.packing, k, bytes))
    }
}

impl<E: Element> RecordSource for PackedWindows<E> {
    type Error = Error;

    fn name(&self) -> String {
        format!(
            "{}-token packed windows of {}",
            self.packing.capacity(),
            RecordSource::name(&self.dataset)
        )
    }
    fn len(&self) -> u64 {
        self.packing.len()
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let mut ranges = Vec::new();
        let mut counts = Vec::with_capacity(indices.len());
        for &k in indices {
            if k >= self.packing.len() {
                return Err(Error::out_of_range(k, self.packing.len(), "packed windows"));
            }
            let pieces = self.packing.pieces(k);
            counts.push(pieces.len());
            ranges.extend(pieces);
        }
        let read = crate::publisher::run(self.dataset.read_elements_many_async(&ranges))?;
        let mut read = read.into_iter();
        Ok(counts
            .into_iter()
            .map(|count| {
                let pieces: Vec<Bytes> = read.by_ref().take(count).collect();
                if pieces.len() == 1 {
                    return pieces.into_iter().next().unwrap_or_default();
                }
                let mut out = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
                for p in &pieces {
                    out.extend_from_slice(p);
                }
                out.freeze()
            })
            .collect())
    }
    fn is_remote(&self) -> bool {
        RecordSource::is_remote(&self.dataset)
    }
}

/// One packed window: its pieces' tokens back to back and their lengths. The padding (up to
/// [`capacity`](Self::capacity)) is not stored: [`padded`](Self::padded) adds it.
#[derive(Debug, Clone)]
pub struct PackedWindow<E: Element> {
    /// The window's number in its packing.
    pub index: u64,
    /// The pieces' tokens, back to back (at most `capacity` of them).
    pub tokens: Elements<E>,
    /// The pieces' lengths, in order (they sum to `tokens.len()`).
    pub lengths: Vec<u32>,
    /// Tokens the window holds with its padding.
    pub capacity: u64,
}

impl<E: Element> PackedWindow<E> {
    fn new(packing: &Packing, index: u64, bytes: Bytes) -> Self {
        PackedWindow {
            index,
            tokens: Elements::from_le_bytes(bytes),
            lengths: packing.piece_lengths(index).to_vec(),
            capacity: packing.capacity(),
        }
    }

    /// Padding tokens after the last piece.
    pub fn padding(&self) -> u64 {
        self.capacity - self.tokens.len() as u64
    }

    /// Each token's position in its piece: `0, 1, ..` restarting at every piece (one per
    /// token, padding excluded).
    pub fn position_ids(&self) -> Vec<u32> {
        self.lengths.iter().flat_map(|&l| 0..l).collect()
    }

    /// Each token's piece number, from 1 (one per token, padding excluded; padding is
    /// segment 0 by convention).
    pub fn segment_ids(&self) -> Vec<u32> {
        (1u32..)
            .zip(&self.lengths)
            .flat_map(|(s, &l)| std::iter::repeat_n(s, l as usize))
            .collect()
    }

    /// The tokens followed by `pad` up to [`capacity`](Self::capacity).
    pub fn padded(&self, pad: E) -> Vec<E> {
        let capacity = usize::try_from(self.capacity).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(&self.tokens);
        out.resize(capacity.max(out.len()), pad);
        out
    }
}

impl<E: Element> Loader<PackedWindow<E>> {
    /// A loader of packed windows ([`PackedWindows`]): each batch's records are windows of
    /// whole documents, its indices the window numbers. Order, ranks, equalisation and resume
    /// are the loader's, with window `k` as record `k`; the packing is the windows' epoch's.
    ///
    /// ```
    /// # fn main() -> guideloom::Result<()> {
    /// use guideloom::{Loader, LoaderOptions, PackOptions, PackedWindows, PublishMode, Publisher};
    ///
    /// let publisher = Publisher::open("memory://packed-windows-doc")?;
    /// // 30 documents of 1 to 30 tokens; document d holds the token d.
    /// let docs: Vec<Vec<u16>> = (1..=30u16).map(|d| vec![d; usize::from(d)]).collect();
    /// let shard = publisher.write_stream_shard("w", 0, &docs)?;
    /// publisher.publish("corpus", "v1", vec![shard], PublishMode::Full)?;
    ///
    /// let seed = 3;
    /// for epoch in 0..2 {
    ///     let options = PackOptions::new(64).with_next_token_labels().with_seed(seed).with_epoch(epoch);
    ///     let windows = PackedWindows::<u16>::new(publisher.dataset()?, options)?;
    ///     let loader = Loader::packed_windows(windows, LoaderOptions::new(2).with_seed(seed))?;
    ///     let mut tokens = 0;
    ///     for batch in loader.epoch(epoch)? {
    ///         for w in batch?.records {
    ///             assert!(w.tokens.len() <= 65); // 64 inputs + 1 label
    ///             let (ids, pos) = (w.segment_ids(), w.position_ids());
    ///             for (t, (&tok, &p)) in w.tokens.iter().zip(&pos).enumerate() {
    ///                 // Whole documents: a piece starts where its document starts.
    ///                 assert_eq!(p == 0, t == 0 || ids[t - 1] != ids[t]);
    ///                 assert_eq!(w.lengths[ids[t] as usize - 1], u32::from(tok));
    ///             }
    ///             tokens += w.tokens.len();
    ///         }
    ///     }
    ///     assert_eq!(tokens, 465); // every token once
    /// }
    /// # Ok(()) }
    /// ```
    pub fn packed_windows(windows: PackedWindows<E>, options: LoaderOptions) -> Result<Self> {
        let packing = Arc::clone(&windows.packing);
        Loader::new(windows, options, move |k, bytes: Bytes| {
            Ok::<_, Error>(PackedWindow::new(&packing, k, bytes))
        })
    }

    /// A loader over several packed corpora **mixed by token share**: corpus `s` gives about
    /// `share_s / Σ shares` of the tokens of any long enough span of batches (a weighted
    /// [`Mixture`] with [`PackedWindows::token_share`] weights, so the split of windows is the
    /// mixture's exact one and the token split is off only by the spread of tokens per
    /// window, at most the padding). The epoch is the windows of all corpora
    /// ([`Loader::mixture`] for another size or a schedule: give it these weights). Each
    /// batch's records are [`PackedWindow`]s whose `index` is the corpus's own window number;
    /// the batch's `indices` are mixture ids. Order, ranks and resume are the mixture's: a
    /// pure function of `(seed, epoch, position)`, whose packings stay those of the windows
    /// given (no repacking per epoch: the mixture's passes reshuffle the windows).
    ///
    /// # Errors
    /// [`Error::InvalidOptions`] with no corpus, windows of different capacities (a batch's
    /// windows must have one length) or a bad share; the mixture's errors.
    ///
    /// ```
    /// # fn main() -> guideloom::Result<()> {
    /// use guideloom::{Loader, LoaderOptions, PackOptions, PackedWindows, PublishMode, Publisher};
    ///
    /// // Short web documents (tokens < 1000) and longer code files (tokens >= 1000).
    /// let corpus = |name: &str, token: u16, length: u16| -> guideloom::Result<PackedWindows<u16>> {
    ///     let publisher = Publisher::open(&format!("memory://packed-mixture-{name}"))?;
    ///     let docs: Vec<Vec<u16>> =
    ///         (0..600u16).map(|d| vec![token; usize::from(1 + d * 7 % length)]).collect();
    ///     let shard = publisher.write_stream_shard("w", 0, &docs)?;
    ///     publisher.publish(name, "v1", vec![shard], PublishMode::Full)?;
    ///     PackedWindows::new(publisher.dataset()?, PackOptions::new(128))
    /// };
    /// let (web, code) = (corpus("web", 7, 40)?, corpus("code", 1000, 300)?);
    /// let loader = Loader::packed_mixture(vec![(web, 0.75), (code, 0.25)], LoaderOptions::new(8))?;
    /// let mut tokens = [0usize; 2]; // web, code
    /// for batch in loader.epoch(0)? {
    ///     for w in batch?.records {
    ///         tokens[usize::from(w.tokens[0] >= 1000)] += w.tokens.len();
    ///     }
    /// }
    /// let code_share = tokens[1] as f64 / (tokens[0] + tokens[1]) as f64;
    /// assert!((code_share - 0.25).abs() < 0.01, "{code_share}");
    /// # Ok(()) }
    /// ```
    pub fn packed_mixture(
        sources: Vec<(PackedWindows<E>, f64)>,
        options: LoaderOptions,
    ) -> Result<Self> {
        let capacities: Vec<u64> = sources.iter().map(|(w, _)| w.packing.capacity()).collect();
        if capacities.windows(2).any(|c| c[0] != c[1]) {
            return Err(Error::InvalidOptions {
                reason: format!(
                    "packed corpora of one mixture need one window size, not {capacities:?}"
                ),
            });
        }
        if let Some((_, bad)) = sources.iter().find(|(_, s)| !(s.is_finite() && *s >= 0.0)) {
            return Err(Error::InvalidOptions {
                reason: format!("a token share must be finite and not negative, not {bad}"),
            });
        }
        let packings: Vec<Arc<Packing>> = sources
            .iter()
            .map(|(w, _)| Arc::clone(&w.packing))
            .collect();
        let mixture = sources.into_iter().fold(Mixture::new(), |m, (w, share)| {
            let take = w.token_share(share);
            m.with_source(w, take)
        });
        let locate = mixture.clone();
        Loader::mixture(mixture, options, move |id, bytes: Bytes| {
            let (s, k) = locate
                .locate(id)
                .ok_or_else(|| Error::out_of_range(id, locate.len(), "packed mixture"))?;
            Ok::<_, Error>(PackedWindow::new(&packings[s], k, bytes))
        })
    }
}
