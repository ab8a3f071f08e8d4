//! `cargo xtask metrics [--root DIR] [--paths]`: the size and shape of each crate, as a
//! markdown table (`--paths`: then every item reachable by two or more paths, with them).
//!
//! Per crate under `DIR/crates/` (default: this checkout; `--root` measures another checkout,
//! e.g. a `git worktree` of an older commit):
//!
//! - **lines**: non-blank lines of the `.rs` files under `src/`;
//! - **public items**: distinct items reachable from the crate root by public paths, read from
//!   `cargo +nightly rustdoc --lib --all-features -- --output-format json` (modules, types,
//!   traits, functions, constants, statics, macros; not fields, variants or methods). A `pub use`
//!   is followed to its item, across crates of the workspace too: the facade's
//!   `pub use guideloom_io as io` makes every public item of guideloom-io one of its own;
//! - **at ≥2 paths**: of those, the items reachable by two or more distinct public paths
//!   (a re-export beside the original module path counts two);
//! - **cycles**: module import cycles, by the rule of [`crate::modgraph`] (the binary's tree
//!   counted with its crate). `xtask` is listed for its lines and cycles only.
//!
//! A crate whose documentation does not build gets dashes in the item columns (and a warning).
//! `doc(hidden)` items are not counted (rustdoc leaves them out), so `guideloom-cli`'s library
//! half, hidden as a whole, counts none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::{modgraph, util};

/// An item: the crate whose rustdoc JSON holds it and its id there, or for an item of a crate
/// outside the workspace, that crate and the item's path.
type Key = (String, String);

/// One row of the table.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) lines: usize,
    /// `None` for a crate without a library (xtask).
    pub(crate) items: Option<usize>,
    pub(crate) two_paths: Option<usize>,
    pub(crate) cycles: usize,
    /// The items with the most paths, for the reader: `(paths, one path)`.
    pub(crate) most_paths: Vec<(usize, String)>,
    /// Every item with two or more paths: its paths, sorted.
    pub(crate) multi: Vec<Vec<String>>,
}

/// Measures the checkout at `root` and prints the table.
pub(crate) fn run(root: &Path, list_paths: bool) -> Result<()> {
    let root = root
        .canonicalize()
        .map_err(|e| Error::io("cannot open", root, e))?;
    let rows = measure(&root)?;
    println!("metrics of {}\n", root.display());
    print!("{}", table(&rows));
    for row in &rows {
        if !row.most_paths.is_empty() {
            let top: Vec<String> = row
                .most_paths
                .iter()
                .map(|(n, p)| format!("`{p}` ({n})"))
                .collect();
            println!("- {}: most paths: {}", row.name, top.join(", "));
        }
    }
    if list_paths {
        for row in &rows {
            for paths in &row.multi {
                println!("{}: {}", row.name, paths.join(" = "));
            }
        }
    }
    Ok(())
}

fn measure(root: &Path) -> Result<Vec<Row>> {
    let mut cycles: BTreeMap<String, usize> = BTreeMap::new();
    for cycle in modgraph::workspace_cycles(root)? {
        let name = cycle.label.trim_end_matches(" (bin)").to_owned();
        *cycles.entry(name).or_default() += 1;
    }
    let crates = root.join("crates");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .map_err(|e| Error::io("cannot list", &crates, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    let libs: Vec<String> = dirs
        .iter()
        .filter(|d| d.join("src/lib.rs").is_file())
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let docs = rustdoc_json(root, &libs)?;
    dirs.push(root.join("xtask"));
    let mut rows = Vec::new();
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut row = Row {
            lines: rust_lines(&dir.join("src"))?,
            cycles: cycles.get(&name).copied().unwrap_or_default(),
            name: name.clone(),
            ..Row::default()
        };
        if docs.contains_key(&name.replace('-', "_")) {
            let paths = public_paths(&docs, &name.replace('-', "_"));
            row.items = Some(paths.len());
            row.two_paths = Some(paths.values().filter(|p| p.len() >= 2).count());
            let mut most: Vec<(usize, String)> = paths
                .values()
                .filter(|p| p.len() >= 2)
                .map(|p| (p.len(), p.first().cloned().unwrap_or_default()))
                .collect();
            most.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            most.truncate(3);
            row.most_paths = most;
            row.multi = paths.into_values().filter(|p| p.len() >= 2).collect();
            row.multi.sort();
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The markdown table of `rows`, with a total line.
pub(crate) fn table(rows: &[Row]) -> String {
    let opt = |v: Option<usize>| v.map_or_else(|| "–".to_owned(), |v| v.to_string());
    let mut out = String::from(
        "| crate | lines (src, non-blank) | public items | at ≥2 public paths | module cycles |\n\
         |---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.name,
            r.lines,
            opt(r.items),
            opt(r.two_paths),
            r.cycles
        ));
    }
    let sum = |f: fn(&Row) -> Option<usize>| rows.iter().filter_map(f).sum::<usize>();
    out.push_str(&format!(
        "| **total** | {} | {} | {} | {} |\n",
        sum(|r| Some(r.lines)),
        sum(|r| r.items),
        sum(|r| r.two_paths),
        sum(|r| Some(r.cycles))
    ));
    out
}

/// Non-blank lines of the `.rs` files under `dir`.
fn rust_lines(dir: &Path) -> Result<usize> {
    let mut total = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io("cannot list", &dir, e))? {
            let path = entry.map_err(|e| Error::io("cannot list", &dir, e))?.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| Error::io("cannot read", &path, e))?;
                total += text.lines().filter(|l| !l.trim().is_empty()).count();
            }
        }
    }
    Ok(total)
}

