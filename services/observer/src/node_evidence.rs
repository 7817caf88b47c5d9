//! Node-agent evidence on the observer's read path (docs/design/observation.md#node-evidence).
//!
//! The target's pods are the endpoints of its Service's EndpointSlices (each names its pod's UID
//! and `spec.nodeName`). Per node, the observer takes the node agent's report — the streamed one
//! while that node's stream is connected, else the node's `NodeRuntimeObservation` — and the
//! node's Lease, and decides the node's state:
//!
//! - **stale** when either object is missing or `now − max(Lease.renewTime, lastPublished)` is
//!   more than stale-after (exactly stale-after is still fresh) ⇒ `Stale`;
//! - **failed** when the agent reports `collection.state: Failed` ⇒ `Failed`, with the agent's
//!   reason and message;
//! - otherwise **fresh**: its per-pod views, where a pod that is missing or covered `Partial`
//!   makes the assertion `Insufficient`.
//!
//! Kubernetes evidence stays primary. Fresh, complete views *decide* an interface the Kubernetes
//! API cannot (its bound port number is absent from the Service, yet LISTENing in every Ready
//! pod) or a dependency on a service no Pacto manages (established outbound connections to the
//! Service's ClusterIP or endpoint IPs), and *qualify* an interface with Ready endpoints (no
//! LISTEN socket on the targetPort in a Ready pod ⇒ a windowed negative). Such observations carry
//! the collector [`COLLECTOR_WITH_EBPF`]. Node evidence that is stale, failed or partial only
//! ever makes an assertion unknown, never a violation. Every log line here names `node-agent`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use pacto_api::{CollectionState, Direction, NodeRuntimeObservation, PodCoverage, Protocol};
use pacto_engine::{InterfaceValue, Outcome, Timestamp, Value};
use pacto_proto::observer::NodeReport;
use pacto_runtime::CancellationToken;
use pacto_runtime::watch::WatchRetryExt;

use crate::interfaces::{find_service_port, is_external_or_selectorless};
use crate::node_reports::{NodeNotifier, NodeReports};
use crate::targets::TargetHub;
use crate::verdict::{ApiFailure, Fetched, Verdict};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The collector of an observation that node-agent evidence decided or qualified.
pub const COLLECTOR_WITH_EBPF: &str = "k8s-observer+ebpf";

/// Default of `--node-evidence-stale-after`.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(90);

/// How long a read waits for the NodeRuntimeObservation and Lease caches' first list (short: a
/// kind that is not installed or not granted must not hold every Observe call back).
const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

/// One pod's socket view, as the node agent reported it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodView {
    /// `Some(reason)` when the view is `Partial`.
    pub partial: Option<String>,
    /// TCP ports with a LISTEN socket.
    pub listening: BTreeSet<u32>,
    /// Peer IPs of outbound TCP connections, with the peer ports connected to.
    pub outbound: BTreeMap<IpAddr, BTreeSet<u32>>,
}

/// One node's report (streamed or published), normalised.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    /// When the agent published it.
    pub last_published: Option<Timestamp>,
    /// `Some((reason, message))` when collection is `Failed`.
    pub failed: Option<(String, String)>,
    /// Pod views by pod UID.
    pub pods: BTreeMap<String, PodView>,
}

/// Outbound connections by peer IP (unparseable addresses dropped; port 0 is no port).
fn outbound_map<'a>(
    connections: impl Iterator<Item = (&'a str, Option<u32>)>,
) -> BTreeMap<IpAddr, BTreeSet<u32>> {
    let mut out: BTreeMap<IpAddr, BTreeSet<u32>> = BTreeMap::new();
    for (ip, port) in connections {
        let Ok(ip) = ip.parse() else { continue };
        let ports = out.entry(ip).or_default();
        if let Some(port) = port.filter(|p| *p != 0) {
            ports.insert(port);
        }
    }
    out
}

fn time_of(time: &k8s_openapi::jiff::Timestamp) -> Option<Timestamp> {
    let nanos = u32::try_from(time.subsec_nanosecond()).unwrap_or(0);
    Timestamp::from_unix(time.as_second(), nanos)
}

