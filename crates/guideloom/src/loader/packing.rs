//! [`Packing`]: best-fit packing of whole documents into fixed-length windows, a pure
//! function of the documents' lengths and `(seed, epoch)` (`docs/loader.md`, "Packed
//! windows"). The windows as records of a [`Loader`](super::Loader) are `packed.rs`.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use super::order::{Permutation, derive_key};
use crate::Dataset;
use crate::error::{Error, Result};

/// The salt of the document permutation a packing starts from: `"packed!!"`.
pub const SALT_PACK: u64 = 0x7061_636B_6564_2121;

/// Pieces sorted together (longest first) before they are placed: the default of
/// [`PackOptions::with_buffer`].
pub const DEFAULT_PACK_BUFFER: u64 = 4096;

/// How documents are packed into windows ([`Packing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PackOptions {
    /// Input tokens per window.
    pub seq_len: u64,
    /// Windows hold `seq_len + 1` tokens (inputs `w[..seq_len]`, next-token labels `w[1..]`),
    /// and a long document's pieces overlap by one token so that every next-token pair of it
    /// is in exactly one window.
    pub next_token_labels: bool,
    /// The seed of the document permutation.
    pub seed: u64,
    /// The epoch of the document permutation: each epoch packs differently.
    pub epoch: u64,
    /// Pieces sorted by length (longest first) as one group before they are placed.
    pub buffer: u64,
}

impl PackOptions {
    /// Windows of `seq_len` tokens, seed 0, epoch 0, [`DEFAULT_PACK_BUFFER`], no labels.
    pub fn new(seq_len: u64) -> Self {
        PackOptions {
            seq_len,
            next_token_labels: false,
            seed: 0,
            epoch: 0,
            buffer: DEFAULT_PACK_BUFFER,
        }
    }

    /// Windows of `seq_len + 1` tokens with next-token labels (see the field).
    #[must_use]
    pub fn with_next_token_labels(mut self) -> Self {
        self.next_token_labels = true;
        self
    }

    /// The seed of the document permutation.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The epoch of the document permutation.
    #[must_use]
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// Pieces sorted together before they are placed (at least 1; 1 is plain online
    /// best-fit in the shuffled order).
    #[must_use]
    pub fn with_buffer(mut self, buffer: u64) -> Self {
        self.buffer = buffer;
        self
    }

    /// Tokens a window holds: `seq_len`, or `seq_len + 1` with next-token labels.
    pub fn capacity(&self) -> u64 {
        self.seq_len
            .saturating_add(u64::from(self.next_token_labels))
    }

    fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidOptions { reason });
        if self.seq_len == 0 {
            return invalid("a packed window must hold at least one token".into());
        }
        if self.capacity() > u64::from(u32::MAX) {
            return invalid(format!(
                "a packed window of {} tokens is larger than 2^32 - 1",
                self.capacity()
            ));
        }
        if self.buffer == 0 {
            return invalid("the packing buffer must hold at least one piece".into());
        }
        Ok(())
    }
}

