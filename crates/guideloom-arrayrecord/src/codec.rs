//! Compression of chunk buffers: none, zstd, Snappy (raw block format) and Brotli.
//!
//! Every compressed buffer starts with its decompressed size as a varint; an uncompressed one
//! has no prefix. Decompression checks that size against a limit before decoding and against
//! the output after, and grows its output only as the codec produces bytes.

use std::io::Read;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::options::Compression;
use crate::varint;

/// The compression byte of a simple chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompressionType {
    None,
    Brotli,
    Zstd,
    Snappy,
}

impl CompressionType {
    pub(crate) fn from_byte(b: u8) -> Option<CompressionType> {
        match b {
            0 => Some(CompressionType::None),
            b'b' => Some(CompressionType::Brotli),
            b'z' => Some(CompressionType::Zstd),
            b's' => Some(CompressionType::Snappy),
            _ => None,
        }
    }

    pub(crate) fn byte(self) -> u8 {
        match self {
            CompressionType::None => 0,
            CompressionType::Brotli => b'b',
            CompressionType::Zstd => b'z',
            CompressionType::Snappy => b's',
        }
    }

    /// The codec, or `None` when uncompressed.
    fn codec(self) -> Option<Codec> {
        match self {
            CompressionType::None => None,
            CompressionType::Brotli => Some(Codec::Brotli),
            CompressionType::Zstd => Some(Codec::Zstd),
            CompressionType::Snappy => Some(Codec::Snappy),
        }
    }

    fn name(self) -> &'static str {
        match self {
            CompressionType::None => "none",
            CompressionType::Brotli => "brotli",
            CompressionType::Zstd => "zstd",
            CompressionType::Snappy => "snappy",
        }
    }
}

/// A compressing codec.
#[derive(Debug, Clone, Copy)]
enum Codec {
    Brotli,
    Zstd,
    Snappy,
}

/// The largest output a Snappy element can produce per input byte: a 3-byte copy yields at
/// most 64 bytes, so no valid stream expands by more than 22×.
const SNAPPY_MAX_RATIO: u64 = 22;

/// Where a decompressed buffer comes from, for errors and limits.
pub(crate) struct Source<'a> {
    pub(crate) location: &'a str,
    /// The chunk's position in the file.
    pub(crate) offset: u64,
    /// What the buffer holds, for [`Error::TooLarge`].
    pub(crate) what: &'static str,
    /// The largest decompressed size accepted.
    pub(crate) limit: u64,
}

/// Checks a decompressed size: at most `src.limit`, and exactly `expected` when given.
pub(crate) fn check_size(src: &Source<'_>, len: u64, expected: Option<u64>) -> Result<()> {
    if len > src.limit {
        return Err(Error::TooLarge {
            location: src.location.to_owned(),
            offset: src.offset,
            what: src.what,
            size: len,
            limit: src.limit,
        });
    }
    match expected {
        Some(want) if want != len => Err(Error::corrupt(
            src.location,
            src.offset,
            format!("{} decompresses to {len} bytes, expected {want}", src.what),
        )),
        _ => Ok(()),
    }
}

