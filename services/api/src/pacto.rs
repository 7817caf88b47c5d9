//! The `Pacto` custom resource (docs/design/status.md#the-pacto-api).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The default `spec.checkIntervalSeconds`.
pub const DEFAULT_CHECK_INTERVAL_SECONDS: i32 = 300;
/// The minimum `spec.checkIntervalSeconds`.
pub const MIN_CHECK_INTERVAL_SECONDS: i32 = 30;

/// A Pacto's identity in the cluster, `(namespace, name)`: the key of every per-Pacto map in the
/// services.
pub type PactoKey = (String, String);

/// What to check: the contract source, the runtime target, overrides and the check interval.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "pacto.trianalab.io",
    version = "v1alpha1",
    kind = "Pacto",
    plural = "pactos",
    singular = "pacto",
    namespaced,
    status = "PactoStatus",
    derive = "PartialEq",
    doc = "A Pacto binds a service contract (inline YAML or an OCI bundle) to an optional runtime target and reports whether the running workload matches the contract.",
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.contractStatus"}"#,
    printcolumn = r#"{"name":"Service","type":"string","jsonPath":".spec.target.serviceName"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.contractVersion"}"#,
    printcolumn = r#"{"name":"Errors","type":"integer","jsonPath":".status.summary.errorCount"}"#,
    printcolumn = r#"{"name":"Warnings","type":"integer","jsonPath":".status.summary.warningCount"}"#,
    printcolumn = r#"{"name":"Last Reconciled","type":"date","jsonPath":".status.lastReconciledAt"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PactoSpec {
    /// Where the contract comes from: inline YAML or an OCI reference.
    pub contract_ref: ContractRef,

    /// The runtime resources to observe. Omitted or empty makes this a reference-only Pacto
    /// (validated, never observed; status Reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetRef>,

    /// Environment-specific overrides merged into the resolved contract before validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<ContractOverrides>,

    /// How often, in seconds, the contract is re-checked. Defaults to 300; minimum 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30), extend("default" = 300))]
    pub check_interval_seconds: Option<i32>,
}

impl PactoSpec {
    /// Reference-only: no service name and no workload reference.
    pub fn is_reference(&self) -> bool {
        self.target.as_ref().is_none_or(|t| {
            t.service_name.as_deref().unwrap_or_default().is_empty() && t.workload_ref.is_none()
        })
    }

    /// The requeue interval in seconds: the declared value, or 300 when unset or ≤ 0.
    pub fn check_interval_seconds(&self) -> i32 {
        match self.check_interval_seconds {
            Some(v) if v > 0 => v,
            _ => DEFAULT_CHECK_INTERVAL_SECONDS,
        }
    }

    /// The workload to observe (see [`TargetRef::resolved_workload`]); `None` without
    /// a target.
    pub fn resolved_workload(&self) -> Option<(String, WorkloadKind)> {
        self.target.as_ref()?.resolved_workload()
    }

    /// Whether the target's workload kind is explicit (see [`TargetRef::workload_explicit`]).
    pub fn workload_explicit(&self) -> bool {
        self.target
            .as_ref()
            .is_some_and(TargetRef::workload_explicit)
    }
}

/// Where to find the contract. If both `inline` and `oci` are set, `inline` wins; neither set
/// makes the contract Invalid.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractRef {
    /// OCI reference of the contract bundle. Unversioned (`ghcr.io/org/x`) tracks the highest
    /// semver tag; tagged (`…:1.2.3`) pins a tag; digest (`…@sha256:…`) is immutable. An
    /// optional `oci://` prefix is tolerated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<String>,

    /// The contract YAML itself (development and tests). Wins over `oci` when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,

    /// Name of a Secret in this namespace holding registry credentials: a
    /// kubernetes.io/dockerconfigjson Secret, or an Opaque Secret with `token`, or with
    /// `username` and `password` (an optional `registry` key binds them to one registry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<String>,
}

/// The Kubernetes resources whose runtime state is checked against the contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// Name of the Service to observe; also the default workload name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,

    /// The workload to observe. Omitted: name = serviceName, kind = Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_ref: Option<WorkloadRef>,

    /// Maps contract interfaces to the Service ports that serve them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interface_bindings: Vec<InterfaceBinding>,

    /// Maps contract configurations to the ConfigMaps or Secrets backing them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_bindings: Vec<ConfigBinding>,
}

