//! The Rust core of the `guideloom` Python package (`guideloom._guideloom`).
//!
//! Built by maturin from the repository's `pyproject.toml` into the package whose pure-Python
//! part lives in `python/guideloom/` (exceptions, stubs, `py.typed`); see `docs/python.md`.
//! It binds the facade crate: dataset roots (`root.rs`: `Root`, the root resolved once with
//! its operations as methods; `dataset.rs`: `open`, `Dataset`; `calls.rs`: the module-level
//! `write_shard`, `publish`, `publish_annotations`, each a `Root` of one call; `publish.rs`:
//! `ShardRef`, `Snapshot`; `tokens.rs`:
//! token-stream reads of a `Dataset`), the record formats (`format.rs`) and the Rust loader's
//! epoch plan (`order.rs`: `EpochPlan`, the order of `guideloom.torch`) and best-fit packing
//! of a token stream's documents into training windows (`packing.rs`: `Packing`).
//!
//! Rules every binding follows:
//! - Rust work that does IO or waits runs through `runtime::block_on`: the GIL is released
//!   and a panic becomes `guideloom.exceptions.InternalError`, never a crash.
//! - One tokio runtime per process, created lazily and re-created in a forked child.
//! - Errors keep their kind: `errors.rs` maps each Rust variant to a `guideloom.exceptions`
//!   class with the key or path as attributes.
//!
//! The crate is an `rlib` too, so that the workspace's clippy, tests and rustdoc cover it; it
//! has no `extension-module` cargo feature (maturin sets `PYO3_BUILD_EXTENSION_MODULE`).
//! Its behaviour is tested from Python (`python/tests/`, run by `cargo xtask ci`).

use pyo3::prelude::*;

mod ahead;
mod aio;
mod calls;
mod cloud_options;
mod columns;
mod dataset;
mod errors;
mod filesystem;
mod format;
mod imports;
mod io;
mod keep;
mod mixture;
mod notebook;
mod options;
mod order;
mod packing;
mod publish;
mod pybackend;
mod root;
mod root_args;
mod runtime;
mod shard_stores;
mod slices;
mod source;
mod storage;
mod stores;
mod stream;
mod stream_meta;
mod tokens;

/// The extension module `guideloom._guideloom`.
#[pymodule(name = "_guideloom")]
fn guideloom_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    runtime::register_exit_hook(m.py())?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<dataset::DatasetIter>()?;
    m.add_class::<notebook::RecordHtml>()?;
    m.add_class::<ahead::ReadAheadIter>()?;
    m.add_class::<format::CborFormat>()?;
    m.add_class::<format::DocumentPickleFormat>()?;
    m.add_class::<format::RawFormat>()?;
    m.add_class::<options::S3Options>()?;
    m.add_class::<cloud_options::GcsOptions>()?;
    m.add_class::<cloud_options::AzureOptions>()?;
    m.add_class::<order::EpochPlan>()?;
    m.add_class::<mixture::Mixture>()?;
    m.add_class::<packing::Packing>()?;
    m.add_class::<publish::ShardRef>()?;
    m.add_class::<publish::Snapshot>()?;
    m.add_class::<publish::PublicationOptions>()?;
    m.add_class::<root::Root>()?;
    m.add_class::<pyo3_bytes::PyBytes>()?; // `Bytes`: zero-copy record buffers
    m.add_class::<io::SeekIO>()?;
    m.add_class::<io::PosixPreadIO>()?;
    m.add_class::<io::MmapIO>()?;
    m.add_class::<io::HttpIO>()?;
    m.add_class::<storage::DocumentStorage>()?;
    m.add_class::<storage::DocumentWriter>()?;
    m.add_class::<storage::DocumentReader>()?;
    m.add_class::<storage::DocumentIter>()?;
    m.add_class::<storage::AsyncDocumentReaderContext>()?;
    m.add_class::<storage::AsyncDocumentReaderPy>()?;
    m.add_class::<stream::RawStreamStorage>()?;
    m.add_class::<stream::RawStreamReader>()?;
    m.add_class::<stream::RawStreamWriter>()?;
    m.add_class::<stream::RawAsyncStreamReader>()?;
    m.add_class::<stream_meta::RawStreamMetaStorage>()?;
    m.add_class::<stream_meta::RawStreamMetaReader>()?;
    m.add_class::<stream_meta::RawAsyncStreamMetaReader>()?;
    m.add_class::<stream_meta::RawStreamMetaWriter>()?;
    m.add_class::<filesystem::RawFileSystem>()?;
    m.add_class::<filesystem::RawShard>()?;
    m.add_class::<filesystem::RawShardWriter>()?;
    m.add_function(wrap_pyfunction!(dataset::open, m)?)?;
    m.add_function(wrap_pyfunction!(calls::write_shard, m)?)?;
    m.add_function(wrap_pyfunction!(calls::adopt_array_record, m)?)?;
    m.add_function(wrap_pyfunction!(calls::publish, m)?)?;
    m.add_function(wrap_pyfunction!(calls::publish_annotations, m)?)?;
    m.add_function(wrap_pyfunction!(calls::convert_stream_storage, m)?)?;
    m.add_class::<stores::S3ObjectStore>()?;
    m.add_class::<stores::S3Backend>()?;
    m.add_class::<stores::GcsBackend>()?;
    m.add_class::<stores::AzureBackend>()?;
    m.add_class::<stores::DefaultRegistry>()?;
    m.add_class::<shard_stores::EphemeralFileStaging>()?;
    m.add_class::<shard_stores::ArrayRecordShardStore>()?;
    m.add_class::<options::StorageOptions>()?;
    m.add_function(wrap_pyfunction!(stores::s3_backend, m)?)?;
    m.add_function(wrap_pyfunction!(stores::gcs_backend, m)?)?;
    m.add_function(wrap_pyfunction!(stores::azure_backend, m)?)?;
    m.add_function(wrap_pyfunction!(stores::default_registry, m)?)?;
    Ok(())
}