/// Decompresses `input` (prefix included unless uncompressed); the result must be exactly
/// `expected` bytes when given.
pub(crate) fn decompress(
    src: &Source<'_>,
    ctype: CompressionType,
    input: Bytes,
    expected: Option<u64>,
) -> Result<Bytes> {
    let corrupt = |what: String| Error::corrupt(src.location, src.offset, what);
    let check_len = |len: u64| check_size(src, len, expected);
    let Some(codec) = ctype.codec() else {
        check_len(input.len() as u64)?;
        return Ok(input);
    };
    let (stated, used) = varint::get(&input)
        .ok_or_else(|| corrupt(format!("bad decompressed-size varint of the {}", src.what)))?;
    check_len(stated)?;
    let body = &input[used..];
    let codec_err = |source: std::io::Error| Error::Codec {
        location: src.location.to_owned(),
        offset: src.offset,
        codec: ctype.name(),
        op: "decompression",
        source,
    };
    let out: Vec<u8> = match codec {
        Codec::Snappy => {
            let claimed = snap::raw::decompress_len(body)
                .map_err(|e| codec_err(std::io::Error::from(e)))? as u64;
            if claimed != stated || claimed > (body.len() as u64).saturating_mul(SNAPPY_MAX_RATIO) {
                return Err(corrupt(format!(
                    "snappy stream of {} bytes claims {claimed} bytes, the prefix {stated}",
                    body.len()
                )));
            }
            snap::raw::Decoder::new()
                .decompress_vec(body)
                .map_err(|e| codec_err(std::io::Error::from(e)))?
        }
        Codec::Zstd if stated <= ONE_SHOT_ZSTD_BYTES => {
            zstd_one_shot(body, stated).map_err(codec_err)?
        }
        Codec::Zstd => {
            let mut dec = zstd::stream::read::Decoder::with_buffer(body).map_err(codec_err)?;
            // Riegeli allows windows up to 2^31; accept them when the output may be that large.
            let need = 64 - stated.leading_zeros();
            dec.window_log_max(need.clamp(27, 31)).map_err(codec_err)?;
            read_bounded(dec, stated).map_err(codec_err)?
        }
        Codec::Brotli => {
            // brotli-decompressor accepts large-window streams (Riegeli writes them for
            // window_log > 24).
            let dec = brotli::Decompressor::new(body, 4096);
            read_bounded(dec, stated).map_err(codec_err)?
        }
    };
    if out.len() as u64 != stated {
        return Err(corrupt(format!(
            "{} decompresses to {} bytes, its prefix says {stated}",
            src.what,
            out.len()
        )));
    }
    Ok(Bytes::from(out))
}

/// Zstd buffers up to this decompressed size are decoded in one call into an output of
/// exactly their stated size, with this thread's reused decompression context: no window
/// buffer, no context set up per buffer (a fresh streaming decoder per 1 KiB record cost
/// ~40 µs, almost all of it allocating and freeing a context and a 1 MiB window). Larger ones
/// stream, so a hostile size prefix never reserves more than the codec produces.
const ONE_SHOT_ZSTD_BYTES: u64 = 16 << 20;

thread_local! {
    static ZSTD_CONTEXT: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decodes one zstd buffer of at most [`ONE_SHOT_ZSTD_BYTES`] into a `Vec` of capacity
/// `stated`: a stream that would produce more fails (the output has no room), one that
/// produces less is caught by the caller's size check.
fn zstd_one_shot(body: &[u8], stated: u64) -> std::io::Result<Vec<u8>> {
    let capacity = usize::try_from(stated).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(capacity);
    ZSTD_CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match slot.as_mut() {
            Some(dctx) => dctx,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        dctx.decompress_to_buffer(body, &mut out)
    })?;
    Ok(out)
}

/// Reads at most `stated + 1` bytes, so an overlong stream is detected without decoding it all.
fn read_bounded(reader: impl Read, stated: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(usize::try_from(stated.min(1 << 20)).unwrap_or(0));
    reader
        .take(stated.saturating_add(1))
        .read_to_end(&mut out)?;
    Ok(out)
}

/// Appends `input` compressed as `compression` says to `out`, prefixed with its size unless
/// uncompressed.
pub(crate) fn compress(
    compression: &Compression,
    input: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if !matches!(compression, Compression::Uncompressed) {
        varint::put(out, input.len() as u64);
    }
    match *compression {
        Compression::Uncompressed => out.extend_from_slice(input),
        Compression::Snappy => {
            let compressed = snap::raw::Encoder::new()
                .compress_vec(input)
                .map_err(std::io::Error::from)?;
            out.extend_from_slice(&compressed);
        }
        Compression::Zstd { level, window_log } => {
            out.extend_from_slice(&zstd_compress(level, window_log, input)?);
        }
        Compression::Brotli { level, window_log } => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: i32::try_from(level).unwrap_or(11),
                lgwin: i32::try_from(window_log).unwrap_or(30),
                large_window: window_log > 24,
                size_hint: input.len(),
                ..Default::default()
            };
            brotli::BrotliCompress(&mut &input[..], out, &params)?;
        }
    }
    Ok(())
}

