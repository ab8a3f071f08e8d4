//! `guideloom.Mixture`: several datasets (or packings of token streams, each record a
//! window) read as one, each by weight, by token share or by a per-epoch sample count — the
//! facade's [`guideloom::Mixture`], whose order `EpochPlan` takes and whose reads go through
//! each dataset of this process (re-opened after a fork).

use guideloom::{Mixture as Facade, Ramp, Take, WeightSchedule};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::dataset::Dataset;
use crate::errors::raise;
use crate::format::RecordFormat;
use crate::packing::Packing;
use crate::runtime;
use crate::slices::{PyIndex, index_error, resolve_each};

struct Part {
    source: Source,
    range: Option<(u64, u64)>,
    take: Take,
}

/// What a part mixes: a dataset's records, or a packing's windows.
enum Source {
    Dataset(Py<Dataset>),
    Packing(Py<Packing>),
}

impl Source {
    fn extract(s: usize, object: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(dataset) = object.cast::<Dataset>() {
            return Ok(Source::Dataset(dataset.clone().unbind()));
        }
        if let Ok(packing) = object.cast::<Packing>() {
            return Ok(Source::Packing(packing.clone().unbind()));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "source {s}: a Mixture mixes guideloom.Dataset or guideloom.Packing objects, not {}",
            object.get_type().name()?
        )))
    }

    fn len(&self) -> u64 {
        match self {
            Source::Dataset(d) => d.get().record_count(),
            Source::Packing(p) => p.get().window_count(),
        }
    }

    /// How its records decode: a packing's windows are raw token bytes.
    fn format(&self) -> RecordFormat {
        match self {
            Source::Dataset(d) => d.get().record_format(),
            Source::Packing(_) => RecordFormat::Raw,
        }
    }

    fn object(&self, py: Python<'_>) -> Py<PyAny> {
        match self {
            Source::Dataset(d) => d.clone_ref(py).into_any(),
            Source::Packing(p) => p.clone_ref(py).into_any(),
        }
    }
}

/// Several datasets as one id space, mixed by weight (`weights=`) or by samples per epoch
/// (`choose=` / `repeat=`, MDS's names), optionally over index ranges and with weights that
/// change with the step (`schedule=`): see `docs/python.md`, "Mixtures".
#[pyclass(frozen, module = "guideloom._guideloom")]
pub(crate) struct Mixture {
    parts: Vec<Part>,
    epoch_size: Option<u64>,
    schedule: Option<WeightSchedule>,
    /// `offsets[s]`: the first id of source `s`; one more entry, the id count.
    offsets: Vec<u64>,
}

fn invalid(text: impl AsRef<str>) -> PyErr {
    raise("InvalidArgumentError", text)
}

/// Entry `s` of an optional per-source list (`None` when the list or the entry is absent).
fn entry<T: Copy>(list: Option<&Vec<Option<T>>>, s: usize) -> Option<T> {
    list.and_then(|l| l.get(s).copied().flatten())
}

impl Mixture {
    /// The facade mixture over this process's datasets.
    pub(crate) fn facade(&self, py: Python<'_>) -> PyResult<Facade> {
        let mut mixture = Facade::new();
        for part in &self.parts {
            mixture = match &part.source {
                Source::Dataset(dataset) => {
                    let dataset = dataset.get().current(py)?;
                    match part.range {
                        Some((a, b)) => mixture.with_range(dataset, a..b, part.take),
                        None => mixture.with_source(dataset, part.take),
                    }
                }
                Source::Packing(packing) => {
                    packing.get().add_to(py, mixture, part.range, part.take)?
                }
            };
        }
        if let Some(e) = self.epoch_size {
            mixture = mixture.with_epoch_size(e);
        }
        if let Some(schedule) = &self.schedule {
            mixture = mixture.with_schedule(schedule.clone());
        }
        Ok(mixture)
    }

    fn len(&self) -> u64 {
        self.offsets[self.offsets.len() - 1]
    }

    fn source_of(&self, id: u64) -> Option<(usize, u64)> {
        let s = self.offsets.partition_point(|&o| o <= id);
        (s > 0 && s < self.offsets.len()).then(|| {
            let start = self.parts[s - 1].range.map_or(0, |r| r.0);
            (s - 1, start + id - self.offsets[s - 1])
        })
    }

