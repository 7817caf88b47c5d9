//! Conversions between wire messages and domain types: here those of `pacto-engine` and
//! `pacto-contract`, in [`crd`] those of the `Pacto` custom resource (`pacto-api`).
//!
//! `*_from_proto` functions validate and name the offending field on failure (a proto field path
//! such as `evidence.observations[3].outcome`) with the one [`FieldError`] type; `*_to_proto`
//! functions are infallible.

use pacto_contract::{model::Contract, readiness};
use pacto_engine as engine;
use tonic::Status;

use crate::{common, evaluator};

#[cfg(feature = "crd")]
pub mod crd;

mod vocab;
#[cfg(feature = "crd")]
pub use vocab::{severity_from_crd, severity_to_crd, status_from_crd, status_to_crd};
pub use vocab::{severity_from_proto, severity_to_proto, status_from_proto, status_to_proto};

/// A field of a wire message (a request, or a backend's answer) that is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Proto field path, e.g. `evidence.observations[3].outcome`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// An error on `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    fn required(field: impl Into<String>) -> Self {
        Self::new(field, "required")
    }
}

impl From<FieldError> for Status {
    fn from(error: FieldError) -> Self {
        Status::invalid_argument(error.to_string())
    }
}

fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

fn require<'a, T>(value: Option<&'a T>, field: &str) -> Result<&'a T, FieldError> {
    value.ok_or_else(|| FieldError::required(field))
}

// ---------------------------------------------------------------------------------------------
// Timestamps

/// A wire timestamp as a domain timestamp (UTC).
pub fn timestamp_from_proto(
    value: &prost_types::Timestamp,
    field: &str,
) -> Result<engine::Timestamp, FieldError> {
    let nanos = u32::try_from(value.nanos)
        .ok()
        .filter(|nanos| *nanos < 1_000_000_000)
        .ok_or_else(|| {
            FieldError::new(
                child(field, "nanos"),
                format!("{} is outside 0..999999999", value.nanos),
            )
        })?;
    engine::Timestamp::from_unix(value.seconds, nanos).ok_or_else(|| {
        FieldError::new(
            child(field, "seconds"),
            format!("{} is out of range", value.seconds),
        )
    })
}

/// A domain timestamp on the wire (the offset is dropped; the instant is kept).
pub fn timestamp_to_proto(value: &engine::Timestamp) -> prost_types::Timestamp {
    let (seconds, nanos) = value.unix_parts();
    prost_types::Timestamp {
        seconds,
        nanos: i32::try_from(nanos).unwrap_or(999_999_999),
    }
}

// ---------------------------------------------------------------------------------------------
// Evidence

fn kind_from_proto(kind: common::ObservationKind) -> Option<engine::ObservationKind> {
    use common::ObservationKind as P;
    use engine::ObservationKind as D;
    match kind {
        P::Unspecified => None,
        P::CapabilityObserved => Some(D::CapabilityObserved),
        P::InterfaceObserved => Some(D::InterfaceObserved),
        P::DependencyReachable => Some(D::DependencyReachable),
        P::ConfigurationPresent => Some(D::ConfigurationPresent),
        P::WorkloadObserved => Some(D::WorkloadObserved),
        P::PersistenceObserved => Some(D::PersistenceObserved),
    }
}

fn kind_to_proto(kind: engine::ObservationKind) -> common::ObservationKind {
    use common::ObservationKind as P;
    use engine::ObservationKind as D;
    match kind {
        D::CapabilityObserved => P::CapabilityObserved,
        D::InterfaceObserved => P::InterfaceObserved,
        D::DependencyReachable => P::DependencyReachable,
        D::ConfigurationPresent => P::ConfigurationPresent,
        D::WorkloadObserved => P::WorkloadObserved,
        D::PersistenceObserved => P::PersistenceObserved,
    }
}

fn outcome_kind_from_proto(outcome: common::Outcome) -> Option<engine::OutcomeKind> {
    use common::Outcome as P;
    use engine::OutcomeKind as D;
    match outcome {
        P::Unspecified => None,
        P::Observed => Some(D::Observed),
        P::Unsupported => Some(D::Unsupported),
        P::Failed => Some(D::Failed),
        P::Stale => Some(D::Stale),
        P::Insufficient => Some(D::Insufficient),
    }
}