thread_local! {
    /// This thread's zstd compression context and the (level, window log) it is set up for.
    static ZSTD_COMPRESSOR: std::cell::RefCell<Option<(i32, u32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Compresses one buffer with this thread's reused context (set up again only when the level
/// or window changes): creating a context per buffer was most of a small-record writer's time.
fn zstd_compress(level: i32, window_log: u32, input: &[u8]) -> std::io::Result<Vec<u8>> {
    ZSTD_COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let reusable = matches!(&*slot, Some((l, w, _)) if *l == level && *w == window_log);
        if !reusable {
            let mut c = zstd::bulk::Compressor::new(level)?;
            c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(window_log))?;
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(false))?;
            *slot = Some((level, window_log, c));
        }
        let (_, _, c) = slot.as_mut().expect("set just above");
        c.compress(input)
    })
}

impl Compression {
    /// The compression byte this setting writes.
    pub(crate) fn ctype(&self) -> CompressionType {
        match self {
            Compression::Uncompressed => CompressionType::None,
            Compression::Zstd { .. } => CompressionType::Zstd,
            Compression::Snappy => CompressionType::Snappy,
            Compression::Brotli { .. } => CompressionType::Brotli,
        }
    }

    /// Its name in errors.
    pub(crate) fn codec_name(&self) -> &'static str {
        self.ctype().name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(limit: u64) -> Source<'static> {
        Source {
            location: "mem",
            offset: 7,
            what: "values",
            limit,
        }
    }

    fn all() -> [Compression; 4] {
        [
            Compression::Uncompressed,
            Compression::Zstd {
                level: 3,
                window_log: 20,
            },
            Compression::Snappy,
            Compression::Brotli {
                level: 6,
                window_log: 22,
            },
        ]
    }

    #[test]
    fn round_trips_and_checks_sizes() {
        let input: Vec<u8> = (0..100_000u32)
            .map(|i| (i % 251).to_le_bytes()[0] ^ (i / 1000).to_le_bytes()[0])
            .collect();
        for c in all() {
            for data in [&input[..], &[][..], b"x"] {
                let mut out = Vec::new();
                compress(&c, data, &mut out).unwrap();
                let got = decompress(&src(1 << 20), c.ctype(), Bytes::from(out.clone()), None);
                assert_eq!(&got.unwrap()[..], data, "{c:?}");
                let want = Some(data.len() as u64 + 1);
                let err = decompress(&src(1 << 20), c.ctype(), Bytes::from(out.clone()), want);
                assert!(matches!(err, Err(Error::Corrupt { .. })), "{c:?}: {err:?}");
                if !data.is_empty() {
                    let err = decompress(&src(0), c.ctype(), Bytes::from(out), None);
                    assert!(matches!(err, Err(Error::TooLarge { .. })), "{c:?}: {err:?}");
                }
            }
        }
    }

    #[test]
    fn hostile_prefixes_are_refused() {
        for c in all().into_iter().skip(1) {
            let mut out = Vec::new();
            compress(&c, b"hello hello hello", &mut out).unwrap();
            out[0] = 100; // the prefix lies
            let err = decompress(&src(1 << 20), c.ctype(), Bytes::from(out.clone()), None);
            assert!(err.is_err(), "{c:?}");
            let garbage = Bytes::from_static(&[5, 0xff, 0xfe, 0xfd, 0xfc, 0xfb]);
            assert!(decompress(&src(1 << 20), c.ctype(), garbage, None).is_err());
        }
    }
}