impl TargetRef {
    /// The workload name and kind to observe, the one implementation
    /// used by every service. A workloadRef gives its name and kind (no kind ⇒ Deployment);
    /// without a workloadRef, a non-empty serviceName names a Deployment. A workloadRef with
    /// an empty name resolves no workload (and does not fall back to the serviceName): the
    /// workload and persistence dimensions need a resolved workload name.
    pub fn resolved_workload(&self) -> Option<(String, WorkloadKind)> {
        match &self.workload_ref {
            Some(w) if w.name.is_empty() => None,
            Some(w) => Some((w.name.clone(), w.kind.unwrap_or(WorkloadKind::Deployment))),
            None => self
                .service_name
                .as_deref()
                .filter(|name| !name.is_empty())
                .map(|name| (name.to_owned(), WorkloadKind::Deployment)),
        }
    }

    /// An explicit workload kind: a workloadRef with a non-empty name and a kind, the only
    /// case in which `WORKLOAD_MISMATCH` is assertable.
    pub fn workload_explicit(&self) -> bool {
        self.workload_ref
            .as_ref()
            .is_some_and(|w| !w.name.is_empty() && w.kind.is_some())
    }
}

/// A workload by name and kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRef {
    /// Name of the workload in this namespace.
    pub name: String,

    /// Kind of the workload. No default: an empty kind is read as Deployment, but
    /// WORKLOAD_MISMATCH is reported only when both name and kind were set explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<WorkloadKind>,
}

// The workload kinds a Pacto can target. (No `///` doc: on an optional field the type's
// description would replace the field's in the CRD schema.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum WorkloadKind {
    /// apps/v1 Deployment (observed type `service`).
    Deployment,
    /// apps/v1 StatefulSet (observed type `service`).
    StatefulSet,
    /// apps/v1 ReplicaSet (observed type `service`).
    ReplicaSet,
    /// batch/v1 Job (observed type `job`).
    Job,
    /// batch/v1 CronJob (observed type `scheduled`).
    CronJob,
}

impl WorkloadKind {
    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
            Self::ReplicaSet => "ReplicaSet",
            Self::Job => "Job",
            Self::CronJob => "CronJob",
        }
    }
}

/// Maps a contract interface to the Service port that serves it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceBinding {
    /// The contract's `interfaces[].name`.
    pub interface: String,

    /// The Service port, by name or by number.
    pub service_port: IntOrString,
}

/// Maps a contract configuration to the ConfigMap or Secret backing it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigBinding {
    /// The contract's `configurations[].name`.
    pub configuration: String,

    /// Kind of the backing object.
    pub kind: ConfigBindingKind,

    /// Name of the ConfigMap or Secret in this namespace.
    pub name: String,

    /// The key whose value is decoded and validated against the configuration schema
    /// (ConfigMaps only; omit for an existence-only check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,

    /// Format of the value at `key`; needed with `key` for ConfigMap conformance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<ConfigFormat>,
}

/// Kind of object backing a configuration.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConfigBindingKind {
    /// A ConfigMap (existence, and conformance with `key` + `format`).
    ConfigMap,
    /// A Secret (existence only; values are never read).
    Secret,
}

// Format of a bound configuration value. (No `///` doc: on an optional field the type's
// description would replace the field's in the CRD schema.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConfigFormat {
    /// YAML document.
    Yaml,
    /// JSON document.
    Json,
}

/// Partial overrides applied on top of the resolved contract (the artifact is never mutated).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractOverrides {
    /// Per-configuration value overrides, matched by name; the override wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<ConfigurationOverride>,
}

/// Value overrides for one named configuration.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationOverride {
    /// Must equal a `configurations[].name` of the contract.
    #[schemars(length(min = 1))]
    pub name: String,

    /// Values merged into the configuration's `values` (string values; at least one).
    #[schemars(extend("minProperties" = 1))]
    pub values: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------

