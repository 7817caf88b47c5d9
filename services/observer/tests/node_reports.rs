//! Cluster test of the NodeAgentReports endpoint: the observer in process with real mTLS, its
//! TokenReviews answered by a real kube-apiserver (pacto-testenv), and real pod-bound
//! ServiceAccount tokens from the TokenRequest API for Pods bound to simulated nodes
//! (docs/design/node-agent.md#report-stream). Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed setup step should fail the test"
)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ObjectMeta, PostParams};
use pacto_observer::node_reports::NODE_REPORTS_SERVICE;
use pacto_observer::{NodeAgentArgs, NodeReports};
use pacto_proto::observer::node_agent_reports_client::NodeAgentReportsClient;
use pacto_proto::observer::{
    CollectionState, Connection, Listener, NodeReport, PodSockets, ReportAck,
};
use pacto_proto::prost_types::Timestamp;
use pacto_runtime::CancellationToken;
use pacto_runtime::testing::{TestCa, TestEndpoint, admin_get, metric_value};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use tonic::transport::Channel;
use tonic::{Code, Status};

const SERVER_NAME: &str = "observer.pacto.svc";
const AGENT_IDENTITY: &str = "node-agent.pacto.svc";
const AUDIENCE: &str = "pacto-observer";

async fn cluster() -> &'static ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)")
}

async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), object).await.unwrap()
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

/// A Node object (no kubelet: the API server only needs it to put the node name in bound tokens).
async fn node(cp: &ControlPlane, name: &str) {
    create(
        &Api::<Node>::all(cp.client().unwrap()),
        &Node {
            metadata: meta(name),
            ..Node::default()
        },
    )
    .await;
}

/// A token for ServiceAccount `sa` (created if missing) with `audience`, bound to a new Pod on
/// `node` when given (the TokenRequest then carries the node name), unbound otherwise.
async fn token(
    cp: &ControlPlane,
    ns: &str,
    sa: &str,
    node: Option<&str>,
    audience: &str,
) -> String {
    cp.service_account_token(ns, sa, node, &[audience])
        .await
        .unwrap()
}

fn report(node: &str, seconds: i64) -> NodeReport {
    NodeReport {
        node_name: node.to_owned(),
        agent_version: "test".into(),
        published_at: Some(Timestamp { seconds, nanos: 0 }),
        collection: Some(CollectionState {
            state: "Running".into(),
            ..CollectionState::default()
        }),
        ..NodeReport::default()
    }
}

/// A report of `node` with pod `busy` beyond the per-pod bounds (300 listeners, 1200 connections)
/// and pod `quiet` within them.
fn crowded(node: &str, seconds: i64) -> NodeReport {
    let pod = |uid: &str, listeners: u32, connections: u32| PodSockets {
        uid: uid.to_owned(),
        namespace: "team".into(),
        name: format!("{uid}-0"),
        coverage: "Complete".into(),
        listener_coverage: "Complete".into(),
        listeners: (1..=listeners)
            .map(|port| Listener {
                protocol: "TCP".into(),
                port,
                address: "0.0.0.0".into(),
            })
            .collect(),
        connections: (1..=connections)
            .map(|port| Connection {
                direction: "outbound".into(),
                protocol: "TCP".into(),
                peer_ip: "10.96.0.10".into(),
                peer_port: port,
                count: 1,
                ..Connection::default()
            })
            .collect(),
        ..PodSockets::default()
    };
    NodeReport {
        pods: vec![pod("busy", 300, 1200), pod("quiet", 2, 3)],
        ..report(node, seconds)
    }
}

