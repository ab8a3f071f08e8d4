//! The version a remote reader pins: the entity tag of its first response. Every later
//! request of the reader sends it as `If-Match`, and every later response must carry it, so
//! a reader serves bytes of one version of an object and an object replaced behind it is
//! [`Error::Changed`] at the first read after the swap, with no extra request.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The tag without HTTP's surrounding quotes (`"abc"` → `abc`).
pub(crate) fn bare(etag: &str) -> &str {
    etag.strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or(etag)
}

/// The entity tag a reader pinned (unset until a response carried a strong one).
#[derive(Debug, Default)]
pub(crate) struct Pin {
    etag: OnceLock<String>,
}

impl Pin {
    /// The pinned entity tag, as the store sent it.
    pub(crate) fn get(&self) -> Option<&str> {
        self.etag.get().map(String::as_str)
    }

    /// Records the entity tag `seen` on a response for `location`: the first strong one is
    /// pinned; a later one must equal it (compared without quotes), else [`Error::Changed`].
    /// A response without an entity tag, or with a weak one (`W/"..."`, which `If-Match`
    /// never matches), tells nothing and pins nothing.
    pub(crate) fn observe(&self, location: &str, seen: Option<&str>) -> Result<()> {
        let Some(seen) = seen.filter(|e| !e.is_empty() && !e.starts_with("W/")) else {
            return Ok(());
        };
        let pinned = self.etag.get_or_init(|| seen.to_owned());
        if bare(pinned) == bare(seen) {
            return Ok(());
        }
        Err(Error::Changed {
            location: location.to_owned(),
            pinned: pinned.clone(),
            found: Some(seen.into()),
        })
    }

    /// The error for a request whose `If-Match` with the pinned tag was refused (412).
    pub(crate) fn refused(&self, location: &str) -> Error {
        Error::Changed {
            location: location.to_owned(),
            pinned: self.get().unwrap_or_default().to_owned(),
            found: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_strong_tag_pins_and_later_ones_must_match() {
        let pin = Pin::default();
        pin.observe("x", None).unwrap();
        pin.observe("x", Some("W/\"weak\"")).unwrap();
        assert_eq!(pin.get(), None);
        pin.observe("x", Some("\"abc\"")).unwrap();
        pin.observe("x", Some("abc")).unwrap();
        pin.observe("x", None).unwrap();
        let err = pin.observe("x", Some("\"def\"")).unwrap_err();
        assert!(
            matches!(&err, Error::Changed { location, pinned, found: Some(found) }
                if location == "x" && pinned == "\"abc\"" && &**found == "\"def\""),
            "{err}"
        );
        assert!(err.is_changed() && !err.is_retryable());
        let refused = pin.refused("x").to_string();
        assert!(
            refused.contains("\"abc\"") && refused.contains("412"),
            "{refused}"
        );
    }
}
