//! Chunks: the 40-byte hash-checked header, and reading one chunk out of the file bytes that
//! hold it, block headers stripped and checked.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::block::{
    BLOCK_HEADER_SIZE, BLOCK_SIZE, BlockHeader, CHUNK_HEADER_SIZE, chunk_end, is_block_boundary,
    is_possible_chunk_boundary,
};
use crate::error::{Error, Result};
use crate::hash::hash;

/// Chunk type of the file signature, the mandatory first chunk.
pub(crate) const SIGNATURE: u8 = b's';
/// Chunk type of a padding chunk.
pub(crate) const PADDING: u8 = b'p';
/// Chunk type of a simple chunk with records.
pub(crate) const SIMPLE: u8 = b'r';
/// Chunk type of a transposed chunk with records (not supported).
pub(crate) const TRANSPOSED: u8 = b't';

/// The largest record count the 7-byte `num_records` field holds.
pub(crate) const MAX_NUM_RECORDS: u64 = (1 << 56) - 1;

/// A decoded chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub(crate) data_size: u64,
    pub(crate) data_hash: u64,
    pub(crate) chunk_type: u8,
    pub(crate) num_records: u64,
    pub(crate) decoded_data_size: u64,
}

fn word(bytes: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[i..i + 8]);
    u64::from_le_bytes(w)
}

impl ChunkHeader {
    /// The header of a chunk holding `data`. `num_records` must be at most
    /// [`MAX_NUM_RECORDS`].
    pub(crate) fn new(data: &[u8], chunk_type: u8, num_records: u64, decoded: u64) -> Self {
        debug_assert!(num_records <= MAX_NUM_RECORDS);
        ChunkHeader {
            data_size: data.len() as u64,
            data_hash: hash(data),
            chunk_type,
            num_records,
            decoded_data_size: decoded,
        }
    }

    /// The 40 bytes: header hash, data size, data hash, type and record count, decoded size.
    pub(crate) fn encode(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[8..16].copy_from_slice(&self.data_size.to_le_bytes());
        out[16..24].copy_from_slice(&self.data_hash.to_le_bytes());
        let type_and_count = u64::from(self.chunk_type) | (self.num_records << 8);
        out[24..32].copy_from_slice(&type_and_count.to_le_bytes());
        out[32..40].copy_from_slice(&self.decoded_data_size.to_le_bytes());
        let h = hash(&out[8..]);
        out[..8].copy_from_slice(&h.to_le_bytes());
        out
    }

    /// Decodes 40 bytes, checking the header hash.
    pub(crate) fn decode(location: &str, offset: u64, bytes: &[u8]) -> Result<ChunkHeader> {
        if bytes.len() != 40 || word(bytes, 0) != hash(&bytes[8..]) {
            return Err(Error::corrupt(
                location,
                offset,
                "chunk header hash mismatch",
            ));
        }
        let type_and_count = word(bytes, 24);
        Ok(ChunkHeader {
            data_size: word(bytes, 8),
            data_hash: word(bytes, 16),
            chunk_type: type_and_count.to_le_bytes()[0],
            num_records: type_and_count >> 8,
            decoded_data_size: word(bytes, 32),
        })
    }
}

/// One chunk read from the file: its header, data (block headers removed) and position.
#[derive(Debug, Clone)]
pub(crate) struct Chunk<'a> {
    pub(crate) header: ChunkHeader,
    /// The bytes holding the data, at `data`.
    held: Held<'a>,
    data: Range<usize>,
    pub(crate) begin: u64,
}

/// Where a chunk's data is: in the bytes read (no block header inside it), or gathered.
#[derive(Debug, Clone)]
enum Held<'a> {
    Read(&'a Bytes),
    Gathered(Bytes),
}

impl<'a> Chunk<'a> {
    /// A chunk whose data is all of `data` (for tests of what reads chunks).
    #[cfg(test)]
    pub(crate) fn new(header: ChunkHeader, data: Bytes, begin: u64) -> Chunk<'static> {
        Chunk {
            header,
            data: 0..data.len(),
            held: Held::Gathered(data),
            begin,
        }
    }

    /// The data: `bytes[range]`. Slicing `bytes` shares it without a copy.
    pub(crate) fn data(&self) -> (&Bytes, Range<usize>) {
        let bytes = match &self.held {
            Held::Read(b) => b,
            Held::Gathered(b) => b,
        };
        (bytes, self.data.clone())
    }
}