impl NodeView {
    /// The view of a `NodeRuntimeObservation` (its status; none is an empty view with no
    /// `lastPublished`).
    pub fn from_observation(observation: &NodeRuntimeObservation) -> Self {
        let Some(status) = observation.status.as_ref() else {
            return Self::default();
        };
        let failed = status
            .collection
            .as_ref()
            .filter(|c| c.state == CollectionState::Failed)
            .map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            });
        let pods = status
            .pods
            .iter()
            .map(|pod| {
                let partial = match pod.coverage {
                    Some(PodCoverage::Complete) => None,
                    // An unstated coverage is not a claim of completeness.
                    Some(PodCoverage::Partial) | None => Some(
                        pod.partial_reason
                            .clone()
                            .unwrap_or_else(|| "coverage not Complete".to_owned()),
                    ),
                };
                let view = PodView {
                    partial,
                    listening: pod
                        .listeners
                        .iter()
                        .filter(|l| l.protocol == Protocol::Tcp)
                        .filter_map(|l| u32::try_from(l.port).ok())
                        .collect(),
                    outbound: outbound_map(
                        pod.connections
                            .iter()
                            .filter(|c| {
                                c.direction == Direction::Outbound && c.protocol == Protocol::Tcp
                            })
                            .map(|c| (c.peer_ip.as_str(), u32::try_from(c.peer_port).ok())),
                    ),
                };
                (pod.uid.clone(), view)
            })
            .collect();
        Self {
            last_published: status.last_published.as_ref().and_then(|t| time_of(&t.0)),
            failed,
            pods,
        }
    }

    /// The view of a streamed report.
    pub fn from_report(report: &NodeReport) -> Self {
        let failed = report
            .collection
            .as_ref()
            .filter(|c| c.state == "Failed")
            .map(|c| (c.reason.clone(), c.message.clone()));
        let pods = report
            .pods
            .iter()
            .map(|pod| {
                let view = PodView {
                    partial: (pod.coverage != "Complete").then(|| {
                        if pod.partial_reason.is_empty() {
                            "coverage not Complete".to_owned()
                        } else {
                            pod.partial_reason.clone()
                        }
                    }),
                    listening: pod
                        .listeners
                        .iter()
                        .filter(|l| l.protocol == "TCP")
                        .map(|l| l.port)
                        .collect(),
                    outbound: outbound_map(
                        pod.connections
                            .iter()
                            .filter(|c| c.direction == "outbound" && c.protocol == "TCP")
                            .map(|c| (c.peer_ip.as_str(), Some(c.peer_port))),
                    ),
                };
                (pod.uid.clone(), view)
            })
            .collect();
        Self {
            last_published: report
                .published_at
                .as_ref()
                .and_then(|t| Timestamp::from_unix(t.seconds, u32::try_from(t.nanos).unwrap_or(0))),
            failed,
            pods,
        }
    }
}

/// What the observer holds about one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeSources {
    /// The node's report: the streamed one while connected, else its NodeRuntimeObservation.
    pub view: Option<NodeView>,
    /// Whether `view` came from a connected stream.
    pub streamed: bool,
    /// The node's Lease `spec.renewTime`; `None` when there is no Lease (or it was never renewed).
    pub lease_renewed: Option<Timestamp>,
}

/// A node's evidence, judged at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    /// Missing or too old (the text says which), and when the node was last heard from.
    Stale(String, Option<Timestamp>),
    /// The agent's collection failed (the text carries its reason and message).
    Failed(String),
    /// Fresh, with the per-pod views.
    Fresh(NodeView),
}

fn newer(a: Option<&Timestamp>, b: Option<&Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a >= b { *a } else { *b }),
        (Some(t), None) | (None, Some(t)) => Some(*t),
        (None, None) => None,
    }
}

