//! [`TokenWindows`]: fixed-length token windows over a stream dataset, as the records a
//! [`Loader`] shuffles, splits across ranks and resumes — the shape LLM pre-training reads.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use bytes::Bytes;
use guideloom_format::{Element, Elements, RecordSource};

use super::{Loader, LoaderOptions};
use crate::Dataset;
use crate::error::{Error, Result};

/// Fixed-length windows of tokens over the stream of a [`Dataset`] (its documents
/// concatenated, [`Dataset::tokens`]), crossing document and shard boundaries: window `k`
/// starts at token `k × window`. A [`RecordSource`] whose record `k` is window `k`, so a
/// [`Loader`] over it ([`Loader::token_windows`]) orders, batches, splits across ranks and
/// resumes windows exactly as it does records (`docs/loader.md`, "Token windows").
///
/// - [`new`](Self::new): windows of `window` tokens that tile the stream; every token
///   position up to `len() × window` is in exactly one window per epoch.
/// - [`with_next_token_labels`](Self::with_next_token_labels): windows of `window + 1`
///   tokens, still starting every `window` tokens — inputs `w[..window]`, next-token labels
///   `w[1..]` — so every input position is in exactly one window, and the label of a
///   window's last position is the next window's first input.
///
/// **The tail**: the stream's last `tail()` tokens (fewer than `window`; with labels between
/// 1 and `window`, since the very last token has no label) are in no window, every epoch.
///
/// A window is one ranged read per shard it touches (with record CRCs verified, widened to
/// the whole documents it touches); a batch reads all its windows concurrently.
pub struct TokenWindows<E> {
    dataset: Dataset,
    window: u64,
    span: u64,
    count: u64,
    tokens: u64,
    /// Window `k` belongs to the shard holding its first token: `[0, .., count]`.
    bounds: Vec<u64>,
    _element: PhantomData<fn() -> E>,
}

impl<E> fmt::Debug for TokenWindows<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenWindows")
            .field("dataset", &self.dataset.root().store().describe())
            .field("window", &self.window)
            .field("span", &self.span)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl<E: Element> TokenWindows<E> {
    /// Windows of `window` tokens over `dataset`'s stream (no request: the layout is the
    /// manifest's). `publish::Error::ElementMismatch` if the stream does not hold `E`s,
    /// `publish::Error::NotAStream` if the dataset is not a stream, [`Error::WindowTooLarge`] if
    /// not one window fits, [`Error::InvalidOptions`] for a window of 0 tokens.
    pub fn new(dataset: Dataset, window: u64) -> Result<Self> {
        Self::build(dataset, window, 0)
    }

    /// Windows of `window + 1` tokens starting every `window` tokens: the inputs and their
    /// next-token labels (`w[..window]`, `w[1..]`). Errors as [`new`](Self::new).
    pub fn with_next_token_labels(dataset: Dataset, window: u64) -> Result<Self> {
        Self::build(dataset, window, 1)
    }

    fn build(dataset: Dataset, window: u64, extra: u64) -> Result<Self> {
        if window == 0 {
            return Err(Error::InvalidOptions {
                reason: "a token window must hold at least one token".into(),
            });
        }
        let layout = dataset.stream_of::<E>()?;
        let tokens = layout.len();
        let span = window.saturating_add(extra);
        if span > tokens {
            return Err(Error::WindowTooLarge { span, tokens });
        }
        let count = (tokens - extra) / window;
        let bounds = layout
            .table()
            .starts()
            .iter()
            .map(|&s| s.div_ceil(window).min(count))
            .collect();
        Ok(TokenWindows {
            dataset,
            window,
            span,
            count,
            tokens,
            bounds,
            _element: PhantomData,
        })
    }

    /// Number of windows.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// `true` when there is no window (never: construction refuses a stream too short).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The stride: tokens between window starts, and input tokens per window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Tokens one window holds: `window`, or `window + 1` with next-token labels.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// Tokens at the end of the stream that are the input of no window.
    pub fn tail(&self) -> u64 {
        self.tokens - self.count * self.window
    }

    /// The token range of window `k` in the stream.
    pub fn range(&self, k: u64) -> Range<u64> {
        let start = k.saturating_mul(self.window);
        start..start.saturating_add(self.span)
    }

    /// Window `k`'s tokens. `publish::Error::OutOfRange` (kind [`ErrorKind::OutOfRange`](crate::ErrorKind::OutOfRange)) past the last window.
    pub fn get(&self, k: u64) -> Result<Elements<E>> {
        let mut got = self.get_many(&[k])?;
        Ok(Elements::from_le_bytes(got.pop().unwrap_or_default()))
    }

    /// The dataset read.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }
}

impl<E: Element> RecordSource for TokenWindows<E> {
    type Error = Error;

    fn name(&self) -> String {
        format!(
            "{}-token windows of {}",
            self.span,
            RecordSource::name(&self.dataset)
        )
    }
    fn len(&self) -> u64 {
        self.count
    }
    fn get_many(&self, indices: &[u64]) -> Result<Vec<Bytes>> {
        let ranges = indices
            .iter()
            .map(|&k| {
                if k < self.count {
                    Ok(self.range(k))
                } else {
                    Err(Error::out_of_range(k, self.count, "token windows"))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        crate::publisher::run(self.dataset.read_elements_many_async(&ranges))
    }
    fn shard_bounds(&self) -> Option<&[u64]> {
        Some(&self.bounds)
    }
    fn is_remote(&self) -> bool {
        RecordSource::is_remote(&self.dataset)
    }
}

impl<E: Element> Loader<Elements<E>> {
    /// A loader of token windows: each batch's records are windows of `windows`
    /// ([`TokenWindows`]), its indices the window numbers. Order, ranks, equalisation and
    /// resume are the loader's, with window `k` as record `k`.
    ///
    /// ```
    /// # fn main() -> guideloom::Result<()> {
    /// use guideloom::{Loader, LoaderOptions, PublishMode, Publisher, TokenWindows};
    ///
    /// let publisher = Publisher::open("memory://token-windows-doc")?;
    /// let docs: Vec<Vec<u16>> = (0..10u16).map(|d| (0..7).map(|t| d * 7 + t).collect()).collect();
    /// let shard = publisher.write_stream_shard("w", 0, &docs)?; // 70 tokens
    /// publisher.publish("corpus", "v1", vec![shard], PublishMode::Full)?;
    ///
    /// let windows = TokenWindows::<u16>::with_next_token_labels(publisher.dataset()?, 8)?;
    /// assert_eq!((windows.len(), windows.span(), windows.tail()), (8, 9, 6));
    /// let loader = Loader::token_windows(windows, LoaderOptions::new(4).with_seed(1))?;
    /// for batch in loader.epoch(0)? {
    ///     let batch = batch?;
    ///     for (k, w) in batch.indices.iter().zip(&batch.records) {
    ///         let first = u16::try_from(k * 8).unwrap();
    ///         assert_eq!(&w[..], &(first..first + 9).collect::<Vec<u16>>()[..]);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn token_windows(windows: TokenWindows<E>, options: LoaderOptions) -> Result<Self> {
        Loader::new(windows, options, |_k, bytes: Bytes| {
            Ok::<_, Error>(Elements::<E>::from_le_bytes(bytes))
        })
    }
}
