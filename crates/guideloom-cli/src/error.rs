//! The CLI's one error type. Every variant names the object, path, line or argument at
//! fault; `main` prints it (with its sources) on one line and exits with the status the
//! error's kind has in [`exit_status`], the command line's one error table.

use std::path::PathBuf;

use guideloom_io::ErrorKind;

/// `Result` with [`CliError`].
pub(crate) type Result<T, E = CliError> = std::result::Result<T, E>;

/// The CLI's cargo features that decide which roots it can open (see its Cargo.toml).
const CLI_FEATURES: [&str; 5] = ["aws-profile", "s3", "http", "gcs", "azure"];

/// Those of [`CLI_FEATURES`] in the package's `default` feature (its Cargo.toml, which a test
/// holds to this list): a binary without one of them was built with `--no-default-features`,
/// and the plain install command builds one with it.
const DEFAULT_FEATURES: [&str; 4] = ["s3", "gcs", "azure", "http"];

/// The exit status of a failure of kind `kind`: with `--json`'s `kind` (the kind's own name),
/// the command line's one error table (docs/cli.md, "Error kinds", which a test holds to it).
/// Every kind exits 1, as documented: scripts tell the kinds apart by `--json`'s `kind`, and
/// 2 stays clap's usage error. A kind that should exit otherwise gets its own arm here.
pub(crate) const fn exit_status(_kind: ErrorKind) -> u8 {
    1
}

/// Everything a command can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The dataset root (publication layer) failed; its error names the object.
    #[error("{root}: {source}")]
    Root {
        /// The root as given on the command line.
        root: String,
        /// The publication layer's error.
        #[source]
        source: Box<guideloom_publish::Error>,
    },
    /// Reading through the facade's dataset failed in a way the other variants do not cover.
    #[error("{root}: {source}")]
    Dataset {
        /// The root.
        root: String,
        /// The facade's error.
        #[source]
        source: Box<guideloom::Error>,
    },
    /// Reading a shard failed (corrupt, truncated, wrong format).
    #[error("{root}: shard {key}: {source}")]
    Shard {
        /// The root.
        root: String,
        /// The shard's key inside the root.
        key: String,
        /// The format layer's error.
        #[source]
        source: Box<guideloom_format::Error>,
    },
    /// Reading or writing a local shard file failed (`convert`).
    #[error("{}: {source}", path.display())]
    ShardFile {
        /// The shard file.
        path: PathBuf,
        /// The format layer's error.
        #[source]
        source: Box<guideloom_format::Error>,
    },
    /// Reading or writing an ArrayRecord file failed (`convert`).
    #[error("{}: {source}", path.display())]
    ArrayRecord {
        /// The ArrayRecord file.
        path: PathBuf,
        /// The ArrayRecord layer's error.
        #[source]
        source: Box<guideloom_arrayrecord::Error>,
    },
    /// Reading bytes through an IO backend failed.
    #[error("{location}: {source}")]
    Io {
        /// What was read.
        location: String,
        /// The IO layer's error.
        #[source]
        source: Box<guideloom_io::Error>,
    },
    /// A local file operation failed.
    #[error("{}: {source}", path.display())]
    File {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line of an input file is not what it must be.
    #[error("{}:{line}: {what}", path.display())]
    Input {
        /// The input file (`-` for standard input).
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        what: String,
    },
    /// An argument is invalid (bad root, bad index, no shards to publish, ...).
    #[error("{argument}: {what}")]
    Argument {
        /// The argument or option at fault.
        argument: String,
        /// What is wrong.
        what: String,
    },
    /// A record does not decode into JSON.
    #[error("{root}: record {index} (shard {key}): {what}")]
    Record {
        /// The root.
        root: String,
        /// Global record index.
        index: u64,
        /// The shard holding it.
        key: String,
        /// What is wrong.
        what: String,
    },
    /// A `write` failed part way: its shards are left without a completion marker, so no
    /// `publish` takes them unasked.
    #[error(
        "{source}; work id {work_id} is incomplete ({shards} shard(s) written, not marked \
         complete, so publish skips them): fix the input and re-run the same write to resume, \
         or write under a new work id"
    )]
    Incomplete {
        /// The work id.
        work_id: String,
        /// Shards written before the failure.
        shards: usize,
        /// What failed.
        #[source]
        source: Box<CliError>,
    },
    /// `verify` found problems (each already printed on its own line).
    #[error("{root}: verification found {count} problem(s)")]
    Unsound {
        /// The root.
        root: String,
        /// How many problems.
        count: usize,
    },
    /// The output could not be written.
    #[error("writing output: {source}")]
    Output {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `serve`: the viewer could not listen, or its `--bench` results could not be read.
    #[error("{source}")]
    View {
        /// The viewer's error.
        #[source]
        source: guideloom_view::Error,
    },
}