/// Whole documents packed best-fit into windows of [`capacity`](Self::capacity) tokens:
/// which token ranges of the stream each window holds, in order. A pure function of the
/// documents' lengths and the [`PackOptions`] (`docs/loader.md`, "Packed windows"):
///
/// 1. documents are taken in the order of §1's permutation with key
///    `derive_key(seed, epoch, SALT_PACK, 0)`; an empty one is skipped;
/// 2. a document longer than the capacity `C` is cut into pieces of `C` tokens starting every
///    `C` tokens (every `C − 1` with next-token labels, so that consecutive pieces share one
///    token), the last piece shorter; any other document is one piece;
/// 3. the pieces, in that order, are cut into groups of `buffer`; each group is stably sorted
///    by length, longest first;
/// 4. each piece goes to the open window with the least room that fits it (among those, the
///    one that reached that room last), else to a new window.
///
/// Every token of every document is in exactly one window (with labels: every next-token
/// pair of a document is inside exactly one window; a token shared by two pieces of a long
/// document is in both). Nothing is truncated; the only waste is padding after a window's
/// last piece. Memory: 12 bytes per piece and 8 per window kept, plus the documents' bounds
/// (8 bytes per document, shared by [`repack`](Self::repack)); the build also holds 24 bytes
/// per piece for a moment.
///
/// ```
/// use guideloom::{PackOptions, Packing};
///
/// let lengths = [700u64, 300, 100, 900, 20, 5000, 0, 60];
/// let packing = Packing::from_document_lengths(&lengths, PackOptions::new(1024).with_seed(7))?;
/// assert_eq!(packing.tokens(), lengths.iter().sum::<u64>()); // every token once
/// for k in 0..packing.len() {
///     let held: u64 = packing.pieces(k).map(|r| r.end - r.start).sum();
///     assert!(held <= 1024);
/// }
/// assert_eq!(packing.len(), 7); // 7 080 tokens in 7 windows of 1 024: 1.2 % padding
/// # Ok::<(), guideloom::Error>(())
/// ```
#[derive(Clone)]
pub struct Packing {
    options: PackOptions,
    /// Document `d` covers stream tokens `bounds[d]..bounds[d + 1]`.
    bounds: Arc<[u64]>,
    /// Piece `j` is stream tokens `starts[j]..starts[j] + lens[j]`, grouped by window.
    starts: Vec<u64>,
    lens: Vec<u32>,
    /// Window `k` holds pieces `windows[k]..windows[k + 1]`.
    windows: Vec<u64>,
    tokens: u64,
}

impl fmt::Debug for Packing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packing")
            .field("options", &self.options)
            .field("documents", &self.documents())
            .field("windows", &self.len())
            .field("pieces", &self.lens.len())
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl Packing {
    /// Packs documents of the given lengths, laid end to end in a stream from token 0.
    /// [`Error::InvalidOptions`] for a window of no token (or above 2^32 − 1) or a buffer
    /// of 0.
    pub fn from_document_lengths(lengths: &[u64], options: PackOptions) -> Result<Self> {
        let mut bounds = Vec::with_capacity(lengths.len() + 1);
        let mut at = 0u64;
        bounds.push(0);
        for &l in lengths {
            at = at.checked_add(l).ok_or_else(|| Error::InvalidOptions {
                reason: "document lengths overflow u64".into(),
            })?;
            bounds.push(at);
        }
        Self::from_bounds(bounds.into(), options)
    }

    /// Packs the documents of a stream dataset (their bounds from the shards' indexes: one
    /// tail read per shard not yet open). `publish::Error::NotAStream` if it is not a stream;
    /// errors of options as [`from_document_lengths`](Self::from_document_lengths).
    pub fn of(dataset: &Dataset, options: PackOptions) -> Result<Self> {
        options.validate()?;
        dataset.stream()?;
        let n = dataset.len();
        let bounds = crate::publisher::run(async {
            let mut bounds = Vec::with_capacity(usize::try_from(n).unwrap_or(0) + 1);
            bounds.push(0u64);
            for d in 0..n {
                let range = dataset.document_range_async(d).await?;
                // Documents are laid end to end: the stream is their concatenation.
                debug_assert_eq!(bounds.last(), Some(&range.start));
                bounds.push(range.end);
            }
            Ok::<_, crate::publish::Error>(bounds)
        })?;
        Self::from_bounds(bounds.into(), options)
    }

    /// The same documents packed for another epoch (no read).
    pub fn repack(&self, epoch: u64) -> Self {
        let options = self.options.with_epoch(epoch);
        // The options were validated when `self` was built.
        let (starts, lens, windows, tokens) = pack(&self.bounds, &options);
        Packing {
            options,
            bounds: Arc::clone(&self.bounds),
            starts,
            lens,
            windows,
            tokens,
        }
    }

    fn from_bounds(bounds: Arc<[u64]>, options: PackOptions) -> Result<Self> {
        options.validate()?;
        let (starts, lens, windows, tokens) = pack(&bounds, &options);
        Ok(Packing {
            options,
            bounds,
            starts,
            lens,
            windows,
            tokens,
        })
    }

    /// The options packed with.
    pub fn options(&self) -> &PackOptions {
        &self.options
    }

    /// Tokens a window holds ([`PackOptions::capacity`]).
    pub fn capacity(&self) -> u64 {
        self.options.capacity()
    }

    /// Number of windows.
    pub fn len(&self) -> u64 {
        self.windows.len() as u64 - 1
    }

    /// `true` when no document has a token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Documents packed (empty ones included).
    pub fn documents(&self) -> u64 {
        self.bounds.len() as u64 - 1
    }

    /// Pieces in all windows (documents, or pieces of long ones).
    pub fn num_pieces(&self) -> u64 {
        self.lens.len() as u64
    }

    /// Tokens in all windows (without padding).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The mixture weight that gives these windows `share` of a mixture's *tokens* (not of
    /// its windows): `share` over the mean tokens per window, so a corpus whose windows carry
    /// more padding gets proportionally more windows ([`PackedWindows::token_share`]).
    ///
    /// [`PackedWindows::token_share`]: crate::PackedWindows::token_share
    pub fn token_weight(&self, share: f64) -> f64 {
        let per_window = self.tokens as f64 / self.len().max(1) as f64;
        share / per_window.max(1.0)
    }

    /// Padding tokens: `len() × capacity() − tokens()`.
    pub fn padding_tokens(&self) -> u64 {
        self.len() * self.capacity() - self.tokens
    }

    /// The padded share of all window tokens (0 when there is no window).
    pub fn padding_fraction(&self) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        self.padding_tokens() as f64 / (self.len() * self.capacity()) as f64
    }

    /// The stream token ranges window `k` holds, in order (nothing past the last window).
    pub fn pieces(&self, k: u64) -> impl ExactSizeIterator<Item = Range<u64>> + '_ {
        let span = self.span(k);
        self.starts[span.clone()]
            .iter()
            .zip(&self.lens[span])
            .map(|(&s, &l)| s..s + u64::from(l))
    }

    /// The lengths of window `k`'s pieces (empty past the last window).
    pub fn piece_lengths(&self, k: u64) -> &[u32] {
        &self.lens[self.span(k)]
    }

    /// Tokens window `k` holds (without padding).
    pub fn window_tokens(&self, k: u64) -> u64 {
        self.piece_lengths(k).iter().map(|&l| u64::from(l)).sum()
    }

    fn span(&self, k: u64) -> Range<usize> {
        let at = |k: u64| {
            usize::try_from(k)
                .ok()
                .and_then(|k| self.windows.get(k))
                .map_or(self.lens.len(), |&j| at(j))
        };
        at(k)..at(k.saturating_add(1)).max(at(k))
    }
}

