//! The module map of docs/design/crates.md#crates-and-modules names every module of every
//! workspace crate, and nothing else: each crate has a `### <package>` section whose entries
//! (`- `module`: …` lines, several names allowed before the colon, nested modules as `a/b`)
//! are exactly the crate's module files (`src/**.rs` without `lib.rs`, `main.rs`, `bin/` and
//! `*tests.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{rust_files, workspace_root};

const MAP: &str = "docs/design/crates.md";
const SECTION: &str = "## Crates and modules";

/// The module map: package name to the modules its section names.
pub(super) fn map_of(markdown: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut map = BTreeMap::new();
    let mut in_section = false;
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        if line.starts_with("## ") {
            in_section = line.trim_end() == SECTION;
            current = None;
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some(heading) = line.strip_prefix("### ") {
            let package = heading
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            map.entry(package.clone()).or_insert_with(BTreeSet::new);
            current = Some(package);
            continue;
        }
        let (Some(package), Some(mut rest)) = (&current, line.strip_prefix("- ")) else {
            continue;
        };
        let mut names = Vec::new();
        while let Some(after) = rest.strip_prefix('`') {
            let Some((name, tail)) = after.split_once('`') else {
                break;
            };
            names.push(name.to_owned());
            rest = tail.strip_prefix(", ").unwrap_or(tail);
        }
        if rest.starts_with(':') {
            map.entry(package.clone()).or_default().extend(names);
        }
    }
    map
}

/// The module files of the crate whose sources are in `src`, as `a` and `a/b`.
pub(super) fn module_files(src: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .iter()
        .filter_map(|file| {
            let rel = file
                .strip_prefix(src)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let module = rel.strip_suffix(".rs")?;
            let module = module.strip_suffix("/mod").unwrap_or(module);
            let skip = matches!(module, "lib" | "main")
                || module.starts_with("bin/")
                || module.ends_with("tests");
            (!skip).then(|| module.to_owned())
        })
        .collect()
}

/// The workspace members of the root `Cargo.toml`: (package name, directory).
fn members(root: &Path) -> Vec<(String, String)> {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map_or("", |(list, _)| list);
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .map(|dir| (package_name(&root.join(&dir)), dir))
        .collect()
}

/// The package name in the `Cargo.toml` of the crate in `dir`.
fn package_name(dir: &Path) -> String {
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("read a crate's Cargo.toml");
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("name = "))
        .map(|name| name.trim().trim_matches('"').to_owned())
        .unwrap_or_default()
}

/// What disagrees between the map and the crates in `members` (package, directory) under
/// `root`.
pub(super) fn map_problems(
    root: &Path,
    members: &[(String, String)],
    map: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (package, dir) in members {
        let Some(named) = map.get(package) else {
            problems.push(format!("{package} ({dir}): no `### {package}` section"));
            continue;
        };
        let files = module_files(&root.join(dir).join("src"));
        for missing in files.difference(named) {
            problems.push(format!(
                "{package}: module `{missing}` ({dir}/src) is not in the map"
            ));
        }
        for gone in named.difference(&files) {
            problems.push(format!(
                "{package}: the map names `{gone}`, which has no file in {dir}/src"
            ));
        }
    }
    for package in map.keys().filter(|p| !members.iter().any(|(m, _)| m == *p)) {
        problems.push(format!(
            "{package}: a map section for a crate not in the workspace"
        ));
    }
    problems
}

#[test]
fn the_crates_map_names_every_module_and_only_modules_that_exist() {
    let root = workspace_root();
    let markdown = fs::read_to_string(root.join(MAP)).expect("read the map");
    let members = members(&root);
    assert!(members.len() >= 10, "members: {members:?}");
    let problems = map_problems(&root, &members, &map_of(&markdown));
    assert!(
        problems.is_empty(),
        "{MAP} and the crates disagree (add or remove the `- `module`: …` entries):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_map_check_sees_a_missing_module_an_entry_without_a_file_and_a_missing_crate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    for file in [
        "services/a/src/lib.rs",
        "services/a/src/main.rs",
        "services/a/src/bin/tool.rs",
        "services/a/src/one.rs",
        "services/a/src/one/two.rs",
        "services/a/src/store/mod.rs",
        "services/a/src/store/tests.rs",
        "services/a/src/new.rs",
        "services/a/src/shape_tests.rs",
        "services/b/src/lib.rs",
        "services/c/src/lib.rs",
    ] {
        let path = root.join(file);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, "").expect("write");
    }
    for name in ["a", "b", "c"] {
        let manifest = format!("[package]\nname = \"pacto-{name}\"\n");
        fs::write(
            root.join("services").join(name).join("Cargo.toml"),
            manifest,
        )
        .expect("write");
    }
    let markdown = "# Crates\n\n## Crates and modules\n\n### pacto-a\n\n\
        Intro naming `lib` and `Type`.\n\n- `one`, `one/two`: the leaf and its child\n\
        - `store`: records\n  - `sub`: a nested bullet is no entry\n- `gone`: removed\n\
        - **bold**: not an entry\n\n### pacto-b (bee)\n\n### pacto-x\n\n\
        ## Next section\n\n### pacto-c\n- `late`: outside the section\n";
    let map = map_of(markdown);
    let names: Vec<&str> = map["pacto-a"].iter().map(String::as_str).collect();
    assert_eq!(names, ["gone", "one", "one/two", "store"]);
    let members: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            let dir = format!("services/{name}");
            (package_name(&root.join(&dir)), dir)
        })
        .collect();
    assert_eq!(
        map_problems(root, &members, &map),
        [
            "pacto-a: module `new` (services/a/src) is not in the map",
            "pacto-a: the map names `gone`, which has no file in services/a/src",
            "pacto-c (services/c): no `### pacto-c` section",
            "pacto-x: a map section for a crate not in the workspace",
        ]
    );
}