/// The observed state of a Pacto: the verdict, the contract as resolved, the findings and the
/// conditions. Written only by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PactoStatus {
    /// The contract verdict: Compliant, Warning, NonCompliant, Reference, Unknown or Invalid
    /// (NotEvaluated is reserved and never written). Contract fidelity, not runtime health.
    /// Empty until the first reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_status: Option<ContractStatus>,

    /// Required assertions evaluated with an Observed outcome vs. all required assertions.
    /// Explanatory only; set on the targeted path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation_coverage: Option<EvaluationCoverage>,

    /// Negative-observation streaks used for time-based stabilization, sorted by
    /// (kind, subject). Operator-owned state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observation_windows: Vec<ObservationWindow>,

    /// How the OCI reference is resolved: Latest (unversioned), PinnedTag or PinnedDigest.
    /// Empty for inline contracts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_policy: Option<ResolutionPolicy>,

    /// Finding counts by severity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,

    /// `service.version` of the effective contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,

    /// Metadata of the effective contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<ContractInfo>,

    /// Validation result of the effective contract. Absent when the contract could not be
    /// obtained (validity undetermined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationResult>,

    /// One finding per problem: structural warnings first, then runtime findings in the order
    /// interfaces, capabilities, dependencies, configurations, workload, persistence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingStatus>,

    /// How many findings there were, when `findings` was capped (its last entry is then a
    /// LIST_TRUNCATED marker). Absent when every finding is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_findings: Option<u64>,

    /// Legacy existence flags of the target Service and workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesStatus>,

    /// Interfaces declared by the contract.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceInfo>,

    /// Capabilities declared by the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<CapabilityInfo>>,

    /// Configurations declared by the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configurations: Option<Vec<ConfigurationInfo>>,

    /// Dependencies declared by the contract.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<DependencyInfo>,

    /// Policy sources declared by the contract (metadata only; ref policies are not resolved
    /// at runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<PolicyInfo>>,

    /// A lean view of the target workload as observed; only when the workload exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_runtime: Option<ObservedRuntime>,

    /// The readiness assessment; absent when the contract declares no `readiness:`. A separate
    /// dimension that never changes contractStatus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ReadinessStatus>,

    /// The contract's `metadata` values, stringified.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,

    /// ContractValid, RuntimeObserved and ReadinessSatisfied. Sticky: lastTransitionTime moves
    /// only when status flips.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Name of the PactoRevision of the current contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,

    /// When the last reconcile finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconciled_at: Option<Time>,

    /// metadata.generation of the spec the last status write was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

// The contract verdict. (No `///` doc: on an optional field the type's
// description would replace the field's in the CRD schema.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ContractStatus {
    /// Every required assertion observed and satisfied.
    Compliant,
    /// Only warnings (optional assertions violated or structural warnings).
    Warning,
    /// At least one confirmed violation of a required assertion.
    NonCompliant,
    /// No target: validated, never observed.
    Reference,
    /// A required assertion could not be evaluated, or the contract could not be obtained.
    Unknown,
    /// The contract is structurally wrong or could not be parsed.
    Invalid,
    /// Reserved; never written.
    NotEvaluated,
}

impl ContractStatus {
    /// All values.
    pub const ALL: [Self; 7] = [
        Self::Compliant,
        Self::Warning,
        Self::NonCompliant,
        Self::Reference,
        Self::Unknown,
        Self::Invalid,
        Self::NotEvaluated,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compliant => "Compliant",
            Self::Warning => "Warning",
            Self::NonCompliant => "NonCompliant",
            Self::Reference => "Reference",
            Self::Unknown => "Unknown",
            Self::Invalid => "Invalid",
            Self::NotEvaluated => "NotEvaluated",
        }
    }
}

// How an OCI reference is resolved. (No `///` doc: on an optional field the type's
// description would replace the field's in the CRD schema.)
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ResolutionPolicy {
    /// Unversioned reference: the highest semver tag, re-resolved every interval.
    Latest,
    /// Explicit tag, used as is (tags can be force-pushed).
    PinnedTag,
    /// Explicit digest: immutable.
    PinnedDigest,
}

/// Coverage of required assertions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationCoverage {
    /// Required assertions with an Observed observation.
    pub evaluated: i32,
    /// All required assertions the contract declares.
    pub required: i32,
}

/// A persisted negative-observation streak of one assertion.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservationWindow {
    /// The assertion dimension.
    pub kind: ObservationWindowKind,
    /// The assertion identity: interface, dependency or configuration name, or capability key.
    pub subject: String,
    /// When the current negative streak began.
    pub first_observed_negative_at: Time,
}

/// Dimensions with stabilization windows.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ObservationWindowKind {
    /// An interface (zero Ready endpoints).
    Interface,
    /// A dependency (unreachable).
    Dependency,
    /// A configuration (bound object not found).
    Configuration,
    /// A capability (active probe answered 404).
    Capability,
}

