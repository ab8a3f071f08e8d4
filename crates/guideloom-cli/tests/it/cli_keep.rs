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

/// `guideloom gc` killed (SIGKILL) at moments spread over its run: the kept snapshot stays
/// whole whatever was deleted, and the next run finishes the work (it resumes the killed
/// run's record) leaving exactly the kept snapshot's shards and every record done.
#[test]
fn gc_killed_at_any_moment_leaves_the_kept_snapshot_whole_and_the_next_run_finishes() {
    use guideloom_publish::{
        PublicationOptions, PublishMode, PublishRequest, Root, RootOptions, StoreOptions,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for delay_ms in [0u64, 3, 8, 15, 30, 60, 120] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("root");
        let r = dir.to_str().unwrap();
        let root = Root::open(r, &StoreOptions::default(), RootOptions::default()).unwrap();
        rt.block_on(async {
            for s in 0..30u64 {
                let mut refs = Vec::new();
                for n in 0..10 {
                    let records = vec![vec![u8::try_from(s).unwrap(); 4096]];
                    let meta = guideloom_format::ShardMetadata::new("raw", "documents");
                    let work = format!("w{s}");
                    let written = root.write_shard(&work, n, meta, &records);
                    refs.push(written.await.unwrap());
                }
                let request = PublishRequest {
                    dataset_id: "d".into(),
                    snapshot_id: format!("s{s}"),
                    shards: refs,
                    mode: PublishMode::Full,
                    schema: None,
                };
                root.publish(&request, &PublicationOptions::default())
                    .await
                    .unwrap();
            }
            for n in 0..50 {
                let meta = guideloom_format::ShardMetadata::new("raw", "documents");
                root.write_shard("failed", n, meta, &[vec![9u8; 4096]])
                    .await
                    .unwrap();
            }
        });
        let mut child = std::process::Command::new(common::BIN)
            .args(["gc", r, "--grace", "0s"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        // Whatever the killed run did, the latest snapshot's shards are all there, whole.
        let latest = rt.block_on(root.latest()).unwrap();
        assert_eq!(latest.id(), "s29");
        for shard in latest.shards() {
            let info = rt.block_on(root.store().head(&shard.key)).unwrap();
            assert_eq!(
                info.size, shard.size,
                "killed at {delay_ms} ms: {}",
                shard.key
            );
        }
        ok(guideloom(&["gc", r, "--grace", "0s"]));
        let shards: Vec<String> = files(&dir)
            .into_iter()
            .filter(|f| f.starts_with("shards/"))
            .collect();
        assert_eq!(shards.len(), 10, "killed at {delay_ms} ms: {shards:?}");
        assert!(shards.iter().all(|f| f.starts_with("shards/w29/")));
        let gc: Vec<String> = files(&dir)
            .into_iter()
            .filter(|f| f.starts_with("gc/"))
            .collect();
        let records = gc.iter().filter(|f| f.ends_with(".json")).count();
        let done = gc.iter().filter(|f| f.ends_with(".done")).count();
        assert_eq!(
            records, done,
            "killed at {delay_ms} ms: every record finished: {gc:?}"
        );
        ok(guideloom(&["verify", r]));
    }
}