    fn id(&self, i: &PyIndex) -> PyResult<u64> {
        i.resolve(self.len())
            .ok_or_else(|| Python::attach(|py| index_error(py, i, self.len(), "id", "mixture")))
    }

    /// Ids from any iterable of integers.
    pub(crate) fn ids(&self, ids: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        resolve_each(ids, |i| self.id(i))
    }

    /// `records` (of `ids`, in order) decoded, each by its dataset's format.
    pub(crate) fn decode_ids<'py>(
        &self,
        py: Python<'py>,
        ids: &[u64],
        records: Vec<bytes::Bytes>,
    ) -> PyResult<Bound<'py, PyList>> {
        if ids.len() != records.len() {
            return Err(raise(
                "InternalError",
                format!("{} records for {} ids", records.len(), ids.len()),
            ));
        }
        let list = PyList::empty(py);
        for (&id, record) in ids.iter().zip(records) {
            let (s, _) = self.source_of(id).unwrap_or((0, id));
            let format = self.parts[s].source.format();
            list.append(format.decode(py, record)?)?;
        }
        Ok(list)
    }

    fn fetch(&self, py: Python<'_>, ids: Vec<u64>) -> PyResult<Vec<bytes::Bytes>> {
        let mixture = self.facade(py)?;
        runtime::detached(py, move || Ok(mixture.get_many(&ids)?))
    }
}