impl CliError {
    pub(crate) fn root(root: &str, source: guideloom_publish::Error) -> Self {
        CliError::Root {
            root: root.to_owned(),
            source: Box::new(source),
        }
    }

    pub(crate) fn shard(root: &str, key: &str, source: guideloom_format::Error) -> Self {
        CliError::Shard {
            root: root.to_owned(),
            key: key.to_owned(),
            source: Box::new(source),
        }
    }

    pub(crate) fn io(location: impl Into<String>, source: guideloom_io::Error) -> Self {
        CliError::Io {
            location: location.into(),
            source: Box::new(source),
        }
    }

    pub(crate) fn file(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CliError::File {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn argument(argument: impl Into<String>, what: impl Into<String>) -> Self {
        CliError::Argument {
            argument: argument.into(),
            what: what.into(),
        }
    }

    /// For a root this binary cannot open because a cargo feature was left out of its build
    /// (`s3`, `http`, `aws-profile`, `gcs`, `azure`): the command that builds one that can.
    /// A default feature is missing only from a `--no-default-features` build: the plain
    /// install (the default features) has it; `aws-profile` takes `--features`.
    pub(crate) fn feature_hint(&self) -> Option<String> {
        if self.kind() != ErrorKind::Unsupported {
            return None;
        }
        let line = self.one_line();
        let feature = CLI_FEATURES
            .iter()
            .find(|f| line.contains(&format!("feature `{f}`")))?;
        Some(install_hint(feature))
    }

    /// A broken pipe on standard output (e.g. `guideloom cat ROOT | head`) is not a failure.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Output { source } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// What went wrong, in one word: the kind of the library error beneath (the wrappers
    /// here only say where, so they take their source's kind; see [`ErrorKind`]), or of the
    /// command's own failure (a bad argument or input line, a record JSON cannot carry, a
    /// `verify` that found problems).
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            CliError::Root { source, .. } => source.kind(),
            CliError::Dataset { source, .. } => source.kind(),
            CliError::Shard { source, .. } | CliError::ShardFile { source, .. } => source.kind(),
            CliError::ArrayRecord { source, .. } => source.kind(),
            CliError::Io { source, .. } => source.kind(),
            CliError::File { source, .. } | CliError::Output { source } => source.kind().into(),
            CliError::Input { .. } | CliError::Argument { .. } => ErrorKind::InvalidArgument,
            CliError::Record { .. } => ErrorKind::Encode,
            CliError::Incomplete { source, .. } => source.kind(),
            CliError::Unsound { .. } => ErrorKind::VerificationFailed,
            CliError::View { source } => source.kind(),
        }
    }

