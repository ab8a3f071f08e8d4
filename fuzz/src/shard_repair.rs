//! [`repair`]: makes a fuzzed file's shard checksums valid, so that a target gets past them
//! to the layout, index and metadata checks behind (used by `shard_reader` and `point_read`).

use guideloom_format::spec::{MAGIC, crc32c};

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]))
}

/// Sets the footer magic and version and recomputes the footer, index and metadata
/// checksums of `file` for whatever its footer says (sections outside the file are left).
pub fn repair(file: &mut [u8]) {
    let n = file.len();
    if n < 64 {
        return;
    }
    let f = n - 64;
    let section = |off: u64, len: u64| -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        (end <= f).then_some(start..end)
    };
    if let Some(r) = section(le_u64(&file[f..]), le_u64(&file[f + 8..])) {
        let crc = crc32c(&file[r]);
        file[f + 40..f + 44].copy_from_slice(&crc.to_le_bytes());
    }
    if let Some(r) = section(le_u64(&file[f + 16..]), le_u64(&file[f + 24..])) {
        let crc = crc32c(&file[r]);
        file[f + 44..f + 48].copy_from_slice(&crc.to_le_bytes());
    }
    file[f + 48..f + 50].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32c(&file[f..f + 52]);
    file[f + 52..f + 56].copy_from_slice(&crc.to_le_bytes());
    file[f + 56..].copy_from_slice(&MAGIC);
}
