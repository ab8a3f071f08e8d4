//! Output helpers: progress bars only on a terminal, JSON documents, human sizes.

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{CliError, Result};

/// A progress bar on stderr when it is a terminal and output is not `--json`; hidden
/// otherwise. `len` of `None` gives a spinner.
pub(crate) fn progress(json: bool, len: Option<u64>, what: &str) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match len {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(COUNT_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{prefix:>12} {spinner} {pos} ({per_sec}) {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_prefix(what.to_owned());
    bar
}

/// A progress bar of input bytes on stderr (terminal only, not `--json`): with a known
/// `total` it shows bytes done of the total, rate and ETA; without one a spinner with bytes
/// and rate. The message (`{msg}`) is the caller's, e.g. a record count.
pub(crate) fn progress_bytes(json: bool, total: Option<u64>, what: &str) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(BYTES_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template(BYTES_SPINNER_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_prefix(what.to_owned());
    bar
}

/// The byte bar: total, rate and ETA.
const BYTES_TEMPLATE: &str =
    "{prefix:>10} [{wide_bar}] {bytes}/{total_bytes} ({binary_bytes_per_sec}, ETA {eta}) {msg}";
/// The byte spinner (unknown total).
const BYTES_SPINNER_TEMPLATE: &str =
    "{prefix:>10} {spinner} {bytes} ({binary_bytes_per_sec}) {msg}";
/// The count bar: total, rate and ETA.
const COUNT_TEMPLATE: &str = "{prefix:>10} [{wide_bar}] {pos}/{len} ({per_sec}, ETA {eta}) {msg}";

/// Prints `value` as one pretty JSON document on stdout.
pub(crate) fn print_json(value: &serde_json::Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)
        .map_err(|e| CliError::Output { source: e.into() })?;
    writeln!(out).map_err(|source| CliError::Output { source })
}

/// Prints a line on stdout.
pub(crate) fn line(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").map_err(|source| CliError::Output { source })
}

/// `1234567` → `"1.18 MiB"`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    #[allow(clippy::cast_precision_loss)]
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

/// Seconds with millisecond precision.
pub(crate) fn secs(d: std::time::Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    #[test]
    fn templates_parse_and_show_total_eta_and_bytes() {
        for t in [
            super::BYTES_TEMPLATE,
            super::BYTES_SPINNER_TEMPLATE,
            super::COUNT_TEMPLATE,
        ] {
            indicatif::ProgressStyle::with_template(t).unwrap();
        }
        assert!(super::BYTES_TEMPLATE.contains("{total_bytes}"));
        assert!(super::BYTES_TEMPLATE.contains("{eta}"));
        assert!(super::COUNT_TEMPLATE.contains("{len}"));
        assert!(super::COUNT_TEMPLATE.contains("{eta}"));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1023), "1023 B");
        assert_eq!(super::bytes(1536), "1.50 KiB");
        assert_eq!(super::bytes(5 << 30), "5.00 GiB");
    }
}
