//! The WebDataset reader on damaged and hostile tars, built here with the `tar` crate or as raw
//! bytes: each is a typed error naming the tar (and the member, where there is one), never a
//! panic.

use std::io::Write;
use std::path::{Path, PathBuf};

use guideloom_import::Error;
use guideloom_import::webdataset::{WebDatasetOptions, WebDatasetReader};
use proptest::prelude::*;

/// A tar of `members` (name, type, data) as raw bytes, with its two end blocks.
fn tar_of(members: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, kind, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, name, *data)
            .expect("append");
    }
    builder.into_inner().expect("finish")
}

fn regular<'a>(name: &'a str, data: &'a [u8]) -> (&'a str, tar::EntryType, &'a [u8]) {
    (name, tar::EntryType::Regular, data)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Every row of every batch of `tar`, read with `fields` (or inferred), or the first error.
fn read(tar: &Path, fields: Option<&[&str]>, options: WebDatasetOptions) -> Result<usize, Error> {
    let tars = [tar.to_path_buf()];
    let reader = match fields {
        Some(fields) => {
            let fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
            WebDatasetReader::with_fields(&tars, &fields, options)?
        }
        None => WebDatasetReader::open(&tars, options)?,
    };
    reader.batches().map(|b| b.map(|b| b.num_rows())).sum()
}

/// The error's path: the tar, or `tar/member`.
fn path_of(err: &Error) -> &Path {
    match err {
        Error::Io { path, .. }
        | Error::Corrupt { path, .. }
        | Error::Unsupported { path, .. }
        | Error::Arrow { path, .. } => path,
        other => panic!("unexpected error {other}"),
    }
}

#[track_caller]
fn assert_corrupt(result: Result<usize, Error>, path: &Path, words: &str) {
    match result {
        Err(err @ Error::Corrupt { .. }) => {
            assert_eq!(path_of(&err), path, "{err}");
            assert!(err.to_string().contains(words), "{err} lacks {words:?}");
        }
        other => panic!("expected Corrupt naming {}, got {other:?}", path.display()),
    }
}

#[track_caller]
fn assert_unsupported(result: Result<usize, Error>, path: &Path, words: &str) {
    match result {
        Err(err @ Error::Unsupported { .. }) => {
            assert_eq!(path_of(&err), path, "{err}");
            assert!(err.to_string().contains(words), "{err} lacks {words:?}");
        }
        other => panic!(
            "expected Unsupported naming {}, got {other:?}",
            path.display()
        ),
    }
}

fn two_samples() -> Vec<u8> {
    tar_of(&[
        regular("a.txt", b"alpha"),
        regular("a.cls", b"1"),
        regular("b.txt", &[b'x'; 700]),
        regular("b.cls", b"2"),
    ])
}

#[test]
fn every_truncation_is_refused_or_ends_at_a_member() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = two_samples();
    // The end of `b.cls`'s data block, where the end-of-archive blocks start.
    let members_end = 4608;
    assert_eq!(whole.len(), members_end + 1024);
    let options = WebDatasetOptions::default;
    assert_eq!(
        read(&write(dir.path(), "whole.tar", &whole), None, options()).expect("whole"),
        2
    );
    for cut in (0..whole.len()).step_by(37) {
        let tar = write(dir.path(), &format!("cut{cut}.tar"), &whole[..cut]);
        match read(&tar, Some(&["txt", "cls"]), options()) {
            // Cut at a header: Python's tarfile ends there too (it needs no end blocks).
            Ok(rows) => assert!(
                cut.is_multiple_of(512) || cut >= members_end,
                "cut {cut}: {rows} rows"
            ),
            Err(err) => {
                assert!(matches!(err, Error::Corrupt { .. }), "cut {cut}: {err}");
                assert!(path_of(&err).starts_with(&tar), "cut {cut}: {err}");
            }
        }
    }
    // Inside the data of `b.txt` (its header at 2048): the member is named.
    let tar = write(dir.path(), "mid.tar", &whole[..2560 + 100]);
    assert_corrupt(
        read(&tar, Some(&["txt", "cls"]), options()),
        &tar.join("b.txt"),
        "past the end",
    );
    // Inside the header of `a.cls`.
    let tar = write(dir.path(), "header.tar", &whole[..1024 + 100]);
    assert_corrupt(
        read(&tar, Some(&["txt", "cls"]), options()),
        &tar,
        "after member \"a.txt\"",
    );
    let tar = write(dir.path(), "empty.tar", b"");
    assert_corrupt(read(&tar, Some(&["txt"]), options()), &tar, "empty file");
}