/// A position in an in-memory table (the documents' bounds, the pieces): it fits `usize`,
/// since the table is held.
fn at(i: u64) -> usize {
    usize::try_from(i).unwrap_or(usize::MAX)
}

/// The pieces of every document (step 2 of [`Packing`]) in permuted order, placed in groups
/// (steps 3–4); returns `(starts, lens, windows, tokens)` grouped by window.
fn pack(bounds: &[u64], options: &PackOptions) -> (Vec<u64>, Vec<u32>, Vec<u64>, u64) {
    let n = bounds.len() as u64 - 1;
    // Validated: the capacity fits u32.
    let cap = u32::try_from(options.capacity()).unwrap_or(u32::MAX);
    let stride = u64::from(cap) - u64::from(options.next_token_labels);
    let buffer = at(options.buffer);
    let perm = Permutation::new(n, derive_key(options.seed, options.epoch, SALT_PACK, 0));
    let mut placer = Placer::new(cap);
    let mut group: Vec<(u64, u32)> = Vec::with_capacity(buffer.min(1 << 16));
    for p in 0..n {
        let d = at(perm.apply(p));
        let (mut s, e) = (bounds[d], bounds[d + 1]);
        while s < e {
            // A piece of at most `cap` tokens; the next starts `stride` later unless this one
            // reaches the end.
            let len = u32::try_from(e - s).unwrap_or(cap).min(cap);
            group.push((s, len));
            if group.len() == buffer {
                placer.place_group(&mut group);
            }
            s = if u64::from(len) == e - s {
                e
            } else {
                s + stride
            };
        }
    }
    placer.place_group(&mut group);
    placer.finish()
}

/// Best-fit placement: open windows by remaining room, a stack per room value.
struct Placer {
    cap: u32,
    /// Room → windows with exactly that room (> 0), the one that reached it last on top.
    free: BTreeMap<u32, Vec<usize>>,
    windows: usize,
    /// `(start, len, window)` of every piece in placement order.
    placed: Vec<(u64, u32, usize)>,
}

