//! `HttpIo` against a real nginx (GUIDELOOM_NGINX_URL / GUIDELOOM_NGINX_ROOT), async and
//! through the blocking adapter. Counters prove the request economy.
#![cfg(feature = "http")]
// Test data are small; indexing them with u64 offsets cannot truncate.
#![allow(clippy::cast_possible_truncation)]

use crate::support;

use std::path::Path;

use guideloom_io::http::{HttpIo, HttpPath};
use guideloom_io::{AsyncReader, Error, Location};
use support::servers::{bytes, nginx, unique};

const SIZE: usize = 4 * 1024 * 1024 + 17;

/// Writes the test objects into a unique subdirectory of nginx's root; returns its name.
fn publish(root: &Path) -> (String, Vec<u8>) {
    let dir = unique("http-nginx");
    let d = root.join(&dir);
    std::fs::create_dir_all(&d).unwrap();
    let data = bytes(SIZE, 7);
    std::fs::write(d.join("obj.bin"), &data).unwrap();
    std::fs::write(d.join("empty.bin"), b"").unwrap();
    std::fs::write(d.join("small.bin"), b"hello").unwrap();
    (dir, data)
}

fn cleanup(root: &Path, dir: &str) {
    let _ = std::fs::remove_dir_all(root.join(dir));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_single_tail_size_and_errors() {
    let Some((url, root)) = nginx("nginx_single_tail_size_and_errors") else {
        return;
    };
    let (dir, data) = publish(&root);
    let io = HttpIo::new(&url).unwrap();
    let base = HttpPath::new(&dir).unwrap();
    let r = io.open_reader(&base.child("obj.bin")).unwrap();

    let t = r.read_tail(65_536).await.unwrap();
    assert_eq!(t.size, SIZE as u64);
    assert_eq!(&t.bytes[..], &data[SIZE - 65_536..]);
    assert_eq!(
        r.stats().snapshot().requests,
        1,
        "tail = one request, size included"
    );

    for (o, l) in [
        (0u64, 1u64),
        (100, 100),
        (4_194_000, 321),
        (1_000_000, 1_048_576),
    ] {
        let before = r.stats().snapshot().requests;
        let b = r.read(o, l).await.unwrap();
        assert_eq!(&b[..], &data[o as usize..(o + l) as usize]);
        assert_eq!(
            r.stats().snapshot().requests,
            before + 1,
            "one request per read"
        );
    }

    // Fresh reader (size unknown): the origin's 416 and clipping become OutOfRange.
    let r2 = io.open_reader(&base.child("obj.bin")).unwrap();
    assert!(matches!(
        r2.read(99_999_999, 2).await,
        Err(Error::OutOfRange { size, .. }) if size == SIZE as u64
    ));
    let r3 = io.open_reader(&base.child("obj.bin")).unwrap();
    assert!(matches!(
        r3.read(SIZE as u64 - 10, 20).await,
        Err(Error::OutOfRange { .. })
    ));
    let r4 = io.open_reader(&base.child("obj.bin")).unwrap();
    assert_eq!(r4.size().await.unwrap(), SIZE as u64);

    let missing = io.open_reader(&base.child("missing.bin")).unwrap();
    assert!(missing.size().await.unwrap_err().is_not_found());
    assert!(missing.read(0, 10).await.unwrap_err().is_not_found());
    assert!(missing.read_tail(10).await.unwrap_err().is_not_found());

    let small = io.open_reader(&base.child("small.bin")).unwrap();
    let t = small.read_tail(1000).await.unwrap();
    assert_eq!((t.size, &t.bytes[..]), (5, &b"hello"[..]));
    let empty = io.open_reader(&base.child("empty.bin")).unwrap();
    let t = empty.read_tail(1000).await.unwrap();
    assert_eq!((t.size, t.bytes.len()), (0, 0));
    cleanup(&root, &dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_batched_reads() {
    let Some((url, root)) = nginx("nginx_batched_reads") else {
        return;
    };
    let (dir, data) = publish(&root);
    let io = HttpIo::new(&url).unwrap();
    let r = io
        .open_reader(&HttpPath::new(&dir).unwrap().child("obj.bin"))
        .unwrap();
    let check = |ranges: &[std::ops::Range<u64>], got: &[bytes::Bytes]| {
        assert_eq!(ranges.len(), got.len());
        for (r, b) in ranges.iter().zip(got) {
            assert_eq!(&b[..], &data[r.start as usize..r.end as usize]);
        }
    };

    // Three far-apart ranges: one multipart/byteranges request.
    let ranges = vec![0..10, 100..110, 4_194_000..4_194_010];
    let s0 = r.stats().snapshot();
    check(&ranges, &r.read_ranges(&ranges).await.unwrap());
    assert_eq!(r.stats().snapshot().requests - s0.requests, 1);

    // 64 neighbouring ~1 KiB records: coalesced into one request.
    let neighbours: Vec<_> = (0..64u64)
        .map(|i| 2_000_000 + i * 1024..2_000_000 + i * 1024 + 1000)
        .collect();
    let s0 = r.stats().snapshot();
    check(&neighbours, &r.read_ranges(&neighbours).await.unwrap());
    let s1 = r.stats().snapshot();
    assert_eq!(s1.requests - s0.requests, 1);

    // 64 random ~1 KiB records spread over the file: one multi-range request (nginx
    // max_ranges 64), and bytes received close to bytes asked for.
    let mut x: u64 = 12345;
    let random: Vec<_> = (0..64)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let start = (x >> 33) % (SIZE as u64 - 2000);
            start..start + 1000
        })
        .collect();
    let s0 = r.stats().snapshot();
    check(&random, &r.read_ranges(&random).await.unwrap());
    let s1 = r.stats().snapshot();
    let requests = s1.requests - s0.requests;
    assert!(
        (1..=2).contains(&requests),
        "{requests} requests for 64 random ranges"
    );
    println!(
        "64 random 1000-byte ranges, default coalescing: {requests} request(s), {} bytes received",
        s1.bytes_received - s0.bytes_received
    );

    // With a small coalescing gap the same batch costs about the bytes asked for plus the
    // multipart part headers, still in one request.
    let tight = HttpIo::with_options(
        &url,
        guideloom_io::http::HttpOptions::default().with_coalesce(guideloom_io::CoalescePolicy {
            max_gap: 4096,
            max_span: 4 * 1024 * 1024,
        }),
    )
    .unwrap();
    let r = tight
        .open_reader(&HttpPath::new(&dir).unwrap().child("obj.bin"))
        .unwrap();
    check(&random, &r.read_ranges(&random).await.unwrap());
    let s = r.stats().snapshot();
    assert_eq!(s.requests, 1);
    assert!(s.bytes_received < 64_000 * 13 / 10, "{s:?}");
    println!(
        "64 random 1000-byte ranges, 4 KiB gap: {} request(s), {} bytes received",
        s.requests, s.bytes_received
    );
    cleanup(&root, &dir);
}

#[cfg(feature = "blocking")]
#[test]
fn nginx_through_the_blocking_adapter() {
    use guideloom_io::blocking::BlockingIo;
    use guideloom_io::{Backend, SyncReader};

    let Some((url, root)) = nginx("nginx_through_the_blocking_adapter") else {
        return;
    };
    let (dir, data) = publish(&root);
    let io = BlockingIo::new(HttpIo::new(&url).unwrap()).unwrap();
    let loc = HttpPath::new(&dir).unwrap().child("obj.bin");
    let r = io.open(&loc).unwrap();
    assert_eq!(r.size().unwrap(), SIZE as u64);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (r, data) = (&r, &data);
            s.spawn(move || {
                for i in 0..20u64 {
                    let o = (t * 1_000_000 + i * 4096) % (SIZE as u64 - 5000);
                    assert_eq!(
                        &r.read(o, 5000).unwrap()[..],
                        &data[o as usize..o as usize + 5000]
                    );
                }
            });
        }
    });
    let got = r.read_ranges(&[0..5, 3_000_000..3_000_005]).unwrap();
    assert_eq!(&got[1][..], &data[3_000_000..3_000_005]);
    assert!(
        io.open(&HttpPath::new(&dir).unwrap().child("nope")).is_ok(),
        "lazy open"
    );
    r.close().unwrap();
    cleanup(&root, &dir);
}

