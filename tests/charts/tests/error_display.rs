//! Error variants that print their cause twice: a `thiserror` error whose `#[error("…")]` prints
//! a field that is also its `source()` (`#[source]`, `#[from]`, or a field named `source`).
//! The services' binaries return `anyhow::Result` from `main`, whose report prints each source
//! on its own line after the message, and the runtime's `tls::error_chain` appends each source
//! after `: `; so the rule is the runtime's: an error's own message never includes its source,
//! the printer walks the chain (docs/design/architecture.md#failure-handling).
//!
//! [`printed_twice`] is the scan (callable from another guard). The test fails on any variant
//! that breaks the rule: the last ones were fixed by issue 33 item 7.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text between the bracket at `open` and its match, skipping string literals; `None` when
/// unbalanced.
fn balanced(text: &str, open: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = open;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_string = false;
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((&text[open + 1..i], i + 1));
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// Splits at the commas outside brackets (angle brackets included).
fn top_level_fields(body: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in body.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    fields.push(&body[start..]);
    fields
        .into_iter()
        .filter(|f| !f.trim().is_empty())
        .collect()
}

/// Skips whitespace, attributes, doc comments and `pub`/`struct` before an item's name.
fn skip_to_name(text: &str, mut at: usize) -> usize {
    loop {
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if trimmed.starts_with("#[") {
            match balanced(text, at + 1) {
                Some((_, end)) => at = end,
                None => return at,
            }
        } else if trimmed.starts_with("//") {
            at += trimmed.find('\n').unwrap_or(trimmed.len());
        } else if let Some(rest) = trimmed.strip_prefix("pub ") {
            at += trimmed.len() - rest.len();
        } else if let Some(rest) = trimmed.strip_prefix("struct ") {
            at += trimmed.len() - rest.len();
        } else {
            return at;
        }
    }
}

/// Whether the format string prints `{field}` (or `{field:…}`).
fn prints(format: &str, field: &str) -> bool {
    format.contains(&format!("{{{field}}}")) || format.contains(&format!("{{{field}:"))
}

/// The fields of one error that are its source: `(name or position, is source)`.
fn source_fields(opener: u8, body: &str) -> Vec<String> {
    let mut sources = Vec::new();
    for (k, field) in top_level_fields(body).into_iter().enumerate() {
        let marked = field.contains("#[from]") || field.contains("#[source]");
        if opener == b'(' {
            if marked {
                sources.push(k.to_string());
            }
            continue;
        }
        // Named: the identifier before the first `:` once attributes and comments are gone.
        let start = skip_to_name(field, 0);
        let decl = &field[start..];
        let decl = decl.strip_prefix("pub(crate) ").unwrap_or(decl);
        let Some(name) = decl.split(':').next().map(str::trim) else {
            continue;
        };
        if marked || name == "source" {
            sources.push(name.to_owned());
        }
    }
    sources
}

/// `<path>:<Variant>` (path relative to the workspace) of every error under `services/*/src`
/// whose message prints its own source, once per offending error.
pub fn printed_twice(root: &Path) -> Vec<String> {
    scan(root).1
}

/// How many `#[error(…)]` messages of an error with fields were read, and [`printed_twice`].
fn scan(root: &Path) -> (usize, Vec<String>) {
    let mut files = Vec::new();
    let Ok(services) = std::fs::read_dir(root.join("services")) else {
        return (0, Vec::new());
    };
    let mut services: Vec<PathBuf> = services.filter_map(|e| e.ok().map(|e| e.path())).collect();
    services.sort();
    for service in services {
        rust_files(&service.join("src"), &mut files);
    }
    let mut found = Vec::new();
    let mut read = 0;
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let relative = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace("/./", "/");
        let mut from = 0;
        while let Some(offset) = text[from..].find("#[error(") {
            let open = from + offset + "#[error".len();
            from = open;
            let Some((attribute, end)) = balanced(&text, open) else {
                break;
            };
            if attribute.trim_start().starts_with("transparent") {
                continue;
            }
            let format = attribute
                .split_once('"')
                .and_then(|(_, rest)| rest.rsplit_once('"'))
                .map_or("", |(format, _)| format);
            // `]` of the attribute, then the item.
            let name_at = skip_to_name(&text, end + 1);
            let name: String = text[name_at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = name_at + name.len();
            let opener_at = after + (text[after..].len() - text[after..].trim_start().len());
            let opener = text.as_bytes().get(opener_at).copied().unwrap_or(b';');
            if opener != b'(' && opener != b'{' {
                continue;
            }
            let Some((body, _)) = balanced(&text, opener_at) else {
                continue;
            };
            read += 1;
            if source_fields(opener, body)
                .iter()
                .any(|field| prints(format, field))
            {
                found.push(format!("{relative}:{name}"));
            }
        }
    }
    (read, found)
}

#[test]
fn no_new_error_prints_its_cause_twice() {
    let (read, found) = scan(&workspace_root());
    assert!(
        read > 100,
        "the scan read {read} error messages: it no longer reads the sources"
    );
    assert!(
        found.is_empty(),
        "these errors print their source in their own message, and a chain printer (anyhow's \
         report, pacto_runtime::tls::error_chain, pacto_contract::error_chain) prints it again: \
         drop the source from the #[error] text\n{found:#?}"
    );
}

#[test]
fn the_scan_sees_a_cause_printed_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("services/x/src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(
        src.join("lib.rs"),
        r#"
#[derive(Debug, thiserror::Error)]
pub enum E {
    /// Twice.
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("parsing: {0}")]
    Parse(#[from] std::num::ParseIntError),
    /// Once: the printer adds the cause.
    #[error("writing {path}")]
    Write { path: String, #[source] cause: std::io::Error },
    #[error(transparent)]
    Other(#[from] std::fmt::Error),
    #[error("{0}")]
    Text(String),
}
#[derive(Debug, thiserror::Error)]
#[error("opening {}: {source}", .path)]
pub struct Open { path: String, #[source] source: std::io::Error }
"#,
    )
    .expect("write");
    assert_eq!(
        printed_twice(dir.path()),
        [
            "services/x/src/lib.rs:Read",
            "services/x/src/lib.rs:Parse",
            "services/x/src/lib.rs:Open",
        ]
    );
}
