//! The agent process against a real kube-apiserver (pacto-testenv, nodes and pod status from the
//! simulator), run in-process with a scripted event source and an in-memory host view, its
//! reports going over mTLS to a recording NodeAgentReports server.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use pacto_api::{
    CollectionState, Direction, NodeRuntimeObservation, NodeRuntimeObservationStatus, PodCoverage,
};
use pacto_node_agent::aggregate::Limits;
use pacto_node_agent::facts::{
    CollectionError, EventSource, HostScanner, HostView, SocketEvent, SocketEventKind,
};
use pacto_node_agent::report::ReportTarget;
use pacto_node_agent::{AgentConfig, SourceFactory};
use pacto_proto::observer::node_agent_reports_server::{NodeAgentReports, NodeAgentReportsServer};
use pacto_proto::observer::{NodeReport, ReportAck};
use pacto_runtime::CancellationToken;
use pacto_runtime::balance::{BalanceConfig, BalancedChannel};
use pacto_runtime::testing::{TestCa, admin_get, eventually, metric_value};
use pacto_testenv::{ControlPlane, ControlPlaneOptions, Simulator, SimulatorOptions};

const WEB_NS: u32 = 4_026_532_100;
const OTHER_NS: u32 = 4_026_532_200;
const HOST_NS: u32 = 4_026_531_840;
const WAIT: Duration = Duration::from_secs(30);

async fn cluster() -> &'static ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../charts/pacto-crds/templates/pacto.trianalab.io_noderuntimeobservations.yaml");
    pacto_testenv::shared(|| ControlPlaneOptions::default().with_crd(crd))
        .await
        .expect("start the control plane (scripts/k8s-binaries.sh provides the binaries)")
}

/// Events the test pushes; the agent drains them.
#[derive(Clone, Default)]
struct Script {
    events: Arc<Mutex<Vec<SocketEvent>>>,
    drops: Arc<AtomicU64>,
}

impl Script {
    fn push(&self, kind: SocketEventKind, netns: u32, local: &str, peer: &str, cookie: u64) {
        self.events.lock().unwrap().push(SocketEvent {
            kind,
            cgroup_id: 1,
            netns_ino: netns,
            local: local.parse().unwrap(),
            peer: peer.parse().unwrap(),
            cookie,
        });
    }
}

impl EventSource for Script {
    fn drain(&mut self, out: &mut Vec<SocketEvent>) {
        out.append(&mut self.events.lock().unwrap());
    }
    fn drops(&self) -> u64 {
        self.drops.load(Ordering::SeqCst)
    }
}

/// The host as the test declares it.
#[derive(Clone, Default)]
struct Host(Arc<Mutex<HostView>>);

impl HostScanner for Host {
    fn scan(&mut self, with_sockets: bool) -> std::io::Result<HostView> {
        let mut view = self.0.lock().unwrap().clone();
        if !with_sockets {
            view.snapshot.clear();
        }
        Ok(view)
    }
}

/// A report and the authorization metadata it came with.
type Received = (Option<String>, NodeReport);

/// A NodeAgentReports server that records every report and its bearer token, and can drop its
/// streams (an observer going away).
#[derive(Clone, Default)]
struct Recorder {
    reports: Arc<Mutex<Vec<Received>>>,
    streams: Arc<AtomicU64>,
    /// Streams that ended (the agent closed them, or the server went away).
    ended: Arc<AtomicU64>,
    gone: CancellationToken,
}

