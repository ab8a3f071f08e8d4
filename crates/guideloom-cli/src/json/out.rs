//! Where JSON text goes: whole into a `Vec<u8>`, in bounded chunks to a writer
//! ([`Stream`]), or nowhere ([`Discard`], to check a record before printing any of it).
//!
//! The emitter writes through [`Out`] whatever the destination, so the text is the same
//! byte for byte; only the memory differs: a `Vec` holds the whole text, a [`Stream`] at
//! most [`STREAM_CHUNK`] bytes of it.

use std::io::{self, Write};

/// Bytes a [`Stream`] gathers before it writes them.
pub const STREAM_CHUNK: usize = 64 << 10;

/// A destination of JSON text. Infallible to the emitter: a [`Stream`] keeps the first
/// write error and reports it at [`Stream::finish`].
pub trait Out {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Appends one byte.
    fn put_byte(&mut self, byte: u8) {
        self.put(&[byte]);
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn put_byte(&mut self, byte: u8) {
        self.push(byte);
    }
}

/// Drops the text: the emitter runs for its checks only.
#[derive(Debug, Default)]
pub struct Discard;

impl Out for Discard {
    fn put(&mut self, _: &[u8]) {}
}

/// Writes the text to `W` in chunks of at most [`STREAM_CHUNK`] bytes (longer pieces are
/// written as they come). After a write error nothing more is written; the error is
/// returned by [`finish`](Stream::finish).
#[derive(Debug)]
pub struct Stream<W: Write> {
    out: W,
    buf: Vec<u8>,
    chunk: usize,
    error: Option<io::Error>,
}

impl<W: Write> Stream<W> {
    /// A stream into `out` with chunks of [`STREAM_CHUNK`] bytes.
    pub fn new(out: W) -> Self {
        Self::with_chunk(out, STREAM_CHUNK)
    }

    /// A stream into `out` with chunks of `chunk` bytes (at least 1).
    pub fn with_chunk(out: W, chunk: usize) -> Self {
        let chunk = chunk.max(1);
        Stream {
            out,
            buf: Vec::with_capacity(chunk),
            chunk,
            error: None,
        }
    }

    /// Whether a write failed (what follows is dropped).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    fn drain(&mut self) {
        if self.error.is_none()
            && !self.buf.is_empty()
            && let Err(e) = self.out.write_all(&self.buf)
        {
            self.error = Some(e);
        }
        self.buf.clear();
    }

    /// Writes what is gathered and returns the writer, or the first write error.
    pub fn finish(mut self) -> io::Result<W> {
        self.drain();
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(self.out),
        }
    }
}

impl<W: Write> Out for Stream<W> {
    fn put(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.buf.len() + bytes.len() > self.chunk {
            self.drain();
            if bytes.len() >= self.chunk {
                if let Err(e) = self.out.write_all(bytes) {
                    self.error = Some(e);
                }
                return;
            }
        }
        self.buf.extend_from_slice(bytes);
    }
}

/// An [`Out`] as an [`io::Write`] (for serde_json's string escaping); never fails.
pub(crate) struct Writer<'o, O: Out + ?Sized>(pub(crate) &'o mut O);

impl<O: Out + ?Sized> Write for Writer<'_, O> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.put(buf);
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.put(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that records the size of every write.
    #[derive(Default)]
    struct Sizes(Vec<usize>, Vec<u8>);

    impl Write for Sizes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.len());
            self.1.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stream_writes_bounded_chunks_in_order() {
        let mut s = Stream::with_chunk(Sizes::default(), 4);
        s.put(b"ab");
        s.put_byte(b'c');
        s.put(b"de");
        s.put(b"fghijk");
        s.put(b"l");
        let w = s.finish().unwrap();
        assert_eq!(w.1, b"abcdefghijkl");
        assert_eq!(
            w.0,
            [3, 2, 6, 1],
            "gathered up to 4, longer pieces as they come"
        );
    }

    #[test]
    fn a_stream_keeps_the_first_error_and_stops() {
        #[derive(Debug)]
        struct Fails(usize);
        impl Write for Fails {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                self.0 += 1;
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut s = Stream::with_chunk(Fails(0), 2);
        s.put(b"abc");
        assert!(s.failed());
        s.put(b"def");
        s.put(b"g");
        let e = s.finish().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