/// Judges `node`'s evidence at `now`: the newer of the Lease's renewTime and the report's
/// lastPublished decides freshness; beyond `stale_after` (strictly) or with either object missing
/// it is stale; a fresh `Failed` collection is failed.
pub fn assess(
    node: &str,
    sources: &NodeSources,
    now: &Timestamp,
    stale_after: Duration,
) -> NodeState {
    let Some(view) = &sources.view else {
        return NodeState::Stale(
            format!("node-agent evidence of node {node} is stale: no NodeRuntimeObservation"),
            sources.lease_renewed,
        );
    };
    if sources.lease_renewed.is_none() {
        return NodeState::Stale(
            format!("node-agent evidence of node {node} is stale: no renewed Lease"),
            view.last_published,
        );
    }
    let Some(heard) = newer(sources.lease_renewed.as_ref(), view.last_published.as_ref()) else {
        return NodeState::Stale(format!("node-agent evidence of node {node} is stale"), None);
    };
    let limit = chrono::Duration::from_std(stale_after).unwrap_or(chrono::TimeDelta::MAX);
    let age = now
        .as_datetime()
        .signed_duration_since(*heard.as_datetime());
    if age > limit {
        return NodeState::Stale(
            format!(
                "node-agent evidence of node {node} is stale: last heard at {}, more than {}s ago",
                heard.to_rfc3339_seconds(),
                stale_after.as_secs()
            ),
            Some(heard),
        );
    }
    if let Some((reason, message)) = &view.failed {
        let mut text = format!("the node agent on node {node} reports collection Failed");
        for part in [reason, message] {
            if !part.is_empty() {
                text.push_str(": ");
                text.push_str(part);
            }
        }
        return NodeState::Failed(text);
    }
    NodeState::Fresh(view.clone())
}

/// A pod of the target, as an EndpointSlice endpoint names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    /// Pod UID (empty when the endpoint names no pod).
    pub uid: String,
    /// `<namespace>/<name>` for messages.
    pub name: String,
    /// `spec.nodeName` (`None` when the endpoint names no node).
    pub node: Option<String>,
}

fn pod_of(endpoint: &k8s_openapi::api::discovery::v1::Endpoint) -> PodRef {
    let target = endpoint
        .target_ref
        .as_ref()
        .filter(|t| t.kind.as_deref().is_none_or(|k| k == "Pod"));
    PodRef {
        uid: target.and_then(|t| t.uid.clone()).unwrap_or_default(),
        name: target.map_or_else(
            || endpoint.addresses.join(","),
            |t| {
                format!(
                    "{}/{}",
                    t.namespace.as_deref().unwrap_or_default(),
                    t.name.as_deref().unwrap_or_default()
                )
            },
        ),
        node: endpoint.node_name.clone().filter(|n| !n.is_empty()),
    }
}

fn is_ready(endpoint: &k8s_openapi::api::discovery::v1::Endpoint) -> bool {
    endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true)
}

/// Every pod behind the slices (Ready or not), once each.
pub fn target_pods(slices: &[EndpointSlice]) -> Vec<PodRef> {
    let pods: BTreeSet<PodRef> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .map(pod_of)
        .collect();
    pods.into_iter().collect()
}

/// The nodes of `pods`.
pub fn nodes_of(pods: &[PodRef]) -> BTreeSet<String> {
    pods.iter().filter_map(|p| p.node.clone()).collect()
}

/// What node evidence can say about an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterfaceCheck {
    /// Kubernetes found Ready endpoints: each Ready pod must LISTEN on its targetPort.
    Qualify(Vec<(PodRef, u32)>),
    /// Kubernetes cannot decide (the bound port number is not in the Service): present when
    /// every Ready pod LISTENs on that number.
    Decide(Vec<(PodRef, u32)>),
    /// Node evidence has nothing to add.
    Nothing,
}

fn slice_port_for(
    slice: &EndpointSlice,
    port: &k8s_openapi::api::core::v1::ServicePort,
) -> Option<u32> {
    let ports = slice.ports.as_deref()?;
    let name = port.name.as_deref().unwrap_or_default();
    let found = if name.is_empty() {
        match port.target_port.as_ref() {
            None => ports.iter().find(|p| p.port == Some(port.port)),
            Some(IntOrString::Int(target)) => ports.iter().find(|p| p.port == Some(*target)),
            Some(IntOrString::String(_)) => ports
                .iter()
                .find(|p| p.name.as_deref().unwrap_or_default().is_empty()),
        }
    } else {
        ports
            .iter()
            .find(|p| p.name.as_deref().unwrap_or_default() == name)
    };
    found
        .and_then(|p| p.port)
        .and_then(|p| u32::try_from(p).ok())
}

