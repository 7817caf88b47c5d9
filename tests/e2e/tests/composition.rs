//! How the status-writer composes a status from what it last wrote and what the backends
//! answered, read the way a user reads it (`kubectl get pacto -o yaml`, `kubectl get events`):
//!
//! - an edit that lands while a pass is writing does not make the next pass repeat the
//!   transition event (the write memo, docs/design/status.md#the-write-memo);
//! - observation windows end when the Pacto stops being observed, so re-adding `spec.target`
//!   does not confirm an absence without a full stabilization window;
//! - with the evaluator down, `RuntimeObserved` is still the observation's own result
//!   (True/Found, or False/ObservationFailed with the API error) and the verdict is Unknown.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use pacto_api::Pacto;
use pacto_api::testing::PactoBuilder;
use pacto_e2e::{STATUS_DEADLINE, Stack, StackOptions, condition, expect_condition, times_emitted};
use pacto_runtime::testing::{eventually, within};
use serde_json::{Value, json};

/// Polls `kubectl get pacto -o yaml` until `check` holds; returns that Pacto.
async fn wait_pacto(
    stack: &Stack,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    stack
        .wait_pacto(name, &format!("{name}: {what}"), STATUS_DEADLINE, check)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// How many times `reason` was emitted on the Pacto `name` (the counts of its Events summed).
async fn emissions(stack: &Stack, name: &str, reason: &str) -> u64 {
    let events = stack.pacto_events(name, &[]).await.unwrap();
    times_emitted(&events, reason).unwrap()
}

/// Item 4 of issue 13: a user's edit that lands between a pass's read and its status write
/// used to drop the write memo, and the next pass, reading a cache that showed the edit but not
/// the write, announced the same transition again. Many Invalid Pactos are created while every
/// one of them is relabelled as fast as the API server takes it, so edits land inside the
/// passes that write; then each is fixed and broken again a few times under the same edits.
/// Each Pacto must have recorded ContractInvalid once per time it became Invalid, and
/// ContractRecovered once per fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_during_the_status_write_do_not_repeat_the_transition_event() {
    const PACTOS: usize = 16;
    const ROUNDS: u64 = 3;
    let stack = Stack::start().await.unwrap();
    let names: Vec<String> = (0..PACTOS).map(|i| format!("catalog-{i}")).collect();
    let manifests: Vec<String> = names
        .iter()
        .map(|name| {
            let broken = format!(
                "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: not-a-version\n"
            );
            PactoBuilder::inline(name, &broken)
                .check_interval(30)
                .manifest()
        })
        .collect();

    // One editor per Pacto: label patches back to back (a 404 before it exists is ignored).
    let api: Api<Pacto> = Api::namespaced(stack.cp.client().unwrap(), &stack.namespace);
    let stop = Arc::new(AtomicBool::new(false));
    let edits = Arc::new(AtomicU64::new(0));
    let editors: Vec<_> = names
        .iter()
        .map(|name| {
            let (api, stop, edits, name) = (api.clone(), stop.clone(), edits.clone(), name.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                let mut pace = tokio::time::interval(Duration::from_millis(5));
                while !stop.load(Ordering::Relaxed) {
                    pace.tick().await;
                    n += 1;
                    let patch = json!({ "metadata": { "labels": { "edit": n.to_string() } } });
                    if api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .is_ok()
                    {
                        edits.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    stack.apply(&manifests.join("---\n")).await.unwrap();
    let wait_all = |status: &'static str| {
        let (stack, names) = (&stack, &names);
        async move {
            for name in names {
                wait_pacto(stack, name, status, |p| {
                    p["status"]["contractStatus"] == status
                })
                .await;
            }
        }
    };
    wait_all("Invalid").await;
    // More transitions under the same edits: fixed (Reference, ContractRecovered) and broken
    // again (ContractInvalid), ROUNDS times.
    let set_contract = |version: &'static str| {
        let (api, names) = (&api, &names);
        async move {
            for name in names {
                let contract = format!(
                    "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: {version}\n"
                );
                let patch = json!({ "spec": { "contractRef": { "inline": contract } } });
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
            }
        }
    };
    for _ in 0..ROUNDS {
        set_contract("1.0.0").await;
        wait_all("Reference").await;
        set_contract("not-a-version").await;
        wait_all("Invalid").await;
    }
    // Keep editing over the next passes too (each edit is a reconcile trigger), then stop.
    let target = edits.load(Ordering::Relaxed) + 20 * PACTOS as u64;
    eventually("the editors to make more edits", STATUS_DEADLINE, || {
        std::future::ready(edits.load(Ordering::Relaxed) >= target)
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for editor in editors {
        editor.await.unwrap();
    }

    // A last reconcile of each settles what is left; then every Pacto announced Invalid once.
    for name in &names {
        stack.nudge(name, "settled").await.unwrap();
    }
    let mut repeated = Vec::new();
    for name in &names {
        for (reason, expected) in [
            ("ContractInvalid", ROUNDS + 1),
            ("ContractRecovered", ROUNDS),
        ] {
            let times = emissions(&stack, name, reason).await;
            if times != expected {
                repeated.push(format!(
                    "{name}: {reason} recorded {times} times, not {expected}"
                ));
            }
        }
    }
    assert!(
        repeated.is_empty(),
        "{} edits; {}\n{}",
        edits.load(Ordering::Relaxed),
        repeated.join("\n"),
        stack.logs()
    );
}

/// A Service `name` selecting `app: <name>` with one port named `http` (→ the container port
/// named `http`).
fn service(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector: {{app: {name}}}\n  ports:\n    - {{name: http, port: 8080, targetPort: http}}\n"
    )
}

/// A one-replica Deployment `name` (pods labelled `app: <name>`) with a container port `http`.
fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: app\n          image: registry.local/{name}:1\n          ports:\n            - {{name: http, containerPort: 8080}}\n"
    )
}

/// The inline contract of service `name` with one OpenAPI interface `http`.
fn http_contract(name: &str) -> String {
    format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: 1.0.0\ninterfaces:\n  - name: http\n    type: openapi\n    ref: interfaces/openapi.yaml\n"
    )
}

/// The Pacto `name` for [`http_contract`], targeting Service `name` with `http` bound to its
/// `http` port, or reference-only.
fn http_pacto(name: &str, targeted: bool) -> String {
    let builder = PactoBuilder::inline(name, &http_contract(name)).check_interval(30);
    let builder = if targeted {
        builder.target(
            serde_json::from_value(json!({
                "serviceName": name,
                "interfaceBindings": [{ "interface": "http", "servicePort": "http" }],
            }))
            .unwrap(),
        )
    } else {
        builder
    };
    builder.manifest()
}

/// The `firstObservedNegativeAt` of the window `(kind, subject)`, if any.
fn window_start(pacto: &Value, kind: &str, subject: &str) -> Option<Timestamp> {
    pacto["status"]["observationWindows"]
        .as_array()?
        .iter()
        .find(|w| w["kind"] == kind && w["subject"] == subject)?["firstObservedNegativeAt"]
        .as_str()?
        .parse()
        .ok()
}

/// Item 7 of issue 13: a negative streak must not survive a spell as reference-only. An
/// interface whose Service has no Ready endpoint opens a window; dropping `spec.target` clears
/// it; re-adding the target, once the old streak would have spanned the stabilization window,
/// starts a new streak (Unknown, EVIDENCE_INSUFFICIENT) instead of confirming INTERFACE_ABSENT
/// at once. The 20 s window is the status-writer's `--stabilization-window`; a second Pacto
/// whose streak began later, confirmed NonCompliant, shows that the first streak's window has
/// passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_end_with_a_reference_only_spell() {
    let stack = Stack::start_with(StackOptions {
        status_writer_args: vec!["--stabilization-window=20s".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    // Services without any pod behind them: zero Ready endpoints, a windowed negative.
    stack.apply(&service("orders")).await.unwrap();
    stack.apply(&service("witness")).await.unwrap();
    stack.apply(&http_pacto("orders", true)).await.unwrap();
    let pending = wait_pacto(&stack, "orders", "a window on interface/http", |p| {
        window_start(p, "interface", "http").is_some()
    })
    .await;
    let first_streak = window_start(&pending, "interface", "http").unwrap();
    assert_eq!(
        pending["status"]["contractStatus"], "Unknown",
        "{pending:#}"
    );

    // The witness's streak begins after the first one.
    stack.apply(&http_pacto("witness", true)).await.unwrap();
    wait_pacto(&stack, "witness", "a window on interface/http", |p| {
        window_start(p, "interface", "http").is_some()
    })
    .await;

    // Reference-only: nothing is observed, so no streak goes on.
    stack.apply(&http_pacto("orders", false)).await.unwrap();
    let reference = wait_pacto(&stack, "orders", "Reference", |p| {
        p["status"]["contractStatus"] == "Reference"
    })
    .await;
    assert!(
        condition(&reference, "RuntimeObserved").is_none(),
        "{reference:#}"
    );
    assert!(
        reference["status"]["observationWindows"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "a reference-only Pacto keeps observation windows:\n{reference:#}"
    );

    // The first streak would now span the window.
    stack
        .wait_contract_status("witness", "NonCompliant", STATUS_DEADLINE)
        .await
        .unwrap();
    let readded_at = Timestamp::now();
    stack.apply(&http_pacto("orders", true)).await.unwrap();
    let generation = stack.get_pacto("orders").await.unwrap()["metadata"]["generation"].clone();
    let observed = wait_pacto(&stack, "orders", "observed again", |p| {
        p["status"]["observedGeneration"] == generation && condition(p, "RuntimeObserved").is_some()
    })
    .await;
    assert_eq!(
        observed["status"]["contractStatus"], "Unknown",
        "re-adding the target confirmed the absence without a new window:\n{observed:#}"
    );
    let findings = observed["status"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{observed:#}");
    assert_eq!(findings[0]["subject"], "interface/http", "{observed:#}");
    assert_eq!(findings[0]["code"], "EVIDENCE_INSUFFICIENT", "{observed:#}");
    let new_streak = window_start(&observed, "interface", "http").unwrap();
    // Status times have one-second granularity.
    assert!(
        new_streak > first_streak && new_streak.as_second() >= readded_at.as_second(),
        "the streak was not restarted: {new_streak} (first {first_streak}, re-added at {readded_at})"
    );
    // A full window later the absence is confirmed as usual.
    let confirmed = within("orders to be NonCompliant", STATUS_DEADLINE, || async {
        let pacto = stack.get_pacto("orders").await.unwrap();
        if pacto["status"]["contractStatus"] == "NonCompliant" {
            Ok(pacto)
        } else {
            Err(serde_norway::to_string(&pacto["status"]).unwrap_or_default())
        }
    })
    .await
    .unwrap();
    assert_eq!(
        confirmed["status"]["findings"][0]["code"], "INTERFACE_ABSENT",
        "{confirmed:#}"
    );
}

/// Item 8 of issue 13: with only the evaluator down, `RuntimeObserved` still reads the
/// observation's own result — True/Found for a Pacto whose queries succeed, False/
/// ObservationFailed with the API error for one whose ConfigMap read is refused (the observer's
/// Role lacks ConfigMaps) — and the verdict is Unknown with one unknown and no findings. When
/// the evaluator is back, the verdict comes back by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_evaluator_down_the_observation_stands_on_its_own() {
    let mut stack = Stack::start_with(StackOptions {
        observer_denied: vec!["configmaps"],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    stack.apply(&deployment("payments")).await.unwrap();
    stack.apply(&service("payments")).await.unwrap();
    stack.apply(&http_pacto("payments", true)).await.unwrap();
    let contract = "pactoVersion: \"2.0\"\nservice:\n  name: billing\n  version: 1.0.0\nconfigurations:\n  - name: settings\n    required: true\n    schema: configuration/schema.json\n";
    let billing = PactoBuilder::inline("billing", contract)
        .check_interval(30)
        .target(
            serde_json::from_value(json!({
                "serviceName": "payments",
                "configBindings": [{
                    "configuration": "settings", "kind": "ConfigMap", "name": "billing-settings",
                    "key": "app.yaml", "format": "yaml",
                }],
            }))
            .unwrap(),
        )
        .manifest();
    stack.apply(&billing).await.unwrap();

    let compliant = stack
        .wait_contract_status("payments", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    expect_condition(&compliant, "RuntimeObserved", "True", "Found");
    let refused = wait_pacto(&stack, "billing", "ObservationFailed", |p| {
        condition(p, "RuntimeObserved").is_some_and(|c| c.1 == "ObservationFailed")
    })
    .await;
    let api_error = expect_condition(&refused, "RuntimeObserved", "False", "ObservationFailed");
    assert!(api_error.contains("forbidden"), "{api_error}");

    stack.stop_service("evaluator").unwrap();
    stack.nudge("payments", "evaluator-down").await.unwrap();
    stack.nudge("billing", "evaluator-down").await.unwrap();
    let down = stack
        .wait_contract_status("payments", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        expect_condition(&down, "RuntimeObserved", "True", "Found"),
        "Runtime evidence collected successfully"
    );
    assert_eq!(condition(&down, "ContractValid").unwrap().1, "Parsed");
    assert_eq!(down["status"]["summary"]["unknownCount"], 1, "{down:#}");
    assert_eq!(down["status"]["summary"]["errorCount"], 0, "{down:#}");
    assert!(
        down["status"]["findings"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{down:#}"
    );
    assert_eq!(
        down["status"]["resources"]["service"]["exists"], true,
        "{down:#}"
    );
    // billing was Unknown already; the pass without an evaluator shows as no findings.
    let down = wait_pacto(&stack, "billing", "evaluated by nobody", |p| {
        p["status"]["findings"].as_array().is_none_or(Vec::is_empty)
    })
    .await;
    assert_eq!(down["status"]["contractStatus"], "Unknown", "{down:#}");
    assert_eq!(
        expect_condition(&down, "RuntimeObserved", "False", "ObservationFailed"),
        api_error
    );
    assert_eq!(down["status"]["summary"]["unknownCount"], 1, "{down:#}");
    // The status-writer's log names the evaluator.
    let writer = stack
        .services
        .iter()
        .find(|s| s.name == "status-writer")
        .unwrap();
    let log = writer.process.log_tail(1 << 20);
    assert!(
        log.lines()
            .any(|l| l.contains("backend call failed") && l.contains("evaluator unavailable")),
        "the status-writer's log does not name the evaluator:\n{log}"
    );

    // Back: the retry restores the verdicts without a nudge.
    stack.restart_service("evaluator").await.unwrap();
    let back = stack
        .wait_contract_status("payments", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    expect_condition(&back, "RuntimeObserved", "True", "Found");
    let back = wait_pacto(&stack, "billing", "evaluated again", |p| {
        p["status"]["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["code"] == "COLLECTION_FAILED"))
    })
    .await;
    expect_condition(&back, "RuntimeObserved", "False", "ObservationFailed");
}