fn outcome_to_proto(outcome: engine::OutcomeKind) -> common::Outcome {
    use common::Outcome as P;
    use engine::OutcomeKind as D;
    match outcome {
        D::Observed => P::Observed,
        D::Unsupported => P::Unsupported,
        D::Failed => P::Failed,
        D::Stale => P::Stale,
        D::Insufficient => P::Insufficient,
    }
}

/// The oneof field name of a payload.
fn value_field(value: &common::observation::Value) -> &'static str {
    use common::observation::Value as P;
    match value {
        P::Capability(_) => "capability",
        P::Interface(_) => "interface",
        P::Dependency(_) => "dependency",
        P::Configuration(_) => "configuration",
        P::Workload(_) => "workload",
        P::Persistence(_) => "persistence",
    }
}

fn value_from_proto(value: &common::observation::Value) -> engine::Value {
    use common::observation::Value as P;
    use engine::Value as D;
    match value {
        P::Capability(v) => D::Capability(engine::CapabilityValue { present: v.present }),
        P::Interface(v) => D::Interface(engine::InterfaceValue {
            interface_type: v.r#type.clone(),
            present: v.present,
        }),
        P::Dependency(v) => D::Dependency(engine::DependencyValue {
            reachable: v.reachable,
        }),
        P::Configuration(v) => D::Configuration(engine::ConfigurationValue {
            present: v.present,
            conformant: v.conformant,
        }),
        P::Workload(v) => D::Workload(engine::WorkloadValue {
            workload_type: v.r#type.clone(),
        }),
        P::Persistence(v) => D::Persistence(engine::PersistenceValue { durable: v.durable }),
    }
}

fn value_to_proto(value: &engine::Value) -> common::observation::Value {
    use common::observation::Value as P;
    use engine::Value as D;
    match value {
        D::Capability(v) => P::Capability(common::CapabilityValue { present: v.present }),
        D::Interface(v) => P::Interface(common::InterfaceValue {
            r#type: v.interface_type.clone(),
            present: v.present,
        }),
        D::Dependency(v) => P::Dependency(common::DependencyValue {
            reachable: v.reachable,
        }),
        D::Configuration(v) => P::Configuration(common::ConfigurationValue {
            present: v.present,
            conformant: v.conformant,
        }),
        D::Workload(v) => P::Workload(common::WorkloadValue {
            r#type: v.workload_type.clone(),
        }),
        D::Persistence(v) => P::Persistence(common::PersistenceValue { durable: v.durable }),
    }
}

fn subject_from_proto(subject: &common::SubjectRef) -> engine::SubjectRef {
    engine::SubjectRef::new(subject.kind.clone(), subject.name.clone())
}

fn subject_to_proto(subject: &engine::SubjectRef) -> common::SubjectRef {
    common::SubjectRef {
        kind: subject.kind.clone(),
        name: subject.name.clone(),
    }
}

