//! Hostile ArrayRecord files through the real binary under an address-space limit: every
//! command that reads one (`convert`, `publish --adopt-array-record`, `get`, `cat`,
//! `verify --deep`) ends with a typed error (or the right record), never an allocation
//! failure (`memory allocation of N bytes failed`, exit 134). The files' hashes are all
//! right; their counts and sizes lie (guideloom-arrayrecord's `hostile` kit).

#![cfg(target_os = "linux")]

use crate::common;

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output};

use common::{BIN, ok, stderr, stdout};
use guideloom_arrayrecord::hostile::{
    HostileFile, compressed, footer_records, simple_data, varints,
};

/// The child's address space for hostile counts: 2 GiB, the limit the issue reproduced
/// the aborts under (a list of 2^26 records took 2 GiB).
const ADDRESS_SPACE: u64 = 2 << 30;

/// The child's address space for compression bombs: 512 MiB. `get` on these roots runs in
/// 256 MiB (measured: the binary, tokio's threads, glibc's malloc arenas, which degrade
/// rather than fail when the limit refuses a new one, and a 64 MiB chunk read), and
/// decoding the bomb's 900 MiB whole cannot fit.
const BOMB_ADDRESS_SPACE: u64 = 512 << 20;

/// Runs the binary with its address space limited to [`ADDRESS_SPACE`].
fn limited(args: &[&str]) -> Output {
    limited_to(ADDRESS_SPACE, args)
}

/// Runs the binary with its address space limited to `bytes`.
fn limited_to(bytes: u64, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    // Needed: the limit must be set in the child between fork and exec.
    // SAFETY: `setrlimit` is async-signal-safe and the closure touches nothing else: no
    // allocation, no lock, between fork and exec.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, bytes, bytes)
                .map_err(std::io::Error::from)
        });
    }
    cmd.output().expect("run guideloom")
}

/// Asserts a clean failure: exit status 1 (not an abort), one `error:` line naming `kind`
/// of damage, no allocation failure.
#[track_caller]
fn refused(o: &Output, want: &[&str]) {
    let text = format!("{}{}", stdout(o), stderr(o));
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(!text.contains("memory allocation"), "{text}");
    assert!(
        want.iter().any(|w| text.contains(w)),
        "wanted one of {want:?}: {text}"
    );
}

const N: u64 = 1 << 26;

/// A data chunk claiming 2^26 records (64 MiB of Riegeli padding) whose sizes hold 2.
fn claims_records(path: &Path) {
    let mut f = HostileFile::new();
    f.simple_chunk(0, &varints([1, 1]), b"ab", N, 2);
    std::fs::write(path, f.finish()).unwrap();
}

/// 2^26 empty records for real (their sizes zstd-compressed), in one chunk.
fn many_empty_records(path: &Path) {
    let zeros = vec![0u8; usize::try_from(N).unwrap()];
    let sizes = compressed(b'z', N, [&zeros[..]]);
    let values = compressed(b'z', 0, []);
    let mut f = HostileFile::new();
    f.simple_chunk(b'z', &sizes, &values, N, 0);
    std::fs::write(path, f.finish()).unwrap();
}

/// A footer chunk claiming 2^26 records (64 MiB of padding) holding 2.
fn footer_claims_records(path: &Path) {
    let mut f = HostileFile::new();
    f.simple_chunk(0, &varints([1]), b"a", 1, 1);
    let records = footer_records(&f.entries());
    let sizes = varints(records.iter().map(|r| r.len() as u64));
    let values = records.concat();
    let decoded = values.len() as u64;
    let file = f.finish_with_footer(&simple_data(0, &sizes, &values), N, decoded);
    std::fs::write(path, file).unwrap();
}

/// A zstd bomb: 900 MiB of zeros stated and produced, one record of 10 bytes then the
/// rest (`consistent`), or two records of 10 bytes that cannot add up to the 900 MiB.
fn bomb(path: &Path, consistent: bool) {
    let claimed: u64 = 900 << 20;
    let step = vec![0u8; 1 << 20];
    let values = compressed(b'z', claimed, (0..900).map(|_| &step[..]));
    let plain = if consistent {
        varints([10, claimed - 10])
    } else {
        varints([10, 10])
    };
    let sizes = compressed(b'z', plain.len() as u64, [&plain[..]]);
    let mut f = HostileFile::new();
    f.simple_chunk(b'z', &sizes, &values, 2, claimed);
    std::fs::write(path, f.finish()).unwrap();
}

