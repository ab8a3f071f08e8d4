//! Tests of the local backends: the conformance kit on each, plus edge cases.

use std::path::{Path, PathBuf};

use crate::conformance::{self, DirFixture};
use crate::{AsyncReader, Backend, Error, PreadIo, SeekIo, SyncReader};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Every local backend, boxed, for table-driven tests.
fn backends() -> Vec<Box<dyn Backend<Location = PathBuf>>> {
    let all: Vec<Box<dyn Backend<Location = PathBuf>>> = vec![
        Box::new(SeekIo::new()),
        Box::new(PreadIo::new()),
        #[cfg(feature = "mmap")]
        Box::new(crate::MmapIo::new()),
        #[cfg(all(feature = "uring", target_os = "linux"))]
        Box::new(crate::UringIo::new()),
        #[cfg(all(feature = "uring", target_os = "linux"))]
        Box::new(crate::UringIo::new().direct()),
    ];
    // A kernel that refuses io_uring leaves UringIo out (tests_uring.rs says so, by name).
    all.into_iter().filter(|b| b.is_supported()).collect()
}

fn assert_full_pass(report: &conformance::ConformanceReport) {
    assert!(report.skipped.is_empty(), "{report}");
    for check in conformance::CHECKS {
        for flavour in [conformance::Flavour::Sync, conformance::Flavour::Async] {
            assert!(
                report.passed.contains(&(flavour, *check)),
                "{check} ({flavour}) did not run: {report}"
            );
        }
    }
}

#[test]
fn seek_io_passes_the_kit() {
    let dir = tempfile::tempdir().unwrap();
    let report = conformance::run_all(&SeekIo::new(), &DirFixture::new(dir.path())).unwrap();
    assert_full_pass(&report);
}

#[test]
fn pread_io_passes_the_kit() {
    let dir = tempfile::tempdir().unwrap();
    let report = conformance::run_all(&PreadIo::new(), &DirFixture::new(dir.path())).unwrap();
    if cfg!(unix) {
        assert_full_pass(&report);
    } else {
        assert_eq!(report.skipped.len(), 2, "{report}");
    }
}

#[cfg(feature = "mmap")]
#[test]
fn mmap_io_passes_the_kit() {
    let dir = tempfile::tempdir().unwrap();
    let report = conformance::run_all(&crate::MmapIo::new(), &DirFixture::new(dir.path())).unwrap();
    assert_full_pass(&report);
}

#[test]
fn never_coalescing_policies_pass_the_kit_too() {
    let dir = tempfile::tempdir().unwrap();
    let never = crate::CoalescePolicy::NEVER;
    conformance::run_sync(
        &SeekIo::new().with_coalesce(never),
        &DirFixture::new(dir.path()),
    )
    .unwrap();
    conformance::run_sync(
        &PreadIo::new().with_coalesce(never),
        &DirFixture::new(dir.path()),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kit_runs_inside_a_multi_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = DirFixture::new(dir.path());
    for b in backends() {
        conformance::run_async(&b, &fixture).await.unwrap();
        // The sync half and `run_all` may be called from inside a runtime, too.
        conformance::run_sync(&b, &fixture).unwrap();
    }
    conformance::run_all(&SeekIo::new(), &fixture).unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn kit_runs_inside_a_current_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = DirFixture::new(dir.path());
    let b = PreadIo::new();
    conformance::run_async(&b, &fixture).await.unwrap();
    conformance::run_all(&b, &fixture).unwrap();
}

#[test]
fn empty_file_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "empty", b"");
    for b in backends() {
        let r = b.open(&path).unwrap();
        assert_eq!(r.size().unwrap(), 0, "{b:?}");
        assert!(r.read(0, 0).unwrap().is_empty());
        assert!(
            matches!(r.read(0, 1), Err(Error::OutOfRange { size: 0, .. })),
            "{b:?}"
        );
        assert!(
            matches!(r.read(1, 0), Err(Error::OutOfRange { .. })),
            "{b:?}"
        );
        let tail = r.read_tail(10).unwrap();
        assert_eq!((tail.size, tail.bytes.len()), (0, 0));
        assert_eq!(r.read_ranges(&[0..0, 0..0]).unwrap().len(), 2);
    }
}

#[test]
fn reads_at_and_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ten", b"0123456789");
    for b in backends() {
        let r = b.open(&path).unwrap();
        assert!(r.read(10, 0).unwrap().is_empty(), "{b:?}");
        assert_eq!(&r.read(9, 1).unwrap()[..], b"9");
        let err = r.read(10, 1).unwrap_err();
        assert!(
            matches!(&err, Error::OutOfRange { offset: 10, len: 1, size: 10, location } if location.ends_with("ten")),
            "{b:?}: {err}"
        );
        assert!(matches!(r.read(u64::MAX, 2), Err(Error::OutOfRange { .. })));
        assert!(matches!(
            r.read_ranges(&[0..1, 5..11]),
            Err(Error::OutOfRange { .. })
        ));
    }
}

