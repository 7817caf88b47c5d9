//! What an observation rests on, end to end through kubectl:
//!
//! - a targeted contract that declares no runtime assertion is not Compliant while its target
//!   Service does not exist: it reads Unknown with `EVIDENCE_MISSING` for the target, and turns
//!   Compliant once the Service is there ("Status is Unknown" in the troubleshooting guide);
//! - Secret configuration bindings under the chart's default (`rbac.secretMetadata: false`, the
//!   observer without `--observe-secrets`): `OBSERVATION_UNSUPPORTED` naming the chart value,
//!   `RuntimeObserved` True, and no Secret watch in the observer's watch metric; with the access
//!   (`--observe-secrets` plus the chart's Secret RBAC) the Secret is observed and watched
//!   ("Operator RBAC errors").

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use pacto_e2e::{
    STATUS_DEADLINE, Stack, StackOptions, condition, deployment, expect_runtime_found,
    inline_pacto, service_target, target_service,
};
use serde_json::{Value, json};

/// The observer's counter of started watch streams, by kind.
const WATCH_STREAMS: &str = "pacto_observer_watch_streams_started_total";

/// The findings of a Pacto (from `kubectl get -o yaml`), or none.
fn findings(pacto: &Value) -> Vec<Value> {
    pacto["status"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A Secret `name` (the observer only ever reads its metadata).
fn secret(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n  token: s3cr3t\n"
    )
}

/// A contract of service `name` whose only runtime assertion is the required configuration
/// `token`.
fn token_contract(name: &str) -> String {
    format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: 1.0.0\nconfigurations:\n  - name: token\n    schema: configuration/schema.json\n    required: true\n"
    )
}

/// `spec.target` naming Service `name` and binding configuration `token` to Secret `secret`.
fn secret_bound_target(name: &str, secret: &str) -> String {
    format!(
        "serviceName: {name}\nconfigBindings:\n  - {{configuration: token, kind: Secret, name: {secret}}}\n"
    )
}

