//! `scripts/ci-env.sh`, which `scripts/test.sh` runs first: under CI every variable that would skip
//! a tier, weaken a check or rewrite checked-in files fails the run; off CI each is allowed.

use std::path::Path;
use std::process::Command;

/// Every variable the script must refuse under CI, with a value that asks for the weaker run.
const WEAKENING: &[(&str, &str)] = &[
    ("PACTO_SKIP_DEPLOYED", "1"),
    ("PACTO_SKIP_FUZZ", "1"),
    ("SOCKWATCH_REQUIRE_CLANG", "0"),
    ("PACTO_REQUIRE_EBPF", "0"),
    ("PACTO_UPDATE_GOLDEN", "1"),
    ("PACTO_UPDATE_DOCS", "1"),
    ("PACTO_UPDATE_CHARTS", "1"),
    ("PACTO_UPDATE_RELEASED", "1"),
];

fn ci_env(ci: Option<&str>, set: &[(&str, &str)]) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ci-env.sh");
    let mut command = Command::new("bash");
    command.arg(script);
    command.env_remove("CI");
    for (name, _) in WEAKENING {
        command.env_remove(name);
    }
    if let Some(ci) = ci {
        command.env("CI", ci);
    }
    for (name, value) in set {
        command.env(name, value);
    }
    let out = command.output().expect("bash runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn under_ci_each_weakening_variable_fails_the_run_naming_it() {
    for (name, value) in WEAKENING {
        for ci in ["1", "true"] {
            let (code, stderr) = ci_env(Some(ci), &[(name, value)]);
            assert_eq!(code, 1, "CI={ci} {name}={value} was accepted: {stderr}");
            assert!(stderr.contains(&format!("{name}={value}")), "{stderr}");
        }
    }
    // All at once: every one is named.
    let (code, stderr) = ci_env(Some("1"), WEAKENING);
    assert_eq!(code, 1);
    for (name, _) in WEAKENING {
        assert!(stderr.contains(name), "{name} missing from {stderr}");
    }
}

#[test]
fn the_full_run_and_developer_runs_pass() {
    // CI with nothing weakened (what .ci/run does), and the values that ask for the full run.
    assert_eq!(ci_env(Some("1"), &[]).0, 0);
    let strict = [
        ("SOCKWATCH_REQUIRE_CLANG", "1"),
        ("PACTO_REQUIRE_EBPF", "1"),
        ("PACTO_SKIP_FUZZ", "0"),
    ];
    assert_eq!(ci_env(Some("1"), &strict).0, 0);
    // Off CI a developer may skip or regenerate.
    for ci in [None, Some("0"), Some("false")] {
        let (code, stderr) = ci_env(ci, WEAKENING);
        assert_eq!(code, 0, "CI={ci:?}: {stderr}");
    }
}