/// Counts a stream's end when its task returns.
struct Ended(Arc<AtomicU64>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

type AckStream = Pin<Box<dyn Stream<Item = Result<ReportAck, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl NodeAgentReports for Recorder {
    type ReportStream = AckStream;

    async fn report(
        &self,
        request: tonic::Request<tonic::Streaming<NodeReport>>,
    ) -> Result<tonic::Response<AckStream>, tonic::Status> {
        self.streams.fetch_add(1, Ordering::SeqCst);
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut incoming = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let (reports, gone) = (Arc::clone(&self.reports), self.gone.clone());
        let ended = Arc::clone(&self.ended);
        tokio::spawn(async move {
            let _ended = Ended(ended);
            loop {
                tokio::select! {
                    () = gone.cancelled() => {
                        let _ = tx.send(Err(tonic::Status::unavailable("observer going away"))).await;
                        return;
                    }
                    next = incoming.next() => match next {
                        Some(Ok(report)) => {
                            let ack = ReportAck { node_name: report.node_name.clone(), published_at: report.published_at };
                            reports.lock().unwrap().push((token.clone(), report));
                            if tx.send(Ok(ack)).await.is_err() { return; }
                        }
                        _ => return,
                    },
                }
            }
        });
        Ok(tonic::Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

impl Recorder {
    /// Serves on `listener` over mTLS until [`Recorder::gone`].
    fn serve(
        &self,
        listener: tokio::net::TcpListener,
        transport: pacto_runtime::grpc::Transport,
    ) -> tokio::task::JoinHandle<()> {
        let router = tonic::transport::Server::builder()
            .add_service(NodeAgentReportsServer::new(self.clone()));
        let gone = self.gone.clone();
        tokio::spawn(async move {
            pacto_runtime::grpc::serve(router, listener, &transport, gone)
                .await
                .expect("serve the recorder");
        })
    }

    fn tokens_of(&self, node: &str) -> Vec<Option<String>> {
        self.reports
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, r)| r.node_name == node)
            .map(|(t, _)| t.clone())
            .collect()
    }
}

/// The agent's balanced channel to `address` over mTLS (server name `observer.pacto.svc`), with
/// a request deadline (1 s) shorter than a stream's life: it bounds opening a stream only.
fn observer_channel(
    ca: &TestCa,
    dir: &std::path::Path,
    address: &str,
    balance: BalanceConfig,
) -> BalancedChannel {
    let client_files = ca.client_files(dir, "agent", &["node-agent.pacto.svc"]);
    pacto_runtime::grpc::balanced_channel(
        &pacto_runtime::grpc::ChannelSpec {
            address: address.to_owned(),
            server_name: Some("observer.pacto.svc".to_owned()),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(1),
        },
        &pacto_runtime::grpc::Transport::Mtls(
            pacto_runtime::tls::TlsStore::load(client_files).unwrap(),
        ),
        balance,
    )
    .unwrap()
}

/// An admin port for the agent's runtime, on a free local port.
async fn admin() -> tokio::net::TcpListener {
    pacto_runtime::admin::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn config(node: &str, namespace: &str) -> AgentConfig {
    AgentConfig {
        node_name: node.to_owned(),
        namespace: namespace.to_owned(),
        holder: format!("pacto-node-agent-{node}"),
        publish_interval: Duration::from_secs(1),
        lease_renew: Duration::from_secs(1),
        lease_duration_seconds: 4,
        btf_path: PathBuf::from("/nonexistent/btf"),
        limits: Limits::default(),
        // Pods made by the test start after the agent: no warm-up marks.
        warm_up: Duration::ZERO,
    }
}

async fn create_pod(client: &Client, namespace: &str, name: &str, node: &str) -> String {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "example.invalid/app:1"}]},
    }))
    .unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    api.create(&PostParams::default(), &pod)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

async fn status(
    api: &Api<NodeRuntimeObservation>,
    node: &str,
) -> Result<NodeRuntimeObservationStatus, String> {
    let object = api.get_opt(node).await.map_err(|e| e.to_string())?;
    let object = object.ok_or("no NodeRuntimeObservation yet")?;
    object.status.ok_or_else(|| "no status yet".to_owned())
}

async fn renew_time(api: &Api<Lease>, node: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    let lease = api.get_opt(node).await.ok()??;
    lease.spec?.renew_time.map(|t| t.0)
}

/// Waits until the Lease was renewed twice after `since` (so it keeps renewing).
async fn lease_renews(api: &Api<Lease>, node: &str) {
    let first = eventually("Lease renewTime", WAIT, || renew_time(api, node)).await;
    let second = eventually("a later renewTime", WAIT, || async {
        renew_time(api, node).await.filter(|t| *t > first)
    })
    .await;
    eventually("a still later renewTime", WAIT, || async {
        renew_time(api, node).await.filter(|t| *t > second)
    })
    .await;
}

