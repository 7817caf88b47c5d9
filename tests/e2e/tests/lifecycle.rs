//! The troubleshooting guide's "Reading the conditions" and "Reading the events" over a Pacto's
//! life, read the way a user reads them (`kubectl get pacto -o yaml`, `kubectl describe pacto`,
//! `kubectl get events`): recovery from Invalid with sticky conditions and one event per state,
//! the readiness gate flipping both ways and expiring, backends that go down (never a false
//! verdict) and a cluster query the observer's Role refuses (RuntimeObserved
//! False/ObservationFailed, COLLECTION_FAILED). The four services run as processes (see
//! the `pacto-e2e` library).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use pacto_e2e::{
    STATUS_DEADLINE, Stack, StackOptions, condition, deployment, expect_condition, indent,
    inline_pacto, target_service, times_emitted,
};
use pacto_runtime::testing::eventually;
use serde_json::Value;

/// The whole condition object `kind` (for stickiness: lastTransitionTime, observedGeneration).
fn condition_object(pacto: &Value, kind: &str) -> Value {
    pacto["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} condition: {pacto}"))
}

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

/// Waits until the `kind` condition has `status` (`None`: until it is absent).
async fn wait_condition(stack: &Stack, name: &str, kind: &str, status: Option<&str>) -> Value {
    wait_pacto(stack, name, &format!("{kind}={status:?}"), |p| {
        condition(p, kind).map(|c| c.0).as_deref() == status
    })
    .await
}

/// One row of the `Events:` block of `kubectl describe pacto`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DescribedEvent {
    kind: String,
    reason: String,
    /// The Age column, e.g. `12s` or `5s (x2 over 20s)`.
    age: String,
    message: String,
}

/// Parses the `Events:` table that closes `kubectl describe` (columns Type, Reason, Age, From,
/// Message; the Age column may contain spaces, the From column is the reporting controller).
fn described_events(described: &str) -> Vec<DescribedEvent> {
    let Some(block) = described.split("\nEvents:").nth(1) else {
        return Vec::new();
    };
    block
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let kind = words.next()?;
            if kind != "Normal" && kind != "Warning" {
                return None;
            }
            let reason = words.next()?.to_owned();
            let rest = line.split_once(reason.as_str())?.1;
            let (age, message) = rest.split_once("pacto-controller")?;
            Some(DescribedEvent {
                kind: kind.to_owned(),
                reason,
                age: age.trim().to_owned(),
                message: message.trim().to_owned(),
            })
        })
        .collect()
}

/// Polls `kubectl describe pacto` until its Events block has a `kind`/`reason` row whose message
/// is `message` (exact), and returns the whole describe output.
async fn wait_event(stack: &Stack, name: &str, kind: &str, reason: &str, message: &str) -> String {
    wait_event_matching(stack, name, kind, reason, |m| m == message).await
}

async fn wait_event_matching(
    stack: &Stack,
    name: &str,
    kind: &str,
    reason: &str,
    message: impl Fn(&str) -> bool,
) -> String {
    eventually(
        &format!("`kubectl describe pacto {name}` to show a {kind} {reason} event as expected"),
        STATUS_DEADLINE,
        || async {
            let described = stack.describe_pacto(name).await.unwrap();
            if described_events(&described)
                .iter()
                .any(|e| e.kind == kind && e.reason == reason && message(&e.message))
            {
                Ok(described)
            } else {
                Err(described)
            }
        },
    )
    .await
}

/// One Event of `kubectl get events --field-selector involvedObject.name=<name> -o yaml`.
#[derive(Debug, Clone)]
struct RecordedEvent {
    kind: String,
    reason: String,
    message: String,
    /// How many times it was recorded: its `count` (a recurrence of the same type, reason and
    /// message is counted on one Event, docs/design/status.md#events).
    count: u64,
}

