//! Dataset cards.

use super::escape::escape;

/// A dataset card (markdown text), shown as escaped preformatted text: no markup from the
/// root is ever interpreted.
///
/// ```
/// use guideloom_view::html::render_card;
/// assert!(render_card("# Title\n<script>").contains("# Title\n&lt;script&gt;"));
/// ```
pub fn render_card(markdown: &str) -> String {
    format!("<pre class=\"card\">{}</pre>", escape(markdown))
}
