//! `guideloom convert`: native shard → ArrayRecord → native keeps every record's bytes; the
//! direction comes from the names or `--to`; existing outputs and bad options are refused.

use crate::common;

use std::path::Path;

use common::{guideloom, ok, stderr};
use guideloom_arrayrecord::{ArrayRecordReadOptions, ArrayRecordReader};
use guideloom_format::{ReadOptions, ShardMetadata, ShardWriter, SyncShard};
use guideloom_io::{Backend, SeekIo};

fn record(i: u64) -> Vec<u8> {
    format!("record {i};")
        .repeat(usize::try_from(i % 50).unwrap())
        .into_bytes()
}

const N: u64 = 700;

fn native_records(path: &Path) -> Vec<Vec<u8>> {
    let shard = SyncShard::open(
        SeekIo::new().open(&path.to_path_buf()).unwrap(),
        &ReadOptions::default(),
    )
    .unwrap();
    (0..shard.len())
        .map(|i| shard.read(i).unwrap().to_vec())
        .collect()
}

#[test]
fn native_to_arrayrecord_and_back_keeps_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("part.glm");
    let mut w = ShardWriter::create(&src, ShardMetadata::new("raw", "documents")).unwrap();
    for i in 0..N {
        w.append(&record(i)).unwrap();
    }
    w.finish().unwrap();

    let ar = dir.path().join("part.array_record");
    let out = ok(guideloom(&[
        "convert",
        src.to_str().unwrap(),
        ar.to_str().unwrap(),
        "--options",
        "group_size:16,snappy",
    ]));
    assert!(out.contains(&format!("converted {N} records")), "{out}");
    let file = ArrayRecordReader::open(
        SeekIo::new().open(&ar).unwrap(),
        &ArrayRecordReadOptions::default(),
    )
    .unwrap();
    assert_eq!(file.len(), N);
    assert_eq!(file.layout().group_size(), 16);
    assert!(file.layout().writer_options().contains("snappy"));
    for i in 0..N {
        assert_eq!(file.get(i).unwrap(), record(i), "record {i}");
    }

    let back = dir.path().join("back.glm");
    let json = ok(guideloom(&[
        "--json",
        "convert",
        ar.to_str().unwrap(),
        back.to_str().unwrap(),
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["records"], N);
    assert_eq!(v["to"], "native");
    let got = native_records(&back);
    assert_eq!(got.len() as u64, N);
    assert!(got.iter().enumerate().all(|(i, r)| *r == record(i as u64)));

    // --to decides when the names do not.
    let odd = dir.path().join("odd.bin");
    ok(guideloom(&[
        "convert",
        "--to",
        "arrayrecord",
        src.to_str().unwrap(),
        odd.to_str().unwrap(),
    ]));
    let file = ArrayRecordReader::open(
        SeekIo::new().open(&odd).unwrap(),
        &ArrayRecordReadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        file.layout().group_size(),
        1,
        "the Python writer's default group size"
    );
    assert!(file.layout().writer_options().contains("zstd:3"));
}

#[test]
fn refusals() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.glm");
    let mut w = ShardWriter::create(&src, ShardMetadata::new("raw", "documents")).unwrap();
    w.append(b"x").unwrap();
    w.finish().unwrap();
    let s = src.to_str().unwrap();

    let both = dir.path().join("b.glm");
    let o = guideloom(&["convert", s, both.to_str().unwrap()]);
    assert!(
        !o.status.success() && stderr(&o).contains("--to"),
        "{}",
        stderr(&o)
    );

    let exists = dir.path().join("c.array_record");
    std::fs::write(&exists, b"keep me").unwrap();
    let o = guideloom(&["convert", s, exists.to_str().unwrap()]);
    assert!(
        !o.status.success() && stderr(&o).contains("already exists"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&exists).unwrap(), b"keep me");

    let out = dir.path().join("d.array_record");
    let o = guideloom(&[
        "convert",
        s,
        out.to_str().unwrap(),
        "--options",
        "transpose",
    ]);
    assert!(
        !o.status.success() && stderr(&o).contains("transpose"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());

    // A damaged ArrayRecord input is a typed `corrupt` error, and no output appears.
    let good = dir.path().join("e.array_record");
    ok(guideloom(&["convert", s, good.to_str().unwrap()]));
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[64 + 45] ^= 0xff;
    std::fs::write(&good, &bytes).unwrap();
    let back = dir.path().join("e.glm");
    let o = guideloom(&[
        "--json",
        "convert",
        good.to_str().unwrap(),
        back.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("\"corrupt\""),
        "{}",
        stderr(&o)
    );
    assert!(!back.exists());
}

#[test]
fn stream_storage_migrates_into_a_stream_snapshot() {
    use guideloom::{Dataset, StreamStorage, StreamWithMetaStorage, WriterOptions};

    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let storage = StreamWithMetaStorage::<u32, String>::local(&corpus)
        .with_writer_options(WriterOptions::default().max_shard_records(2));
    let mut w = storage.sync_writer().unwrap();
    let docs: [(&[u32], &str); 4] = [
        (&[1, 2, 3], "a"),
        (&[], "empty"),
        (&[4], "b"),
        (&[5, 6], "c"),
    ];
    for (d, m) in docs {
        w.append(d, &m.to_owned()).unwrap();
    }
    w.finish().unwrap();
    let root = dir.path().join("root");
    let (c, r) = (corpus.to_str().unwrap(), root.to_str().unwrap());
    let flags = ["--dataset-id", "corpus", "--snapshot-id", "v1"];

    let json = ok(guideloom(
        &[
            &["--json", "convert", "--stream-storage", c, r][..],
            &flags[..],
        ]
        .concat(),
    ));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["source"], "stream_with_meta");
    assert_eq!(v["element"], "u32");
    assert_eq!(
        (
            v["shards"].as_u64(),
            v["documents"].as_u64(),
            v["tokens"].as_u64()
        ),
        (Some(2), Some(4), Some(6))
    );
    assert_eq!(v["outcome"], "committed");

    let ds = Dataset::open(r).unwrap();
    assert_eq!(&*ds.tokens::<u32>(0..6).unwrap(), &[1, 2, 3, 4, 5, 6]);
    for (i, (d, m)) in docs.iter().enumerate() {
        assert_eq!(&*ds.document::<u32>(i as u64).unwrap(), *d);
        assert_eq!(ds.document_meta::<String>(i as u64).unwrap(), *m);
    }

    // A plain stream into a second snapshot of another root: the text line.
    let plain = dir.path().join("plain");
    let mut w = StreamStorage::<u16>::local(&plain).sync_writer().unwrap();
    w.append(&[7, 8, 9]).unwrap();
    w.finish().unwrap();
    let root2 = dir.path().join("root2");
    let out = ok(guideloom(
        &[
            &[
                "convert",
                "--stream-storage",
                plain.to_str().unwrap(),
                root2.to_str().unwrap(),
            ][..],
            &flags[..],
        ]
        .concat(),
    ));
    assert!(
        out.contains("converted 3 u16 tokens in 1 documents"),
        "{out}"
    );
    let ds = Dataset::open(root2.to_str().unwrap()).unwrap();
    assert_eq!(&*ds.tokens::<u16>(0..3).unwrap(), &[7, 8, 9]);

    // Refusals: the ids are required; a document storage is named as not a stream.
    let o = guideloom(&["convert", "--stream-storage", c, r]);
    assert!(
        !o.status.success() && stderr(&o).contains("--dataset-id"),
        "{}",
        stderr(&o)
    );
    let docs_dir = dir.path().join("docs");
    let mut w = guideloom::DocumentStorage::local(&docs_dir, guideloom::RawFormat)
        .sync_writer()
        .unwrap();
    w.push(&guideloom::Bytes::from_static(b"x")).unwrap();
    w.finish().unwrap();
    let root3 = dir.path().join("root3");
    let o = guideloom(
        &[
            &[
                "convert",
                "--stream-storage",
                docs_dir.to_str().unwrap(),
                root3.to_str().unwrap(),
            ][..],
            &flags[..],
        ]
        .concat(),
    );
    assert!(
        !o.status.success() && stderr(&o).contains("not a token stream"),
        "{}",
        stderr(&o)
    );
    assert!(std::fs::read_dir(root3.join("log")).map_or(true, |mut d| d.next().is_none()));
}
