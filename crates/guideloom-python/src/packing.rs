//! `Packing`: the facade's best-fit packing of a token stream's whole documents into
//! windows (`guideloom::Packing`, docs/loader.md "Packed windows"), with the batch of
//! training arrays a window list makes (`input_ids`, `labels`, `position_ids`) built in Rust
//! with the GIL released. `guideloom.torch.PackedTokens` draws its batches from it, in the
//! order of an `EpochPlan` over the window numbers.

use std::sync::Arc;

use guideloom::bytes::Bytes;
use guideloom::{DEFAULT_PACK_BUFFER, PackOptions};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dataset::Dataset;
use crate::errors::{Error, raise};
use crate::runtime::block_on;
use crate::tokens::stream_error;

/// The documents of a token-stream `Dataset` packed best-fit into windows of `seq_len`
/// tokens (`seq_len + 1` with `labels`, the next-token convention), for `(seed, epoch)`.
#[pyclass(frozen, module = "guideloom._guideloom")]
#[derive(Debug)]
pub(crate) struct Packing {
    dataset: Py<Dataset>,
    packing: Arc<guideloom::Packing>,
    element: String,
}

/// Decodes little-endian integer tokens of `element` into `i64`s.
fn decode(element: &str, bytes: &[u8], out: &mut Vec<i64>) {
    macro_rules! le {
        ($t:ty) => {
            out.extend(
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or_default()) as i64),
            )
        };
    }
    match element {
        "u8" => out.extend(bytes.iter().map(|&b| i64::from(b))),
        "u16" => le!(u16),
        "u32" => le!(u32),
        "i32" => le!(i32),
        // u64 tokens above i64::MAX wrap: no vocabulary is that large.
        "u64" => le!(u64),
        _ => le!(i64),
    }
}

/// An int64 numpy array of `shape` holding a copy of `values` (writable, owned by numpy).
fn i64_array<'py>(
    py: Python<'py>,
    values: &[i64],
    shape: (usize, usize, usize),
) -> PyResult<Bound<'py, PyAny>> {
    let array = py
        .import("numpy")?
        .getattr("empty")?
        .call1((shape, "int64"))?;
    PyBuffer::<i64>::get(&array)?.copy_from_slice(py, values)?;
    Ok(array)
}

impl Packing {
    /// Windows in the packing.
    pub(crate) fn window_count(&self) -> u64 {
        self.packing.len()
    }

    /// The `Mixture` weight that gives this packing `share` of a mixture's tokens
    /// (`guideloom::Packing::token_weight`).
    pub(crate) fn token_weight(&self, share: f64) -> f64 {
        self.packing.token_weight(share)
    }

    /// `mixture` with this packing's windows (of its dataset in this process) added as a
    /// source: each record a window's tokens back to back, little-endian, unpadded.
    pub(crate) fn add_to(
        &self,
        py: Python<'_>,
        mixture: guideloom::Mixture,
        range: Option<(u64, u64)>,
        take: guideloom::Take,
    ) -> PyResult<guideloom::Mixture> {
        let dataset = self.dataset.get().current(py)?;
        let packing = Arc::clone(&self.packing);
        macro_rules! add {
            ($t:ty) => {{
                let windows = guideloom::PackedWindows::<$t>::from_packing(dataset, packing)
                    .map_err(|e| crate::errors::to_pyerr(py, &e))?;
                match range {
                    Some((a, b)) => mixture.with_range(windows, a..b, take),
                    None => mixture.with_source(windows, take),
                }
            }};
        }
        Ok(match self.element.as_str() {
            "u8" => add!(u8),
            "u16" => add!(u16),
            "u32" => add!(u32),
            "i32" => add!(i32),
            "u64" => add!(u64),
            _ => add!(i64),
        })
    }

    fn window(&self, k: u64) -> PyResult<u64> {
        if k >= self.packing.len() {
            return Err(PyIndexError::new_err(format!(
                "window {k} is outside the packing's {} windows",
                self.packing.len()
            )));
        }
        Ok(k)
    }
}

