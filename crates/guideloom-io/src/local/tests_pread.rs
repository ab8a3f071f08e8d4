//! Tests of `PreadIo`'s buffers: the per-reader batch arena and inline async reads.

use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::coalesce::CoalescePolicy;
use crate::{AsyncReader, Backend, PreadIo, SyncReader};

/// A file of `len` bytes where every byte differs from its neighbours.
fn numbered(dir: &Path, len: usize) -> (PathBuf, Vec<u8>) {
    let data: Vec<u8> = (0..len)
        .map(|i| u8::try_from((i * 7 + i / 251) % 251).unwrap())
        .collect();
    let path = dir.join("numbered");
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

fn expect(data: &[u8], ranges: &[Range<u64>], got: &[Bytes]) {
    assert_eq!(ranges.len(), got.len());
    for (r, bytes) in ranges.iter().zip(got) {
        let (s, e) = (
            usize::try_from(r.start).unwrap(),
            usize::try_from(r.end).unwrap(),
        );
        assert_eq!(&bytes[..], &data[s..e], "range {r:?}");
    }
}

/// Whether `a` and `b` share any byte of memory.
fn overlaps(a: &Bytes, b: &Bytes) -> bool {
    let (a0, b0) = (a.as_ptr() as usize, b.as_ptr() as usize);
    a0 < b0 + b.len() && b0 < a0 + a.len()
}

/// Every range apart, so each record is a read of its own into the arena.
fn unmerged() -> PreadIo {
    PreadIo::new().with_coalesce(CoalescePolicy::NEVER)
}

#[test]
fn records_held_from_a_batch_stay_intact_after_the_next_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = numbered(dir.path(), 1 << 20);
    let reader = unmerged().open(&path).unwrap();
    let first: Vec<Range<u64>> = (0..16u64)
        .map(|i| i * 40_000..i * 40_000 + 30_000)
        .collect();
    let second: Vec<Range<u64>> = (0..16u64)
        .map(|i| 500_000 + i * 30_000..500_000 + i * 30_000 + 30_000)
        .collect();
    let held = reader.read_ranges(&first).unwrap();
    let next = reader.read_ranges(&second).unwrap();
    // The second batch went elsewhere: the records still held were not overwritten.
    expect(&data, &first, &held);
    expect(&data, &second, &next);
    for a in &held {
        assert!(next.iter().all(|b| !overlaps(a, b)));
    }
    // Dropping some but not all of the first batch still keeps the rest intact.
    let kept = held[7].clone();
    drop(held);
    let third = reader.read_ranges(&first).unwrap();
    expect(&data, &first, &third);
    assert_eq!(&kept[..], &data[280_000..310_000]);
}

#[test]
fn the_arena_is_reused_in_place_once_a_batch_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = numbered(dir.path(), 1 << 20);
    let reader = unmerged().open(&path).unwrap();
    let ranges: Vec<Range<u64>> = (0..8u64)
        .map(|i| i * 100_000..i * 100_000 + 64_000)
        .collect();
    let batch = reader.read_ranges(&ranges).unwrap();
    expect(&data, &ranges, &batch);
    let first = batch[0].as_ptr();
    drop(batch);
    let batch = reader.read_ranges(&ranges).unwrap();
    expect(&data, &ranges, &batch);
    assert_eq!(
        batch[0].as_ptr(),
        first,
        "the dropped batch's buffer is reused"
    );
    // All of one batch shares the one buffer, back to back.
    for pair in batch.windows(2) {
        assert_eq!(
            pair[0].as_ptr().wrapping_add(pair[0].len()),
            pair[1].as_ptr()
        );
    }
}

#[test]
fn batches_past_the_arena_cap_and_without_an_arena_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = numbered(dir.path(), 300_000);
    let ranges: Vec<Range<u64>> = vec![250_000..300_000, 0..0, 10..70_000, 100_000..100_001];
    for backend in [
        unmerged().with_batch_arena(0),
        unmerged().with_batch_arena(1000),
        PreadIo::new().with_batch_arena(1000),
        PreadIo::new(),
    ] {
        let reader = backend.open(&path).unwrap();
        for _ in 0..3 {
            expect(&data, &ranges, &reader.read_ranges(&ranges).unwrap());
        }
    }
}

#[test]
fn concurrent_batches_on_one_reader_each_get_their_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = numbered(dir.path(), 1 << 20);
    let reader = unmerged().open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (reader, data) = (&reader, &data);
            s.spawn(move || {
                let mut held = Vec::new();
                for round in 0..50u64 {
                    let base = (t * 200_000 + round * 1000) % 900_000;
                    let ranges: Vec<Range<u64>> = (0..4u64)
                        .map(|i| base + i * 20_000..base + i * 20_000 + 10_000)
                        .collect();
                    let got = reader.read_ranges(&ranges).unwrap();
                    expect(data, &ranges, &got);
                    held.push((ranges, got));
                    if held.len() > 3 {
                        let (ranges, got) = held.remove(0);
                        expect(data, &ranges, &got);
                    }
                }
            });
        }
    });
}

