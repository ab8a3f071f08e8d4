//! The part of a Rust source file the module graph needs, read with a small tokenizer.
//!
//! Comments (nested block comments too), string, byte-string and raw-string literals, char
//! literals and lifetimes are skipped, so a path in a doc comment or a string is not an import.
//! What is kept, per module (the file's own and each inline `mod name { ... }` in it):
//! `mod name;` declarations (with a `#[path = "..."]` before them), every `use` tree (nested groups, `self`, `as`, globs) flattened to
//! one [`Use`] per leaf, every path that starts with `crate::`, `super::` or `self::` outside a
//! `use` (not a visibility `pub(in ...)`, not `$crate::`), and the names the module defines.

use std::collections::{BTreeMap, BTreeSet};

/// One token: an identifier (keywords included), `::`, or any other single character.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
    /// A plain string literal's text as written (kept for `#[path = "..."]`).
    Str(String),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: u32,
}

/// What a `use` leaf brings into scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Leaf {
    /// `a::b` or `a::b as c` or `a::{self}`: the name it is known by here.
    Name(String),
    /// `a::b::*`.
    Glob,
}

/// One leaf of a `use` tree: its whole path as written (`["crate", "a", "b"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Use {
    pub(crate) segs: Vec<String>,
    pub(crate) leaf: Leaf,
    pub(crate) line: u32,
}

/// A path outside `use` that starts with `crate`, `super` or `self`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathRef {
    pub(crate) segs: Vec<String>,
    pub(crate) line: u32,
}

/// What one module (of a file) declares, imports and names.
#[derive(Debug, Default, Clone)]
pub(crate) struct ModItems {
    /// `mod name;`: children in their own files, with their `#[path = "..."]` if any.
    pub(crate) file_children: Vec<(String, Option<String>)>,
    pub(crate) uses: Vec<Use>,
    pub(crate) refs: Vec<PathRef>,
    /// Names of items defined in the module (`fn`, `struct`, ..., `macro_rules!`).
    pub(crate) defs: BTreeSet<String>,
}

/// The modules of one file, keyed by their path below the file's module (`[]` for the file's
/// own module, `["tests"]` for an inline `mod tests { ... }`).
pub(crate) type FileScan = BTreeMap<Vec<String>, ModItems>;

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "union", "trait", "type", "static", "const",
];