#[tokio::test]
async fn observation_lists_only_own_node_pods_with_their_sockets_and_reports_reach_the_observer() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let agent_ns = cp.create_namespace("agent").await.unwrap();
    let pods_ns = cp.create_namespace("shop").await.unwrap();
    let (node, other_node) = (
        pacto_testenv::controlplane::unique_name("node-a"),
        pacto_testenv::controlplane::unique_name("node-b"),
    );
    let _sim = Simulator::start(
        client.clone(),
        SimulatorOptions {
            nodes: vec![node.clone(), other_node.clone()],
            namespace: Some(pods_ns.clone()),
            ..SimulatorOptions::default()
        },
    )
    .await
    .unwrap();

    // The observer side: a recording server over mTLS; the agent's token file.
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test-ca").unwrap();
    let (endpoint, serve_config) = pacto_runtime::testing::TestEndpoint::bind(
        &ca,
        dir.path(),
        "observer.pacto.svc",
        &["node-agent.pacto.svc"],
    )
    .await;
    let observer_addr: SocketAddr = endpoint.grpc;
    let recorder = Recorder::default();
    let server = recorder.serve(serve_config.grpc, serve_config.transport.clone());
    let token = dir.path().join("token");
    std::fs::write(&token, "token-one\n").unwrap();
    // A request deadline shorter than the stream's life: it bounds opening the stream only.
    let observer = observer_channel(
        &ca,
        dir.path(),
        &observer_addr.to_string(),
        BalanceConfig::new("observer"),
    );

    let script = Script::default();
    let host = Host::default();
    host.0.lock().unwrap().host_netns = HOST_NS;
    let admin_listener = admin().await;
    let admin_addr = admin_listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let source: SourceFactory = {
        let script = script.clone();
        Box::new(move || Ok(Box::new(script) as Box<dyn EventSource>))
    };
    let agent = tokio::spawn(pacto_node_agent::serve(
        client.clone(),
        config(&node, &agent_ns),
        source,
        Box::new(host.clone()),
        Some(ReportTarget {
            observer,
            token_path: Some(token.clone()),
        }),
        admin_listener,
        shutdown.clone(),
    ));

    let observations: Api<NodeRuntimeObservation> = Api::namespaced(client.clone(), &agent_ns);
    // Before any pod: Running, no pods; then /readyz turns ready.
    let first = eventually("the first status", WAIT, || status(&observations, &node)).await;
    assert_eq!(
        first.collection.as_ref().unwrap().state,
        CollectionState::Running
    );
    assert!(!first.kernel.as_ref().unwrap().release.is_empty());
    assert!(!first.kernel.as_ref().unwrap().btf);
    let object = observations.get(&node).await.unwrap();
    assert_eq!(object.spec.node_name, node);
    eventually("/readyz 200", WAIT, || async {
        admin_get(admin_addr, "/readyz").await.0 == 200
    })
    .await;

    // A pod on this node and one on the other node; the host view knows both namespaces.
    let web = create_pod(&client, &pods_ns, "web", &node).await;
    let elsewhere = create_pod(&client, &pods_ns, "elsewhere", &other_node).await;
    {
        let mut view = host.0.lock().unwrap();
        view.netns_pods = HashMap::from([
            (WEB_NS, BTreeSet::from([web.clone()])),
            (OTHER_NS, BTreeSet::from([elsewhere.clone()])),
        ]);
    }
    script.push(
        SocketEventKind::Listen,
        WEB_NS,
        "0.0.0.0:8080",
        "0.0.0.0:0",
        11,
    );
    for _ in 0..2 {
        script.push(
            SocketEventKind::Outbound,
            WEB_NS,
            "10.244.0.2:41000",
            "10.96.0.12:5432",
            0,
        );
    }
    script.push(
        SocketEventKind::Listen,
        OTHER_NS,
        "0.0.0.0:9999",
        "0.0.0.0:0",
        12,
    );

    let seen = eventually("web's listener and connection", WAIT, || async {
        let s = status(&observations, &node).await?;
        let pod = s
            .pods
            .iter()
            .find(|p| p.uid == web)
            .ok_or(format!("{s:?}"))?;
        if pod.listeners.is_empty() || pod.connections.first().is_none_or(|c| c.count < 2) {
            return Err(format!("{pod:?}"));
        }
        Ok(s)
    })
    .await;
    assert_eq!(seen.pod_count, 1, "{seen:?}");
    assert!(
        seen.pods.iter().all(|p| p.uid != elsewhere),
        "a pod of another node is listed: {seen:?}"
    );
    let pod = &seen.pods[0];
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str()),
        (pods_ns.as_str(), "web")
    );
    assert_eq!(pod.coverage, Some(PodCoverage::Complete), "{pod:?}");
    assert_eq!(
        pod.listeners.iter().map(|l| l.port).collect::<Vec<_>>(),
        [8080]
    );
    let conn = &pod.connections[0];
    assert_eq!(
        (
            conn.direction,
            conn.peer_ip.as_str(),
            conn.peer_port,
            conn.count
        ),
        (Direction::Outbound, "10.96.0.12", 5432, 2)
    );
    assert!(!seen.truncated);

    // The Lease: named after the node, held by the agent's pod, renewed.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &agent_ns);
    let lease = leases.get(&node).await.unwrap().spec.unwrap();
    assert_eq!(
        lease.holder_identity.as_deref(),
        Some(format!("pacto-node-agent-{node}").as_str())
    );
    assert_eq!(lease.lease_duration_seconds, Some(4));
    lease_renews(&leases, &node).await;

    // Drops mark the pod's connections Partial "ring buffer overflow"; its listeners are
    // repaired from the socket snapshot taken after the drops (which, like the kernel, no longer
    // shows 8080 but a new 8081 whose Listen event was lost). Metrics count events and drops.
    host.0.lock().unwrap().snapshot = vec![SocketEvent {
        kind: SocketEventKind::Listen,
        cgroup_id: 0,
        netns_ino: WEB_NS,
        local: "0.0.0.0:8081".parse().unwrap(),
        peer: "0.0.0.0:0".parse().unwrap(),
        cookie: 0,
    }];
    script.drops.store(3, Ordering::SeqCst);
    let repaired = eventually("ring buffer overflow", WAIT, || async {
        let s = status(&observations, &node).await?;
        s.pods
            .iter()
            .find(|p| p.partial_reason.as_deref() == Some("ring buffer overflow"))
            .cloned()
            .ok_or(format!("{s:?}"))
    })
    .await;
    assert_eq!(
        repaired
            .listeners
            .iter()
            .map(|l| l.port)
            .collect::<Vec<_>>(),
        [8081],
        "{repaired:?}"
    );
    assert_eq!(
        repaired.listener_coverage,
        Some(PodCoverage::Complete),
        "{repaired:?}"
    );
    let (_, text) = admin_get(admin_addr, "/metrics").await;
    assert!(
        metric_value(&text, "pacto_node_agent_events_total", &[]) >= 4.0,
        "{text}"
    );
    assert!(
        (metric_value(&text, "pacto_node_agent_events_dropped_total", &[]) - 3.0).abs()
            < f64::EPSILON,
        "{text}"
    );
    assert!(
        text.contains("pacto_node_agent_publish_duration_seconds"),
        "{text}"
    );

    // Reports reached the observer with the bearer token and the same content.
    let report = eventually("a report with web's listener", WAIT, || async {
        let reports = recorder.reports.lock().unwrap();
        reports
            .iter()
            .rev()
            .find(|(_, r)| {
                r.node_name == node
                    && r.pods
                        .iter()
                        .any(|p| p.uid == web && !p.listeners.is_empty())
            })
            .cloned()
    })
    .await;
    assert_eq!(report.0.as_deref(), Some("Bearer token-one"));
    assert_eq!(report.1.collection.as_ref().unwrap().state, "Running");
    assert_eq!(report.1.pods.len(), 1);
    assert!(report.1.published_at.is_some());
    // Several publishes later (well past the 1 s request deadline) it is still the first stream.
    let acked_before = recorder.tokens_of(&node).len();
    eventually("three more reports", WAIT, || async {
        recorder.tokens_of(&node).len() >= acked_before + 3
    })
    .await;
    assert_eq!(
        recorder.streams.load(Ordering::SeqCst),
        1,
        "the report stream was reopened"
    );

    // The observer goes away and comes back on the same address: the agent reconnects, with the
    // token file read again.
    recorder.gone.cancel();
    server.await.unwrap();
    std::fs::write(&token, "token-two\n").unwrap();
    let store = endpoint.store.clone();
    let listener = pacto_runtime::grpc::bind(observer_addr).await.unwrap();
    let restarted = Recorder::default();
    let _server = restarted.serve(listener, pacto_runtime::grpc::Transport::Mtls(store));
    eventually("reports to the restarted observer", WAIT, || async {
        restarted.tokens_of(&node).first().cloned().flatten()
    })
    .await
    .eq("Bearer token-two")
    .then_some(())
    .expect("the restarted observer sees the new token");

    shutdown.cancel();
    restarted.gone.cancel();
    agent.await.unwrap().unwrap();
}

