//! Sizes the API server enforces (docs/design/status.md#size-limits): a Pacto whose inline
//! contract (~200 KiB) carries about 20,000 validation errors is written as a bounded Invalid
//! status — the validation list capped with an overflow entry and the true total kept — its
//! ContractInvalid event is present with a message within the 1 KiB Events allow, and the
//! status-writer does not retry it in a loop: another reconcile of the same Pacto writes nothing
//! and counts no error. The four services run as processes (see the `pacto-e2e` library).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::fmt::Write as _;

use pacto_e2e::{STATUS_DEADLINE, Stack, inline_pacto, times_emitted};

/// Interface entries in the contract; the validator reports four errors for each (three missing
/// required properties and one unexpected key).
const ENTRIES: usize = 5_000;
const ERRORS: u64 = 4 * ENTRIES as u64;
/// What the status-writer keeps of a list (docs/design/status.md#size-limits), plus the
/// overflow entry.
const LIST_CAP: usize = 100;
/// The longest message the API server accepts on an Event.
const EVENT_MESSAGE_LIMIT: usize = 1024;

const RECONCILE_ERRORS: &str = "pacto_status_writer_reconcile_errors_total";
const STATUS_WRITES: &str = "pacto_status_writer_status_writes_total";

/// A ~200 KiB contract with [`ERRORS`] structural errors.
fn oversized_contract() -> String {
    let mut text = String::from(
        "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\ninterfaces:\n",
    );
    for i in 0..ENTRIES {
        writeln!(text, "  - unexpected-key-padding-padding-{i:05}: 1").unwrap();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_errors_give_a_bounded_invalid_status_an_event_and_no_retry_loop() {
    let stack = Stack::start().await.unwrap();
    let contract = oversized_contract();
    assert!(contract.len() > 190 * 1024, "{} bytes", contract.len());
    // `kubectl create`: a client-side apply would also copy the contract into an annotation.
    stack
        .kubectl(
            &["create", "-n", &stack.namespace, "-f", "-"],
            Some(&inline_pacto("huge", &contract, None)),
        )
        .await
        .unwrap();

    let pacto = stack
        .wait_contract_status("huge", "Invalid", STATUS_DEADLINE)
        .await
        .unwrap();
    let validation = &pacto["status"]["validation"];
    assert_eq!(validation["valid"], false, "{validation}");
    let errors = validation["errors"].as_array().expect("validation.errors");
    assert_eq!(
        errors.len(),
        LIST_CAP + 1,
        "capped list plus the overflow entry"
    );
    let overflow = errors.last().unwrap();
    assert_eq!(overflow["code"], "LIST_TRUNCATED", "{overflow}");
    assert_eq!(
        validation["totalErrors"].as_u64(),
        Some(ERRORS),
        "the true total: {validation}"
    );
    let status_bytes = serde_json::to_string(&pacto["status"]).unwrap().len();
    assert!(status_bytes < 256 * 1024, "status of {status_bytes} bytes");

    // The event is there, its message within the API server's limit.
    let events = stack.pacto_events("huge", &[]).await.unwrap();
    assert_eq!(
        times_emitted(&events, "ContractInvalid").unwrap(),
        1,
        "{events:?}"
    );
    let event = events
        .iter()
        .find(|e| e["reason"] == "ContractInvalid")
        .unwrap();
    let message = event["message"].as_str().unwrap();
    assert!(
        message.len() <= EVENT_MESSAGE_LIMIT,
        "{} bytes",
        message.len()
    );

    // No retry loop: one more reconcile of the same Pacto writes nothing and fails nothing.
    let errors_before = stack
        .metric_sum("status-writer", RECONCILE_ERRORS)
        .await
        .unwrap();
    let writes_before = stack
        .metric_sum("status-writer", STATUS_WRITES)
        .await
        .unwrap();
    stack.nudge("huge", "limits").await.unwrap();
    stack.nudge("huge", "limits").await.unwrap();
    let errors_after = stack
        .metric_sum("status-writer", RECONCILE_ERRORS)
        .await
        .unwrap();
    let writes_after = stack
        .metric_sum("status-writer", STATUS_WRITES)
        .await
        .unwrap();
    // Counters are whole numbers: compare them as such.
    assert!(
        errors_after <= errors_before,
        "reconcile errors moved: {errors_before} -> {errors_after}"
    );
    assert!(
        writes_after <= writes_before,
        "the same status was written again: {writes_before} -> {writes_after}"
    );
    println!(
        "contract {} bytes, {ERRORS} errors; status {status_bytes} bytes; event message {} bytes; \
         reconcile errors {errors_before} -> {errors_after}; status writes {writes_before} -> {writes_after}",
        contract.len(),
        message.len()
    );
}