/// Builds the rustdoc JSON of each crate of `libs` with nightly; returns them by crate name
/// (underscores). Honours `CARGO_TARGET_DIR`, so two checkouts can share one.
fn rustdoc_json(root: &Path, libs: &[String]) -> Result<BTreeMap<String, Value>> {
    let toolchains =
        util::capture(std::process::Command::new("rustup").args(["toolchain", "list"]))?;
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        return Err(Error::Check {
            check: "metrics".into(),
            problems: vec!["no nightly toolchain (`rustup toolchain install nightly`)".into()],
        });
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let mut docs = BTreeMap::new();
    for name in libs {
        let mut cmd = util::cargo_toolchain(root, "nightly");
        cmd.args(["rustdoc", "-q", "-p", name, "--lib", "--all-features", "--"])
            .args(["-Z", "unstable-options", "--output-format", "json"])
            .env("CARGO_TARGET_DIR", &target);
        println!("[metrics] $ {}", util::display(&cmd));
        if let Err(err) = util::run(&mut cmd) {
            // A crate that does not build (say, mid-edit) gets dashes, not the whole table lost.
            eprintln!("[metrics] {name}: no public-item count: {err}");
            continue;
        }
        let ident = name.replace('-', "_");
        let file = target.join("doc").join(format!("{ident}.json"));
        let text =
            std::fs::read_to_string(&file).map_err(|e| Error::io("cannot read", &file, e))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| Error::Check {
            check: "metrics".into(),
            problems: vec![format!("{}: not JSON: {e}", file.display())],
        })?;
        docs.insert(ident, value);
    }
    Ok(docs)
}

/// An id as a map key (rustdoc JSON ids are numbers now, strings in older formats).
fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The public paths of every item reachable from crate `krate`'s root.
fn public_paths(docs: &BTreeMap<String, Value>, krate: &str) -> BTreeMap<Key, Vec<String>> {
    let mut walk = Walk {
        docs,
        paths: BTreeMap::new(),
        stack: Vec::new(),
    };
    if let Some(root) = docs[krate].get("root").and_then(id_key) {
        walk.module(&(krate.to_owned(), root), krate);
    }
    walk.paths
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
        .collect()
}

struct Walk<'a> {
    docs: &'a BTreeMap<String, Value>,
    paths: BTreeMap<Key, BTreeSet<String>>,
    /// Modules being walked, so a module re-exporting an ancestor ends.
    stack: Vec<Key>,
}