/// The file bytes `[begin, begin + buf.len())`.
struct Span<'a> {
    location: &'a str,
    buf: &'a Bytes,
    begin: u64,
}

impl Span<'_> {
    fn end(&self) -> u64 {
        self.begin + self.buf.len() as u64
    }

    /// Where in `buf` the `len` chunk bytes that follow the first `skip` chunk bytes of the
    /// chunk beginning at `self.begin` lie, when no block header interrupts them (the common
    /// case: a chunk smaller than a block): no copy. `None` when one does
    /// ([`gather_pieces`](Self::gather_pieces)). Refuses bytes past the end of `buf`.
    fn contiguous(&self, skip: u64, len: u64) -> Result<Option<Range<usize>>> {
        let want = skip.saturating_add(len);
        // A chunk beginning on a block boundary starts after that block's header.
        let lead = if is_block_boundary(self.begin) && want > 0 {
            BLOCK_HEADER_SIZE
        } else {
            0
        };
        let in_block = self.begin % BLOCK_SIZE + lead;
        if in_block.saturating_add(want) > BLOCK_SIZE {
            return Ok(None);
        }
        let from = lead + skip;
        let to = lead + want;
        if to > self.buf.len() as u64 {
            return Err(self.past_end());
        }
        // `to` is at most `buf.len()`, so both fit in `usize`.
        Ok(Some(
            usize::try_from(from).unwrap_or(usize::MAX)..usize::try_from(to).unwrap_or(usize::MAX),
        ))
    }

    fn past_end(&self) -> Error {
        Error::corrupt(
            self.location,
            self.begin,
            format!(
                "chunk extends past byte {} (the end of the range holding it)",
                self.end()
            ),
        )
    }

    /// The `len` chunk bytes that follow the first `skip` chunk bytes of the chunk beginning
    /// at `self.begin`, block headers left out: copied together when block headers interrupt
    /// them.
    fn gather_pieces(&self, skip: u64, len: u64) -> Result<Bytes> {
        let mut pos = self.begin;
        let mut skip = skip;
        let mut need = len;
        let mut pieces: Vec<(usize, usize)> = Vec::new();
        loop {
            if is_block_boundary(pos) && skip + need > 0 {
                pos += BLOCK_HEADER_SIZE;
            }
            if skip + need == 0 {
                break;
            }
            let n = (skip + need).min(BLOCK_SIZE - pos % BLOCK_SIZE);
            if pos + n > self.end() {
                return Err(self.past_end());
            }
            let skipped = n.min(skip);
            let taken = n - skipped;
            if taken > 0 {
                let from = usize::try_from(pos + skipped - self.begin).unwrap_or(usize::MAX);
                let to = usize::try_from(pos + n - self.begin).unwrap_or(usize::MAX);
                pieces.push((from, to));
            }
            skip -= skipped;
            need -= taken;
            pos += n;
        }
        Ok(match pieces[..] {
            [] => Bytes::new(),
            [(from, to)] => self.buf.slice(from..to),
            _ => {
                let mut out = BytesMut::with_capacity(usize::try_from(len).unwrap_or(0));
                for (from, to) in pieces {
                    out.extend_from_slice(&self.buf[from..to]);
                }
                out.freeze()
            }
        })
    }

    /// Checks every block header in `[self.begin, end)`: its hash, and that it points back to
    /// the chunk's beginning and forward to its end.
    fn check_block_headers(&self, end: u64) -> Result<()> {
        let mut block = self.begin.next_multiple_of(BLOCK_SIZE);
        while block < end {
            let at = usize::try_from(block - self.begin).unwrap_or(usize::MAX);
            let bytes: &[u8; 24] = self
                .buf
                .get(at..at.saturating_add(24))
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| Error::corrupt(self.location, block, "truncated block header"))?;
            let header = BlockHeader::decode(bytes).ok_or_else(|| {
                Error::corrupt(self.location, block, "block header hash mismatch")
            })?;
            let want = BlockHeader {
                previous_chunk: block - self.begin,
                next_chunk: end - block,
            };
            if header != want {
                return Err(Error::corrupt(
                    self.location,
                    block,
                    format!(
                        "block header says the chunk spans {}..{}, its header says {}..{end}",
                        block.wrapping_sub(header.previous_chunk),
                        block.wrapping_add(header.next_chunk),
                        self.begin
                    ),
                ));
            }
            block += BLOCK_SIZE;
        }
        Ok(())
    }
}

