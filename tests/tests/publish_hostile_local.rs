//! A local root never reads or writes through a symbolic link or outside its directory, opens
//! only regular files (a FIFO, a device or a directory where an object should be is refused at
//! once, never opened), and bounds every read of an object before making it.
//!
//! Each test is a class: every control object kind (identity, log entry, pointer, catalog,
//! annotation values, shards) replaced by every hostile kind of entry (a link to an outside
//! file, a link to `/dev/zero`, a FIFO, a directory, a 1 GiB sparse file), and every directory a
//! write goes through replaced by a link to an outside directory.

#![cfg(unix)]

#[path = "it/publish_common/mod.rs"]
mod publish_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use guideloom_format::KIND_DOCUMENTS;
use guideloom_format::ShardMetadata;
use guideloom_publish::fuzzing::{CATALOG_KEY, DATASET_KEY, log_key, pointer_key};
use guideloom_publish::{Error, Registry, RetryPolicy, Root, RootOptions, Snapshot, StoreOptions};
use publish_common::*;

/// How long any refused operation may take before the test calls it a hang. A hang detector,
/// not a performance bound: every refusal here is a handful of syscalls.
const HANG: Duration = Duration::from_secs(30);

fn open_root(dir: &Path, options: &StoreOptions) -> Root {
    // A fresh registry and root each time: no identity cached from before the damage.
    Root::new(
        Registry::new()
            .resolve(dir.to_str().unwrap(), options)
            .unwrap(),
        RootOptions::default(),
    )
}

/// A published local root: dataset `captures`, snapshot `s1` of one shard (3 records) by
/// worker `w`, and annotation set `labels/v1`.
async fn published(dir: &Path) -> Snapshot {
    let root = open_root(dir, &StoreOptions::default());
    let records = [b"alpha".to_vec(), b"beta".to_vec(), b"gamma".to_vec()];
    let shard = root
        .write_shard(
            "w",
            0,
            ShardMetadata::new("raw", KIND_DOCUMENTS),
            records.iter(),
        )
        .await
        .unwrap();
    let snapshot = publish(&root, "s1", vec![shard]).await;
    root.publish_annotations("labels", "v1", &snapshot, &["a", "b", "c"], &fast_retry())
        .await
        .unwrap();
    snapshot
}

/// Peak resident memory of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostile {
    /// A symbolic link to a copy of the original bytes outside the root.
    LinkOutside,
    /// A symbolic link to `/dev/zero` (endless).
    LinkDevZero,
    /// A FIFO: opening it for reading blocks until a writer comes.
    Fifo,
    /// A directory.
    Directory,
    /// A 1 GiB sparse regular file.
    Huge,
}

const HOSTILE: [Hostile; 5] = [
    Hostile::LinkOutside,
    Hostile::LinkDevZero,
    Hostile::Fifo,
    Hostile::Directory,
    Hostile::Huge,
];

/// Replaces the object at `path` by a hostile entry of kind `h` (`outside`: a directory
/// outside the root for link targets).
fn plant(path: &Path, h: Hostile, outside: &Path) {
    let original = std::fs::read(path).unwrap();
    std::fs::remove_file(path).unwrap();
    match h {
        Hostile::LinkOutside => {
            let target = outside.join(path.file_name().unwrap());
            std::fs::write(&target, &original).unwrap();
            std::os::unix::fs::symlink(&target, path).unwrap();
        }
        Hostile::LinkDevZero => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        Hostile::Fifo => {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap()
        }
        Hostile::Directory => std::fs::create_dir(path).unwrap(),
        Hostile::Huge => {
            let f = std::fs::File::create(path).unwrap();
            f.set_len(1 << 30).unwrap();
        }
    }
}