impl Walk<'_> {
    fn item(&self, key: &Key) -> Option<&Value> {
        self.docs.get(&key.0)?.get("index")?.get(&key.1)
    }

    /// The key of `id` as seen from crate `krate`: its own item, or one of another workspace
    /// crate found by path, or an item of a crate outside the workspace.
    fn resolve(&self, krate: &str, id: &Value) -> Option<Key> {
        let id = id_key(id)?;
        let doc = self.docs.get(krate)?;
        if doc["index"].get(&id).is_some() {
            return Some((krate.to_owned(), id));
        }
        let summary = doc["paths"].get(&id)?;
        let path: Vec<&str> = summary["path"]
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let crate_id = id_key(&summary["crate_id"])?;
        let other = doc["external_crates"].get(&crate_id)?["name"].as_str()?;
        let Some(other_doc) = self.docs.get(other) else {
            return Some((other.to_owned(), path.join("::")));
        };
        if path.len() == 1 {
            return Some((other.to_owned(), id_key(&other_doc["root"])?));
        }
        let found = other_doc["paths"].as_object()?.iter().find(|(_, s)| {
            id_key(&s["crate_id"]).as_deref() == Some("0")
                && s["path"].as_array().is_some_and(|p| {
                    p.len() == path.len() && p.iter().zip(&path).all(|(a, b)| a == b)
                })
        })?;
        Some((other.to_owned(), found.0.clone()))
    }

    fn module(&mut self, key: &Key, prefix: &str) {
        if self.stack.contains(key) || self.stack.len() > 12 {
            return;
        }
        let Some(children) = self
            .item(key)
            .and_then(|m| m["inner"]["module"]["items"].as_array())
            .cloned()
        else {
            return;
        };
        self.stack.push(key.clone());
        for child in &children {
            if let Some(child) = id_key(child) {
                self.child(&(key.0.clone(), child), prefix);
            }
        }
        self.stack.pop();
    }

    fn child(&mut self, key: &Key, prefix: &str) {
        let Some(item) = self.item(key).cloned() else {
            return;
        };
        if item["visibility"] != "public" {
            return;
        }
        let inner = &item["inner"];
        if let Some(import) = inner.get("use") {
            let Some(target) = self.resolve(&key.0, &import["id"]) else {
                return;
            };
            if import["is_glob"] == true {
                if self.stack.contains(&target) {
                    return;
                }
                let children = self
                    .item(&target)
                    .and_then(|m| m["inner"]["module"]["items"].as_array())
                    .cloned()
                    .unwrap_or_default();
                self.stack.push(target.clone());
                for child in children.iter().filter_map(id_key) {
                    self.child(&(target.0.clone(), child), prefix);
                }
                self.stack.pop();
                return;
            }
            let path = format!("{prefix}::{}", import["name"].as_str().unwrap_or_default());
            self.paths
                .entry(target.clone())
                .or_default()
                .insert(path.clone());
            self.module(&target, &path);
            return;
        }
        let path = format!("{prefix}::{}", item["name"].as_str().unwrap_or_default());
        self.paths
            .entry(key.clone())
            .or_default()
            .insert(path.clone());
        if inner.get("module").is_some() {
            self.module(key, &path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A fake crate `a`: `pub mod m { pub struct S; }`, `pub use m::S;`, `pub use m::*;` (S a
    /// third time) and a private `mod p { pub struct Q; }` re-exported as `pub use p::Q`;
    /// crate `b` re-exports `a` whole as `pub use a as aa`.
    fn docs() -> BTreeMap<String, Value> {
        let module = |id: u32, name: &str, items: &[u32], vis: &str| {
            json!({"id": id, "name": name, "visibility": vis,
                   "inner": {"module": {"items": items, "is_crate": id == 0}}})
        };
        let strukt = |id: u32, name: &str| json!({"id": id, "name": name, "visibility": "public", "inner": {"struct": {}}});
        let import = |id: u32, name: &str, target: u32, glob: bool| {
            json!({"id": id, "name": null, "visibility": "public",
                   "inner": {"use": {"name": name, "id": target, "is_glob": glob, "source": name}}})
        };
        let a = json!({
            "root": 0,
            "index": {
                "0": module(0, "a", &[1, 3, 4, 5, 6], "public"),
                "1": module(1, "m", &[2], "public"),
                "2": strukt(2, "S"),
                "3": import(3, "S", 2, false),
                "4": import(4, "m", 1, true),
                "5": module(5, "p", &[7], "crate"),
                "6": import(6, "Q", 7, false),
                "7": strukt(7, "Q"),
            },
            "paths": {"0": {"crate_id": 0, "path": ["a"]}, "2": {"crate_id": 0, "path": ["a", "m", "S"]}},
            "external_crates": {},
        });
        let b = json!({
            "root": 0,
            "index": {"0": module(0, "b", &[1], "public"), "1": import(1, "aa", 9, false)},
            "paths": {"9": {"crate_id": 1, "path": ["a"]}},
            "external_crates": {"1": {"name": "a"}},
        });
        BTreeMap::from([("a".to_owned(), a), ("b".to_owned(), b)])
    }

    #[test]
    fn counts_items_and_their_public_paths() {
        let docs = docs();
        let a = public_paths(&docs, "a");
        let s = &a[&("a".to_owned(), "2".to_owned())];
        assert_eq!(s, &["a::S", "a::m::S"]);
        assert_eq!(a.len(), 3, "m, S, Q: {a:?}");
        assert_eq!(a.values().filter(|p| p.len() >= 2).count(), 1);
        // Through the whole-crate re-export: `b::aa` itself and a's three items.
        let b = public_paths(&docs, "b");
        assert_eq!(b.len(), 4, "{b:?}");
        assert_eq!(
            b[&("a".to_owned(), "2".to_owned())],
            ["b::aa::S", "b::aa::m::S"]
        );
    }

    #[test]
    fn table_has_a_total_and_dashes_for_binaries() {
        let rows = [
            Row {
                name: "x".into(),
                lines: 10,
                items: Some(3),
                two_paths: Some(1),
                cycles: 1,
                most_paths: vec![],
                multi: vec![],
            },
            Row {
                name: "xtask".into(),
                lines: 5,
                cycles: 2,
                ..Row::default()
            },
        ];
        let t = table(&rows);
        assert!(t.contains("| x | 10 | 3 | 1 | 1 |"), "{t}");
        assert!(t.contains("| xtask | 5 | – | – | 2 |"), "{t}");
        assert!(t.contains("| **total** | 15 | 3 | 1 | 3 |"), "{t}");
    }

    #[test]
    fn counts_non_blank_lines() {
        let dir = std::env::temp_dir().join(format!("xtask-metrics-{}", std::process::id()));
        util::mkdir(&dir.join("sub")).unwrap();
        util::write(&dir.join("a.rs"), "fn a() {}\n\n   \n// c\n").unwrap();
        util::write(&dir.join("sub/b.rs"), "x\ny\n").unwrap();
        util::write(&dir.join("notes.md"), "z\n").unwrap();
        assert_eq!(rust_lines(&dir).unwrap(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