    /// The error as the JSON document `--json` prints: `{"error": {"kind", "cause",
    /// "message"}}`, `kind` the [`ErrorKind`]'s name and `cause`, when the chain tells why a
    /// remote request failed ([`guideloom_io::cause_of`]), the cause's name (else absent).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut error = serde_json::json!({
            "kind": self.kind().name(),
            "message": self.one_line(),
        });
        if let Some(cause) = guideloom_io::cause_of(self) {
            error["cause"] = cause.kind.name().into();
        }
        serde_json::json!({ "error": error })
    }

    /// One line: the message and its sources that add something, joined by `": "`. Every
    /// name once: a root, path, key or location is left out of a context that the message
    /// beneath already names (the IO and format layers name what they read by its full
    /// location). When the chain tells why a remote request failed ([`guideloom_io::cause_of`])
    /// that cause leads, so the line reads `<cause>: <what>: <details>`; the transport's raw
    /// text (URL, timing, the server's XML) is left to the remote error's short form.
    pub(crate) fn one_line(&self) -> String {
        let own = |subject: &str, source: &dyn std::error::Error| {
            let text = source.to_string();
            if guideloom_io::mentions(&text, subject) {
                text
            } else {
                format!("{subject}: {text}")
            }
        };
        let mut line = match self {
            CliError::Root { root, source } => own(root, &**source),
            CliError::Dataset { root, source } => own(root, &**source),
            CliError::Shard { root, key, source } => {
                let text = source.to_string();
                let text = if guideloom_io::mentions(&text, key) {
                    text
                } else {
                    format!("shard {key}: {text}")
                };
                if guideloom_io::mentions(&text, root) {
                    text
                } else {
                    format!("{root}: {text}")
                }
            }
            CliError::ShardFile { path, source } => own(&path.display().to_string(), &**source),
            CliError::ArrayRecord { path, source } => own(&path.display().to_string(), &**source),
            CliError::Io { location, source } => own(location, &**source),
            _ => self.to_string(),
        };
        // The top-level variants already print their direct source; add deeper causes, down
        // to an error that renders the rest of its chain itself.
        let mut outer = std::error::Error::source(self);
        while let Some(o) = outer {
            if renders_its_chain(o) {
                break;
            }
            let Some(s) = o.source() else { break };
            let text = s.to_string();
            if !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            outer = Some(s);
        }
        // The cause first: `bucket does not exist (NoSuchBucket): s3://bkt/data: get ...`.
        if let Some(cause) = guideloom_io::cause_of(self) {
            let words = format!("{cause}: ");
            if let Some(at) = line.find(&words).filter(|&at| at > 0) {
                line = format!("{words}{}{}", &line[..at], &line[at + words.len()..]);
            }
        }
        line.replace('\n', " ")
    }
}

/// Whether `e`'s text already says what its sources would: a remote failure's text holds
/// its cause and the failed request in short ([`guideloom_io::brief`]); the transport's own
/// text beneath (URL, timing, the server's raw XML) would only repeat it at length. The
/// transparent wrappers of an IO error (format, arrayrecord, facade) pass its sources on as
/// their own, so they are looked through.
fn renders_its_chain(e: &(dyn std::error::Error + 'static)) -> bool {
    use guideloom_io::Error as IoError;
    use guideloom_publish::Error as P;
    let io = |e: &IoError| matches!(e, IoError::Remote { .. } | IoError::NotFound { .. });
    if let Some(e) = find::<IoError>(e) {
        return io(e);
    }
    if let Some(guideloom_format::Error::Io(e)) = find::<guideloom_format::Error>(e) {
        return io(e);
    }
    if let Some(guideloom_arrayrecord::Error::Io { source }) =
        find::<guideloom_arrayrecord::Error>(e)
    {
        return io(source);
    }
    match find::<guideloom::Error>(e) {
        Some(
            guideloom::Error::Io(e) | guideloom::Error::Format(guideloom_format::Error::Io(e)),
        ) => io(e),
        Some(guideloom::Error::Publish(p)) => matches!(p, P::Storage { .. }),
        _ => matches!(find::<P>(e), Some(P::Storage { .. })),
    }
}

/// `e` as a `T`, whether the chain holds it directly or boxed (a `#[source] Box<T>` field is
/// seen as a `Box<T>`).
fn find<'a, T: std::error::Error + 'static>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    e.downcast_ref::<T>()
        .or_else(|| e.downcast_ref::<Box<T>>().map(|b| &**b))
}

