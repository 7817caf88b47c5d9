//! The `PactoRevision` custom resource (docs/design/status.md#pactorevision).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The contract version this revision records and where it came from.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "pacto.trianalab.io",
    version = "v1alpha1",
    kind = "PactoRevision",
    plural = "pactorevisions",
    singular = "pactorevision",
    namespaced,
    status = "PactoRevisionStatus",
    derive = "PartialEq",
    doc = "An immutable snapshot of one resolved contract version of a Pacto. Owned by (and garbage-collected with) its Pacto.",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Pacto","type":"string","jsonPath":".spec.pactoRef"}"#,
    printcolumn = r#"{"name":"Resolved","type":"boolean","jsonPath":".status.resolved"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PactoRevisionSpec {
    /// `service.version` of the contract (`unknown` when it has none).
    #[schemars(length(min = 1))]
    pub version: String,

    /// Where this contract version came from.
    pub source: RevisionSource,

    /// Name of the parent Pacto.
    #[schemars(length(min = 1))]
    pub pacto_ref: String,

    /// `service.name` of the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

/// The origin of a revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSource {
    /// The resolved OCI reference including its tag or digest (no `oci://`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<String>,

    /// The manifest digest (`sha256:…`) at resolution time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,

    /// True when the contract was given inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<bool>,
}

/// The observed state of a revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PactoRevisionStatus {
    /// The contract of this revision was resolved.
    pub resolved: bool,

    /// Full SHA-256 hex of the raw (pre-override) contract YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_hash: Option<String>,

    /// When the revision was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,

    /// The digest the revision mirror last saw for this revision's tag; TagOverwritten fires
    /// once per change of this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_digest: Option<String>,

    /// Declared for compatibility; not written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
