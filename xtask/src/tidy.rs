//! `cargo xtask tidy`: checks that keep the workspace's shape honest.
//!
//! - **Layering.** The guideloom crates form a strict order, [`LAYERS`]; a crate may depend
//!   (normal, build or dev) only on crates strictly below it. Checked with `cargo tree` over all
//!   features and targets, so an optional or platform-specific edge counts too.
//! - **A light IO core.** `guideloom-io`'s default build pulls in none of [`IO_FORBIDDEN`]: a
//!   backend author who wants only the traits must not compile an HTTP stack.
//! - **Manifests.** Every crate under `crates/` lives in a folder named after its package, has a
//!   description, opts into the workspace lints (`[lints] workspace = true`) and has a layer
//!   (or is one of the [`DEV_LEAVES`]).
//! - **Dev-only leaves.** A crate of [`DEV_LEAVES`] (the bench harness, the fault proxy)
//!   depends on no layer crate, and layer crates use it only as a dev-dependency, so it bends
//!   no layer order.
//! - **No import cycles between modules** of any crate (and of this one): see
//!   [`crate::modgraph`] for what counts and for the allow-list of cycles issue 11 removes.
//!
//! Also runs as a test (`cargo test -p xtask`), so a plain test run catches a violation too.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};
use crate::util;

/// The guideloom crates, lowest layer first. A crate may depend only on crates before it.
/// Crates that do not exist yet are simply absent from the workspace.
pub(crate) const LAYERS: &[&str] = &[
    "guideloom-io",
    // Beside guideloom-format (it depends only on io); placed below it so the format and
    // publish layers may use it to read ArrayRecord shards.
    "guideloom-arrayrecord",
    "guideloom-format",
    // Arrow batches from records and records from batches: the format's schemas only; below
    // publish so that no reader of roots needs arrow-rs.
    "guideloom-arrow",
    "guideloom-publish",
    // The storages (directories of numbered shards): above publish because `convert`
    // migrates a stream storage into a root's stream snapshot; below the facade, which
    // re-exports them.
    "guideloom-storage",
    "guideloom",
    // Importers and exporters: write through the facade's publisher, read through its
    // datasets; the CLI and the Python package use them.
    "guideloom-import",
    // The read-only web viewer (`guideloom serve`) and its HTML renderers: reads roots
    // through the facade; the CLI serves it and the Python package may call its renderers.
    "guideloom-view",
    "guideloom-cli",
    // The Python bindings sit beside the CLI at the top; above it in this list only because
    // the order is linear (it depends on no CLI code, and nothing depends on it).
    "guideloom-python",
];

/// Internal helper crates outside [`LAYERS`]: they depend on no layer crate, and a layer crate
/// may use them only as dev-dependencies (its benches and tests), never in its library.
pub(crate) const DEV_LEAVES: &[&str] = &["guideloom-benchkit", "guideloom-faultproxy"];

/// Packages `guideloom-io` must not pull in with default features.
pub(crate) const IO_FORBIDDEN: &[&str] = &["hyper", "object_store"];

/// A workspace package, as far as tidy cares.
#[derive(Debug)]
struct Package {
    name: String,
    manifest: std::path::PathBuf,
    description: Option<String>,
    /// Direct dependencies: `(name, kind)`, kind `None` for normal ones.
    deps: Vec<(String, Option<String>)>,
}

/// Runs every check; returns one line per check passed, or every problem found.
pub(crate) fn run(root: &Path) -> Result<Vec<String>> {
    let packages = workspace_packages(root)?;
    let mut report = Vec::new();
    let mut problems = Vec::new();

    check_manifests(root, &packages, &mut report, &mut problems);
    check_dev_leaves(&packages, &mut report, &mut problems);
    let names: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    check_layering(root, &names, &mut report, &mut problems)?;
    if names.contains("guideloom-io") {
        check_light_io(root, &mut report, &mut problems)?;
    } else {
        problems.push("guideloom-io is not a workspace member".into());
    }
    crate::modgraph::check(root, &mut report, &mut problems)?;

    if problems.is_empty() {
        Ok(report)
    } else {
        Err(Error::Check {
            check: "tidy".into(),
            problems,
        })
    }
}

fn workspace_packages(root: &Path) -> Result<Vec<Package>> {
    let value = util::cargo_metadata(root)?;
    let packages = value["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|p| Package {
            name: p["name"].as_str().unwrap_or_default().to_owned(),
            manifest: p["manifest_path"].as_str().unwrap_or_default().into(),
            description: p["description"]
                .as_str()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
            deps: p["dependencies"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|d| {
                    (
                        d["name"].as_str().unwrap_or_default().to_owned(),
                        d["kind"].as_str().map(str::to_owned),
                    )
                })
                .collect(),
        })
        .collect();
    Ok(packages)
}

