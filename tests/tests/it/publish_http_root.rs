//! Read-only `http://` roots: a dataset published to a directory that the nginx test server
//! serves, opened by its URL — latest, by id (pointer and pointer-less fallback), the
//! snapshot list, records by index and by staged scan, request counts, refused writes, and a
//! missing base.

use std::path::PathBuf;
use std::sync::Arc;

use guideloom_format::ShardMetadata;
use guideloom_publish::{
    Error, HttpRootStore, PublicationOptions, PublishMode, PublishRequest, Registry, RetryPolicy,
    Root, RootOptions, RootStore, ShardRef, StoreOptions,
};

/// Removes the published subdirectory of the nginx root whatever the outcome.
struct Served(PathBuf);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(i: u64) -> Vec<u8> {
    format!(
        "record {i:05} {}",
        "x".repeat(usize::try_from(i % 37).unwrap())
    )
    .into_bytes()
}

async fn shard(root: &Root, work_id: &str, records: std::ops::Range<u64>) -> ShardRef {
    root.write_shard(
        work_id,
        0,
        ShardMetadata::new("raw", "documents"),
        records.map(record),
    )
    .await
    .unwrap()
}

async fn publish(root: &Root, id: &str, shards: Vec<ShardRef>, mode: PublishMode) {
    let request = PublishRequest {
        dataset_id: "http-captures".into(),
        snapshot_id: id.into(),
        shards,
        mode,
        schema: None,
    };
    root.publish(&request, &PublicationOptions::default())
        .await
        .unwrap();
}

