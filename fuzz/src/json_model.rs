//! A strict JSON reader (RFC 8259) whose values keep what the CLI promises to keep.

use num_bigint::BigInt;

/// A JSON value as the CLI's exact JSON keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer literal (no fraction, no exponent), of any size.
    Int(BigInt),
    /// A literal with a fraction or exponent, or `-0`: the bits of the nearest binary64.
    Float(u64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in input order.
    Obj(Vec<(String, Json)>),
}

/// Deepest nesting read (the code under test accepts at most 128).
const MAX_DEPTH: usize = 256;

/// Reads one JSON text (surrounding whitespace allowed), or says why it is not one.
pub fn parse(text: &[u8]) -> Result<Json, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        pos: 0,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(format!("trailing bytes at {}", p.pos));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while matches!(self.s.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.s.get(self.pos) == Some(&b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at {}", self.pos))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err("too deep".into());
        }
        match self.s.get(self.pos) {
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat(b']') {
                    return Ok(Json::Arr(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(b']') {
                        return Ok(Json::Arr(items));
                    }
                    if !self.eat(b',') {
                        return Err(format!("expected , or ] at {}", self.pos));
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                self.ws();
                if self.eat(b'}') {
                    return Ok(Json::Obj(entries));
                }
                loop {
                    self.ws();
                    if self.s.get(self.pos) != Some(&b'"') {
                        return Err(format!("expected a key at {}", self.pos));
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(b':') {
                        return Err(format!("expected : at {}", self.pos));
                    }
                    self.ws();
                    let v = self.value(depth + 1)?;
                    entries.push((k, v));
                    self.ws();
                    if self.eat(b'}') {
                        return Ok(Json::Obj(entries));
                    }
                    if !self.eat(b',') {
                        return Err(format!("expected , or }} at {}", self.pos));
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(format!("unexpected byte at {}", self.pos)),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.s.get(self.pos), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.pos;
        let negative = self.eat(b'-');
        let int_start = self.pos;
        match self.s.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(format!("bad number at {start}")),
        }
        let int_digits = &self.text[int_start..self.pos];
        let mut float = false;
        if self.eat(b'.') {
            float = true;
            if self.digits() == 0 {
                return Err(format!("bad fraction at {start}"));
            }
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            float = true;
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(format!("bad exponent at {start}"));
            }
        }
        let literal = &self.text[start..self.pos];
        if float || (negative && int_digits == "0") {
            // `-0` has no integer form: the CLI reads it as the float -0.0 (docs/cli.md).
            let f: f64 = literal.parse().map_err(|e| format!("{literal}: {e}"))?;
            return Ok(Json::Float(f.to_bits()));
        }
        let n: BigInt = literal.parse().map_err(|e| format!("{literal}: {e}"))?;
        Ok(Json::Int(n))
    }

    fn hex4(&mut self) -> Result<u16, String> {
        let h = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| format!("short \\u escape at {}", self.pos))?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("bad \\u escape at {}", self.pos));
        }
        self.pos += 4;
        u16::from_str_radix(h, 16).map_err(|e| e.to_string())
    }

    fn string(&mut self) -> Result<String, String> {
        self.pos += 1; // the opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&b) = self.s.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[start..self.pos]);
            match self.s.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let e = *self.s.get(self.pos).ok_or("truncated escape")?;
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if !self.s[self.pos..].starts_with(b"\\u") {
                                    return Err("lone high surrogate".into());
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err("bad low surrogate".into());
                                }
                                let cp = 0x10000
                                    + ((u32::from(hi) - 0xD800) << 10)
                                    + (u32::from(lo) - 0xDC00);
                                char::from_u32(cp).ok_or("bad code point")?
                            } else {
                                char::from_u32(u32::from(hi)).ok_or("lone low surrogate")?
                            };
                            out.push(c);
                        }
                        _ => return Err(format!("bad escape at {}", self.pos - 1)),
                    }
                }
                _ => {
                    return Err(format!(
                        "unterminated string or control byte at {}",
                        self.pos
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exactly() {
        assert_eq!(
            parse(br#" {"b":[1,-0,0.1,"\ud83d\ude00"],"a":null} "#).unwrap(),
            Json::Obj(vec![
                (
                    "b".into(),
                    Json::Arr(vec![
                        Json::Int(1.into()),
                        Json::Float((-0.0f64).to_bits()),
                        Json::Float(0.1f64.to_bits()),
                        Json::Str("\u{1f600}".into()),
                    ])
                ),
                ("a".into(), Json::Null),
            ])
        );
        for bad in [
            &b"01"[..],
            b"1.",
            b"[1,]",
            b"\"\\ud800\"",
            b"\"\x01\"",
            b"{1:2}",
            b"nul",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