fn observation_from_proto(
    observation: &common::Observation,
    path: &str,
) -> Result<engine::Observation, FieldError> {
    let kind_field = child(path, "kind");
    let kind = common::ObservationKind::try_from(observation.kind)
        .map_err(|_| FieldError::new(&kind_field, format!("unknown value {}", observation.kind)))?;
    let kind = kind_from_proto(kind).ok_or_else(|| FieldError::new(&kind_field, "must be set"))?;

    let outcome_field = child(path, "outcome");
    let outcome = common::Outcome::try_from(observation.outcome).map_err(|_| {
        FieldError::new(
            &outcome_field,
            format!("unknown value {}", observation.outcome),
        )
    })?;
    let outcome = outcome_kind_from_proto(outcome)
        .ok_or_else(|| FieldError::new(&outcome_field, "must be set"))?;

    let subject = require(observation.subject.as_ref(), &child(path, "subject"))?;
    let provenance_field = child(path, "provenance");
    let provenance = require(observation.provenance.as_ref(), &provenance_field)?;
    let detected_field = child(&provenance_field, "detected_at");
    let detected_at = timestamp_from_proto(
        require(provenance.detected_at.as_ref(), &detected_field)?,
        &detected_field,
    )?;

    let outcome = match (outcome, observation.value.as_ref()) {
        (engine::OutcomeKind::Observed, None) => engine::Outcome::Observed(kind.zero_value()),
        (engine::OutcomeKind::Observed, Some(value)) => {
            let decoded = value_from_proto(value);
            if decoded.kind() != kind {
                return Err(FieldError::new(
                    child(path, value_field(value)),
                    format!(
                        "a {} payload does not belong to a {} observation",
                        value_field(value),
                        kind_to_proto(kind).as_str_name()
                    ),
                ));
            }
            engine::Outcome::Observed(decoded)
        }
        (other, Some(value)) => {
            return Err(FieldError::new(
                child(path, value_field(value)),
                format!(
                    "a payload is only allowed with OUTCOME_OBSERVED, not {}",
                    outcome_to_proto(other).as_str_name()
                ),
            ));
        }
        (other, None) => engine::Outcome::without_value(other)
            .ok_or_else(|| FieldError::new(&outcome_field, "unsupported outcome"))?,
    };
    Ok(engine::Observation {
        kind,
        subject: subject_from_proto(subject),
        outcome,
        provenance: engine::Provenance::new(provenance.collector.clone(), detected_at),
        detail: Some(observation.detail.clone()).filter(|d| !d.is_empty()),
    })
}

/// Converts an engine validation path (`Observations[3].provenance.detectedAt`, `ContractRef`)
/// into the proto field path under `prefix` (`evidence.observations[3].provenance.detected_at`).
fn engine_path_to_proto(prefix: &str, path: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + path.len() + 8);
    out.push_str(prefix);
    if !prefix.is_empty() && !path.is_empty() {
        out.push('.');
    }
    let mut segment_start = true;
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            if !segment_start {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
        segment_start = c == '.';
    }
    out
}

