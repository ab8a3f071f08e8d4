//! Shard writes to object stores spool the encoded bytes to an unnamed file in the staging
//! directory and PUT them from its mapping (guideloom-publish `store/spool.rs`):
//! - anonymous memory stays a buffer whatever the shard's size: a 512 MiB shard reaches moto
//!   (48 MiB on Ceph RGW, whose memstore is small) from a process limited to 32 MiB (16 MiB)
//!   of private writable memory (`RLIMIT_DATA`), which a writer holding the shard on the heap
//!   cannot stay within;
//! - a shard is refused the moment its running size passes `max_encoded_shard_bytes`: no
//!   record past that point is pulled and nothing is sent;
//! - create-only semantics hold for spooled writes on moto, RGW and `memory://`: identical
//!   bytes are idempotent, other bytes collide and leave the object alone, and a PUT whose
//!   reply is lost is resolved by reading the object back against the spool file;
//! - a full staging directory is `Error::DiskFull` naming it, with nothing sent (a full local
//!   root is `DiskFull` too, not a shard error), and a killed writer leaves nothing there (the
//!   spool file never has a name).
//!
//! The memory-limited, full-disk and killed writers are child processes
//! (`tests/src/bin/spool_writer.rs`).

use crate::publish_common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use guideloom_format::ShardMetadata;
use guideloom_publish::faulty::{Fault, FaultyStore, Operation};
use guideloom_publish::{
    CountingStore, Error, Registry, Root, RootOptions, RootStore, StagingOptions, StoreOptions,
};
use publish_common::*;

fn meta() -> ShardMetadata {
    ShardMetadata::new("raw", "documents")
}

/// Record `i` of 64 KiB, distinct per `seed`.
fn record(seed: u8, i: usize) -> Vec<u8> {
    (0..64 << 10)
        .map(|j: usize| {
            (i.wrapping_mul(131) ^ j.wrapping_mul(7) ^ usize::from(seed)).to_le_bytes()[0]
        })
        .collect()
}

/// Open files of this process that live in `dir` without a name there: spool files.
fn unnamed_files_in(dir: &Path) -> usize {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| {
            target.parent() == Some(dir) && target.to_string_lossy().ends_with(" (deleted)")
        })
        .count()
}

/// The same store under a root whose staging (and so spool) directory is `spool`.
fn spooling(store: Arc<dyn RootStore>, spool: &Path, limit: Option<u64>) -> Root {
    let mut options = RootOptions {
        staging: StagingOptions {
            dir: Some(spool.to_owned()),
            ..StagingOptions::default()
        },
        ..RootOptions::default()
    };
    if let Some(limit) = limit {
        options.max_encoded_shard_bytes = limit;
    }
    Root::new(store, options)
}

/// The object-store fixtures available here: memory, and moto and RGW when configured.
fn object_stores() -> Vec<Fixture> {
    let mut v = vec![memory()];
    v.extend(moto());
    v.extend(rgw());
    v
}

/// Runs `spool_writer` with `args` (through `wrap`, a command prefix such as `unshare`) and
/// returns its `SPOOL-RESULT` line, failing with its stderr if it has none.
fn spool_writer(wrap: &[&str], args: &[&str]) -> String {
    let exe = env!("CARGO_BIN_EXE_spool_writer");
    let mut command = match wrap.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let out = command.args(args).output().expect("run spool_writer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.lines().find(|l| l.starts_with("SPOOL-RESULT"));
    let tail: String = stderr.lines().take(3).collect::<Vec<_>>().join("\n");
    line.unwrap_or_else(|| panic!("spool_writer {args:?} ended with {}: {tail}", out.status))
        .to_owned()
}

/// The value of `field=` in a `SPOOL-RESULT` line.
fn field<'l>(line: &'l str, field: &str) -> &'l str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(field)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {field} in {line}"))
}

