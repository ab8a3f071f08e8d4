//! Committed fixtures of format v1 (`tests/fixtures/`): a valid document shard, a valid
//! stream shard, a newer-minor shard with an unknown metadata key, and corrupted variants,
//! each checked for its exact outcome.
//!
//! Regenerate with `cargo test -p guideloom-format --test it -- --ignored regenerate`;
//! `writer_output_is_stable` fails if the writer's bytes ever drift from the fixture.

use std::path::PathBuf;

use bytes::Bytes;
use guideloom_format::Value;
use guideloom_format::spec::{HEADER_LEN, crc32c};
use guideloom_format::{
    Corruption, Error, Expected, Footer, MemReader, ReadOptions, ShardMetadata, ShardWriter,
    SyncShard,
};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn load(name: &str) -> Bytes {
    std::fs::read(fixture_dir().join(name))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
        .into()
}

fn records() -> Vec<Vec<u8>> {
    vec![
        b"alpha".to_vec(),
        Vec::new(),
        b"gamma".to_vec(),
        (0..=255u8).collect(),
    ]
}

fn documents_metadata() -> ShardMetadata {
    let mut meta = ShardMetadata::new("raw", "documents");
    meta.writer = Some("fixture-generator".into());
    meta.user
        .insert("fixture".into(), Value::Text("v1-documents".into()));
    meta
}

/// The valid document shard, written by the real writer.
fn write_documents() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.glm");
    let mut w = ShardWriter::create(&path, documents_metadata()).unwrap();
    for r in records() {
        w.append(&r).unwrap();
    }
    w.finish().unwrap();
    std::fs::read(path).unwrap()
}

fn write_stream() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.glm");
    let mut meta = ShardMetadata::new("raw", "stream").with_element("u32");
    meta.writer = Some("fixture-generator".into());
    let mut w = ShardWriter::create(&path, meta).unwrap();
    let elems: Vec<u8> = (0u32..100).flat_map(u32::to_le_bytes).collect();
    for chunk in elems.chunks(64) {
        w.append(chunk).unwrap();
    }
    w.finish().unwrap();
    std::fs::read(path).unwrap()
}