#[pymethods]
impl Packing {
    /// Reads the document bounds (one tail read per shard not yet open) and packs them.
    #[new]
    #[pyo3(signature = (
        dataset, *, seq_len, labels = true, seed = 0, epoch = 0, buffer = DEFAULT_PACK_BUFFER
    ))]
    fn new(
        py: Python<'_>,
        dataset: &Bound<'_, Dataset>,
        seq_len: u64,
        labels: bool,
        seed: u64,
        epoch: u64,
        buffer: u64,
    ) -> PyResult<Self> {
        let ds = dataset.get().current(py)?;
        let element = ds.stream_element().map_err(stream_error)?.to_owned();
        if element.starts_with('f') {
            return Err(raise(
                "UnsupportedError",
                format!("packing needs integer tokens, the stream holds {element}"),
            ));
        }
        let mut options = PackOptions::new(seq_len)
            .with_seed(seed)
            .with_epoch(epoch)
            .with_buffer(buffer);
        if labels {
            options = options.with_next_token_labels();
        }
        let packing = block_on(py, async move {
            let mut lengths = Vec::with_capacity(usize::try_from(ds.len()).unwrap_or(0));
            for d in 0..ds.len() {
                let r = ds.document_range_async(d).await.map_err(Error::from)?;
                lengths.push(r.end - r.start);
            }
            Ok::<_, Error>(guideloom::Packing::from_document_lengths(
                &lengths, options,
            )?)
        })?;
        Ok(Packing {
            dataset: dataset.clone().unbind(),
            packing: Arc::new(packing),
            element,
        })
    }

    /// The same documents packed for `epoch` (no read).
    fn repack(&self, py: Python<'_>, epoch: u64) -> Self {
        Packing {
            dataset: self.dataset.clone_ref(py),
            packing: Arc::new(self.packing.repack(epoch)),
            element: self.element.clone(),
        }
    }

    /// Number of windows.
    fn __len__(&self) -> usize {
        usize::try_from(self.packing.len()).unwrap_or(usize::MAX)
    }

    /// The stream token ranges window `k` holds, in order, as `(start, stop)` pairs.
    fn pieces(&self, k: u64) -> PyResult<Vec<(u64, u64)>> {
        let k = self.window(k)?;
        Ok(self.packing.pieces(k).map(|r| (r.start, r.end)).collect())
    }

    /// The training arrays of windows `indices` (`(len(indices), seq_len)` int64 numpy
    /// arrays): `input_ids` (padding `pad_id`), `labels` (`ignore_index` where there is no
    /// next token of the same piece, and on padding) and `position_ids` (restarting at 0 at
    /// every piece, and at the padding). Without `labels` packing, `labels` are the inputs
    /// with each piece's first token and the padding ignored (models that shift inside).
    /// The three are views of one array, [`batch_array`](Self::batch_array)'s.
    #[pyo3(signature = (indices, *, pad_id = 0, ignore_index = -100))]
    fn batch<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<u64>,
        pad_id: i64,
        ignore_index: i64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let stacked = self.batch_array(py, indices, pad_id, ignore_index)?;
        let out = PyDict::new(py);
        for (i, name) in ["input_ids", "labels", "position_ids"]
            .into_iter()
            .enumerate()
        {
            out.set_item(name, stacked.get_item(i)?)?;
        }
        Ok(out)
    }

    /// `batch`'s three arrays stacked: one `(3, len(indices), seq_len)` int64 array
    /// (`input_ids`, `labels`, `position_ids`), one buffer to send between processes.
    #[pyo3(signature = (indices, *, pad_id = 0, ignore_index = -100))]
    fn batch_array<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<u64>,
        pad_id: i64,
        ignore_index: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut ranges = Vec::new();
        for &k in &indices {
            ranges.extend(self.packing.pieces(self.window(k)?));
        }
        let ds = self.dataset.get().current(py)?;
        let read: Vec<Bytes> = block_on(py, async move {
            Ok::<_, Error>(ds.read_elements_many_async(&ranges).await)
        })?
        .map_err(stream_error)?;
        let seq = usize::try_from(self.packing.options().seq_len).unwrap_or(usize::MAX);
        let shifted = self.packing.options().next_token_labels;
        let (rows, cells) = (indices.len(), indices.len() * seq);
        let mut stacked = vec![0i64; 3 * cells];
        let (inputs, rest) = stacked.split_at_mut(cells);
        let (labels, positions) = rest.split_at_mut(cells);
        inputs.fill(pad_id);
        labels.fill(ignore_index);
        let mut pieces = read.iter();
        let mut tokens = Vec::with_capacity(seq + 1);
        for (row, &k) in indices.iter().enumerate() {
            let (inputs, labels, positions) = (
                &mut inputs[row * seq..(row + 1) * seq],
                &mut labels[row * seq..(row + 1) * seq],
                &mut positions[row * seq..(row + 1) * seq],
            );
            let mut at = 0usize; // the window's token where this piece starts
            for (&len, bytes) in self.packing.piece_lengths(k).iter().zip(pieces.by_ref()) {
                tokens.clear();
                decode(&self.element, bytes, &mut tokens);
                for (j, &token) in tokens.iter().enumerate() {
                    let t = at + j;
                    if t < seq {
                        inputs[t] = token;
                        positions[t] = j as i64;
                    }
                    // Label of the input before (shifted) or of this input: a token of the
                    // same piece only.
                    let labelled = if shifted { t.checked_sub(1) } else { Some(t) };
                    if let Some(l) = labelled.filter(|&l| j > 0 && l < seq) {
                        labels[l] = token;
                    }
                }
                at += len as usize;
            }
            // The padding counts from 0 as one more run.
            for (j, position) in positions.iter_mut().skip(at).enumerate() {
                *position = j as i64;
            }
        }
        i64_array(py, &stacked, (3, rows, seq))
    }

    /// Input tokens per window.
    #[getter]
    fn seq_len(&self) -> u64 {
        self.packing.options().seq_len
    }

    /// Tokens a window holds: `seq_len`, or `seq_len + 1` with `labels`.
    #[getter]
    fn capacity(&self) -> u64 {
        self.packing.capacity()
    }

    /// Windows of `seq_len + 1` tokens whose last input's label is their last token.
    #[getter]
    fn labels(&self) -> bool {
        self.packing.options().next_token_labels
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.packing.options().seed
    }

    #[getter]
    fn epoch(&self) -> u64 {
        self.packing.options().epoch
    }

    #[getter]
    fn buffer(&self) -> u64 {
        self.packing.options().buffer
    }

    /// Tokens in all windows, without padding.
    #[getter]
    fn num_tokens(&self) -> u64 {
        self.packing.tokens()
    }

    /// Padding tokens in all windows.
    #[getter]
    fn padding_tokens(&self) -> u64 {
        self.packing.padding_tokens()
    }

    /// The padded share of all window tokens.
    #[getter]
    fn padding(&self) -> f64 {
        self.packing.padding_fraction()
    }

    /// Pieces in all windows (documents, or pieces of documents longer than a window).
    #[getter]
    fn num_pieces(&self) -> u64 {
        self.packing.num_pieces()
    }

    /// Documents packed (empty ones included).
    #[getter]
    fn num_documents(&self) -> u64 {
        self.packing.documents()
    }

    fn __repr__(&self) -> String {
        let o = self.packing.options();
        format!(
            "Packing(seq_len={}, labels={}, seed={}, epoch={}, windows={}, padding={:.4})",
            o.seq_len,
            if o.next_token_labels { "True" } else { "False" },
            o.seed,
            o.epoch,
            self.packing.len(),
            self.packing.padding_fraction()
        )
    }
}
