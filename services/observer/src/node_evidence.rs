//! Node-agent evidence on the observer's read path (docs/design/observation.md#node-evidence).
//!
//! The target's pods are the endpoints of its Service's EndpointSlices (each names its pod's UID
//! and `spec.nodeName`). Per node, the observer takes the node agent's report — the streamed one
//! while that node's stream is connected, else the node's `NodeRuntimeObservation` — and the
//! node's Lease, and decides the node's state:
//!
//! - **not covered** when the node agent's DaemonSet does not run on the node by design (its
//!   placement rules, [`coverage`]; or the Node does not exist): its pods are left out;
//! - **stale** when either object is missing or `now − max(Lease.renewTime, lastPublished)` is
//!   more than stale-after (exactly stale-after is still fresh) ⇒ `Stale`;
//! - **failed** when the agent reports `collection.state: Failed` ⇒ `Failed`, with the agent's
//!   reason and message;
//! - otherwise **fresh**: its per-pod views, each with two completeness claims — of the pod's
//!   current listeners and of its connection history since it started. A pod missing from the
//!   view, or `Partial` in the dimension an assertion reads, makes that assertion `Insufficient`;
//!   a hostNetwork pod is left out.
//!
//! Kubernetes evidence stays primary. Fresh, complete views *decide* an interface the Kubernetes
//! API cannot (its bound port number is absent from the Service, yet LISTENing in every Ready
//! pod) or a dependency on a service no Pacto manages (an outbound connection seen to the
//! Service's ClusterIP or endpoint IPs), and *qualify* a TCP interface with Ready endpoints (no
//! LISTEN socket on the targetPort in a Ready pod ⇒ a windowed negative). Only such observations
//! carry the collector [`COLLECTOR_WITH_EBPF`]. Node evidence that is stale, failed or partial
//! only ever makes an assertion unknown (collector `k8s-observer`), never a violation. Every log
//! line here names `node-agent`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use pacto_api::{
    AgentFreshness, Direction, NodeRuntimeObservation, PodCoverage, Protocol, Staleness,
    agent_freshness,
};
use pacto_engine::{InterfaceValue, Outcome, Timestamp, Value};
use pacto_proto::node_limits::{
    MAX_CONNECTIONS_PER_POD, MAX_LISTENERS_PER_POD, MAX_PODS, TOO_MANY_CONNECTIONS,
    TOO_MANY_LISTENERS, add_reason,
};
use pacto_proto::observer::NodeReport;
use pacto_runtime::Tasks;
use pacto_runtime::index::{Index, run_index};
use pacto_runtime::watch::{WatchRetry, watch};

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

/// One pod's socket view, as the node agent reported it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodView {
    /// `Some(reason)` when its current listeners are not known completely (`listenerCoverage`
    /// `Partial`; an older agent's `coverage` stands for it).
    pub listeners_partial: Option<String>,
    /// `Some(reason)` when its connection history since it started is not known completely
    /// (`coverage` `Partial`, e.g. "started after pod" while the agent warms up).
    pub connections_partial: Option<String>,
    /// The pod shares the node's network namespace: node evidence does not speak for it.
    pub host_network: bool,
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

/// `None` when a coverage claims completeness (`Some(true)`), else the reason (an unstated
/// coverage is not a claim of completeness).
fn partial_of(complete: Option<bool>, reason: Option<&str>) -> Option<String> {
    if complete == Some(true) {
        return None;
    }
    Some(
        reason
            .filter(|r| !r.is_empty())
            .unwrap_or("coverage not Complete")
            .to_owned(),
    )
}

/// `partial` with `reason` added when a pod's list holds `count` entries, more than `max`: the
/// view keeps the first `max` and that claim reads Partial — the same for a
/// NodeRuntimeObservation and a streamed report (which the registry already bounded on arrival),
/// docs/design/node-agent.md#bounds.
fn beyond(partial: Option<String>, count: usize, max: usize, reason: &str) -> Option<String> {
    if count <= max {
        return partial;
    }
    Some(add_reason(partial.as_deref().unwrap_or_default(), reason))
}

