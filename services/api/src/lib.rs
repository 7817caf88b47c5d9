//! Kubernetes API types of the Pacto operator, group `pacto.trianalab.io`, version
//! `v1alpha1`: [`Pacto`], [`PactoRevision`] and [`NodeRuntimeObservation`], the condition
//! helpers of docs/design/status.md#conditions, and the CRD generator behind the `crdgen` binary.
//!
//! This crate depends only on kube, k8s-openapi, schemars and serde (plus serde_norway to
//! render YAML and thiserror for typed errors).

pub mod conditions;
pub mod crdgen;
pub mod labels;
mod node_observation;
mod pacto;
mod revision;
#[cfg(feature = "test-support")]
pub mod testing;

pub use node_observation::{
    AgentFreshness, CollectionState, CollectionStatus, Connection, Direction, KernelInfo, Listener,
    NodeRuntimeObservation, NodeRuntimeObservationSpec, NodeRuntimeObservationStatus, PodCoverage,
    PodObservation, Protocol, REPORT_STREAM_MESSAGE_MAX, ReportStreamState, ReportStreamStatus,
    Staleness, agent_freshness, bounded_message, fresh_until,
};
pub use pacto::{
    CapabilityInfo, ClaimState, ClaimStatus, ConfigBinding, ConfigBindingKind, ConfigFormat,
    ConfigurationInfo, ConfigurationOverride, ContractInfo, ContractOverrides, ContractRef,
    ContractStatus, DEFAULT_CHECK_INTERVAL_SECONDS, DependencyInfo, EvaluationCoverage,
    EvidenceRefStatus, FindingStatus, InterfaceBinding, InterfaceInfo, InterfaceType,
    MIN_CHECK_INTERVAL_SECONDS, ObservationWindow, ObservationWindowKind, ObservedRuntime,
    OwnerContact, OwnerInfo, Pacto, PactoKey, PactoSpec, PactoStatus, PolicyInfo,
    ReadinessRevision, ReadinessStatus, ResolutionPolicy, ResourceStatus, ResourcesStatus,
    SchemaProperty, Severity, Summary, TargetRef, UndeclaredPeer, UndeclaredPeerKind,
    ValidationIssue, ValidationResult, WorkloadKind, WorkloadRef, sort_observation_windows,
};
pub use revision::{PactoRevision, PactoRevisionSpec, PactoRevisionStatus, RevisionSource};
