//! Fixed-width stream elements and [`Elements`], a typed view over read bytes.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use bytes::Bytes;

mod sealed {
    pub trait Sealed {}
}

/// A fixed-width stream element: `u8 u16 u32 u64 i32 i64 f32 f64`, stored little-endian.
///
/// Sealed: the element names are part of the file format.
pub trait Element:
    sealed::Sealed + bytemuck::Pod + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// The name stored in shard metadata (`"u32"`).
    const NAME: &'static str;
    /// Width in bytes.
    const WIDTH: u64;

    /// Appends the little-endian encoding of `elements` to `out`.
    fn extend_le(elements: &[Self], out: &mut Vec<u8>);

    /// Decodes one element from exactly [`WIDTH`](Element::WIDTH) little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($($t:ty => $name:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = $name;
            const WIDTH: u64 = std::mem::size_of::<$t>() as u64;

            fn extend_le(elements: &[Self], out: &mut Vec<u8>) {
                if cfg!(target_endian = "little") {
                    out.extend_from_slice(bytemuck::cast_slice(elements));
                } else {
                    out.reserve(std::mem::size_of_val(elements));
                    for e in elements {
                        out.extend_from_slice(&e.to_le_bytes());
                    }
                }
            }

            fn from_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}
element!(u8 => "u8", u16 => "u16", u32 => "u32", u64 => "u64",
         i32 => "i32", i64 => "i64", f32 => "f32", f64 => "f64");

/// The element types of the format, by name, with their widths in bytes: a stream shard
/// whose metadata names anything else is refused when opened.
pub const ELEMENT_TYPES: [(&str, u64); 8] = [
    ("u8", 1),
    ("u16", 2),
    ("u32", 4),
    ("u64", 8),
    ("i32", 4),
    ("i64", 8),
    ("f32", 4),
    ("f64", 8),
];

/// The width in bytes of the element type `name`, or `None` if the format has no such type.
///
/// ```
/// assert_eq!(guideloom_format::element_width("u32"), Some(4));
/// assert_eq!(guideloom_format::element_width("u128"), None);
/// ```
pub fn element_width(name: &str) -> Option<u64> {
    ELEMENT_TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, w)| *w)
}

/// Owner of a decoded, correctly aligned copy (see [`Elements`]).
struct Aligned<E>(Vec<E>);

impl<E: Element> AsRef<[u8]> for Aligned<E> {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// Elements read from a stream: a `&[E]` through [`Deref`].
///
/// When the bytes read are suitably aligned in memory (always for mmap-backed reads of one
/// shard, since the format keeps elements aligned in the file) and the machine is
/// little-endian, this is a zero-copy view of the read buffer; otherwise the elements are
/// decoded once into an aligned buffer. [`is_view`](Elements::is_view) tells which.
#[derive(Clone)]
pub struct Elements<E> {
    bytes: Bytes,
    view: bool,
    _element: PhantomData<fn() -> E>,
}

impl<E: Element> Elements<E> {
    /// Wraps little-endian element bytes (a stream's data as read; trailing bytes short of a
    /// whole element are ignored): zero-copy when aligned on a little-endian machine.
    ///
    /// ```
    /// use guideloom_format::Elements;
    ///
    /// let e = Elements::<u16>::from_le_bytes(bytes::Bytes::from_static(&[1, 0, 2, 1]));
    /// assert_eq!(&*e, &[1, 258]);
    /// ```
    pub fn from_le_bytes(bytes: Bytes) -> Self {
        let width = usize::try_from(E::WIDTH).unwrap_or(1);
        let bytes = bytes.slice(..bytes.len() - bytes.len() % width);
        let aligned = (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<E>());
        if bytes.is_empty() || (aligned && cfg!(target_endian = "little")) {
            return Elements {
                bytes,
                view: true,
                _element: PhantomData,
            };
        }
        let decoded: Vec<E> = bytes.chunks_exact(width).map(E::from_le).collect();
        Elements {
            bytes: Bytes::from_owner(Aligned(decoded)),
            view: false,
            _element: PhantomData,
        }
    }

    /// Concatenates pieces of little-endian element bytes (a slice spanning shards): one
    /// piece is wrapped as [`from_le_bytes`](Self::from_le_bytes) does, more are decoded
    /// once into one buffer.
    pub fn concat(pieces: Vec<Bytes>) -> Self {
        if pieces.len() <= 1 {
            let mut pieces = pieces;
            return Self::from_le_bytes(pieces.pop().unwrap_or_default());
        }
        let total: usize = pieces.iter().map(Bytes::len).sum();
        let width = usize::try_from(E::WIDTH).unwrap_or(1);
        let mut out: Vec<E> = Vec::with_capacity(total / width);
        for p in &pieces {
            out.extend(p.chunks_exact(width).map(E::from_le));
        }
        Elements {
            bytes: Bytes::from_owner(Aligned(out)),
            view: false,
            _element: PhantomData,
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[E] {
        if self.bytes.is_empty() {
            return &[];
        }
        bytemuck::try_cast_slice(&self.bytes).unwrap_or(&[])
    }

    /// `true` when this is a zero-copy view of the buffer returned by the backend.
    pub fn is_view(&self) -> bool {
        self.view
    }

    /// The underlying buffer (native-endian element bytes).
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }
}

impl<E: Element> Deref for Elements<E> {
    type Target = [E];
    fn deref(&self) -> &[E] {
        self.as_slice()
    }
}

impl<E: Element> fmt::Debug for Elements<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Elements")
            .field("element", &E::NAME)
            .field("len", &self.as_slice().len())
            .field("view", &self.view)
            .finish()
    }
}

impl<E: Element> PartialEq<[E]> for Elements<E> {
    fn eq(&self, other: &[E]) -> bool {
        self.as_slice() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_is_view_misaligned_is_copied() {
        let mut raw = Vec::new();
        u32::extend_le(&[1, 2, 3], &mut raw);
        let mut padded = vec![0u8];
        padded.extend_from_slice(&raw);
        let padded = Bytes::from(padded);
        // One of these two is 4-aligned at most; check both give the right values.
        for b in [Bytes::from(raw.clone()), padded.slice(1..)] {
            let e = Elements::<u32>::from_le_bytes(b.clone());
            assert_eq!(e.as_slice(), &[1, 2, 3]);
            assert_eq!(e.is_view(), (b.as_ptr() as usize).is_multiple_of(4));
        }
        assert!(Elements::<f64>::from_le_bytes(Bytes::new()).is_empty());
    }

    #[test]
    fn concat_pieces() {
        let mut a = Vec::new();
        i64::extend_le(&[-1, 2], &mut a);
        let mut b = Vec::new();
        i64::extend_le(&[3], &mut b);
        let e = Elements::<i64>::concat(vec![a.into(), b.into()]);
        assert_eq!(e.as_slice(), &[-1, 2, 3]);
    }
}
