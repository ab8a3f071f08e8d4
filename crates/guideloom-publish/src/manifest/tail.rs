//! The tail checksum of a shard reference (`ShardRef::tail`): a CRC32C of the bytes a reader
//! reads anyway when it opens the shard, recorded when the reference is made, so that every
//! open can tell the object it opened is the one the manifest references (a replacement of
//! the same size included) without an extra request.

use guideloom_format::spec::FOOTER_LEN;
use serde::{Deserialize, Serialize};

use super::{ShardFormat, ShardRef};

/// Most bytes a tail checksum covers: 256 KiB, the tail an ArrayRecord shard's open reads
/// (`opened.rs` opens them with this tail), so a reader checks it on the bytes it has.
pub const MAX_TAIL_CHECK_BYTES: u64 = 256 << 10;

/// A CRC32C of the end of a shard (the manifest field `tail`), whose last `len` bytes every
/// open reads anyway: recorded when the reference is made and compared by every reader that
/// opens the shard.
///
/// - An ArrayRecord shard ([`Root::adopt_array_record`], [`Root::write_array_record_shard`]):
///   the CRC32C of its last `len = min(size, 256 KiB)` bytes, the tail its open reads
///   (postscript, footer and the chunks before them that fit).
/// - A native shard uploaded as bytes ([`Root::upload_shard`], whose reference otherwise
///   carries only a SHA-256 that a reader cannot check without a download): `len` 64, and
///   the CRC32C its footer stores over itself (its first 52 bytes: the index and metadata
///   CRCs, the layout, the record count), the value a written shard's
///   [`Checksum::FooterCrc32c`](super::Checksum::FooterCrc32c) holds. (The CRC32C *of* a
///   whole native footer would not do: it ends with its own CRC32C and a fixed magic, so it
///   is the same for every shard.)
///
/// Native shards written by guideloom carry [`Checksum::FooterCrc32c`](super::Checksum::FooterCrc32c)
/// instead, which every open compares. References written before this field existed have
/// none and are not checked this way (their size and record count still are).
///
/// [`Root::adopt_array_record`]: crate::Root::adopt_array_record
/// [`Root::write_array_record_shard`]: crate::Root::write_array_record_shard
/// [`Root::upload_shard`]: crate::Root::upload_shard
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TailChecksum {
    /// Bytes covered, ending at the end of the shard.
    pub len: u64,
    /// Their CRC32C.
    pub crc32c: u32,
}

impl TailChecksum {
    /// The tail checksum of `tail`, the last bytes of an ArrayRecord shard.
    pub fn of(tail: &[u8]) -> Self {
        TailChecksum {
            len: tail.len() as u64,
            crc32c: guideloom_format::spec::crc32c(tail),
        }
    }

    /// The tail checksum of a native shard whose footer stores `footer_crc` (a decoded
    /// footer's [`checksum`](guideloom_format::Footer::checksum)).
    pub fn native(footer_crc: u32) -> Self {
        TailChecksum {
            len: FOOTER_LEN,
            crc32c: footer_crc,
        }
    }

    /// How many of a shard's last bytes its tail checksum covers: `min(size, 256 KiB)` for
    /// an ArrayRecord shard, 64 (the footer) for a native one.
    pub fn covered(format: ShardFormat, size: u64) -> u64 {
        match format {
            ShardFormat::Native => FOOTER_LEN,
            ShardFormat::ArrayRecord => size.min(MAX_TAIL_CHECK_BYTES),
        }
    }
}

impl std::fmt::Display for TailChecksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "crc32c {:08x} (last {} bytes)", self.crc32c, self.len)
    }
}

/// Checks reference `s`'s tail checksum (for `check_shards`): it covers exactly the bytes
/// [`TailChecksum::covered`] gives, those a reader has in hand when it opens the shard.
pub(crate) fn check_tail(s: &ShardRef, tail: &TailChecksum) -> std::result::Result<(), String> {
    let want = TailChecksum::covered(s.format, s.size);
    if tail.len != want || tail.len > s.size {
        return Err(format!(
            "shard {:?} has a tail checksum of {} bytes; a {} shard of {} bytes has one of {want}",
            s.key, tail.len, s.format, s.size
        ));
    }
    Ok(())
}
