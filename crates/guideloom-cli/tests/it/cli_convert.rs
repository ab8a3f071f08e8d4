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
