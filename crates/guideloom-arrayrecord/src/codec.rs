//! Compression of chunk buffers: none, zstd, Snappy (raw block format) and Brotli.
//!
//! Every compressed buffer starts with its decompressed size as a varint; an uncompressed one
//! has no prefix. Decompression checks that size against a limit before decoding and against
//! the output after, and grows its output only as the codec produces bytes.

use std::io::{BufRead, Read};

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

/// A compressed buffer's stated decompressed size and where its codec stream begins: the
/// varint prefix read and checked (at most `src.limit`, exactly `expected` when given) before
/// anything is decoded. `None` for an uncompressed buffer, whose size is its length.
fn prefix(
    src: &Source<'_>,
    ctype: CompressionType,
    input: &[u8],
    expected: Option<u64>,
) -> Result<Option<(Codec, u64, usize)>> {
    let Some(codec) = ctype.codec() else {
        check_size(src, input.len() as u64, expected)?;
        return Ok(None);
    };
    let (stated, used) = varint::get(input).ok_or_else(|| {
        Error::corrupt(
            src.location,
            src.offset,
            format!("bad decompressed-size varint of the {}", src.what),
        )
    })?;
    check_size(src, stated, expected)?;
    let body = &input[used..];
    match codec {
        // A valid Snappy stream cannot expand by more than 22x, and states its own length.
        Codec::Snappy => {
            let claimed = snap::raw::decompress_len(body)
                .map_err(|e| src.codec_error(ctype, std::io::Error::from(e)))?
                as u64;
            if claimed != stated || claimed > (body.len() as u64).saturating_mul(SNAPPY_MAX_RATIO) {
                return Err(Error::corrupt(
                    src.location,
                    src.offset,
                    format!(
                        "snappy stream of {} bytes claims {claimed} bytes, the prefix {stated}",
                        body.len()
                    ),
                ));
            }
        }
        // A zstd frame that states its content size must state the prefix's.
        Codec::Zstd => {
            if let Ok(Some(content)) = zstd::zstd_safe::get_frame_content_size(body)
                && content != stated
            {
                return Err(Error::corrupt(
                    src.location,
                    src.offset,
                    format!(
                        "zstd frame of the {} states {content} bytes, its prefix {stated}",
                        src.what
                    ),
                ));
            }
        }
        Codec::Brotli => {}
    }
    Ok(Some((codec, stated, used)))
}

impl Source<'_> {
    fn codec_error(&self, ctype: CompressionType, source: std::io::Error) -> Error {
        Error::Codec {
            location: self.location.to_owned(),
            offset: self.offset,
            codec: ctype.name(),
            op: "decompression",
            source,
        }
    }

    fn short(&self, produced: u64, stated: u64) -> Error {
        Error::corrupt(
            self.location,
            self.offset,
            format!(
                "{} decompresses to {produced} bytes, its prefix says {stated}",
                self.what
            ),
        )
    }
}

/// Decompresses `input` (prefix included unless uncompressed) at once; the result must be
/// exactly `expected` bytes when given. The output grows as the codec produces bytes, beyond
/// what the stream's own format bounds (Snappy: 22x its input; zstd: the frame's stated
/// content size, up to [`ONE_SHOT_ZSTD_BYTES`]). The readers decode through the streaming
/// paths; this is the tests' oracle.
#[cfg(test)]
pub(crate) fn decompress(
    src: &Source<'_>,
    ctype: CompressionType,
    input: Bytes,
    expected: Option<u64>,
) -> Result<Bytes> {
    match prefix(src, ctype, &input, expected)? {
        None => Ok(input),
        Some(parsed) => decompress_parsed(src, ctype, &input, parsed),
    }
}

