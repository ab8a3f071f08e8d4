//! Import cycles between the modules of a crate, for `cargo xtask tidy` and `metrics`.
//!
//! **The tree.** From each crate root (`src/lib.rs`, `src/main.rs`; two roots in one crate are
//! two trees) the `mod name;` declarations are followed to `name.rs` or `name/mod.rs` (beside
//! a `lib.rs`/`main.rs`/`mod.rs`, else in the folder named after the file); inline
//! `mod name { ... }` blocks are modules of their file. `#[path = "file.rs"]` on a `mod` is
//! followed, relative to the declaring file's folder (and the file it names then holds its
//! children in that folder, as a `mod.rs` does).
//!
//! **The edges.** Module A depends on module B when A names an item of B: a `use` leaf (nested
//! groups flattened, `pub use` included) or a path starting with `crate::`, `super::` or
//! `self::` anywhere else in A's code ([`scan`] skips comments and literals). A path is
//! resolved to the module that *defines* the item: through `use`/`pub use` re-exports (so
//! `crate::Root`, re-exported by `lib.rs`, points at the module defining `Root`) and glob
//! re-exports whose source defines the name. Paths into other crates are not edges.
//!
//! **The rule.** An edge between a module and its own ancestor or descendant is not a
//! dependency between siblings — a child using its parent's items, or a parent declaring and
//! re-exporting its children, is how a module tree works. Every other edge A → B is lifted to
//! the two children of their closest common ancestor that contain A and B (`a::x::y` →
//! `b::z` becomes `a → b`; `a::x → a::y` stays). A **cycle** is a strongly connected
//! component of two or more modules in one such sibling graph. Each is reported with the
//! files whose edges form it and one witness loop (file:line and path of each step).
//!
//! Cycles present when the check was added are listed in [`ALLOWED_CYCLES`] (issue 11 is to
//! remove them): a cycle whose modules are all in one allowed entry passes, any other fails.

pub(crate) mod scan;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use scan::{Leaf, ModItems};

/// Known cycles, by tree label and member modules (`::`-joined paths below the crate root).
/// Issue 11 removed every cycle the check found when it was added, so the list is empty: a
/// new cycle fails tidy. Should one ever have to be tolerated, add an entry naming the issue
/// that removes it; a cycle whose modules are all in one entry passes.
pub(crate) const ALLOWED_CYCLES: &[(&str, &[&str])] = &[];

/// One module of a tree.
#[derive(Debug)]
struct Module {
    /// The file it is written in, relative to the repository root.
    file: String,
    items: ModItems,
}

/// A crate's module tree: modules by path below the crate root (`[]` is the root).
#[derive(Debug)]
pub(crate) struct Tree {
    /// `guideloom-cli` for a library, `guideloom-cli (bin)` for a binary beside one.
    pub(crate) label: String,
    modules: BTreeMap<Vec<String>, Module>,
    /// `mod name;` declarations without a file (the crate does not compile).
    pub(crate) missing: Vec<String>,
}

/// One cycle: sibling modules that import each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    pub(crate) label: String,
    /// The member modules, `::`-joined paths below the crate root, sorted.
    pub(crate) members: Vec<String>,
    /// Files whose imports make the cycle (relative to the repository root), sorted.
    pub(crate) files: Vec<String>,
    /// One loop through the members: `file:line path` for each step.
    pub(crate) witness: Vec<String>,
}

impl Cycle {
    /// Whether [`ALLOWED_CYCLES`] (or `allowed`) tolerates this cycle.
    pub(crate) fn allowed_by(&self, allowed: &[(&str, &[&str])]) -> bool {
        allowed.iter().any(|(label, members)| {
            *label == self.label && self.members.iter().all(|m| members.contains(&m.as_str()))
        })
    }

    /// A one-paragraph description for tidy's report.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}: modules [{}] import each other; files: {}; loop: {}",
            self.label,
            self.members.join(", "),
            self.files.join(" "),
            self.witness.join(" -> ")
        )
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io("cannot read", path, e)
}

