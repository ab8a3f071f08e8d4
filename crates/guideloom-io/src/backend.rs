//! The backend trait: something that opens readers for locations of its own type.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;
use crate::reader::{AsyncReader, SyncReader};

/// A location type a backend opens readers for (a local path, an object-store path, a path
/// relative to an HTTP base URL). Storages build shard locations by joining names onto a
/// directory location with [`Location::child`].
pub trait Location: Clone + Debug + Send + Sync + 'static {
    /// The location of `name` inside this (directory-like) location.
    fn child(&self, name: &str) -> Self;

    /// How the location is shown in errors and logs.
    fn describe(&self) -> String;
}

impl Location for PathBuf {
    fn child(&self, name: &str) -> Self {
        self.join(name)
    }

    fn describe(&self) -> String {
        self.display().to_string()
    }
}

/// What a backend can do, as named booleans so callers and tests can branch on them.
///
/// Construct with [`Capabilities::default`] (all `false`) and set the fields that apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// [`Backend::open`] returns synchronous readers.
    pub sync: bool,
    /// [`Backend::open_async`] returns asynchronous readers.
    pub r#async: bool,
    /// `read_ranges` does better than one request per range (coalescing or multi-range).
    pub batched_ranges: bool,
    /// `read_tail` costs one request without knowing the size beforehand.
    pub suffix_reads: bool,
    /// Buffers are borrowed from the backend without copying (e.g. mmap).
    pub zero_copy: bool,
}

/// A source of readers.
///
/// A backend reports whether it works on this platform ([`is_supported`](Backend::is_supported))
/// and what it can do ([`capabilities`](Backend::capabilities)). A flavour it cannot provide is
/// answered with [`Error::Unsupported`](crate::Error::Unsupported), never a panic.
///
/// Opening a missing object fails with [`Error::NotFound`](crate::Error::NotFound). Remote
/// backends may open lazily: then `NotFound` surfaces from the reader's first operation
/// instead (the conformance kit accepts both).
#[async_trait]
pub trait Backend: Send + Sync + Debug + 'static {
    /// The location type this backend opens.
    type Location: Location;

    /// The backend's name, as used in errors (`"PreadIo"`).
    fn name(&self) -> &'static str;

    /// What this backend can do.
    fn capabilities(&self) -> Capabilities;

    /// Whether this backend works on the current platform.
    fn is_supported(&self) -> bool {
        true
    }

    /// Opens a synchronous reader.
    fn open(&self, location: &Self::Location) -> Result<Box<dyn SyncReader>>;

    /// Opens an asynchronous reader.
    async fn open_async(&self, location: &Self::Location) -> Result<Box<dyn AsyncReader>>;
}

macro_rules! forward_backend {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<B: Backend + ?Sized> Backend for $ty {
            type Location = B::Location;
            fn name(&self) -> &'static str { (**self).name() }
            fn capabilities(&self) -> Capabilities { (**self).capabilities() }
            fn is_supported(&self) -> bool { (**self).is_supported() }
            fn open(&self, location: &Self::Location) -> Result<Box<dyn SyncReader>> {
                (**self).open(location)
            }
            async fn open_async(&self, location: &Self::Location) -> Result<Box<dyn AsyncReader>> {
                (**self).open_async(location).await
            }
        }
    )*};
}
forward_backend!(Box<B>, Arc<B>);

/// Any backend for locations of type `L`, as a shareable trait object.
pub type DynBackend<L> = Arc<dyn Backend<Location = L>>;
