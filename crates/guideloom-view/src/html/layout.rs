//! The page shell every page shares, the error page, and small formatting helpers.

use super::escape::escape;

/// A whole page: `title` (escaped here) and `body` (HTML), with the navigation, the
/// stylesheet and the script as separate files (no inline script or style).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · guideloom</title><link rel=\"stylesheet\" href=\"/static/app.css\">\
         <script src=\"/static/app.js\" defer></script></head><body>\
         <header><nav><a href=\"/\">overview</a> <a href=\"/records\">records</a> \
         <a href=\"/card\">card</a> <a href=\"/bench\">bench</a></nav></header><main>{body}</main></body></html>\n",
        escape(title)
    )
}

/// An error page's body.
pub fn render_error_page(status: u16, message: &str) -> String {
    page(
        &format!("error {status}"),
        &format!(
            "<h1>{status}</h1><p class=\"error\" id=\"error\">{}</p>",
            escape(message)
        ),
    )
}

/// A byte count for people: `297 B`, `1.5 KiB`, `71.0 MiB`.
pub(super) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
