//! The `NodeRuntimeObservation` custom resource (docs/design/observation.md#node-agent): the node agent's kernel
//! view of the sockets of the pods on one node.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which node this observation describes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "pacto.trianalab.io",
    version = "v1alpha1",
    kind = "NodeRuntimeObservation",
    plural = "noderuntimeobservations",
    singular = "noderuntimeobservation",
    namespaced,
    status = "NodeRuntimeObservationStatus",
    derive = "PartialEq",
    doc = "The Pacto node agent's kernel view of the sockets (listeners, connections) of the pods on one node. Named after the node; only that node's agent writes it.",
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".spec.nodeName"}"#,
    printcolumn = r#"{"name":"Pods","type":"integer","jsonPath":".status.podCount"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.collection.state"}"#,
    printcolumn = r#"{"name":"Last Published","type":"date","jsonPath":".status.lastPublished"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeRuntimeObservationSpec {
    /// The node this observation describes (equal to the object's name).
    #[schemars(length(min = 1))]
    pub node_name: String,
}

/// What the agent saw on its node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRuntimeObservationStatus {
    /// When the agent last published this status. Freshness is the newer of this and the
    /// node's Lease renewTime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_published: Option<Time>,

    /// Version of the node agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,

    /// The node's kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelInfo>,

    /// Whether the kernel programs are collecting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<CollectionStatus>,

    /// Number of entries in `pods`.
    #[serde(default)]
    pub pod_count: i32,

    /// Per-pod socket views of the pods scheduled on this node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodObservation>,

    /// A size cap (top-N connections per pod, object size) dropped data.
    #[serde(default)]
    pub truncated: bool,

    /// Whether the observer accepts the agent's report stream (absent: the agent has not
    /// streamed yet, or is older). `Refused` while an observer replica refuses it (the agent
    /// keeps writing this object, which the observer then reads instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_stream: Option<ReportStreamStatus>,
}

impl NodeRuntimeObservationStatus {
    /// `(reason, message)` of a Failed collection (empty strings for missing fields); `None`
    /// while it collects or says nothing. The observer's node view and the operator's log read
    /// a failure through this one definition.
    pub fn collection_failure(&self) -> Option<(String, String)> {
        self.collection
            .as_ref()
            .filter(|c| c.state == CollectionState::Failed)
            .map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
    }

    /// `(reason, message)` while an observer replica refuses the report stream; `None` otherwise.
    pub fn stream_refusal(&self) -> Option<(String, String)> {
        self.report_stream
            .as_ref()
            .filter(|s| s.state == ReportStreamState::Refused)
            .map(|s| {
                (
                    s.reason.clone().unwrap_or_default(),
                    s.message.clone().unwrap_or_default(),
                )
            })
    }
}

/// Most characters of [`ReportStreamStatus::message`] (longer messages are cut, ending `…`).
pub const REPORT_STREAM_MESSAGE_MAX: usize = 512;

/// The state of the agent's report stream to the observer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportStreamStatus {
    /// Open (every observer replica that answered accepts the stream) or Refused (one refuses
    /// it: its token, its identity or its report was not accepted).
    pub state: ReportStreamState,
    /// Machine-readable reason of a refusal: the gRPC status code, e.g. Unauthenticated or
    /// PermissionDenied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub reason: Option<String>,
    /// The observer's message of a refusal (at most 512 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 520))]
    pub message: Option<String>,
    /// Since when the stream is in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// Report stream state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ReportStreamState {
    /// The observer accepts the reports.
    Open,
    /// The observer refuses the reports.
    Refused,
}

/// `message` cut to at most [`REPORT_STREAM_MESSAGE_MAX`] characters (on a character
/// boundary), with `…` appended when cut.
pub fn bounded_message(message: &str) -> String {
    match message.char_indices().nth(REPORT_STREAM_MESSAGE_MAX) {
        None => message.to_owned(),
        Some((cut, _)) => format!("{}…", &message[..cut]),
    }
}

/// The node's kernel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelInfo {
    /// Kernel release (`uname -r`).
    #[serde(default)]
    pub release: String,
    /// BTF type information is available at /sys/kernel/btf/vmlinux.
    #[serde(default)]
    pub btf: bool,
}

/// Collection state of the kernel programs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CollectionStatus {
    /// Running, or Failed (e.g. a program failed to load; assertions depending on this node
    /// read COLLECTION_FAILED).
    pub state: CollectionState,
    /// Machine-readable reason, e.g. BTFUnavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Collection state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum CollectionState {
    /// The kernel programs are loaded and collecting.
    Running,
    /// Collection failed.
    Failed,
}

