//! Cluster tests of the node agent namespace against a real kube-apiserver (pacto-testenv,
//! with the NodeRuntimeObservation CRD): the status-writer keeps its Pod Security labels at
//! privileged, a label removed or lowered by hand comes back (docs/design/node-agent.md#admission);
//! and it logs each node agent's state from the NodeRuntimeObservations and Leases there, once
//! per change (docs/design/node-agent.md#operator-log). Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed setup step should fail the test"
)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use pacto_api::{NodeRuntimeObservation, NodeRuntimeObservationSpec};
use pacto_runtime::CancellationToken;
use pacto_runtime::testing::eventually;
use pacto_status_writer::agent_log;
use pacto_status_writer::node_agent::{self, POD_SECURITY_LABELS, Synced};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use tokio::sync::mpsc;

const DEADLINE: Duration = Duration::from_secs(30);

/// The shared control plane of this binary, with the NodeRuntimeObservation CRD.
async fn cluster() -> &'static ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(|| {
        ControlPlaneOptions::default().with_crd(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../charts/pacto-crds/templates")
                .join("pacto.trianalab.io_noderuntimeobservations.yaml"),
        )
    })
    .await
    .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_labels_come_back_after_a_hand_edit() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());

    // A namespace that does not exist is left alone.
    assert_eq!(
        node_agent::sync(&client, "no-such-agent-namespace")
            .await
            .unwrap(),
        Synced::Missing
    );

    let ns = cp.create_namespace("agents").await.unwrap();
    let token = CancellationToken::new();
    let task = tokio::spawn(node_agent::keep_privileged(
        client.clone(),
        ns.clone(),
        Duration::from_millis(200),
        token.clone(),
    ));
    let labels = || async {
        let current = namespaces.get(&ns).await.unwrap();
        node_agent::is_privileged(current.metadata.labels.as_ref())
    };
    eventually("the labels set at start", DEADLINE, labels).await;

    // By hand: enforce removed, warn lowered.
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": {
                POD_SECURITY_LABELS[0]: null,
                POD_SECURITY_LABELS[2]: "restricted",
            } } })),
        )
        .await
        .unwrap();
    eventually("the labels restored after a hand edit", DEADLINE, labels).await;
    assert_eq!(
        node_agent::sync(&client, &ns).await.unwrap(),
        Synced::Unchanged
    );

    token.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// Waits up to [`DEADLINE`] for the next line; fails naming `what`.
async fn next_line(lines: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    tokio::time::timeout(DEADLINE, lines.recv())
        .await
        .unwrap_or_else(|_| panic!("no line for {what} within {DEADLINE:?}"))
        .unwrap_or_else(|| panic!("the task ended before {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_states_are_logged_once_per_change() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let ns = cp.create_namespace("agents-log").await.unwrap();
    let observations: Api<NodeRuntimeObservation> = Api::namespaced(client.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    // Short enough for the test to see a node turn stale; the check interval follows (1 s).
    let stale_after = Duration::from_secs(3);
    let (tx, mut lines) = mpsc::unbounded_channel();
    let token = CancellationToken::new();
    let task = tokio::spawn(agent_log::follow(
        client.clone(),
        ns.clone(),
        stale_after,
        token.clone(),
        move |line| {
            let _ = tx.send(line);
        },
    ));

    // The agent's two objects, as it writes them: the observation (created, then its status)
    // and the Lease.
    let mut object = NodeRuntimeObservation::new(
        "node-a",
        NodeRuntimeObservationSpec {
            node_name: "node-a".to_owned(),
        },
    );
    object.metadata.namespace = Some(ns.clone());
    observations
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let publish = |status: serde_json::Value| {
        let observations = observations.clone();
        async move {
            observations
                .patch_status(
                    "node-a",
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({ "status": status })),
                )
                .await
                .unwrap();
        }
    };
    let now = || Timestamp::now().to_string();
    publish(serde_json::json!({
        "lastPublished": now(),
        "agentVersion": "9.9.9",
        "collection": { "state": "Running" },
        "podCount": 0,
    }))
    .await;
    let lease = serde_json::from_value::<Lease>(serde_json::json!({
        "metadata": { "name": "node-a" },
        "spec": { "holderIdentity": "agent-pod", "leaseDurationSeconds": 40 },
    }))
    .unwrap();
    let mut lease = lease;
    lease.spec.as_mut().unwrap().renew_time = Some(MicroTime(Timestamp::now()));
    leases.create(&PostParams::default(), &lease).await.unwrap();

    // Before the Lease the node may read stale (no renewed Lease): then heard.
    let mut line = next_line(&mut lines, "the node heard").await;
    if line.contains("stale since") {
        assert!(line.contains("no renewed Lease"), "{line}");
        line = next_line(&mut lines, "the node heard").await;
    }
    assert!(
        line.starts_with("node-agent: node node-a heard (agent 9.9.9, last published "),
        "{line}"
    );

    // Nothing renews or publishes: stale after stale-after, noticed without any watch event.
    let line = next_line(&mut lines, "the node stale").await;
    assert!(
        line.starts_with("node-agent: node node-a stale since ")
            && line.contains("nothing heard for more than 3s"),
        "{line}"
    );

    // The agent publishes again, its reports refused by the observer: heard, then refused.
    publish(serde_json::json!({
        "lastPublished": now(),
        "reportStream": {
            "state": "Refused",
            "reason": "Unauthenticated",
            "message": "the node agent's token was not accepted",
            "since": now(),
        },
    }))
    .await;
    let heard = next_line(&mut lines, "heard again").await;
    assert!(
        heard.starts_with("node-agent: node node-a heard"),
        "{heard}"
    );
    let refused = next_line(&mut lines, "reports refused").await;
    assert_eq!(
        refused,
        "node-agent: node node-a reports refused by the observer (Unauthenticated: the node agent's token was not accepted)"
    );
    // Its collection fails while fresh.
    publish(serde_json::json!({
        "lastPublished": now(),
        "collection": { "state": "Failed", "reason": "BTFUnavailable", "message": "no BTF" },
    }))
    .await;
    let failed = next_line(&mut lines, "collection failed").await;
    assert_eq!(
        failed,
        "node-agent: node node-a collection failed (BTFUnavailable: no BTF)"
    );
    // Both objects deleted: one line, and the stale line that the timer may have logged first.
    observations
        .delete("node-a", &DeleteParams::default())
        .await
        .unwrap();
    leases
        .delete("node-a", &DeleteParams::default())
        .await
        .unwrap();
    let mut line = next_line(&mut lines, "observation deleted").await;
    while line.contains("stale since") {
        line = next_line(&mut lines, "observation deleted").await;
    }
    assert_eq!(line, "node-agent: node node-a observation deleted");

    token.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        lines.try_recv().is_err(),
        "no line after the deletion: each change logs once"
    );
}