#[test]
fn a_large_shard_reaches_s3_from_a_process_with_little_private_memory() {
    let servers = [
        (
            "moto",
            guideloom_tests::moto("spool to moto").is_some(),
            "512",
            "32",
        ),
        (
            "rgw",
            guideloom_tests::rgw("spool to rgw").is_some(),
            "48",
            "16",
        ),
    ];
    for (kind, present, mib, limit) in servers {
        if !present {
            continue;
        }
        let spool = tempfile::tempdir().unwrap();
        let dir = spool.path().to_str().unwrap();
        let line = spool_writer(&[], &[kind, dir, mib, "--data-limit-mib", limit]);
        assert!(line.contains(" created "), "{kind}: {line}");
        let size: u64 = field(&line, "size").parse().unwrap();
        assert!(size > mib.parse::<u64>().unwrap() << 20, "{kind}: {line}");
        assert_eq!(field(&line, "head"), field(&line, "size"), "{kind}: {line}");
        assert_eq!(field(&line, "puts"), "1", "{kind}: {line}");
        println!("{kind}: {line}");
    }
}

#[test]
fn a_shard_past_the_limit_is_refused_at_once_and_nothing_is_sent() {
    for fx in object_stores() {
        let spool = tempfile::tempdir().unwrap();
        let counting = CountingStore::new(Arc::clone(fx.root.store()));
        let root = spooling(Arc::new(counting.clone()), spool.path(), Some(3 << 20));
        block_on(async {
            // 100 records of 64 KiB (6.25 MiB) against a 3 MiB limit.
            let pulled = std::sync::atomic::AtomicUsize::new(0);
            let records = (0..100).map(|i| {
                pulled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                record(1, i)
            });
            let err = root.write_shard("w", 0, meta(), records).await.unwrap_err();
            assert!(
                matches!(err, Error::ShardTooLarge { size, limit, .. }
                    if limit == 3 << 20 && size > limit && size <= limit + (64 << 10)),
                "{}: {err}",
                fx.name
            );
            let pulled = pulled.into_inner();
            assert!(
                (48..=49).contains(&pulled),
                "{}: {pulled} records pulled",
                fx.name
            );
            assert_eq!(counting.counts().requests(), 0, "{}", fx.name);
            assert!(
                root.store()
                    .head("shards/w/00000000.glm")
                    .await
                    .unwrap_err()
                    .is_not_found()
            );
        });
        assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
    }
}

#[test]
fn spooled_writes_stay_create_only_and_idempotent() {
    for fx in object_stores() {
        let spool = tempfile::tempdir().unwrap();
        let root = spooling(Arc::clone(fx.root.store()), spool.path(), None);
        block_on(async {
            // 200 records of 64 KiB: 12.5 MiB, spooled past the first MiB. While the records
            // are pulled, the spool file is open in the staging directory, with no name
            // there. The records reach the spool on the encoder's thread in 4 MiB batches
            // (64 records) over a one-deep channel: once the third batch is handed over (at
            // record 192) the first is written, so the file is certain to exist by the last.
            let seen = std::sync::atomic::AtomicUsize::new(0);
            let records = |seed: u8, count: usize| {
                let seen = &seen;
                let dir = spool.path().to_owned();
                (0..count).map(move |i| {
                    if i == count - 1 {
                        seen.fetch_max(
                            unnamed_files_in(&dir),
                            std::sync::atomic::Ordering::Relaxed,
                        );
                        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
                    }
                    record(seed, i)
                })
            };
            let shard = root
                .write_shard("w", 0, meta(), records(1, 200))
                .await
                .unwrap();
            assert_eq!(
                seen.load(std::sync::atomic::Ordering::Relaxed),
                1,
                "{}",
                fx.name
            );
            let stored = root.store().get(&shard.key, shard.size).await.unwrap().body;
            assert_eq!(stored.len() as u64, shard.size);

            // The same bytes again: the same reference. Other bytes of the same size, and
            // of another size: collisions, the object untouched.
            let again = root
                .write_shard("w", 0, meta(), records(1, 200))
                .await
                .unwrap();
            assert_eq!(again, shard, "{}", fx.name);
            for (seed, count) in [(2, 200), (1, 199)] {
                let err = root
                    .write_shard("w", 0, meta(), records(seed, count))
                    .await
                    .unwrap_err();
                assert!(
                    matches!(&err, Error::PublicationCollision { key } if *key == shard.key),
                    "{}: {err}",
                    fx.name
                );
            }
            let after = root.store().get(&shard.key, shard.size).await.unwrap().body;
            assert_eq!(after, stored, "{}", fx.name);
        });
        assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
        assert_eq!(
            unnamed_files_in(spool.path()),
            0,
            "{}: spool file left open",
            fx.name
        );
    }
}