/// The conformance kit, async and sync (through `BlockingIo`), against nginx.
#[cfg(all(feature = "conformance", feature = "blocking"))]
#[test]
fn nginx_conformance_kit() {
    use guideloom_io::blocking::BlockingIo;
    use guideloom_io::conformance::{ConformanceOptions, Fixture, run_all_with};

    struct NginxFixture {
        dir: std::path::PathBuf,
        base: HttpPath,
    }

    #[async_trait::async_trait]
    impl Fixture for NginxFixture {
        type Location = HttpPath;
        async fn create(
            &self,
            name: &str,
            bytes: &[u8],
        ) -> Result<HttpPath, guideloom_io::BoxError> {
            std::fs::write(self.dir.join(name), bytes)?;
            Ok(self.base.child(name))
        }
        fn missing(&self) -> HttpPath {
            self.base.child("never-created.bin")
        }
    }

    let Some((url, root)) = nginx("nginx_conformance_kit") else {
        return;
    };
    let name = unique("http-conformance");
    let dir = root.join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = NginxFixture {
        dir,
        base: HttpPath::new(&name).unwrap(),
    };
    let mut options = ConformanceOptions::default();
    options.iterations = 100;
    let io = BlockingIo::new(HttpIo::new(&url).unwrap()).unwrap();
    let report = run_all_with(&io, &fixture, &options).unwrap();
    assert!(report.skipped.is_empty(), "{report}");
    println!("{report}; {:?}", io.inner().stats().snapshot());
    cleanup(&root, &name);
}

