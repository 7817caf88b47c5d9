//! Deployment -> ReplicaSet -> Pod -> EndpointSlice through the real kube-controller-manager, with
//! the simulator standing in for kube-scheduler and the kubelet.
// Helper functions outside #[test] fns unwrap too: in a test a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::eventually;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use pacto_testenv::simulator::{POD_IP_ANNOTATION, READY_ANNOTATION, Simulator, SimulatorOptions};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_mins(1);

async fn cluster() -> &'static ControlPlane {
    pacto_testenv::shared(|| ControlPlaneOptions::default().with_controller_manager())
        .await
        .expect("start the control plane with kube-controller-manager")
}

/// A simulator for the pods of `ns` on one node, `<ns>-a`.
async fn one_node_simulator(client: &Client, ns: &str) -> Simulator {
    Simulator::start(
        client.clone(),
        SimulatorOptions {
            nodes: vec![format!("{ns}-a")],
            namespace: Some(ns.to_owned()),
            ..SimulatorOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn deploy(client: &Client, ns: &str, name: &str, replicas: i32, ready: Option<bool>) {
    let mut annotations = serde_json::Map::new();
    if let Some(r) = ready {
        annotations.insert(READY_ANNOTATION.into(), json!(r.to_string()));
    }
    deploy_annotated(client, ns, name, replicas, annotations).await;
}

/// A Deployment whose pod template carries `annotations`, and a Service selecting it.
async fn deploy_annotated(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
    annotations: serde_json::Map<String, serde_json::Value>,
) {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name }, "annotations": annotations },
                "spec": { "containers": [{
                    "name": "web", "image": "example.invalid/web:1",
                    "ports": [{ "name": "http", "containerPort": 8080 }]
                }]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let service: Service = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "selector": { "app": name }, "ports": [{ "name": "http", "port": 80, "targetPort": "http" }] }
    }))
    .unwrap();
    Api::<Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
}

/// Endpoints of the controller-managed EndpointSlices of `service`: (ip, ready).
async fn endpoints(client: &Client, ns: &str, service: &str) -> Vec<(String, bool)> {
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!(
            "kubernetes.io/service-name={service},endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"
        )))
        .await
        .unwrap();
    let mut out = Vec::new();
    for s in slices.items {
        for e in s.endpoints.unwrap_or_default() {
            let ready = e.conditions.and_then(|c| c.ready).unwrap_or(false);
            for a in e.addresses {
                out.push((a, ready));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_pods_become_ready_and_endpoint_slices_follow() {
    let cp = cluster().await;
    let ns = cp.create_namespace("workload").await.unwrap();
    let client = cp.client().unwrap();
    let sim = Simulator::start(
        client.clone(),
        SimulatorOptions {
            nodes: vec![format!("{ns}-a"), format!("{ns}-b")],
            namespace: Some(ns.clone()),
            ..SimulatorOptions::default()
        },
    )
    .await
    .unwrap();
    deploy(&client, &ns, "web", 3, None).await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    eventually("3 ready replicas", TIMEOUT, || async {
        let d = deployments.get("web").await.ok()?;
        (d.status?.ready_replicas? == 3).then_some(())
    })
    .await;

    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 3);
    let mut ips = Vec::new();
    for p in &pods.items {
        // Created by the ReplicaSet controller, bound by the simulator.
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "ReplicaSet");
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert!(sim.nodes().contains(&node), "{node}");
        let status = p.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        ips.push((status.pod_ip.clone().unwrap(), true));
    }
    ips.sort();

    let eps = eventually(
        "an EndpointSlice with 3 ready endpoints",
        TIMEOUT,
        || async {
            let e = endpoints(&client, &ns, "web").await;
            (e == ips).then_some(e)
        },
    )
    .await;
    assert_eq!(eps.len(), 3);

    // Flip one pod to a failing readiness probe: the controller marks its endpoint not ready.
    let flipped = pods.items[0].metadata.name.clone().unwrap();
    Api::<Pod>::namespaced(client.clone(), &ns)
        .patch(
            &flipped,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {READY_ANNOTATION: "false"}}})),
        )
        .await
        .unwrap();
    let flipped_ip = pods.items[0]
        .status
        .as_ref()
        .unwrap()
        .pod_ip
        .clone()
        .unwrap();
    eventually(
        "the flipped endpoint to become not ready",
        TIMEOUT,
        || async {
            let e = endpoints(&client, &ns, "web").await;
            e.iter()
                .any(|(ip, ready)| *ip == flipped_ip && !ready)
                .then_some(())
        },
    )
    .await;
    eventually("readyReplicas to drop to 2", TIMEOUT, || async {
        let d = deployments.get("web").await.ok()?;
        (d.status?.ready_replicas == Some(2)).then_some(())
    })
    .await;

    // Scale down: the ReplicaSet controller deletes a pod, the simulator finishes its termination.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("one endpoint left", TIMEOUT, || async {
        let pods = Api::<Pod>::namespaced(client.clone(), &ns)
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        let e = endpoints(&client, &ns, "web").await;
        (pods.items.len() == 1 && e.len() == 1).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_pods_give_not_ready_endpoints() {
    let cp = cluster().await;
    let ns = cp.create_namespace("notready").await.unwrap();
    let client = cp.client().unwrap();
    let _sim = one_node_simulator(&client, &ns).await;
    deploy(&client, &ns, "api", 2, Some(false)).await;
    let eps = eventually("2 not-ready endpoints", TIMEOUT, || async {
        let e = endpoints(&client, &ns, "api").await;
        (e.len() == 2 && e.iter().all(|(_, ready)| !ready)).then_some(e)
    })
    .await;
    assert_eq!(eps.len(), 2);
    let d = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("api")
        .await
        .unwrap();
    let status = d.status.unwrap();
    assert_eq!(status.replicas, Some(2));
    assert_eq!(status.ready_replicas.unwrap_or(0), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_pod_ip_reaches_pod_status_and_endpoint_slices() {
    let cp = cluster().await;
    let ns = cp.create_namespace("podip").await.unwrap();
    let client = cp.client().unwrap();
    let _sim = one_node_simulator(&client, &ns).await;
    // A documentation address (never contacted here): the API server accepts it as an endpoint.
    let mut annotations = serde_json::Map::new();
    annotations.insert(POD_IP_ANNOTATION.into(), json!("192.0.2.77"));
    deploy_annotated(&client, &ns, "pinned", 1, annotations).await;
    eventually("the declared IP as a ready endpoint", TIMEOUT, || async {
        let e = endpoints(&client, &ns, "pinned").await;
        (e == [("192.0.2.77".to_owned(), true)]).then_some(())
    })
    .await;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().labels("app=pinned"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 1);
    let status = pods.items[0].status.clone().unwrap();
    assert_eq!(status.pod_ip.as_deref(), Some("192.0.2.77"));
    let ips: Vec<String> = status.pod_ips.unwrap().into_iter().map(|p| p.ip).collect();
    assert_eq!(ips, ["192.0.2.77"]);
    // Pods of the same namespace without the annotation still get addresses from the node CIDR.
    deploy(&client, &ns, "plain", 1, None).await;
    let plain = eventually("an allocated IP as a ready endpoint", TIMEOUT, || async {
        let e = endpoints(&client, &ns, "plain").await;
        (e.len() == 1 && e[0].1).then_some(e)
    })
    .await;
    assert!(plain[0].0.starts_with("10.244."), "{plain:?}");
}
