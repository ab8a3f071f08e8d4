//! The Rust half of the Python interop test (`python/tests/test_interop.py`): a dataset of
//! serde records written here reads in Python, and one written from Python reads here through
//! `CborFormat`'s serde decoding.
//!
//! ```text
//! cargo run -p guideloom --example python_interop -- write DIR   # Rust writes DIR
//! cargo run -p guideloom --example python_interop -- check DIR   # Rust reads Python's DIR
//! cargo run -p guideloom --example python_interop                # both, in a temporary dir
//! cargo run -p guideloom --example python_interop -- order DIR SEED EPOCH BATCH RANK WORLD \
//!     SHUFFLE EQUALIZE DROP_LAST START   # the Loader's batches of DIR, one line each
//! ```
//!
//! `write-stream-meta DIR` / `check-stream-meta DIR` do the same for a
//! `StreamWithMetaStorage<u32, DocMeta>` (Python's `StreamWithMetaStorage(DIR, np.uint32)`).
//!
//! `order` is the Rust half of `python/tests/test_torch.py`: it runs the real [`Loader`]
//! over the dataset and prints the record indices of each batch this rank receives
//! (comma-separated, one batch a line), which `guideloom.torch` must reproduce.

use guideloom::{
    Bytes, Dataset, Equalize, Loader, LoaderOptions, LoaderState, PublishMode, Publisher,
    ShuffleMode,
};
use guideloom::{StreamWithMetaStorage, WriterOptions};
use serde::{Deserialize, Serialize};

/// The record both sides agree on (Python sees it as a dict).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Caption {
    id: u64,
    text: String,
    score: f64,
    tags: Vec<String>,
    blob: Option<serde_bytes_like::Blob>,
}

mod serde_bytes_like {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Bytes as a CBOR byte string (Python `bytes`), not an array of integers.
    #[derive(Debug, Clone, PartialEq)]
    pub(super) struct Blob(pub(super) Vec<u8>);

    impl Serialize for Blob {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }

    impl<'de> Deserialize<'de> for Blob {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl serde::de::Visitor<'_> for Visitor {
                type Value = Blob;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a byte string")
                }
                fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Blob, E> {
                    Ok(Blob(v.to_vec()))
                }
            }
            d.deserialize_bytes(Visitor)
        }
    }
}

/// The records both sides write and expect: `n` captions.
fn expected(n: u64) -> Vec<Caption> {
    (0..n)
        .map(|id| Caption {
            id,
            text: format!("caption {id} é"),
            score: id as f64 / 4.0,
            tags: (0..id % 3).map(|t| format!("t{t}")).collect(),
            blob: (id % 2 == 0)
                .then(|| serde_bytes_like::Blob(vec![u8::try_from(id % 256).unwrap_or(0); 3])),
        })
        .collect()
}

const RECORDS: u64 = 25;

fn write(dir: &str) -> guideloom::Result<()> {
    let publisher = Publisher::open(dir)?;
    let records = expected(RECORDS);
    let shards = records
        .chunks(10)
        .enumerate()
        .map(|(n, chunk)| publisher.write_shard("rust", n as u64, chunk))
        .collect::<guideloom::Result<Vec<_>>>()?;
    publisher.publish("interop", "from-rust", shards, PublishMode::Full)?;
    Ok(())
}

fn check(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let ds = Dataset::open(dir)?;
    let got: Vec<Caption> = ds.iter_as::<Caption>().collect::<Result<_, _>>()?;
    if got != expected(RECORDS) {
        return Err(format!("{dir}: the records differ from the expected ones: {got:?}").into());
    }
    println!(
        "{dir}: {} records read through CborFormat's serde decoding",
        got.len()
    );
    Ok(())
}

/// The metadata of a stream-with-meta document (Python sees it as a dict).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct DocMeta {
    id: u64,
    source: String,
    lang: Option<String>,
}

const DOCS: u64 = 23;

/// The documents both sides write and expect: `id % 5` tokens each (some empty).
fn expected_docs(n: u64) -> Vec<(Vec<u32>, DocMeta)> {
    (0..n)
        .map(|id| {
            let tokens = (0..id % 5)
                .map(|k| u32::try_from(id * 100 + k).unwrap_or(u32::MAX))
                .collect();
            let meta = DocMeta {
                id,
                source: format!("doc-{id}.txt"),
                lang: (id % 2 == 0).then(|| "en".to_owned()),
            };
            (tokens, meta)
        })
        .collect()
}