impl ObservationWindowKind {
    /// The wire name (`interface`, `dependency`, `configuration`, `capability`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interface => "interface",
            Self::Dependency => "dependency",
            Self::Configuration => "configuration",
            Self::Capability => "capability",
        }
    }
}

/// Sorts windows by (kind, subject) on their wire spelling, so an unchanged state always
/// serialises identically (docs/design/observation.md#stabilization-windows).
pub fn sort_observation_windows(windows: &mut [ObservationWindow]) {
    windows.sort_by(|a, b| {
        (a.kind.as_str(), a.subject.as_str()).cmp(&(b.kind.as_str(), b.subject.as_str()))
    });
}

/// Finding counts by severity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Findings with severity error.
    pub error_count: i32,
    /// Findings with severity warning.
    pub warning_count: i32,
    /// Findings with severity info.
    pub info_count: i32,
    /// Findings with severity unknown (a required assertion could not be evaluated).
    pub unknown_count: i32,
}

/// Metadata of the effective contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractInfo {
    /// `service.name`.
    pub service_name: String,
    /// `service.version`.
    pub version: String,
    /// Structured ownership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<OwnerInfo>,
    /// Display owner: the team, else the DRI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_display: Option<String>,
    /// The resolved OCI reference without `oci://` (with tag or digest); empty for inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_ref: Option<String>,
}

/// Service ownership (at least one field set).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct OwnerInfo {
    /// Owning team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Directly responsible individual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dri: Option<String>,
    /// Contact points.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contacts: Vec<OwnerContact>,
}

/// A contact point.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnerContact {
    /// Channel type, e.g. email, chat, oncall.
    #[serde(rename = "type")]
    pub contact_type: String,
    /// Address or identifier.
    pub value: String,
    /// What the contact is for, e.g. escalation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
}

/// Validation result of the effective contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationResult {
    /// No validation errors.
    pub valid: bool,
    /// Validation errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ValidationIssue>,
    /// Validation warnings (also listed as findings on the targeted path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<ValidationIssue>,
    /// How many errors validation reported, when `errors` was capped (its last entry is then a
    /// LIST_TRUNCATED marker). Absent when every error is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_errors: Option<u64>,
    /// How many warnings validation reported, when `warnings` was capped. Absent when every
    /// warning is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_warnings: Option<u64>,
}

/// One validation error or warning.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationIssue {
    /// Machine-readable code, e.g. SCHEMA_VIOLATION.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Path of the offending contract field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Human-readable description.
    pub message: String,
}

/// One finding of the engine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindingStatus {
    /// Stable finding code, e.g. INTERFACE_ABSENT, EVIDENCE_MISSING.
    pub code: String,
    /// error (violation of a required assertion), warning (optional assertion or structural
    /// warning), info, or unknown (could not be evaluated).
    pub severity: Severity,
    /// Group of related codes, e.g. RuntimeDrift, Inconclusive.
    pub category: String,
    /// What the finding is about, `<kind>/<name>`, e.g. `interface/http-api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Path of the contract field, e.g. `interfaces[name=http]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_path: Option<String>,
    /// Human-readable description.
    pub message: String,
    /// The evidence behind the finding; absent for contract-only findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_refs: Vec<EvidenceRefStatus>,
}

/// Finding severity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A confirmed violation of a required assertion, or a structural error.
    Error,
    /// A violation of an optional assertion, or a structural warning.
    Warning,
    /// Informational.
    Info,
    /// A required assertion could not be evaluated.
    Unknown,
}

impl Severity {
    /// All values.
    pub const ALL: [Self; 4] = [Self::Error, Self::Warning, Self::Info, Self::Unknown];
}

/// Which reading a finding came from. Dates the reading; there is nothing to fetch.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceRefStatus {
    /// The evidence source (`k8s`).
    pub source: String,
    /// When the evidence set was collected (RFC3339, seconds).
    pub observed_at: String,
    /// Who decided the result: k8s-observer (Kubernetes API alone), k8s-observer+ebpf (node
    /// agent evidence decided or qualified it) or ebpf (only the kernel saw it). Absent when
    /// no observation matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector: Option<String>,
    /// When the matched observation was made (RFC3339, seconds). Absent when no observation
    /// matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<String>,
}

/// Legacy existence flags.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesStatus {
    /// The target Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ResourceStatus>,
    /// The target workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<ResourceStatus>,
}