/// The read of the published root that touches `key` (after `plant`), as the error it ends
/// in. Every read starts from a fresh root so nothing is cached.
async fn read_touching(dir: &Path, key: &str) -> Error {
    let root = open_root(dir, &StoreOptions::default());
    let result = tokio::time::timeout(HANG, async {
        match key {
            // The identity is read by publishers, `info` and `verify` (readers of snapshots
            // do not need it); the pointer by open-by-id, which then reads the log entry it
            // names.
            k if k == DATASET_KEY => root.identity().await.map(|_| ()),
            k if k.starts_with("snapshots/") || k.starts_with("log/") => {
                root.snapshot("s1").await.map(|_| ())
            }
            k if k == CATALOG_KEY => root.catalog().await.map(|_| ()),
            k if k.starts_with("annotations/") => {
                let snapshot = root.snapshot("s1").await?;
                root.annotations("labels", None, &snapshot, false)
                    .await
                    .map(|_| ())
            }
            k if k.starts_with("shards/") => {
                let snapshot = root.snapshot("s1").await?;
                root.reader(snapshot).get_async(0).await.map(|_| ())
            }
            other => panic!("no read for {other}"),
        }
    })
    .await
    .unwrap_or_else(|_| panic!("reading {key} hung for {HANG:?}"));
    result.expect_err("the damaged root was read as if it were fine")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_replaced_by_a_hostile_entry_is_refused_at_once_and_bounded() {
    let values = guideloom_publish::fuzzing::values_key("labels", "v1");
    let keys = [
        DATASET_KEY.to_owned(),
        log_key(1),
        pointer_key("s1"),
        CATALOG_KEY.to_owned(),
        values,
        "shards/w/00000000.glm".to_owned(),
    ];
    for key in &keys {
        for h in HOSTILE {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            published(dir.path()).await;
            let path = dir.path().join(key);
            plant(&path, h, outside.path());
            let before = peak_rss();
            let err = read_touching(dir.path(), key).await;
            let grew = peak_rss().saturating_sub(before);
            assert!(
                grew < 64 << 20,
                "{key} as {h:?}: peak RSS grew by {grew} bytes: the object was read whole"
            );
            match h {
                Hostile::LinkOutside
                | Hostile::LinkDevZero
                | Hostile::Fifo
                | Hostile::Directory => {
                    let Error::RefusedFile {
                        path: refused,
                        kind,
                        ..
                    } = &err
                    else {
                        panic!("{key} as {h:?}: expected RefusedFile, got {err:?}");
                    };
                    assert_eq!(refused, &path, "{key} as {h:?}: {err}");
                    let want = match h {
                        Hostile::Fifo => "a FIFO (named pipe)",
                        Hostile::Directory => "a directory",
                        _ => "a symbolic link",
                    };
                    assert_eq!(*kind, want, "{key} as {h:?}");
                    assert!(
                        err.to_string().contains(&path.display().to_string()),
                        "the message names the path: {err}"
                    );
                }
                Hostile::Huge => {
                    // A reference gives the size (pointer → log entry, catalog → values,
                    // manifest → shard): a verification error; otherwise the kind's cap.
                    let bounded = matches!(
                        &err,
                        Error::TooLarge { key: k, size: Some(size), .. }
                            if k == key && *size == 1 << 30
                    ) || matches!(
                        &err,
                        Error::Verification { key: k, what: "size", actual, .. }
                            if k == key && actual == &(1u64 << 30).to_string()
                    );
                    assert!(bounded, "{key} as a 1 GiB file: {err:?}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_where_an_object_should_be_fails_every_entry_point_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = published(dir.path()).await;
    nix::unistd::mkfifo(
        &dir.path().join("snapshots/s2.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let root = open_root(dir.path(), &StoreOptions::default());
    let store = root.store();
    let checks = tokio::time::timeout(HANG, async {
        let key = "snapshots/s2.json";
        let head = store.head(key).await.unwrap_err();
        let get = store.get(key, 1024).await.unwrap_err();
        let range = store.get_range(key, 0..1).await.unwrap_err();
        let reader = store.open_reader(key, 0).await.unwrap_err();
        let by_id = root.snapshot("s2").await.unwrap_err();
        // Listings leave it out; the rest of the root is still readable.
        let listed: Vec<String> = store
            .list("snapshots")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        (head, get, range, reader, by_id, listed)
    })
    .await
    .expect("an operation on a FIFO hung");
    let (head, get, range, reader, by_id, listed) = checks;
    for err in [head, get, range, reader, by_id] {
        assert!(
            matches!(
                &err,
                Error::RefusedFile {
                    kind: "a FIFO (named pipe)",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    assert_eq!(listed, vec!["snapshots/s1.json".to_owned()]);
    assert_eq!(root.snapshot("s1").await.unwrap(), snapshot);
}

/// Every file below `dir`, relative, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let ft = entry.file_type().unwrap();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                out.insert(
                    path.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&path).unwrap(),
                );
            } else {
                out.insert(path.strip_prefix(dir).unwrap().to_path_buf(), Vec::new());
            }
        }
    }
    out
}

/// Moves directory `rel` of the root outside (into `outside`) and leaves a symbolic link to
/// it in its place: the attack that made writes land outside the root.
fn link_out(root: &Path, rel: &str, outside: &Path) -> PathBuf {
    let inside = root.join(rel);
    let target = outside.join(rel.replace('/', "_"));
    if inside.exists() {
        std::fs::rename(&inside, &target).unwrap();
    } else {
        std::fs::create_dir_all(&target).unwrap();
    }
    std::os::unix::fs::symlink(&target, &inside).unwrap();
    inside
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_never_go_through_a_symlinked_directory() {
    // Each case: the directory replaced by a link, and the write that goes through it.
    let cases: [(&str, &str); 8] = [
        ("shards", "write_shard"),
        ("shards/w9", "write_shard"),
        ("log", "publish"),
        ("claims", "publish"),
        ("snapshots", "publish"),
        ("annotations", "annotate"),
        ("annotations/labels", "annotate"),
        ("annotations/labels2", "annotate"),
    ];
    for (rel, write) in cases {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let snapshot = published(dir.path()).await;
        let link = link_out(dir.path(), rel, outside.path());
        let before = tree(outside.path());
        let root = open_root(dir.path(), &StoreOptions::default());
        let result = tokio::time::timeout(HANG, async {
            match write {
                "write_shard" => root
                    .write_shard(
                        "w9",
                        0,
                        ShardMetadata::new("raw", KIND_DOCUMENTS),
                        [b"x".to_vec()].iter(),
                    )
                    .await
                    .map(|_| ()),
                "publish" => {
                    let shards = snapshot.shards().to_vec();
                    root.publish(
                        &request("s2", shards, guideloom_publish::PublishMode::Full),
                        &Default::default(),
                    )
                    .await
                    .map(|_| ())
                }
                _ => {
                    let set = rel.strip_prefix("annotations/").unwrap_or("labels");
                    root.publish_annotations(
                        set,
                        "v2",
                        &snapshot,
                        &[1, 2, 3],
                        &RetryPolicy::contended_update(),
                    )
                    .await
                    .map(|_| ())
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{write} through {rel} hung"));
        let err = result.expect_err("a write went through a symbolic link");
        assert!(
            matches!(&err, Error::RefusedFile { path, kind: "a symbolic link", .. } if path == &link),
            "{write} through {rel}: {err:?}"
        );
        assert_eq!(
            tree(outside.path()),
            before,
            "{write} through a link at {rel} wrote outside the root"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_never_follow_a_symlinked_directory_unless_opted_in() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    published(dir.path()).await;
    let link = link_out(dir.path(), "shards", outside.path());
    let root = open_root(dir.path(), &StoreOptions::default());
    let listed = root.store().list("shards").await.unwrap_err();
    assert!(
        matches!(&listed, Error::RefusedFile { path, kind: "a symbolic link", .. } if path == &link),
        "{listed:?}"
    );
    assert!(
        root.store()
            .list("")
            .await
            .unwrap()
            .iter()
            .all(|o| !o.key.starts_with("shards/"))
    );
    let snapshot = root.snapshot("s1").await.unwrap();
    let err = root.reader(snapshot).get_async(1).await.unwrap_err();
    assert!(
        matches!(&err, Error::RefusedFile { path, kind: "a symbolic link", .. } if path == &link),
        "{err:?}"
    );
    // The explicit opt-in follows links beneath the root; FIFOs are still refused.
    let trusting = StoreOptions {
        follow_symlinks: true,
        ..StoreOptions::default()
    };
    let root = open_root(dir.path(), &trusting);
    let snapshot = root.snapshot("s1").await.unwrap();
    assert_eq!(
        root.reader(snapshot).get_async(1).await.unwrap().as_ref(),
        b"beta"
    );
    assert_eq!(root.store().list("shards").await.unwrap().len(), 1);
    nix::unistd::mkfifo(
        &dir.path().join("log/fifo.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let err = root.store().get("log/fifo.json", 10).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::RefusedFile {
                kind: "a FIFO (named pipe)",
                ..
            }
        ),
        "{err:?}"
    );
}

/// A writer racing an attacker who keeps swapping a directory of the root for a link to an
/// outside directory: every shard lands inside the root or fails with `RefusedFile`, and
/// nothing is ever written outside (a check-then-open implementation loses this race).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_link_mid_write_never_leaks_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root_path = dir.path().to_path_buf();
    let target = outside.path().to_path_buf();
    let root = open_root(dir.path(), &StoreOptions::default());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let real = root_path.join("shards/race");
            let parked = root_path.join("shards/.parked");
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Park the real directory, put a link in its place, then restore.
                if std::fs::rename(&real, &parked).is_ok() {
                    let _ = std::os::unix::fs::symlink(&target, &real);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&real);
                    let _ = std::fs::rename(&parked, &real);
                    swaps += 1;
                }
                std::thread::yield_now();
            }
            swaps
        })
    };
    let (mut landed, mut refused) = (0u64, 0u64);
    for n in 0..300u64 {
        match root
            .write_shard(
                "race",
                n,
                ShardMetadata::new("raw", KIND_DOCUMENTS),
                [format!("record {n}").into_bytes()].iter(),
            )
            .await
        {
            Ok(_) => landed += 1,
            Err(Error::RefusedFile { .. }) => refused += 1,
            // The swapper moved the directory away between two components: not found.
            Err(Error::Io { .. } | Error::NotFound { .. }) => refused += 1,
            Err(e) => panic!("shard {n}: {e:?}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("{landed} shards landed, {refused} refused, {swaps} swaps");
    assert!(
        landed > 0,
        "no write succeeded ({refused} refused, {swaps} swaps)"
    );
    assert!(
        swaps > 0,
        "the attacker never swapped: the race was not exercised"
    );
    assert!(
        tree(outside.path()).is_empty(),
        "a write leaked outside the root: {:?}",
        tree(outside.path()).keys().collect::<Vec<_>>()
    );
}

/// The one cap above "a few MiB": parsing an accepted manifest costs memory in proportion to
/// its size. Measured here on a manifest of `GUIDELOOM_MANIFEST_MIB` (default 48) MiB of
/// shard references: peak RSS growth while parsing stays under 3x the text.
#[test]
fn parsing_a_large_manifest_costs_memory_in_proportion() {
    use guideloom_publish::Manifest;
    let mib: usize = std::env::var("GUIDELOOM_MANIFEST_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    // One reference is ~150 bytes of pretty JSON. The text is built directly (no Manifest
    // value alive beside it), so the peak measured is the parse's own.
    let shards = mib * (1 << 20) / 150;
    let mut body = Vec::with_capacity(mib << 20);
    body.extend_from_slice(
        format!(
            "{{\"format\": \"{}\", \"version\": {}, \"seq\": 1, \"snapshot_id\": \"s\", \
             \"dataset_id\": \"d\", \"parent_seq\": null, \"mode\": \"full\", \
             \"total_records\": {}, \"claim_nonce\": \"n\", \"shards\": [",
            guideloom_publish::fuzzing::MANIFEST_FORMAT,
            guideloom_publish::fuzzing::CONTROL_VERSION,
            1000 * shards as u64
        )
        .as_bytes(),
    );
    for i in 0..shards {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(
            format!(
                "\n    {{\n      \"key\": \"shards/w{:04}/{:08}.glm\",\n      \"size\": 1048576,\n      \
                 \"record_count\": 1000,\n      \"checksum\": null\n    }}",
                i % 1000,
                i / 1000
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(b"]}");
    let before = peak_rss();
    let parsed = Manifest::parse("log/x", &body, "d").unwrap();
    let grew = peak_rss().saturating_sub(before);
    println!(
        "manifest of {} bytes ({shards} shards): peak RSS grew {grew} bytes while parsing ({:.2}x)",
        body.len(),
        grew as f64 / body.len() as f64
    );
    assert_eq!(parsed.shards.len(), shards);
    assert!(
        grew < 3 * body.len() as u64,
        "parsing took {grew} bytes for {}",
        body.len()
    );
}
