//! Cluster test of node-agent evidence on the observer's read path against a real kube-apiserver +
//! kube-controller-manager (pacto-testenv): pods made Ready by the workload simulator (their
//! endpoints name the simulated node), the test writing the node's NodeRuntimeObservation
//! (status subresource) and Lease as the agent would, and a streamed report in the registry
//! (docs/design/observation.md#node-evidence). Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed setup step should fail the test"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use pacto_api::NodeRuntimeObservation;
use pacto_engine::{Observation, ObservationKind, Outcome, Timestamp};
use pacto_observer::node_evidence::{AgentSite, COLLECTOR_WITH_EBPF, NodeEvidence};
use pacto_observer::{KubeCluster, NodeReports, ObserveInput, Observer, Options, Prober, Target};
use pacto_runtime::testing::eventually;
use serde_json::json;

mod common;
use common::{apply, cluster, later, sibling};

const NODE: &str = "sim-node-0";

const CONTRACT: &str = r#"
pactoVersion: "2.0"
service:
  name: web
  version: 1.0.0
interfaces:
  - name: api
    type: openapi
    ref: interfaces/openapi.yaml
"#;

fn input(ns: &str, windows: Vec<pacto_observer::Window>) -> ObserveInput {
    ObserveInput {
        target: Target {
            namespace: ns.to_owned(),
            pacto_name: "web".to_owned(),
            spec: serde_json::from_value(json!({
                "serviceName": "web",
                "interfaceBindings": [{"interface": "api", "servicePort": "http"}]
            }))
            .unwrap(),
        },
        contract: std::sync::Arc::new(
            pacto_contract::parse_contract(CONTRACT.as_bytes())
                .unwrap()
                .1,
        ),
        schemas: BTreeMap::new(),
        contract_ref: "inline://web".to_owned(),
        windows,
        stabilization_window: Some(Duration::from_mins(1)),
    }
}

fn api_observation(out: &pacto_observer::ObserveOutput) -> Observation {
    out.evidence
        .observations()
        .iter()
        .find(|o| o.kind == ObservationKind::InterfaceObserved)
        .cloned()
        .unwrap()
}

/// The collector of an observation the agent's data did not decide.
const KUBERNETES: &str = "k8s-observer";

/// Observes until the node-evidence caches completed their first lists (before, the call
/// fails the node-evidence query at once and Kubernetes evidence alone decides).
async fn listed<F>(observe: impl Fn() -> F) -> pacto_observer::ObserveOutput
where
    F: std::future::Future<Output = pacto_observer::ObserveOutput>,
{
    eventually(
        "the node-evidence caches listed",
        Duration::from_secs(30),
        || async {
            let out = observe().await;
            out.api_errors.is_empty().then_some(out)
        },
    )
    .await
}

fn rfc3339(at: Timestamp) -> String {
    at.to_rfc3339_seconds()
}

/// Writes the node's Lease (renewed at `renewed`) as the agent would.
async fn lease(client: &Client, ns: &str, renewed: Timestamp) {
    let (s, _) = renewed.unix_parts();
    let micro = k8s_openapi::jiff::Timestamp::from_second(s).unwrap();
    Api::<Lease>::namespaced(client.clone(), ns)
        .patch(
            NODE,
            &PatchParams::apply("test-agent").force(),
            &Patch::Apply(json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": NODE},
                "spec": {"holderIdentity": "agent", "leaseDurationSeconds": 40,
                         "renewTime": micro.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
            })),
        )
        .await
        .unwrap();
}

/// Writes the node's NodeRuntimeObservation with `status` (published at `published`).
async fn observation(
    client: &Client,
    ns: &str,
    published: Timestamp,
    mut status: serde_json::Value,
) {
    let api = Api::<NodeRuntimeObservation>::namespaced(client.clone(), ns);
    let params = PatchParams::apply("test-agent").force();
    let head = json!({"apiVersion": "pacto.trianalab.io/v1alpha1", "kind": "NodeRuntimeObservation",
                      "metadata": {"name": NODE}});
    let mut object = head.clone();
    object["spec"] = json!({"nodeName": NODE});
    api.patch(NODE, &params, &Patch::Apply(object))
        .await
        .unwrap();
    status["lastPublished"] = json!(rfc3339(published));
    let mut body = head;
    body["status"] = status;
    api.patch_status(NODE, &params, &Patch::Apply(body))
        .await
        .unwrap();
}