#[test]
fn a_file_that_shrank_is_a_short_read_not_stale_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = numbered(dir.path(), 100_000);
    let reader = PreadIo::new().open(&path).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(50_000)
        .unwrap();
    let err = reader.read_ranges(&[0..10, 60_000..70_000]).unwrap_err();
    assert!(
        matches!(err, crate::Error::ShortRead { got: 0, .. }),
        "{err}"
    );
    let err = reader.read(40_000, 20_000).unwrap_err();
    assert!(
        matches!(err, crate::Error::ShortRead { got: 10_000, .. }),
        "{err}"
    );
}

/// Runs `read` on a runtime whose only blocking thread is held busy: it can finish only if it
/// never needs the blocking pool. Returns whether it finished within a second.
fn finishes_without_the_blocking_pool<T: Send + 'static>(
    read: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (started, running) = std::sync::mpsc::channel::<()>();
    let busy = rt.spawn_blocking(move || {
        started.send(()).unwrap();
        let _ = wait.recv();
    });
    running.recv().unwrap();
    let got = rt.block_on(async {
        let task = tokio::spawn(read);
        tokio::time::timeout(std::time::Duration::from_secs(1), task)
            .await
            .ok()
            .map(Result::unwrap)
    });
    release.send(()).unwrap();
    rt.block_on(busy).unwrap();
    got
}

#[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
#[test]
fn small_async_reads_of_cached_bytes_skip_the_blocking_pool() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = numbered(dir.path(), 200_000);
    // Just written: in the page cache. (The temporary directory must be on a local file
    // system that supports RWF_NOWAIT: ext4, xfs, btrfs, tmpfs on current kernels.)
    let rt = tokio::runtime::Runtime::new().unwrap();
    let open = |backend: PreadIo| {
        let path = path.clone();
        rt.block_on(async move { backend.open_async(&path).await.unwrap() })
    };
    let inline: std::sync::Arc<Box<dyn AsyncReader>> = open(PreadIo::new()).into();
    let r = std::sync::Arc::clone(&inline);
    let got = finishes_without_the_blocking_pool(async move {
        let one = r.read(1000, 1024).await.unwrap();
        let many = r.read_ranges(&[5..10, 90_000..91_000]).await.unwrap();
        (one, many)
    })
    .expect("a small cached read ran inline");
    assert_eq!(&got.0[..], &data[1000..2024]);
    assert_eq!(&got.1[0][..], &data[5..10]);
    assert_eq!(&got.1[1][..], &data[90_000..91_000]);

    // Larger than the inline cap, or with inline reads off: the blocking pool, as before.
    let r = std::sync::Arc::clone(&inline);
    assert!(finishes_without_the_blocking_pool(async move { r.read(0, 100_000).await }).is_none());
    let off: std::sync::Arc<Box<dyn AsyncReader>> =
        open(PreadIo::new().with_inline_reads(0)).into();
    let r = std::sync::Arc::clone(&off);
    assert!(finishes_without_the_blocking_pool(async move { r.read(0, 10).await }).is_none());
    // Both still read correctly through the pool.
    assert_eq!(
        &rt.block_on(inline.read(0, 100_000)).unwrap()[..],
        &data[..100_000]
    );
    assert_eq!(&rt.block_on(off.read(0, 10)).unwrap()[..], &data[..10]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_async_reads_answer_edge_cases_like_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = numbered(dir.path(), 10_000);
    for backend in [PreadIo::new(), PreadIo::new().with_inline_reads(0)] {
        let r = backend.open_async(&path).await.unwrap();
        assert!(r.read(10_000, 0).await.unwrap().is_empty());
        assert!(matches!(
            r.read(9_999, 2).await,
            Err(crate::Error::OutOfRange { .. })
        ));
        assert_eq!(&r.read(9_990, 10).await.unwrap()[..], &data[9_990..]);
        let got = r.read_ranges(&[9_000..9_100, 0..0, 1..3]).await.unwrap();
        expect(&data, &[9_000..9_100, 0..0, 1..3], &got);
        r.close_sync();
        assert!(matches!(
            r.read(0, 1).await,
            Err(crate::Error::Closed { .. })
        ));
        let two: Vec<Range<u64>> = vec![0..1, 1..2];
        assert!(matches!(
            r.read_ranges(&two).await,
            Err(crate::Error::Closed { .. })
        ));
    }
}
