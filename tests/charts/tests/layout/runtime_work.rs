//! The runtime rule of docs/design/crates.md#service-skeleton: a crate that runs on
//! `pacto-runtime` (has it in `[dependencies]`) leaves admin servers, watch loops and backoffs to
//! it. Its production code (no test modules, no `*tests.rs` files, no `testing` module) never
//! spawns an `AdminServer`, never calls kube-runtime's `watcher`/`metadata_watcher`, and never
//! writes a backoff (a type or function named after one, a delay doubled up to a cap, a
//! `backon::ExponentialBuilder`). Nor does it `tokio::spawn` a task outside a span: a
//! long-lived task is a runtime task (`rt.spawn`, or `Tasks::spawn` from deeper down, each in a
//! `task` span and joined by the drain); a short-lived one (per request, per endpoint, per
//! leader term) is spawned `.instrument(info_span!("task", task = …))`
//! (docs/design/architecture.md#runtime). The CLI is a client that does not run on the runtime;
//! its `pacto status --watch` is outside the rule.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::Path;

use super::{rust_files, without_tests, workspace_root};

/// What only `pacto-runtime` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Work {
    AdminServer,
    WatchLoop,
    Backoff,
    BareSpawn,
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AdminServer => "an admin server spawned (use the Runtime builder's admin)",
            Self::WatchLoop => {
                "a watch loop (use pacto_runtime's watch and run_index as a runtime task)"
            }
            Self::Backoff => "a backoff (use pacto_runtime's Backoff and spawn_retrying)",
            Self::BareSpawn => {
                "a tokio::spawn without a span (a runtime task: rt.spawn or Tasks::spawn; or \
                 .instrument(info_span!(\"task\", task = …)) where it cannot be one)"
            }
        })
    }
}

/// Hand-written runtime work still outside the runtime: issue 33's remainder, one entry per
/// file and kind. The test fails when an entry is no longer found, so the list only shrinks.
const NOT_YET_ON_THE_RUNTIME: &[(&str, Work)] = &[];

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier that ends at byte `end` of `line`.
fn ident_before(line: &str, end: usize) -> &str {
    let start = line[..end]
        .rfind(|c: char| !ident_char(c))
        .map_or(0, |i| i + 1);
    &line[start..end]
}

/// The identifier that starts at byte `start` of `line`.
fn ident_at(line: &str, start: usize) -> &str {
    let rest = &line[start..];
    &rest[..rest.find(|c: char| !ident_char(c)).unwrap_or(rest.len())]
}

/// What runtime work one line of production code (comments and `use` lines already blanked)
/// does.
pub(super) fn work_in_line(line: &str) -> Option<Work> {
    let code = line.trim_start();
    if code.contains("AdminServer::spawn(") {
        return Some(Work::AdminServer);
    }
    let declares_fn = |at: usize| line[..at].trim_end().ends_with("fn");
    for (at, _) in line.match_indices("watcher(") {
        let name = ident_before(line, at + "watcher".len());
        if matches!(name, "watcher" | "metadata_watcher") && !declares_fn(at) {
            return Some(Work::WatchLoop);
        }
    }
    for keyword in ["struct ", "enum ", "type ", "trait ", "fn "] {
        for (at, _) in line.match_indices(keyword) {
            let before_ok = at == 0 || !ident_char(line[..at].chars().last().unwrap_or(' '));
            let name = ident_at(line, at + keyword.len());
            if before_ok && name.to_ascii_lowercase().contains("backoff") {
                return Some(Work::Backoff);
            }
        }
    }
    let doubled = [
        "* 2).min(",
        "*2).min(",
        ".saturating_mul(2)",
        ".checked_mul(2)",
    ];
    if doubled.iter().any(|d| code.contains(d)) || code.contains("ExponentialBuilder") {
        return Some(Work::Backoff);
    }
    None
}

