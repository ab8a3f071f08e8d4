//! Records as HTML: CBOR as indented JSON-like text, media bytes inline (`data:` URIs), UTF-8
//! text escaped, other bytes as a hex preview. Every output is bounded by [`RenderLimits`],
//! whatever the record's size.

use std::fmt::Write as _;

use ciborium::Value;
use guideloom::format::schema::{DataType, Field, Schema};

use super::escape::{escape, escape_into};
use super::media::{MediaKind, base64_into, inline_kind, sniff};

/// Bounds on what one record renders to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderLimits {
    /// Media bytes (summed over the record) shown inline as `data:` URIs; larger media are
    /// shown as "MIME, N bytes".
    pub inline_media_bytes: usize,
    /// Characters of text (strings, numbers, punctuation) shown before the rest is cut.
    pub text_chars: usize,
    /// Records larger than this are not decoded as CBOR (a hex preview is shown instead).
    pub decode_bytes: usize,
    /// Bytes shown in a hex preview.
    pub hex_bytes: usize,
}

impl RenderLimits {
    /// A record's own page: 4 MiB of inline media, 256 Ki characters of text.
    pub const DETAIL: RenderLimits = RenderLimits {
        inline_media_bytes: 4 << 20,
        text_chars: 256 << 10,
        decode_bytes: 32 << 20,
        hex_bytes: 1024,
    };
    /// A row of the record browser: 256 KiB of inline media, 600 characters of text.
    pub const PREVIEW: RenderLimits = RenderLimits {
        inline_media_bytes: 256 << 10,
        text_chars: 600,
        decode_bytes: 32 << 20,
        hex_bytes: 48,
    };
}

/// What the bytes of a record are, as far as the caller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    /// CBOR (the shard's record format is `cbor`, or the snapshot has a schema).
    Cbor,
    /// Raw bytes (record format `raw`).
    Raw,
    /// Not known: media magic first, then CBOR if the bytes are one CBOR map or array and
    /// nothing else, else text or bytes.
    Unknown,
}

impl RecordFormat {
    /// The format of a shard's record-format name (`cbor`, `raw`; anything else: unknown).
    pub fn from_name(name: &str) -> RecordFormat {
        match name {
            "cbor" => RecordFormat::Cbor,
            "raw" => RecordFormat::Raw,
            _ => RecordFormat::Unknown,
        }
    }
}

/// Record `index` as an HTML block (`<div class="record">`), within
/// [`RenderLimits::DETAIL`]. With a `schema` the bytes are read as a schema-bound CBOR
/// record and byte fields whose metadata names a media type (`guideloom.media`) are shown
/// inline; without one the format is sniffed ([`RecordFormat::Unknown`]).
///
/// ```
/// use guideloom_view::html::render_record;
/// let html = render_record(3, b"<script>alert(1)</script>", None);
/// assert!(html.contains("&lt;script&gt;") && !html.contains("<script>"));
/// ```
pub fn render_record(index: u64, bytes: &[u8], schema: Option<&Schema>) -> String {
    let format = if schema.is_some() {
        RecordFormat::Cbor
    } else {
        RecordFormat::Unknown
    };
    render_record_with(index, bytes, format, schema, &RenderLimits::DETAIL)
}

/// [`render_record`] with the format and limits chosen by the caller.
pub fn render_record_with(
    index: u64,
    bytes: &[u8],
    format: RecordFormat,
    schema: Option<&Schema>,
    limits: &RenderLimits,
) -> String {
    let mut html = format!(
        "<div class=\"record\" data-index=\"{index}\"><div class=\"record-head\">record \
         {index} · {} bytes</div>",
        bytes.len()
    );
    html.push_str(&render_value(bytes, format, schema, limits));
    html.push_str("</div>");
    html
}

