//! A local, read-only web viewer of a guideloom dataset root.
//!
//! - [`html`]: pure renderers (plain data in, HTML out, no IO), shared by the server and
//!   by notebooks' `_repr_html_`. Every value from the root is escaped.
//! - [`server`]: an HTTP/1.1 server (hyper) over a [`guideloom::Root`]: overview,
//!   shards with health, a paged record browser reading only the records on screen,
//!   record pages, annotation sets beside the records, benchmark charts. GET and HEAD only,
//!   a strict Content-Security-Policy on every response.
//!
//! See `docs/viewer.md`.

#![deny(missing_docs)]

pub mod bench;
mod error;
pub mod html;
pub mod server;

pub use error::{Error, Result};