/// Reads `src` into its modules.
pub(crate) fn scan(src: &str) -> FileScan {
    let toks = tokenize(src);
    let mut out = FileScan::new();
    out.insert(Vec::new(), ModItems::default());
    // Inline modules open here: (path below the file's module, brace depth inside it).
    let mut stack: Vec<(Vec<String>, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    // A `#[path = "..."]` seen since the last item ended, for the next `mod`.
    let mut path_attr: Option<String> = None;
    let ident = |i: usize| match toks.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let is = |i: usize, t: &Tok| toks.get(i).is_some_and(|x| x.tok == *t);
    while i < toks.len() {
        let (cur, base) = stack
            .last()
            .map_or((Vec::new(), 0), |(p, d)| (p.clone(), *d));
        let line = toks[i].line;
        let at_item_level = depth == base;
        match &toks[i].tok {
            Tok::Punct('#')
                if is(i + 1, &Tok::Punct('['))
                    && ident(i + 2) == Some("path")
                    && is(i + 3, &Tok::Punct('=')) =>
            {
                if let Some(Tok::Str(p)) = toks.get(i + 4).map(|t| &t.tok) {
                    path_attr = Some(p.clone());
                }
                i += 4;
            }
            Tok::Punct(';') => {
                path_attr = None;
                i += 1;
            }
            Tok::Punct('{') => {
                path_attr = None;
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                path_attr = None;
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(kw) if kw == "use" => {
                i += 1;
                let mut uses = Vec::new();
                parse_tree(&toks, &mut i, Vec::new(), line, &mut uses);
                while i < toks.len() && !is(i, &Tok::Punct(';')) {
                    i += 1;
                }
                entry(&mut out, &cur).uses.extend(uses);
            }
            Tok::Ident(kw) if kw == "mod" && ident(i + 1).is_some() => {
                let name = ident(i + 1).unwrap_or_default().to_owned();
                if is(i + 2, &Tok::Punct(';')) {
                    entry(&mut out, &cur)
                        .file_children
                        .push((name.clone(), path_attr.take()));
                    entry(&mut out, &cur).defs.insert(name);
                    i += 3;
                } else if is(i + 2, &Tok::Punct('{')) {
                    path_attr = None;
                    entry(&mut out, &cur).defs.insert(name.clone());
                    let mut path = cur.clone();
                    path.push(name);
                    entry(&mut out, &path);
                    depth += 1;
                    stack.push((path, depth));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(kw) if kw == "pub" && is(i + 1, &Tok::Punct('(')) => {
                // `pub(crate)`, `pub(super)`, `pub(in crate::a)`: a visibility, not a path.
                i += 2;
                while i < toks.len() && !is(i, &Tok::Punct(')')) {
                    i += 1;
                }
            }
            Tok::Ident(kw)
                if matches!(kw.as_str(), "crate" | "super" | "self")
                    && is(i + 1, &Tok::PathSep)
                    && !(i > 0 && (is(i - 1, &Tok::PathSep) || is(i - 1, &Tok::Punct('$')))) =>
            {
                let mut segs = vec![kw.clone()];
                i += 1;
                while is(i, &Tok::PathSep) && ident(i + 1).is_some() {
                    segs.push(ident(i + 1).unwrap_or_default().to_owned());
                    i += 2;
                }
                entry(&mut out, &cur).refs.push(PathRef { segs, line });
            }
            Tok::Ident(kw) if kw == "macro_rules" && is(i + 1, &Tok::Punct('!')) => {
                if let (Some(name), true) = (ident(i + 2), at_item_level) {
                    entry(&mut out, &cur).defs.insert(name.to_owned());
                }
                i += 2;
            }
            Tok::Ident(kw) if ITEM_KEYWORDS.contains(&kw.as_str()) => {
                if let (Some(name), true) = (ident(i + 1), at_item_level)
                    && !ITEM_KEYWORDS.contains(&name)
                    && name != "_"
                {
                    entry(&mut out, &cur).defs.insert(name.to_owned());
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn entry<'a>(out: &'a mut FileScan, path: &[String]) -> &'a mut ModItems {
    out.entry(path.to_vec()).or_default()
}

/// Parses one use tree at `toks[*i]` (after `use` or inside a group), appending its leaves.
fn parse_tree(toks: &[Token], i: &mut usize, prefix: Vec<String>, line: u32, out: &mut Vec<Use>) {
    let mut segs = prefix;
    while let Some(token) = toks.get(*i) {
        match &token.tok {
            Tok::PathSep => {
                // A leading `::` (an extern crate path); a separator after a segment is
                // consumed with the segment.
                segs.push("::".into());
                *i += 1;
            }
            Tok::Ident(seg) => {
                segs.push(seg.clone());
                *i += 1;
                if toks.get(*i).is_some_and(|t| t.tok == Tok::PathSep) {
                    *i += 1;
                    continue;
                }
                let mut alias = None;
                if matches!(toks.get(*i).map(|t| &t.tok), Some(Tok::Ident(a)) if a == "as") {
                    if let Some(Tok::Ident(a)) = toks.get(*i + 1).map(|t| &t.tok) {
                        alias = Some(a.clone());
                    }
                    *i += 2;
                }
                if segs.last().is_some_and(|s| s == "self") {
                    segs.pop();
                }
                let name = alias.or_else(|| segs.last().cloned()).unwrap_or_default();
                out.push(Use {
                    segs,
                    leaf: Leaf::Name(name),
                    line,
                });
                return;
            }
            Tok::Punct('*') => {
                *i += 1;
                out.push(Use {
                    segs,
                    leaf: Leaf::Glob,
                    line,
                });
                return;
            }
            Tok::Punct('{') => {
                *i += 1;
                while let Some(t) = toks.get(*i) {
                    match t.tok {
                        Tok::Punct('}') => {
                            *i += 1;
                            return;
                        }
                        Tok::Punct(',') => *i += 1,
                        _ => {
                            let before = *i;
                            parse_tree(toks, i, segs.clone(), line, out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
                return;
            }
            _ => return,
        }
    }
}

fn tokenize(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut toks = Vec::new();
    let mut line = 1u32;
    let mut i = 0;
    // Skips a quoted literal whose opening quote is at `i`; returns the index after it.
    let skip_quoted = |mut i: usize, quote: char, line: &mut u32| {
        i += 1;
        while i < c.len() && c[i] != quote {
            if c[i] == '\\' {
                i += 1;
            }
            if at(i) == '\n' {
                *line += 1;
            }
            i += 1;
        }
        i + 1
    };
    // Skips a raw string whose `r` is at `i`; returns the index after it.
    let skip_raw = |mut i: usize, line: &mut u32| {
        i += 1;
        let mut hashes = 0;
        while at(i) == '#' {
            hashes += 1;
            i += 1;
        }
        i += 1; // the opening quote
        while i < c.len() {
            if c[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                return i + 1 + hashes;
            }
            if c[i] == '\n' {
                *line += 1;
            }
            i += 1;
        }
        i
    };
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let next = at(i + 1);
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == '*' {
            let mut nest = 1;
            i += 2;
            while i < c.len() && nest > 0 {
                if c[i] == '/' && at(i + 1) == '*' {
                    nest += 1;
                    i += 1;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    nest -= 1;
                    i += 1;
                } else if c[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
        } else if ch == '"' {
            let end = skip_quoted(i, '"', &mut line);
            let text: String = c[i + 1..end.saturating_sub(1).max(i + 1)].iter().collect();
            toks.push(Token {
                tok: Tok::Str(text),
                line,
            });
            i = end;
        } else if ch == 'r' && (next == '"' || (next == '#' && matches!(at(i + 2), '"' | '#'))) {
            i = skip_raw(i, &mut line);
        } else if ch == 'b' && next == '"' {
            i = skip_quoted(i + 1, '"', &mut line);
        } else if ch == 'b' && next == '\'' {
            i = skip_quoted(i + 1, '\'', &mut line);
        } else if ch == 'b' && next == 'r' && matches!(at(i + 2), '"' | '#') {
            i = skip_raw(i + 1, &mut line);
        } else if ch == '\'' {
            if next == '\\' || at(i + 2) == '\'' {
                i = skip_quoted(i, '\'', &mut line);
            } else {
                // A lifetime or label: skip it whole, so `'static` is not the keyword.
                i += 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch == 'r' && next == '#' && (at(i + 2).is_alphabetic() || at(i + 2) == '_') {
            let start = i + 2;
            i = start;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            toks.push(Token {
                tok: Tok::Ident(format!("r#{word}")),
                line,
            });
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            toks.push(Token {
                tok: Tok::Ident(c[start..i].iter().collect()),
                line,
            });
        } else if ch.is_ascii_digit() {
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
        } else if ch == ':' && next == ':' {
            toks.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            toks.push(Token {
                tok: Tok::Punct(ch),
                line,
            });
            i += 1;
        }
    }
    toks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(src: &str) -> Vec<(String, Leaf)> {
        scan(src)[&Vec::new()]
            .uses
            .iter()
            .map(|u| (u.segs.join("::"), u.leaf.clone()))
            .collect()
    }

    fn name(n: &str) -> Leaf {
        Leaf::Name(n.into())
    }

    #[test]
    fn flattens_nested_use_groups() {
        let got = leaves(
            "use crate::a::{b, c::{self, d as e, f::*}, g::{h::{i}}};\n\
             pub(crate) use super::super::x;\nuse ::std::fmt;\nuse std::{io::{self, Read}};",
        );
        assert_eq!(
            got,
            [
                ("crate::a::b".into(), name("b")),
                ("crate::a::c".into(), name("c")),
                ("crate::a::c::d".into(), name("e")),
                ("crate::a::c::f".into(), Leaf::Glob),
                ("crate::a::g::h::i".into(), name("i")),
                ("super::super::x".into(), name("x")),
                ("::::std::fmt".into(), name("fmt")),
                ("std::io".into(), name("io")),
                ("std::io::Read".into(), name("Read")),
            ]
        );
    }

    #[test]
    fn skips_comments_strings_and_visibilities() {
        let src = r####"
            // use crate::commented;
            /* outer /* nested crate::x::y */ still comment crate::z::w */
            /// Doc: [`crate::doc::Link`]
            const S: &str = "crate::in_string::X";
            const R: &str = r#"crate::raw::Y "quoted" "#;
            const B: &[u8] = b"crate::bytes";
            const C: char = '"';
            fn f<'a>(x: &'a str) -> &'static str { crate::real::call(); $crate::no::x; x }
            pub(in crate::vis) fn g() {}
        "####;
        let items = &scan(src)[&Vec::new()];
        let refs: Vec<String> = items.refs.iter().map(|r| r.segs.join("::")).collect();
        assert_eq!(refs, ["crate::real::call"]);
        assert!(items.uses.is_empty());
        assert_eq!(
            items.defs.iter().cloned().collect::<Vec<_>>(),
            ["B", "C", "R", "S", "f", "g"]
        );
        assert_eq!(items.refs[0].line, 9);
    }

    #[test]
    fn path_attributes_go_with_their_mod() {
        let src = "#[cfg(test)]\n#[path = \"x_tests.rs\"]\npub(crate) mod tests;\nmod plain;\n\
                   #[path = \"ignored.rs\"]\nfn f() {}\nmod after;\n";
        let top = &scan(src)[&Vec::new()];
        assert_eq!(
            top.file_children,
            [
                ("tests".to_owned(), Some("x_tests.rs".to_owned())),
                ("plain".to_owned(), None),
                ("after".to_owned(), None),
            ]
        );
    }

    #[test]
    fn keeps_inline_modules_apart() {
        let src = "mod a;\npub mod b { use super::c::X; fn inner() {} }\nfn outer() { crate::d::y(); }\n\
                   #[cfg(test)]\nmod tests { use super::*; }\n";
        let scan = scan(src);
        let top = &scan[&Vec::new()];
        assert_eq!(top.file_children, [("a".to_owned(), None)]);
        assert_eq!(top.refs[0].segs, ["crate", "d", "y"]);
        assert!(
            top.defs.contains("b") && top.defs.contains("outer") && !top.defs.contains("inner")
        );
        let b = &scan[&vec!["b".to_owned()]];
        assert_eq!(b.uses[0].segs, ["super", "c", "X"]);
        assert!(b.defs.contains("inner"));
        let tests = &scan[&vec!["tests".to_owned()]];
        assert_eq!(tests.uses[0].leaf, Leaf::Glob);
    }
}