/// Adopts `file` (copied into `root` under `key`) as snapshot `s` of a new root.
fn adopt(root: &Path, key: &str, file: &Path) -> Output {
    std::fs::create_dir_all(root.join("imported")).unwrap();
    std::fs::copy(file, root.join(key)).unwrap();
    let root = root.to_str().unwrap();
    limited(&[
        "publish",
        "--root",
        root,
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
        "--adopt-array-record",
        key,
    ])
}

#[test]
fn hostile_counts_end_every_command_with_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let glm = |name: &str| tmp.path().join(name).to_str().unwrap().to_owned();
    let key = "imported/x.array_record";

    // A data chunk that claims more records than it holds: adopted (its footer is sound),
    // then refused by every read, by name.
    let file = tmp.path().join("claims.array_record");
    claims_records(&file);
    let out = limited(&["convert", file.to_str().unwrap(), &glm("claims.glm")]);
    refused(&out, &["corrupt", "too large", "exceeds the limit"]);
    let root = tmp.path().join("r1");
    ok(adopt(&root, key, &file));
    let root_s = root.to_str().unwrap();
    refused(&limited(&["get", root_s, "0"]), &["cannot hold"]);
    refused(&limited(&["cat", root_s]), &["exceeds the limit"]);
    refused(&limited(&["verify", root_s, "--deep"]), &[key]);

    // A footer that claims more records than it holds: refused by adoption and conversion.
    let file = tmp.path().join("footer.array_record");
    footer_claims_records(&file);
    refused(&adopt(&tmp.path().join("r2"), key, &file), &["cannot hold"]);
    let out = limited(&["convert", file.to_str().unwrap(), &glm("footer.glm")]);
    refused(&out, &["cannot hold"]);

    // 2^26 empty records for real: one reads, a list of them is over the limit.
    let file = tmp.path().join("empty.array_record");
    many_empty_records(&file);
    let root = tmp.path().join("r3");
    ok(adopt(&root, key, &file));
    let root_s = root.to_str().unwrap();
    let got = ok(limited(&["get", root_s, &(N - 1).to_string()]));
    assert_eq!(got.trim(), "\"\"", "{got}");
    refused(&limited(&["cat", root_s]), &["exceeds the limit"]);
    refused(&limited(&["verify", root_s, "--deep"]), &[key]);
    let out = limited(&["convert", file.to_str().unwrap(), &glm("empty.glm")]);
    refused(&out, &["exceeds the limit"]);
}

#[test]
fn compression_bombs_cost_the_record_not_the_claim() {
    let tmp = tempfile::tempdir().unwrap();
    let key = "imported/bomb.array_record";
    // Sizes that cannot add up to the claim: refused before the values are decoded.
    let file = tmp.path().join("bomb.array_record");
    bomb(&file, false);
    let root = tmp.path().join("r1");
    ok(adopt(&root, key, &file));
    let root_s = root.to_str().unwrap();
    refused(
        &limited_to(BOMB_ADDRESS_SPACE, &["get", root_s, "0"]),
        &["add up to less"],
    );
    refused(
        &limited_to(BOMB_ADDRESS_SPACE, &["cat", root_s]),
        &["add up to less"],
    );
    refused(
        &limited_to(BOMB_ADDRESS_SPACE, &["verify", root_s, "--deep"]),
        &[key],
    );
    let dst = tmp.path().join("bomb.glm");
    let out = limited_to(
        BOMB_ADDRESS_SPACE,
        &["convert", file.to_str().unwrap(), dst.to_str().unwrap()],
    );
    refused(&out, &["add up to less"]);
    // Consistent: its first record, 10 bytes, reads without the 900 MiB after it.
    let file = tmp.path().join("bomb2.array_record");
    bomb(&file, true);
    let root = tmp.path().join("r2");
    ok(adopt(&root, key, &file));
    let got = ok(limited_to(
        BOMB_ADDRESS_SPACE,
        &["get", root.to_str().unwrap(), "0", "--raw"],
    ));
    assert_eq!(got.as_bytes(), &[0u8; 10], "{got:?}");
}
