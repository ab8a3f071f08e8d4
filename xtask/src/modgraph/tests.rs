use super::*;

/// A fake crate: `files` as (path below `src/`, contents) in a fresh directory.
struct Fake {
    dir: PathBuf,
}

impl Fake {
    fn new(name: &str, files: &[(&str, &str)]) -> Fake {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("xtask-modgraph-{}-{n}-{name}", std::process::id()));
        for (path, text) in files {
            let file = dir.join("src").join(path);
            crate::util::mkdir(file.parent().unwrap()).unwrap();
            crate::util::write(&file, text).unwrap();
        }
        Fake { dir }
    }

    fn cycles(&self) -> Vec<Cycle> {
        Tree::load(&self.dir, "fake", &self.dir.join("src/lib.rs"))
            .unwrap()
            .cycles()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn members(cycles: &[Cycle]) -> Vec<Vec<&str>> {
    cycles
        .iter()
        .map(|c| c.members.iter().map(String::as_str).collect())
        .collect()
}

#[test]
fn a_three_module_cycle_fails_unless_allowed() {
    let fake = Fake::new(
        "cycle",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "b.rs",
                "pub struct B;\npub fn f() {\n    crate::c::g();\n}\n",
            ),
            ("c.rs", "use super::a::A;\npub fn g() {}\n"),
            // Uses the cycle but is not part of it.
            ("d.rs", "use crate::a::A;\nuse crate::c::g;\n"),
        ],
    );
    let cycles = fake.cycles();
    assert_eq!(members(&cycles), [["a", "b", "c"]]);
    let cycle = &cycles[0];
    assert_eq!(cycle.files.len(), 3, "{cycle:?}");
    assert!(cycle.files.iter().all(|f| !f.ends_with("d.rs")));
    assert_eq!(
        cycle.witness,
        [
            "src/a.rs:1 crate::b::B",
            "src/b.rs:3 crate::c::g",
            "src/c.rs:1 super::a::A"
        ]
    );

    let mut problems = Vec::new();
    check_cycles(&cycles, &[], &mut problems);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("[a, b, c]") && problems[0].contains("src/c.rs"));

    let mut problems = Vec::new();
    check_cycles(&cycles, &[("fake", &["a", "b", "c", "x"])], &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    // A cycle that grew past its entry, or one in another tree, is new.
    for allowed in [
        &[("fake", &["a", "b"][..])][..],
        &[("other", &["a", "b", "c"])],
    ] {
        let mut problems = Vec::new();
        check_cycles(&cycles, allowed, &mut problems);
        assert_eq!(problems.len(), 1, "{allowed:?}");
    }
}

#[test]
fn parents_and_children_using_each_other_is_no_cycle() {
    let fake = Fake::new(
        "tree",
        &[
            (
                "lib.rs",
                "mod registry;\nmod reader;\npub use registry::s3::Thing;\npub struct Root;\n\
                 fn f() { registry::resolve(); }\n#[cfg(test)]\nmod tests { use super::*; }\n",
            ),
            (
                "registry/mod.rs",
                "pub(crate) mod s3;\nuse crate::Root;\npub use self::s3::Thing;\n\
                 pub(crate) fn resolve() { s3::build(); }\npub(crate) struct Helper;\n",
            ),
            (
                "registry/s3.rs",
                "use super::Helper;\nuse crate::{Root, registry};\npub struct Thing;\n\
                 pub(crate) fn build() {}\n",
            ),
            // One-way: reader -> registry (through the root's re-export) -> nothing back.
            (
                "reader.rs",
                "use crate::Thing;\n/// Not [`crate::reader`] again.\n",
            ),
        ],
    );
    assert!(fake.cycles().is_empty(), "{:?}", fake.cycles());
}

#[test]
fn a_re_export_at_the_root_is_followed_to_its_module() {
    let fake = Fake::new(
        "reexport",
        &[
            (
                "lib.rs",
                "mod registry;\nmod reader;\npub use registry::s3::*;\n",
            ),
            ("registry/mod.rs", "pub mod s3;\n"),
            // `crate::Thing` is registry::s3's, reached through the root's glob re-export.
            (
                "reader.rs",
                "pub struct Reader;\nfn f(_: crate::Thing) {}\n",
            ),
            (
                "registry/s3.rs",
                "pub struct Thing;\nuse crate::reader::Reader;\n",
            ),
        ],
    );
    assert_eq!(members(&fake.cycles()), [["reader", "registry"]]);
}

#[test]
fn path_attributes_are_followed() {
    let fake = Fake::new(
        "path-attr",
        &[
            ("lib.rs", "mod table;\nmod other;\n"),
            (
                "table.rs",
                "pub struct T;\n#[cfg(test)]\n#[path = \"table_tests.rs\"]\nmod tests;\n",
            ),
            // Reached only through `#[path]`: its import of `other` makes a cycle.
            ("table_tests.rs", "use crate::other::O;\n"),
            ("other.rs", "pub struct O;\nuse crate::table::T;\n"),
        ],
    );
    assert_eq!(members(&fake.cycles()), [["other", "table"]]);
}

#[test]
fn nested_use_groups_are_edges_each() {
    let fake = Fake::new(
        "groups",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\n"),
            (
                "a.rs",
                "use crate::{\n    b::{self, inner::{X as _}},\n    c::*,\n};\nuse crate::e;\npub struct Y;\n",
            ),
            ("b/mod.rs", "pub mod inner;\n"),
            ("b/inner.rs", "pub struct X;\nuse crate::{d, a::{Y}};\n"),
            ("c.rs", "pub fn z() {}\n"),
            // Only in comments and strings: no edge back to `a`.
            (
                "d.rs",
                "// use crate::a::Y;\nconst S: &str = \"crate::a::Y\";\n",
            ),
            ("e.rs", "/* crate::a::Y */\n"),
        ],
    );
    assert_eq!(members(&fake.cycles()), [["a", "b"]]);

    let fake = Fake::new(
        "groups-nested",
        &[
            ("lib.rs", "mod outer;\n"),
            ("outer/mod.rs", "mod p;\nmod q;\n"),
            (
                "outer/p.rs",
                "use super::{q::{deep::{Z}}};\npub struct P;\n",
            ),
            ("outer/q/mod.rs", "pub mod deep;\n"),
            (
                "outer/q/deep.rs",
                "pub struct Z;\nuse crate::outer::{p::{self as pp}};\n",
            ),
        ],
    );
    assert_eq!(members(&fake.cycles()), [["outer::p", "outer::q"]]);
}

#[test]
fn a_missing_module_file_is_reported() {
    let fake = Fake::new(
        "missing",
        &[("lib.rs", "mod gone;\nmod here;\n"), ("here.rs", "")],
    );
    let tree = Tree::load(&fake.dir, "fake", &fake.dir.join("src/lib.rs")).unwrap();
    assert_eq!(tree.len(), 2);
    assert_eq!(tree.missing.len(), 1, "{:?}", tree.missing);
    assert!(tree.missing[0].contains("`mod gone;`"));
}

#[test]
fn every_cycle_in_this_workspace_is_allow_listed() {
    let root = crate::util::repo_root();
    let trees = workspace_trees(&root).unwrap();
    assert!(trees.iter().any(|t| t.label == "guideloom-cli (bin)"));
    assert!(trees.iter().all(|t| t.len() >= 1));
    let mut problems = Vec::new();
    check_cycles(
        &workspace_cycles(&root).unwrap(),
        ALLOWED_CYCLES,
        &mut problems,
    );
    assert!(problems.is_empty(), "{problems:#?}");
}
