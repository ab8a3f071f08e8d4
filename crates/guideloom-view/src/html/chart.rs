//! Benchmark results as inline SVG bar charts (attributes only: no `style`, so the page's
//! Content-Security-Policy holds).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape::escape;

/// One benchmark result: its group, its name within the group and its median time.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BenchResult {
    /// The group (criterion's group id, e.g. `io/random_4KiB`).
    pub group: String,
    /// The bench within its group (criterion's function id, e.g. `pread_sync`).
    pub bench: String,
    /// Median time per iteration, in nanoseconds.
    pub median_ns: f64,
}

const WIDTH: u32 = 720;
const LABEL: u32 = 230;
const BAR: u32 = 18;
const GAP: u32 = 6;

/// Human time of `ns` nanoseconds (`812 ns`, `4.20 µs`, `1.50 ms`, `2.00 s`).
fn time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// One `<figure>` with an SVG bar chart per group of `results` (groups sorted by name, bars
/// in the given order); bar length is the median time relative to the group's slowest.
///
/// ```
/// use guideloom_view::html::{BenchResult, render_bench_charts};
/// let svg = render_bench_charts(&[BenchResult {
///     group: "io/<4KiB>".into(), bench: "pread".into(), median_ns: 1500.0 }]);
/// assert!(svg.contains("<svg") && svg.contains("io/&lt;4KiB&gt;") && svg.contains("1.50 µs"));
/// ```
pub fn render_bench_charts(results: &[BenchResult]) -> String {
    let mut groups: BTreeMap<&str, Vec<&BenchResult>> = BTreeMap::new();
    for r in results {
        groups.entry(&r.group).or_default().push(r);
    }
    let mut html = String::new();
    for (group, bars) in groups {
        let max = bars
            .iter()
            .map(|b| b.median_ns)
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max);
        let height = u32::try_from(bars.len()).unwrap_or(u32::MAX / 32) * (BAR + GAP) + GAP;
        let _ = write!(
            html,
            "<figure class=\"bench\"><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" \
             width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" \
             aria-label=\"{}\">",
            escape(group),
            escape(group)
        );
        for (i, b) in bars.iter().enumerate() {
            let y = u32::try_from(i).unwrap_or(0) * (BAR + GAP) + GAP;
            let span = f64::from(WIDTH - LABEL - 90);
            let w = if max > 0.0 && b.median_ns.is_finite() && b.median_ns > 0.0 {
                (b.median_ns / max * span).max(1.0)
            } else {
                0.0
            };
            let fill = if b.bench.starts_with("ceiling") {
                "#8c8c8c"
            } else {
                "#3b6ea8"
            };
            let _ = write!(
                html,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12\">{}</text>\
                 <rect x=\"{LABEL}\" y=\"{y}\" width=\"{w:.1}\" height=\"{BAR}\" fill=\"{fill}\">\
                 <title>{}: {}</title></rect>\
                 <text x=\"{:.1}\" y=\"{}\" font-size=\"12\">{}</text>",
                LABEL - 6,
                y + BAR - 5,
                escape(&b.bench),
                escape(&b.bench),
                time(b.median_ns),
                f64::from(LABEL) + w + 4.0,
                y + BAR - 5,
                time(b.median_ns),
            );
        }
        html.push_str("</svg></figure>");
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_slowest_and_names_are_escaped() {
        let r = |bench: &str, ns| BenchResult {
            group: "g".into(),
            bench: bench.into(),
            median_ns: ns,
        };
        let svg = render_bench_charts(&[r("a\"<x>", 100.0), r("ceiling_pread", 50.0)]);
        assert!(svg.contains("a&quot;&lt;x&gt;"));
        assert!(svg.contains(&format!("width=\"{:.1}\"", f64::from(WIDTH - LABEL - 90))));
        assert!(svg.contains("#8c8c8c"));
        assert!(!svg.contains("style"));
        assert_eq!(time(4_200.0), "4.20 µs");
    }
}