#[test]
fn truncated_gzip_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let compressed = gzip(&two_samples());
    let whole = write(dir.path(), "whole.tar.gz", &compressed);
    assert_eq!(
        read(&whole, None, WebDatasetOptions::default()).expect("whole"),
        2
    );
    // Cut in its header, in `a.txt`, in `b.txt`'s noise. (Cut in the end blocks or the gzip
    // trailer, the samples are all there: Python's tarfile reads them and so does the reader.)
    for cut in [5, 10, compressed.len() / 4, compressed.len() / 2] {
        let tar = write(dir.path(), &format!("cut{cut}.tar.gz"), &compressed[..cut]);
        let what = format!("cut {cut} of {}", compressed.len());
        let err = read(&tar, Some(&["txt", "cls"]), WebDatasetOptions::default()).expect_err(&what);
        assert!(matches!(err, Error::Corrupt { .. }), "cut {cut}: {err}");
        assert!(path_of(&err).starts_with(&tar), "cut {cut}: {err}");
    }
}

/// `tar` with the size field of its first header set to `size` (the checksum made to match).
fn claiming(tar: &[u8], size: u64) -> Vec<u8> {
    let mut bytes = tar.to_vec();
    let mut header = tar::Header::new_gnu();
    header.as_mut_bytes().copy_from_slice(&bytes[..512]);
    header.set_size(size);
    header.set_cksum();
    bytes[..512].copy_from_slice(header.as_bytes());
    bytes
}

#[test]
fn a_member_claiming_bytes_past_the_end_is_refused_unread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = WebDatasetOptions::default;
    let small = tar_of(&[regular("a.txt", b"alpha")]);
    // 1 TiB claimed in a 2 KiB file: refused before any read or allocation.
    let tar = write(dir.path(), "claims.tar", &claiming(&small, 1 << 40));
    assert_corrupt(
        read(&tar, Some(&["txt"]), options()),
        &tar.join("a.txt"),
        "past the end",
    );
    // Gzip-compressed, the length is unknown: a claim over the limit is refused unread, one
    // under it meets the end of the stream.
    let tar = write(
        dir.path(),
        "claims.tar.gz",
        &gzip(&claiming(&small, 1 << 40)),
    );
    assert_unsupported(
        read(&tar, Some(&["txt"]), options()),
        &tar.join("a.txt"),
        "max_member_bytes",
    );
    let tar = write(
        dir.path(),
        "claims-1m.tar.gz",
        &gzip(&claiming(&small, 1 << 20)),
    );
    assert_corrupt(
        read(&tar, Some(&["txt"]), options()),
        &tar.join("a.txt"),
        "truncated",
    );
    // A skipped member too (no extension): its claim is checked as well.
    let skipped = tar_of(&[regular("README", b"x"), regular("a.txt", b"alpha")]);
    let tar = write(
        dir.path(),
        "claims-skipped.tar",
        &claiming(&skipped, 1 << 40),
    );
    assert_corrupt(
        read(&tar, Some(&["txt"]), options()),
        &tar.join("README"),
        "past the end",
    );
}

#[test]
fn a_member_over_the_limit_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = tar_of(&[regular("a.txt", b"small"), regular("b.txt", &[7; 5000])]);
    let tar = write(dir.path(), "big.tar", &bytes);
    let options = WebDatasetOptions {
        max_member_bytes: 4096,
        ..WebDatasetOptions::default()
    };
    assert_unsupported(
        read(&tar, None, options),
        &tar.join("b.txt"),
        "max_member_bytes",
    );
}

#[test]
fn unknown_duplicate_and_reserved_extensions_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = WebDatasetOptions::default;
    let tar = write(
        dir.path(),
        "unknown.tar",
        &tar_of(&[
            regular("a.txt", b"1"),
            regular("b.txt", b"2"),
            regular("b.bin", b"3"),
        ]),
    );
    assert_unsupported(read(&tar, None, options()), &tar.join("b.bin"), "\"bin\"");
    let tar = write(
        dir.path(),
        "dup.tar",
        &tar_of(&[regular("a.txt", b"1"), regular("a.TXT", b"2")]),
    );
    assert_corrupt(
        read(&tar, Some(&["txt"]), options()),
        &tar.join("a.TXT"),
        "twice",
    );
    for ext in ["__key__", "__bad__", "__url__"] {
        let name = format!("a.{ext}");
        let tar = write(
            dir.path(),
            &format!("{ext}.tar"),
            &tar_of(&[regular("a.txt", b"1"), regular(&name, b"x")]),
        );
        assert_unsupported(
            read(&tar, Some(&["txt"]), options()),
            &tar.join(&name),
            "own sample keys",
        );
        assert_unsupported(
            read(&tar, None, options()),
            &tar.join(&name),
            "own sample keys",
        );
    }
}

#[test]
fn text_that_is_not_utf8_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tar = write(
        dir.path(),
        "latin1.tar",
        &tar_of(&[regular("a.txt", b"ok"), regular("b.txt", b"caf\xe9")]),
    );
    let options = WebDatasetOptions {
        text_fields: vec!["txt".into()],
        ..WebDatasetOptions::default()
    };
    assert_corrupt(read(&tar, None, options), &tar.join("b.txt"), "not UTF-8");
    assert_eq!(
        read(&tar, None, WebDatasetOptions::default()).expect("binary"),
        2
    );
}