#[tokio::test]
async fn collection_failure_is_published_with_its_reason_and_the_lease_keeps_renewing() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let agent_ns = cp.create_namespace("agent").await.unwrap();
    let node = pacto_testenv::controlplane::unique_name("node-f");
    let source: SourceFactory = Box::new(|| {
        Err(CollectionError::BtfUnavailable {
            path: "/nonexistent/btf".to_owned(),
            message: "No such file or directory (os error 2)".to_owned(),
        })
    });
    let shutdown = CancellationToken::new();
    let agent = tokio::spawn(pacto_node_agent::serve(
        client.clone(),
        config(&node, &agent_ns),
        source,
        Box::new(Host::default()),
        None,
        admin().await,
        shutdown.clone(),
    ));
    let observations: Api<NodeRuntimeObservation> = Api::namespaced(client.clone(), &agent_ns);
    let s = eventually("collection Failed", WAIT, || status(&observations, &node)).await;
    let collection = s.collection.unwrap();
    assert_eq!(collection.state, CollectionState::Failed);
    assert_eq!(collection.reason.as_deref(), Some("BTFUnavailable"));
    assert!(
        collection
            .message
            .as_deref()
            .unwrap()
            .contains("/nonexistent/btf"),
        "{collection:?}"
    );
    assert_eq!(s.pod_count, 0);
    // Still heartbeating and publishing.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &agent_ns);
    lease_renews(&leases, &node).await;
    let before = s.last_published.unwrap().0;
    eventually("a later publish", WAIT, || async {
        status(&observations, &node)
            .await
            .ok()
            .and_then(|s| s.last_published)
            .filter(|t| t.0 > before)
    })
    .await;
    shutdown.cancel();
    agent.await.unwrap().unwrap();
}

