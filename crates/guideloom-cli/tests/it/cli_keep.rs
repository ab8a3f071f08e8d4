//! `guideloom gc`, `tag`, `compact`, `card` and `info --storage` as installed: a root of 20
//! superseded snapshots and a failed write is collected (dry run first), tags keep their
//! snapshot and open like ids, and a root of many small appended shards is compacted to one
//! with every record identical, its small shards then collected.

use crate::common;

use common::{files, guideloom, json, ok, write_jsonl};

fn publish(root: &str, work: &str, snapshot: &str, append: bool) {
    let mut args = vec![
        "publish",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        snapshot,
        "--work-id",
        work,
    ];
    if append {
        args.push("--append");
    }
    ok(guideloom(&args));
}

#[test]
fn gc_collects_superseded_snapshots_and_failed_writes_and_tags_keep_theirs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("in.jsonl");
    for i in 0..20 {
        write_jsonl(&input, &format!("s{i}"), 50);
        ok(guideloom(&[
            "write",
            r,
            "--work-id",
            &format!("w{i}"),
            input.to_str().unwrap(),
        ]));
        publish(r, &format!("w{i}"), &format!("s{i}"), false);
    }
    ok(guideloom(&[
        "write",
        r,
        "--work-id",
        "failed",
        input.to_str().unwrap(),
    ]));
    let tagged = ok(guideloom(&["tag", r, "prod", "s3"]));
    assert!(tagged.contains("prod -> s3"), "{tagged}");
    let before = files(&root);

    let dry = json(&ok(guideloom(&[
        "--json",
        "gc",
        r,
        "--keep-last",
        "2",
        "--grace",
        "0s",
        "--dry-run",
    ])));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["expired"].as_array().unwrap().len(), 17, "{dry}");
    assert_eq!(files(&root), before, "a dry run writes and deletes nothing");
    let deleted: Vec<&str> = dry["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert!(
        deleted.contains(&"shards/failed/00000000.glm"),
        "{deleted:?}"
    );
    assert!(
        !deleted
            .iter()
            .any(|k| k.starts_with("shards/w3/") || k.starts_with("shards/w19/"))
    );

    let run = json(&ok(guideloom(&[
        "--json",
        "gc",
        r,
        "--keep-last",
        "2",
        "--grace",
        "0s",
    ])));
    assert_eq!(
        run["deleted"], dry["deleted"],
        "the run did what the dry run said"
    );
    assert_eq!(run["bytes"], dry["bytes"]);
    let text = ok(guideloom(&["info", r]));
    assert!(
        text.contains("(expired)") && text.contains("[tags: prod]"),
        "{text}"
    );
    let verify = ok(guideloom(&["verify", r]));
    assert!(verify.contains("ok: 3 snapshot(s)"), "{verify}");
    assert!(verify.contains("expired (retention policy"), "{verify}");
    // The tag opens like an id; an expired snapshot's records are a typed error.
    let rec = ok(guideloom(&["get", r, "0", "--snapshot", "prod"]));
    assert!(rec.contains("s3-0"), "{rec}");
    let err = common::fails(guideloom(&["get", r, "0", "--snapshot", "s1"]));
    assert!(err.contains("expired"), "{err}");
    let storage = json(&ok(guideloom(&["--json", "info", r, "--storage"])));
    assert_eq!(storage["storage"]["reclaimable_bytes"], 0, "{storage}");
    assert_eq!(
        storage["storage"]["live_bytes"],
        storage["storage"]["shard_bytes"]
    );
    let tags = json(&ok(guideloom(&["--json", "tag", r])));
    assert_eq!(tags["tags"]["prod"]["snapshot_id"], "s3");
    ok(guideloom(&["tag", r, "prod", "--delete"]));
    let again = json(&ok(guideloom(&[
        "--json",
        "gc",
        r,
        "--keep-last",
        "2",
        "--grace",
        "0s",
    ])));
    assert_eq!(
        again["expired"][0]["snapshot_id"], "s3",
        "untagged, it expires: {again}"
    );
}

#[test]
fn compact_rewrites_small_shards_with_identical_records_and_gc_takes_the_old_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let r = root.to_str().unwrap();
    let input = tmp.path().join("in.jsonl");
    for i in 0..10 {
        write_jsonl(&input, &format!("a{i}"), 30);
        ok(guideloom(&[
            "write",
            r,
            "--work-id",
            &format!("w{i}"),
            input.to_str().unwrap(),
        ]));
        publish(r, &format!("w{i}"), &format!("a{i}"), i > 0);
    }
    let records = ok(guideloom(&["cat", r]));
    let plan = json(&ok(guideloom(&[
        "--json",
        "compact",
        r,
        "--snapshot-id",
        "c",
        "--dry-run",
    ])));
    assert!(
        files(&root).iter().all(|f| !f.contains("compact-c")),
        "{plan}"
    );
    let done = json(&ok(guideloom(&[
        "--json",
        "compact",
        r,
        "--snapshot-id",
        "c",
    ])));
    let info = json(&ok(guideloom(&["--json", "info", r])));
    let latest = info["snapshots"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(latest["snapshot_id"], "c", "{done}");
    assert_eq!(latest["shards"], 1, "{info}");
    assert_eq!(
        ok(guideloom(&["cat", r])),
        records,
        "every record identical, in order"
    );
    ok(guideloom(&["gc", r, "--grace", "0s"]));
    let left: Vec<String> = files(&root)
        .into_iter()
        .filter(|f| f.ends_with(".glm"))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(ok(guideloom(&["cat", r])), records);

    let readme = tmp.path().join("README.md");
    std::fs::write(&readme, "# Captions\n\nTen appended batches, compacted.\n").unwrap();
    ok(guideloom(&[
        "card",
        r,
        "--snapshot-id",
        "c",
        "--readme",
        readme.to_str().unwrap(),
        "--licence",
        "MIT",
        "--description",
        "captions",
    ]));
    let shown = ok(guideloom(&["info", r]));
    assert!(
        shown.contains("MIT") && shown.contains("captions"),
        "{shown}"
    );
    ok(guideloom(&["verify", r]));
}