/// Which pods and ports node evidence checks for an interface bound to `binding`.
pub fn interface_check(
    binding: Option<&IntOrString>,
    service: &Fetched<Service>,
    slices: &Fetched<Vec<EndpointSlice>>,
) -> InterfaceCheck {
    let (Some(binding), Ok(Some(service)), Ok(Some(slices))) = (binding, service, slices) else {
        return InterfaceCheck::Nothing;
    };
    if is_external_or_selectorless(service) {
        return InterfaceCheck::Nothing;
    }
    if let Some(port) = find_service_port(service, binding) {
        // The resolved targetPort is the slice's port number.
        let ready: BTreeSet<(PodRef, u32)> = slices
            .iter()
            .filter_map(|s| slice_port_for(s, port).map(|p| (s, p)))
            .flat_map(|(s, p)| {
                s.endpoints
                    .iter()
                    .flatten()
                    .filter(|e| is_ready(e))
                    .map(move |e| (pod_of(e), p))
            })
            .collect();
        return if ready.is_empty() {
            InterfaceCheck::Nothing
        } else {
            InterfaceCheck::Qualify(ready.into_iter().collect())
        };
    }
    let IntOrString::Int(number) = binding else {
        return InterfaceCheck::Nothing;
    };
    let Ok(number) = u32::try_from(*number) else {
        return InterfaceCheck::Nothing;
    };
    let ready: BTreeSet<(PodRef, u32)> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| is_ready(e))
        .map(|e| (pod_of(e), number))
        .collect();
    if ready.is_empty() {
        InterfaceCheck::Nothing
    } else {
        InterfaceCheck::Decide(ready.into_iter().collect())
    }
}

/// The node states of every node a call needs.
pub type NodeStates = BTreeMap<String, NodeState>;

/// The views of `pods`, or why they cannot be used (the outcome and the reason). Precedence over
/// the pods: a stale node, then a failed node, then a pod without a node, missing from its node's
/// view or covered partially.
pub fn views<'a>(
    pods: impl IntoIterator<Item = &'a PodRef>,
    nodes: &'a NodeStates,
) -> Result<Vec<(&'a PodRef, &'a PodView)>, Unusable> {
    let mut failed = None;
    let mut insufficient = None;
    let mut out = Vec::new();
    for pod in pods {
        let Some(node) = &pod.node else {
            insufficient.get_or_insert_with(|| {
                format!("node-agent evidence: pod {} is not on a node", pod.name)
            });
            continue;
        };
        match nodes.get(node) {
            None => {
                return Err(Unusable {
                    outcome: Outcome::Stale,
                    why: format!("node-agent evidence of node {node} is stale: not read"),
                    heard: None,
                });
            }
            Some(NodeState::Stale(why, heard)) => {
                return Err(Unusable {
                    outcome: Outcome::Stale,
                    why: why.clone(),
                    heard: *heard,
                });
            }
            Some(NodeState::Failed(why)) => {
                failed.get_or_insert_with(|| why.clone());
            }
            Some(NodeState::Fresh(view)) => match view.pods.get(&pod.uid) {
                None => {
                    insufficient.get_or_insert_with(|| {
                        format!(
                            "node-agent evidence: pod {} is missing from the observation of node {node}",
                            pod.name
                        )
                    });
                }
                Some(p) if p.partial.is_some() => {
                    insufficient.get_or_insert_with(|| {
                        format!(
                            "node-agent evidence: the view of pod {} on node {node} is Partial ({})",
                            pod.name,
                            p.partial.as_deref().unwrap_or_default()
                        )
                    });
                }
                Some(p) => out.push((pod, p)),
            },
        }
    }
    if let Some(why) = failed {
        return Err(Unusable {
            outcome: Outcome::Failed,
            why,
            heard: None,
        });
    }
    if let Some(why) = insufficient {
        return Err(Unusable {
            outcome: Outcome::Insufficient,
            why,
            heard: None,
        });
    }
    Ok(out)
}