/// The socket view of one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodObservation {
    /// Pod UID.
    pub uid: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Completeness of the pod's connection history (`connections`): Complete when every
    /// connection since the pod started was seen; Partial (with `partialReason`) when some may
    /// be missing, e.g. the agent started after the pod. Assertions that need the whole history
    /// (undeclared peers) read it; an agent without `listenerCoverage` means it for listeners too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<PodCoverage>,
    /// Why the view is partial, e.g. "started after pod", "ring buffer overflow",
    /// "hostNetwork".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    /// Completeness of `listeners` alone: the listening sockets the pod has now. Complete
    /// when every one is known (the agent's /proc snapshot gives them completely, so a
    /// restarted agent's listeners are complete at once); Partial with
    /// `listenerPartialReason` otherwise. Absent (an older agent): `coverage` stands for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_coverage: Option<PodCoverage>,
    /// Why `listeners` is partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_partial_reason: Option<String>,
    /// The pod shares the node's network namespace: its sockets cannot be told apart from the
    /// host's, so node evidence does not speak for it (the Kubernetes reading stands).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_network: bool,
    /// Listening sockets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<Listener>,
    /// Established connections, aggregated by peer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<Connection>,
}

// Completeness of a pod's view. (No `///` doc: on an optional field the type's
// description would replace the field's in the CRD schema.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PodCoverage {
    /// Every socket of the pod was seen.
    Complete,
    /// Some sockets may be missing.
    Partial,
}

/// A listening socket.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    /// Transport protocol.
    pub protocol: Protocol,
    /// Local port.
    #[schemars(range(min = 0, max = 65535))]
    pub port: i32,
    /// Local address (`0.0.0.0`, `::` or a specific address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// Transport protocols.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Protocol {
    /// TCP.
    #[serde(rename = "TCP")]
    Tcp,
    /// UDP.
    #[serde(rename = "UDP")]
    Udp,
}

/// Established connections between the pod and one peer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// Who initiated the connections.
    pub direction: Direction,
    /// Transport protocol.
    pub protocol: Protocol,
    /// Peer IP address (resolved later by the operator to a Service or Pacto).
    #[serde(rename = "peerIP")]
    pub peer_ip: String,
    /// Peer port.
    #[schemars(range(min = 0, max = 65535))]
    pub peer_port: i32,
    /// First time such a connection was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<Time>,
    /// Last time such a connection was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<Time>,
    /// Number of connections seen.
    #[serde(default)]
    pub count: i64,
}

/// Why a node's agent evidence is stale ([`AgentFreshness::Stale`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staleness {
    /// The node has no `NodeRuntimeObservation`.
    NoObservation,
    /// The node has no Lease, or one never renewed.
    NoLease,
    /// Nothing heard for more than stale-after.
    Old,
}

/// How a node's agent evidence reads at one instant: the stale rule of
/// docs/design/observation.md#node-evidence, which the observer and the status-writer's
/// node-agent log both apply through [`agent_freshness`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentFreshness {
    /// Heard within stale-after, last at `heard` (the newer of the Lease's renewTime and the
    /// observation's lastPublished).
    Fresh {
        /// When the node was last heard from.
        heard: Timestamp,
    },
    /// Stale, and when the node was last heard from (`None`: never).
    Stale {
        /// Why.
        why: Staleness,
        /// When the node was last heard from: the Lease's renewTime without an observation,
        /// the observation's lastPublished without a renewed Lease, else the newer of both.
        heard: Option<Timestamp>,
    },
}

/// The stale rule (docs/design/observation.md#node-evidence): a node whose agent has no
/// observation (`last_published` is `None`; `Some(None)` is an observation never published) or
/// no renewed Lease (`lease_renewed` is `None`) is stale; otherwise it is heard at the newer of
/// both instants and stale when `now` is more than `stale_after` past it (exactly stale-after is
/// still fresh). Whether a fresh node's collection failed is the caller's next question.
pub fn agent_freshness(
    last_published: Option<Option<Timestamp>>,
    lease_renewed: Option<Timestamp>,
    now: Timestamp,
    stale_after: Duration,
) -> AgentFreshness {
    let Some(last_published) = last_published else {
        return AgentFreshness::Stale {
            why: Staleness::NoObservation,
            heard: lease_renewed,
        };
    };
    let Some(renewed) = lease_renewed else {
        return AgentFreshness::Stale {
            why: Staleness::NoLease,
            heard: last_published,
        };
    };
    let heard = last_published.map_or(renewed, |published| published.max(renewed));
    let limit = i128::try_from(stale_after.as_nanos()).unwrap_or(i128::MAX);
    if now.as_nanosecond() - heard.as_nanosecond() > limit {
        AgentFreshness::Stale {
            why: Staleness::Old,
            heard: Some(heard),
        }
    } else {
        AgentFreshness::Fresh { heard }
    }
}

