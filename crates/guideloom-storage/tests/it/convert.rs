//! `convert::stream_to_root`: a stream storage migrates into a root's stream snapshot with
//! the same tokens, its documents and their metadata (property test), and what cannot be
//! represented is refused by name with nothing written.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;

use guideloom_format::{Element, RecordSource};
use guideloom_io::ErrorKind;
use guideloom_publish::{Dataset, Root};
use guideloom_storage::convert::{ConvertError, ConvertRequest, SourceKind, stream_to_root};
use guideloom_storage::{StreamStorage, StreamWithMetaStorage, WriterOptions};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use crate::util::{listing, rt};

/// Per-document metadata of the property test: nested, optional, floats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Meta {
    id: u64,
    name: String,
    tags: Vec<i32>,
    score: Option<f64>,
}

fn le<E: Element>(elements: &[E]) -> Vec<u8> {
    let mut out = Vec::new();
    E::extend_le(elements, &mut out);
    out
}

fn open_root(path: &Path) -> Root {
    Root::open(
        path.to_str().unwrap(),
        &Default::default(),
        Default::default(),
    )
    .unwrap()
}

fn convert(dir: &Path, root: &Root) -> Result<guideloom_storage::convert::Converted, ConvertError> {
    rt().block_on(stream_to_root(dir, root, &ConvertRequest::new("d", "v1")))
}

fn latest(root: &Root) -> Dataset {
    rt().block_on(root.open_latest()).unwrap()
}

/// Writes `docs` as a stream-with-meta storage, converts it, and reads every document, its
/// metadata and the whole token stream back through the Dataset.
fn with_meta_round_trip<E: Element + Debug>(
    docs: &[(Vec<E>, Meta)],
    options: WriterOptions,
) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("src");
    let storage = StreamWithMetaStorage::<E, Meta>::local(&dir).with_writer_options(options);
    let mut w = storage.sync_writer().unwrap();
    for (d, m) in docs {
        w.append(d, m).unwrap();
    }
    let written = w.finish().unwrap();
    let root = open_root(&tmp.path().join("root"));
    let converted = match convert(&dir, &root) {
        Err(ConvertError::Refused { reason, .. }) if docs.is_empty() => {
            prop_assert!(reason.contains("no shard-000000.glm"), "{reason}");
            return Ok(());
        }
        other => other.unwrap(),
    };
    let total: u64 = docs.iter().map(|(d, _)| d.len() as u64).sum();
    prop_assert_eq!(converted.source.kind, SourceKind::StreamWithMeta);
    prop_assert_eq!(converted.source.element.as_str(), E::NAME);
    prop_assert_eq!(converted.shards, written.len() as u64 / 2);
    prop_assert_eq!(
        (converted.documents, converted.tokens),
        (docs.len() as u64, total)
    );

    let ds = latest(&root);
    prop_assert_eq!(ds.len(), docs.len() as u64);
    prop_assert_eq!(ds.num_tokens().unwrap(), total);
    let all: Vec<E> = docs.iter().flat_map(|(d, _)| d.iter().copied()).collect();
    prop_assert_eq!(le(&ds.tokens::<E>(0..total).unwrap()), le(&all));
    let mut at = 0u64;
    for (i, (d, m)) in docs.iter().enumerate() {
        let i = i as u64;
        prop_assert_eq!(le(&ds.document::<E>(i).unwrap()), le(d));
        prop_assert_eq!(&ds.document_meta::<Meta>(i).unwrap(), m);
        let end = at + d.len() as u64;
        prop_assert_eq!(ds.document_range(i).unwrap(), at..end);
        prop_assert_eq!(le(&ds.tokens::<E>(at..end).unwrap()), le(d));
        at = end;
    }
    Ok(())
}

/// Writes `runs` as a plain stream storage, converts it: the same tokens; the documents
/// are the storage's chunks, as its RecordSource reader hands them out.
fn stream_round_trip<E: Element + Debug>(
    runs: &[Vec<E>],
    options: WriterOptions,
) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("src");
    let storage = StreamStorage::<E>::local(&dir).with_writer_options(options);
    let mut w = storage.sync_writer().unwrap();
    for r in runs {
        w.append(r).unwrap();
    }
    w.finish().unwrap();
    let all: Vec<E> = runs.iter().flatten().copied().collect();
    let root = open_root(&tmp.path().join("root"));
    let converted = match convert(&dir, &root) {
        Err(ConvertError::Refused { .. }) if all.is_empty() => return Ok(()),
        other => other.unwrap(),
    };
    let reader = storage.sync_reader().unwrap();
    prop_assert_eq!(converted.source.kind, SourceKind::Stream);
    prop_assert_eq!(converted.shards, reader.shards().len() as u64);
    prop_assert_eq!(converted.documents, RecordSource::len(&reader));

    let ds = latest(&root);
    let total = all.len() as u64;
    prop_assert_eq!(ds.num_tokens().unwrap(), total);
    prop_assert_eq!(le(&ds.tokens::<E>(0..total).unwrap()), le(&all));
    for i in 0..ds.len() {
        let chunk = reader.get_many(&[i]).unwrap().remove(0);
        prop_assert_eq!(le(&ds.document::<E>(i).unwrap()), chunk.to_vec());
    }
    Ok(())
}