/// Why pods' views cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct Unusable {
    /// `Stale`, `Failed` or `Insufficient`.
    pub outcome: Outcome,
    /// The reason (the observation's detail).
    pub why: String,
    /// For `Stale`: when the node was last heard from (the observation's detectedAt).
    pub heard: Option<Timestamp>,
}

/// A verdict with its provenance collector and the reason an undecided outcome carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The verdict.
    pub verdict: Verdict,
    /// The observation's collector.
    pub collector: &'static str,
    /// The observation's detail.
    pub detail: Option<String>,
    /// The observation's detectedAt when it is not the call's instant (stale evidence: when the
    /// node was last heard from).
    pub detected_at: Option<Timestamp>,
}

impl Decided {
    /// The Kubernetes verdict, unchanged.
    pub fn kubernetes(verdict: Verdict) -> Self {
        Self {
            verdict,
            collector: crate::verdict::COLLECTOR,
            detail: None,
            detected_at: None,
        }
    }

    fn ebpf(verdict: Verdict, detail: Option<String>) -> Self {
        Self {
            verdict,
            collector: COLLECTOR_WITH_EBPF,
            detail,
            detected_at: None,
        }
    }

    fn unusable(unusable: Unusable) -> Self {
        Self {
            verdict: Verdict::Report(unusable.outcome),
            collector: COLLECTOR_WITH_EBPF,
            detail: Some(unusable.why),
            detected_at: unusable.heard,
        }
    }
}

fn interface_value(interface_type: &str, present: bool) -> Value {
    Value::Interface(InterfaceValue {
        interface_type: interface_type.to_owned(),
        present,
    })
}

/// The interface rule: `k8s` is the Kubernetes verdict, `check` what [`interface_check`] found.
pub fn interface_rule(
    k8s: Verdict,
    check: &InterfaceCheck,
    interface_type: &str,
    nodes: &NodeStates,
) -> Decided {
    let (pods, qualify) = match check {
        InterfaceCheck::Qualify(pods) => (pods, true),
        InterfaceCheck::Decide(pods) => (pods, false),
        InterfaceCheck::Nothing => return Decided::kubernetes(k8s),
    };
    let views = match views(pods.iter().map(|(p, _)| p), nodes) {
        Ok(views) => views,
        Err(unusable) => return Decided::unusable(unusable),
    };
    // `views` keeps every pod, in order, when it succeeds.
    let silent = pods
        .iter()
        .zip(&views)
        .find(|((_, port), (_, view))| !view.listening.contains(port))
        .map(|((pod, port), _)| (pod, *port));
    match (silent, qualify) {
        (None, _) => Decided::ebpf(
            Verdict::Clear(Outcome::Observed(interface_value(interface_type, true))),
            None,
        ),
        (Some((pod, port)), true) => Decided::ebpf(
            Verdict::Negative(interface_value(interface_type, false)),
            Some(format!(
                "node-agent evidence: pod {} is Ready but has no LISTEN socket on port {port}",
                pod.name
            )),
        ),
        // Deciding never produces a negative: the Kubernetes verdict stands.
        (Some(_), false) => Decided::kubernetes(k8s),
    }
}

/// The dependency rule for a dependency no sibling Pacto resolves (`k8s` is then
/// `Unsupported`): with the Service named after the dependency, the target's pods' fresh,
/// complete views showing an outbound connection to one of its addresses ⇒ reachable.
pub fn dependency_rule(
    k8s: Verdict,
    addresses: Option<&BTreeSet<IpAddr>>,
    sources: &[PodRef],
    nodes: &NodeStates,
) -> Decided {
    let Some(addresses) = addresses.filter(|a| !a.is_empty()) else {
        return Decided::kubernetes(k8s);
    };
    if sources.is_empty() {
        return Decided::kubernetes(k8s);
    }
    match views(sources, nodes) {
        Err(unusable) => Decided::unusable(unusable),
        Ok(views) => {
            if views
                .iter()
                .any(|(_, v)| v.outbound.keys().any(|ip| addresses.contains(ip)))
            {
                Decided::ebpf(
                    Verdict::Clear(Outcome::Observed(Value::Dependency(
                        pacto_engine::DependencyValue { reachable: true },
                    ))),
                    None,
                )
            } else {
                Decided::kubernetes(k8s)
            }
        }
    }
}