fn check_manifests(
    root: &Path,
    packages: &[Package],
    report: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    let crates_dir = root.join("crates");
    let mut checked = 0;
    for package in packages {
        let Some(dir) = package.manifest.parent() else {
            continue;
        };
        if dir.parent() != Some(crates_dir.as_path()) {
            continue;
        }
        checked += 1;
        let name = &package.name;
        let folder = dir.file_name().map(|f| f.to_string_lossy().into_owned());
        if folder.as_deref() != Some(name.as_str()) {
            problems.push(format!(
                "crates/{}: folder name differs from package name `{name}`",
                folder.unwrap_or_default()
            ));
        }
        if package.description.is_none() {
            problems.push(format!("{name}: Cargo.toml has no `description`"));
        }
        match std::fs::read_to_string(&package.manifest) {
            Ok(text) if uses_workspace_lints(&text) => {}
            Ok(_) => problems.push(format!(
                "{name}: Cargo.toml lacks `[lints]` with `workspace = true`"
            )),
            Err(e) => problems.push(format!("{name}: cannot read Cargo.toml: {e}")),
        }
        if !LAYERS.contains(&name.as_str()) && !DEV_LEAVES.contains(&name.as_str()) {
            problems.push(format!(
                "{name}: not in the layer order; add it to LAYERS in xtask/src/tidy.rs \
                 and to docs/ARCHITECTURE.md"
            ));
        }
    }
    report.push(format!(
        "manifests: {checked} crate(s) under crates/ named after their folder, described, on workspace lints"
    ));
}

/// Problems with `package`'s direct dependencies on [`DEV_LEAVES`] and [`LAYERS`]: a dev leaf
/// may depend on no layer crate (nor another leaf), a layer crate on a leaf only as a
/// dev-dependency. Direct edges suffice: only workspace crates can depend on a leaf, and each
/// is checked itself.
fn dev_leaf_violations(package: &str, deps: &[(String, Option<String>)]) -> Vec<String> {
    let is_leaf = DEV_LEAVES.contains(&package);
    let is_layer = LAYERS.contains(&package);
    deps.iter()
        .filter_map(|(dep, kind)| {
            let dep_is_leaf = DEV_LEAVES.contains(&dep.as_str());
            let dep_is_layer = LAYERS.contains(&dep.as_str());
            if is_leaf && (dep_is_layer || dep_is_leaf) {
                Some(format!(
                    "dev leaf: {package} depends on {dep}; it must depend on no guideloom crate"
                ))
            } else if is_layer && dep_is_leaf && kind.as_deref() != Some("dev") {
                Some(format!(
                    "dev leaf: {package} depends on {dep} as a {} dependency; only \
                     [dev-dependencies] may use it",
                    kind.as_deref().unwrap_or("normal")
                ))
            } else {
                None
            }
        })
        .collect()
}

fn check_dev_leaves(packages: &[Package], report: &mut Vec<String>, problems: &mut Vec<String>) {
    let mut users = Vec::new();
    for package in packages {
        problems.extend(dev_leaf_violations(&package.name, &package.deps));
        if LAYERS.contains(&package.name.as_str())
            && package
                .deps
                .iter()
                .any(|(d, _)| DEV_LEAVES.contains(&d.as_str()))
        {
            users.push(package.name.as_str());
        }
    }
    report.push(format!(
        "dev leaves: [{}] depend on no guideloom crate; used as dev-dependency only by [{}]",
        DEV_LEAVES.join(", "),
        users.join(", ")
    ));
}

/// Whether a Cargo.toml has a `[lints]` table containing `workspace = true`.
fn uses_workspace_lints(manifest: &str) -> bool {
    let mut in_lints = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.starts_with('[') {
            in_lints = line == "[lints]";
        } else if in_lints
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "workspace"
            && value.trim() == "true"
        {
            return true;
        }
    }
    false
}

/// Package names in `cargo tree --prefix none --format {p}` output (`name vX.Y.Z (...)`).
fn tree_names(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The guideloom crates among `deps` (other than layer `layer` itself), and a problem for each
/// that is not strictly lower.
fn layer_violations(layer: usize, deps: &BTreeSet<String>) -> (Vec<&'static str>, Vec<String>) {
    let name = LAYERS[layer];
    let ours: Vec<&'static str> = LAYERS
        .iter()
        .copied()
        .filter(|c| *c != name && deps.contains(*c))
        .collect();
    let problems = ours
        .iter()
        .filter(|dep| {
            LAYERS
                .iter()
                .position(|c| c == *dep)
                .is_none_or(|l| l >= layer)
        })
        .map(|dep| {
            format!(
                "layering: {name} depends on {dep}, which is not a lower layer (order: {})",
                LAYERS.join(" < ")
            )
        })
        .collect();
    (ours, problems)
}

/// Which of [`IO_FORBIDDEN`] appear among `deps`.
fn forbidden_in_io(deps: &BTreeSet<String>) -> Vec<&'static str> {
    IO_FORBIDDEN
        .iter()
        .copied()
        .filter(|c| deps.contains(*c))
        .collect()
}