/// The lines (1-based) of `code` (comments, `use` lines and tests already blanked) where a
/// `tokio::spawn` spawns a future not `.instrument`ed in a span: the text between the call's
/// parentheses (across lines) names no `.instrument(` or `.in_current_span()`.
pub(super) fn bare_spawns(code: &str) -> Vec<usize> {
    let mut found = Vec::new();
    for call in ["tokio::spawn(", "tokio::task::spawn("] {
        for (at, _) in code.match_indices(call) {
            let open = at + call.len();
            let mut depth = 1usize;
            let mut end = code.len();
            for (offset, c) in code[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + offset;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let argument = &code[open..end];
            if !argument.contains(".instrument(") && !argument.contains(".in_current_span()") {
                found.push(code[..at].matches('\n').count() + 1);
            }
        }
    }
    found.sort_unstable();
    found
}

/// Whether the crate in `dir` runs on `pacto-runtime`: the runtime is one of its
/// `[dependencies]` (not only a dev-dependency).
fn runs_on_the_runtime(dir: &Path) -> bool {
    let Ok(manifest) = fs::read_to_string(dir.join("Cargo.toml")) else {
        return false;
    };
    let mut section = "";
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" && line.starts_with("pacto-runtime") {
            return true;
        }
    }
    false
}

/// Test code below a `src` directory: `*tests.rs` files and the `testing` (test-support)
/// modules of docs/design/crates.md#tests-shared-helpers.
fn is_test_file(src: &Path, file: &Path) -> bool {
    let rel = file.strip_prefix(src).unwrap_or(file);
    rel.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("tests.rs"))
        || rel
            .components()
            .next()
            .is_some_and(|c| matches!(c.as_os_str().to_str(), Some("testing" | "testing.rs")))
}

/// Every line of runtime work in the production code of the crates under `root/services`
/// that run on the runtime, the runtime itself excepted: (file relative to `root`, line, what).
pub(super) fn runtime_work_outside_the_runtime(root: &Path) -> Vec<(String, usize, Work)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(root.join("services")) else {
        return found;
    };
    let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let src = dir.join("src");
        if dir.file_name().is_some_and(|n| n == "runtime")
            || !src.is_dir()
            || !runs_on_the_runtime(&dir)
        {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        for file in files.iter().filter(|f| !is_test_file(&src, f)) {
            let text = fs::read_to_string(file).expect("read a source file");
            let rel = file
                .strip_prefix(root)
                .unwrap_or(file)
                .to_string_lossy()
                .into_owned();
            let code = without_tests(&text);
            for (number, line) in code.lines().enumerate() {
                if let Some(work) = work_in_line(line) {
                    found.push((rel.clone(), number + 1, work));
                }
            }
            for number in bare_spawns(&code) {
                found.push((rel.clone(), number, Work::BareSpawn));
            }
        }
    }
    found
}

/// The findings not in `allowed`, and the `allowed` entries nothing was found for.
pub(super) fn against_allow_list(
    found: &[(String, usize, Work)],
    allowed: &[(&str, Work)],
) -> (Vec<String>, Vec<String>) {
    let allowed: BTreeSet<(&str, Work)> = allowed.iter().copied().collect();
    let new = found
        .iter()
        .filter(|(file, _, work)| !allowed.contains(&(file.as_str(), *work)))
        .map(|(file, line, work)| format!("{file}:{line}: {work}"))
        .collect();
    let seen: BTreeSet<(&str, Work)> = found.iter().map(|(f, _, w)| (f.as_str(), *w)).collect();
    let stale = allowed
        .iter()
        .filter(|entry| !seen.contains(entry))
        .map(|(file, work)| format!("{file}: {work:?}"))
        .collect();
    (new, stale)
}