impl PodView {
    /// One pod's view, from a NodeRuntimeObservation or a streamed report alike: the claims'
    /// Partial reasons `(listeners, connections)` with the bounds' reasons added, and the TCP
    /// listening ports and outbound peers among the first entries within the bounds
    /// (docs/design/node-agent.md#bounds). `listeners` yields (is TCP, port); `connections`
    /// (is an outbound TCP connection, peer address, peer port).
    fn bounded<'a>(
        (listeners_partial, connections_partial): (Option<String>, Option<String>),
        host_network: bool,
        listeners: impl ExactSizeIterator<Item = (bool, Option<u32>)>,
        connections: impl ExactSizeIterator<Item = (bool, &'a str, Option<u32>)>,
    ) -> Self {
        let listeners_partial = beyond(
            listeners_partial,
            listeners.len(),
            MAX_LISTENERS_PER_POD,
            TOO_MANY_LISTENERS,
        );
        let connections_partial = beyond(
            connections_partial,
            connections.len(),
            MAX_CONNECTIONS_PER_POD,
            TOO_MANY_CONNECTIONS,
        );
        Self {
            listeners_partial,
            connections_partial,
            host_network,
            listening: listeners
                .take(MAX_LISTENERS_PER_POD)
                .filter_map(|(tcp, port)| port.filter(|_| tcp))
                .collect(),
            outbound: outbound_map(
                connections
                    .take(MAX_CONNECTIONS_PER_POD)
                    .filter(|(outbound_tcp, _, _)| *outbound_tcp)
                    .map(|(_, ip, port)| (ip, port)),
            ),
        }
    }
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
        let failed = status.collection_failure();
        let pods = status
            .pods
            .iter()
            .take(MAX_PODS)
            .map(|pod| {
                let connections_partial = partial_of(
                    pod.coverage.map(|c| c == PodCoverage::Complete),
                    pod.partial_reason.as_deref(),
                );
                let listeners_partial = match pod.listener_coverage {
                    // An older agent: `coverage` stands for the listeners too.
                    None => connections_partial.clone(),
                    Some(coverage) => partial_of(
                        Some(coverage == PodCoverage::Complete),
                        pod.listener_partial_reason.as_deref(),
                    ),
                };
                let view = PodView::bounded(
                    (listeners_partial, connections_partial),
                    pod.host_network,
                    pod.listeners
                        .iter()
                        .map(|l| (l.protocol == Protocol::Tcp, u32::try_from(l.port).ok())),
                    pod.connections.iter().map(|c| {
                        (
                            c.direction == Direction::Outbound && c.protocol == Protocol::Tcp,
                            c.peer_ip.as_str(),
                            u32::try_from(c.peer_port).ok(),
                        )
                    }),
                );
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
            .take(MAX_PODS)
            .map(|pod| {
                let complete = |c: &str| (!c.is_empty()).then(|| c == "Complete");
                let connections_partial =
                    partial_of(complete(&pod.coverage), Some(pod.partial_reason.as_str()));
                let listeners_partial = if pod.listener_coverage.is_empty() {
                    // An older agent: `coverage` stands for the listeners too.
                    connections_partial.clone()
                } else {
                    partial_of(
                        complete(&pod.listener_coverage),
                        Some(pod.listener_partial_reason.as_str()),
                    )
                };
                let view = PodView::bounded(
                    (listeners_partial, connections_partial),
                    pod.host_network,
                    pod.listeners
                        .iter()
                        .map(|l| (l.protocol == "TCP", Some(l.port))),
                    pod.connections.iter().map(|c| {
                        (
                            c.direction == "outbound" && c.protocol == "TCP",
                            c.peer_ip.as_str(),
                            Some(c.peer_port),
                        )
                    }),
                );
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
    /// The node agent's DaemonSet does not run on this node by design (the text says why): no
    /// evidence is expected, its pods are left out.
    NotCovered(String),
}

/// The newer of two instants (when a fresh node turns stale unless heard from again).
fn newer(a: Option<&Timestamp>, b: Option<&Timestamp>) -> Option<Timestamp> {
    a.into_iter().chain(b).max().copied()
}

/// `time` as the API types' instant (the stale rule's, [`pacto_api::agent_freshness`]); beyond
/// the API's range it saturates, so an absurd report reads as it did: far past or far future.
fn api_time(time: &Timestamp) -> k8s_openapi::jiff::Timestamp {
    use k8s_openapi::jiff::Timestamp as ApiTime;
    let (seconds, nanos) = time.unix_parts();
    ApiTime::new(seconds, i32::try_from(nanos).unwrap_or(0)).unwrap_or(if seconds < 0 {
        ApiTime::MIN
    } else {
        ApiTime::MAX
    })
}

/// Judges `node`'s evidence at `now` by the stale rule ([`pacto_api::agent_freshness`],
/// docs/design/observation.md#node-evidence); a fresh `Failed` collection is failed.
pub fn assess(
    node: &str,
    sources: &NodeSources,
    now: &Timestamp,
    stale_after: Duration,
) -> NodeState {
    // Every stale message says when the node was last heard from, or that it never was
    // (docs/troubleshooting.md: the message names the node and the time it was last heard from).
    let last_heard = |heard: Option<&Timestamp>| {
        heard.map_or_else(
            || "never heard from".to_owned(),
            |t| format!("last heard at {}", t.to_rfc3339_seconds()),
        )
    };
    let freshness = agent_freshness(
        sources
            .view
            .as_ref()
            .map(|view| view.last_published.as_ref().map(api_time)),
        sources.lease_renewed.as_ref().map(api_time),
        api_time(now),
        stale_after,
    );
    let view = match (freshness, &sources.view) {
        (AgentFreshness::Fresh { .. }, Some(view)) => view,
        (
            AgentFreshness::Stale {
                why: Staleness::NoLease,
                ..
            },
            view,
        ) => {
            let published = view.as_ref().and_then(|v| v.last_published);
            return NodeState::Stale(
                format!(
                    "node-agent evidence of node {node} is stale: no renewed Lease, {}",
                    last_heard(published.as_ref())
                ),
                published,
            );
        }
        (
            AgentFreshness::Stale {
                why: Staleness::Old,
                heard,
            },
            _,
        ) => {
            let heard = heard.and_then(|h| time_of(&h));
            return NodeState::Stale(
                match heard {
                    Some(heard) => format!(
                        "node-agent evidence of node {node} is stale: last heard at {}, more than {}s ago",
                        heard.to_rfc3339_seconds(),
                        stale_after.as_secs()
                    ),
                    None => {
                        format!("node-agent evidence of node {node} is stale: never heard from")
                    }
                },
                heard,
            );
        }
        // No observation (the rule reads a node without one stale, never fresh).
        (
            AgentFreshness::Stale {
                why: Staleness::NoObservation,
                ..
            }
            | AgentFreshness::Fresh { .. },
            _,
        ) => {
            return NodeState::Stale(
                format!(
                    "node-agent evidence of node {node} is stale: no NodeRuntimeObservation, {}",
                    last_heard(sources.lease_renewed.as_ref())
                ),
                sources.lease_renewed,
            );
        }
    };
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
        // The agent sees TCP sockets only: a UDP or SCTP port keeps the Kubernetes reading
        // (docs/design/observation.md#node-evidence).
        if port.protocol.as_deref().is_some_and(|p| p != "TCP") {
            return InterfaceCheck::Nothing;
        }
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

/// Which part of a pod's view an assertion reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Its current listeners (interfaces).
    Listeners,
    /// Its connection history since it started (undeclared peers).
    Connections,
}

impl PodView {
    /// Why the part `need` reads is not complete, if it is not.
    pub fn partial(&self, need: Need) -> Option<&str> {
        match need {
            Need::Listeners => self.listeners_partial.as_deref(),
            Need::Connections => self.connections_partial.as_deref(),
        }
    }
}

/// What node evidence holds about one pod.
enum PodEvidence<'a> {
    /// Fresh and present in its node's view (complete or not).
    View(&'a PodView),
    /// Node evidence does not speak for it by design: a hostNetwork pod, or a pod on a node the
    /// agent does not cover.
    LeftOut,
    /// Its node is stale (the reason and when it was last heard from).
    Stale(String, Option<Timestamp>),
    /// Its node's collection failed.
    Failed(String),
    /// It has no node, or its node's view does not list it.
    Missing(String),
}

fn evidence_of<'a>(pod: &PodRef, nodes: &'a NodeStates) -> PodEvidence<'a> {
    let Some(node) = &pod.node else {
        return PodEvidence::Missing(format!(
            "node-agent evidence: pod {} is not on a node",
            pod.name
        ));
    };
    match nodes.get(node) {
        None => PodEvidence::Stale(
            format!("node-agent evidence of node {node} is stale: not read"),
            None,
        ),
        Some(NodeState::Stale(why, heard)) => PodEvidence::Stale(why.clone(), *heard),
        Some(NodeState::Failed(why)) => PodEvidence::Failed(why.clone()),
        Some(NodeState::NotCovered(_)) => PodEvidence::LeftOut,
        Some(NodeState::Fresh(view)) => match view.pods.get(&pod.uid) {
            Some(p) if p.host_network => PodEvidence::LeftOut,
            Some(p) => PodEvidence::View(p),
            None => PodEvidence::Missing(format!(
                "node-agent evidence: pod {} is missing from the observation of node {node}",
                pod.name
            )),
        },
    }
}

/// Each pod's evidence, in the order of `pods`, once none of their nodes is stale or failed; else
/// why not. Precedence: a stale node (the first one met), then a failed node
/// (docs/design/observation.md#node-evidence). What remains is a view, left out or missing.
fn usable_evidence<'a>(
    pods: impl IntoIterator<Item = &'a PodRef>,
    nodes: &'a NodeStates,
) -> Result<Vec<(&'a PodRef, PodEvidence<'a>)>, Unusable> {
    let mut failed = None;
    let mut out = Vec::new();
    for pod in pods {
        match evidence_of(pod, nodes) {
            PodEvidence::Stale(why, heard) => {
                return Err(Unusable {
                    outcome: Outcome::Stale,
                    why,
                    heard,
                });
            }
            PodEvidence::Failed(why) => {
                failed.get_or_insert(why);
            }
            evidence => out.push((pod, evidence)),
        }
    }
    match failed {
        Some(why) => Err(Unusable {
            outcome: Outcome::Failed,
            why,
            heard: None,
        }),
        None => Ok(out),
    }
}

/// The views of `pods` for an assertion reading `need`, in the order of `pods` (`None`: a pod
/// node evidence does not speak for by design, left out), or why they cannot be used. Precedence
/// over the pods: a stale node, then a failed node, then a pod without a node, missing from its
/// node's view or `Partial` in `need` (docs/design/observation.md#node-evidence).
pub fn views<'a>(
    pods: impl IntoIterator<Item = &'a PodRef>,
    nodes: &'a NodeStates,
    need: Need,
) -> Result<Vec<(&'a PodRef, Option<&'a PodView>)>, Unusable> {
    let mut insufficient = None;
    let mut out = Vec::new();
    for (pod, evidence) in usable_evidence(pods, nodes)? {
        match evidence {
            PodEvidence::Missing(why) => {
                insufficient.get_or_insert(why);
            }
            PodEvidence::View(view) => match view.partial(need) {
                Some(reason) => {
                    insufficient.get_or_insert_with(|| {
                        let what = match need {
                            Need::Listeners => "listeners",
                            Need::Connections => "connections",
                        };
                        format!(
                            "node-agent evidence: the {what} of pod {} on node {} are Partial ({reason})",
                            pod.name,
                            pod.node.as_deref().unwrap_or_default()
                        )
                    });
                }
                None => out.push((pod, Some(view))),
            },
            // `usable_evidence` keeps no stale or failed pod.
            PodEvidence::LeftOut | PodEvidence::Stale(..) | PodEvidence::Failed(_) => {
                out.push((pod, None));
            }
        }
    }
    match insufficient {
        Some(why) => Err(Unusable {
            outcome: Outcome::Insufficient,
            why,
            heard: None,
        }),
        None => Ok(out),
    }
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

    /// Node evidence that could not be used: its outcome and reason, with the Kubernetes
    /// collector — the agent's data decided nothing (docs/design/observation.md#node-evidence).
    fn unusable(unusable: Unusable) -> Self {
        Self {
            verdict: Verdict::Report(unusable.outcome),
            collector: crate::verdict::COLLECTOR,
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
    let views = match views(pods.iter().map(|(p, _)| p), nodes, Need::Listeners) {
        Ok(views) => views,
        Err(unusable) => return Decided::unusable(unusable),
    };
    // `views` keeps every pod, in order, when it succeeds; `None` marks a pod left out.
    let checked: Vec<((&PodRef, u32), &PodView)> = pods
        .iter()
        .zip(&views)
        .filter_map(|((pod, port), (_, view))| view.map(|v| ((pod, *port), v)))
        .collect();
    // Nobody node evidence speaks for; or deciding, some Ready pod it cannot check: the
    // Kubernetes verdict stands.
    if checked.is_empty() || (!qualify && checked.len() < pods.len()) {
        return Decided::kubernetes(k8s);
    }
    let silent = checked
        .iter()
        .find(|((_, port), view)| !view.listening.contains(port))
        .map(|(pod_port, _)| *pod_port);
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
/// `Unsupported`), with the Service named after the dependency: an outbound connection seen from
/// a target pod to one of its addresses ⇒ reachable, whether or not the pod's connection history
/// is complete (seeing it proves reachability). A stale, then a failed node of a target pod keeps
/// its outcome; otherwise, with no such connection, the Kubernetes verdict stands — the absence
/// of traffic is not evidence (docs/design/observation.md#node-evidence).
pub fn dependency_rule(
    k8s: Verdict,
    addresses: Option<&BTreeSet<IpAddr>>,
    sources: &[PodRef],
    nodes: &NodeStates,
) -> Decided {
    let Some(addresses) = addresses.filter(|a| !a.is_empty()) else {
        return Decided::kubernetes(k8s);
    };
    let evidence = match usable_evidence(sources, nodes) {
        Ok(evidence) => evidence,
        Err(unusable) => return Decided::unusable(unusable),
    };
    let seen = evidence.iter().any(|(_, e)| {
        matches!(e, PodEvidence::View(view) if view.outbound.keys().any(|ip| addresses.contains(ip)))
    });
    if seen {
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

/// Where the node agents are: their namespace and DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSite {
    /// `--node-agent-namespace`: the NodeRuntimeObservations, Leases and the DaemonSet.
    pub namespace: String,
    /// `--node-agent-daemonset`: the DaemonSet whose placement says which nodes should report.
    pub daemonset: String,
}

/// A reflector cache with what its watch last said: whether it completed its first list, and
/// its last error (e.g. the API's Forbidden), so a read fails at once with the real cause
/// (docs/design/observation.md#node-evidence, "Sources").
#[derive(Clone)]
struct Reflected<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    health: Arc<Mutex<CacheHealth>>,
    /// What is listed, for messages: `<kind> in <namespace>`.
    what: String,
}

#[derive(Debug, Default)]
struct CacheHealth {
    ready: bool,
    last_error: Option<String>,
}

impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Reflected<K> {
    /// `Ok` once the first list completed; else the last watch error, or that it is waiting.
    fn ready(&self) -> Result<(), String> {
        let health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        if health.ready {
            return Ok(());
        }
        Err(match &health.last_error {
            Some(error) => format!("list {}: {error}", self.what),
            None => format!("waiting for the first list of {}", self.what),
        })
    }
}

/// What a node reads as for the logs (one INFO line per change, per replica).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Heard {
    Fresh,
    Stale(Option<Timestamp>),
    Failed(String),
    NotCovered(String),
}

/// The node evidence the observer reads: the report registry and reflector caches of the
/// NodeRuntimeObservations and Leases in the agent namespace, of the node agent's DaemonSet and
/// of the Nodes (which nodes should report). Cloning shares them.
#[derive(Clone)]
pub struct NodeEvidence {
    site: AgentSite,
    stale_after: Duration,
    reports: NodeReports,
    observations: Reflected<NodeRuntimeObservation>,
    leases: Reflected<Lease>,
    daemonsets: Reflected<DaemonSet>,
    nodes: Reflected<Node>,
    /// What each node's evidence last read as (timestamps aside), for change notifications.
    signatures: Arc<Mutex<HashMap<String, Signature>>>,
    /// What each node was last logged as.
    logged: Arc<Mutex<HashMap<String, Heard>>>,
    /// Whether the DaemonSet was last found unreadable (logged once per change).
    daemonset_unreadable: Arc<Mutex<Option<String>>>,
}

/// What a node's evidence reads as, its timestamps aside: whether it is stale, failed, fresh or
/// not covered (and why not), whether it has a Lease, and its pod views. A Lease renewal or a
/// republished, unchanged observation leaves it as it is.
type Signature = (u8, Option<String>, bool, Option<NodeView>);

impl std::fmt::Debug for NodeEvidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeEvidence")
            .field("site", &self.site)
            .field("stale_after", &self.stale_after)
            .finish_non_exhaustive()
    }
}

