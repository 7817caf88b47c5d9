//! The layout rules of docs/design/crates.md#layout-test.
//!
//! Here: rule 5 of "Dependency rules" (inside a crate, module imports point one way: every
//! source file of every workspace crate is a node; a `crate::a::b` (or `super::x`) path in its
//! non-test code is an edge to the deepest module file that path names; a cycle in that graph
//! fails the test, naming its modules) and the citation rule. In `layout/`: only the runtime
//! spawns admin servers, runs watch loops and backs off; public modules are allow-listed with
//! their users; the crates map names every module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

// The other layout rules, one file each.
#[path = "layout/module_map.rs"]
mod module_map;
#[path = "layout/public_modules.rs"]
mod public_modules;
#[path = "layout/runtime_work.rs"]
mod runtime_work;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crates' `src` directories under `services/` and `tests/`.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for group in ["services", "tests"] {
        let Ok(entries) = fs::read_dir(root.join(group)) else {
            continue;
        };
        for entry in entries.flatten() {
            let src = entry.path().join("src");
            if src.is_dir() {
                dirs.push(src);
            }
        }
    }
    dirs.sort();
    dirs
}

/// Module path of a file below `src` (`a/b.rs` and `a/b/mod.rs` are `a::b`); `None` for the
/// crate roots and binaries, which only declare modules.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|p| p != "mod")
        .collect();
    match parts.first().map(String::as_str) {
        None | Some("lib" | "main" | "bin") => None,
        _ => Some(parts.join("::")),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir)
        .expect("read a source directory")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its test module and without comment lines.
fn production_code(text: &str) -> String {
    let end = text.find("\n#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Opened minus closed braces on a line of code, outside string and character literals.
fn brace_balance(code: &str) -> i32 {
    let chars: Vec<char> = code.chars().collect();
    let (mut balance, mut in_string, mut i) = (0, false, 0);
    while i < chars.len() {
        match chars[i] {
            '\\' if in_string => i += 1,
            '"' => in_string = !in_string,
            '\'' if !in_string => {
                // A character literal ('{', '\''): skip it; a lifetime has no closing quote.
                if chars.get(i + 1) == Some(&'\\') {
                    i += chars
                        .get(i + 3..)
                        .and_then(|rest| rest.iter().position(|&c| c == '\''))
                        .map_or(0, |p| p + 3);
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 2;
                }
            }
            '{' if !in_string => balance += 1,
            '}' if !in_string => balance -= 1,
            _ => {}
        }
        i += 1;
    }
    balance
}

/// The code of a file with every `#[cfg(test)]` item, comment line and `use` declaration
/// blanked, each line kept in its place (so that line numbers still point into the file).
fn without_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let code = lines[i].trim();
        let test_item = code == "#[cfg(test)]" || code.starts_with("#[cfg(all(test,");
        let use_item = ["use ", "pub use ", "pub(crate) use "]
            .iter()
            .any(|u| code.starts_with(u));
        if !test_item && !use_item {
            kept.push(if code.starts_with("//") { "" } else { lines[i] });
            i += 1;
            continue;
        }
        // Blank the item: its attributes, then up to the `;` or the brace that closes it.
        let mut depth = 0i32;
        let mut opened = false;
        while i < lines.len() {
            let line = lines[i];
            kept.push("");
            i += 1;
            let code = line.trim();
            if code.starts_with("#[") && !opened {
                continue;
            }
            depth += brace_balance(code);
            opened |= code.contains('{');
            if depth <= 0 && (opened || code.ends_with(';')) {
                break;
            }
        }
    }
    kept.join("\n")
}

/// Every `prefix::a::b` path in `code` (including the members of a `prefix::{a, b::c}` group),
/// without the prefix.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let path: String = after.chars().take_while(|&c| ident(c)).collect();
        let path = path.trim_end_matches(':').to_owned();
        let tail = &after[path.len()..];
        let group_open = if path.is_empty() { "{" } else { "::{" };
        if let Some(group) = tail
            .strip_prefix(group_open)
            .and_then(|g| g.split_once('}'))
        {
            for member in group.0.split(',') {
                let member = member.trim().split(" as ").next().unwrap_or("").trim();
                if !member.is_empty() {
                    let joined = if path.is_empty() {
                        member.to_owned()
                    } else {
                        format!("{path}::{member}")
                    };
                    found.push(joined);
                }
            }
        }
        if !path.is_empty() {
            found.push(path);
        }
        rest = after;
    }
    found
}