/// The Events recorded on the Pacto `name` (other kinds with the same name are left out).
async fn recorded_events(stack: &Stack, name: &str) -> Vec<RecordedEvent> {
    let events = stack.pacto_events(name, &[]).await.unwrap();
    events
        .iter()
        .map(|e| RecordedEvent {
            kind: text(&e["type"]).to_owned(),
            reason: text(&e["reason"]).to_owned(),
            message: text(&e["message"]).to_owned(),
            count: times_emitted(std::slice::from_ref(e), text(&e["reason"])).unwrap(),
        })
        .collect()
}

/// How many times `reason` was recorded on the Pacto: the sum of the counts of its Events (one
/// Event per message), not the number of objects.
async fn times_recorded(stack: &Stack, name: &str, reason: &str) -> u64 {
    let events = stack.pacto_events(name, &[]).await.unwrap();
    times_emitted(&events, reason).unwrap()
}

/// Waits until the wall clock is at least one second past the RFC 3339 time `at` (condition
/// times have one-second granularity, so only then can a moved lastTransitionTime be told from
/// a kept one).
async fn wait_clock_past(at: &Value) {
    let at: k8s_openapi::jiff::Timestamp = text(at).parse().unwrap();
    let target = at + k8s_openapi::jiff::SignedDuration::from_secs(1);
    eventually(
        &format!("the clock to pass the API server's {at} (it is far behind)"),
        Duration::from_secs(5),
        || std::future::ready(k8s_openapi::jiff::Timestamp::now() >= target),
    )
    .await;
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// "Reading the conditions" (stickiness, observedGeneration) and "Reading the events"
/// (transition gating, ContractRecovered): an inline contract that is Invalid, nudged several
/// times, then fixed with `kubectl apply`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_contract_recovers_with_sticky_conditions_and_one_event_per_state() {
    let stack = Stack::start().await.unwrap();
    let broken = "pactoVersion: \"2.0\"\nservice:\n  name: catalog\n  version: not-a-version\n";
    stack
        .apply(&inline_pacto("catalog", broken, None))
        .await
        .unwrap();
    let invalid = stack
        .wait_contract_status("catalog", "Invalid", STATUS_DEADLINE)
        .await
        .unwrap();
    let generation = invalid["metadata"]["generation"].as_i64().unwrap();
    let valid = condition_object(&invalid, "ContractValid");
    assert_eq!(valid["status"], "False", "{invalid}");
    assert_eq!(valid["reason"], "Invalid", "{invalid}");
    assert_eq!(valid["observedGeneration"], generation, "{invalid}");
    assert_eq!(invalid["status"]["observedGeneration"], generation);
    assert!(
        condition(&invalid, "RuntimeObserved").is_none(),
        "{invalid}"
    );
    // ContractInvalid carries the same message as the ContractValid / Invalid condition.
    let message = text(&valid["message"]).to_owned();
    assert!(
        message.starts_with("Contract validation failed: "),
        "{message}"
    );
    wait_event(&stack, "catalog", "Warning", "ContractInvalid", &message).await;

    // A contract that stays broken emits one event, not one per reconcile; the nudges change
    // no condition (same lastTransitionTime, same observedGeneration: annotations do not move
    // metadata.generation).
    wait_clock_past(&valid["lastTransitionTime"]).await;
    for n in 1..=3 {
        stack
            .nudge("catalog", &format!("invalid-{n}"))
            .await
            .unwrap();
    }
    let nudged = stack.get_pacto("catalog").await.unwrap();
    assert_eq!(nudged["metadata"]["generation"], generation, "{nudged}");
    assert_eq!(
        condition_object(&nudged, "ContractValid"),
        valid,
        "a nudge moved the ContractValid condition"
    );
    assert_eq!(
        nudged["status"], invalid["status"],
        "a nudge rewrote status"
    );
    let recorded = recorded_events(&stack, "catalog").await;
    let invalid_events: Vec<_> = recorded
        .iter()
        .filter(|e| e.reason == "ContractInvalid")
        .collect();
    assert_eq!(invalid_events.len(), 1, "{recorded:?}");
    assert_eq!(invalid_events[0].count, 1, "{recorded:?}");
    assert_eq!(invalid_events[0].kind, "Warning");
    assert_eq!(invalid_events[0].message, message);

    // Fixed with `kubectl apply`: a new generation, Reference, ContractRecovered.
    let fixed = "pactoVersion: \"2.0\"\nservice:\n  name: catalog\n  version: 1.4.0\n";
    stack
        .apply(&inline_pacto("catalog", fixed, None))
        .await
        .unwrap();
    let recovered = stack
        .wait_contract_status("catalog", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    let new_generation = recovered["metadata"]["generation"].as_i64().unwrap();
    assert!(new_generation > generation, "{recovered}");
    let valid_now = condition_object(&recovered, "ContractValid");
    assert_eq!(valid_now["status"], "True", "{recovered}");
    assert_eq!(valid_now["reason"], "ReferenceOnly", "{recovered}");
    assert_eq!(
        valid_now["message"], "Reference contract catalog v1.4.0 is valid",
        "{recovered}"
    );
    assert_eq!(
        valid_now["observedGeneration"], new_generation,
        "{recovered}"
    );
    assert_eq!(recovered["status"]["observedGeneration"], new_generation);
    assert_ne!(
        valid_now["lastTransitionTime"], valid["lastTransitionTime"],
        "False -> True must move lastTransitionTime"
    );
    assert!(
        recovered["status"].get("validation").is_some(),
        "{recovered}"
    );
    assert_eq!(recovered["status"]["summary"]["errorCount"], 0);
    let described = wait_event(
        &stack,
        "catalog",
        "Normal",
        "ContractRecovered",
        "ContractStatus: Reference, 0 errors, 0 warnings",
    )
    .await;
    // The earlier warning is still listed with the recovery after it.
    assert!(
        described_events(&described)
            .iter()
            .any(|e| e.kind == "Warning" && e.reason == "ContractInvalid" && e.message == message),
        "{described}"
    );

    // Sticky while unchanged: nudges keep the True condition's lastTransitionTime, and the
    // recovery is recorded once.
    wait_clock_past(&valid_now["lastTransitionTime"]).await;
    for n in 1..=2 {
        stack
            .nudge("catalog", &format!("recovered-{n}"))
            .await
            .unwrap();
    }
    let later = stack.get_pacto("catalog").await.unwrap();
    assert_eq!(condition_object(&later, "ContractValid"), valid_now);
    assert_eq!(
        later["status"], recovered["status"],
        "a nudge rewrote status"
    );
    assert_eq!(
        times_recorded(&stack, "catalog", "ContractRecovered").await,
        1
    );
    assert_eq!(
        times_recorded(&stack, "catalog", "ContractInvalid").await,
        1
    );
    let recorded = recorded_events(&stack, "catalog").await;
    assert!(
        recorded.iter().all(
            |e| ["ContractInvalid", "ContractRecovered", "RevisionCreated"]
                .contains(&e.reason.as_str())
        ),
        "unexpected event reasons: {recorded:?}"
    );
}

/// A contract with a readiness block; `claims` are flow mappings (one a line).
fn readiness_contract(service: &str, expires: &str, min_score: u32, claims: &[&str]) -> String {
    let claims = indent(
        &claims
            .iter()
            .map(|c| format!("- {c}"))
            .collect::<Vec<_>>()
            .join("\n"),
        "    ",
    );
    format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: {service}\n  version: 1.0.0\nreadiness:\n  expires: \"{expires}\"\n  minScore: {min_score}\n  claims:\n{claims}"
    )
}

