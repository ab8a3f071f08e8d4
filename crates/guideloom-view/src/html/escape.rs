//! Escaping for HTML text and attribute values, and percent-encoding for URL query values.
//!
//! Every value that comes from a root (ids, keys, record bytes, annotation values, card text,
//! benchmark names) goes through [`escape`] before it is put in a page, and through
//! [`url_encode`] (then [`escape`]) before it is put in a link.

/// Escapes `text` for HTML element content and quoted attribute values.
///
/// `&`, `<`, `>`, `"` and `'` become character references; control characters other than
/// newline and tab (C0, DEL and C1) are shown as visible `\xNN` / `\u{NNNN}` text, so bytes
/// a root controls can neither open markup, close an attribute, nor hide in the page.
///
/// ```
/// use guideloom_view::html::escape;
/// assert_eq!(escape("<script>alert('x')</script>"),
///            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
/// assert_eq!(escape("a \"b\" & c\u{1}"), "a &quot;b&quot; &amp; c\\x01");
/// ```
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    escape_into(&mut out, text);
    out
}

/// [`escape`], appending to `out`.
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if ('\u{80}'..='\u{9f}').contains(&c) => {
                out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
}

/// Percent-encodes `value` for a URL query or path segment: everything but the unreserved
/// characters of RFC 3986 (`A-Z a-z 0-9 - _ . ~`) becomes `%XX` of its UTF-8 bytes.
///
/// ```
/// use guideloom_view::html::url_encode;
/// assert_eq!(url_encode("v1 \"x\"&y=/"), "v1%20%22x%22%26y%3D%2F");
/// ```
pub fn url_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_tags_quotes_and_ampersands_are_escaped() {
        let hostile = "<script>alert(\"x\")</script><img src=x onerror='y'>&amp;";
        let e = escape(hostile);
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
        assert_eq!(
            e,
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x \
             onerror=&#39;y&#39;&gt;&amp;amp;"
        );
    }

    #[test]
    fn control_characters_are_shown_not_passed() {
        assert_eq!(escape("a\u{0}b\u{1b}[31m\u{7f}"), "a\\x00b\\x1b[31m\\x7f");
        assert_eq!(escape("\u{85}"), "\\u{0085}");
        assert_eq!(escape("line\nnext\ttab"), "line\nnext\ttab");
        assert_eq!(escape("é 猫 🙂"), "é 猫 🙂");
    }

    #[test]
    fn url_encoding_leaves_only_unreserved_characters() {
        let e = url_encode("a b/c?d#e&f=g\"'<>é");
        assert!(
            e.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.~%".contains(&b)),
            "{e}"
        );
        assert_eq!(url_encode("é"), "%C3%A9");
    }
}