/// Starts the watch of one node-evidence cache (its objects trimmed with `trim`), into a
/// [`ReflectorFeed`].
fn spawn_reflector<K>(
    api: Api<K>,
    kind: &'static str,
    config: watcher::Config,
    what: String,
    trim: fn(&mut K),
    on_change: Option<NodeNotifier>,
    tasks: &Tasks,
) -> Reflected<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watch(api, config)
        .retry(WatchRetry::new(kind))
        .modify(move |o: &mut K| {
            o.managed_fields_mut().clear();
            trim(o);
        });
    let health: Arc<Mutex<CacheHealth>> = Arc::default();
    let reflected = Reflected {
        store,
        health: health.clone(),
        what,
    };
    let feed = ReflectorFeed {
        writer,
        health,
        on_change,
        resource: reflected.what.clone(),
    };
    // A runtime task (when `tasks` is the runtime's), joined by its drain.
    tasks.spawn(kind, run_index(stream, feed, tasks.shutdown()));
    reflected
}

/// The writing side of a [`Reflected`] cache, as the index of its watch: the store, the
/// watch's health, and who hears of a change (a node's name; empty after a list).
struct ReflectorFeed<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    writer: reflector::store::Writer<K>,
    health: Arc<Mutex<CacheHealth>>,
    on_change: Option<NodeNotifier>,
    resource: String,
}

impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> ReflectorFeed<K> {
    fn notify(&self, node: &str) {
        if let Some(notify) = &self.on_change {
            notify(node);
        }
    }
}

impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Index<K> for ReflectorFeed<K> {
    fn apply(&mut self, object: K) {
        let name = object.name_any();
        self.writer
            .apply_watcher_event(&watcher::Event::Apply(object));
        self.notify(&name);
    }

    fn delete(&mut self, object: K) {
        let name = object.name_any();
        self.writer
            .apply_watcher_event(&watcher::Event::Delete(object));
        self.notify(&name);
    }

    fn reset(&mut self, listing: Vec<K>) {
        self.writer.apply_watcher_event(&watcher::Event::Init);
        for object in listing {
            self.writer
                .apply_watcher_event(&watcher::Event::InitApply(object));
        }
        self.writer.apply_watcher_event(&watcher::Event::InitDone);
        {
            let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
            health.ready = true;
            health.last_error = None;
        }
        self.notify("");
    }

    fn failed(&mut self, error: &watcher::Error) {
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_error = Some(error.to_string());
        tracing::warn!(%error, resource = self.resource, "node-agent evidence watch failed");
    }
}

use kube::runtime::WatchStreamExt as _;

/// Why the node agent does not cover `node` by design, if it does not: with `daemonset` (its
/// pod template) the DaemonSet controller's placement rules against the Node; a Node that does
/// not exist is not covered either. Without the DaemonSet every node is expected to report.
pub fn not_covered(
    site: &AgentSite,
    daemonset: Option<&DaemonSet>,
    node_name: &str,
    node: Option<&Node>,
) -> Option<String> {
    let spec = daemonset?.spec.template.spec.as_ref()?;
    let why = match node {
        None => format!("node {node_name} does not exist"),
        Some(node) => coverage::covers(spec, node).err()?,
    };
    Some(format!(
        "the node agent DaemonSet {}/{} does not run on node {node_name} by design: {why}",
        site.namespace, site.daemonset
    ))
}