/// The body of a record (no heading): what [`render_record_with`] wraps.
pub fn render_value(
    bytes: &[u8],
    format: RecordFormat,
    schema: Option<&Schema>,
    limits: &RenderLimits,
) -> String {
    let mut out = Out::new(limits);
    if format != RecordFormat::Cbor
        && let Some(media) = sniff(bytes)
    {
        out.media(media, bytes);
        return out.finish();
    }
    if format != RecordFormat::Raw {
        match decode(bytes, limits) {
            Ok(value)
                if format == RecordFormat::Cbor
                    || matches!(value, Value::Map(_) | Value::Array(_)) =>
            {
                out.html.push_str("<pre class=\"cbor\">");
                let fields = schema.map(|s| s.fields.as_slice());
                out.value(&value, fields, None, 0);
                out.html.push_str("</pre>");
                return out.finish();
            }
            Ok(_) => {}
            Err(why) if format == RecordFormat::Cbor => {
                let _ = write!(out.html, "<p class=\"note\">{}</p>", escape(&why));
                out.hex(bytes);
                return out.finish();
            }
            Err(_) => {}
        }
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            out.html.push_str("<pre class=\"text\">");
            out.text(text);
            out.html.push_str("</pre>");
        }
        Err(_) => out.hex(bytes),
    }
    out.finish()
}

/// One CBOR value and nothing after it, for records of at most `limits.decode_bytes`.
fn decode(bytes: &[u8], limits: &RenderLimits) -> Result<Value, String> {
    if bytes.len() > limits.decode_bytes {
        return Err(format!(
            "{} bytes: larger than the {} bytes the viewer decodes",
            bytes.len(),
            limits.decode_bytes
        ));
    }
    let mut rest = bytes;
    let value: Value =
        ciborium::de::from_reader(&mut rest).map_err(|e| format!("not a CBOR value: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the CBOR value", rest.len()));
    }
    Ok(value)
}

/// An HTML value being written within its limits.
struct Out<'a> {
    html: String,
    limits: &'a RenderLimits,
    /// Text characters still allowed.
    chars_left: usize,
    /// Inline media bytes still allowed.
    media_left: usize,
    /// Whether text was cut.
    cut: bool,
}

impl<'a> Out<'a> {
    fn new(limits: &'a RenderLimits) -> Self {
        Out {
            html: String::new(),
            limits,
            chars_left: limits.text_chars,
            media_left: limits.inline_media_bytes,
            cut: false,
        }
    }

    fn finish(mut self) -> String {
        if self.cut {
            self.html
                .push_str("<p class=\"note cut\">… (cut: the rest is not shown)</p>");
        }
        self.html
    }

    /// Escaped text, up to the characters left.
    fn text(&mut self, text: &str) {
        if self.cut {
            return;
        }
        let mut end = text.len();
        let mut count = 0;
        for (i, _) in text.char_indices() {
            if count == self.chars_left {
                end = i;
                self.cut = true;
                break;
            }
            count += 1;
        }
        self.chars_left -= count;
        escape_into(&mut self.html, &text[..end]);
    }

    /// Markup of our own (not counted).
    fn tag(&mut self, markup: &str) {
        self.html.push_str(markup);
    }