/// Opens a stream with `token` (if any), sends `reports` and collects the acks until the stream
/// ends or fails.
async fn stream(
    channel: Channel,
    token: Option<&str>,
    reports: Vec<NodeReport>,
) -> (Vec<ReportAck>, Option<Status>) {
    let mut request = tonic::Request::new(futures::stream::iter(reports));
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let mut client = NodeAgentReportsClient::new(channel);
    let mut acks = Vec::new();
    let mut answers = match client.report(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return (acks, Some(status)),
    };
    loop {
        match answers.message().await {
            Ok(Some(ack)) => acks.push(ack),
            Ok(None) => return (acks, None),
            Err(status) => return (acks, Some(status)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_agent_on_a_node_reports_about_that_node() {
    let cp = cluster().await;
    let ns = cp.create_namespace("agents").await.unwrap();
    let (node_a, node_b) = (
        pacto_testenv::controlplane::unique_name("node-a-"),
        pacto_testenv::controlplane::unique_name("node-b-"),
    );
    node(cp, &node_a).await;
    node(cp, &node_b).await;
    let agent = "pacto-node-agent";
    let token_a = token(cp, &ns, agent, Some(&node_a), AUDIENCE).await;
    let token_other_sa = token(cp, &ns, "web", Some(&node_a), AUDIENCE).await;
    let token_unbound = token(cp, &ns, agent, None, AUDIENCE).await;
    let token_api_audience = token(
        cp,
        &ns,
        agent,
        Some(&node_a),
        "https://kubernetes.default.svc.cluster.local",
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("observer test CA").unwrap();
    let (endpoint, config) =
        TestEndpoint::bind(&ca, dir.path(), SERVER_NAME, &["status-writer.pacto.svc"]).await;
    pacto_runtime::metrics::install_recorder().unwrap();
    let shutdown = CancellationToken::new();
    let client = cp.client().unwrap();
    let args = NodeAgentArgs {
        identities: vec![AGENT_IDENTITY.to_owned()],
        token_audience: AUDIENCE.to_owned(),
        namespace: ns.clone(),
        service_account: agent.to_owned(),
        daemonset: "pacto-node-agent".to_owned(),
        node_evidence: false,
        stale_after: pacto_observer::node_evidence::DEFAULT_STALE_AFTER,
    };
    let registry = NodeReports::new();
    let observer = pacto_observer::Observer::new(
        pacto_observer::KubeCluster::new(client.clone(), None),
        pacto_observer::Prober::new().unwrap(),
        pacto_observer::Options::default(),
    );
    let service = pacto_observer::ObserverService::new(
        observer,
        pacto_observer::watch::TargetHub::new(),
        shutdown.clone(),
    )
    .with_node_agents(args.endpoint(client, registry.clone()));
    let task = tokio::spawn(pacto_observer::serve(config, service, shutdown.clone()));
    let channel = |name: &str, identity: &str| {
        ca.channel(dir.path(), name, &[identity], endpoint.grpc, SERVER_NAME)
    };
    let agent_channel = channel("agent", AGENT_IDENTITY);

    // The agent on node A: its reports about node A are acknowledged and kept.
    let (acks, end) = stream(
        agent_channel.clone(),
        Some(&token_a),
        vec![report(&node_a, 100), report(&node_a, 130)],
    )
    .await;
    assert!(end.is_none(), "{end:?}");
    assert_eq!(acks.len(), 2);
    assert_eq!(acks[1].node_name, node_a);
    assert_eq!(acks[1].published_at.unwrap().seconds, 130);
    let stored = registry.get(&node_a).expect("node A's report is kept");
    assert_eq!(stored.report.published_at.unwrap().seconds, 130);

    // A pod beyond the per-pod bounds of a report (docs/design/node-agent.md#bounds; an older
    // agent, or one whose bounds disagree): that pod reads Partial in the dimension cut, the
    // report is accepted, and the other pods keep their claims.
    let (acks, end) = stream(
        agent_channel.clone(),
        Some(&token_a),
        vec![crowded(&node_a, 145)],
    )
    .await;
    assert!(
        end.is_none(),
        "a crowded pod must not refuse the node's report: {end:?}"
    );
    assert_eq!(acks.len(), 1);
    let stored = registry.get(&node_a).unwrap().report;
    let busy = stored.pods.iter().find(|p| p.uid == "busy").unwrap();
    assert_eq!(busy.listeners.len(), 256);
    assert_eq!(
        (
            busy.listener_coverage.as_str(),
            busy.listener_partial_reason.as_str()
        ),
        ("Partial", "more than 256 listeners")
    );
    assert_eq!(busy.connections.len(), 1000);
    assert_eq!(
        (busy.coverage.as_str(), busy.partial_reason.as_str()),
        ("Partial", "more than 1000 connections")
    );
    let quiet = stored.pods.iter().find(|p| p.uid == "quiet").unwrap();
    assert_eq!(
        quiet,
        &crowded(&node_a, 145).pods[1],
        "the other pod is untouched"
    );

    // The same agent reporting about node B: refused, naming both nodes; nothing kept for B.
    let (acks, end) = stream(
        agent_channel.clone(),
        Some(&token_a),
        vec![report(&node_a, 160), report(&node_b, 160)],
    )
    .await;
    let end = end.expect("the report about node B ends the stream");
    assert_eq!(acks.len(), 1, "node A's report before it was acknowledged");
    assert_eq!(end.code(), Code::PermissionDenied, "{end:?}");
    assert!(
        end.message().contains(&node_a) && end.message().contains(&node_b),
        "{}",
        end.message()
    );
    assert!(registry.get(&node_b).is_none());

    // No token.
    let (_, end) = stream(agent_channel.clone(), None, vec![report(&node_a, 200)]).await;
    assert_eq!(end.unwrap().code(), Code::Unauthenticated);
    // A pod-bound token of another ServiceAccount on node A.
    let (_, end) = stream(
        agent_channel.clone(),
        Some(&token_other_sa),
        vec![report(&node_a, 200)],
    )
    .await;
    let end = end.unwrap();
    assert_eq!(end.code(), Code::PermissionDenied, "{end:?}");
    assert!(
        end.message()
            .contains(&format!("system:serviceaccount:{ns}:web"))
    );
    // The agent's ServiceAccount, but a token bound to no pod: no node name.
    let (_, end) = stream(
        agent_channel.clone(),
        Some(&token_unbound),
        vec![report(&node_a, 200)],
    )
    .await;
    let end = end.unwrap();
    assert_eq!(end.code(), Code::PermissionDenied, "{end:?}");
    assert!(
        end.message().contains("carries no node name"),
        "{}",
        end.message()
    );
    // A token for the API server's audience, not the observer's.
    let (_, end) = stream(
        agent_channel.clone(),
        Some(&token_api_audience),
        vec![report(&node_a, 200)],
    )
    .await;
    assert_eq!(end.unwrap().code(), Code::Unauthenticated);
    // A valid agent token over a certificate that is not the agent's: the allow-list refuses.
    let (_, end) = stream(
        channel("writer", "status-writer.pacto.svc"),
        Some(&token_a),
        vec![report(&node_a, 200)],
    )
    .await;
    let end = end.unwrap();
    assert_eq!(end.code(), Code::PermissionDenied, "{end:?}");
    assert!(
        end.message().contains(NODE_REPORTS_SERVICE),
        "{}",
        end.message()
    );
    assert_eq!(
        registry
            .get(&node_a)
            .unwrap()
            .report
            .published_at
            .unwrap()
            .seconds,
        160,
        "no refused stream changed node A's report"
    );

    let (_, metrics) = admin_get(endpoint.admin, "/metrics").await;
    let accepted = metric_value(
        &metrics,
        "pacto_observer_node_reports_total",
        &["result=\"accepted\""],
    );
    assert!((accepted - 4.0).abs() < 0.5, "accepted reports: {accepted}");
    assert!(
        metric_value(
            &metrics,
            "pacto_observer_node_reports_total",
            &["result=\"refused\""]
        ) >= 5.0
    );

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