/// The node evidence the observer reads: the report registry and reflector caches of the
/// NodeRuntimeObservations and Leases in the agent namespace. Cloning shares them.
#[derive(Clone)]
pub struct NodeEvidence {
    namespace: String,
    stale_after: Duration,
    reports: NodeReports,
    observations: Store<NodeRuntimeObservation>,
    leases: Store<Lease>,
    /// What each node's evidence last read as (timestamps aside), for change notifications.
    signatures: Arc<Mutex<HashMap<String, Signature>>>,
}

/// What a node's evidence reads as, its timestamps aside: whether it is stale or failed, whether
/// it has a Lease, and its pod views. A Lease renewal or a republished, unchanged observation
/// leaves it as it is.
type Signature = (u8, bool, Option<NodeView>);

impl std::fmt::Debug for NodeEvidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeEvidence")
            .field("namespace", &self.namespace)
            .field("stale_after", &self.stale_after)
            .finish_non_exhaustive()
    }
}

fn spawn_reflector<K>(
    api: Api<K>,
    kind: &'static str,
    on_change: Option<NodeNotifier>,
    shutdown: &CancellationToken,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, mut writer) = reflector::store();
    let stream = watcher::watcher(api, watcher::Config::default())
        .modify(|o: &mut K| o.managed_fields_mut().clear())
        .with_backoff(kind);
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            let item = tokio::select! {
                () = shutdown.cancelled() => return,
                item = stream.next() => item,
            };
            let Some(item) = item else { return };
            match item {
                Ok(event) => {
                    writer.apply_watcher_event(&event);
                    if let (Some(notify), watcher::Event::Apply(o) | watcher::Event::Delete(o)) =
                        (&on_change, &event)
                    {
                        notify(&o.name_any());
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, resource = kind, "node-agent evidence watch failed");
                }
            }
        }
    });
    store
}

use kube::runtime::WatchStreamExt as _;

impl NodeEvidence {
    /// Starts watching the NodeRuntimeObservations and Leases of `namespace` (stopped at
    /// `shutdown`). With a `hub`, a change of a node's evidence (an object of either kind, a
    /// streamed report, a stream closing) that changes what Observe would read there wakes the
    /// Pactos whose last Observe read that node.
    pub fn spawn(
        client: &Client,
        namespace: &str,
        reports: NodeReports,
        stale_after: Duration,
        hub: Option<TargetHub>,
        shutdown: &CancellationToken,
    ) -> Self {
        let cell: Arc<OnceLock<Self>> = Arc::new(OnceLock::new());
        let on_change: Option<NodeNotifier> = hub.map(|hub| {
            let cell = cell.clone();
            let notify: NodeNotifier = Arc::new(move |node: &str| {
                if let Some(evidence) = cell.get()
                    && evidence.changed(node)
                {
                    hub.node_changed(node);
                }
            });
            notify
        });
        if let Some(notify) = &on_change {
            reports.on_change(notify.clone());
        }
        tracing::info!(
            namespace,
            stale_after_seconds = stale_after.as_secs(),
            "node-agent evidence enabled"
        );
        let evidence = Self {
            namespace: namespace.to_owned(),
            stale_after,
            reports,
            signatures: Arc::default(),
            observations: spawn_reflector(
                Api::namespaced(client.clone(), namespace),
                "node-agent/noderuntimeobservations",
                on_change.clone(),
                shutdown,
            ),
            leases: spawn_reflector(
                Api::namespaced(client.clone(), namespace),
                "node-agent/leases",
                on_change,
                shutdown,
            ),
        };
        let _ = cell.set(evidence.clone());
        evidence
    }

