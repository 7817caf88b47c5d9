//! `pacto diff` end to end (docs/design/contract.md#diff): the golden cases under
//! `tests/fixtures/contracts/diff/<case>/` (an `old/` and a `new/` bundle directory, `case.json`
//! with the extra arguments and the exit code, `expected.txt` and `expected.json`), the same
//! diff over bundle files and over `oci://` references pushed to a real registry, and the
//! errors that name the operand. Regenerate the goldens with
//! `PACTO_UPDATE_GOLDEN=1 cargo test -p pacto --test diff`.

use std::path::{Path, PathBuf};

use pacto_testenv::registry::Registry;
use serde_json::Value;

mod common;

use common::{code, pacto, run, stderr, stdout};

const REGENERATE: &str = "PACTO_UPDATE_GOLDEN=1 cargo test -p pacto --test diff";

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/contracts/diff")
}

fn home() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn case_json(case: &Path) -> Value {
    let text = std::fs::read_to_string(case.join("case.json")).expect("case.json");
    serde_json::from_str(&text).expect("case.json is JSON")
}

fn case_args(case: &Value) -> Vec<String> {
    case["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().expect("string arg").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Compares `got` with the golden file (or writes it under `PACTO_UPDATE_GOLDEN=1`).
fn golden(path: &Path, got: &str) {
    if std::env::var_os("PACTO_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(path, got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}; regenerate with {REGENERATE}", path.display()));
    assert!(
        got == want,
        "{} differs; regenerate with {REGENERATE}\n--- got ---\n{got}\n--- want ---\n{want}",
        path.display()
    );
}

#[test]
fn golden_cases() {
    let h = home();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("diff fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let names: Vec<String> = cases
        .iter()
        .map(|c| {
            c.file_name()
                .expect("test input")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for required in [
        "no-change",
        "interface-added",
        "interface-removed",
        "config-property-required",
        "dependency-narrowed",
        "bump-too-small",
        "overrides-one-side",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "missing case {required}"
        );
    }
    for case in &cases {
        let spec = case_json(case);
        let exit = spec["exit"].as_i64().expect("exit") as i32;
        let args = case_args(&spec);
        for (format, golden_file) in [("text", "expected.txt"), ("json", "expected.json")] {
            let out = run(pacto(h.path())
                .current_dir(case)
                .args(["diff", "old", "new", "--output", format])
                .args(&args));
            assert_eq!(
                code(&out),
                exit,
                "{} ({format}): {}{}",
                case.display(),
                stdout(&out),
                stderr(&out)
            );
            golden(&case.join(golden_file), &stdout(&out));
        }
        // The JSON golden is the documented shape.
        let doc: Value = serde_json::from_str(
            &std::fs::read_to_string(case.join("expected.json")).expect("test input"),
        )
        .expect("json");
        let mut keys: Vec<&str> = doc
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.retain(|k| *k != "suggestedVersion");
        assert_eq!(
            keys,
            [
                "changes",
                "impliedBump",
                "new",
                "old",
                "sufficient",
                "summary",
                "versionStep"
            ]
        );
        assert_eq!(
            doc["sufficient"].as_bool(),
            Some(doc.get("suggestedVersion").is_none())
        );
    }
}

/// The `changes` of a case's JSON golden.
fn golden_changes(case: &str) -> Value {
    let text =
        std::fs::read_to_string(cases_dir().join(case).join("expected.json")).expect("test input");
    serde_json::from_str::<Value>(&text).expect("test input")["changes"].clone()
}

fn json_changes(out: &std::process::Output) -> Value {
    serde_json::from_str::<Value>(&stdout(out))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(out), stderr(out)))["changes"]
        .clone()
}

#[test]
fn bundle_files_diff_like_their_directories_and_fail_on_is_honoured() {
    let h = home();
    let case = cases_dir().join("bump-too-small");
    for side in ["old", "new"] {
        let out = run(pacto(h.path())
            .args(["pack", "--output"])
            .arg(h.path().join(format!("{side}.tar.gz")))
            .arg(case.join(side)));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let diff = |extra: &[&str]| {
        run(pacto(h.path())
            .current_dir(h.path())
            .args(["diff", "old.tar.gz", "new.tar.gz", "-o", "json"])
            .args(extra))
    };
    let out = diff(&[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(json_changes(&out), golden_changes("bump-too-small"));
    assert_eq!(code(&diff(&["--fail-on", "none"])), 0);
    assert_eq!(code(&diff(&["--fail-on", "any"])), 1);
    // A big enough bump on the new side (an override) passes the default gate.
    assert_eq!(code(&diff(&["--new-set", "service.version=4.0.0"])), 0);
    // The same contract on both sides: no change, whatever --fail-on says.
    let out = run(pacto(h.path()).current_dir(h.path()).args([
        "diff",
        "old.tar.gz",
        "old.tar.gz",
        "--fail-on",
        "any",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
}

#[test]
fn bad_operands_exit_2_naming_the_operand() {
    let h = home();
    let case = cases_dir().join("no-change");
    let at = |args: &[&str]| run(pacto(h.path()).current_dir(&case).arg("diff").args(args));

    let out = at(&["old", "missing-dir"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains(
            "error: new contract missing-dir\n  caused by: missing-dir\n  caused by: No such file"
        ),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));

    let out = at(&["https://example.com/x", "new"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("error: old contract https://example.com/x\n  caused by: ")
            && stderr(&out).contains("unsupported scheme"),
        "{}",
        stderr(&out)
    );

    // An override that makes the new side invalid: its report, on stderr.
    let out = at(&["old", "new", "--new-set", "interfaces[0].type=soap"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("error: new contract new is invalid") && err.contains("interfaces.0.type"),
        "{err}"
    );
    let out = at(&["old", "new", "--old-set", "no-equals-sign"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("error: old contract old is invalid")
            && stderr(&out).contains("PARSE_ERROR"),
        "{}",
        stderr(&out)
    );
    let out = at(&["old", "new", "--new-values", "no-such-values.yaml"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out)
            .contains("error: new contract new\n  caused by: no-such-values.yaml\n  caused by: "),
        "{}",
        stderr(&out)
    );

    // A corrupt bundle file.
    std::fs::write(h.path().join("bad.tgz"), b"not gzip").expect("test input");
    let out = run(pacto(h.path())
        .current_dir(h.path())
        .arg("diff")
        .arg(case.join("old"))
        .arg("bad.tgz"));
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("error: new contract bad.tgz\n  caused by: corrupt bundle archive"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn oci_references_pushed_to_a_real_registry() {
    let registry = Registry::start().expect("registry");
    let host = registry.host();
    let h = home();
    let case = cases_dir().join("bump-too-small");
    let repo = format!("oci://{host}/team/orders");
    let cmd = |args: &[&str]| {
        let mut c = pacto(h.path());
        c.args(["--insecure-registry", &host]).args(args);
        c
    };
    for side in ["old", "new"] {
        let dir = case.join(side);
        let out = run(&mut cmd(&["push", dir.to_str().expect("utf8"), &repo]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let old = format!("{repo}:3.4.1");
    let new = format!("{repo}:3.5.0");
    let out = run(&mut cmd(&["diff", &old, &new, "-o", "json"]));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(json_changes(&out), golden_changes("bump-too-small"));
    let doc: Value = serde_json::from_str(&stdout(&out)).expect("test input");
    let source = doc["new"]["source"].as_str().expect("source");
    assert!(
        source.starts_with(&format!("{repo}@sha256:")),
        "the source is the digest-pinned reference: {source}"
    );
    // Text, and a directory against a reference.
    let out = run(&mut cmd(&[
        "diff",
        &old,
        case.join("new").to_str().expect("test input"),
    ]));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("the version bump is too small (at least 4.0.0)"),
        "{}",
        stdout(&out)
    );
    // A tag that does not exist: the operand is named.
    let out = run(&mut cmd(&["diff", &old, &format!("{repo}:9.9.9")]));
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!(
            "error: new contract {repo}:9.9.9\n  caused by: resolve digest"
        )),
        "{}",
        stderr(&out)
    );
}
