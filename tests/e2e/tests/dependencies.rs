//! Dependencies end to end (docs/design/observation.md#dependencies), with every sibling status
//! written by the real status-writer: a Pacto `checkout` whose contract depends on service
//! `payments` finds its sibling through the `payments` Pacto's `status.contract`, then reads that
//! sibling's Service and Ready endpoints.
//!
//! - while no Pacto manages `payments`, the dependency cannot be observed (Unknown,
//!   `OBSERVATION_UNSUPPORTED`: external or not Pacto-managed);
//! - once the `payments` Pacto resolves and is Compliant, `checkout` turns Compliant with no
//!   finding, without waiting for its check interval (the sibling's status change notifies it);
//! - payments scaled to zero: no Ready endpoint, a negative streak, and beyond the stabilization
//!   window `DEPENDENCY_UNREACHABLE` on `dependency/payments` (NonCompliant);
//! - payments scaled back: the finding and the window clear;
//! - the payments Pacto deleted: not Pacto-managed any more, Unknown again.
//!
//! Both Pactos are checked once an hour, so no requeue timer can produce a transition.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use pacto_api::testing::PactoBuilder;
use pacto_e2e::{STATUS_DEADLINE, Stack, deployment, expect_runtime_found, target_service};
use serde_json::{Value, json};

/// Longer than any test: only watches and the stabilization window can trigger a reconcile.
const HOURLY: i32 = 3600;