fn meta() -> impl Strategy<Value = Meta> {
    (
        any::<u64>(),
        "[a-z]{0,8}",
        proptest::collection::vec(any::<i32>(), 0..4),
        proptest::option::of(-1e6..1e6f64),
    )
        .prop_map(|(id, name, tags, score)| Meta {
            id,
            name,
            tags,
            score,
        })
}

/// Documents of 0..40 raw values (empty ones included), 0..12 documents.
fn raw_docs() -> impl Strategy<Value = Vec<(Vec<u64>, Meta)>> {
    proptest::collection::vec(
        (proptest::collection::vec(any::<u64>(), 0..40), meta()),
        0..12,
    )
}

fn options(max_records: u64, chunk: u64) -> WriterOptions {
    WriterOptions::default()
        .max_shard_records(max_records)
        .stream_chunk_bytes(chunk)
}

/// Runs `f` on `raw` cast to element type number `ty` (every type of the format).
macro_rules! per_element {
    ($ty:expr, $raw:expr, $f:ident, $opts:expr) => {{
        let raw = $raw;
        match $ty {
            0 => $f::<u8>(&cast(raw, |v| v as u8), $opts),
            1 => $f::<u16>(&cast(raw, |v| v as u16), $opts),
            2 => $f::<u32>(&cast(raw, |v| v as u32), $opts),
            3 => $f::<u64>(&cast(raw, |v| v), $opts),
            4 => $f::<i32>(&cast(raw, |v| v as i32), $opts),
            5 => $f::<i64>(&cast(raw, |v| v as i64), $opts),
            6 => $f::<f32>(&cast(raw, |v| f32::from_bits(v as u32)), $opts),
            _ => $f::<f64>(&cast(raw, f64::from_bits), $opts),
        }
    }};
}

trait Cast<T> {
    type Out;
    fn cast_with(self, f: impl Fn(u64) -> T + Copy) -> Self::Out;
}

impl<T> Cast<T> for &Vec<(Vec<u64>, Meta)> {
    type Out = Vec<(Vec<T>, Meta)>;
    fn cast_with(self, f: impl Fn(u64) -> T + Copy) -> Self::Out {
        self.iter()
            .map(|(d, m)| (d.iter().map(|&v| f(v)).collect(), m.clone()))
            .collect()
    }
}

impl<T> Cast<T> for &Vec<Vec<u64>> {
    type Out = Vec<Vec<T>>;
    fn cast_with(self, f: impl Fn(u64) -> T + Copy) -> Self::Out {
        self.iter()
            .map(|d| d.iter().map(|&v| f(v)).collect())
            .collect()
    }
}

fn cast<C: Cast<T>, T>(raw: C, f: impl Fn(u64) -> T + Copy) -> C::Out {
    raw.cast_with(f)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn stream_with_meta_converts_and_reads_back_identical(
        ty in 0usize..8,
        docs in raw_docs(),
        max_records in 1u64..5,
        chunk in 1u64..64,
    ) {
        per_element!(ty, &docs, with_meta_round_trip, options(max_records, chunk))?;
    }

    #[test]
    fn stream_converts_its_chunks_and_reads_back_identical(
        ty in 0usize..8,
        runs in proptest::collection::vec(proptest::collection::vec(any::<u64>(), 0..40), 0..6),
        max_records in 1u64..5,
        chunk in 1u64..64,
    ) {
        per_element!(ty, &runs, stream_round_trip, options(max_records, chunk))?;
    }
}

#[test]
fn refuses_by_name_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root_dir = tmp.path().join("root");
    let root = open_root(&root_dir);
    let refused = |dir: &Path| match convert(dir, &root) {
        Err(e @ ConvertError::Refused { .. }) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            e.to_string()
        }
        other => panic!("{dir:?} converted: {other:?}"),
    };

    // Nothing there.
    let missing = refused(&tmp.path().join("missing"));
    assert!(missing.contains("no shard-000000.glm"), "{missing}");

    // A document storage is not a token stream.
    let docs = tmp.path().join("docs");
    let storage = guideloom_storage::DocumentStorage::local(&docs, guideloom_format::RawFormat);
    let mut w = storage.sync_writer().unwrap();
    w.push(&bytes::Bytes::from_static(b"x")).unwrap();
    w.finish().unwrap();
    let msg = refused(&docs);
    assert!(msg.contains("not a token stream"), "{msg}");

    // User metadata has no place in a stream snapshot's shards: named with its keys.
    let user = tmp.path().join("user");
    let user_meta = BTreeMap::from([("source".to_owned(), ciborium::Value::from("crawl"))]);
    let storage = StreamStorage::<u32>::local(&user)
        .with_writer_options(WriterOptions::default().user_metadata(user_meta));
    let mut w = storage.sync_writer().unwrap();
    w.append(&[1, 2, 3]).unwrap();
    w.finish().unwrap();
    let msg = refused(&user);
    assert!(
        msg.contains("shard-000000.glm") && msg.contains("user metadata") && msg.contains("source"),
        "{msg}"
    );

    // Nothing was written to the root: no shard, no snapshot.
    let written: Vec<String> = listing(&root_dir)
        .into_iter()
        .filter(|n| n == "shards" || n == "log")
        .collect();
    for d in written {
        assert!(listing(&root_dir.join(&d)).is_empty(), "{d}/ written");
    }
}