/// [`decompress`] once [`prefix`] has read and checked the size prefix of `input`.
fn decompress_parsed(
    src: &Source<'_>,
    ctype: CompressionType,
    input: &[u8],
    (codec, stated, used): (Codec, u64, usize),
) -> Result<Bytes> {
    let body = &input[used..];
    let codec_err = |source: std::io::Error| src.codec_error(ctype, source);
    let out: Vec<u8> = match codec {
        Codec::Snappy => snap::raw::Decoder::new()
            .decompress_vec(body)
            .map_err(|e| codec_err(std::io::Error::from(e)))?,
        Codec::Zstd if stated <= ONE_SHOT_ZSTD_BYTES => {
            zstd_one_shot(body, stated).map_err(codec_err)?
        }
        Codec::Zstd | Codec::Brotli => {
            read_bounded(open_stream(codec, body, stated).map_err(codec_err)?, stated)
                .map_err(codec_err)?
        }
    };
    if out.len() as u64 != stated {
        return Err(src.short(out.len() as u64, stated));
    }
    Ok(Bytes::from(out))
}

/// A streaming decoder of `body`, a zstd or Brotli stream of `stated` bytes.
fn open_stream<'a>(
    codec: Codec,
    body: &'a [u8],
    stated: u64,
) -> std::io::Result<Box<dyn Read + 'a>> {
    Ok(match codec {
        Codec::Zstd => {
            let mut dec = zstd::stream::read::Decoder::with_buffer(body)?;
            // zstd's own default bound on the window is 2^27; Riegeli allows windows up to
            // 2^31, accepted only for a buffer that large (the window never needs to exceed
            // the output).
            let need = 64 - stated.leading_zeros();
            dec.window_log_max(need.clamp(27, 31))?;
            Box::new(dec)
        }
        // brotli-decompressor accepts large-window streams (Riegeli writes them for
        // window_log > 24); its ring buffer grows with the output (the metablock being
        // decoded, at most 16 MiB, beside what came before), up to the window.
        Codec::Brotli => Box::new(brotli::Decompressor::new(body, 4096)),
        Codec::Snappy => unreachable!("Snappy is decoded at once"),
    })
}

/// Bytes of a stream read per step when skipping or collecting output, and the most a
/// stream's output buffer reserves ahead of what the codec has produced.
const STREAM_STEP: usize = 64 << 10;

/// A decompressed buffer read front to back: in place (uncompressed, or decoded at once) or
/// decoded as it is read, so only the bytes asked for are ever held.
pub(crate) enum Decoded<'a> {
    /// `bytes[at..end]` are the bytes not yet read.
    Whole {
        /// The buffer: the chunk's bytes (uncompressed) or the decoded output.
        bytes: WholeBytes<'a>,
        /// Where the buffer begins in `bytes`.
        begin: usize,
        /// The next byte to read.
        at: usize,
        /// The buffer's end.
        end: usize,
    },
    /// A zstd or Brotli decoder, bounded to one byte past the stated size.
    Stream(Box<Stream<'a>>),
}

/// The bytes of a [`Decoded::Whole`]: borrowed (read in place: no reference count touched
/// but for the records taken) or owned (decoded).
pub(crate) enum WholeBytes<'a> {
    /// The chunk's own bytes.
    Borrowed(&'a Bytes),
    /// Decoded output.
    Owned(Bytes),
}

/// The streaming state of [`Decoded::Stream`].
pub(crate) struct Stream<'a> {
    reader: std::io::BufReader<std::io::Take<Box<dyn Read + 'a>>>,
    ctype: CompressionType,
    stated: u64,
    produced: u64,
}