/// A listener change reaches the NodeRuntimeObservation object at once (an early status write,
/// at most one per second), not at the next publish: with a 2-minute publish interval the object
/// shows the new listener, then its close, within seconds (docs/design/node-agent.md#reports).
#[tokio::test]
async fn a_listener_change_reaches_the_object_long_before_the_publish_interval() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let agent_ns = cp.create_namespace("agent").await.unwrap();
    let pods_ns = cp.create_namespace("shop").await.unwrap();
    let node = pacto_testenv::controlplane::unique_name("node-e");
    let script = Script::default();
    let host = Host::default();
    host.0.lock().unwrap().host_netns = HOST_NS;
    let source: SourceFactory = {
        let script = script.clone();
        Box::new(move || Ok(Box::new(script) as Box<dyn EventSource>))
    };
    let interval = Duration::from_mins(2);
    let shutdown = CancellationToken::new();
    let agent = tokio::spawn(pacto_node_agent::serve(
        client.clone(),
        AgentConfig {
            publish_interval: interval,
            ..config(&node, &agent_ns)
        },
        source,
        Box::new(host.clone()),
        None,
        admin().await,
        shutdown.clone(),
    ));
    let observations: Api<NodeRuntimeObservation> = Api::namespaced(client.clone(), &agent_ns);
    eventually("the first status", WAIT, || status(&observations, &node)).await;

    let web = create_pod(&client, &pods_ns, "web", &node).await;
    host.0.lock().unwrap().netns_pods = HashMap::from([(WEB_NS, BTreeSet::from([web.clone()]))]);
    // Far below the interval: only an early write can meet it (the first publish was at start).
    let soon = Duration::from_secs(15);
    let begun = std::time::Instant::now();
    eventually("the pod in the object", soon, || async {
        let s = status(&observations, &node).await?;
        s.pods
            .iter()
            .any(|p| p.uid == web)
            .then_some(())
            .ok_or(format!("{s:?}"))
    })
    .await;
    script.push(
        SocketEventKind::Listen,
        WEB_NS,
        "0.0.0.0:8080",
        "0.0.0.0:0",
        21,
    );
    let opened = eventually("the listener in the object", soon, || async {
        let s = status(&observations, &node).await?;
        let pod = s
            .pods
            .iter()
            .find(|p| p.uid == web)
            .ok_or(format!("{s:?}"))?;
        if pod.listeners.iter().map(|l| l.port).eq([8080]) {
            Ok(pod.clone())
        } else {
            Err(format!("{pod:?}"))
        }
    })
    .await;
    assert_eq!(
        opened.listener_coverage,
        Some(PodCoverage::Complete),
        "{opened:?}"
    );
    script.push(
        SocketEventKind::ListenClosed,
        WEB_NS,
        "0.0.0.0:0",
        "0.0.0.0:0",
        21,
    );
    eventually("the close in the object", soon, || async {
        let s = status(&observations, &node).await?;
        let pod = s
            .pods
            .iter()
            .find(|p| p.uid == web)
            .ok_or(format!("{s:?}"))?;
        pod.listeners
            .is_empty()
            .then_some(())
            .ok_or(format!("{pod:?}"))
    })
    .await;
    assert!(begun.elapsed() < interval, "{:?}", begun.elapsed());
    shutdown.cancel();
    agent.await.unwrap().unwrap();
}

