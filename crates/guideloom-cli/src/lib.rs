//! The library half of the `guideloom` command-line tool: the modules its fuzz targets
//! (`fuzz/` in the repository) link. **Not an API**: everything here is `doc(hidden)`,
//! outside semver and may change with any release; depend on the `guideloom` facade
//! instead. The tool itself is the binary of this package (`src/main.rs`).

#[doc(hidden)]
pub mod grow;
#[doc(hidden)]
pub mod json;