    /// Inline media if within the budget, else its type and size.
    fn media(&mut self, (mime, kind): (&'static str, MediaKind), bytes: &[u8]) {
        if bytes.len() > self.media_left {
            let _ = write!(
                self.html,
                "<span class=\"note\">{mime}, {} bytes (not shown inline: over the {} bytes \
                 inline limit)</span>",
                bytes.len(),
                self.limits.inline_media_bytes
            );
            return;
        }
        self.media_left -= bytes.len();
        match kind {
            MediaKind::Image => {
                let _ = write!(
                    self.html,
                    "<img class=\"media\" alt=\"{mime}, {} bytes\" src=\"data:{mime};base64,",
                    bytes.len()
                );
            }
            MediaKind::Audio => {
                self.html
                    .push_str("<audio class=\"media\" controls preload=\"none\" src=\"data:");
                let _ = write!(self.html, "{mime};base64,");
            }
        }
        base64_into(&mut self.html, bytes);
        self.html.push_str(match kind {
            MediaKind::Image => "\">",
            MediaKind::Audio => "\"></audio>",
        });
    }

    /// A hex preview of `bytes` and their length.
    fn hex(&mut self, bytes: &[u8]) {
        let shown = &bytes[..bytes.len().min(self.limits.hex_bytes)];
        self.html.push_str("<code class=\"hex\">");
        for (i, b) in shown.iter().enumerate() {
            if i > 0 && i % 16 == 0 {
                self.html.push('\n');
            } else if i > 0 {
                self.html.push(' ');
            }
            let _ = write!(self.html, "{b:02x}");
        }
        if shown.len() < bytes.len() {
            self.html.push_str(" …");
        }
        let _ = write!(
            self.html,
            "</code> <span class=\"note\">{} bytes</span>",
            bytes.len()
        );
    }

    fn newline(&mut self, depth: usize) {
        self.html.push('\n');
        for _ in 0..depth {
            self.html.push_str("  ");
        }
    }

    /// `value`, with the schema `fields` of a map at this place and the media type of the
    /// field holding it.
    fn value(
        &mut self,
        value: &Value,
        fields: Option<&[Field]>,
        media: Option<&str>,
        depth: usize,
    ) {
        if self.cut {
            return;
        }
        match value {
            Value::Null => self.scalar("null", "z"),
            Value::Bool(b) => self.scalar(if *b { "true" } else { "false" }, "z"),
            Value::Integer(i) => self.scalar(&i128::from(*i).to_string(), "n"),
            Value::Float(f) => self.scalar(&format!("{f:?}"), "n"),
            Value::Text(s) => {
                self.tag("<span class=\"s\">");
                let budget = self.chars_left.saturating_add(1);
                let shown: String = s.chars().take(budget).collect();
                let quoted = serde_json::to_string(&shown).unwrap_or_default();
                self.text(&quoted);
                self.tag("</span>");
            }
            Value::Bytes(b) => {
                let declared = media.and_then(inline_kind);
                match declared.or_else(|| sniff(b)) {
                    Some(m) => self.media(m, b),
                    None => self.hex(b),
                }
            }
            Value::Tag(tag, inner) => {
                self.scalar(&format!("tag({tag}) "), "z");
                self.value(inner, None, None, depth);
            }
            Value::Array(items) => {
                self.tag("[");
                for (i, v) in items.iter().enumerate() {
                    if self.cut {
                        return;
                    }
                    self.newline(depth + 1);
                    self.value(v, fields, media, depth + 1);
                    if i + 1 < items.len() {
                        self.tag(",");
                    }
                }
                if !items.is_empty() {
                    self.newline(depth);
                }
                self.tag("]");
            }
            Value::Map(entries) => {
                self.tag("{");
                for (i, (k, v)) in entries.iter().enumerate() {
                    if self.cut {
                        return;
                    }
                    self.newline(depth + 1);
                    let field = match (k, fields) {
                        (Value::Text(name), Some(fields)) => {
                            fields.iter().find(|f| f.name == *name)
                        }
                        _ => None,
                    };
                    self.tag("<span class=\"k\">");
                    match k {
                        Value::Text(name) => {
                            let quoted = serde_json::to_string(name).unwrap_or_default();
                            self.text(&quoted);
                        }
                        other => self.value(other, None, None, depth + 1),
                    }
                    self.tag("</span>: ");
                    let (sub, media) = match field {
                        Some(f) => (struct_fields(f), f.media()),
                        None => (None, None),
                    };
                    self.value(v, sub, media, depth + 1);
                    if i + 1 < entries.len() {
                        self.tag(",");
                    }
                }
                if !entries.is_empty() {
                    self.newline(depth);
                }
                self.tag("}");
            }
            _ => self.scalar("(unknown CBOR value)", "z"),
        }
    }

    fn scalar(&mut self, text: &str, class: &str) {
        let _ = write!(self.html, "<span class=\"{class}\">");
        self.text(text);
        self.tag("</span>");
    }
}

/// The members of a struct field, or of the struct items of a list field.
fn struct_fields(field: &Field) -> Option<&[Field]> {
    match &field.data_type {
        DataType::Struct(members) => Some(members),
        DataType::List(item) | DataType::FixedSizeList { item, .. } => match &item.data_type {
            DataType::Struct(members) => Some(members),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cbor(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::ser::into_writer(value, &mut out).unwrap();
        out
    }

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn cbor_maps_render_as_escaped_json_like_text() {
        let v = Value::Map(vec![
            (
                Value::Text("id".into()),
                Value::Text("<script>x</script>\"".into()),
            ),
            (Value::Text("n".into()), Value::Integer(7.into())),
            (Value::Text("f".into()), Value::Float(0.5)),
            (Value::Text("ok".into()), Value::Bool(true)),
            (Value::Text("l".into()), Value::Array(vec![Value::Null])),
        ]);
        let html = render_record(0, &cbor(&v), None);
        assert!(html.contains("<pre class=\"cbor\">"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;x&lt;/script&gt;\\&quot;"),
            "{html}"
        );
        for expected in ["&quot;id&quot;", ">7<", ">0.5<", ">true<", ">null<"] {
            assert!(html.contains(expected), "{expected} in {html}");
        }
    }

    #[test]
    fn media_fields_and_sniffed_bytes_are_inline() {
        let schema = Schema::new(vec![
            Field::new("image", DataType::Binary, false).with_media("image/png"),
            Field::new("sound", DataType::Binary, false).with_media("audio/wav"),
        ]);
        let v = Value::Map(vec![
            (
                Value::Text("image".into()),
                Value::Bytes(b"not really".to_vec()),
            ),
            (Value::Text("sound".into()), Value::Bytes(b"RIFF".to_vec())),
        ]);
        let html = render_record(1, &cbor(&v), Some(&schema));
        assert!(html.contains("src=\"data:image/png;base64,"), "{html}");
        assert!(html.contains("<audio class=\"media\" controls"), "{html}");
        // Raw PNG bytes, and PNG bytes in a schemaless map.
        assert!(render_record(2, PNG, None).contains("data:image/png;base64,iVBORw0KGgo"));
        let v = Value::Map(vec![(Value::Text("x".into()), Value::Bytes(PNG.to_vec()))]);
        assert!(render_record(3, &cbor(&v), None).contains("<img"));
    }

    #[test]
    fn large_media_and_long_text_are_capped() {
        let mut big = PNG.to_vec();
        big.resize(5 << 20, 0);
        let html = render_record(0, &big, None);
        assert!(
            !html.contains("<img") && html.contains("5242880 bytes"),
            "{}",
            &html[..200]
        );
        assert!(html.len() < 4096);
        let text = "<".repeat(1 << 20);
        let html = render_record_with(
            0,
            text.as_bytes(),
            RecordFormat::Raw,
            None,
            &RenderLimits::PREVIEW,
        );
        assert!(
            html.len() < 600 * 4 + 400 && html.contains("cut"),
            "{}",
            html.len()
        );
        let v = Value::Array((0..100_000).map(|i| Value::Integer(i.into())).collect());
        let html = render_record_with(
            0,
            &cbor(&v),
            RecordFormat::Cbor,
            None,
            &RenderLimits::PREVIEW,
        );
        assert!(
            html.len() < 20_000 && html.contains("cut"),
            "{}",
            html.len()
        );
    }

    #[test]
    fn text_bytes_and_bad_cbor() {
        assert!(
            render_record(0, "héllo".as_bytes(), None).contains("<pre class=\"text\">héllo</pre>")
        );
        let html = render_record(0, &[0xff, 0x00, 0x80], None);
        assert!(
            html.contains("<code class=\"hex\">ff 00 80</code>"),
            "{html}"
        );
        let html = render_record_with(
            0,
            &[0xa1, 0x61],
            RecordFormat::Cbor,
            None,
            &RenderLimits::DETAIL,
        );
        assert!(
            html.contains("not a CBOR value") && html.contains("a1 61"),
            "{html}"
        );
        // A single CBOR integer from a schemaless raw root is shown as text/bytes, not CBOR.
        assert!(render_record(0, b"1", None).contains("<pre class=\"text\">1</pre>"));
    }
}
