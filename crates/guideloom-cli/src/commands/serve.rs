//! `guideloom serve`: the read-only web viewer of a root (crate `guideloom-view`).
//!
//! The root is opened as every other command opens it (`root::open`: the same S3, HTTP and
//! mount options), its identity and the chosen snapshot are read once so that a wrong root
//! fails here on one line rather than in the browser, then the viewer listens and the first
//! line on stdout is `listening on http://ADDR/`. Ctrl-C or SIGTERM stops it.

use guideloom_view::server::{Viewer, ViewerOptions, shutdown_signal};

use crate::cli::{Global, ServeArgs};
use crate::error::{CliError, Result};
use crate::output;
use crate::root;

/// Runs `guideloom serve`.
pub(crate) async fn run(args: ServeArgs, global: &Global) -> Result<()> {
    let root = root::open(args.root.name(), global, true)?;
    root.root.identity().await.map_err(|e| root.err(e))?;
    root.snapshot(args.snapshot.as_deref()).await?;
    let bench = match &args.bench {
        Some(path) => {
            let results =
                guideloom_view::bench::load(path).map_err(|source| CliError::View { source })?;
            Some((path.display().to_string(), results))
        }
        None => None,
    };
    let viewer = Viewer::new(
        root.root.clone(),
        shown_name(&root.name),
        ViewerOptions {
            snapshot: args.snapshot.clone(),
            bench,
            ..ViewerOptions::default()
        },
    );
    let bound = viewer
        .bind(args.address())
        .await
        .map_err(|source| CliError::View { source })?;
    output::line(&format!("listening on http://{}/", bound.local_addr()))?;
    bound
        .serve(shutdown_signal())
        .await
        .map_err(|source| CliError::View { source })
}

/// The root as the pages name it: without userinfo (HTTP Basic credentials) or a query
/// string (signed tokens), which the viewer never shows.
fn shown_name(arg: &str) -> String {
    let Some((scheme, rest)) = arg.split_once("://") else {
        return arg.to_owned();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_and_tokens_are_not_shown() {
        use super::shown_name;
        assert_eq!(shown_name("./r"), "./r");
        assert_eq!(shown_name("https://u:p@h:8/d/r?sig=x"), "https://h:8/d/r");
        assert_eq!(shown_name("s3://bucket/p"), "s3://bucket/p");
    }
}