impl NodeEvidence {
    /// Starts watching the NodeRuntimeObservations and Leases of the agent namespace, the node
    /// agent's DaemonSet and the Nodes, each watch a task of `tasks` (the runtime's,
    /// [`pacto_runtime::Runtime::tasks`]; a bare token in tests) stopped at its shutdown. With
    /// a `hub`, a change of a node's evidence (an object of those kinds, a streamed report, a
    /// stream closing) that changes what Observe would read there wakes the Pactos whose last
    /// Observe read that node.
    pub fn spawn(
        client: &Client,
        site: AgentSite,
        reports: NodeReports,
        stale_after: Duration,
        hub: Option<TargetHub>,
        tasks: impl Into<Tasks>,
    ) -> Self {
        let tasks: Tasks = tasks.into();
        let cell: Arc<OnceLock<Self>> = Arc::new(OnceLock::new());
        // A node's objects changed (an empty name: a cache completed a list, or the DaemonSet
        // changed: every node read so far is looked at again).
        let notify: NodeNotifier = {
            let cell = cell.clone();
            Arc::new(move |node: &str| {
                let Some(evidence) = cell.get() else { return };
                let nodes = if node.is_empty() {
                    evidence.known_nodes()
                } else {
                    vec![node.to_owned()]
                };
                for node in nodes {
                    if evidence.changed(&node)
                        && let Some(hub) = &hub
                    {
                        hub.node_changed(&node);
                    }
                }
            })
        };
        reports.on_change(notify.clone());
        let everyone: NodeNotifier = {
            let notify = notify.clone();
            Arc::new(move |_: &str| notify(""))
        };
        // Node events: only the nodes some Observe read (a cluster's other Nodes are not ours
        // to track).
        let known: NodeNotifier = {
            let (notify, cell) = (notify.clone(), cell.clone());
            Arc::new(move |node: &str| {
                if cell.get().is_some_and(|e| e.is_known(node)) {
                    notify(node);
                }
            })
        };
        tracing::info!(
            namespace = site.namespace.as_str(),
            daemonset = site.daemonset.as_str(),
            stale_after_seconds = stale_after.as_secs(),
            "node-agent evidence enabled"
        );
        let ns = site.namespace.as_str();
        let evidence = Self {
            stale_after,
            reports,
            signatures: Arc::default(),
            logged: Arc::default(),
            daemonset_unreadable: Arc::default(),
            observations: spawn_reflector(
                Api::namespaced(client.clone(), ns),
                "node-agent/noderuntimeobservations",
                watcher::Config::default(),
                format!("noderuntimeobservations in {ns}"),
                |_| {},
                Some(notify.clone()),
                &tasks,
            ),
            leases: spawn_reflector(
                Api::namespaced(client.clone(), ns),
                "node-agent/leases",
                watcher::Config::default(),
                format!("leases in {ns}"),
                |_| {},
                Some(notify.clone()),
                &tasks,
            ),
            daemonsets: spawn_reflector(
                Api::namespaced(client.clone(), ns),
                "node-agent/daemonsets",
                watcher::Config::default().fields(&format!("metadata.name={}", site.daemonset)),
                format!("daemonsets/{} in {ns}", site.daemonset),
                |d: &mut DaemonSet| d.status = None,
                Some(everyone),
                &tasks,
            ),
            // Placement reads names, labels and taints only.
            nodes: spawn_reflector(
                Api::all(client.clone()),
                "node-agent/nodes",
                watcher::Config::default(),
                "nodes".to_owned(),
                |n: &mut Node| {
                    n.status = None;
                    n.metadata.annotations = None;
                },
                Some(known),
                &tasks,
            ),
            site,
        };
        let _ = cell.set(evidence.clone());
        evidence
    }