/// The findings of a Pacto (from `kubectl get -o yaml`), or none.
fn findings(pacto: &Value) -> Vec<Value> {
    pacto["status"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The finding about `subject`, if any.
fn finding_on(pacto: &Value, subject: &str) -> Option<Value> {
    findings(pacto)
        .into_iter()
        .find(|f| f["subject"] == subject)
}

/// Whether the Pacto has an observation window `(kind, subject)`.
fn has_window(pacto: &Value, kind: &str, subject: &str) -> bool {
    pacto["status"]["observationWindows"]
        .as_array()
        .is_some_and(|ws| {
            ws.iter()
                .any(|w| w["kind"] == kind && w["subject"] == subject)
        })
}

/// The contract of `checkout`: no interface, one required dependency on the `payments`
/// contract's repository (untagged: any version in `^1.0.0`).
fn checkout_contract(payments_repository: &str) -> String {
    format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: checkout\n  version: 2.0.0\ndependencies:\n  - name: payments\n    ref: {payments_repository}\n    required: true\n    compatibility: \"^1.0.0\"\n"
    )
}

/// A Pacto targeting Service `name`, checked hourly.
fn hourly(builder: PactoBuilder, name: &str) -> String {
    builder.service(name).check_interval(HOURLY).manifest()
}

/// `kubectl scale deployment/<name> --replicas=<n>`, then waits for the rollout.
async fn scale(stack: &Stack, name: &str, replicas: u32) {
    let deployment = format!("deployment/{name}");
    stack
        .kubectl(
            &[
                "scale",
                "-n",
                &stack.namespace,
                &deployment,
                &format!("--replicas={replicas}"),
            ],
            None,
        )
        .await
        .unwrap();
    stack
        .kubectl(
            &[
                "rollout",
                "status",
                "-n",
                &stack.namespace,
                &deployment,
                "--timeout=60s",
            ],
            None,
        )
        .await
        .unwrap();
}

/// Waits until the Pacto `name` is `status`; `step` names the step of the story in the panic
/// message, which also carries the last status seen and the services' logs.
async fn wait_status(stack: &Stack, name: &str, status: &str, step: &str) -> Value {
    stack
        .wait_pacto(
            name,
            &format!("{name} to be {status} ({step})"),
            STATUS_DEADLINE,
            |p| p["status"]["contractStatus"] == status,
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_follows_its_sibling_pacto() {
    let stack = Stack::start().await.unwrap();

    // The payments contract in the registry (`pacto push`, tag = service.version).
    let (repository, _) = stack
        .push_contract(
            "payments",
            "pactoVersion: \"2.0\"\nservice:\n  name: payments\n  version: 1.4.0\n",
            "",
        )
        .await
        .unwrap();

    // Both workloads run, each behind its Service.
    for name in ["payments", "checkout"] {
        stack.apply(&deployment(name)).await.unwrap();
        stack.apply(&target_service(name)).await.unwrap();
        stack.wait_available(name).await.unwrap();
    }

    // (0) No Pacto manages payments yet: the dependency is not Pacto-managed, so it cannot be
    // observed (the Service named `payments` is not enough).
    stack
        .apply(&hourly(
            PactoBuilder::inline("checkout", &checkout_contract(&repository)),
            "checkout",
        ))
        .await
        .unwrap();
    let pacto = wait_status(&stack, "checkout", "Unknown", "no Pacto manages payments").await;
    let unsupported = finding_on(&pacto, "dependency/payments")
        .unwrap_or_else(|| panic!("no finding on dependency/payments:\n{pacto:#}"));
    assert_eq!(unsupported["code"], "OBSERVATION_UNSUPPORTED", "{pacto:#}");
    assert_eq!(findings(&pacto).len(), 1, "{pacto:#}");
    expect_runtime_found(&pacto);

    // (1) The payments Pacto resolves its contract and reaches Compliant through the pipeline;
    // its status.contract is what checkout's dependency matches.
    stack
        .apply(&hourly(
            PactoBuilder::oci("payments", &repository),
            "payments",
        ))
        .await
        .unwrap();
    let payments = wait_status(&stack, "payments", "Compliant", "payments resolved").await;
    let resolved = payments["status"]["contract"]["resolvedRef"]
        .as_str()
        .unwrap_or_default();
    let bare = repository.trim_start_matches("oci://");
    assert!(
        resolved.starts_with(bare),
        "payments resolved to {resolved:?}, not under {bare}:\n{payments:#}"
    );
    assert_eq!(
        payments["status"]["contract"]["version"], "1.4.0",
        "{payments:#}"
    );

    // The sibling's status change re-observes checkout (hourly: no timer): Compliant, the
    // dependency evaluated, no finding.
    let pacto = wait_status(&stack, "checkout", "Compliant", "payments Compliant").await;
    assert!(findings(&pacto).is_empty(), "{pacto:#}");
    assert_eq!(
        pacto["status"]["evaluationCoverage"],
        json!({ "evaluated": 1, "required": 1 }),
        "{pacto:#}"
    );
    assert!(!has_window(&pacto, "dependency", "payments"), "{pacto:#}");
    expect_runtime_found(&pacto);

    // (2) payments goes down: no Ready endpoint behind its Service. The slices' change notifies
    // checkout; beyond the stabilization window the absence is confirmed.
    scale(&stack, "payments", 0).await;
    let pacto = wait_status(&stack, "checkout", "NonCompliant", "payments scaled to 0").await;
    assert_eq!(findings(&pacto).len(), 1, "{pacto:#}");
    let unreachable = finding_on(&pacto, "dependency/payments")
        .unwrap_or_else(|| panic!("no finding on dependency/payments:\n{pacto:#}"));
    assert_eq!(unreachable["code"], "DEPENDENCY_UNREACHABLE", "{pacto:#}");
    assert_eq!(unreachable["severity"], "error", "{pacto:#}");
    assert_eq!(unreachable["category"], "RuntimeDrift", "{pacto:#}");
    assert_eq!(
        unreachable["message"], "dependency \"payments\" is unreachable",
        "{pacto:#}"
    );
    assert!(
        has_window(&pacto, "dependency", "payments"),
        "the streak stays open while the absence lasts:\n{pacto:#}"
    );
    expect_runtime_found(&pacto);
    stack
        .wait_describe(
            "checkout",
            &[
                "DEPENDENCY_UNREACHABLE",
                "dependency \"payments\" is unreachable",
                "ContractStatus: NonCompliant, 1 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // (3) payments is back: a Ready endpoint again, and the finding and the window clear.
    scale(&stack, "payments", 1).await;
    let pacto = wait_status(&stack, "checkout", "Compliant", "payments scaled back to 1").await;
    assert!(findings(&pacto).is_empty(), "{pacto:#}");
    assert!(!has_window(&pacto, "dependency", "payments"), "{pacto:#}");
    expect_runtime_found(&pacto);

    // (4) The payments Pacto is deleted: payments still runs, but no Pacto manages it any more,
    // so the dependency is again not observable (the deletion notifies checkout).
    stack
        .kubectl(
            &["delete", "pacto", "payments", "-n", &stack.namespace],
            None,
        )
        .await
        .unwrap();
    let pacto = wait_status(&stack, "checkout", "Unknown", "payments Pacto deleted").await;
    assert_eq!(findings(&pacto).len(), 1, "{pacto:#}");
    assert_eq!(
        finding_on(&pacto, "dependency/payments").map(|f| f["code"].clone()),
        Some(json!("OBSERVATION_UNSUPPORTED")),
        "{pacto:#}"
    );
}