impl Placer {
    fn new(cap: u32) -> Self {
        Placer {
            cap,
            free: BTreeMap::new(),
            windows: 0,
            placed: Vec::new(),
        }
    }

    fn place_group(&mut self, group: &mut Vec<(u64, u32)>) {
        group.sort_by_key(|&(_, len)| std::cmp::Reverse(len)); // stable: ties keep their order
        for &(start, len) in group.iter() {
            let fit = self.free.range_mut(len..).next().map(|(&room, stack)| {
                let window = stack.pop().unwrap_or_default();
                (room, window, stack.is_empty())
            });
            let (window, left) = match fit {
                Some((room, window, emptied)) => {
                    if emptied {
                        self.free.remove(&room);
                    }
                    (window, room - len)
                }
                None => {
                    self.windows += 1;
                    (self.windows - 1, self.cap - len)
                }
            };
            if left > 0 {
                self.free.entry(left).or_default().push(window);
            }
            self.placed.push((start, len, window));
        }
        group.clear();
    }

    fn finish(self) -> (Vec<u64>, Vec<u32>, Vec<u64>, u64) {
        // A counting sort by window, placement order kept within each.
        let mut windows = vec![0u64; self.windows + 1];
        for &(_, _, w) in &self.placed {
            windows[w + 1] += 1;
        }
        for k in 1..windows.len() {
            windows[k] += windows[k - 1];
        }
        let mut next: Vec<usize> = windows[..self.windows].iter().map(|&j| at(j)).collect();
        let mut starts = vec![0u64; self.placed.len()];
        let mut lens = vec![0u32; self.placed.len()];
        let mut tokens = 0u64;
        for &(s, l, w) in &self.placed {
            let j = next[w];
            next[w] += 1;
            starts[j] = s;
            lens[j] = l;
            tokens += u64::from(l);
        }
        (starts, lens, windows, tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_fills_the_tightest_window_and_splits_long_documents() {
        // Sequential-looking: one group, sorted longest first: 10 | 6 4 | 5 3 (+2 padding).
        let p = Packing::from_document_lengths(&[6, 4, 5, 3, 10], PackOptions::new(10)).unwrap();
        let mut sizes: Vec<Vec<u32>> = (0..p.len()).map(|k| p.piece_lengths(k).to_vec()).collect();
        sizes.sort();
        assert_eq!(sizes, [vec![5, 3], vec![6, 4], vec![10]]);
        assert_eq!((p.tokens(), p.padding_tokens()), (28, 2));

        // 25 tokens in windows of 10: pieces 10, 10, 5; with labels (capacity 11) pieces
        // start every 10 tokens and share one: 0..11, 10..21, 20..25.
        let p = Packing::from_document_lengths(&[25], PackOptions::new(10)).unwrap();
        assert_eq!(p.tokens(), 25);
        let p =
            Packing::from_document_lengths(&[25], PackOptions::new(10).with_next_token_labels())
                .unwrap();
        let mut pieces: Vec<Range<u64>> = (0..p.len()).flat_map(|k| p.pieces(k)).collect();
        pieces.sort_by_key(|r| r.start);
        assert_eq!(pieces, [0..11, 10..21, 20..25]);
    }

    #[test]
    fn the_epoch_changes_the_packing_and_bad_options_are_typed() {
        let lengths: Vec<u64> = (0..200).map(|i| (i * 37) % 300).collect();
        let o = PackOptions::new(256).with_seed(3);
        let a = Packing::from_document_lengths(&lengths, o).unwrap();
        let b = a.repack(1);
        let layout = |p: &Packing| -> Vec<Vec<Range<u64>>> {
            (0..p.len()).map(|k| p.pieces(k).collect()).collect()
        };
        assert_eq!(
            layout(&a),
            layout(&Packing::from_document_lengths(&lengths, o).unwrap())
        );
        assert_ne!(layout(&a), layout(&b));
        assert_eq!(a.tokens(), b.tokens());
        for bad in [PackOptions::new(0), PackOptions::new(8).with_buffer(0)] {
            let e = Packing::from_document_lengths(&[1], bad).unwrap_err();
            assert!(matches!(e, Error::InvalidOptions { .. }), "{e}");
        }
    }
}