    /// The nodes whose evidence was read so far.
    fn known_nodes(&self) -> Vec<String> {
        self.signatures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Whether `node`'s evidence was read so far.
    fn is_known(&self, node: &str) -> bool {
        self.signatures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(node)
    }

    /// Whether `node`'s evidence now reads differently from the last time it was looked at here.
    fn changed(&self, node: &str) -> bool {
        let sources = self.sources(node);
        let state = self.state(node, &sources, &Timestamp::now());
        self.log_change(node, &state, &sources);
        let (kind, not_covered) = match state {
            NodeState::Stale(..) => (0, None),
            NodeState::Failed(_) => (1, None),
            NodeState::Fresh(_) => (2, None),
            NodeState::NotCovered(why) => (3, Some(why)),
        };
        let view = sources.view.map(|mut v| {
            v.last_published = None;
            v
        });
        let signature = (kind, not_covered, sources.lease_renewed.is_some(), view);
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

    /// What `node` reads as at `now`: not covered by design, else its evidence judged by
    /// [`assess`].
    fn state(&self, node: &str, sources: &NodeSources, now: &Timestamp) -> NodeState {
        match self.coverage(node) {
            Some(why) => NodeState::NotCovered(why),
            None => assess(node, sources, now, self.stale_after),
        }
    }

    /// One INFO line when what `node` reads as changes: heard (fresh), stale since, collection
    /// failed, not covered by design (docs/design/observation.md#node-evidence, "Logs"). Returns
    /// the line logged, if any.
    fn log_change(&self, node: &str, state: &NodeState, sources: &NodeSources) -> Option<String> {
        let heard = match state {
            NodeState::Fresh(_) => Heard::Fresh,
            NodeState::Stale(_, at) => Heard::Stale(*at),
            NodeState::Failed(why) => Heard::Failed(why.clone()),
            NodeState::NotCovered(why) => Heard::NotCovered(why.clone()),
        };
        {
            let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
            if logged.get(node) == Some(&heard) {
                return None;
            }
            logged.insert(node.to_owned(), heard.clone());
        }
        let line = match heard {
            Heard::Fresh if sources.streamed => {
                format!("node-agent on node {node} heard (fresh, streaming)")
            }
            Heard::Fresh => format!("node-agent on node {node} heard (fresh)"),
            Heard::Stale(Some(at)) => format!(
                "node-agent on node {node} stale since {}",
                at.to_rfc3339_seconds()
            ),
            Heard::Stale(None) => format!("node-agent on node {node} stale (never heard)"),
            Heard::Failed(why) => format!("node-agent on node {node}: collection failed ({why})"),
            Heard::NotCovered(why) => {
                format!("node-agent on node {node}: not covered by design ({why})")
            }
        };
        tracing::info!(node, "{line}");
        Some(line)
    }

    /// Why the node agent does not cover `node` by design; `None` when it should report — also
    /// when the DaemonSet is absent or its cache or the Nodes' cannot be read (then a missing
    /// agent still reads EVIDENCE_STALE; an unreadable DaemonSet logs a warning once).
    fn coverage(&self, node: &str) -> Option<String> {
        let unreadable = self
            .daemonsets
            .ready()
            .err()
            .or_else(|| self.nodes.ready().err());
        {
            let mut last = self
                .daemonset_unreadable
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if *last != unreadable {
                if let Some(error) = &unreadable {
                    tracing::warn!(
                        error = error.as_str(),
                        "node-agent DaemonSet placement unreadable: every node is expected to report"
                    );
                }
                last.clone_from(&unreadable);
            }
        }
        if unreadable.is_some() {
            return None;
        }
        let daemonset = self
            .daemonsets
            .store
            .get(&ObjectRef::new(&self.site.daemonset).within(&self.site.namespace));
        let node_object = self.nodes.store.get(&ObjectRef::new(node));
        not_covered(
            &self.site,
            daemonset.as_deref(),
            node,
            node_object.as_deref(),
        )
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
                .store
                .get(&ObjectRef::new(node).within(&self.site.namespace))
                .map(|o| NodeView::from_observation(&o)),
            streamed: false,
            lease_renewed: self.lease_renewed(node),
        }
    }

    fn lease_renewed(&self, node: &str) -> Option<Timestamp> {
        let lease = self
            .leases
            .store
            .get(&ObjectRef::new(node).within(&self.site.namespace))?;
        let renewed = lease.spec.as_ref()?.renew_time.as_ref()?;
        time_of(&renewed.0)
    }

    /// The states of `nodes` at `now` — at once: when the NodeRuntimeObservation or Lease cache
    /// has not completed its first list, the failure names the watch's last error (or that it is
    /// still waiting) — and when the first of the fresh or failed nodes turns stale unless heard
    /// from again (observe again then, so staleness shows without waiting for the next check
    /// interval).
    pub fn states(
        &self,
        nodes: &BTreeSet<String>,
        now: &Timestamp,
    ) -> Result<(NodeStates, Option<Timestamp>), ApiFailure> {
        if nodes.is_empty() {
            return Ok((NodeStates::new(), None));
        }
        for cache in [self.observations.ready(), self.leases.ready()] {
            if let Err(why) = cache {
                return Err(ApiFailure::new(format!("node-agent evidence: {why}")));
            }
        }
        let mut due: Option<Timestamp> = None;
        let states = nodes
            .iter()
            .map(|node| {
                let sources = self.sources(node);
                let state = self.state(node, &sources, now);
                self.log_change(node, &state, &sources);
                // A node an Observe read is tracked from now on (its Node's events too).
                if !self.is_known(node) {
                    self.changed(node);
                }
                if matches!(state, NodeState::Fresh(_) | NodeState::Failed(_)) {
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

pub mod coverage;
#[cfg(test)]
mod tests;