#[test]
fn a_spooled_put_whose_reply_is_lost_is_resolved_from_the_spool_file() {
    let spool = tempfile::tempdir().unwrap();
    let store = Registry::new()
        .resolve(
            &format!("memory://{}", unique("spool-lost")),
            &StoreOptions::default(),
        )
        .unwrap();
    let faulty = Arc::new(FaultyStore::new(store));
    faulty.plan(Operation::PutCreate, 1, Fault::LoseReply);
    faulty.plan(Operation::PutCreate, 2, Fault::LoseReply);
    let root = spooling(faulty.clone(), spool.path(), None);
    block_on(async {
        // The PUT lands, its reply is lost: the object is read back in ranges and compared
        // with the mapping of the spool file: ours, so the write succeeds.
        let shard = root
            .write_shard("w", 0, meta(), (0..48).map(|i| record(1, i)))
            .await
            .unwrap();
        assert!(faulty.calls(Operation::GetRange) >= 1);
        // A writer of other bytes whose reply is lost too: the read-back tells the object
        // is not ours.
        let err = root
            .write_shard("w", 0, meta(), (0..48).map(|i| record(3, i)))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::PublicationCollision { key } if *key == shard.key),
            "{err}"
        );
        assert_eq!(faulty.injected(), 2);
    });
}

/// Whether this machine lets an unprivileged process mount a tmpfs of its own
/// (`unshare -Urm`: a user and mount namespace, so the mount is private to the child).
fn private_mounts() -> bool {
    Command::new("unshare")
        .args(["-Urm", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_full_staging_directory_is_disk_full_naming_it_and_nothing_is_sent() {
    if !private_mounts() {
        assert!(
            std::env::var("GUIDELOOM_CI").as_deref() != Ok("1"),
            "GUIDELOOM_CI=1 but `unshare -Urm` is not available"
        );
        println!("skipped: `unshare -Urm` is not available here");
        return;
    }
    let spool = tempfile::tempdir().unwrap();
    let dir = spool.path().to_str().unwrap();
    // The child sees a 2 MiB tmpfs over the staging directory and writes an 8 MiB shard.
    let wrap = [
        "unshare",
        "-Urm",
        "sh",
        "-c",
        r#"mount -t tmpfs -o size=2m tmpfs "$1" && shift && exec "$@""#,
        "sh",
        dir,
    ];
    let line = spool_writer(&wrap, &["memory", dir, "8"]);
    assert_eq!(field(&line, "kind"), "disk_full", "{line}");
    assert_eq!(field(&line, "dir"), dir, "{line}");
    assert_eq!(field(&line, "puts"), "0", "{line}");
    // The same class on a local root (in that directory), which streams into its own
    // temporary file: the full disk is `DiskFull` naming the shard's directory, not a
    // shard error.
    let line = spool_writer(&wrap, &["local", dir, "8"]);
    assert_eq!(field(&line, "kind"), "disk_full", "{line}");
    assert_eq!(field(&line, "dir"), format!("{dir}/shards/w"), "{line}");
}

#[test]
fn a_killed_writer_leaves_nothing_in_its_staging_directory() {
    let spool = tempfile::tempdir().unwrap();
    let dir = spool.path().to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_spool_writer"))
        .args(["memory", dir, "64", "--pause-after-mib", "8"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), "SPOOL-PAUSED");
    // 8 MiB in: the spool file is open in the directory, and has no name there.
    let fds = std::fs::read_dir(format!("/proc/{}/fd", child.id())).unwrap();
    let spooled = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|t| t.parent() == Some(spool.path()) && t.to_string_lossy().ends_with(" (deleted)"))
        .count();
    assert_eq!(spooled, 1);
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
}