#[test]
fn only_the_runtime_spawns_admin_servers_runs_watch_loops_and_backs_off() {
    let root = workspace_root();
    let found = runtime_work_outside_the_runtime(&root);
    let (new, stale) = against_allow_list(&found, NOT_YET_ON_THE_RUNTIME);
    assert!(
        new.is_empty(),
        "runtime work written outside pacto-runtime (docs/design/crates.md#service-skeleton):\n{}",
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "NOT_YET_ON_THE_RUNTIME names work that is gone; remove these entries:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_runtime_rule_sees_an_admin_server_a_watch_loop_and_a_backoff_outside_the_runtime() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    let runtime_dependency =
        "[package]\nname = \"x\"\n\n[dependencies]\npacto-runtime.workspace = true\n";
    let client_only =
        "[package]\nname = \"c\"\n\n[dev-dependencies]\npacto-runtime.workspace = true\n";
    for (krate, manifest) in [
        ("runtime", "[package]\nname = \"pacto-runtime\"\n"),
        ("svc", runtime_dependency),
        ("cli", client_only),
    ] {
        fs::create_dir_all(root.join("services").join(krate).join("src")).expect("mkdir");
        fs::write(
            root.join("services").join(krate).join("Cargo.toml"),
            manifest,
        )
        .expect("write");
    }
    let everything = "fn run() {\n    let admin = AdminServer::spawn(a, b);\n    \
        let pods = watcher::watcher(api, config);\n    delay = (delay * 2).min(cap);\n}\n\
        struct RetryBackoff;\nfn next_backoff() {}\n";
    fs::write(root.join("services/runtime/src/lib.rs"), everything).expect("write");
    fs::write(root.join("services/cli/src/lib.rs"), everything).expect("write");
    fs::write(
        root.join("services/svc/src/lib.rs"),
        format!(
            "// watcher(api, config) in a comment\nuse kube::runtime::watcher;\n{everything}\
             #[cfg(test)]\nmod tests {{\n    fn t() {{ let s = metadata_watcher(api, c); }}\n}}\n\
             pub fn watcher(x: u8) {{}}\n"
        ),
    )
    .expect("write");
    fs::write(
        root.join("services/svc/src/shape_tests.rs"),
        "fn t() { AdminServer::spawn(a, b); }\n",
    )
    .expect("write");
    let found = runtime_work_outside_the_runtime(root);
    let file = "services/svc/src/lib.rs".to_owned();
    assert_eq!(
        found,
        [
            (file.clone(), 4, Work::AdminServer),
            (file.clone(), 5, Work::WatchLoop),
            (file.clone(), 6, Work::Backoff),
            (file.clone(), 8, Work::Backoff),
            (file.clone(), 9, Work::Backoff),
        ]
    );
    let allowed = [
        ("services/svc/src/lib.rs", Work::AdminServer),
        ("services/svc/src/gone.rs", Work::WatchLoop),
    ];
    let (new, stale) = against_allow_list(&found, &allowed);
    assert_eq!(new.len(), 4, "{new:?}");
    assert!(
        new[0].starts_with("services/svc/src/lib.rs:5: a watch loop"),
        "{new:?}"
    );
    assert_eq!(stale, ["services/svc/src/gone.rs: WatchLoop"]);
}

#[test]
fn the_runtime_rule_sees_a_spawn_without_a_span_outside_the_runtime() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    for (krate, manifest) in [
        ("runtime", "[package]\nname = \"pacto-runtime\"\n"),
        (
            "svc",
            "[package]\nname = \"x\"\n\n[dependencies]\npacto-runtime.workspace = true\n",
        ),
    ] {
        fs::create_dir_all(root.join("services").join(krate).join("src")).expect("mkdir");
        fs::write(
            root.join("services").join(krate).join("Cargo.toml"),
            manifest,
        )
        .expect("write");
    }
    let bare = "fn run() {\n    tokio::spawn(work(a, b));\n}\n";
    fs::write(root.join("services/runtime/src/lib.rs"), bare).expect("write");
    fs::write(
        root.join("services/svc/src/lib.rs"),
        format!(
            "// tokio::spawn(in_a_comment());\n{bare}\
             fn spans() {{\n    tokio::spawn(\n        work(f(x), y)\n            \
             .instrument(tracing::info_span!(\"task\", task = \"w\")),\n    );\n    \
             tokio::spawn(async move {{ g().await }}.in_current_span());\n}}\n\
             fn nested() {{\n    let t = tokio::task::spawn(h(i(j)));\n}}\n\
             #[cfg(test)]\nmod tests {{\n    fn t() {{ tokio::spawn(x()); }}\n}}\n"
        ),
    )
    .expect("write");
    let found = runtime_work_outside_the_runtime(root);
    let file = "services/svc/src/lib.rs".to_owned();
    assert_eq!(
        found,
        [
            (file.clone(), 3, Work::BareSpawn),
            (file.clone(), 13, Work::BareSpawn),
        ]
    );
    let (new, stale) = against_allow_list(&found, &[(file.as_str(), Work::BareSpawn)]);
    assert!(new.is_empty() && stale.is_empty(), "{new:?} {stale:?}");
}