/// The samples of the watch-stream counter, e.g. `{kind="Service"} 1`.
async fn watch_streams(stack: &Stack) -> Vec<String> {
    stack.metric_lines("observer", WATCH_STREAMS).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compliant_rests_on_an_existing_target() {
    let stack = Stack::start().await.unwrap();
    // No interface, capability, configuration, dependency, workload or persistence: the
    // contract declares no runtime assertion at all (coverage 0/0).
    let contract = "pactoVersion: \"2.0\"\nservice:\n  name: lonely\n  version: 1.0.0\n";
    stack
        .apply(&inline_pacto(
            "lonely",
            contract,
            Some(&service_target("lonely")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("lonely", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let all = findings(&pacto);
    assert_eq!(all.len(), 1, "one finding, for the target: {pacto:#}");
    let finding = &all[0];
    let subject = format!("service/{}/lonely", stack.namespace);
    assert_eq!(finding["subject"], subject.as_str(), "{finding}");
    assert_eq!(finding["code"], "EVIDENCE_MISSING", "{finding}");
    assert_eq!(finding["severity"], "unknown", "{finding}");
    assert_eq!(finding["category"], "Inconclusive", "{finding}");
    let message = finding["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not exist"), "{finding}");
    let refs = finding["evidenceRefs"].as_array().expect("evidenceRefs");
    assert_eq!(refs.len(), 1, "{finding}");
    assert_eq!(refs[0]["source"], "k8s", "{finding}");
    assert_eq!(
        pacto["status"]["evaluationCoverage"],
        json!({ "evaluated": 0, "required": 0 }),
        "{pacto:#}"
    );
    assert_eq!(pacto["status"]["summary"]["unknownCount"], 1, "{pacto:#}");
    assert_eq!(
        pacto["status"]["resources"]["service"],
        json!({ "name": "lonely", "exists": false }),
        "{pacto:#}"
    );
    // A Service that is not there is not a failed query.
    expect_runtime_found(&pacto);
    stack
        .wait_describe(
            "lonely",
            &[
                "EVIDENCE_MISSING",
                "ContractStatus: Unknown, 0 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // The target appears: the Service watch re-observes, and Compliant rests on it.
    stack.apply(&deployment("lonely")).await.unwrap();
    stack.apply(&target_service("lonely")).await.unwrap();
    let pacto = stack
        .wait_contract_status("lonely", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(findings(&pacto).is_empty(), "{pacto:#}");
    assert_eq!(
        pacto["status"]["resources"]["service"],
        json!({ "name": "lonely", "exists": true }),
        "{pacto:#}"
    );
    expect_runtime_found(&pacto);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_bindings_without_secret_access_are_unsupported() {
    // The chart's defaults: no Secret RBAC, no --observe-secrets.
    let stack = Stack::start().await.unwrap();
    stack.apply(&secret("vault-token")).await.unwrap();
    stack.apply(&deployment("vault-user")).await.unwrap();
    stack.apply(&target_service("vault-user")).await.unwrap();
    stack
        .apply(&inline_pacto(
            "vault-user",
            &token_contract("vault-user"),
            Some(&secret_bound_target("vault-user", "vault-token")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("vault-user", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let all = findings(&pacto);
    assert_eq!(all.len(), 1, "{pacto:#}");
    let finding = &all[0];
    assert_eq!(finding["subject"], "configuration/token", "{finding}");
    assert_eq!(finding["code"], "OBSERVATION_UNSUPPORTED", "{finding}");
    assert_eq!(finding["severity"], "unknown", "{finding}");
    let message = finding["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("rbac.secretMetadata"),
        "the message names the chart value: {finding}"
    );
    // Not observing Secrets by configuration is not a failed query.
    expect_runtime_found(&pacto);
    let described = stack
        .wait_describe(
            "vault-user",
            &["OBSERVATION_UNSUPPORTED", "rbac.secretMetadata"],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();
    assert!(!described.contains("COLLECTION_FAILED"), "{described}");

    // The observer never asked for Secrets: no Secret watch among its watch streams.
    let streams = watch_streams(&stack).await;
    assert!(
        streams.iter().any(|l| l.contains("kind=\"ConfigMap\"")),
        "the watch metric is labelled by kind: {streams:?}"
    );
    assert!(
        !streams.iter().any(|l| l.contains("kind=\"Secret\"")),
        "no Secret watch: {streams:?}"
    );
    let logs = stack.logs();
    assert!(
        !logs.contains("Secret watch forbidden"),
        "no refused Secret watch in the logs:\n{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_bindings_with_secret_access_are_observed() {
    // `--observe-secrets` with the chart's rbac.secretMetadata=true RBAC.
    let stack = Stack::start_with(StackOptions {
        observer_args: vec!["--observe-secrets".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    stack.apply(&deployment("keeper")).await.unwrap();
    stack.apply(&target_service("keeper")).await.unwrap();
    stack
        .apply(&inline_pacto(
            "keeper",
            &token_contract("keeper"),
            Some(&secret_bound_target("keeper", "keeper-token")),
        ))
        .await
        .unwrap();
    // The bound Secret does not exist: an absence, confirmed beyond the (5 s) window.
    let pacto = stack
        .wait_contract_status("keeper", "NonCompliant", STATUS_DEADLINE)
        .await
        .unwrap();
    let all = findings(&pacto);
    assert_eq!(all.len(), 1, "{pacto:#}");
    assert_eq!(all[0]["subject"], "configuration/token", "{pacto:#}");
    assert_eq!(all[0]["code"], "CONFIGURATION_ABSENT", "{pacto:#}");
    expect_runtime_found(&pacto);

    // The Secret appears: the Secret watch re-observes; existence alone cannot prove
    // conformance, so the assertion reads insufficient (Unknown), not absent.
    stack.apply(&secret("keeper-token")).await.unwrap();
    let pacto = stack
        .wait_contract_status("keeper", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let all = findings(&pacto);
    assert_eq!(all.len(), 1, "{pacto:#}");
    assert_eq!(all[0]["code"], "EVIDENCE_INSUFFICIENT", "{pacto:#}");
    assert_eq!(
        condition(&pacto, "RuntimeObserved").map(|c| c.1),
        Some("Found".to_owned()),
        "{pacto:#}"
    );
    let streams = watch_streams(&stack).await;
    assert!(
        streams.iter().any(|l| l.contains("kind=\"Secret\"")),
        "a Secret watch: {streams:?}"
    );
}