impl<'a> Decoded<'a> {
    /// The buffer `whole[range]` (prefix included unless uncompressed), decoded at once when
    /// `at_once` (or uncompressed, or Snappy, which cannot stream: bounded by 22x its input),
    /// else streamed. Its decompressed size is checked as [`decompress`] checks it before
    /// anything is decoded.
    pub(crate) fn open(
        src: &Source<'_>,
        ctype: CompressionType,
        whole: &'a Bytes,
        range: std::ops::Range<usize>,
        expected: Option<u64>,
        at_once: impl FnOnce(u64) -> bool,
    ) -> Result<Decoded<'a>> {
        let input = &whole[range.clone()];
        let Some((codec, stated, used)) = prefix(src, ctype, input, expected)? else {
            return Ok(Decoded::Whole {
                bytes: WholeBytes::Borrowed(whole),
                begin: range.start,
                at: range.start,
                end: range.end,
            });
        };
        if matches!(codec, Codec::Snappy) || at_once(stated) {
            let out = decompress_parsed(src, ctype, input, (codec, stated, used))?;
            let end = out.len();
            return Ok(Decoded::Whole {
                bytes: WholeBytes::Owned(out),
                begin: 0,
                at: 0,
                end,
            });
        }
        let body = &input[used..];
        let reader = open_stream(codec, body, stated).map_err(|e| src.codec_error(ctype, e))?;
        Ok(Decoded::Stream(Box::new(Stream {
            reader: std::io::BufReader::with_capacity(
                STREAM_STEP,
                reader.take(stated.saturating_add(1)),
            ),
            ctype,
            stated,
            produced: 0,
        })))
    }

    /// The decompressed size (the prefix's, checked).
    #[inline]
    pub(crate) fn stated(&self) -> u64 {
        match self {
            Decoded::Whole { begin, end, .. } => (end - begin) as u64,
            Decoded::Stream(s) => s.stated,
        }
    }

    /// Bytes read so far.
    #[inline]
    pub(crate) fn position(&self) -> u64 {
        match self {
            Decoded::Whole { begin, at, .. } => (at - begin) as u64,
            Decoded::Stream(s) => s.produced,
        }
    }

    /// Goes back to the first byte: `true` when whole; a stream cannot (open it again).
    #[inline]
    pub(crate) fn rewind(&mut self) -> bool {
        match self {
            Decoded::Whole { begin, at, .. } => {
                *at = *begin;
                true
            }
            Decoded::Stream(_) => false,
        }
    }

    /// The next varint, `None` at the end of the buffer.
    #[inline]
    pub(crate) fn varint(&mut self, src: &Source<'_>) -> Result<Option<u64>> {
        let bad = || {
            Error::corrupt(
                src.location,
                src.offset,
                format!("bad varint in the {}", src.what),
            )
        };
        match self {
            Decoded::Whole { bytes, at, end, .. } => {
                if at == end {
                    return Ok(None);
                }
                let (v, n) = varint::get(&bytes.get()[*at..*end]).ok_or_else(bad)?;
                *at += n;
                Ok(Some(v))
            }
            Decoded::Stream(s) => s.varint(src).and_then(|v| match v {
                Varint::End => Ok(None),
                Varint::Value(v) => Ok(Some(v)),
                Varint::Bad => Err(bad()),
            }),
        }
    }

    /// The next `n` bytes (a slice of the buffer when whole, a copy when streamed).
    #[inline]
    pub(crate) fn take(&mut self, src: &Source<'_>, n: u64) -> Result<Bytes> {
        match self {
            Decoded::Whole { bytes, at, end, .. } => {
                let to = whole_advance(src, *at, *end, n)?;
                let out = bytes.get().slice(*at..to);
                *at = to;
                Ok(out)
            }
            Decoded::Stream(s) => s.take(src, n),
        }
    }

    /// Skips `n` bytes (decoding them, when streamed, without keeping them).
    #[inline]
    pub(crate) fn skip(&mut self, src: &Source<'_>, n: u64) -> Result<()> {
        match self {
            Decoded::Whole { at, end, .. } => {
                *at = whole_advance(src, *at, *end, n)?;
                Ok(())
            }
            Decoded::Stream(s) => s.skip(src, n),
        }
    }

    /// Checks that every byte was read and the codec produces no more.
    #[inline]
    pub(crate) fn finish(&mut self, src: &Source<'_>) -> Result<()> {
        match self {
            Decoded::Whole { at, end, .. } if at == end => Ok(()),
            Decoded::Whole { at, end, .. } => Err(Error::corrupt(
                src.location,
                src.offset,
                format!("{} bytes left after the {}", *end - *at, src.what),
            )),
            Decoded::Stream(s) => s.finish(src),
        }
    }
}

