//! `pacto status` (and `kubectl pacto status`, the same binary as a kubectl plugin) against the
//! real API server and the verdicts the running services produce:
//!
//! - a golden text output for a Compliant, an Unknown (EVIDENCE_MISSING, with the guide's next
//!   step) and a NonCompliant (CONFIGURATION_MISMATCH) Pacto, ages normalized; piped, so no
//!   colour;
//! - `--output json` parses and carries the verdict and the finding;
//! - the namespace table counts the Pactos by verdict;
//! - a user without RBAC gets the refused permission named, a missing Pacto a clear not-found;
//! - `--watch` prints again when the verdict changes, and on a new Event about the Pacto.
//!
//! Regenerate the goldens (`tests/e2e/tests/golden/status-*.txt`) with
//! `PACTO_UPDATE_GOLDEN=1 cargo test -p pacto-e2e --test status`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use pacto_cli::status_view::normalize_ages;
use pacto_e2e::{STATUS_DEADLINE, Stack, deployment, inline_pacto, service_target, target_service};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// What one `pacto status` run printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `program` (the `pacto` or `kubectl` binary) with `args` and `kubeconfig`, stdout piped.
async fn run(program: &Path, args: &[&str], kubeconfig: &Path, path: Option<&Path>) -> Run {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("NO_COLOR");
    if let Some(dir) = path {
        let system = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![dir.to_owned()];
        dirs.extend(std::env::split_paths(&system));
        cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    }
    let output = cmd.output().await.expect("running the status command");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn pacto_status(stack: &Stack, args: &[&str]) -> Run {
    let mut all = vec!["status"];
    all.extend_from_slice(args);
    run(
        &stack.bins.join("pacto"),
        &all,
        stack.cp.kubeconfig_path(),
        None,
    )
    .await
}

/// The output with the run's namespace and every age replaced, and the Events block's lines
/// sorted, for a golden comparison: events of one reconcile may land in different seconds, which
/// decides their newest-first order.
fn normalized(stack: &Stack, text: &str) -> String {
    let text = normalize_ages(&text.replace(&stack.namespace, "<ns>"));
    let mut out = Vec::new();
    let mut events: Vec<&str> = Vec::new();
    let mut in_events = false;
    for line in text.lines() {
        if line.starts_with("Events ") {
            in_events = true;
            out.push(line);
        } else if in_events && line.starts_with("  ") {
            events.push(line);
        } else {
            if in_events {
                events.sort_unstable();
                out.append(&mut events);
                in_events = false;
            }
            out.push(line);
        }
    }
    events.sort_unstable();
    out.append(&mut events);
    let mut joined = out.join("\n");
    joined.push('\n');
    joined
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/status-{name}.txt"))
}

/// Compares `text` with the golden `name` (or writes it under `PACTO_UPDATE_GOLDEN`).
fn assert_golden(name: &str, text: &str) {
    let path = golden_path(name);
    if std::env::var_os("PACTO_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == text,
        "`pacto status` output differs from {}; regenerate with PACTO_UPDATE_GOLDEN=1 cargo test -p pacto-e2e --test status\n--- got ---\n{text}\n--- want ---\n{want}",
        path.display()
    );
}

/// A contract with a readiness block that passes its gate (one claim of each status).
const READY_CONTRACT: &str = "pactoVersion: \"2.0\"\nservice:\n  name: steady\n  version: 1.0.0\nreadiness:\n  expires: \"2099-01-31\"\n  minScore: 50\n  claims:\n    - { id: dashboard, type: url, status: done, weight: 40, evidence: \"https://grafana.example.com/d/gate\" }\n    - { id: runbook, type: document, status: partial, weight: 30, evidence: docs/runbook.md }\n    - { id: pen-test, type: ticket, status: not-done, weight: 20, evidence: SEC-7 }\n    - { id: chaos, type: ticket, status: deferred, weight: 10, evidence: SEC-8 }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario per verdict, then the error paths"
)]
async fn status_explains_each_verdict_from_the_cluster() {
    let stack = Stack::start().await.unwrap();
    let ns = stack.namespace.clone();

    // Compliant: an existing target, and a readiness block.
    stack.apply(&deployment("steady")).await.unwrap();
    stack.apply(&target_service("steady")).await.unwrap();
    stack
        .apply(&inline_pacto(
            "steady",
            READY_CONTRACT,
            Some(&service_target("steady")),
        ))
        .await
        .unwrap();
    // Unknown: the target Service does not exist (EVIDENCE_MISSING).
    stack
        .apply(&inline_pacto(
            "lonely",
            "pactoVersion: \"2.0\"\nservice:\n  name: lonely\n  version: 1.0.0\n",
            Some(&service_target("lonely")),
        ))
        .await
        .unwrap();
    // NonCompliant: a ConfigMap whose value violates the configuration's schema.
    let reference = stack.push_settings_bundle().await.unwrap();
    stack.apply(&deployment("settings")).await.unwrap();
    stack
        .apply(
            &serde_norway::to_string(&json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "bad-config" },
                "data": { "config.yaml": "port: eighty\n" },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    stack
        .apply(
            &pacto_api::testing::PactoBuilder::oci("mismatch", &reference)
                .target(
                    serde_json::from_value(json!({
                        "workloadRef": { "name": "settings", "kind": "Deployment" },
                        "configBindings": [{
                            "configuration": "app", "kind": "ConfigMap", "name": "bad-config",
                            "key": "config.yaml", "format": "yaml",
                        }],
                    }))
                    .unwrap(),
                )
                .check_interval(30)
                .manifest(),
        )
        .await
        .unwrap();

    // Each verdict with the events it emits, so that the output is settled.
    stack
        .wait_contract_status("steady", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    stack
        .wait_describe("steady", &["RevisionCreated"], STATUS_DEADLINE)
        .await
        .unwrap();
    stack
        .wait_describe(
            "lonely",
            &[
                "RevisionCreated",
                "ContractStatus: Unknown, 0 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();
    stack
        .wait_describe(
            "mismatch",
            &[
                "RevisionCreated",
                "ContractStatus: NonCompliant, 1 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    for (name, verdict) in [
        ("steady", "compliant"),
        ("lonely", "unknown"),
        ("mismatch", "noncompliant"),
    ] {
        let out = pacto_status(&stack, &[name, "-n", &ns]).await;
        assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
        // Piped: no colour, whatever the terminal of the test run.
        assert!(!out.stdout.contains('\x1b'), "{}", out.stdout);
        println!("$ pacto status {name} -n {ns}\n{}", out.stdout);
        assert_golden(verdict, &normalized(&stack, &out.stdout));
    }

    // The kubectl plugin is the same program.
    let bins_dir = stack.bins.to_owned();
    let plugin = run(
        &pacto_testenv::bins::kubectl().unwrap(),
        &["pacto", "status", "lonely", "-n", &ns],
        stack.cp.kubeconfig_path(),
        Some(&bins_dir),
    )
    .await;
    assert_eq!(plugin.code, Some(0), "{}{}", plugin.stdout, plugin.stderr);
    assert_golden("unknown", &normalized(&stack, &plugin.stdout));

    // JSON parses and carries the verdict, the stage and the finding.
    let out = pacto_status(&stack, &["mismatch", "-n", &ns, "-o", "json"]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("`-o json` is JSON");
    assert_eq!(report["verdict"], "NonCompliant", "{report:#}");
    assert_eq!(
        report["findings"][0]["code"], "CONFIGURATION_MISMATCH",
        "{report:#}"
    );
    assert_eq!(
        report["findings"][0]["collector"], "k8s-observer",
        "{report:#}"
    );
    assert_eq!(report["conditions"][1]["reason"], "Found", "{report:#}");
    assert_eq!(report["conditions"][1]["stale"], false, "{report:#}");
    let out = pacto_status(&stack, &["lonely", "-n", &ns, "-o", "yaml"]).await;
    let report: Value = serde_norway::from_str(&out.stdout).expect("`-o yaml` is YAML");
    assert_eq!(
        report["unknown"][0]["code"], "EVIDENCE_MISSING",
        "{report:#}"
    );

    // Without a name: the table of the namespace, with counts by verdict.
    let out = pacto_status(&stack, &["-n", &ns]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    println!("$ pacto status -n {ns}\n{}", out.stdout);
    assert!(
        out.stdout
            .ends_with("3 Pactos: 1 Compliant, 1 NonCompliant, 1 Unknown\n"),
        "{}",
        out.stdout
    );
    let out = pacto_status(&stack, &["--all-namespaces", "-o", "json"]).await;
    let table: Value = serde_json::from_str(&out.stdout).expect("table JSON");
    let ours = table["pactos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["namespace"] == ns.as_str())
        .count();
    assert_eq!(ours, 3, "{table:#}");

    // A missing Pacto, and a user the API server knows but who has no RBAC at all.
    let out = pacto_status(&stack, &["ghost", "-n", &ns]).await;
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    assert_eq!(
        out.stderr.trim(),
        format!("error: pactos.pacto.trianalab.io {ns}/ghost not found")
    );
    let nobody = stack
        .cp
        .write_kubeconfig(
            &format!("{ns}-nobody.kubeconfig"),
            &stack.cp.user_kubeconfig("nobody", &[]).unwrap(),
        )
        .unwrap();
    let out = run(
        &stack.bins.join("pacto"),
        &["status", "lonely", "-n", &ns],
        &nobody,
        None,
    )
    .await;
    assert_eq!(out.code, Some(2), "{}", out.stdout);
    println!(
        "$ pacto status lonely -n {ns}   # as a user without RBAC\n{}",
        out.stderr
    );
    assert!(
        out.stderr.starts_with(&format!(
            "error: cannot get pactos.pacto.trianalab.io {ns}/lonely: forbidden: "
        )) && out
            .stderr
            .contains("User \"nobody\" cannot get resource \"pactos\""),
        "{}",
        out.stderr
    );
    let out = run(&stack.bins.join("pacto"), &["status", "-A"], &nobody, None).await;
    assert!(
        out.stderr.starts_with(
            "error: cannot list pactos.pacto.trianalab.io in all namespaces: forbidden: "
        ),
        "{}",
        out.stderr
    );

    // --watch prints again when the verdict changes: the target Service appears.
    let mut child = tokio::process::Command::new(stack.bins.join("pacto"))
        .args(["status", "lonely", "-n", &ns, "--watch"])
        .env("KUBECONFIG", stack.cp.kubeconfig_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(STATUS_DEADLINE, lines.next_line())
        .await
        .expect("the first print within the deadline")
        .unwrap()
        .unwrap();
    assert_eq!(first, format!("Pacto {ns}/lonely: Unknown"));
    stack.apply(&deployment("lonely")).await.unwrap();
    stack.apply(&target_service("lonely")).await.unwrap();
    let compliant = format!("Pacto {ns}/lonely: Compliant");
    let seen = tokio::time::timeout(STATUS_DEADLINE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line == compliant {
                return true;
            }
        }
        false
    })
    .await
    .expect("--watch printed the Compliant verdict within the deadline");
    assert!(seen, "--watch ended before the Compliant verdict");

    // --watch also prints again on a new Event about the Pacto, the Pacto itself unchanged.
    let marker = "an operator note the watch must show";
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let event = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "lonely.watch-test", "namespace": ns},
        "involvedObject": {
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "Pacto",
            "name": "lonely",
            "namespace": ns,
        },
        "reason": "Noted",
        "message": marker,
        "type": "Normal",
        "source": {"component": "e2e"},
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
    });
    stack.apply(&event.to_string()).await.unwrap();
    let seen = tokio::time::timeout(STATUS_DEADLINE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(marker) {
                return true;
            }
        }
        false
    })
    .await
    .expect("--watch printed the new Event within the deadline");
    assert!(seen, "--watch ended before the new Event");
    child.kill().await.unwrap();
}