/// A pod with more listeners than a report carries (docs/design/node-agent.md#bounds): the
/// object keeps 256 of them and says the pod's listeners are Partial "more than 256 listeners";
/// the other pod stays Complete; a later socket snapshot within the bound (the agent takes one
/// every 30 s while a pod is beyond a bound) makes it Complete again.
#[tokio::test]
async fn a_pod_beyond_the_listener_bound_reads_partial_until_a_snapshot_repairs_it() {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let agent_ns = cp.create_namespace("agent").await.unwrap();
    let pods_ns = cp.create_namespace("shop").await.unwrap();
    let node = pacto_testenv::controlplane::unique_name("node-f");
    let script = Script::default();
    let host = Host::default();
    host.0.lock().unwrap().host_netns = HOST_NS;
    let source: SourceFactory = {
        let script = script.clone();
        Box::new(move || Ok(Box::new(script) as Box<dyn EventSource>))
    };
    let shutdown = CancellationToken::new();
    let agent = tokio::spawn(pacto_node_agent::serve(
        client.clone(),
        config(&node, &agent_ns),
        source,
        Box::new(host.clone()),
        None,
        admin().await,
        shutdown.clone(),
    ));
    let observations: Api<NodeRuntimeObservation> = Api::namespaced(client.clone(), &agent_ns);
    eventually("the first status", WAIT, || status(&observations, &node)).await;
    let busy = create_pod(&client, &pods_ns, "busy", &node).await;
    let quiet = create_pod(&client, &pods_ns, "quiet", &node).await;
    host.0.lock().unwrap().netns_pods = HashMap::from([
        (WEB_NS, BTreeSet::from([busy.clone()])),
        (OTHER_NS, BTreeSet::from([quiet.clone()])),
    ]);
    let pod_of =
        |s: &NodeRuntimeObservationStatus, uid: &str| s.pods.iter().find(|p| p.uid == uid).cloned();
    // Both pods in the object with their network namespaces found (listeners Complete): until
    // a scan finds a pod's namespace its listeners read Partial "network namespace not found"
    // and its events have no pod to go to.
    eventually(
        "both pods in the object, namespaces found",
        WAIT,
        || async {
            let s = status(&observations, &node).await?;
            let found = |uid: &str| {
                pod_of(&s, uid).is_some_and(|p| p.listener_coverage == Some(PodCoverage::Complete))
            };
            (found(&busy) && found(&quiet))
                .then_some(())
                .ok_or(format!("{s:?}"))
        },
    )
    .await;
    for port in 1..=300_u64 {
        script.push(
            SocketEventKind::Listen,
            WEB_NS,
            &format!("0.0.0.0:{port}"),
            "0.0.0.0:0",
            1000 + port,
        );
    }
    script.push(
        SocketEventKind::Listen,
        OTHER_NS,
        "0.0.0.0:8080",
        "0.0.0.0:0",
        7,
    );
    let crowded = eventually("the busy pod Partial in the object", WAIT, || async {
        let s = status(&observations, &node).await?;
        let pod = pod_of(&s, &busy).ok_or(format!("{s:?}"))?;
        (pod.listener_coverage == Some(PodCoverage::Partial) && pod.listeners.len() == 256)
            .then_some(s.clone())
            .ok_or(format!("{pod:?}"))
    })
    .await;
    let pod = pod_of(&crowded, &busy).unwrap();
    assert_eq!(pod.listeners.len(), 256);
    assert_eq!(
        pod.listener_partial_reason.as_deref(),
        Some("more than 256 listeners")
    );
    assert_eq!(pod.coverage, Some(PodCoverage::Complete));
    let other = pod_of(&crowded, &quiet).unwrap();
    assert_eq!(
        other.listener_coverage,
        Some(PodCoverage::Complete),
        "{other:?}"
    );

    // The pod closes most of them: the next snapshot lists 10, and the pod is Complete again.
    let listen = |netns_ino: u32, port: u16| SocketEvent {
        kind: SocketEventKind::Listen,
        cgroup_id: 0,
        netns_ino,
        local: SocketAddr::from(([0, 0, 0, 0], port)),
        peer: SocketAddr::from(([0, 0, 0, 0], 0)),
        cookie: 0,
    };
    host.0.lock().unwrap().snapshot = (1..=10_u16)
        .map(|port| listen(WEB_NS, port))
        .chain([listen(OTHER_NS, 8080)])
        .collect();
    let repaired = eventually(
        "the busy pod repaired by a snapshot",
        Duration::from_secs(90),
        || async {
            let s = status(&observations, &node).await?;
            let pod = pod_of(&s, &busy).ok_or(format!("{s:?}"))?;
            (pod.listener_coverage == Some(PodCoverage::Complete))
                .then_some(pod.clone())
                .ok_or(format!("{:?}", pod.listener_partial_reason))
        },
    )
    .await;
    assert_eq!(
        repaired
            .listeners
            .iter()
            .map(|l| l.port)
            .collect::<Vec<_>>(),
        (1..=10).collect::<Vec<i32>>()
    );
    shutdown.cancel();
    agent.await.unwrap().unwrap();
}