fn check_layering(
    root: &Path,
    members: &BTreeSet<&str>,
    report: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Result<()> {
    let present: Vec<&str> = LAYERS
        .iter()
        .copied()
        .filter(|c| members.contains(c))
        .collect();
    for (layer, name) in LAYERS.iter().enumerate() {
        if !members.contains(name) {
            continue;
        }
        let output = util::capture(util::cargo(root).args([
            "tree",
            "-p",
            name,
            "-e",
            "normal,build,dev",
            "--all-features",
            "--target",
            "all",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ]))?;
        let deps = tree_names(&output);
        let (ours, found) = layer_violations(layer, &deps);
        problems.extend(found);
        report.push(format!("layering: {name} depends on [{}]", ours.join(", ")));
    }
    report.push(format!(
        "layering: order {} holds for the {} crate(s) present",
        LAYERS.join(" < "),
        present.len()
    ));
    Ok(())
}

fn check_light_io(root: &Path, report: &mut Vec<String>, problems: &mut Vec<String>) -> Result<()> {
    let output = util::capture(util::cargo(root).args([
        "tree",
        "-p",
        "guideloom-io",
        "-e",
        "normal",
        "--target",
        "all",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]))?;
    let deps = tree_names(&output);
    let found = forbidden_in_io(&deps);
    if found.is_empty() {
        report.push(format!(
            "light core: guideloom-io's default build ({} packages) pulls in none of [{}]",
            deps.len(),
            IO_FORBIDDEN.join(", ")
        ));
    } else {
        problems.push(format!(
            "light core: guideloom-io's default build pulls in [{}]; put them behind a cargo feature",
            found.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_passes_on_this_workspace() {
        match run(&util::repo_root()) {
            Ok(report) => assert!(report.iter().any(|l| l.starts_with("light core"))),
            Err(err) => panic!("{err}"),
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn layering_accepts_lower_and_rejects_higher_layers() {
        let publish = LAYERS
            .iter()
            .position(|c| *c == "guideloom-publish")
            .unwrap();
        let (ours, problems) = layer_violations(
            publish,
            &set(&[
                "guideloom-publish",
                "guideloom-io",
                "guideloom-format",
                "bytes",
            ]),
        );
        assert_eq!(ours, ["guideloom-io", "guideloom-format"]);
        assert!(problems.is_empty(), "{problems:?}");

        let (_, problems) = layer_violations(0, &set(&["guideloom-io", "guideloom-format"]));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("guideloom-io depends on guideloom-format"));

        let facade = LAYERS.iter().position(|c| *c == "guideloom").unwrap();
        let (_, problems) = layer_violations(facade, &set(&["guideloom-cli", "guideloom-io"]));
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    fn deps(list: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        list.iter()
            .map(|(n, k)| ((*n).to_owned(), k.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn dev_leaves_stay_dev_only_leaves() {
        let leaf = DEV_LEAVES[0];
        assert!(
            dev_leaf_violations(leaf, &deps(&[("criterion", None), ("rand", None)])).is_empty()
        );
        let p = dev_leaf_violations(leaf, &deps(&[("guideloom-io", Some("dev"))]));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("must depend on no guideloom crate"));

        let ok = deps(&[("guideloom-io", None), (leaf, Some("dev"))]);
        assert!(dev_leaf_violations("guideloom-format", &ok).is_empty());
        for kind in [None, Some("build")] {
            let p = dev_leaf_violations("guideloom-format", &deps(&[(leaf, kind)]));
            assert_eq!(p.len(), 1, "{kind:?}: {p:?}");
            assert!(p[0].contains("only [dev-dependencies]"));
        }
        // Crates outside the layers (xtask, the integration tests) are not constrained here.
        assert!(dev_leaf_violations("guideloom-tests", &deps(&[(leaf, None)])).is_empty());
    }

    #[test]
    fn light_core_check_names_the_heavy_crates() {
        assert!(forbidden_in_io(&set(&["bytes", "tokio", "hyper-util"])).is_empty());
        assert_eq!(
            forbidden_in_io(&set(&["bytes", "hyper", "object_store"])),
            ["hyper", "object_store"]
        );
    }

    #[test]
    fn finds_workspace_lints_table() {
        assert!(uses_workspace_lints(
            "[package]\nname = \"a\"\n\n[lints]\nworkspace = true\n"
        ));
        assert!(uses_workspace_lints(
            "[lints] # shared\n  workspace   =   true  # yes\n[dependencies]\n"
        ));
        assert!(!uses_workspace_lints(
            "[package]\nworkspace = true\n[lints]\n"
        ));
        assert!(!uses_workspace_lints(
            "[lints]\n[dependencies]\nworkspace = true\n"
        ));
        assert!(!uses_workspace_lints("[lints.rust]\nworkspace = true\n"));
    }

    #[test]
    fn reads_package_names_from_tree_output() {
        let out = "guideloom-io v0.1.0 (/w/crates/guideloom-io)\nbytes v1.12.2\n\
                   hyper v1.7.0 (*)\n\nobject_store v0.14.2\n";
        let names = tree_names(out);
        assert!(names.contains("hyper"));
        assert!(names.contains("object_store"));
        assert!(names.contains("guideloom-io"));
        assert!(!names.contains("v1.7.0"));
    }
}