/// Builds a shard by hand from parts, so that fields can be made inconsistent while every
/// checksum stays valid.
fn build(minor: u16, major: u16, ends: &[u64], meta: &Value, count: u64) -> Vec<u8> {
    let recs = records();
    let mut out = b"GLMSHARD".to_vec();
    out.extend_from_slice(&major.to_le_bytes());
    out.extend_from_slice(&minor.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for r in &recs {
        out.extend_from_slice(r);
    }
    let index_offset = out.len() as u64;
    let mut index = Vec::new();
    let mut start = HEADER_LEN;
    for &end in ends {
        let crc = out
            .get(start as usize..end as usize)
            .map(crc32c)
            .unwrap_or(0);
        index.extend_from_slice(&end.to_le_bytes());
        index.extend_from_slice(&crc.to_le_bytes());
        start = end;
    }
    let mut meta_bytes = Vec::new();
    ciborium::into_writer(meta, &mut meta_bytes).unwrap();
    let footer = Footer {
        index_offset,
        index_len: index.len() as u64,
        metadata_offset: index_offset + index.len() as u64,
        metadata_len: meta_bytes.len() as u64,
        record_count: count,
        index_crc: crc32c(&index),
        metadata_crc: crc32c(&meta_bytes),
        major,
        minor,
    };
    out.extend_from_slice(&index);
    out.extend_from_slice(&meta_bytes);
    out.extend_from_slice(&footer.encode());
    out
}

fn meta_value(records: u64, extra: bool) -> Value {
    let t = |s: &str| Value::Text(s.into());
    let mut m = vec![
        (t("format"), t("raw")),
        (t("records"), Value::Integer(records.into())),
        (t("kind"), t("documents")),
    ];
    if extra {
        m.push((t("added_in_1_9"), Value::Array(vec![Value::Bool(true)])));
    }
    Value::Map(m)
}

fn true_ends() -> Vec<u64> {
    let mut end = HEADER_LEN;
    records()
        .iter()
        .map(|r| {
            end += r.len() as u64;
            end
        })
        .collect()
}

fn flip(mut b: Vec<u8>, at: usize) -> Vec<u8> {
    b[at] ^= 0x01;
    b
}

/// All fixtures: (name, bytes).
fn generate() -> Vec<(&'static str, Vec<u8>)> {
    let docs = write_documents();
    let n = docs.len();
    let footer = Footer::decode("g", &docs[n - 64..], n as u64).unwrap();
    let index_at = footer.index_offset as usize;
    let meta_at = footer.metadata_offset as usize;
    let mut swapped = true_ends();
    swapped.swap(0, 2);
    vec![
        ("v1-documents.glm", docs.clone()),
        ("v1-stream-u32.glm", write_stream()),
        (
            "v1.9-unknown-key.glm",
            build(9, 1, &true_ends(), &meta_value(4, true), 4),
        ),
        (
            "v2-major.glm",
            build(0, 2, &true_ends(), &meta_value(4, false), 4),
        ),
        ("v1-truncated.glm", docs[..n - 1].to_vec()),
        ("v1-bad-magic.glm", flip(docs.clone(), n - 1)),
        ("v1-footer-crc.glm", flip(docs.clone(), n - 32)),
        ("v1-index-crc.glm", flip(docs.clone(), index_at + 3)),
        ("v1-metadata-crc.glm", flip(docs.clone(), meta_at + 2)),
        (
            "v1-record-crc.glm",
            flip(docs.clone(), HEADER_LEN as usize + 1),
        ),
        ("v1-bad-header.glm", flip(docs.clone(), 0)),
        (
            "v1-offsets-decreasing.glm",
            build(0, 1, &swapped, &meta_value(4, false), 4),
        ),
        (
            "v1-count-mismatch.glm",
            build(0, 1, &true_ends(), &meta_value(5, false), 4),
        ),
    ]
}

#[test]
#[ignore = "rewrites the committed fixtures"]
fn regenerate() {
    std::fs::create_dir_all(fixture_dir()).unwrap();
    for (name, bytes) in generate() {
        std::fs::write(fixture_dir().join(name), bytes).unwrap();
    }
}

#[test]
fn writer_output_is_stable() {
    for (name, bytes) in generate() {
        assert_eq!(
            load(name),
            bytes,
            "{name} differs from what the code generates"
        );
    }
}

fn open(name: &str) -> Result<SyncShard<MemReader>, Error> {
    SyncShard::open(MemReader::new(name, load(name)), &ReadOptions::default())
}

fn read_all(shard: &SyncShard<MemReader>) -> Result<Vec<Bytes>, Error> {
    (0..shard.len()).map(|i| shard.read(i)).collect()
}

#[test]
fn valid_fixtures_read_back_exactly() {
    let shard = open("v1-documents.glm").unwrap();
    assert_eq!(read_all(&shard).unwrap(), records());
    assert_eq!(shard.metadata(), &{
        let mut m = documents_metadata();
        m.records = 4;
        m
    });
    assert_eq!(shard.footer().minor, 0);

    let stream = open("v1-stream-u32.glm").unwrap();
    assert!(
        stream
            .expect(&Expected::Stream {
                element: "u32",
                width: 4
            })
            .is_ok()
    );
    assert!(matches!(
        stream.expect(&Expected::Stream {
            element: "u16",
            width: 2
        }),
        Err(Error::FormatMismatch { .. })
    ));
    let data = stream.read_data(0, 400).unwrap();
    let got: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..100).collect::<Vec<u32>>());

    // A newer minor with an unknown metadata key is readable.
    let newer = open("v1.9-unknown-key.glm").unwrap();
    assert_eq!(newer.footer().minor, 9);
    assert_eq!(read_all(&newer).unwrap(), records());
}

#[test]
fn corrupted_fixtures_give_the_exact_error() {
    assert!(matches!(
        open("v2-major.glm"),
        Err(Error::Unsupported {
            major: 2,
            minor: 0,
            ..
        })
    ));
    assert!(matches!(
        open("v1-truncated.glm"),
        Err(Error::Corrupt {
            what: Corruption::BadFooterMagic,
            ..
        })
    ));
    assert!(matches!(
        open("v1-bad-magic.glm"),
        Err(Error::Corrupt {
            what: Corruption::BadFooterMagic,
            ..
        })
    ));
    assert!(matches!(
        open("v1-footer-crc.glm"),
        Err(Error::Corrupt {
            what: Corruption::FooterChecksum,
            ..
        })
    ));
    assert!(matches!(
        open("v1-index-crc.glm"),
        Err(Error::Corrupt {
            what: Corruption::IndexChecksum,
            ..
        })
    ));
    assert!(matches!(
        open("v1-metadata-crc.glm"),
        Err(Error::Corrupt {
            what: Corruption::MetadataChecksum,
            ..
        })
    ));
    assert!(matches!(
        open("v1-bad-header.glm"),
        Err(Error::Corrupt {
            what: Corruption::BadHeader,
            ..
        })
    ));
    assert!(matches!(
        open("v1-offsets-decreasing.glm"),
        Err(Error::Corrupt {
            what: Corruption::IndexOffset { index: 1, .. },
            ..
        })
    ));
    assert!(matches!(
        open("v1-count-mismatch.glm"),
        Err(Error::Corrupt {
            what: Corruption::Metadata { .. },
            ..
        })
    ));
    let damaged = open("v1-record-crc.glm").unwrap();
    assert!(matches!(
        damaged.read(0),
        Err(Error::Corrupt { what: Corruption::RecordChecksum { index: 0 }, ref shard }) if shard == "v1-record-crc.glm"
    ));
    assert_eq!(&damaged.read(2).unwrap()[..], b"gamma");
}