fn write_stream_meta(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let storage = StreamWithMetaStorage::<u32, DocMeta>::local(dir)
        .with_writer_options(WriterOptions::default().max_shard_records(4));
    let mut writer = storage.sync_writer()?;
    for (tokens, meta) in expected_docs(DOCS) {
        writer.append(&tokens, &meta)?;
    }
    writer.finish()?;
    Ok(())
}

fn check_stream_meta(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let reader = StreamWithMetaStorage::<u32, DocMeta>::local(dir).sync_reader()?;
    let expected = expected_docs(DOCS);
    if reader.num_docs() != DOCS {
        return Err(format!("{dir}: {} documents, not {DOCS}", reader.num_docs()).into());
    }
    for (i, (tokens, meta)) in expected.iter().enumerate() {
        let (got, got_meta) = reader.read_doc(i as u64)?;
        if &*got != tokens.as_slice() || &got_meta != meta {
            return Err(format!("{dir}: document {i} is {:?}, {got_meta:?}", &*got).into());
        }
    }
    println!(
        "{dir}: {} documents with metadata read through serde",
        expected.len()
    );
    Ok(())
}

/// The batches the Rust loader delivers to one rank (see the module docs for the arguments).
fn order(dir: &str, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let [
        seed,
        epoch,
        batch,
        rank,
        world,
        shuffle,
        equalize,
        drop_last,
        start,
    ] = args
    else {
        return Err(
            "order needs DIR SEED EPOCH BATCH RANK WORLD SHUFFLE EQUALIZE DROP_LAST START".into(),
        );
    };
    let shuffle = match shuffle.as_str() {
        "auto" => ShuffleMode::Auto,
        "full" => ShuffleMode::Full,
        "sequential" => ShuffleMode::Sequential,
        window => ShuffleMode::ShardWindow {
            window: window
                .strip_prefix("window")
                .ok_or("bad SHUFFLE")?
                .parse()?,
        },
    };
    let equalize = match equalize.as_str() {
        "none" => Equalize::None,
        "pad" => Equalize::Pad,
        "drop" => Equalize::Drop,
        _ => return Err("bad EQUALIZE".into()),
    };
    let seed: u64 = seed.parse()?;
    let options = LoaderOptions::new(batch.parse()?)
        .with_seed(seed)
        .with_shuffle(shuffle)
        .with_equalize(equalize)
        .with_drop_last(drop_last == "1")
        .with_rank(rank.parse()?, world.parse()?);
    let loader = Loader::new(Dataset::open(dir)?, options, |index, _bytes: Bytes| {
        Ok::<u64, guideloom::Error>(index)
    })?;
    let state = LoaderState {
        seed,
        epoch: epoch.parse()?,
        consumed: start.parse()?,
    };
    for batch in loader.resume(&state)? {
        let indices: Vec<String> = batch?.records.iter().map(u64::to_string).collect();
        println!("{}", indices.join(","));
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [cmd, dir] if cmd == "write" => write(dir)?,
        [cmd, dir] if cmd == "check" => check(dir)?,
        [cmd, dir] if cmd == "write-stream-meta" => write_stream_meta(dir)?,
        [cmd, dir] if cmd == "check-stream-meta" => check_stream_meta(dir)?,
        [cmd, dir, rest @ ..] if cmd == "order" => order(dir, rest)?,
        [] => {
            let tmp = tempfile::tempdir()?;
            let dir = tmp.path().join("root");
            let dir = dir.to_str().ok_or("temporary path is not UTF-8")?;
            write(dir)?;
            check(dir)?;
            let corpus = tmp.path().join("corpus");
            let corpus = corpus.to_str().ok_or("temporary path is not UTF-8")?;
            write_stream_meta(corpus)?;
            check_stream_meta(corpus)?;
        }
        _ => {
            return Err(
                "usage: python_interop [write DIR | check DIR | write-stream-meta DIR \
                 | check-stream-meta DIR | order DIR SEED EPOCH BATCH RANK WORLD ...]"
                    .into(),
            );
        }
    }
    Ok(())
}