/// Reads the chunk beginning at file position `begin` from `buf`, the file bytes from `begin`
/// on, which must hold the whole chunk. Checks the chunk header hash, the block headers inside
/// the chunk, and the data hash.
pub(crate) fn read_chunk<'a>(location: &str, buf: &'a Bytes, begin: u64) -> Result<Chunk<'a>> {
    if !is_possible_chunk_boundary(begin) {
        return Err(Error::corrupt(
            location,
            begin,
            "a chunk cannot begin inside or just after a block header",
        ));
    }
    let span = Span {
        location,
        buf,
        begin,
    };
    let header = match span.contiguous(0, CHUNK_HEADER_SIZE)? {
        Some(r) => ChunkHeader::decode(location, begin, &buf[r])?,
        None => ChunkHeader::decode(location, begin, &span.gather_pieces(0, CHUNK_HEADER_SIZE)?)?,
    };
    if header.num_records > MAX_NUM_RECORDS {
        return Err(Error::corrupt(location, begin, "record count out of range"));
    }
    let end = chunk_end(begin, header.data_size, header.num_records)
        .filter(|&end| end <= span.end())
        .ok_or_else(|| {
            Error::corrupt(
                location,
                begin,
                format!(
                    "chunk of {} data bytes and {} records does not fit before byte {}",
                    header.data_size,
                    header.num_records,
                    span.end()
                ),
            )
        })?;
    span.check_block_headers(end)?;
    let (held, data) = match span.contiguous(CHUNK_HEADER_SIZE, header.data_size)? {
        Some(r) => (Held::Read(buf), r),
        None => {
            let gathered = span.gather_pieces(CHUNK_HEADER_SIZE, header.data_size)?;
            let all = 0..gathered.len();
            (Held::Gathered(gathered), all)
        }
    };
    let chunk = Chunk {
        header,
        held,
        data,
        begin,
    };
    let (bytes, at) = chunk.data();
    if hash(&bytes[at]) != header.data_hash {
        return Err(Error::corrupt(location, begin, "chunk data hash mismatch"));
    }
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_header_is_the_spec_constant() {
        let header = ChunkHeader::new(&[], SIGNATURE, 0, 0).encode();
        let mut file = BlockHeader {
            previous_chunk: 0,
            next_chunk: 64,
        }
        .encode()
        .to_vec();
        file.extend_from_slice(&header);
        assert_eq!(
            file[..32],
            [
                0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0,
                0, 0, 0, 0, 0, 0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1, 0xa9
            ]
        );
        let bytes = Bytes::from(file.clone());
        let chunk = read_chunk("mem", &bytes, 0).unwrap();
        assert_eq!(chunk.header.chunk_type, SIGNATURE);
        // The signature chunk ends at 64: one byte fewer does not hold it.
        assert!(read_chunk("mem", &Bytes::from(file[..63].to_vec()), 0).is_err());
        assert!(chunk.data().1.is_empty());
    }

    #[test]
    fn refuses_bad_positions_and_hashes() {
        let buf = Bytes::from(vec![0u8; 100]);
        assert!(matches!(
            read_chunk("m", &buf, 10),
            Err(Error::Corrupt { offset: 10, .. })
        ));
        let err = read_chunk("m", &buf, 64).unwrap_err();
        assert!(
            err.to_string().contains("chunk header hash mismatch"),
            "{err}"
        );
        let short = Bytes::from(vec![0u8; 20]);
        let err = read_chunk("m", &short, 64).unwrap_err();
        assert!(err.to_string().contains("past byte 84"), "{err}");
    }
}