#[test]
fn closed_readers_refuse_reads_but_close_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "f", b"abc");
    for b in backends() {
        let r = b.open(&path).unwrap();
        let held = r.read(0, 3).unwrap();
        r.close().unwrap();
        r.close().unwrap();
        let err = r.read(0, 1).unwrap_err();
        assert!(
            matches!(&err, Error::Closed { location } if location.ends_with('f')),
            "{b:?}: {err}"
        );
        assert!(matches!(r.size(), Err(Error::Closed { .. })));
        assert_eq!(&held[..], b"abc");
    }
}

#[test]
fn missing_and_directory_paths_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    for b in backends() {
        let err = b.open(&missing).unwrap_err();
        assert!(
            matches!(&err, Error::NotFound { location, .. } if location.ends_with("nope")),
            "{b:?}: {err}"
        );
        let err = b.open(&dir.path().to_path_buf()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::NotRegularFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{b:?}: {err:?}"
        );
    }
}

#[test]
fn a_file_truncated_under_a_pread_or_seek_reader_gives_short_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "shrinks", &[7u8; 1000]);
    for b in [
        Box::new(SeekIo::new()) as Box<dyn Backend<Location = PathBuf>>,
        Box::new(PreadIo::new()),
    ] {
        std::fs::write(&path, [7u8; 1000]).unwrap();
        let r = b.open(&path).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(600)
            .unwrap();
        let err = r.read(500, 300).unwrap_err();
        assert!(
            matches!(
                err,
                Error::ShortRead {
                    offset: 500,
                    requested: 300,
                    got: 100,
                    ..
                }
            ),
            "{b:?}: {err}"
        );
    }
}

#[test]
fn coalesced_batches_cost_fewer_reads() {
    // 100 ranges 16 bytes apart: one merged pread instead of 100; the result is the same.
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..=255u8).cycle().take(8192).collect();
    let path = write(dir.path(), "f", &data);
    let ranges: Vec<_> = (0..100u64).map(|i| i * 48..i * 48 + 32).collect();
    for b in [PreadIo::new()] {
        let r = b.open(&path).unwrap();
        let got = r.read_ranges(&ranges).unwrap();
        for (range, bytes) in ranges.iter().zip(&got) {
            let (s, e) = (
                usize::try_from(range.start).unwrap(),
                usize::try_from(range.end).unwrap(),
            );
            assert_eq!(&bytes[..], &data[s..e]);
        }
        let plan = crate::coalesce::plan(&ranges, b.coalesce());
        assert_eq!(plan.len(), 1);
    }
}

#[cfg(feature = "mmap")]
#[test]
fn mmap_buffers_are_zero_copy_slices_of_one_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "f", &[1u8; 10_000]);
    let r = crate::MmapIo::new().open(&path).unwrap();
    let a = r.read(0, 100).unwrap();
    let b = r.read(100, 100).unwrap();
    // Both point into the same mapping, 100 bytes apart: no copy was made.
    assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 100);
    assert!(crate::MmapIo::new().capabilities().zero_copy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_readers_answer_the_same_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ten", b"0123456789");
    let empty = write(dir.path(), "empty", b"");
    for b in backends() {
        let r: Box<dyn AsyncReader> = b.open_async(&path).await.unwrap();
        assert_eq!(r.size().await.unwrap(), 10);
        assert!(r.read(10, 0).await.unwrap().is_empty());
        assert!(matches!(r.read(10, 1).await, Err(Error::OutOfRange { .. })));
        assert_eq!(&r.read_tail(3).await.unwrap().bytes[..], b"789");
        r.close_sync();
        assert!(matches!(r.read(0, 1).await, Err(Error::Closed { .. })));
        r.close().await.unwrap();
        let e = b.open_async(&empty).await.unwrap();
        assert!(e.read(0, 0).await.unwrap().is_empty());
        assert!(matches!(
            b.open_async(&dir.path().join("nope")).await,
            Err(Error::NotFound { .. })
        ));
    }
}

