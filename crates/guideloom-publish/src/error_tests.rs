//! Every variant of [`Error`] and the kind it has; the wrapper rule.

use std::io;
use std::time::Duration;

use guideloom_io::ErrorKind;

use super::*;

fn s(text: &str) -> String {
    text.to_owned()
}

fn timeout() -> guideloom_io::Error {
    guideloom_io::Error::timeout(
        "k",
        "GET",
        guideloom_io::TimeoutKind::Client,
        None,
        Duration::ZERO,
        None,
    )
}

/// One representative of every variant, and the kind it has.
#[test]
fn every_variant_has_its_kind() {
    let cases = [
        (
            Error::PublicationCollision { key: s("k") },
            ErrorKind::Collision,
        ),
        (Error::NotFound { key: s("k") }, ErrorKind::NotFound),
        (Error::corrupt("k", "bad json"), ErrorKind::Corrupt),
        (
            Error::Verification {
                key: s("k"),
                what: "size",
                expected: s("1"),
                actual: s("2"),
            },
            ErrorKind::VerificationFailed,
        ),
        (
            Error::DatasetMismatch {
                expected: s("a"),
                actual: s("b"),
            },
            ErrorKind::Mismatch,
        ),
        (
            Error::AnnotationSnapshotMismatch {
                set: s("n/1"),
                annotated: s("a"),
                requested: s("b"),
            },
            ErrorKind::Mismatch,
        ),
        (
            Error::CountMismatch {
                what: s("values"),
                expected: 1,
                actual: 2,
            },
            ErrorKind::Mismatch,
        ),
        (
            Error::CasExhausted {
                key: s("catalog"),
                attempts: 9,
            },
            ErrorKind::Conflict,
        ),
        (
            Error::LogGap {
                missing: 2,
                newest: 3,
            },
            ErrorKind::Corrupt,
        ),
        (
            Error::ConditionalWritesUnsupported {
                endpoint: s("e"),
                problem: s("p"),
            },
            ErrorKind::Unsupported,
        ),
        (
            Error::MountedBucketCannotAnnotate { root: s("/m") },
            ErrorKind::Unsupported,
        ),
        (
            Error::ShardTooLarge {
                key: s("k"),
                size: 9,
                limit: 1,
            },
            ErrorKind::TooLarge,
        ),
        (
            Error::ReadOnlyRoot {
                root: s("http://h/r"),
            },
            ErrorKind::ReadOnly,
        ),
        (
            Error::StagingBudget {
                key: s("k"),
                size: 9,
                budget: 1,
                held: 0,
            },
            ErrorKind::TooLarge,
        ),
        (
            Error::TooLarge {
                key: s("k"),
                limit: 1,
                size: None,
            },
            ErrorKind::TooLarge,
        ),
        (
            Error::RefusedFile {
                path: "r/k".into(),
                kind: "a FIFO",
                expected: "regular files",
            },
            ErrorKind::RefusedFile,
        ),
        (
            Error::io("r/k", io::ErrorKind::StorageFull.into()),
            ErrorKind::DiskFull,
        ),
        (
            Error::Unsupported { what: s("gcs") },
            ErrorKind::Unsupported,
        ),
        (
            Error::AwsProfile {
                profile: s("p"),
                what: s("missing"),
                source: None,
            },
            ErrorKind::InvalidArgument,
        ),
        (
            Error::InvalidUri {
                uri: s("s3://"),
                reason: s("no bucket"),
            },
            ErrorKind::InvalidArgument,
        ),
        (
            Error::OutOfRange {
                index: 5,
                len: 5,
                what: s("snapshot s"),
            },
            ErrorKind::OutOfRange,
        ),
        (
            Error::NotAStream {
                snapshot: s("s"),
                reason: s("records"),
            },
            ErrorKind::Mismatch,
        ),
        (
            Error::ElementMismatch {
                stream: s("u32"),
                requested: "u16",
            },
            ErrorKind::Mismatch,
        ),
        (
            Error::TokensOutOfRange {
                start: 5,
                end: 11,
                len: 10,
            },
            ErrorKind::OutOfRange,
        ),
        (
            Error::Decode {
                index: 3,
                source: s("not CBOR").into(),
            },
            ErrorKind::Decode,
        ),
        (
            Error::Runtime {
                source: io::Error::other("no threads"),
            },
            ErrorKind::Other,
        ),
        (Error::invalid("bad name"), ErrorKind::InvalidArgument),
        (
            Error::storage(
                "log/",
                "list",
                io::Error::from(io::ErrorKind::ConnectionRefused),
            ),
            ErrorKind::Remote,
        ),
        (
            Error::io("r/k", io::ErrorKind::PermissionDenied.into()),
            ErrorKind::PermissionDenied,
        ),
        (
            Error::shard("k", guideloom_format::Error::NotFound { location: s("k") }),
            ErrorKind::NotFound,
        ),
        (
            Error::array_record_shard(
                "k",
                guideloom_arrayrecord::Error::Options {
                    options: s("x"),
                    what: s("y"),
                },
            ),
            ErrorKind::InvalidArgument,
        ),
        (Error::read("k", timeout()), ErrorKind::Timeout),
    ];
    for (error, kind) in cases {
        assert_eq!(error.kind(), kind, "{error:?}");
    }
}