/// Existence of one resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// Resource name.
    pub name: String,
    /// Resource kind (workloads only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Whether the resource was found.
    pub exists: bool,
}

/// An interface declared by the contract.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceInfo {
    /// Interface name.
    pub name: String,
    /// Interface type.
    #[serde(rename = "type")]
    pub interface_type: InterfaceType,
    /// Bundle-relative path of the interface specification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// Declared visibility: public or internal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<String>,
}

/// Interface specification types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InterfaceType {
    /// OpenAPI (HTTP).
    Openapi,
    /// AsyncAPI (events).
    Asyncapi,
    /// gRPC.
    Grpc,
}

/// A capability declared by the contract.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityInfo {
    /// Capability type: health, metrics or extension.
    #[serde(rename = "type")]
    pub capability_type: String,
    /// The extension's namespaced ref.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
}

/// A configuration declared by the contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationInfo {
    /// Configuration name.
    pub name: String,
    /// Whether a JSON Schema is bundled.
    pub has_schema: bool,
    /// External OCI reference of the schema, if used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// Declared value keys, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value_keys: Vec<String>,
    /// Keys whose values are `secret://` references, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_keys: Vec<String>,
    /// Keys overridden by spec.overrides, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden_keys: Vec<String>,
    /// Keys with type and value, from literal values or else the bundled schema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<SchemaProperty>,
}

/// A flattened configuration or policy key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaProperty {
    /// Key in dot notation.
    pub key: String,
    /// The literal value, or the schema default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// JSON Schema type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#type: Option<String>,
}

/// A dependency declared by the contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyInfo {
    /// Dependency name.
    pub name: String,
    /// OCI reference of the dependency's contract.
    pub r#ref: String,
    /// Whether the dependency is mandatory.
    pub required: bool,
    /// Semver range the dependency's version must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
}

/// A policy source declared by the contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    /// Policy name.
    pub name: String,
    /// Whether a policy schema file is bundled.
    pub has_schema: bool,
    /// Bundle-relative path of the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// External OCI reference of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// The schema's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The schema's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The schema's keys with type and default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<SchemaProperty>,
}

/// A lean view of the target workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedRuntime {
    /// The workload's Kubernetes kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_kind: Option<String>,
    /// Deployment strategy (RollingUpdate, Recreate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_strategy: Option<String>,
    /// StatefulSet pod management policy (OrderedReady, Parallel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_management_policy: Option<String>,
    /// terminationGracePeriodSeconds of the pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Container images of the pod template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_images: Vec<String>,
    /// The pod template uses PersistentVolumeClaims (or volumeClaimTemplates).
    #[serde(rename = "hasPVC")]
    pub has_pvc: bool,
    /// The pod template uses emptyDir volumes.
    pub has_empty_dir: bool,
    /// initialDelaySeconds of the first container's readiness probe, else its liveness probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_probe_initial_delay_seconds: Option<i32>,
    /// Outbound peers of the target's pods that the contract does not declare, seen in fresh,
    /// complete node-agent evidence (docs/design/observation.md#undeclared-peers). Observations
    /// only: never findings, never part of the verdict. Absent when node evidence says nothing
    /// (off, stale, failed or partial); empty when it is complete and shows none. At most 100
    /// entries, then one `LIST_TRUNCATED` entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undeclared_peers: Option<Vec<UndeclaredPeer>>,
    /// How many undeclared peers there are, when `undeclaredPeers` was capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_undeclared_peers: Option<u64>,
}

/// What an undeclared peer resolved to.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum UndeclaredPeerKind {
    /// A Service that a Pacto targets; the name is the Pacto's.
    Pacto,
    /// A Service no Pacto targets.
    Service,
    /// An address no Service resolves.
    #[serde(rename = "IP")]
    Ip,
    /// The entry closing a capped list; its name says how many were left out.
    #[serde(rename = "LIST_TRUNCATED")]
    ListTruncated,
}

/// One outbound peer the contract does not declare.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UndeclaredPeer {
    /// What the peer resolved to.
    pub kind: UndeclaredPeerKind,
    /// `<namespace>/<name>` of the Pacto or Service, the address of an IP, or the overflow text.
    pub name: String,
    /// The peer TCP ports connected to, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u32>,
}

