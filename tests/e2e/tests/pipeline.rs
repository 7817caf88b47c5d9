//! The pipeline end to end, read the way a user reads it: Pactos applied with `kubectl apply`,
//! verdicts read with `kubectl get pacto -o yaml` and `kubectl describe pacto`, produced by the
//! four service binaries running as separate processes over mTLS (see the `pacto-e2e` library).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use pacto_e2e::{
    STATUS_DEADLINE, Stack, condition, deployment, expect_condition, expect_runtime_found,
    inline_pacto, oci_pacto, service_target, target_service,
};
use pacto_runtime::testing::within;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_contracts_reference_and_invalid_and_prometheus() {
    let stack = Stack::start().await.unwrap();

    // A reference-only contract (no target): Reference, ContractValid True/ReferenceOnly.
    stack
        .apply(&inline_pacto(
            "orders",
            "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.2.0\n",
            None,
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("orders", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        condition(&pacto, "ContractValid").unwrap(),
        (
            "True".into(),
            "ReferenceOnly".into(),
            "Reference contract orders v1.2.0 is valid".into()
        )
    );
    assert!(condition(&pacto, "RuntimeObserved").is_none(), "{pacto}");
    let revision = pacto["status"]["currentRevision"].as_str().unwrap();
    assert!(revision.starts_with("orders-1-2-0-"), "{revision}");
    let described = stack
        .wait_describe("orders", &["RevisionCreated"], STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(
        described.contains(&format!("Created revision {revision} for contract v1.2.0")),
        "{described}"
    );
    let revisions = stack
        .kubectl(
            &[
                "get",
                "pactorevisions",
                "-n",
                &stack.namespace,
                "-o",
                "name",
            ],
            None,
        )
        .await
        .unwrap();
    assert!(revisions.contains(revision), "{revisions}");

    // A schema violation: Invalid, ContractValid False/Invalid, ContractInvalid event.
    stack
        .apply(&inline_pacto(
            "broken",
            "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: not-a-version\n",
            Some(&service_target("orders")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("broken", "Invalid", STATUS_DEADLINE)
        .await
        .unwrap();
    let message = expect_condition(&pacto, "ContractValid", "False", "Invalid");
    assert!(condition(&pacto, "RuntimeObserved").is_none(), "{pacto}");
    assert_eq!(pacto["status"]["summary"]["errorCount"], 1, "{pacto}");
    let described = stack
        .wait_describe("broken", &["ContractInvalid"], STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(described.contains("Warning"), "{described}");
    assert!(described.contains(&message), "{message}\n{described}");

    // Prometheus scrapes every admin port, and the status-writer's one-hot status gauge.
    for service in &stack.services {
        let expr = format!("up{{job=\"{}\"}}", service.name);
        stack
            .prometheus
            .wait_for_query(&expr, Duration::from_secs(30), |r| {
                pacto_testenv::prometheus::first_value(r) == Some(1.0)
            })
            .await
            .unwrap();
    }
    let expr = format!(
        "pacto_contract_status{{job=\"status-writer\",namespace=\"{}\",name=\"orders\",status=\"Reference\"}}",
        stack.namespace
    );
    stack
        .prometheus
        .wait_for_query(&expr, Duration::from_secs(30), |r| {
            pacto_testenv::prometheus::first_value(r) == Some(1.0)
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_contracts_compliant_and_unavailable() {
    let stack = Stack::start().await.unwrap();

    // A contract pushed with `pacto push` (tag = service.version).
    let (repository, pushed) = stack
        .push_contract(
            "payments",
            "pactoVersion: \"2.0\"\nservice:\n  name: payments\n  version: 1.0.0\n",
            "",
        )
        .await
        .unwrap();
    assert!(pushed.contains("@sha256:"), "{pushed}");

    // Its workload: a Deployment the controller-manager rolls out and the simulator makes Ready.
    stack
        .apply(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: payments\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: payments}\n  template:\n    metadata:\n      labels: {app: payments}\n    spec:\n      containers:\n        - name: app\n          image: registry.local/payments:1.0.0\n",
        )
        .await
        .unwrap();
    // Its Service: the target `serviceName: payments` names, which must exist for Compliant.
    stack.apply(&target_service("payments")).await.unwrap();
    stack.wait_available("payments").await.unwrap();
    stack
        .apply(&oci_pacto(
            "payments",
            &repository,
            Some(&service_target("payments")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("payments", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    expect_runtime_found(&pacto);
    assert_eq!(
        condition(&pacto, "ContractValid").unwrap().1,
        "Parsed",
        "{pacto}"
    );
    assert_eq!(pacto["status"]["contractVersion"], "1.0.0", "{pacto}");
    assert_eq!(
        pacto["status"]["observedRuntime"]["workloadKind"], "Deployment",
        "{pacto}"
    );
    stack
        .wait_describe("payments", &["RevisionCreated"], STATUS_DEADLINE)
        .await
        .unwrap();

    // A private registry without a pull secret: Unknown/Unavailable, ContractUnavailable.
    let private = format!(
        "oci://{}/pacto/private:1.0.0",
        stack.private_registry.host()
    );
    stack
        .apply(&oci_pacto(
            "private",
            &private,
            Some(&service_target("payments")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("private", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let message = expect_condition(&pacto, "ContractValid", "Unknown", "Unavailable");
    assert!(!message.is_empty(), "{pacto}");
    stack
        .wait_describe("private", &["ContractUnavailable"], STATUS_DEADLINE)
        .await
        .unwrap();
}

/// Copies the fixture bundle `valid/<case>` into `dest`, replacing `from` by `to` in its
/// `pacto.yaml`.
fn copy_fixture(case: &str, dest: &std::path::Path, from: &str, to: &str) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/contracts/valid")
        .join(case);
    let mut stack = vec![(src.clone(), dest.to_owned())];
    while let Some((from_dir, to_dir)) = stack.pop() {
        std::fs::create_dir_all(&to_dir).unwrap();
        for entry in std::fs::read_dir(&from_dir).unwrap() {
            let entry = entry.unwrap();
            let target = to_dir.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                stack.push((entry.path(), target));
            } else if entry.file_name() != "expected.json" {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let contract = dest.join("pacto.yaml");
    let text = std::fs::read_to_string(&contract).unwrap();
    assert!(text.contains(from), "{case} lacks {from}");
    std::fs::write(&contract, text.replace(from, to)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_unsupported_dimensions_and_workload_mismatch() {
    let stack = Stack::start().await.unwrap();

    // Worked example 7.1 of docs/design/contract.md#worked-examples (expiry moved out of the way of the calendar) against a bare
    // Deployment: with probing and metrics observation off, what cannot be observed is Unknown
    // (never a violation); the readiness gate is met.
    let bundle = stack.dir.path().join("orders-api");
    copy_fixture(
        "spec-7.1-stateless-http-api",
        &bundle,
        "expires: \"2027-03-31\"",
        "expires: \"2099-12-31\"",
    );
    let repository = format!("oci://{}/pacto/orders-api", stack.registry.host());
    stack
        .pacto_cli(&["push", bundle.to_str().unwrap(), &repository])
        .await
        .unwrap();
    stack.apply(&deployment("orders-api")).await.unwrap();
    stack
        .apply(&oci_pacto(
            "orders-api",
            &repository,
            Some(&service_target("orders-api")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("orders-api", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        condition(&pacto, "ReadinessSatisfied").unwrap(),
        (
            "True".into(),
            "Satisfied".into(),
            "readiness score 85 meets minScore 75".into()
        )
    );
    assert_eq!(condition(&pacto, "RuntimeObserved").unwrap().1, "Found");
    let findings = pacto["status"]["findings"].as_array().unwrap();
    for subject in ["capability/metrics", "capability/health"] {
        let finding = findings
            .iter()
            .find(|f| f["subject"] == subject)
            .unwrap_or_else(|| panic!("no finding for {subject}: {pacto}"));
        assert_eq!(finding["code"], "OBSERVATION_UNSUPPORTED", "{finding}");
        assert_eq!(finding["severity"], "unknown", "{finding}");
    }
    assert_eq!(pacto["status"]["summary"]["errorCount"], 0, "{pacto}");
    stack
        .wait_describe(
            "orders-api",
            &[
                "ValidationFailed",
                "ContractStatus: Unknown, 0 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // A workload of another kind than the contract declares: NonCompliant at once.
    stack.apply(&deployment("batch")).await.unwrap();
    stack
        .apply(&inline_pacto(
            "batch",
            "pactoVersion: \"2.0\"\nservice:\n  name: batch\n  version: 2.0.0\nworkload: job\n",
            Some("workloadRef: {name: batch, kind: Deployment}\n"),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("batch", "NonCompliant", STATUS_DEADLINE)
        .await
        .unwrap();
    let findings = pacto["status"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{pacto}");
    assert_eq!(findings[0]["code"], "WORKLOAD_MISMATCH", "{pacto}");
    assert_eq!(findings[0]["severity"], "error", "{pacto}");
    stack
        .wait_describe(
            "batch",
            &[
                "ValidationFailed",
                "ContractStatus: NonCompliant, 1 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();
}

/// docs/troubleshooting.md ("Contract not resolving"; the loader's fallback): an unversioned reference whose
/// repository has no semver tag falls back to the tagless pull, which finds nothing, and
/// `ArtifactNotFound` classifies as Unknown/Unavailable; the contract-resolver answers
/// Unavailable with a message saying what to push or pin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unversioned_reference_without_semver_tags_is_unavailable() {
    let stack = Stack::start().await.unwrap();
    // An unversioned reference to a repository without semver tags resolves nothing.
    let (repository, _) = stack
        .push_contract(
            "nosemver",
            "pactoVersion: \"2.0\"\nservice:\n  name: nosemver\n  version: 1.0.0\n",
            ":stable",
        )
        .await
        .unwrap();
    stack
        .apply(&oci_pacto(
            "nosemver",
            &repository,
            Some(&service_target("nosemver")),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("nosemver", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let (status, reason, _) = condition(&pacto, "ContractValid").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "Unavailable")
    );
    assert!(pacto["status"].get("validation").is_none(), "{pacto}");
    assert!(condition(&pacto, "RuntimeObserved").is_none(), "{pacto}");
    let (_, _, message) = condition(&pacto, "ContractValid").unwrap();
    assert!(message.contains("no semver tags found"), "{message}");
    stack
        .wait_describe("nosemver", &["ContractUnavailable"], STATUS_DEADLINE)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotate_nudge_and_force_pushed_tag() {
    let stack = Stack::start().await.unwrap();
    let bundle = stack.dir.path().join("ledger");
    std::fs::create_dir_all(&bundle).unwrap();
    let write = |note: &str| {
        std::fs::write(
            bundle.join("pacto.yaml"),
            format!(
                "pactoVersion: \"2.0\"\nservice:\n  name: ledger\n  version: 1.0.0\nmetadata:\n  note: {note}\n"
            ),
        )
        .unwrap();
    };
    write("first");
    let reference = format!("oci://{}/pacto/ledger:1.0.0", stack.registry.host());
    let first = stack
        .pacto_cli(&["push", bundle.to_str().unwrap(), &reference])
        .await
        .unwrap();
    stack
        .apply(&oci_pacto("ledger", &reference, None))
        .await
        .unwrap();
    let before = stack
        .wait_contract_status("ledger", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        before["status"]["resolutionPolicy"], "PinnedTag",
        "{before}"
    );

    // `kubectl annotate` nudges a reconcile; nothing changed, so the status is not rewritten.
    let reconciles = "pacto_status_writer_reconciles_total";
    let count = stack.metric_sum("status-writer", reconciles).await.unwrap();
    stack
        .kubectl(
            &[
                "annotate",
                "-n",
                &stack.namespace,
                "pacto/ledger",
                "e2e.pacto.trianalab.io/nudge=1",
            ],
            None,
        )
        .await
        .unwrap();
    within("the nudge to be reconciled", STATUS_DEADLINE, || async {
        let now = stack.metric_sum("status-writer", reconciles).await.unwrap();
        if now > count {
            Ok(())
        } else {
            Err(format!("{reconciles} {now}"))
        }
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}\n{}", stack.logs()));
    let after = stack.get_pacto("ledger").await.unwrap();
    assert_eq!(
        after["status"], before["status"],
        "status rewritten by a no-op nudge"
    );

    // Someone force-pushes the tag: the revision mirror raises TagOverwritten.
    write("second");
    let second = stack
        .pacto_cli(&["push", "--force", bundle.to_str().unwrap(), &reference])
        .await
        .unwrap();
    assert_ne!(
        first.trim(),
        second.trim(),
        "the force-push changed the digest"
    );
    let described = stack
        .wait_describe("ledger", &["TagOverwritten"], STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(described.contains("Warning"), "{described}");
}