/// Decodes and validates an EvidenceSet: the structural rules of docs/design/evaluation.md#evidence-validation (kinds,
/// outcomes, subject pairing, payload presence) and `ValidateEvidenceSet` (non-empty fields,
/// no duplicate assertion identities). `field` is the message's path, e.g. `evidence`.
pub fn evidence_from_proto(
    set: &common::EvidenceSet,
    field: &str,
) -> Result<engine::EvidenceSet, FieldError> {
    let subject = require(set.subject.as_ref(), &child(field, "subject"))?;
    let observed_field = child(field, "observed_at");
    let observed_at = timestamp_from_proto(
        require(set.observed_at.as_ref(), &observed_field)?,
        &observed_field,
    )?;
    if set.observations.len() > engine::MAX_OBSERVATIONS {
        return Err(FieldError::new(
            child(field, "observations"),
            format!(
                "{} observations exceed the maximum of {}",
                set.observations.len(),
                engine::MAX_OBSERVATIONS
            ),
        ));
    }
    let observations = set
        .observations
        .iter()
        .enumerate()
        .map(|(index, observation)| {
            observation_from_proto(observation, &format!("{field}.observations[{index}]"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let evidence = engine::EvidenceSet {
        subject: subject_from_proto(subject),
        contract_ref: set.contract_ref.clone(),
        source: set.source.clone(),
        observed_at,
        observations: Some(observations),
        subject_missing: set.subject_missing,
    };
    if let Err(errors) = evidence.validate()
        && let Some(first) = errors.0.first()
    {
        let engine_field = first.field().to_owned();
        let text = first.to_string();
        let message = text
            .strip_prefix(&format!("{engine_field}: "))
            .unwrap_or(&text)
            .replace("Observations[", &format!("{field}.observations["));
        return Err(FieldError::new(
            engine_path_to_proto(field, &engine_field),
            message,
        ));
    }
    Ok(evidence)
}

/// Encodes an EvidenceSet.
pub fn evidence_to_proto(set: &engine::EvidenceSet) -> common::EvidenceSet {
    common::EvidenceSet {
        subject: Some(subject_to_proto(&set.subject)),
        contract_ref: set.contract_ref.clone(),
        source: set.source.clone(),
        observed_at: Some(timestamp_to_proto(&set.observed_at)),
        observations: set
            .observations()
            .iter()
            .map(|observation| common::Observation {
                kind: kind_to_proto(observation.kind).into(),
                subject: Some(subject_to_proto(&observation.subject)),
                outcome: outcome_to_proto(observation.outcome.kind()).into(),
                value: match &observation.outcome {
                    engine::Outcome::Observed(value) => Some(value_to_proto(value)),
                    _ => None,
                },
                provenance: Some(common::Provenance {
                    collector: observation.provenance.collector.clone(),
                    detected_at: Some(timestamp_to_proto(&observation.provenance.detected_at)),
                }),
                detail: observation.detail.clone().unwrap_or_default(),
            })
            .collect(),
        subject_missing: set.subject_missing,
    }
}

// ---------------------------------------------------------------------------------------------
// Contract

/// Wraps YAML bytes as a contract document.
pub fn contract_document(yaml: impl Into<Vec<u8>>) -> common::ContractDocument {
    common::ContractDocument { yaml: yaml.into() }
}

/// Parses a required contract document into the typed model. `field` is the document's path,
/// e.g. `contract`.
pub fn contract_from_proto(
    document: Option<&common::ContractDocument>,
    field: &str,
) -> Result<Contract, FieldError> {
    let document = require(document, field)?;
    let yaml_field = child(field, "yaml");
    if document.yaml.iter().all(u8::is_ascii_whitespace) {
        return Err(FieldError::new(yaml_field, "must not be empty"));
    }
    pacto_contract::parse_contract(&document.yaml)
        .map(|(_, contract)| contract)
        .map_err(|error| FieldError::new(yaml_field, error.to_string()))
}

/// The engine's assertions of a contract (docs/design/evaluation.md#engine-inputs). `field` names the contract document
/// in errors (an unknown capability type is rejected; the resolver's validation normally
/// prevents it).
pub fn assertions_from_contract(
    contract: &Contract,
    field: &str,
) -> Result<engine::ContractAssertions, FieldError> {
    engine::ContractAssertions::try_from(contract)
        .map_err(|error| FieldError::new(child(field, "yaml"), error.to_string()))
}

/// Structural validation warnings as findings (prepended to the runtime findings). Each issue
/// needs a message; the severity is always `warning`.
pub fn structural_warnings_from_proto(
    issues: &[common::ValidationIssue],
    field: &str,
) -> Result<Vec<engine::Finding>, FieldError> {
    issues
        .iter()
        .enumerate()
        .map(|(index, issue)| {
            if issue.message.trim().is_empty() {
                return Err(FieldError::new(
                    format!("{field}[{index}].message"),
                    "must not be empty",
                ));
            }
            let mut finding = engine::Finding::structural(
                &issue.code,
                Some(issue.path.as_str()),
                issue.message.clone(),
            );
            finding.severity = engine::Severity::Warning;
            Ok(finding)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Findings, coverage, summary, status

/// Encodes a finding.
pub fn finding_to_proto(finding: &engine::Finding) -> evaluator::Finding {
    evaluator::Finding {
        code: finding.code.clone(),
        severity: severity_to_proto(finding.severity).into(),
        category: finding
            .category
            .map(|category| category.as_str().to_owned())
            .unwrap_or_default(),
        subject: finding.subject.as_ref().map(subject_to_proto),
        contract_path: finding.contract_path.clone().unwrap_or_default(),
        message: finding.message.clone(),
        evidence_refs: finding
            .evidence_refs
            .iter()
            .map(|r| evaluator::EvidenceRef {
                source: r.source.clone(),
                observed_at: r.observed_at.clone(),
                collector: r.collector.clone().unwrap_or_default(),
                detected_at: r.detected_at.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

/// Decodes a finding (e.g. in status-writer, from an Evaluate response).
pub fn finding_from_proto(
    finding: &evaluator::Finding,
    field: &str,
) -> Result<engine::Finding, FieldError> {
    let category = if finding.category.is_empty() {
        None
    } else {
        Some(engine::Category::parse(&finding.category).ok_or_else(|| {
            FieldError::new(
                child(field, "category"),
                format!("unknown category {:?}", finding.category),
            )
        })?)
    };
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Ok(engine::Finding {
        code: finding.code.clone(),
        severity: severity_from_proto(finding.severity, &child(field, "severity"))?,
        category,
        subject: finding.subject.as_ref().map(subject_from_proto),
        contract_path: non_empty(&finding.contract_path),
        message: finding.message.clone(),
        evidence_refs: finding
            .evidence_refs
            .iter()
            .map(|r| engine::EvidenceRef {
                source: r.source.clone(),
                observed_at: r.observed_at.clone(),
                collector: non_empty(&r.collector),
                detected_at: non_empty(&r.detected_at),
            })
            .collect(),
    })
}

/// Encodes coverage.
pub fn coverage_to_proto(coverage: engine::Coverage) -> evaluator::Coverage {
    evaluator::Coverage {
        evaluated: coverage.evaluated,
        required: coverage.required,
    }
}

/// Decodes coverage; `evaluated` may not exceed `required`.
pub fn coverage_from_proto(
    coverage: &evaluator::Coverage,
    field: &str,
) -> Result<engine::Coverage, FieldError> {
    if coverage.evaluated > coverage.required {
        return Err(FieldError::new(
            child(field, "evaluated"),
            format!(
                "{} exceeds required {}",
                coverage.evaluated, coverage.required
            ),
        ));
    }
    Ok(engine::Coverage {
        evaluated: coverage.evaluated,
        required: coverage.required,
    })
}

/// Encodes a summary.
pub fn summary_to_proto(summary: engine::Summary) -> evaluator::Summary {
    evaluator::Summary {
        error_count: summary.error_count,
        warning_count: summary.warning_count,
        info_count: summary.info_count,
        unknown_count: summary.unknown_count,
    }
}

/// Decodes a summary.
pub fn summary_from_proto(summary: &evaluator::Summary) -> engine::Summary {
    engine::Summary {
        error_count: summary.error_count,
        warning_count: summary.warning_count,
        info_count: summary.info_count,
        unknown_count: summary.unknown_count,
    }
}

// ---------------------------------------------------------------------------------------------
// Readiness

/// Encodes a readiness assessment.
pub fn readiness_to_proto(assessment: &readiness::Assessment) -> evaluator::ReadinessAssessment {
    evaluator::ReadinessAssessment {
        score: assessment.score,
        min_score: assessment.min_score,
        passing: assessment.passing,
        total_weight: assessment.total_weight,
        earned_weight: assessment.earned_weight,
        expires: assessment.expires.clone(),
        expired: assessment.expired,
        days_remaining: assessment.days_remaining,
        done_count: assessment.done_count,
        partial_count: assessment.partial_count,
        not_done_count: assessment.not_done_count,
        deferred_count: assessment.deferred_count,
        revisions: assessment
            .revisions
            .iter()
            .map(|r| evaluator::ReadinessRevision {
                date: r.date.clone(),
                version: r.version.clone(),
                author: r.author.clone(),
                description: r.description.clone(),
            })
            .collect(),
        claims: assessment
            .claims
            .iter()
            .map(|c| evaluator::ReadinessClaim {
                id: c.id.clone(),
                r#type: c.kind.clone(),
                category: c.category.clone().unwrap_or_default(),
                status: c.status.clone(),
                evidence: c.evidence.clone(),
                description: c.description.clone().unwrap_or_default(),
                weight: c.weight,
                earned_weight: c.earned_weight,
                excluded: c.excluded,
            })
            .collect(),
        gate_failure: assessment
            .gate_failure()
            .map(|failure| failure.reason().to_owned())
            .unwrap_or_default(),
        gate_message: assessment.gate_message().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
