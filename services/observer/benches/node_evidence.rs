//! The node-evidence stage of one Observe call, in memory: a target with 5,000 Ready pods (one
//! EndpointSlice per 100 endpoints) spread over 1 and over 50 nodes. Per call: the views of the
//! nodes' NodeRuntimeObservations are normalised (`NodeView::from_observation`), every node is
//! judged (`assess`), and the interface rule checks every Ready pod's LISTEN socket
//! (`interface_check` + `interface_rule`). The API reads (reflector caches) are not included; the
//! `observe` bench measures those. Prints p50/p99; no assertion on time.
//! Run: `cargo bench -p pacto-observer --bench node_evidence`.

#![allow(
    clippy::unwrap_used,
    reason = "bench harness: a malformed fixture should abort the bench"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pacto_api::NodeRuntimeObservation;
use pacto_engine::{InterfaceValue, Outcome, Timestamp, Value};
use pacto_observer::Verdict;
use pacto_observer::node_evidence::{
    NodeSources, NodeStates, NodeView, assess, interface_check, interface_rule,
};
use serde_json::json;

const PODS: usize = 5_000;
const CALLS: usize = 200;

fn service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "bench"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    }))
    .unwrap()
}

fn slices(nodes: usize) -> Vec<EndpointSlice> {
    (0..PODS)
        .collect::<Vec<_>>()
        .chunks(100)
        .map(|chunk| EndpointSlice {
            address_type: "IPv4".into(),
            endpoints: Some(
                chunk
                    .iter()
                    .map(|i| Endpoint {
                        addresses: vec![format!(
                            "10.{}.{}.{}",
                            i / 65536,
                            (i / 256) % 256,
                            i % 256
                        )],
                        conditions: Some(EndpointConditions {
                            ready: Some(true),
                            ..EndpointConditions::default()
                        }),
                        node_name: Some(format!("node-{}", i % nodes)),
                        target_ref: Some(ObjectReference {
                            kind: Some("Pod".into()),
                            namespace: Some("bench".into()),
                            name: Some(format!("web-{i}")),
                            uid: Some(format!("uid-{i}")),
                            ..ObjectReference::default()
                        }),
                        ..Endpoint::default()
                    })
                    .collect(),
            ),
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(8080),
                ..EndpointPort::default()
            }]),
            ..EndpointSlice::default()
        })
        .collect()
}

fn observations(nodes: usize, now: &Timestamp) -> Vec<NodeRuntimeObservation> {
    (0..nodes)
        .map(|n| {
            let pods: Vec<_> = (0..PODS)
                .filter(|i| i % nodes == n)
                .map(|i| {
                    json!({"uid": format!("uid-{i}"), "namespace": "bench", "name": format!("web-{i}"),
                           "coverage": "Complete", "listeners": [{"protocol": "TCP", "port": 8080}],
                           "connections": [{"direction": "outbound", "protocol": "TCP", "peerIP": "10.96.0.10", "peerPort": 5432}]})
                })
                .collect();
            serde_json::from_value(json!({
                "apiVersion": "pacto.trianalab.io/v1alpha1", "kind": "NodeRuntimeObservation",
                "metadata": {"name": format!("node-{n}"), "namespace": "pacto-node-agent"},
                "spec": {"nodeName": format!("node-{n}")},
                "status": {"lastPublished": now.to_rfc3339_seconds(), "collection": {"state": "Running"},
                           "podCount": pods.len(), "pods": pods}
            }))
            .unwrap()
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short sample"
    )]
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn run(nodes: usize) {
    let now = Timestamp::now();
    let service = Ok(Some(service()));
    let slices = Ok(Some(slices(nodes)));
    let observations = observations(nodes, &now);
    let binding = IntOrString::String("http".into());
    let mut latencies = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        let states: NodeStates = observations
            .iter()
            .map(|o| {
                let node = o.spec.node_name.clone();
                let sources = NodeSources {
                    view: Some(NodeView::from_observation(o)),
                    streamed: false,
                    lease_renewed: Some(now),
                };
                let state = assess(&node, &sources, &now, Duration::from_secs(90));
                (node, state)
            })
            .collect::<BTreeMap<_, _>>();
        let check = interface_check(Some(&binding), &service, &slices);
        // Kubernetes found Ready endpoints; node evidence qualifies them.
        let found = Verdict::Clear(Outcome::Observed(Value::Interface(InterfaceValue {
            interface_type: "openapi".into(),
            present: true,
        })));
        let decided = interface_rule(found, &check, "openapi", &states);
        std::hint::black_box(decided);
        latencies.push(start.elapsed());
    }
    latencies.sort();
    println!(
        "node evidence, {PODS} Ready pods on {nodes:>2} node(s): p50 {:?}, p99 {:?} over {CALLS} calls",
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99)
    );
}

fn main() {
    run(1);
    run(50);
}