#[pymethods]
impl Mixture {
    #[new]
    #[pyo3(signature = (
        sources, *, weights = None, token_shares = None, choose = None, repeat = None,
        ranges = None, epoch_size = None, schedule = None, every = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sources: Vec<Bound<'_, PyAny>>,
        weights: Option<Vec<f64>>,
        token_shares: Option<Vec<f64>>,
        choose: Option<Vec<Option<u64>>>,
        repeat: Option<Vec<Option<f64>>>,
        ranges: Option<Vec<Option<(u64, u64)>>>,
        epoch_size: Option<u64>,
        schedule: Option<Vec<(u64, Vec<f64>)>>,
        every: Option<u64>,
    ) -> PyResult<Self> {
        let k = sources.len();
        let lengths_match = |name: &str, len: Option<usize>| match len {
            Some(n) if n != k => Err(invalid(format!("{name} has {n} entries for {k} sources"))),
            _ => Ok(()),
        };
        lengths_match("weights", weights.as_ref().map(Vec::len))?;
        lengths_match("token_shares", token_shares.as_ref().map(Vec::len))?;
        lengths_match("choose", choose.as_ref().map(Vec::len))?;
        lengths_match("repeat", repeat.as_ref().map(Vec::len))?;
        lengths_match("ranges", ranges.as_ref().map(Vec::len))?;
        if weights.is_some() && (choose.is_some() || repeat.is_some()) {
            return Err(invalid(
                "give weights= or choose=/repeat=, not both: weights share every span of \
                 positions, choose/repeat fix each source's samples per epoch",
            ));
        }
        if token_shares.is_some()
            && (weights.is_some() || choose.is_some() || repeat.is_some() || schedule.is_some())
        {
            return Err(invalid(
                "token_shares= sets every source's weight: give it alone, not with weights=, \
                 choose=/repeat= or schedule=",
            ));
        }
        let sources: Vec<Source> = sources
            .iter()
            .enumerate()
            .map(|(s, object)| Source::extract(s, object))
            .collect::<PyResult<_>>()?;
        let token_weights = match &token_shares {
            None => None,
            Some(shares) => Some(
                sources
                    .iter()
                    .zip(shares)
                    .enumerate()
                    .map(|(s, (source, &share))| match source {
                        Source::Packing(p) => Ok(p.get().token_weight(share)),
                        Source::Dataset(_) => Err(invalid(format!(
                            "source {s}: token_shares= mixes guideloom.Packing sources (a \
                             dataset's records have no token count)"
                        ))),
                    })
                    .collect::<PyResult<Vec<f64>>>()?,
            ),
        };
        if let Some(bad) = token_shares
            .iter()
            .flatten()
            .find(|s| !(s.is_finite() && **s >= 0.0))
        {
            return Err(invalid(format!(
                "a token share must be finite and not negative, not {bad}"
            )));
        }
        if every.is_some() && schedule.is_none() {
            return Err(invalid(
                "every= sets the stages of a schedule: pass schedule=",
            ));
        }
        let mut parts = Vec::with_capacity(k);
        let mut offsets = vec![0u64];
        for (s, source) in sources.into_iter().enumerate() {
            let len = source.len();
            let range = ranges.as_ref().and_then(|r| r[s]);
            let n = match range {
                Some((a, b)) if a <= b && b <= len => b - a,
                Some((a, b)) => {
                    return Err(invalid(format!(
                        "source {s}: range ({a}, {b}) is not within its {len} records"
                    )));
                }
                None => len,
            };
            offsets.push(offsets[s] + n);
            let take = if let Some(w) = token_weights.as_ref().or(weights.as_ref()) {
                Take::Weight(w[s])
            } else if schedule.is_some() {
                Take::Weight(1.0)
            } else {
                match (entry(choose.as_ref(), s), entry(repeat.as_ref(), s)) {
                    (Some(_), Some(_)) => {
                        return Err(invalid(format!(
                            "source {s} has both choose and repeat: give one"
                        )));
                    }
                    (Some(c), None) => Take::Choose(c),
                    (None, Some(r)) => Take::Repeat(r),
                    (None, None) => Take::Repeat(1.0),
                }
            };
            parts.push(Part {
                source,
                range,
                take,
            });
        }
        let schedule = schedule.map(|points| WeightSchedule {
            points,
            ramp: every.map_or(Ramp::Step, |every| Ramp::Linear { every }),
        });
        let mixture = Mixture {
            parts,
            epoch_size,
            schedule,
            offsets,
        };
        // The Rust checks now (with batch size 1 for the schedule's steps), not at the first
        // epoch.
        mixture
            .facade(py)?
            .check()
            .map_err(|e| crate::errors::to_pyerr(py, &e))?;
        Ok(mixture)
    }

    /// The number of ids: the records of every source's range.
    fn __len__(&self) -> usize {
        usize::try_from(self.len()).unwrap_or(usize::MAX)
    }

    /// `(source, record index in that source)` of a record id.
    fn locate(&self, id: PyIndex) -> PyResult<(usize, u64)> {
        let id = self.id(&id)?;
        Ok(self.source_of(id).unwrap_or((0, id)))
    }

    /// The datasets and packings, in order.
    #[getter]
    fn sources(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.parts.iter().map(|p| p.source.object(py)).collect()
    }

    /// Record `id`, decoded as its dataset decodes.
    fn __getitem__<'py>(&self, py: Python<'py>, id: PyIndex) -> PyResult<Bound<'py, PyAny>> {
        let id = self.id(&id)?;
        let got = self.get_many(py, &PyList::new(py, [id])?.into_any())?;
        got.get_item(0)
    }

    /// The records with ids `ids`, decoded: each dataset reads its share with one batched
    /// read (remote datasets at the same time), the GIL released.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ids = self.ids(ids)?;
        let records = self.fetch(py, ids.clone())?;
        self.decode_ids(py, &ids, records)
    }

    /// The bytes of the records with ids `ids`, as read-only buffers (no copy).
    fn get_many_raw(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<pyo3_bytes::PyBytes>> {
        let ids = self.ids(ids)?;
        let records = self.fetch(py, ids)?;
        Ok(records.into_iter().map(pyo3_bytes::PyBytes::new).collect())
    }

    fn __repr__(&self) -> String {
        let takes: Vec<String> = self
            .parts
            .iter()
            .map(|p| match p.take {
                Take::Weight(w) => format!("weight {w}"),
                Take::Choose(c) => format!("choose {c}"),
                Take::Repeat(r) => format!("repeat {r}"),
                _ => "?".to_owned(),
            })
            .collect();
        format!("Mixture({} ids; {})", self.len(), takes.join(", "))
    }
}
