//! Findings, evidence refs and coverage (docs/design/evaluation.md#findings).

use pacto_contract::codes::{Category, FindingCode, Severity, category_for, severity_for};
use serde::{Deserialize, Serialize};

use crate::evidence::{EvidenceSet, Observation, SubjectRef};

/// The reference from a finding to the evidence behind it (docs/design/evaluation.md#findings).
///
/// `collector` and `detectedAt` are set only when the finding matched an observation;
/// a finding without a matched observation (e.g. `EVIDENCE_MISSING`) carries `source` and
/// `observedAt` only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvidenceRef {
    /// The EvidenceSet's source (`k8s`).
    pub source: String,
    /// The EvidenceSet's collection instant, RFC3339 at seconds precision.
    pub observed_at: String,
    /// The matched observation's collector, projected onto `k8s-observer`,
    /// `k8s-observer+ebpf` or `ebpf` (any `/<detail>` suffix such as upstream's
    /// `k8s-observer/metrics:<method>` is dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector: Option<String>,
    /// The matched observation's provenance time, RFC3339 at seconds precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<String>,
}

impl EvidenceRef {
    /// The ref for a finding with no matched observation.
    pub fn unmatched(evidence: &EvidenceSet) -> Self {
        Self {
            source: evidence.source.clone(),
            observed_at: evidence.observed_at.to_rfc3339_seconds(),
            collector: None,
            detected_at: None,
        }
    }

    /// The ref for a finding decided by `observation`.
    pub fn matched(evidence: &EvidenceSet, observation: &Observation) -> Self {
        Self {
            collector: Some(project_collector(&observation.provenance.collector).to_owned()),
            detected_at: Some(observation.provenance.detected_at.to_rfc3339_seconds()),
            ..Self::unmatched(evidence)
        }
    }
}

/// Projects a provenance collector onto the status vocabulary: everything from the first `/`
/// on is detail for logs (docs/design/evaluation.md#findings).
pub fn project_collector(collector: &str) -> &str {
    collector
        .split_once('/')
        .map_or(collector, |(head, _)| head)
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Finding {
    /// The finding code, e.g. `INTERFACE_ABSENT` (see [`FindingCode`]; structural findings may
    /// carry any code the validator emits).
    pub code: String,
    /// Severity.
    pub severity: Severity,
    /// Category; `None` (wire `""`) for unregistered codes.
    pub category: Option<Category>,
    /// What the finding is about, e.g. `{kind: "interface", name: "http-api"}`; rendered
    /// `"<kind>/<name>"` in status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<SubjectRef>,
    /// Where in the contract, e.g. `interfaces[name=http]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_path: Option<String>,
    /// Human-readable explanation.
    pub message: String,
    /// Evidence behind the finding; empty for structural findings.
    #[serde(default)]
    pub evidence_refs: Vec<EvidenceRef>,
}

impl Finding {
    /// A structural (contract-only) finding from a validation issue: category and severity come
    /// from the registry (`required=true`), no subject, no evidence refs.
    pub fn structural(code: &str, path: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            severity: severity_for(code, true),
            category: category_for(code, true),
            subject: None,
            contract_path: path.filter(|p| !p.is_empty()).map(str::to_owned),
            message: message.into(),
            evidence_refs: Vec::new(),
        }
    }

    /// The registered code, if this finding's code is known.
    pub fn finding_code(&self) -> Option<FindingCode> {
        self.code.parse().ok()
    }

    /// The status rendering of the subject, `"<kind>/<name>"`.
    pub fn subject_display(&self) -> Option<String> {
        self.subject
            .as_ref()
            .map(|s| format!("{}/{}", s.kind, s.name))
    }

    /// The upstream stored-record shape (docs/design/evaluation.md#findings): PascalCase keys, refs reduced to
    /// `{Source, ObservedAt}`, `null` for no refs.
    pub fn to_record(&self) -> RecordFinding {
        RecordFinding {
            code: self.code.clone(),
            severity: self.severity,
            category: self
                .category
                .map(Category::as_str)
                .unwrap_or_default()
                .to_owned(),
            subject: RecordSubject {
                kind: self
                    .subject
                    .as_ref()
                    .map(|s| s.kind.clone())
                    .unwrap_or_default(),
                name: self
                    .subject
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
            },
            contract_path: self.contract_path.clone().unwrap_or_default(),
            message: self.message.clone(),
            evidence_refs: if self.evidence_refs.is_empty() {
                None
            } else {
                Some(
                    self.evidence_refs
                        .iter()
                        .map(|r| RecordEvidenceRef {
                            source: r.source.clone(),
                            observed_at: r.observed_at.clone(),
                        })
                        .collect(),
                )
            },
        }
    }
}

/// Upstream's `finding.Finding` JSON (no JSON tags ⇒ PascalCase, nothing omitted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct RecordFinding {
    /// Code.
    pub code: String,
    /// Severity.
    pub severity: Severity,
    /// Category (`""` when unregistered).
    pub category: String,
    /// Subject.
    pub subject: RecordSubject,
    /// Contract path (`""` when none).
    pub contract_path: String,
    /// Message.
    pub message: String,
    /// Refs, `null` when none.
    pub evidence_refs: Option<Vec<RecordEvidenceRef>>,
}

/// Upstream's `finding.SubjectRef` JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct RecordSubject {
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// Upstream's `finding.EvidenceRef` JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct RecordEvidenceRef {
    /// Source.
    pub source: String,
    /// Observed-at, seconds precision.
    pub observed_at: String,
}

/// How many required assertions were evaluated with an Observed outcome (docs/design/evaluation.md#coverage). Explanatory
/// metadata; `evaluated <= required` always holds for engine output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coverage {
    /// Required assertions with an Observed observation.
    pub evaluated: u32,
    /// All required assertions.
    pub required: u32,
}

/// Severity counts (`status.summary`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Summary {
    /// `error` findings.
    pub error_count: u32,
    /// `warning` findings.
    pub warning_count: u32,
    /// `info` findings.
    pub info_count: u32,
    /// `unknown` findings.
    pub unknown_count: u32,
}

impl Summary {
    /// Counts findings by severity.
    pub fn of(findings: &[Finding]) -> Self {
        let mut summary = Self::default();
        for finding in findings {
            match finding.severity {
                Severity::Error => summary.error_count += 1,
                Severity::Warning => summary.warning_count += 1,
                Severity::Info => summary.info_count += 1,
                Severity::Unknown => summary.unknown_count += 1,
            }
        }
        summary
    }
}