fn pod_view(uid: &str, coverage: &str, listeners: &[i32]) -> serde_json::Value {
    json!({
        "collection": {"state": "Running"},
        "pods": [{"uid": uid, "namespace": "x", "name": "web", "coverage": coverage,
                  "partialReason": if coverage == "Partial" { json!("started after pod") } else { json!(null) },
                  "listeners": listeners.iter().map(|p| json!({"protocol": "TCP", "port": p})).collect::<Vec<_>>()}]
    })
}

/// The Deployment and Service `web` (port 80 → 8080) in `ns`; returns the UID of its pod once a
/// Ready endpoint names it and the simulated node.
async fn web_on_the_simulated_node(client: &Client, ns: &str) -> String {
    apply::<Deployment>(client, ns, json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}}
    }))
    .await;
    apply::<Service>(client, ns, json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    }))
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    eventually(
        "a Ready endpoint on the simulated node",
        Duration::from_mins(1),
        || async {
            let list = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await
                .ok()?;
            list.items
                .iter()
                .flat_map(|s| s.endpoints.iter().flatten())
                .find_map(|e| {
                    (e.conditions.as_ref()?.ready == Some(true)
                        && e.node_name.as_deref() == Some(NODE))
                    .then(|| e.target_ref.as_ref()?.uid.clone())
                    .flatten()
                })
        },
    )
    .await
}