/// A shard's error says where; its source says what: damage is `Corrupt`, a timeout beneath
/// `Timeout`, a missing object `NotFound`. A replaced object is a verification failure.
#[test]
fn a_shard_error_has_its_sources_kind() {
    let corrupt = guideloom_format::Error::Corrupt {
        shard: s("k"),
        what: guideloom_format::Corruption::FooterChecksum,
    };
    assert_eq!(Error::shard("k", corrupt).kind(), ErrorKind::Corrupt);
    let timed_out = Error::shard("k", guideloom_format::Error::Io(timeout()));
    assert!(matches!(timed_out, Error::Shard { .. }));
    assert_eq!(timed_out.kind(), ErrorKind::Timeout);
    let replaced = guideloom_io::Error::Changed {
        location: s("k"),
        pinned: s("\"a\""),
        found: None,
    };
    // The IO layer's own kind for it is Conflict; this crate reports a replaced shard as a
    // failed verification of its entity tag, as every other sign of a replacement.
    assert_eq!(replaced.kind(), ErrorKind::Conflict);
    assert_eq!(
        Error::shard("k", guideloom_format::Error::Io(replaced)).kind(),
        ErrorKind::VerificationFailed
    );
    let damaged = guideloom_arrayrecord::Error::Corrupt {
        location: s("k"),
        offset: 0,
        what: s("hash"),
    };
    assert_eq!(
        Error::array_record_shard("k", damaged).kind(),
        ErrorKind::Corrupt
    );
}

/// A storage request's kind is what its source tells; a missing bucket (or any "not found"
/// the store reports as a failed request) stays `Remote`, never an empty root.
#[test]
fn a_storage_error_has_the_kind_its_cause_tells() {
    let storage = |e: guideloom_io::BoxError| Error::storage("log/", "list", e);
    assert_eq!(storage(Box::new(timeout())).kind(), ErrorKind::Timeout);
    assert_eq!(
        storage(Box::new(io::Error::from(io::ErrorKind::PermissionDenied))).kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        storage(Box::new(io::Error::from(io::ErrorKind::NotFound))).kind(),
        ErrorKind::Remote
    );
    assert_eq!(storage("opaque".into()).kind(), ErrorKind::Remote);
    // The predicates keep their meaning.
    assert!(Error::NotFound { key: s("k") }.is_not_found());
    assert!(
        !Error::read(
            "k",
            guideloom_io::Error::io("k", io::ErrorKind::NotFound.into())
        )
        .is_not_found()
    );
}