/// The trees of every crate under `root/crates/` and of `root/xtask`.
pub(crate) fn workspace_trees(root: &Path) -> Result<Vec<Tree>> {
    let crates = root.join("crates");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .map_err(io_err(&crates))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs.push(root.join("xtask"));
    let mut trees = Vec::new();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lib = dir.join("src/lib.rs");
        let main = dir.join("src/main.rs");
        if lib.is_file() {
            trees.push(Tree::load(root, &name, &lib)?);
        }
        if main.is_file() {
            let label = if lib.is_file() {
                format!("{name} (bin)")
            } else {
                name.clone()
            };
            trees.push(Tree::load(root, &label, &main)?);
        }
    }
    Ok(trees)
}

/// Every cycle of every tree.
pub(crate) fn workspace_cycles(root: &Path) -> Result<Vec<Cycle>> {
    Ok(workspace_trees(root)?
        .iter()
        .flat_map(Tree::cycles)
        .collect())
}

/// The tidy check: fails on a cycle [`ALLOWED_CYCLES`] does not cover.
pub(crate) fn check(
    root: &Path,
    report: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<()> {
    let trees = workspace_trees(root)?;
    let modules: usize = trees.iter().map(Tree::len).sum();
    let cycles: Vec<Cycle> = trees.iter().flat_map(Tree::cycles).collect();
    check_cycles(&cycles, ALLOWED_CYCLES, problems);
    for tree in &trees {
        problems.extend(tree.missing.iter().map(|m| format!("module tree: {m}")));
    }
    let allowed = cycles
        .iter()
        .filter(|c| c.allowed_by(ALLOWED_CYCLES))
        .count();
    report.push(format!(
        "module cycles: {} tree(s), {modules} modules, {} cycle(s) ({allowed} allow-listed for issue 11)",
        trees.len(),
        cycles.len()
    ));
    for cycle in cycles.iter().filter(|c| c.allowed_by(ALLOWED_CYCLES)) {
        report.push(format!("module cycles: allowed: {}", cycle.describe()));
    }
    for (label, members) in ALLOWED_CYCLES {
        let now: BTreeSet<&str> = cycles
            .iter()
            .filter(|c| c.label == *label && c.allowed_by(&[(label, members)]))
            .flat_map(|c| c.members.iter().map(String::as_str))
            .collect();
        if now.len() < members.len() {
            report.push(format!(
                "module cycles: allow-list entry {label} [{}] is larger than today's cycles \
                 [{}]: shrink it in xtask/src/modgraph/mod.rs",
                members.join(", "),
                now.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}

/// Appends a problem for each cycle `allowed` does not cover.
fn check_cycles(cycles: &[Cycle], allowed: &[(&str, &[&str])], problems: &mut Vec<String>) {
    for cycle in cycles.iter().filter(|c| !c.allowed_by(allowed)) {
        problems.push(format!("module cycle: {}", cycle.describe()));
    }
}

/// A resolved import: where it is written and what it names.
#[derive(Debug, Clone)]
struct Edge {
    from: Vec<String>,
    to: Vec<String>,
    file: String,
    line: u32,
    text: String,
}

impl Tree {
    /// Reads the tree rooted at `root_file`; file names are reported relative to `repo`.
    pub(crate) fn load(repo: &Path, label: &str, root_file: &Path) -> Result<Tree> {
        let mut tree = Tree {
            label: label.to_owned(),
            modules: BTreeMap::new(),
            missing: Vec::new(),
        };
        let mut queue = vec![(Vec::new(), root_file.to_path_buf(), true)];
        while let Some((path, file, owns_dir)) = queue.pop() {
            let text = std::fs::read_to_string(&file).map_err(io_err(&file))?;
            let rel = file
                .strip_prefix(repo)
                .unwrap_or(&file)
                .to_string_lossy()
                .into_owned();
            // Children of this file's modules live in `dir` (plus any inline module path).
            let dir = match (owns_dir, file.parent()) {
                (true, Some(parent)) => parent.to_path_buf(),
                (_, parent) => parent
                    .unwrap_or(Path::new(""))
                    .join(file.file_stem().unwrap_or_default()),
            };
            for (inline, items) in scan::scan(&text) {
                for (child, attr) in &items.file_children {
                    let base = inline.iter().fold(dir.clone(), |d, s| d.join(s));
                    let flat = base.join(format!("{child}.rs"));
                    let nested = base.join(child).join("mod.rs");
                    let here = file.parent().unwrap_or(Path::new(""));
                    let attr = attr.as_ref().map(|p| {
                        inline
                            .iter()
                            .fold(here.to_path_buf(), |d, s| d.join(s))
                            .join(p)
                    });
                    let (child_file, child_owns) = if let Some(attr) = attr {
                        if !attr.is_file() {
                            tree.missing.push(format!(
                                "{rel}: `#[path]` of `mod {child};` names {}, which is not a file",
                                attr.display()
                            ));
                            continue;
                        }
                        (attr, true)
                    } else if flat.is_file() {
                        (flat, false)
                    } else if nested.is_file() {
                        (nested, true)
                    } else {
                        tree.missing.push(format!(
                            "{rel}: `mod {child};` has neither {} nor {}",
                            flat.display(),
                            nested.display()
                        ));
                        continue;
                    };
                    let mut child_path = path.clone();
                    child_path.extend(inline.iter().cloned());
                    child_path.push(child.clone());
                    queue.push((child_path, child_file, child_owns));
                }
                let mut full = path.clone();
                full.extend(inline);
                tree.modules.insert(
                    full,
                    Module {
                        file: rel.clone(),
                        items,
                    },
                );
            }
        }
        Ok(tree)
    }

    /// Turns a path as written in module `cur` into a path from the crate root, or `None` if
    /// it leaves the crate.
    fn absolute(&self, cur: &[String], segs: &[String], depth: usize) -> Option<Vec<String>> {
        let first = segs.first()?;
        match first.as_str() {
            "crate" => Some(segs[1..].to_vec()),
            "self" => Some([cur, &segs[1..]].concat()),
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                let base = cur.get(..cur.len().checked_sub(ups)?)?;
                Some([base, &segs[ups..]].concat())
            }
            "::" => None,
            name => {
                let child = [cur, &segs[..1]].concat();
                if self.modules.contains_key(&child) {
                    return Some([cur, segs].concat());
                }
                // A name brought into `cur` by a `use` (`use crate::registry; registry::x`).
                let import = self.import(cur, name)?;
                if depth > 8 {
                    return None;
                }
                let head = self.absolute(cur, &import.segs, depth + 1)?;
                Some([&head[..], &segs[1..]].concat())
            }
        }
    }

    fn import(&self, module: &[String], name: &str) -> Option<&scan::Use> {
        self.modules.get(module)?.items.uses.iter().find(|u| {
            u.leaf == Leaf::Name(name.to_owned()) && u.segs.last().is_some_and(|s| s != "self")
        })
    }

    /// The module that defines the item at absolute path `abs` (or the module `abs` is).
    fn locate(&self, abs: &[String], depth: usize) -> Option<Vec<String>> {
        let k = (0..=abs.len())
            .rev()
            .find(|k| self.modules.contains_key(&abs[..*k]))?;
        let (module, rest) = abs.split_at(k);
        let Some(name) = rest.first() else {
            return Some(module.to_vec());
        };
        if depth > 8 {
            return Some(module.to_vec());
        }
        let items = &self.modules[module].items;
        if let Some(import) = self.import(module, name) {
            // A re-export: follow it (out of the crate: no edge).
            let target = self.absolute(module, &import.segs, depth + 1)?;
            return self.locate(&[&target[..], &rest[1..]].concat(), depth + 1);
        }
        if items.defs.contains(name) {
            return Some(module.to_vec());
        }
        for glob in items.uses.iter().filter(|u| u.leaf == Leaf::Glob) {
            let Some(source) = self.absolute(module, &glob.segs, depth + 1) else {
                continue;
            };
            if let Some(src) = self.modules.get(&source)
                && (src.items.defs.contains(name) || self.import(&source, name).is_some())
            {
                return self.locate(&[&source[..], rest].concat(), depth + 1);
            }
        }
        Some(module.to_vec())
    }

    /// Every import of every module, resolved to the defining module.
    fn edges(&self) -> Vec<Edge> {
        let mut edges = Vec::new();
        for (path, module) in &self.modules {
            let written = module
                .items
                .uses
                .iter()
                .map(|u| (&u.segs, u.line, u.leaf == Leaf::Glob))
                .chain(module.items.refs.iter().map(|r| (&r.segs, r.line, false)));
            for (segs, line, glob) in written {
                let Some(abs) = self.absolute(path, segs, 0) else {
                    continue;
                };
                let target = if glob {
                    self.modules.contains_key(&abs).then_some(abs)
                } else {
                    self.locate(&abs, 0)
                };
                if let Some(to) = target {
                    edges.push(Edge {
                        from: path.clone(),
                        to,
                        file: module.file.clone(),
                        line,
                        text: segs.join("::") + if glob { "::*" } else { "" },
                    });
                }
            }
        }
        edges
    }

    /// The cycles of this tree (see the module docs for the rule).
    pub(crate) fn cycles(&self) -> Vec<Cycle> {
        // Sibling graphs by parent: lifted edge (a, b) -> the edges behind it.
        let mut graphs: BTreeMap<Vec<String>, Graph> = BTreeMap::new();
        for edge in self.edges() {
            let common = edge
                .from
                .iter()
                .zip(&edge.to)
                .take_while(|(a, b)| a == b)
                .count();
            if common == edge.from.len() || common == edge.to.len() {
                continue; // the same module, an ancestor or a descendant
            }
            let key = (edge.from[common].clone(), edge.to[common].clone());
            graphs
                .entry(edge.from[..common].to_vec())
                .or_default()
                .entry(key)
                .or_default()
                .push(edge);
        }
        let mut cycles = Vec::new();
        for (parent, graph) in &graphs {
            for scc in components(graph) {
                let member = |m: &String| [parent.clone(), vec![m.clone()]].concat().join("::");
                let inside = |(a, b): &(String, String)| scc.contains(a) && scc.contains(b);
                let files: BTreeSet<String> = graph
                    .iter()
                    .filter(|(k, _)| inside(k))
                    .flat_map(|(_, edges)| edges.iter().map(|e| e.file.clone()))
                    .collect();
                let witness = shortest_loop(graph, &scc)
                    .iter()
                    .map(|key| {
                        let e = &graph[key][0];
                        format!("{}:{} {}", e.file, e.line, e.text)
                    })
                    .collect();
                cycles.push(Cycle {
                    label: self.label.clone(),
                    members: scc.iter().map(member).collect(),
                    files: files.into_iter().collect(),
                    witness,
                });
            }
        }
        cycles
    }

    /// Number of modules in the tree.
    pub(crate) fn len(&self) -> usize {
        self.modules.len()
    }
}

type Graph = BTreeMap<(String, String), Vec<Edge>>;

fn successors<'a>(graph: &'a Graph, node: &'a str) -> impl Iterator<Item = &'a String> + 'a {
    graph
        .keys()
        .filter(move |(a, b)| a == node && a != b)
        .map(|(_, b)| b)
}

/// Strongly connected components of two or more nodes (graphs here have a few dozen nodes:
/// mutual reachability is plenty).
fn components(graph: &Graph) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = graph.keys().flat_map(|(a, b)| [a, b]).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for next in successors(graph, n) {
                if seen.insert(next.clone()) {
                    todo.push(next);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !reaches[n].contains(*n) {
            continue;
        }
        let scc: BTreeSet<String> = nodes
            .iter()
            .filter(|m| reaches[n].contains(**m) && reaches[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        done.extend(scc.iter().cloned());
        out.push(scc);
    }
    out
}

/// The shortest loop from the first member of `scc` back to itself, as lifted edges.
fn shortest_loop(graph: &Graph, scc: &BTreeSet<String>) -> Vec<(String, String)> {
    let Some(start) = scc.first() else {
        return Vec::new();
    };
    let mut prev: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    while let Some(n) = queue.pop_front() {
        for next in successors(graph, &n).filter(|m| scc.contains(*m)) {
            if next == start {
                let mut path = vec![(n.clone(), start.clone())];
                let mut at = n.clone();
                while at != *start {
                    let p = prev[&at].clone();
                    path.push((p.clone(), at));
                    at = p;
                }
                path.reverse();
                return path;
            }
            if !prev.contains_key(next) {
                prev.insert(next.clone(), n.clone());
                queue.push_back(next.clone());
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests;