/// An observer reading through reflector caches with node evidence from the agents' namespace
/// `agents` (stale after 90 s).
fn observer(
    client: &Client,
    agents: &str,
    reports: NodeReports,
    hub: Option<pacto_observer::watch::TargetHub>,
    shutdown: &pacto_runtime::CancellationToken,
) -> Observer {
    Observer::new(
        KubeCluster::cached(client.clone(), None, shutdown),
        Prober::new().unwrap(),
        Options::default(),
    )
    .with_node_evidence(NodeEvidence::spawn(
        client,
        AgentSite {
            namespace: agents.to_owned(),
            daemonset: "pacto-node-agent".to_owned(),
        },
        reports,
        Duration::from_secs(90),
        hub,
        shutdown,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_evidence_freshness_failed_partial_listen_and_streams() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let ns = cp.create_namespace("obs-node").await.unwrap();
    let agents = cp.create_namespace("obs-agents").await.unwrap();
    let uid = web_on_the_simulated_node(&client, &ns).await;

    let registry = NodeReports::new();
    let hub = pacto_observer::watch::TargetHub::new();
    let shutdown = pacto_runtime::CancellationToken::new();
    let observer = observer(
        &client,
        &agents,
        registry.clone(),
        Some(hub.clone()),
        &shutdown,
    );
    let observe = |at: Timestamp, windows: Vec<pacto_observer::Window>| {
        let observer = observer.clone();
        let ns = ns.clone();
        async move { observer.observe(input(&ns, windows), at).await }
    };
    // Whole seconds: lastPublished is written with seconds precision.
    let t0 = Timestamp::from_unix(Timestamp::now().unix_parts().0, 0).unwrap();

    // No observation, no Lease (once the caches listed): EVIDENCE_STALE, never a violation;
    // the agent's data decided nothing, so the collector is Kubernetes'.
    let out = listed(|| observe(t0, vec![])).await;
    let obs = api_observation(&out);
    assert_eq!(obs.outcome, Outcome::Stale, "{obs:?}");
    assert_eq!(obs.provenance.collector, KUBERNETES);
    assert!(obs.detail.unwrap().contains("no NodeRuntimeObservation"));

    // A Lease far older than the observation: the observation's lastPublished decides (fresh),
    // the pod LISTENs on the targetPort: present, decided with node evidence.
    lease(&client, &agents, later(t0, -1000)).await;
    observation(&client, &agents, t0, pod_view(&uid, "Complete", &[8080])).await;
    let fresh = eventually(
        "the fresh observation read",
        Duration::from_secs(30),
        || async {
            let out = observe(t0, vec![]).await;
            let obs = api_observation(&out);
            matches!(obs.outcome, Outcome::Observed(_)).then_some(out)
        },
    )
    .await;
    let obs = api_observation(&fresh);
    assert_eq!(obs.provenance.collector, COLLECTOR_WITH_EBPF);
    // The observer asks to be called again when the evidence would turn stale.
    assert_eq!(fresh.window_due_at, Some(later(t0, 91)));
    // Exactly stale-after later: still fresh; one second beyond: stale, dated when last heard.
    assert!(matches!(
        api_observation(&observe(later(t0, 90), vec![]).await).outcome,
        Outcome::Observed(_)
    ));
    let stale = api_observation(&observe(later(t0, 91), vec![]).await);
    assert_eq!(stale.outcome, Outcome::Stale);
    assert_eq!(
        stale.provenance.detected_at.to_rfc3339_seconds(),
        rfc3339(t0)
    );

    // Collection Failed: Failed with the agent's reason, not Stale.
    observation(
        &client,
        &agents,
        t0,
        json!({"collection": {"state": "Failed", "reason": "BTFUnavailable", "message": "no BTF"}}),
    )
    .await;
    let (failed, errors) = eventually(
        "the Failed collection read",
        Duration::from_secs(30),
        || async {
            let out = observe(t0, vec![]).await;
            let obs = api_observation(&out);
            (obs.outcome == Outcome::Failed).then_some((obs, out.api_errors))
        },
    )
    .await;
    assert_eq!(failed.provenance.collector, KUBERNETES);
    assert!(failed.detail.unwrap().contains("BTFUnavailable: no BTF"));
    // ...and a failed query, so RuntimeObserved says which node and why.
    assert_eq!(
        errors,
        [format!(
            "the node agent on node {NODE} reports collection Failed: BTFUnavailable: no BTF"
        )]
    );

    // A connected stream's report wins over the observation; once the stream closes, the
    // observation is read again.
    let stream = registry.stream_opened(NODE);
    let report = pacto_proto::observer::NodeReport {
        node_name: NODE.to_owned(),
        published_at: Some(pacto_proto::prost_types::Timestamp {
            seconds: t0.unix_parts().0,
            nanos: 0,
        }),
        collection: Some(pacto_proto::observer::CollectionState {
            state: "Running".into(),
            ..Default::default()
        }),
        pods: vec![pacto_proto::observer::PodSockets {
            uid: uid.clone(),
            namespace: ns.clone(),
            name: "web".into(),
            coverage: "Complete".into(),
            listeners: vec![pacto_proto::observer::Listener {
                protocol: "TCP".into(),
                port: 8080,
                address: String::new(),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(registry.store(report, std::time::SystemTime::now()));
    assert!(matches!(
        api_observation(&observe(t0, vec![]).await).outcome,
        Outcome::Observed(_)
    ));
    drop(stream);
    assert_eq!(
        api_observation(&observe(t0, vec![]).await).outcome,
        Outcome::Failed
    );

    // A partial pod view: Insufficient naming the reason.
    observation(&client, &agents, t0, pod_view(&uid, "Partial", &[8080])).await;
    let partial = eventually("the Partial view read", Duration::from_secs(30), || async {
        let obs = api_observation(&observe(t0, vec![]).await);
        (obs.outcome == Outcome::Insufficient).then_some(obs)
    })
    .await;
    assert_eq!(partial.provenance.collector, KUBERNETES);
    assert!(partial.detail.unwrap().contains("started after pod"));

    // A restarted agent: the listeners complete at once, the connection history warming up.
    // Interfaces read the listeners: decided by node evidence.
    let mut warming = pod_view(&uid, "Partial", &[8080]);
    warming["pods"][0]["listenerCoverage"] = json!("Complete");
    observation(&client, &agents, t0, warming).await;
    let warm = eventually("the warming view read", Duration::from_secs(30), || async {
        let obs = api_observation(&observe(t0, vec![]).await);
        matches!(obs.outcome, Outcome::Observed(_)).then_some(obs)
    })
    .await;
    assert_eq!(warm.provenance.collector, COLLECTOR_WITH_EBPF);

    // A hostNetwork pod: node evidence does not speak for it, the Kubernetes verdict stands.
    let mut host = pod_view(&uid, "Complete", &[9090]);
    host["pods"][0]["hostNetwork"] = json!(true);
    observation(&client, &agents, t0, host).await;
    let host = eventually(
        "the hostNetwork view read",
        Duration::from_secs(30),
        || async {
            let obs = api_observation(&observe(t0, vec![]).await);
            (obs.provenance.collector == KUBERNETES).then_some(obs)
        },
    )
    .await;
    assert!(matches!(host.outcome, Outcome::Observed(_)), "{host:?}");

    // Ready endpoint, no LISTEN socket on 8080: a windowed negative, then a violation.
    observation(&client, &agents, t0, pod_view(&uid, "Complete", &[9090])).await;
    let first = eventually(
        "the listener-less view read",
        Duration::from_secs(30),
        || async {
            let out = observe(t0, vec![]).await;
            (out.windows.len() == 1).then_some(out)
        },
    )
    .await;
    assert_eq!(api_observation(&first).outcome, Outcome::Insufficient);
    let confirmed = observe(later(t0, 61), first.windows.clone()).await;
    let obs = api_observation(&confirmed);
    // 61 s after t0 the Lease (t0 − 1000) and the observation (t0) are still fresh.
    assert_eq!(
        obs.outcome,
        Outcome::Observed(pacto_engine::Value::Interface(
            pacto_engine::InterfaceValue {
                interface_type: "openapi".into(),
                present: false
            }
        )),
        "{obs:?}"
    );
    assert_eq!(obs.provenance.collector, COLLECTOR_WITH_EBPF);

    // Change notifications: the Observe learned which node it read; a report that changes what
    // that node's evidence reads wakes the Pacto through the WatchTargets hub.
    assert_eq!(
        confirmed.dependency_edges.nodes,
        std::collections::BTreeSet::from([NODE.to_owned()])
    );
    let key = (ns.clone(), "web".to_owned());
    hub.set_dependencies(key.clone(), confirmed.dependency_edges.clone());
    let mut changes = Box::pin(hub.subscribe(ns.clone(), shutdown.clone()));
    observation(&client, &agents, t0, pod_view(&uid, "Complete", &[8080])).await;
    let batch = tokio::time::timeout(
        Duration::from_secs(30),
        futures::StreamExt::next(&mut changes),
    )
    .await
    .expect("a WatchTargets notification for the changed node evidence")
    .unwrap();
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].pacto, key);
    assert_eq!(
        batch[0].reason,
        format!("node-agent evidence of node {NODE} changed")
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_the_agent_does_not_cover_keep_kubernetes_and_forbidden_caches_fail_fast() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let ns = cp.create_namespace("obs-cover").await.unwrap();
    let agents = cp.create_namespace("obs-cover-agents").await.unwrap();
    web_on_the_simulated_node(&client, &ns).await;
    let shutdown = pacto_runtime::CancellationToken::new();

    // Node evidence read by an identity granted nothing there: the query fails at once with the
    // API's own refusal, and Kubernetes evidence alone decides.
    let nobody = cp.service_account_client(&agents, "nobody").await.unwrap();
    let refused = Observer::new(
        KubeCluster::cached(client.clone(), None, &shutdown),
        Prober::new().unwrap(),
        Options::default(),
    )
    .with_node_evidence(NodeEvidence::spawn(
        &nobody,
        AgentSite {
            namespace: agents.clone(),
            daemonset: "pacto-node-agent".to_owned(),
        },
        NodeReports::new(),
        Duration::from_secs(90),
        None,
        &shutdown,
    ));
    let t0 = Timestamp::from_unix(Timestamp::now().unix_parts().0, 0).unwrap();
    let out = eventually("the refusal recorded", Duration::from_secs(30), || async {
        let started = std::time::Instant::now();
        let out = refused.observe(input(&ns, vec![]), t0).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "an Observe waited for the node-evidence caches"
        );
        out.api_errors
            .iter()
            .any(|e| e.contains("forbidden"))
            .then_some(out)
    })
    .await;
    let error = &out.api_errors[0];
    assert!(
        error.starts_with(&format!(
            "node-agent evidence: list noderuntimeobservations in {agents}: "
        )),
        "{error}"
    );
    assert!(!error.contains("not listed yet"), "{error}");
    let obs = api_observation(&out);
    assert_eq!(obs.provenance.collector, KUBERNETES);
    assert!(matches!(obs.outcome, Outcome::Observed(_)), "{obs:?}");

    // The agent's DaemonSet does not run on the simulated node by design (its nodeSelector):
    // no evidence is expected there, the Kubernetes verdict stands instead of EVIDENCE_STALE.
    let observer = observer(&client, &agents, NodeReports::new(), None, &shutdown);
    let obs = api_observation(&listed(|| observer.observe(input(&ns, vec![]), t0)).await);
    assert_eq!(
        obs.outcome,
        Outcome::Stale,
        "no DaemonSet: every node should report"
    );
    apply::<k8s_openapi::api::apps::v1::DaemonSet>(&client, &agents, json!({
        "metadata": {"name": "pacto-node-agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"nodeSelector": {"pacto.test/agent": "yes"},
                                       "containers": [{"name": "agent", "image": "registry.example/agent:1"}]}}}
    }))
    .await;
    let obs = eventually("the DaemonSet read", Duration::from_secs(30), || async {
        let obs = api_observation(&observer.observe(input(&ns, vec![]), t0).await);
        (obs.outcome != Outcome::Stale).then_some(obs)
    })
    .await;
    assert!(matches!(obs.outcome, Outcome::Observed(_)), "{obs:?}");
    assert_eq!(obs.provenance.collector, KUBERNETES);
    shutdown.cancel();
}

/// The ClusterIP of Service `ns/name`.
async fn cluster_ip(client: &Client, ns: &str, name: &str) -> String {
    Api::<Service>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap()
}

/// A selector-less Service (the API server allocates its ClusterIP); returns that ClusterIP.
async fn cluster_ip_service(client: &Client, ns: &str, name: &str) -> String {
    apply::<Service>(
        client,
        ns,
        json!({
            "metadata": {"name": name},
            "spec": {"ports": [{"port": 443}]}
        }),
    )
    .await;
    cluster_ip(client, ns, name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_peers_are_resolved_listed_and_never_judged() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let ns = cp.create_namespace("obs-peers").await.unwrap();
    let agents = cp.create_namespace("obs-peers-agents").await.unwrap();
    let uid = web_on_the_simulated_node(&client, &ns).await;
    let own = cluster_ip(&client, &ns, "web").await;
    // Declared: `db` (no sibling Pacto: the Service named after it) and `orders` (a sibling
    // Pacto's Service). Undeclared: `cache` (no Pacto), `payments` (a Pacto targets it).
    let db = cluster_ip_service(&client, &ns, "db").await;
    let orders = cluster_ip_service(&client, &ns, "orders").await;
    let cache = cluster_ip_service(&client, &ns, "cache").await;
    let payments = cluster_ip_service(&client, &ns, "payments").await;
    let repo = |n: &str| format!("registry.example/{ns}/{n}");
    sibling(
        &client,
        &ns,
        "orders",
        Some("orders"),
        &format!("{}:1.0.0", repo("orders")),
    )
    .await;
    sibling(
        &client,
        &ns,
        "payments-pacto",
        Some("payments"),
        &format!("{}:1.0.0", repo("payments")),
    )
    .await;
    let api_server = cluster_ip(&client, "default", "kubernetes").await;
    let contract = format!(
        "{CONTRACT}dependencies:
  - name: db
    ref: oci://{db}:1.0.0
    required: true
  - name: orders
    ref: oci://{orders}:1.0.0
    required: true
",
        db = repo("db"),
        orders = repo("orders"),
    );

    let shutdown = pacto_runtime::CancellationToken::new();
    let observer = observer(&client, &agents, NodeReports::new(), None, &shutdown);
    let observe = |at: Timestamp| {
        let observer = observer.clone();
        let mut request = input(&ns, vec![]);
        request.contract = std::sync::Arc::new(
            pacto_contract::parse_contract(contract.as_bytes())
                .unwrap()
                .1,
        );
        async move { observer.observe(request, at).await }
    };
    let t0 = Timestamp::from_unix(Timestamp::now().unix_parts().0, 0).unwrap();
    let connection = |ip: &str, port: u16| json!({"direction": "outbound", "protocol": "TCP", "peerIP": ip, "peerPort": port});
    let view = |coverage: &str, connections: Vec<serde_json::Value>| {
        let mut status = pod_view(&uid, coverage, &[8080]);
        status["pods"][0]["connections"] = json!(connections);
        status
    };
    let every_peer = vec![
        connection(&db, 5432),
        connection(&orders, 443),
        connection(&cache, 6379),
        connection(&payments, 443),
        connection(&payments, 8443),
        connection(&own, 80),
        connection(&api_server, 443),
        connection("127.0.0.1", 9000),
        connection("::1", 9000),
        connection("203.0.113.7", 443),
    ];

    // No node evidence yet (stale): nothing is said.
    let out = listed(|| observe(t0)).await;
    assert_eq!(out.undeclared_peers, None);

    lease(&client, &agents, t0).await;
    observation(&client, &agents, t0, view("Complete", vec![])).await;
    let quiet = eventually(
        "the fresh observation read",
        Duration::from_secs(30),
        || async {
            let out = observe(t0).await;
            out.undeclared_peers.is_some().then_some(out)
        },
    )
    .await;
    assert_eq!(
        quiet.undeclared_peers,
        Some(vec![]),
        "complete, no connection"
    );

    observation(&client, &agents, t0, view("Complete", every_peer.clone())).await;
    let out = eventually("the connections read", Duration::from_secs(30), || async {
        let out = observe(t0).await;
        out.undeclared_peers
            .as_ref()
            .is_some_and(|p| !p.is_empty())
            .then_some(out)
    })
    .await;
    let listed: Vec<(&str, String, Vec<u32>)> = out
        .undeclared_peers
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p.kind.as_str(),
                p.name.clone(),
                p.ports.iter().copied().collect(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("Pacto", format!("{ns}/payments-pacto"), vec![443, 8443]),
            ("Service", format!("{ns}/cache"), vec![6379]),
            ("IP", "203.0.113.7".to_owned(), vec![443]),
        ],
        "declared dependencies, the target itself, the API server and loopback are not listed"
    );
    // Never judged: the evidence is what it is without the undeclared connections.
    observation(
        &client,
        &agents,
        t0,
        view(
            "Complete",
            vec![connection(&db, 5432), connection(&orders, 443)],
        ),
    )
    .await;
    let declared_only = eventually(
        "the declared-only view read",
        Duration::from_secs(30),
        || async {
            let out = observe(t0).await;
            (out.undeclared_peers == Some(vec![])).then_some(out)
        },
    )
    .await;
    assert_eq!(
        out.evidence.observations(),
        declared_only.evidence.observations()
    );
    assert_eq!(out.api_errors, declared_only.api_errors);

    // Stale or partial evidence says nothing.
    observation(&client, &agents, t0, view("Complete", every_peer.clone())).await;
    eventually("the peers read again", Duration::from_secs(30), || async {
        observe(t0)
            .await
            .undeclared_peers
            .is_some_and(|p| !p.is_empty())
            .then_some(())
    })
    .await;
    assert_eq!(observe(later(t0, 91)).await.undeclared_peers, None);
    observation(&client, &agents, t0, view("Partial", every_peer)).await;
    eventually("the Partial view read", Duration::from_secs(30), || async {
        observe(t0).await.undeclared_peers.is_none().then_some(())
    })
    .await;
    shutdown.cancel();
}