impl WholeBytes<'_> {
    #[inline]
    fn get(&self) -> &Bytes {
        match self {
            WholeBytes::Borrowed(b) => b,
            WholeBytes::Owned(b) => b,
        }
    }
}

/// `at + n` when within `end`.
#[inline]
fn whole_advance(src: &Source<'_>, at: usize, end: usize, n: u64) -> Result<usize> {
    usize::try_from(n)
        .ok()
        .and_then(|n| at.checked_add(n))
        .filter(|&to| to <= end)
        .ok_or_else(|| {
            Error::corrupt(
                src.location,
                src.offset,
                format!(
                    "the {} end before byte {}",
                    src.what,
                    (at as u64).saturating_add(n)
                ),
            )
        })
}

/// A varint read from a stream.
enum Varint {
    Value(u64),
    End,
    Bad,
}

impl Stream<'_> {
    fn varint(&mut self, src: &Source<'_>) -> Result<Varint> {
        let buf = self
            .reader
            .fill_buf()
            .map_err(|e| src.codec_error(self.ctype, e))?;
        if buf.is_empty() {
            return Ok(Varint::End);
        }
        if let Some((v, n)) = varint::get(buf) {
            self.reader.consume(n);
            self.produced += n as u64;
            return Ok(Varint::Value(v));
        }
        if buf.len() >= 10 {
            return Ok(Varint::Bad);
        }
        // The varint straddles the buffer's end: a byte at a time.
        let mut tmp = [0u8; 10];
        for len in 1..=10 {
            let buf = self
                .reader
                .fill_buf()
                .map_err(|e| src.codec_error(self.ctype, e))?;
            let Some(&b) = buf.first() else {
                return Ok(Varint::Bad);
            };
            tmp[len - 1] = b;
            self.reader.consume(1);
            self.produced += 1;
            if let Some((v, _)) = varint::get(&tmp[..len]) {
                return Ok(Varint::Value(v));
            }
        }
        Ok(Varint::Bad)
    }

    fn take(&mut self, src: &Source<'_>, n: u64) -> Result<Bytes> {
        let want = n.min(self.stated.saturating_sub(self.produced));
        // Reserve no more ahead of the codec than one step: a hostile size grows the buffer
        // only as far as the stream really decodes.
        let mut out = Vec::with_capacity(usize::try_from(want).unwrap_or(0).min(STREAM_STEP));
        (&mut self.reader)
            .take(want)
            .read_to_end(&mut out)
            .map_err(|e| src.codec_error(self.ctype, e))?;
        self.produced += out.len() as u64;
        if (out.len() as u64) < n {
            return Err(src.short(self.produced, self.stated));
        }
        Ok(Bytes::from(out))
    }

    fn skip(&mut self, src: &Source<'_>, n: u64) -> Result<()> {
        let want = n.min(self.stated.saturating_sub(self.produced));
        let copied = std::io::copy(&mut (&mut self.reader).take(want), &mut std::io::sink())
            .map_err(|e| src.codec_error(self.ctype, e))?;
        self.produced += copied;
        if copied < n {
            return Err(src.short(self.produced, self.stated));
        }
        Ok(())
    }

    fn finish(&mut self, src: &Source<'_>) -> Result<()> {
        let ctype = self.ctype;
        let more = !self
            .reader
            .fill_buf()
            .map_err(|e| src.codec_error(ctype, e))?
            .is_empty();
        if more || self.produced != self.stated {
            let produced = if more { self.stated + 1 } else { self.produced };
            return Err(src.short(produced, self.stated));
        }
        Ok(())
    }
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

/// Reads at most `stated + 1` bytes, so an overlong stream is detected without decoding it
/// all; the output grows as the codec produces bytes.
fn read_bounded(reader: impl Read, stated: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(usize::try_from(stated).unwrap_or(0).min(STREAM_STEP));
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
pub(crate) fn zstd_compress(level: i32, window_log: u32, input: &[u8]) -> std::io::Result<Vec<u8>> {
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