    /// Whether `node`'s evidence now reads differently from the last time it was looked at here.
    fn changed(&self, node: &str) -> bool {
        let sources = self.sources(node);
        let kind = match assess(node, &sources, &Timestamp::now(), self.stale_after) {
            NodeState::Stale(..) => 0,
            NodeState::Failed(_) => 1,
            NodeState::Fresh(_) => 2,
        };
        let view = sources.view.map(|mut v| {
            v.last_published = None;
            v
        });
        let signature = (kind, sources.lease_renewed.is_some(), view);
        let mut signatures = self
            .signatures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if signatures.get(node) == Some(&signature) {
            return false;
        }
        signatures.insert(node.to_owned(), signature);
        true
    }

    /// The configured stale-after.
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// What the observer holds about `node`.
    pub fn sources(&self, node: &str) -> NodeSources {
        if let Some(stored) = self.reports.live(node) {
            return NodeSources {
                view: Some(NodeView::from_report(&stored.report)),
                streamed: true,
                lease_renewed: self.lease_renewed(node),
            };
        }
        NodeSources {
            view: self
                .observations
                .get(&ObjectRef::new(node).within(&self.namespace))
                .map(|o| NodeView::from_observation(&o)),
            streamed: false,
            lease_renewed: self.lease_renewed(node),
        }
    }

    fn lease_renewed(&self, node: &str) -> Option<Timestamp> {
        let lease = self
            .leases
            .get(&ObjectRef::new(node).within(&self.namespace))?;
        let renewed = lease.spec.as_ref()?.renew_time.as_ref()?;
        time_of(&renewed.0)
    }

    /// The states of `nodes` at `now`, once the caches listed (else the failure), and when the
    /// first of the nodes that are not stale turns stale unless heard from again (observe again
    /// then, so staleness shows without waiting for the next check interval).
    pub async fn states(
        &self,
        nodes: &BTreeSet<String>,
        now: &Timestamp,
    ) -> Result<(NodeStates, Option<Timestamp>), ApiFailure> {
        if nodes.is_empty() {
            return Ok((NodeStates::new(), None));
        }
        for (store, what) in [
            (
                self.observations.wait_until_ready().boxed(),
                "noderuntimeobservations",
            ),
            (self.leases.wait_until_ready().boxed(), "leases"),
        ] {
            if !matches!(tokio::time::timeout(SYNC_TIMEOUT, store).await, Ok(Ok(()))) {
                return Err(ApiFailure::new(format!(
                    "node-agent evidence: list {what} {}: not listed yet (is the observer granted list/watch on it?)",
                    self.namespace
                )));
            }
        }
        let mut due: Option<Timestamp> = None;
        let states = nodes
            .iter()
            .map(|node| {
                let sources = self.sources(node);
                let state = assess(node, &sources, now, self.stale_after);
                match &state {
                    NodeState::Stale(why, _) | NodeState::Failed(why) => {
                        tracing::debug!(
                            node = node.as_str(),
                            reason = why.as_str(),
                            "node-agent evidence unusable"
                        );
                    }
                    NodeState::Fresh(_) => {}
                }
                if !matches!(state, NodeState::Stale(..)) {
                    let heard = newer(
                        sources.lease_renewed.as_ref(),
                        sources
                            .view
                            .as_ref()
                            .and_then(|v| v.last_published.as_ref()),
                    );
                    let stale_at = heard.and_then(|h| stale_instant(&h, self.stale_after));
                    due = match (due, stale_at) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                (node.clone(), state)
            })
            .collect();
        Ok((states, due))
    }
}

/// The first instant at which evidence last heard at `heard` is stale.
pub fn stale_instant(heard: &Timestamp, stale_after: Duration) -> Option<Timestamp> {
    let after = chrono::Duration::from_std(stale_after + Duration::from_secs(1)).ok()?;
    let at = heard.as_datetime().checked_add_signed(after)?;
    Some(Timestamp::from(at))
}

use futures::FutureExt as _;

#[cfg(test)]
mod tests;