/// The last instant at which evidence heard at `heard` is still fresh (`heard + stale_after`;
/// any later instant is stale); `None` beyond the representable range.
pub fn fresh_until(heard: Timestamp, stale_after: Duration) -> Option<Timestamp> {
    let nanos = heard
        .as_nanosecond()
        .checked_add(i128::try_from(stale_after.as_nanos()).ok()?)?;
    Timestamp::from_nanosecond(nanos).ok()
}

/// Connection direction relative to the pod.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The peer connected to the pod.
    Inbound,
    /// The pod connected to the peer.
    Outbound,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    const STALE_AFTER: Duration = Duration::from_secs(90);

    #[test]
    fn a_node_without_an_observation_or_a_renewed_lease_is_stale() {
        assert_eq!(
            agent_freshness(None, Some(at(10)), at(20), STALE_AFTER),
            AgentFreshness::Stale {
                why: Staleness::NoObservation,
                heard: Some(at(10)),
            }
        );
        assert_eq!(
            agent_freshness(Some(Some(at(15))), None, at(20), STALE_AFTER),
            AgentFreshness::Stale {
                why: Staleness::NoLease,
                heard: Some(at(15)),
            }
        );
        assert_eq!(
            agent_freshness(Some(None), None, at(20), STALE_AFTER),
            AgentFreshness::Stale {
                why: Staleness::NoLease,
                heard: None,
            }
        );
    }

    #[test]
    fn the_newer_instant_is_heard_and_exactly_stale_after_is_still_fresh() {
        // The Lease is newer than the publish, then the publish is newer than the Lease.
        for (published, renewed) in [(Some(at(0)), at(10)), (Some(at(10)), at(0)), (None, at(10))] {
            assert_eq!(
                agent_freshness(Some(published), Some(renewed), at(100), STALE_AFTER),
                AgentFreshness::Fresh { heard: at(10) },
                "{published:?} {renewed:?}"
            );
        }
        let just_past = Timestamp::from_nanosecond(at(100).as_nanosecond() + 1).unwrap();
        assert_eq!(
            agent_freshness(Some(Some(at(10))), Some(at(0)), just_past, STALE_AFTER),
            AgentFreshness::Stale {
                why: Staleness::Old,
                heard: Some(at(10)),
            }
        );
        assert_eq!(fresh_until(at(10), STALE_AFTER), Some(at(100)));
        // A heard instant in the future (clock skew) reads fresh.
        assert_eq!(
            agent_freshness(Some(Some(at(50))), Some(at(0)), at(20), STALE_AFTER),
            AgentFreshness::Fresh { heard: at(50) }
        );
    }

    #[test]
    fn report_stream_messages_are_bounded_on_a_character_boundary() {
        assert_eq!(bounded_message("refused"), "refused");
        let long = "é".repeat(REPORT_STREAM_MESSAGE_MAX + 10);
        let cut = bounded_message(&long);
        assert_eq!(cut.chars().count(), REPORT_STREAM_MESSAGE_MAX + 1);
        assert!(cut.ends_with('…'));
        let exact = "x".repeat(REPORT_STREAM_MESSAGE_MAX);
        assert_eq!(bounded_message(&exact), exact);
    }

    #[test]
    fn an_observation_without_a_report_stream_reads_as_before() {
        let status: NodeRuntimeObservationStatus =
            serde_json::from_value(serde_json::json!({"podCount": 0})).expect("parses");
        assert_eq!(status.report_stream, None);
        let refused = ReportStreamStatus {
            state: ReportStreamState::Refused,
            reason: Some("Unauthenticated".to_owned()),
            message: Some("no token".to_owned()),
            since: None,
        };
        let json = serde_json::to_value(&refused).expect("serializes");
        assert_eq!(json["state"], "Refused");
    }
}