const DASHBOARD_DONE: &str = "{ id: dashboard, type: url, status: done, weight: 40, evidence: \"https://grafana.example.com/d/gate\" }";
const RUNBOOK_PARTIAL: &str =
    "{ id: runbook, type: document, status: partial, weight: 30, evidence: docs/runbook.md }";
const PEN_TEST_NOT_DONE: &str =
    "{ id: pen-test, type: ticket, status: not-done, weight: 30, evidence: SEC-7 }";
const PEN_TEST_DONE: &str =
    "{ id: pen-test, type: ticket, status: done, weight: 30, evidence: SEC-7 }";

/// "Reading the conditions" ReadinessSatisfied rows and the readiness event pair: below the
/// gate, met, unmet again, expired, and no readiness block at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_gate_flips_expires_and_disappears() {
    let stack = Stack::start().await.unwrap();

    // 40 done + 30 partial (×0.5 = 15) + 30 not-done: score 55 of 100, below minScore 75.
    let below = readiness_contract(
        "gate",
        "2099-12-31",
        75,
        &[DASHBOARD_DONE, RUNBOOK_PARTIAL, PEN_TEST_NOT_DONE],
    );
    stack
        .apply(&inline_pacto("gate", &below, None))
        .await
        .unwrap();
    let pacto = wait_condition(&stack, "gate", "ReadinessSatisfied", Some("False")).await;
    let unmet = "readiness score 55 below minScore 75 (1 done, 1 partial, 1 not-done, 0 deferred)";
    assert_eq!(
        condition(&pacto, "ReadinessSatisfied").unwrap(),
        ("False".into(), "BelowMinScore".into(), unmet.into())
    );
    // Readiness never changes contractStatus.
    assert_eq!(pacto["status"]["contractStatus"], "Reference", "{pacto}");
    let readiness = &pacto["status"]["readiness"];
    assert_eq!(readiness["score"], 55, "{readiness}");
    assert_eq!(readiness["minScore"], 75, "{readiness}");
    assert_eq!(readiness["passing"], false, "{readiness}");
    assert_eq!(readiness["expired"], false, "{readiness}");
    assert_eq!(readiness["totalWeight"], 100, "{readiness}");
    assert_eq!(readiness["earnedWeight"], 55, "{readiness}");
    assert_eq!(
        (
            &readiness["doneCount"],
            &readiness["partialCount"],
            &readiness["notDoneCount"],
            &readiness["deferredCount"]
        ),
        (&1.into(), &1.into(), &1.into(), &0.into()),
        "{readiness}"
    );
    // The first evaluation that is unmet emits ReadinessGateUnmet (docs/design/status.md#events).
    wait_event(&stack, "gate", "Warning", "ReadinessGateUnmet", unmet).await;

    // The pen test is done: 85 meets 75, ReadinessRecovered.
    let met = readiness_contract(
        "gate",
        "2099-12-31",
        75,
        &[DASHBOARD_DONE, RUNBOOK_PARTIAL, PEN_TEST_DONE],
    );
    stack
        .apply(&inline_pacto("gate", &met, None))
        .await
        .unwrap();
    let pacto = wait_condition(&stack, "gate", "ReadinessSatisfied", Some("True")).await;
    let satisfied = "readiness score 85 meets minScore 75";
    assert_eq!(
        condition(&pacto, "ReadinessSatisfied").unwrap(),
        ("True".into(), "Satisfied".into(), satisfied.into())
    );
    assert_eq!(pacto["status"]["readiness"]["passing"], true, "{pacto}");
    let gate = condition_object(&pacto, "ReadinessSatisfied");
    assert_eq!(gate["observedGeneration"], pacto["metadata"]["generation"]);
    wait_event(&stack, "gate", "Normal", "ReadinessRecovered", satisfied).await;

    // And back: the gate went from met to unmet, a second ReadinessGateUnmet.
    stack
        .apply(&inline_pacto("gate", &below, None))
        .await
        .unwrap();
    wait_condition(&stack, "gate", "ReadinessSatisfied", Some("False")).await;
    eventually("a second ReadinessGateUnmet", STATUS_DEADLINE, || async {
        if times_recorded(&stack, "gate", "ReadinessGateUnmet").await >= 2 {
            Ok(())
        } else {
            Err(format!("{:?}", recorded_events(&stack, "gate").await))
        }
    })
    .await;
    let described = stack.describe_pacto("gate").await.unwrap();
    let rows = described_events(&described);
    let gate_unmet: Vec<_> = rows
        .iter()
        .filter(|e| e.reason == "ReadinessGateUnmet")
        .collect();
    assert!(
        gate_unmet
            .iter()
            .all(|e| e.kind == "Warning" && e.message == unmet),
        "{described}"
    );
    assert_eq!(
        times_recorded(&stack, "gate", "ReadinessRecovered").await,
        1
    );

    // No readiness block any more: the condition and status.readiness are gone.
    let plain = "pactoVersion: \"2.0\"\nservice:\n  name: gate\n  version: 1.1.0\n";
    stack
        .apply(&inline_pacto("gate", plain, None))
        .await
        .unwrap();
    let pacto = wait_condition(&stack, "gate", "ReadinessSatisfied", None).await;
    assert!(pacto["status"].get("readiness").is_none(), "{pacto}");
    assert_eq!(pacto["status"]["contractVersion"], "1.1.0", "{pacto}");

    // Expired (targeted this time, so the evaluator's Evaluate path assesses it): score 0,
    // ReadinessSatisfied False/Expired, while the verdict stays Compliant.
    let expired = readiness_contract("stale", "2020-01-31", 50, &[DASHBOARD_DONE]);
    stack.apply(&target_service("stale")).await.unwrap();
    stack
        .apply(&inline_pacto("stale", &expired, Some("serviceName: stale")))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("stale", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    let expired_message = "readiness assessment expired (expires 2020-01-31); score 0 below minScore 50 (1 done, 0 partial, 0 not-done, 0 deferred)";
    assert_eq!(
        condition(&pacto, "ReadinessSatisfied").unwrap(),
        ("False".into(), "Expired".into(), expired_message.into()),
        "{pacto}"
    );
    let readiness = &pacto["status"]["readiness"];
    assert_eq!(readiness["score"], 0, "{readiness}");
    assert_eq!(readiness["expired"], true, "{readiness}");
    assert_eq!(readiness["passing"], false, "{readiness}");
    assert_eq!(readiness["expires"], "2020-01-31", "{readiness}");
    assert!(readiness.get("daysRemaining").is_none(), "{readiness}");
    wait_event(
        &stack,
        "stale",
        "Warning",
        "ReadinessGateUnmet",
        expired_message,
    )
    .await;

    // A Pacto that never declared readiness has no ReadinessSatisfied condition.
    stack
        .apply(&inline_pacto(
            "plain",
            "pactoVersion: \"2.0\"\nservice:\n  name: plain\n  version: 1.0.0\n",
            None,
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("plain", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(condition(&pacto, "ReadinessSatisfied").is_none(), "{pacto}");
    assert!(pacto["status"].get("readiness").is_none(), "{pacto}");
}

/// Fields of a status that a backend outage must not lose or falsify.
fn kept_fields(pacto: &Value) -> Vec<(&'static str, Value)> {
    let status = &pacto["status"];
    vec![
        ("currentRevision", status["currentRevision"].clone()),
        ("readiness", status["readiness"].clone()),
        (
            "ReadinessSatisfied",
            condition_object(pacto, "ReadinessSatisfied"),
        ),
    ]
}

/// Issue 7: "A backend that is down or slow never produces a false verdict". Each backend in
/// turn is stopped under a Compliant Pacto, the Pacto is nudged, and the status says Unknown
/// (naming the service in the condition that belongs to it: ContractValid for the
/// contract-resolver, RuntimeObserved for the observer; the evaluator owns none, so
/// RuntimeObserved keeps the observation's result); when it comes back the reconcile's retry
/// restores Compliant with a ContractRecovered event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_is_down_reads_unknown_naming_it_and_recovers() {
    let mut stack = Stack::start().await.unwrap();
    stack.apply(&deployment("payments")).await.unwrap();
    stack.apply(&target_service("payments")).await.unwrap();
    let contract = readiness_contract(
        "payments",
        "2099-12-31",
        75,
        &[DASHBOARD_DONE, PEN_TEST_DONE],
    );
    stack
        .apply(&inline_pacto(
            "payments",
            &contract,
            Some("serviceName: payments"),
        ))
        .await
        .unwrap();
    let compliant = wait_pacto(
        &stack,
        "payments",
        "Compliant with the workload seen",
        |p| {
            p["status"]["contractStatus"] == "Compliant"
                && p["status"]["observedRuntime"]["workloadKind"] == "Deployment"
        },
    )
    .await;
    assert_eq!(
        condition(&compliant, "RuntimeObserved").unwrap().1,
        "Found",
        "{compliant}"
    );
    assert_eq!(
        condition(&compliant, "ReadinessSatisfied").unwrap(),
        (
            "True".into(),
            "Satisfied".into(),
            "readiness score 100 meets minScore 75".into()
        )
    );
    let contract_valid = condition_object(&compliant, "ContractValid");
    let kept = kept_fields(&compliant);
    let recovered_message = "ContractStatus: Compliant, 0 errors, 0 warnings";

    // The evaluator is down: the observer answered, nothing evaluated the evidence. The
    // observation stands on its own (RuntimeObserved True/Found); the verdict is Unknown.
    stack.stop_service("evaluator").unwrap();
    stack.nudge("payments", "evaluator-down").await.unwrap();
    let down = stack
        .wait_contract_status("payments", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        expect_condition(&down, "RuntimeObserved", "True", "Found"),
        "Runtime evidence collected successfully"
    );
    assert_eq!(condition_object(&down, "ContractValid"), contract_valid);
    assert_eq!(kept_fields(&down), kept, "{down}");
    let summary = &down["status"]["summary"];
    assert_eq!(
        (&summary["errorCount"], &summary["warningCount"]),
        (&0.into(), &0.into())
    );
    assert_eq!(summary["unknownCount"], 1, "{down}");
    assert!(
        down["status"]["findings"]
            .as_array()
            .is_none_or(|f| f.iter().all(|f| f["severity"] != "error")),
        "{down}"
    );
    assert_eq!(
        down["status"]["observedRuntime"]["workloadKind"],
        "Deployment"
    );
    assert_eq!(down["status"]["contractVersion"], "1.0.0");
    wait_event(
        &stack,
        "payments",
        "Warning",
        "ValidationFailed",
        "ContractStatus: Unknown, 0 errors, 0 warnings",
    )
    .await;
    // Back: the reconcile retries by itself (backoff, no nudge) and recovers.
    stack.restart_service("evaluator").await.unwrap();
    let back = stack
        .wait_contract_status("payments", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(condition(&back, "RuntimeObserved").unwrap().1, "Found");
    assert_eq!(kept_fields(&back), kept);
    wait_event(
        &stack,
        "payments",
        "Normal",
        "ContractRecovered",
        recovered_message,
    )
    .await;

    // The contract-resolver is down: ContractValid Unknown/Unavailable naming it, never Invalid;
    // validation left empty, RuntimeObserved removed (observation never ran), readiness left as
    // it was.
    stack.stop_service("contract-resolver").unwrap();
    stack.nudge("payments", "resolver-down").await.unwrap();
    let down = stack
        .wait_contract_status("payments", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let message = expect_condition(&down, "ContractValid", "Unknown", "Unavailable");
    assert!(
        message.starts_with("contract-resolver unavailable: "),
        "{message}"
    );
    assert!(down["status"].get("validation").is_none(), "{down}");
    assert!(condition(&down, "RuntimeObserved").is_none(), "{down}");
    // status.readiness is derived state (reset on a fail path); the condition stays as it was
    // (docs/design/status.md#failure-paths) and so does currentRevision.
    assert_eq!(kept_fields(&down)[0], kept[0], "{down}");
    assert_eq!(kept_fields(&down)[2], kept[2], "{down}");
    assert_eq!(down["status"]["summary"]["unknownCount"], 1, "{down}");
    assert_eq!(down["status"]["summary"]["errorCount"], 0, "{down}");
    wait_event(
        &stack,
        "payments",
        "Warning",
        "ContractUnavailable",
        &message,
    )
    .await;
    stack.restart_service("contract-resolver").await.unwrap();
    let back = stack
        .wait_contract_status("payments", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(condition(&back, "ContractValid").unwrap().1, "Parsed");
    assert_eq!(kept_fields(&back), kept);

    // The observer is down: RuntimeObserved False/ObservationFailed naming it (the guide's two
    // states only); the contract is still valid.
    stack.stop_service("observer").unwrap();
    stack.nudge("payments", "observer-down").await.unwrap();
    let down = stack
        .wait_contract_status("payments", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let message = expect_condition(&down, "RuntimeObserved", "False", "ObservationFailed");
    assert!(message.starts_with("observer unavailable: "), "{message}");
    assert_eq!(condition(&down, "ContractValid").unwrap().1, "Parsed");
    assert_eq!(kept_fields(&down), kept, "{down}");
    assert_eq!(down["status"]["summary"]["errorCount"], 0, "{down}");
    stack.restart_service("observer").await.unwrap();
    stack
        .wait_contract_status("payments", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();

    // No outage produced a verdict: the only statuses ever announced are Unknown and the
    // recoveries to Compliant.
    eventually("three recoveries", STATUS_DEADLINE, || async {
        if times_recorded(&stack, "payments", "ContractRecovered").await >= 3 {
            Ok(())
        } else {
            Err(format!("{:?}", recorded_events(&stack, "payments").await))
        }
    })
    .await;
    let recorded = recorded_events(&stack, "payments").await;
    for event in &recorded {
        match event.reason.as_str() {
            "ValidationFailed" => assert_eq!(
                event.message, "ContractStatus: Unknown, 0 errors, 0 warnings",
                "{recorded:?}"
            ),
            "ContractRecovered" => assert_eq!(event.message, recovered_message),
            "ContractUnavailable" => {
                assert!(event.message.starts_with("contract-resolver unavailable: "));
            }
            "RevisionCreated" => {}
            other => panic!("unexpected {other} event: {recorded:?}"),
        }
    }
    assert_eq!(
        times_recorded(&stack, "payments", "ValidationFailed").await,
        2
    );
    assert_eq!(
        times_recorded(&stack, "payments", "ContractUnavailable").await,
        1
    );
}

/// "RuntimeObserved False / ObservationFailed — a cluster query errored, the message carries the
/// API error", "COLLECTION_FAILED — check the RuntimeObserved condition and the operator logs"
/// and "Operator RBAC errors": the observer's Role lacks ConfigMaps (read by direct GETs) and
/// EndpointSlices (read from a watched cache, whose list is refused), so reading a bound
/// ConfigMap and a Service's endpoints is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_cluster_query_is_observation_failed_and_collection_failed() {
    let stack = Stack::start_with(StackOptions {
        observer_denied: vec!["configmaps", "endpointslices"],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    // The ConfigMap exists: what fails is the permission, not the object.
    stack
        .apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: billing-settings\ndata:\n  app.yaml: \"port: 8080\\n\"\n")
        .await
        .unwrap();
    let contract = "pactoVersion: \"2.0\"\nservice:\n  name: billing\n  version: 1.0.0\nconfigurations:\n  - name: settings\n    required: true\n    schema: configuration/schema.json\n";
    stack
        .apply(&inline_pacto(
            "billing",
            contract,
            Some("serviceName: billing\nconfigBindings:\n  - configuration: settings\n    kind: ConfigMap\n    name: billing-settings\n    key: app.yaml\n    format: yaml\n"),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("billing", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let message = expect_condition(&pacto, "RuntimeObserved", "False", "ObservationFailed");
    assert!(
        message.starts_with("Runtime observation failed: "),
        "{message}"
    );
    // The API server's own words, as kubectl would print them (no client-library dump).
    let ns = &stack.namespace;
    assert!(
        message.starts_with(&format!(
            "Runtime observation failed: get configmaps {ns}/billing-settings: configmaps \"billing-settings\" is forbidden: User \"system:serviceaccount:{ns}:"
        )),
        "{message}"
    );
    assert!(
        message.ends_with(&format!(
            "cannot get resource \"configmaps\" in API group \"\" in the namespace \"{ns}\": Forbidden"
        )),
        "{message}"
    );
    assert_eq!(condition(&pacto, "ContractValid").unwrap().1, "Parsed");
    let findings = pacto["status"]["findings"].as_array().unwrap();
    let failed = findings
        .iter()
        .find(|f| f["subject"] == "configuration/settings")
        .unwrap_or_else(|| panic!("no configuration finding: {pacto}"));
    assert_eq!(failed["code"], "COLLECTION_FAILED", "{failed}");
    assert_eq!(failed["severity"], "unknown", "{failed}");
    assert_eq!(failed["category"], "Inconclusive", "{failed}");
    assert_eq!(pacto["status"]["summary"]["errorCount"], 0, "{pacto}");
    assert!(
        pacto["status"]["summary"]["unknownCount"].as_u64().unwrap() >= 1,
        "{pacto}"
    );
    let described = wait_event(
        &stack,
        "billing",
        "Warning",
        "ValidationFailed",
        "ContractStatus: Unknown, 0 errors, 0 warnings",
    )
    .await;
    assert!(described.contains("ObservationFailed"), "{described}");
    assert!(described.contains("COLLECTION_FAILED"), "{described}");

    // "… and the operator logs": the observer logged the refused query.
    let observer = stack
        .services
        .iter()
        .find(|s| s.name == "observer")
        .unwrap();
    let log = observer.process.log_tail(1 << 20);
    assert!(
        log.lines().any(|l| l.contains("kubernetes query failed")
            && l.contains("configmaps")
            && l.contains("forbidden")),
        "the observer's log does not name the refused query:\n{log}"
    );

    // A refused watch (EndpointSlices): the observer still serves, and the Pacto whose Service
    // has endpoints to read says which list was refused.
    stack.apply(&deployment("orders")).await.unwrap();
    stack
        .apply("apiVersion: v1\nkind: Service\nmetadata:\n  name: orders\nspec:\n  selector: {app: orders}\n  ports:\n    - {name: http, port: 8080}\n")
        .await
        .unwrap();
    let contract = "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 2.0.0\ninterfaces:\n  - name: api\n    type: openapi\n    ref: interfaces/api.yaml\n";
    stack
        .apply(&inline_pacto(
            "orders",
            contract,
            Some("serviceName: orders\ninterfaceBindings:\n  - interface: api\n    servicePort: 8080\n"),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("orders", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let message = expect_condition(&pacto, "RuntimeObserved", "False", "ObservationFailed");
    assert!(
        message.starts_with(&format!(
            "Runtime observation failed: list endpointslices {ns}: endpointslices.discovery.k8s.io is forbidden: User \"system:serviceaccount:{ns}:"
        )),
        "{message}"
    );
    assert!(message.ends_with(": Forbidden"), "{message}");
    let findings = pacto["status"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{pacto}");
    assert_eq!(findings[0]["subject"], "interface/api", "{pacto}");
    assert_eq!(findings[0]["code"], "COLLECTION_FAILED", "{pacto}");
    assert_eq!(findings[0]["severity"], "unknown", "{pacto}");
    assert_eq!(pacto["status"]["resources"]["service"]["exists"], true);
    wait_event(
        &stack,
        "orders",
        "Warning",
        "ValidationFailed",
        "ContractStatus: Unknown, 0 errors, 0 warnings",
    )
    .await;
    let log = observer.process.log_tail(1 << 20);
    assert!(
        log.lines()
            .any(|l| l.contains("watch forbidden") && l.contains("EndpointSlice")),
        "the observer's log does not name the refused watch:\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("kubernetes query failed")
            && l.contains("list endpointslices")
            && l.contains("forbidden")),
        "the observer's log does not name the refused query:\n{log}"
    );
}
