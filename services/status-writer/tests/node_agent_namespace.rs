//! Cluster test: the status-writer keeps the node agent namespace's Pod Security labels at
//! privileged against a real kube-apiserver (pacto-testenv); a label removed or lowered by hand
//! comes back (docs/design/node-agent.md#admission). Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed setup step should fail the test"
)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use pacto_runtime::CancellationToken;
use pacto_runtime::testing::eventually;
use pacto_status_writer::node_agent::{self, POD_SECURITY_LABELS, Synced};
use pacto_testenv::ControlPlaneOptions;

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_labels_come_back_after_a_hand_edit() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)");
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