/// The readiness assessment (docs/design/contract.md#readiness).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessStatus {
    /// Percentage of in-scope weight earned, 0–100.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub score: i32,
    /// The gate threshold: the declared minScore, or 100.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub min_score: i32,
    /// Not expired and score ≥ minScore.
    #[serde(default)]
    pub passing: bool,
    /// Sum of non-deferred claim weights.
    #[serde(default)]
    pub total_weight: i32,
    /// Weight earned toward the score.
    #[serde(default)]
    pub earned_weight: i32,
    /// Expiry date of the assessment (YYYY-MM-DD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// The assessment is past its expiry date (it then scores 0).
    #[serde(default)]
    pub expired: bool,
    /// Whole days until expiry; absent when expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days_remaining: Option<i32>,
    /// Claims declared done.
    #[serde(default)]
    pub done_count: i32,
    /// Claims declared partial.
    #[serde(default)]
    pub partial_count: i32,
    /// Claims declared not-done.
    #[serde(default)]
    pub not_done_count: i32,
    /// Claims declared deferred (excluded from scoring).
    #[serde(default)]
    pub deferred_count: i32,
    /// The declared assessment history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<ReadinessRevision>,
    /// Per-claim results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimStatus>,
}

/// One entry of the declared readiness history.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessRevision {
    /// Assessment date (YYYY-MM-DD).
    pub date: String,
    /// Service version assessed.
    pub version: String,
    /// Who assessed it.
    pub author: String,
    /// What changed or was observed.
    pub description: String,
}

/// The derived state of one readiness claim.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatus {
    /// Claim identifier, e.g. runbook.
    pub id: String,
    /// Kind of evidence pointer: url, document, ticket, report, artifact, identifier, other.
    #[serde(rename = "type")]
    pub claim_type: String,
    /// Domain category, e.g. security, observability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Declared completion status.
    pub status: ClaimState,
    /// Pointer to the evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// Human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Declared contribution to the score (0–100).
    pub weight: i32,
    /// Weight this claim earned.
    #[serde(default)]
    pub earned_weight: i32,
    /// Excluded from scoring (deferred).
    #[serde(default)]
    pub excluded: bool,
}

/// Declared completion status of a readiness claim.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ClaimState {
    /// Complete: earns its full weight.
    Done,
    /// Partly complete: earns part of its weight.
    Partial,
    /// Not complete: earns nothing.
    NotDone,
    /// Deferred: excluded from scoring.
    Deferred,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(service: Option<&str>, name: &str, kind: Option<WorkloadKind>) -> TargetRef {
        TargetRef {
            service_name: service.map(str::to_owned),
            workload_ref: Some(WorkloadRef {
                name: name.to_owned(),
                kind,
            }),
            ..TargetRef::default()
        }
    }

    #[test]
    fn a_workload_ref_with_an_empty_name_resolves_no_workload() {
        for service in [None, Some(""), Some("orders")] {
            for kind in [None, Some(WorkloadKind::StatefulSet)] {
                let t = target(service, "", kind);
                assert_eq!(t.resolved_workload(), None, "{service:?} {kind:?}");
                assert!(!t.workload_explicit(), "{service:?} {kind:?}");
            }
        }
        let spec: PactoSpec = serde_json::from_value(serde_json::json!({
            "contractRef": {"inline": "pactoVersion: \"2.0\""},
            "target": {"serviceName": "orders", "workloadRef": {"name": "", "kind": "Job"}}
        }))
        .expect("spec");
        assert_eq!(spec.resolved_workload(), None);
        assert!(!spec.workload_explicit());
        assert!(!spec.is_reference(), "a workloadRef still makes a target");
    }

    #[test]
    fn resolved_workload_prefers_the_workload_ref_then_the_service() {
        let t = target(Some("orders"), "orders-db", Some(WorkloadKind::StatefulSet));
        assert_eq!(
            t.resolved_workload(),
            Some(("orders-db".into(), WorkloadKind::StatefulSet))
        );
        assert!(t.workload_explicit());
        let t = target(None, "batch", None);
        assert_eq!(
            t.resolved_workload(),
            Some(("batch".into(), WorkloadKind::Deployment))
        );
        assert!(!t.workload_explicit());
        let service_only = TargetRef {
            service_name: Some("orders".into()),
            ..TargetRef::default()
        };
        assert_eq!(
            service_only.resolved_workload(),
            Some(("orders".into(), WorkloadKind::Deployment))
        );
        assert_eq!(TargetRef::default().resolved_workload(), None);
    }
}
