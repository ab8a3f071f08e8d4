//! Arguments of the commands that keep a root: `gc`, `tag`.

use std::time::Duration;

use clap::Args;

use super::RootArg;

/// Parses a duration: a number and a unit (`s`, `m`, `h`, `d`), e.g. `7d`, `12h`, `0s`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: give a unit (s, m, h or d), e.g. 7d"))?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{text:?}: expected a number then s, m, h or d"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => return Err(format!("{text:?}: unknown unit {other:?} (s, m, h or d)")),
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: too long"))
}

/// `guideloom gc`.
#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// Keep the newest N snapshots (at least 1: the latest is always kept).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) keep_last: u64,
    /// Also keep snapshots committed less than this long ago (e.g. 30d).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub(crate) keep_younger_than: Option<Duration>,
    /// Let snapshots that annotation sets annotate expire too (by default they are kept).
    #[arg(long)]
    pub(crate) no_keep_annotated: bool,
    /// Leave unreferenced objects younger than this alone (shards a worker has not
    /// published yet).
    #[arg(long, value_parser = parse_duration, default_value = "7d", value_name = "DURATION")]
    pub(crate) grace: Duration,
    /// List what would go and how many bytes; write and delete nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print every deleted key (the default prints counts per kind).
    #[arg(long)]
    pub(crate) list: bool,
}

/// `guideloom tag`.
#[derive(Debug, Args)]
pub(crate) struct TagArgs {
    #[command(flatten)]
    pub(crate) root: RootArg,
    /// The tag (default: list every tag).
    pub(crate) name: Option<String>,
    /// The snapshot id (or tag) it is to name.
    pub(crate) snapshot: Option<String>,
    /// Remove the tag NAME.
    #[arg(long, conflicts_with = "snapshot")]
    pub(crate) delete: bool,
}

impl TagArgs {
    /// With `--root R`, the first positional is the NAME.
    pub(crate) fn resolve(&mut self) -> Result<(), String> {
        if self.root.flag.is_some() && self.root.pos.is_some() && self.root.pos != self.root.flag {
            self.snapshot = self.name.take();
            self.name = self.root.pos.take();
        }
        if self.delete && self.name.is_none() {
            return Err("--delete removes a tag: give its NAME".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_with_units_and_refuse_the_rest() {
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "7", "d", "7w", "-1d", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