/// The sync view of a local async reader (`AsyncReader::as_sync`) reads on the calling
/// thread with the async reader's bytes and errors, and sees its close.
#[tokio::test(flavor = "current_thread")]
async fn local_async_readers_are_their_own_sync_views() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ten", b"0123456789");
    let mut local: Vec<Box<dyn Backend<Location = PathBuf>>> = vec![Box::new(SeekIo::new())];
    if cfg!(unix) {
        local.push(Box::new(PreadIo::new()));
    }
    #[cfg(feature = "mmap")]
    local.push(Box::new(crate::MmapIo::new()));
    for b in local {
        let r: Box<dyn AsyncReader> = b.open_async(&path).await.unwrap();
        let view = r
            .as_sync()
            .expect("a local reader reads on the calling thread");
        assert_eq!(view.location(), r.location());
        assert_eq!(view.size().unwrap(), 10);
        assert_eq!(view.read(2, 3).unwrap(), r.read(2, 3).await.unwrap());
        assert_eq!(
            view.read_ranges(&[0..2, 8..10]).unwrap(),
            r.read_ranges(&[0..2, 8..10]).await.unwrap()
        );
        assert_eq!(&view.read_tail(3).unwrap().bytes[..], b"789");
        assert!(matches!(view.read(10, 1), Err(Error::OutOfRange { .. })));
        r.close().await.unwrap();
        assert!(matches!(view.read(0, 1), Err(Error::Closed { .. })));
    }
}

#[test]
fn capabilities_are_honest() {
    let seek = SeekIo::new().capabilities();
    assert!(seek.sync && seek.r#async && seek.batched_ranges && !seek.zero_copy);
    let pread = PreadIo::new().capabilities();
    assert_eq!(pread.sync, cfg!(unix));
    assert_eq!(PreadIo::new().is_supported(), cfg!(unix));
}

/// A gated open (`open_gate`: the open waits until the test lifts the gate) is a
/// deterministic stand-in for a slow file system. If `open_async` made that call on the
/// executor thread, the only thread of a current-thread runtime would be stuck and the main
/// task could not run until the watchdog let the open through; it must instead run while the
/// open is still pending.
#[cfg(unix)]
#[test]
fn async_open_does_not_block_the_executor() {
    for b in backends() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "slow", b"slow file system");
        let gate = super::open_gate::install(&path);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let opening = tokio::spawn({
                let (b, path) = (backends().remove(backend_index(&*b)), path.clone());
                async move { b.open_async(&path).await.map(|r| r.location().to_owned()) }
            });
            // Let the open start, then prove this task still runs while it is pending.
            while !gate.has_waiter() {
                tokio::task::yield_now().await;
                assert!(
                    !gate.rescued(),
                    "{b:?}: the executor was blocked until the watchdog let the open through"
                );
            }
            assert!(
                !opening.is_finished(),
                "{b:?}: the open cannot finish before the gate lifts"
            );
            gate.lift();
            let location = opening.await.unwrap().unwrap();
            assert!(location.ends_with("slow"));
        });
        assert!(!gate.rescued(), "{b:?}");
    }
}

/// Local backends read regular files only: a FIFO, a directory, a character device and a
/// socket are each refused at once with [`Error::NotRegularFile`] naming the path, by the
/// sync and the async open alike. A FIFO used to block `open(2)` until a writer appeared: a
/// watchdog opens one after 10 s, so a regression fails here instead of hanging.
#[cfg(unix)]
#[test]
fn only_regular_files_are_opened() {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("shard-000000.glm");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let socket_path = dir.path().join("sock");
    let _socket = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    let link = dir.path().join("link-to-fifo");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let cases = [
        (fifo.clone(), "a FIFO (named pipe)"),
        (link, "a FIFO (named pipe)"),
        (sub, "a directory"),
        (PathBuf::from("/dev/null"), "a character device"),
        (socket_path, "a socket"),
    ];
    let done = Arc::new(AtomicBool::new(false));
    let rescued = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (fifo, done, rescued) = (fifo.clone(), done.clone(), rescued.clone());
        std::thread::spawn(move || {
            for _ in 0..200 {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            rescued.store(true, Ordering::SeqCst);
            let nonblock = nix::fcntl::OFlag::O_NONBLOCK.bits();
            let _writer = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nonblock)
                .open(&fifo);
            std::thread::sleep(std::time::Duration::from_secs(1));
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for b in backends() {
        for (path, kind) in &cases {
            let check = |err: Error, flavour: &str| match err {
                Error::NotRegularFile { location, kind: k } => {
                    assert_eq!(location, path.display().to_string(), "{b:?} {flavour}");
                    assert_eq!(k, *kind, "{b:?} {flavour} {}", path.display());
                }
                other => panic!("{b:?} {flavour} {}: {other:?}", path.display()),
            };
            check(b.open(path).unwrap_err(), "sync");
            check(rt.block_on(b.open_async(path)).unwrap_err(), "async");
        }
    }
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
    assert!(
        !rescued.load(Ordering::SeqCst),
        "an open waited for a FIFO writer"
    );
}

/// The position of `b` in [`backends`], to make an owned copy for a spawned task.
#[cfg(unix)]
fn backend_index(b: &dyn Backend<Location = PathBuf>) -> usize {
    backends()
        .iter()
        .position(|x| x.name() == b.name())
        .unwrap()
}