/// The end of the error line of a root that needs `feature`: how to build a binary with it.
fn install_hint(feature: &str) -> String {
    if DEFAULT_FEATURES.contains(&feature) {
        "this guideloom binary was built without it (--no-default-features); the default \
         build has it (in a guideloom checkout): cargo install --path crates/guideloom-cli"
            .to_owned()
    } else {
        format!(
            "this guideloom binary lacks it too; build one with it (in a guideloom checkout): \
             cargo install --path crates/guideloom-cli --features {feature}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`DEFAULT_FEATURES`] is the package's `default` feature, in any order: the hint of a
    /// missing default feature says the plain install has it, so the two must not drift.
    #[test]
    fn the_default_features_are_the_manifests() {
        let manifest = include_str!("../Cargo.toml");
        let line = manifest
            .lines()
            .find(|l| l.starts_with("default = ["))
            .expect("Cargo.toml has a default feature");
        let mut listed: Vec<&str> = line
            .trim_start_matches("default = [")
            .trim_end_matches(']')
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .filter(|f| !f.is_empty())
            .collect();
        listed.sort_unstable();
        let mut ours = DEFAULT_FEATURES.to_vec();
        ours.sort_unstable();
        assert_eq!(listed, ours, "{line}");
        assert!(DEFAULT_FEATURES.iter().all(|f| CLI_FEATURES.contains(f)));
    }

    #[test]
    fn a_missing_default_feature_points_at_the_plain_install() {
        for f in DEFAULT_FEATURES {
            let hint = install_hint(f);
            assert!(
                hint.ends_with("cargo install --path crates/guideloom-cli"),
                "{f}: {hint}"
            );
            assert!(hint.contains("--no-default-features"), "{f}: {hint}");
        }
        let hint = install_hint("aws-profile");
        assert!(
            hint.ends_with("cargo install --path crates/guideloom-cli --features aws-profile"),
            "{hint}"
        );
    }

    /// docs/cli.md's kind table (the rows after `<!-- kind table -->`): one row per kind, in
    /// `ErrorKind::ALL`'s order, with the exit status [`exit_status`] gives it.
    #[test]
    fn exit_statuses_follow_the_documented_table() {
        let docs = include_str!("../../../docs/cli.md");
        let table = docs
            .split("<!-- kind table -->")
            .nth(1)
            .expect("docs/cli.md has the kind table");
        let rows: Vec<(String, u8)> = table
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|line| {
                let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
                let kind = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
                Some((kind.to_owned(), cells.get(1)?.parse().ok()?))
            })
            .collect();
        let documented: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        let all: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(documented, all);
        for ((_, status), kind) in rows.iter().zip(ErrorKind::ALL) {
            assert_eq!(*status, exit_status(kind), "{kind}");
            // Never clap's usage status, never success.
            assert!(!matches!(exit_status(kind), 0 | 2), "{kind}");
        }
    }

    /// The command's own failures have their kinds; the wrappers take their source's.
    #[test]
    fn every_variant_has_its_kind() {
        let io = |kind: std::io::ErrorKind| std::io::Error::from(kind);
        let corrupt = guideloom_format::Error::Corrupt {
            shard: "s".into(),
            what: guideloom_format::Corruption::FooterChecksum,
        };
        let cases = [
            (
                CliError::root(
                    "r",
                    guideloom_publish::Error::NotFound { key: "log/".into() },
                ),
                ErrorKind::NotFound,
            ),
            (
                CliError::Dataset {
                    root: "r".into(),
                    source: Box::new(guideloom::Error::Publish(
                        guideloom_publish::Error::OutOfRange {
                            index: 9,
                            len: 1,
                            what: "snapshot s1".into(),
                        },
                    )),
                },
                ErrorKind::OutOfRange,
            ),
            (CliError::shard("r", "s", corrupt), ErrorKind::Corrupt),
            (
                CliError::ArrayRecord {
                    path: "a".into(),
                    source: Box::new(guideloom_arrayrecord::Error::Unsupported {
                        location: "a".into(),
                        offset: 0,
                        what: "transposed".into(),
                    }),
                },
                ErrorKind::Unsupported,
            ),
            (
                CliError::io(
                    "f",
                    guideloom_io::Error::Closed {
                        location: "f".into(),
                    },
                ),
                ErrorKind::Io,
            ),
            (
                CliError::file("f", io(std::io::ErrorKind::NotFound)),
                ErrorKind::NotFound,
            ),
            (
                CliError::Input {
                    path: "in.jsonl".into(),
                    line: 3,
                    what: "not JSON".into(),
                },
                ErrorKind::InvalidArgument,
            ),
            (CliError::argument("--x", "bad"), ErrorKind::InvalidArgument),
            (
                CliError::Record {
                    root: "r".into(),
                    index: 1,
                    key: "s".into(),
                    what: "NaN".into(),
                },
                ErrorKind::Encode,
            ),
            (
                CliError::Incomplete {
                    work_id: "w".into(),
                    shards: 1,
                    source: Box::new(CliError::file("f", io(std::io::ErrorKind::StorageFull))),
                },
                ErrorKind::DiskFull,
            ),
            (
                CliError::Unsound {
                    root: "r".into(),
                    count: 2,
                },
                ErrorKind::VerificationFailed,
            ),
            (
                CliError::Output {
                    source: io(std::io::ErrorKind::Other),
                },
                ErrorKind::Io,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
            let doc = error.to_json();
            assert_eq!(doc["error"]["kind"], kind.name(), "{doc}");
            assert!(doc["error"].get("cause").is_none(), "{doc}");
        }
    }
}