/// Two observer replicas behind one name (127.0.0.2 and 127.0.0.3, one port, as two pods behind
/// the headless `-peers` Service): the agent opens one stream to each, both checked against the
/// Service's certificate name, each starting with the latest report, and closes the stream of a
/// replica the name no longer resolves to (docs/design/node-agent.md#reports).
#[tokio::test]
async fn reports_stream_to_every_observer_replica_the_name_resolves_to() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test-ca").unwrap();
    let server_files = ca.client_files(dir.path(), "observer", &["observer.pacto.svc"]);
    let server_tls = pacto_runtime::tls::TlsStore::load(server_files).unwrap();
    let first = pacto_runtime::grpc::bind(SocketAddr::from(([127, 0, 0, 2], 0)))
        .await
        .unwrap();
    let port = first.local_addr().unwrap().port();
    let a = SocketAddr::from(([127, 0, 0, 2], port));
    let b = SocketAddr::from(([127, 0, 0, 3], port));
    let second = pacto_runtime::grpc::bind(b).await.unwrap();
    let (replica_a, replica_b) = (Recorder::default(), Recorder::default());
    let mtls = pacto_runtime::grpc::Transport::Mtls(server_tls);
    let _serve_a = replica_a.serve(first, mtls.clone());
    let _serve_b = replica_b.serve(second, mtls);

    // The name resolves to whatever the test says; first only to a.
    let answer: Arc<Mutex<Vec<SocketAddr>>> = Arc::new(Mutex::new(vec![a]));
    let resolved = Arc::clone(&answer);
    let balance = BalanceConfig {
        backend: "observer".into(),
        resolve_interval: Duration::from_hours(1),
        ejection: Duration::from_secs(1),
        resolver: Arc::new(move |host: String, p: u16| {
            assert_eq!((host.as_str(), p), ("observer-peers.test", port));
            let addrs = resolved.lock().unwrap().clone();
            Box::pin(async move { Ok(addrs) })
        }),
    };
    let observer = observer_channel(
        &ca,
        dir.path(),
        &format!("observer-peers.test:{port}"),
        balance,
    );
    let token = dir.path().join("token");
    std::fs::write(&token, "token-peers\n").unwrap();
    let report = |n: i64| {
        Some(NodeReport {
            node_name: "node-r".to_owned(),
            published_at: Some(pacto_proto::prost_types::Timestamp {
                seconds: 1_800_000_000 + n,
                nanos: 0,
            }),
            ..NodeReport::default()
        })
    };
    let seconds = |recorder: &Recorder| -> Vec<i64> {
        recorder
            .reports
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.published_at.map_or(0, |t| t.seconds - 1_800_000_000))
            .collect()
    };
    let (reports_tx, reports_rx) = tokio::sync::watch::channel(report(1));
    let shutdown = CancellationToken::new();
    let streaming = tokio::spawn(pacto_node_agent::report::stream_reports(
        ReportTarget {
            observer: observer.clone(),
            token_path: Some(token),
        },
        reports_rx,
        shutdown.clone(),
    ));
    eventually("a has the first report", WAIT, || async {
        seconds(&replica_a) == [1]
    })
    .await;

    // b appears: its stream starts with the latest report; the next goes to both.
    *answer.lock().unwrap() = vec![a, b];
    observer.refresh();
    eventually("b starts with the latest report", WAIT, || async {
        seconds(&replica_b) == [1]
    })
    .await;
    reports_tx.send_replace(report(2));
    eventually("both have the second report", WAIT, || async {
        seconds(&replica_a) == [1, 2] && seconds(&replica_b) == [1, 2]
    })
    .await;
    for replica in [&replica_a, &replica_b] {
        assert_eq!(
            replica.tokens_of("node-r")[0].as_deref(),
            Some("Bearer token-peers")
        );
        assert_eq!(replica.streams.load(Ordering::SeqCst), 1);
    }

    // b leaves the answer: its stream is closed; a keeps streaming.
    *answer.lock().unwrap() = vec![a];
    observer.refresh();
    eventually("b's stream closed", WAIT, || async {
        replica_b.ended.load(Ordering::SeqCst) == 1
    })
    .await;
    reports_tx.send_replace(report(3));
    eventually("a has the third report", WAIT, || async {
        seconds(&replica_a) == [1, 2, 3]
    })
    .await;
    assert_eq!(seconds(&replica_b), [1, 2]);
    assert_eq!(replica_a.ended.load(Ordering::SeqCst), 0);

    shutdown.cancel();
    streaming.await.unwrap();
    replica_a.gone.cancel();
    replica_b.gone.cancel();
}