/// The local root in `dir` (below the served directory) that publishes what nginx serves.
fn local_root(dir: &std::path::Path) -> Root {
    Root::new(
        Registry::new()
            .resolve(dir.to_str().unwrap(), &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    )
}

fn requests(store: &HttpRootStore) -> u64 {
    store.stats().snapshot().requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_root_reads_what_a_local_root_published() {
    let Some((url, served_root)) = guideloom_tests::nginx("http_root_reads") else {
        return;
    };
    let subdir = guideloom_tests::unique("http-root");
    let dir = served_root.join(&subdir);
    let _served = Served(dir.clone());

    // Publish three snapshots (full, append, append) into the served directory.
    let local = local_root(&dir);
    let a = shard(&local, "w0", 0..40).await;
    let b = shard(&local, "w1", 40..41).await;
    let c = shard(&local, "w2", 41..100).await;
    publish(&local, "first", vec![a], PublishMode::Full).await;
    publish(&local, "second", vec![b], PublishMode::Append).await;
    publish(&local, "third", vec![c], PublishMode::Append).await;

    let third = local.latest().await.unwrap();
    let labels: Vec<u64> = (0..100).map(|i| i * 3).collect();
    local
        .publish_annotations(
            "labels",
            "v1",
            &third,
            &labels,
            &RetryPolicy::contended_update(),
        )
        .await
        .unwrap();

    let base = format!("{url}{subdir}");
    let store = Arc::new(HttpRootStore::new(&base).unwrap());
    let root = Root::new(store.clone(), RootOptions::default());
    assert!(!root.store().capabilities().list);

    // Latest: seq 3 is found by 4 GET probes (1, 2, 4 absent, 3); the last brought log/3
    // whole. dataset.json is read beside the first probe (one request more, no round trip
    // more), so the entry is checked against the root's dataset id.
    let latest = root.latest().await.unwrap();
    assert_eq!(
        (latest.id(), latest.seq(), latest.total_records()),
        ("third", 3, 100)
    );
    let open_requests = requests(&store);
    assert_eq!(
        open_requests, 5,
        "4 GET probes, the last one the entry, and dataset.json"
    );

    // First record: one tail read opens the shard, one ranged GET reads the record.
    let reader = root.reader(latest.clone());
    assert_eq!(reader.get_async(0).await.unwrap(), record(0));
    let first_record = requests(&store) - open_requests;
    assert_eq!(first_record, 2, "shard tail + record range");
    println!(
        "http root: open latest = {open_requests} requests, first record = {first_record} more"
    );

    // Records by index, across shards, and a batch.
    for i in [1, 39, 40, 41, 99] {
        assert_eq!(reader.get_async(i).await.unwrap(), record(i), "record {i}");
    }
    let batch = reader.get_many_async(&[98, 3, 40, 60]).await.unwrap();
    let want: Vec<Vec<u8>> = [98, 3, 40, 60].into_iter().map(record).collect();
    assert_eq!(batch, want);

    // By id: pointer + log entry (identity cached).
    let before = requests(&store);
    let first = root.snapshot("first").await.unwrap();
    assert_eq!((first.seq(), first.total_records()), (1, 40));
    assert_eq!(requests(&store) - before, 2);

    // The snapshot list: the probe (4 HEADs) plus one GET per snapshot.
    let before = requests(&store);
    let ids: Vec<String> = root
        .snapshots()
        .await
        .unwrap()
        .iter()
        .map(|s| s.id().to_owned())
        .collect();
    assert_eq!(ids, ["first", "second", "third"]);
    assert_eq!(requests(&store) - before, 7);

    // Without its pointer, a snapshot is still found by scanning the probed log.
    std::fs::remove_file(dir.join("snapshots/second.json")).unwrap();
    let second = root.snapshot("second").await.unwrap();
    assert_eq!((second.seq(), second.total_records()), (2, 41));
    assert!(matches!(
        root.snapshot("nope").await,
        Err(Error::NotFound { .. })
    ));

    // A staged scan reads each shard with one GET and returns the same bytes.
    let scan_root = Root::new(store.clone(), RootOptions::default());
    let scan_reader = scan_root.reader(latest.clone());
    let before = requests(&store);
    let mut scan = scan_reader.scan(0..100).unwrap();
    let mut scanned = Vec::new();
    while let Some(r) = scan.next_record().await {
        scanned.push(r.unwrap());
    }
    let want: Vec<Vec<u8>> = (0..100).map(record).collect();
    assert_eq!(scanned, want);
    assert_eq!(requests(&store) - before, 3, "one GET per shard");

    // Annotations published on the local root read back over HTTP.
    let set = root
        .annotations("labels", None, &latest, false)
        .await
        .unwrap();
    assert_eq!(set.get::<u64>(99).unwrap(), 297);

    // The registry resolves the same URL to an HTTP root.
    let resolved = Root::new(
        Registry::new()
            .resolve(&format!("{base}/"), &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    );
    assert_eq!(resolved.latest().await.unwrap().id(), "third");
    assert_eq!(resolved.store().describe(), format!("{base}/"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_root_refuses_writes_with_a_typed_error() {
    let Some((url, served_root)) = guideloom_tests::nginx("http_root_refuses_writes") else {
        return;
    };
    let subdir = guideloom_tests::unique("http-ro");
    let dir = served_root.join(&subdir);
    let _served = Served(dir.clone());
    let local = local_root(&dir);
    let a = shard(&local, "w0", 0..5).await;
    publish(&local, "only", vec![a.clone()], PublishMode::Full).await;

    let store = Arc::new(HttpRootStore::new(&format!("{url}{subdir}")).unwrap());
    let root = Root::new(store.clone(), RootOptions::default());
    let latest = root.latest().await.unwrap();

    let before = requests(&store);
    let files = guideloom_tests::tree(&dir);
    let err = root
        .upload_shard("w9", 0, bytes::Bytes::from_static(b"x"), 1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ReadOnlyRoot { root } if root.contains(&subdir)),
        "{err}"
    );
    let request = PublishRequest {
        dataset_id: "http-captures".into(),
        snapshot_id: "again".into(),
        shards: vec![a],
        mode: PublishMode::Full,
        schema: None,
    };
    let err = root
        .publish(&request, &PublicationOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ReadOnlyRoot { .. }), "{err}");
    let err = root
        .publish_annotations(
            "labels",
            "v1",
            &latest,
            &[1, 2, 3, 4, 5],
            &RetryPolicy::contended_update(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ReadOnlyRoot { .. }), "{err}");
    assert_eq!(
        requests(&store),
        before,
        "writes refused before any request"
    );
    // Nothing was written behind the server's back: the served tree is byte for byte the same.
    assert_eq!(guideloom_tests::tree(&dir), files);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_http_base_is_not_found() {
    let Some((url, _)) = guideloom_tests::nginx("missing_http_base") else {
        return;
    };
    let base = format!("{url}{}", guideloom_tests::unique("absent"));
    let root = Root::new(
        Registry::new()
            .resolve(&base, &StoreOptions::default())
            .unwrap(),
        RootOptions::default(),
    );
    let err = root.latest().await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let err = root.snapshot("any").await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(root.snapshots().await.unwrap().is_empty());
    assert!(root.identity().await.unwrap_err().is_not_found());
}

/// An origin that lists directories as JSON (the nginx test server's `/listed/` prefix)
/// opened with listing: the latest snapshot costs one listing of `log/` and one GET of the
/// entry at any sequence number, `snapshots()` lists too, and records read as before. With
/// listing declared on an origin that does not list, `latest` probes after all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_origins_open_the_latest_snapshot_in_two_requests() {
    let Some((url, served_root)) = guideloom_tests::nginx("listing_origins") else {
        return;
    };
    let subdir = guideloom_tests::unique("http-listing");
    let dir = served_root.join(&subdir);
    let _served = Served(dir.clone());
    let local = local_root(&dir);
    let mut shards = Vec::new();
    for (n, id) in ["s1", "s2", "s3", "s4", "s5"].into_iter().enumerate() {
        let n = n as u64;
        let s = shard(&local, &format!("w{n}"), n * 10..n * 10 + 10).await;
        shards.push(s.clone());
        let mode = if n == 0 {
            PublishMode::Full
        } else {
            PublishMode::Append
        };
        publish(&local, id, vec![s], mode).await;
    }

    // Each count includes dataset.json, read beside the listing or the first probe.
    for (base, listing, want) in [
        (format!("{url}listed/{subdir}"), true, 3),
        (format!("{url}listed/{subdir}"), false, 7),
        // Declared, but this origin answers directories with 403: probing after the failed
        // listing.
        (format!("{url}{subdir}"), true, 8),
    ] {
        let store = Arc::new(HttpRootStore::new(&base).unwrap().with_listing(listing));
        assert_eq!(store.capabilities().list, listing);
        let root = Root::new(store.clone(), RootOptions::default());
        let latest = root.latest().await.unwrap();
        assert_eq!(
            (latest.id(), latest.seq(), latest.total_records()),
            ("s5", 5, 50)
        );
        assert_eq!(requests(&store), want, "{base} listing={listing}");
        let reader = root.reader(latest);
        assert_eq!(reader.get_async(42).await.unwrap(), record(42));
    }

    // A root that is not there, on the listing origin: the 404 of its `log/` is not taken
    // for "no snapshots" but sends `latest` to probing, which finds nothing either.
    let missing = HttpRootStore::new(&format!("{url}listed/{subdir}-missing"))
        .unwrap()
        .with_listing(true);
    let missing = Arc::new(missing);
    let err = Root::new(missing.clone(), RootOptions::default())
        .latest()
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(
        requests(&missing),
        3,
        "the listing and dataset.json, then one probe"
    );

    // Through the registry's options, and the whole snapshot list.
    let options = StoreOptions::default().with_http_listing(true);
    let store = Registry::new()
        .resolve(&format!("{url}listed/{subdir}"), &options)
        .unwrap();
    assert!(store.capabilities().list);
    let listed = store.list("shards").await.unwrap();
    let mut keys: Vec<&str> = listed.iter().map(|o| o.key.as_str()).collect();
    keys.sort_unstable();
    let mut want: Vec<&str> = shards.iter().map(|s| s.key.as_str()).collect();
    want.sort_unstable();
    assert_eq!(keys, want, "shards/ walked through its subdirectories");
    for (o, s) in listed
        .iter()
        .filter_map(|o| Some((o, shards.iter().find(|s| s.key == o.key)?)))
    {
        assert_eq!(o.size, s.size, "{}", o.key);
    }
    let root = Root::new(store, RootOptions::default());
    let ids: Vec<String> = root
        .snapshots()
        .await
        .unwrap()
        .iter()
        .map(|s| s.id().to_owned())
        .collect();
    assert_eq!(ids, ["s1", "s2", "s3", "s4", "s5"]);
}

/// Replaces `key` below `dir` with the file at `with` (copied, dated an hour later as a file
/// written a second later would be: nginx's ETag is the modification time and the size),
/// renamed over it.
fn replace_served(dir: &std::path::Path, key: &str, with: &std::path::Path) {
    let next = dir.join(format!("{key}.next"));
    std::fs::copy(with, &next).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(later)
        .unwrap();
    std::fs::rename(&next, dir.join(key)).unwrap();
}

/// A shard swapped on the origin for another of the same size: an HTTP reader that opened
/// it fails its next read with `Verification` of the `"entity tag"` (nginx answers its
/// `If-Match` with 412), at one request; a reader that opens it afterwards refuses it by its
/// footer checksum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_swapped_on_the_origin_is_refused_over_http() {
    let Some((url, served_root)) = guideloom_tests::nginx("http_swapped_shard") else {
        return;
    };
    let subdir = guideloom_tests::unique("http-swapped");
    let dir = served_root.join(&subdir);
    let _served = Served(dir.clone());
    let local = local_root(&dir);
    // Records 370.. have the lengths of records 0.. (lengths cycle by 37): same size.
    let ours = shard(&local, "a", 0..40).await;
    let theirs = shard(&local, "b", 370..410).await;
    assert_eq!(ours.size, theirs.size);
    publish(&local, "s1", vec![ours.clone()], PublishMode::Full).await;

    let open = || {
        let store = Arc::new(HttpRootStore::new(&format!("{url}{subdir}")).unwrap());
        (Root::new(store.clone(), RootOptions::default()), store)
    };
    let (root, store) = open();
    let reader = root.open_latest().await.unwrap();
    assert_eq!(reader.get_async(0).await.unwrap(), record(0));
    replace_served(&dir, &ours.key, &dir.join(&theirs.key));
    let before = requests(&store);
    let err = reader.get_async(1).await.unwrap_err();
    assert!(
        matches!(&err, Error::Verification { key, what: "entity tag", .. } if *key == ours.key),
        "{err:?}"
    );
    assert_eq!(requests(&store) - before, 1, "one request, none added");

    let (root, _) = open();
    let err = root
        .open_latest()
        .await
        .unwrap()
        .get_async(1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Verification { key, what: "footer checksum", .. } if *key == ours.key),
        "{err:?}"
    );
}

/// A newest log entry naming another dataset, served beside a real one: a fresh HTTP root
/// refuses it as `Corrupt` naming the entry, whether it finds the entry by probing or by a
/// listing, with `dataset.json` read beside the first log request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_log_entry_of_another_dataset_is_corrupt() {
    let Some((url, served_root)) = guideloom_tests::nginx("http_foreign_entry") else {
        return;
    };
    let subdir = guideloom_tests::unique("http-foreign");
    let dir = served_root.join(&subdir);
    let _served = Served(dir.clone());
    let local = local_root(&dir);
    let a = shard(&local, "a", 0..10).await;
    publish(&local, "s1", vec![a], PublishMode::Full).await;
    let entry = |seq: u64| format!("log/{seq:020}.json");
    let mut foreign: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(entry(1))).unwrap()).unwrap();
    foreign["seq"] = 2.into();
    foreign["parent_seq"] = 1.into();
    foreign["snapshot_id"] = "foreign".into();
    foreign["dataset_id"] = "other".into();
    std::fs::write(dir.join(entry(2)), serde_json::to_vec(&foreign).unwrap()).unwrap();
    for (base, listing) in [
        (format!("{url}{subdir}"), false),
        (format!("{url}listed/{subdir}"), true),
    ] {
        let store = HttpRootStore::new(&base).unwrap().with_listing(listing);
        let err = Root::new(Arc::new(store), RootOptions::default())
            .latest()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { key, what } if *key == entry(2) && what.contains("\"other\"")),
            "listing={listing}: {err:?}"
        );
    }
}