#[test]
fn members_python_and_the_tar_crate_would_read_differently_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A directory with data: Python's tarfile would read those bytes as the next header.
    let bytes = tar_of(&[
        regular("a.txt", b"1"),
        ("d", tar::EntryType::Directory, &[0; 600]),
    ]);
    let tar = write(dir.path(), "dirdata.tar", &bytes);
    assert_corrupt(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar.join("d"),
        "next header",
    );
    // Directories, links, metadata and names without an extension are skipped.
    let bytes = tar_of(&[
        ("d", tar::EntryType::Directory, b""),
        regular("__index__", b"x"),
        regular("README", b"x"),
        regular("a.txt", b"1"),
    ]);
    let tar = write(dir.path(), "skips.tar", &bytes);
    assert_eq!(
        read(&tar, None, WebDatasetOptions::default()).expect("skips"),
        1
    );
    // A GNU long name of 2 MiB: over the headers' limit, refused before it is buffered whole.
    let long = "d".repeat(2 << 20) + ".txt";
    let tar = write(dir.path(), "longname.tar", &tar_of(&[regular(&long, b"1")]));
    assert_corrupt(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar,
        "headers",
    );
}

#[test]
fn sparse_members_and_global_pax_paths_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A GNU sparse member: 5 bytes stored, 4096 bytes once expanded.
    let mut header = tar::Header::new_gnu();
    header.set_path("a.txt").expect("path");
    header.set_entry_type(tar::EntryType::GNUSparse);
    header.set_size(5);
    let gnu = header.as_gnu_mut().expect("gnu");
    gnu.sparse[0].set_offset(4091);
    gnu.sparse[0].set_length(5);
    gnu.set_real_size(4096);
    header.set_cksum();
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend(b"hello");
    bytes.resize(512 * 4, 0);
    let tar = write(dir.path(), "sparse.tar", &bytes);
    assert_unsupported(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar.join("a.txt"),
        "sparse",
    );
    // A global pax header (type g) setting `path`: Python's tarfile names every later member
    // so; one with only a comment (as `git archive` writes) is skipped.
    for (record, refused) in [("path=x.txt", true), ("comment=abc", false)] {
        let line = format!(" {record}\n");
        let line = format!("{}{line}", line.len() + (line.len() + 2).to_string().len());
        let mut builder = tar::Builder::new(Vec::new());
        let mut global = tar::Header::new_ustar();
        global.set_entry_type(tar::EntryType::XGlobalHeader);
        global.set_size(line.len() as u64);
        builder
            .append_data(&mut global, "pax_global_header", line.as_bytes())
            .expect("global");
        let mut header = tar::Header::new_ustar();
        header.set_size(1);
        builder
            .append_data(&mut header, "a.txt", &b"1"[..])
            .expect("member");
        let name = if refused {
            "global-path.tar"
        } else {
            "global-comment.tar"
        };
        let tar = write(dir.path(), name, &builder.into_inner().expect("tar"));
        let result = read(&tar, Some(&["txt"]), WebDatasetOptions::default());
        if refused {
            assert_unsupported(result, &tar.join("pax_global_header"), "\"path\"");
        } else {
            assert_eq!(result.expect("a comment"), 1);
        }
    }
}

#[test]
fn other_compressions_and_concatenated_gzip_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tar = write(dir.path(), "x.tar.bz2", b"BZh91AY&SYxxxxxxxxxxxxxxxxxxxx");
    assert_unsupported(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar,
        "bzip2",
    );
    let tar = write(dir.path(), "x.tar.zst", b"\x28\xb5\x2f\xfd0000000000000000");
    assert_unsupported(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar,
        "zstd",
    );
    // Two gzip members: webdataset reads the first only.
    let first = tar_of(&[regular("a.txt", b"1")]);
    let second = tar_of(&[regular("b.txt", b"2")]);
    let mut bytes = gzip(&first[..512 * 2]);
    bytes.extend(gzip(&second));
    let tar = write(dir.path(), "two.tar.gz", &bytes);
    assert_unsupported(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar,
        "second gzip member",
    );
    let mut bytes = gzip(&first);
    bytes.extend(gzip(&second));
    let tar = write(dir.path(), "two-whole.tar.gz", &bytes);
    assert_unsupported(
        read(&tar, Some(&["txt"]), WebDatasetOptions::default()),
        &tar,
        "second gzip member",
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Bytes of a small tar overwritten at random: rows or a typed error naming the tar, never a
    /// panic.
    #[test]
    fn damaged_tars_never_panic(edits in prop::collection::vec((0usize..2600, any::<u8>()), 1..8), cut in 1500usize..2600) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut bytes = two_samples();
        for (at, byte) in edits {
            if let Some(b) = bytes.get_mut(at) {
                *b = byte;
            }
        }
        bytes.truncate(cut);
        let tar = write(dir.path(), "damaged.tar", &bytes);
        let options = WebDatasetOptions { max_member_bytes: 1 << 20, ..WebDatasetOptions::default() };
        for fields in [None, Some(&["txt", "cls"][..])] {
            if let Err(err) = read(&tar, fields, options.clone()) {
                prop_assert!(path_of(&err).starts_with(&tar), "{}", err);
            }
        }
    }
}