/// Every `super::…` path in the code of `module`, made absolute (`super::super::x` in `a::b::c`
/// is `a::x`).
fn super_paths(code: &str, module: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let mut after = &rest[at..];
        let mut ups = 0;
        while let Some(tail) = after.strip_prefix("super::") {
            ups += 1;
            after = tail;
        }
        let mut base: Vec<&str> = module.split("::").collect();
        for _ in 0..ups {
            base.pop();
        }
        let prefix = base.join("::");
        let path_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(after.len());
        let end = if after[path_len..].starts_with('{') {
            after[path_len..]
                .find('}')
                .map_or(after.len(), |i| path_len + i + 1)
        } else {
            path_len
        };
        for path in paths_after(&format!("crate::{}", &after[..end]), "crate::") {
            found.push(if prefix.is_empty() {
                path
            } else {
                format!("{prefix}::{path}")
            });
        }
        rest = after;
    }
    found
}

/// The deepest existing module a path names.
fn target(modules: &BTreeSet<String>, path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
}

fn graph_of(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let code: BTreeMap<String, String> = files
        .iter()
        .filter_map(|file| {
            let module = module_of(src, file)?;
            let text = fs::read_to_string(file).expect("read a source file");
            Some((module, production_code(&text)))
        })
        .collect();
    let modules: BTreeSet<String> = code.keys().cloned().collect();
    code.iter()
        .map(|(module, text)| {
            let crate_paths = paths_after(text, "crate::");
            let super_paths = super_paths(text, module);
            let edges = crate_paths
                .into_iter()
                .chain(super_paths)
                .filter_map(|p| target(&modules, &p))
                .filter(|t| t != module)
                .collect();
            (module.clone(), edges)
        })
        .collect()
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn module_imports_inside_each_crate_point_one_way() {
    let root = workspace_root();
    let sources = crate_sources(&root);
    assert!(
        sources.len() >= 10,
        "expected the workspace crates under services/ and tests/, found {sources:?}"
    );
    let mut problems = Vec::new();
    for src in &sources {
        for cycle in cycles(&graph_of(src)) {
            problems.push(format!("{}: {}", src.display(), cycle.join(" <-> ")));
        }
    }
    assert!(
        problems.is_empty(),
        "module import cycles (move the shared type into a leaf module, docs/design/crates.md):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_cycle_check_sees_a_cycle_through_a_group_import_and_super() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    fs::create_dir_all(src.join("step")).expect("mkdir");
    fs::write(src.join("lib.rs"), "mod shared;\nmod step;\n").expect("write");
    fs::write(
        src.join("shared.rs"),
        "use crate::{step::inner::Thing, other};\n#[cfg(test)]\nuse crate::lib_only;\n",
    )
    .expect("write");
    fs::write(src.join("step.rs"), "pub mod inner;\n").expect("write");
    fs::write(
        src.join("step/inner.rs"),
        "// crate::nothing in a comment\nuse super::super::shared::Value;\n",
    )
    .expect("write");
    let graph = graph_of(src);
    assert_eq!(
        cycles(&graph),
        [vec!["shared".to_owned(), "step::inner".to_owned()]],
        "graph: {graph:?}"
    );
    fs::write(src.join("step/inner.rs"), "pub struct Thing;\n").expect("write");
    assert!(cycles(&graph_of(src)).is_empty());
}

/// Files a comment or doc may not cite: the design notes and specs the team keeps outside the
/// repository. Their content lives in docs/design/ in the repository's own words.
const OUTSIDE_CITATIONS: &[&str] = &[
    "DESIGN.md",
    "operator.md",
    "evidence.md",
    "spec/contract.md",
    "spec/troubleshooting.md",
    "../shared",
];

/// The repository's own documents whose names collide with an outside one: the user guide
/// `docs/evidence.md`, cited by path or by a relative Markdown link.
fn without_repository_docs(line: &str) -> String {
    line.replace("docs/evidence.md", "")
        .replace("](evidence.md", "](")
        .replace("](../evidence.md", "](")
}

fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "target" || name.starts_with('.') && name != ".ci" {
            continue;
        }
        if path.is_dir() {
            text_files(&path, out);
        } else if path.extension().is_some_and(|e| {
            ["rs", "md", "proto", "sh", "toml", "yaml", "tpl", "json"]
                .iter()
                .any(|x| e == *x)
        }) {
            out.push(path);
        }
    }
}

#[test]
fn comments_and_docs_cite_the_repository_not_outside_files() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in [
        "services", "tests", "scripts", "charts", "proto", "docs", ".ci",
    ] {
        text_files(&root.join(dir), &mut files);
    }
    files.push(root.join("README.md"));
    assert!(files.len() > 100, "found only {} files", files.len());
    let this_file = Path::new(file!()).file_name();
    let mut found = Vec::new();
    for file in &files {
        if file.file_name() == this_file {
            continue;
        }
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            let line = without_repository_docs(line);
            if let Some(cited) = OUTSIDE_CITATIONS.iter().find(|c| line.contains(*c)) {
                found.push(format!("{}:{}: {cited}", file.display(), number + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "citations of documents outside the repository (cite docs/design/ instead):\n{}",
        found.join("\n")
    );
}