/// A file replaced behind an open reader (renamed over, same size, another modification
/// time) is `Error::Changed` at the reader's next read, single- or multi-range: nginx
/// answers the pinned `If-Match` with 412. No request is added: each read is still one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_replaced_file_is_changed_at_the_next_read() {
    let Some((url, root)) = nginx("nginx_replaced_file_is_changed_at_the_next_read") else {
        return;
    };
    let dir = unique("http-swap");
    let d = root.join(&dir);
    std::fs::create_dir_all(&d).unwrap();
    let first = bytes(200_000, 1);
    std::fs::write(d.join("obj.bin"), &first).unwrap();
    let io = HttpIo::new(&url).unwrap();
    let r = io
        .open_reader(&HttpPath::new(&dir).unwrap().child("obj.bin"))
        .unwrap();
    let tail = r.read_tail(1000).await.unwrap();
    assert_eq!(&tail.bytes[..], &first[199_000..]);
    let pinned = r.etag().expect("nginx sends an ETag").to_owned();
    let batch = r.read_ranges(&[0..10, 150_000..150_010]).await.unwrap();
    assert_eq!(&batch[1][..], &first[150_000..150_010]);

    // nginx's ETag is modification time and size: the replacement is dated an hour later,
    // as a file written a second later would be.
    let next = d.join("obj.bin.next");
    std::fs::write(&next, bytes(200_000, 2)).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(later)
        .unwrap();
    std::fs::rename(&next, d.join("obj.bin")).unwrap();

    let before = r.stats().snapshot().requests;
    let single = r.read(10, 20).await.unwrap_err();
    let multi = r.read_ranges(&[0..10, 150_000..150_010]).await.unwrap_err();
    for err in [single, multi] {
        assert!(
            matches!(&err, Error::Changed { pinned: p, found: None, .. } if *p == pinned),
            "{err:?}"
        );
    }
    assert_eq!(r.stats().snapshot().requests - before, 2);
    cleanup(&root, &dir);
}
