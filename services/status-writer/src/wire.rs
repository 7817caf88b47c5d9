//! The gRPC answers of the backends turned into domain types ([`crate::model`]). A malformed
//! answer is a [`WireError`] naming the field; the caller records it as a [`BackendFailure`]
//! (Unknown naming the service), never as a verdict.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pacto_api::{
    ClaimState, ClaimStatus, ContractStatus, EvaluationCoverage, EvidenceRefStatus, FindingStatus,
    ObservationWindow, ObservationWindowKind, ObservedRuntime, ReadinessRevision, ReadinessStatus,
    ResolutionPolicy, ResourceStatus, ResourcesStatus, Severity, Summary, ValidationIssue,
    ValidationResult,
};
use pacto_proto::{common, evaluator, observer, resolver};
use sha2::{Digest, Sha256};

use crate::model::{Evaluated, Observed, Resolution, ResolvedContract};

/// A backend answer that does not fit the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed response: {field}: {message}")]
pub struct WireError {
    /// The proto field path.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl WireError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn clamp(value: i64) -> i32 {
    i32::try_from(value).unwrap_or(if value < 0 { i32::MIN } else { i32::MAX })
}

fn count(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// A protobuf timestamp as a Kubernetes `Time`.
pub fn time_from_proto(
    ts: &pacto_proto::prost_types::Timestamp,
    field: &str,
) -> Result<Time, WireError> {
    Timestamp::new(ts.seconds, ts.nanos)
        .map(Time)
        .map_err(|e| WireError::new(field, e.to_string()))
}

/// `status.validation` from the wire.
pub fn validation_from_proto(v: &common::ValidationResult) -> ValidationResult {
    let issue = |i: &common::ValidationIssue| ValidationIssue {
        code: non_empty(&i.code),
        path: non_empty(&i.path),
        message: i.message.clone(),
    };
    ValidationResult {
        valid: v.valid,
        errors: v.errors.iter().map(issue).collect(),
        warnings: v.warnings.iter().map(issue).collect(),
    }
}

fn policy_from_proto(value: i32, field: &str) -> Result<Option<ResolutionPolicy>, WireError> {
    match resolver::ResolutionPolicy::try_from(value) {
        Ok(resolver::ResolutionPolicy::Unspecified) => Ok(None),
        Ok(resolver::ResolutionPolicy::Latest) => Ok(Some(ResolutionPolicy::Latest)),
        Ok(resolver::ResolutionPolicy::PinnedTag) => Ok(Some(ResolutionPolicy::PinnedTag)),
        Ok(resolver::ResolutionPolicy::PinnedDigest) => Ok(Some(ResolutionPolicy::PinnedDigest)),
        Err(_) => Err(WireError::new(field, format!("unknown value {value}"))),
    }
}

/// A Resolve answer.
pub fn resolution_from_proto(
    response: &resolver::ResolveResponse,
) -> Result<Resolution, WireError> {
    use resolver::resolve_response::Result as R;
    match response.result.as_ref() {
        None => Err(WireError::new("result", "required")),
        Some(R::Invalid(invalid)) => Ok(Resolution::Invalid {
            message: invalid.message.clone(),
            validation: invalid.validation.as_ref().map(validation_from_proto),
            policy: policy_from_proto(invalid.resolution_policy, "invalid.resolution_policy")?,
        }),
        Some(R::Unavailable(unavailable)) => Ok(Resolution::Unavailable {
            message: unavailable.reason.clone(),
            policy: policy_from_proto(
                unavailable.resolution_policy,
                "unavailable.resolution_policy",
            )?,
        }),
        Some(R::Resolved(resolved)) => {
            let document = resolved
                .contract
                .as_ref()
                .ok_or_else(|| WireError::new("resolved.contract", "required"))?;
            let (_, contract) = pacto_contract::parse::parse_contract(&document.yaml)
                .map_err(|e| WireError::new("resolved.contract.yaml", e.to_string()))?;
            let content_hash = if resolved.content_hash.is_empty() {
                hex::encode(Sha256::digest(&resolved.raw_yaml))
            } else {
                resolved.content_hash.clone()
            };
            Ok(Resolution::Resolved(Box::new(ResolvedContract {
                contract,
                effective_yaml: document.yaml.clone(),
                resolved_ref: non_empty(&resolved.resolved_ref),
                digest: non_empty(&resolved.digest),
                policy: policy_from_proto(
                    resolved.resolution_policy,
                    "resolved.resolution_policy",
                )?,
                validation: resolved.validation.as_ref().map_or(
                    ValidationResult {
                        valid: true,
                        ..ValidationResult::default()
                    },
                    validation_from_proto,
                ),
                configuration_schemas: resolved
                    .configuration_schemas
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                content_hash,
            })))
        }
    }
}

fn window_kind(kind: &str, field: &str) -> Result<ObservationWindowKind, WireError> {
    match kind {
        "interface" => Ok(ObservationWindowKind::Interface),
        "dependency" => Ok(ObservationWindowKind::Dependency),
        "configuration" => Ok(ObservationWindowKind::Configuration),
        "capability" => Ok(ObservationWindowKind::Capability),
        other => Err(WireError::new(field, format!("unknown kind {other:?}"))),
    }
}

/// Windows as persisted in the status, for an Observe request.
pub fn windows_to_proto(windows: &[ObservationWindow]) -> Vec<observer::ObservationWindow> {
    windows
        .iter()
        .map(|w| observer::ObservationWindow {
            kind: w.kind.as_str().to_owned(),
            subject: w.subject.clone(),
            first_observed_negative_at: Some(pacto_proto::prost_types::Timestamp {
                seconds: w.first_observed_negative_at.0.as_second(),
                nanos: w.first_observed_negative_at.0.subsec_nanosecond(),
            }),
        })
        .collect()
}

/// An Observe answer.
pub fn observed_from_proto(response: &observer::ObserveResponse) -> Result<Observed, WireError> {
    let windows = response
        .windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let field = format!("windows[{i}]");
            Ok(ObservationWindow {
                kind: window_kind(&w.kind, &format!("{field}.kind"))?,
                subject: w.subject.clone(),
                first_observed_negative_at: time_from_proto(
                    w.first_observed_negative_at.as_ref().ok_or_else(|| {
                        WireError::new(format!("{field}.first_observed_negative_at"), "required")
                    })?,
                    &format!("{field}.first_observed_negative_at"),
                )?,
            })
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    let snapshot = response.snapshot.clone().unwrap_or_default();
    let existence = |r: &observer::ResourceExistence| ResourceStatus {
        name: r.name.clone(),
        kind: non_empty(&r.kind),
        exists: r.exists,
    };
    let resources =
        (snapshot.service.is_some() || snapshot.workload.is_some()).then(|| ResourcesStatus {
            service: snapshot.service.as_ref().map(existence),
            workload: snapshot.workload.as_ref().map(existence),
        });
    let observed_runtime = snapshot.observed_runtime.as_ref().map(|r| ObservedRuntime {
        workload_kind: non_empty(&r.workload_kind),
        deployment_strategy: non_empty(&r.deployment_strategy),
        pod_management_policy: non_empty(&r.pod_management_policy),
        termination_grace_period_seconds: r.termination_grace_period_seconds,
        container_images: r.container_images.clone(),
        has_pvc: r.has_pvc,
        has_empty_dir: r.has_empty_dir,
        health_probe_initial_delay_seconds: r.health_probe_initial_delay_seconds,
    });
    let window_due_at = response
        .window_due_at
        .as_ref()
        .map(|ts| time_from_proto(ts, "window_due_at"))
        .transpose()?;
    Ok(Observed {
        windows,
        api_errors: response.api_errors.clone(),
        resources,
        observed_runtime,
        window_due_at,
    })
}

fn severity_from_proto(value: i32, field: &str) -> Result<Severity, WireError> {
    match evaluator::Severity::try_from(value) {
        Ok(evaluator::Severity::Error) => Ok(Severity::Error),
        Ok(evaluator::Severity::Warning) => Ok(Severity::Warning),
        Ok(evaluator::Severity::Info) => Ok(Severity::Info),
        Ok(evaluator::Severity::Unknown) => Ok(Severity::Unknown),
        Ok(evaluator::Severity::Unspecified) => Err(WireError::new(field, "must be set")),
        Err(_) => Err(WireError::new(field, format!("unknown value {value}"))),
    }
}

fn status_from_proto(value: i32, field: &str) -> Result<ContractStatus, WireError> {
    use evaluator::ContractStatus as P;
    match P::try_from(value) {
        Ok(P::Compliant) => Ok(ContractStatus::Compliant),
        Ok(P::Warning) => Ok(ContractStatus::Warning),
        Ok(P::NonCompliant) => Ok(ContractStatus::NonCompliant),
        Ok(P::Unknown) => Ok(ContractStatus::Unknown),
        Ok(other) => Err(WireError::new(
            field,
            format!("{} is not an evaluation result", other.as_str_name()),
        )),
        Err(_) => Err(WireError::new(field, format!("unknown value {value}"))),
    }
}

/// One finding as written to `status.findings`.
pub fn finding_from_proto(f: &evaluator::Finding, field: &str) -> Result<FindingStatus, WireError> {
    Ok(FindingStatus {
        code: f.code.clone(),
        severity: severity_from_proto(f.severity, &format!("{field}.severity"))?,
        category: f.category.clone(),
        subject: f.subject.as_ref().map(|s| format!("{}/{}", s.kind, s.name)),
        contract_path: non_empty(&f.contract_path),
        message: f.message.clone(),
        evidence_refs: f
            .evidence_refs
            .iter()
            .map(|r| EvidenceRefStatus {
                source: r.source.clone(),
                observed_at: r.observed_at.clone(),
                collector: non_empty(&r.collector),
                detected_at: non_empty(&r.detected_at),
            })
            .collect(),
    })
}

/// `status.readiness` from the wire.
pub fn readiness_from_proto(r: &evaluator::ReadinessAssessment) -> ReadinessStatus {
    let state = |s: &str| match s {
        "done" => ClaimState::Done,
        "partial" => ClaimState::Partial,
        "deferred" => ClaimState::Deferred,
        _ => ClaimState::NotDone,
    };
    ReadinessStatus {
        score: clamp(r.score),
        min_score: clamp(r.min_score),
        passing: r.passing,
        total_weight: clamp(r.total_weight),
        earned_weight: clamp(r.earned_weight),
        expires: non_empty(&r.expires),
        expired: r.expired,
        days_remaining: r.days_remaining.map(clamp),
        done_count: count(r.done_count),
        partial_count: count(r.partial_count),
        not_done_count: count(r.not_done_count),
        deferred_count: count(r.deferred_count),
        revisions: r
            .revisions
            .iter()
            .map(|v| ReadinessRevision {
                date: v.date.clone(),
                version: v.version.clone(),
                author: v.author.clone(),
                description: v.description.clone(),
            })
            .collect(),
        claims: r
            .claims
            .iter()
            .map(|c| ClaimStatus {
                id: c.id.clone(),
                claim_type: c.r#type.clone(),
                category: non_empty(&c.category),
                status: state(&c.status),
                evidence: non_empty(&c.evidence),
                description: non_empty(&c.description),
                weight: clamp(c.weight),
                earned_weight: clamp(c.earned_weight),
                excluded: c.excluded,
            })
            .collect(),
    }
}

/// An Evaluate answer.
pub fn evaluated_from_proto(
    response: &evaluator::EvaluateResponse,
) -> Result<Evaluated, WireError> {
    let findings = response
        .findings
        .iter()
        .enumerate()
        .map(|(i, f)| finding_from_proto(f, &format!("findings[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let coverage = response
        .coverage
        .as_ref()
        .ok_or_else(|| WireError::new("coverage", "required"))?;
    let summary = response
        .summary
        .as_ref()
        .ok_or_else(|| WireError::new("summary", "required"))?;
    Ok(Evaluated {
        findings,
        coverage: EvaluationCoverage {
            evaluated: count(coverage.evaluated),
            required: count(coverage.required),
        },
        summary: Summary {
            error_count: count(summary.error_count),
            warning_count: count(summary.warning_count),
            info_count: count(summary.info_count),
            unknown_count: count(summary.unknown_count),
        },
        status: status_from_proto(response.contract_status, "contract_status")?,
        readiness: response.readiness.as_ref().map(readiness_from_proto),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_answers_name_the_field() {
        let err = resolution_from_proto(&resolver::ResolveResponse { result: None }).unwrap_err();
        assert_eq!(err.to_string(), "malformed response: result: required");

        let response = evaluator::EvaluateResponse {
            findings: vec![evaluator::Finding {
                code: "X".into(),
                severity: 9,
                ..Default::default()
            }],
            coverage: Some(evaluator::Coverage::default()),
            summary: Some(evaluator::Summary::default()),
            contract_status: evaluator::ContractStatus::Compliant.into(),
            readiness: None,
        };
        let err = evaluated_from_proto(&response).unwrap_err();
        assert_eq!(err.field, "findings[0].severity");

        let response = evaluator::EvaluateResponse {
            contract_status: evaluator::ContractStatus::Invalid.into(),
            coverage: Some(evaluator::Coverage::default()),
            summary: Some(evaluator::Summary::default()),
            ..Default::default()
        };
        assert_eq!(
            evaluated_from_proto(&response).unwrap_err().field,
            "contract_status"
        );
    }

    #[test]
    fn resolved_contract_hash_falls_back_to_sha256_of_raw_bytes() {
        let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: a\n  version: 1.0.0\n";
        let response = resolver::ResolveResponse {
            result: Some(resolver::resolve_response::Result::Resolved(
                resolver::Resolved {
                    contract: Some(common::ContractDocument {
                        yaml: yaml.as_bytes().to_vec(),
                    }),
                    raw_yaml: yaml.as_bytes().to_vec(),
                    ..Default::default()
                },
            )),
        };
        let Resolution::Resolved(resolved) = resolution_from_proto(&response).unwrap() else {
            panic!("resolved");
        };
        assert_eq!(resolved.content_hash, hex::encode(Sha256::digest(yaml)));
        assert_eq!(resolved.contract.service.name, "a");
        assert_eq!(resolved.policy, None);
        assert!(resolved.validation.valid);
    }

    #[test]
    fn windows_round_trip() {
        let windows = vec![ObservationWindow {
            kind: ObservationWindowKind::Dependency,
            subject: "db".into(),
            first_observed_negative_at: Time(Timestamp::from_second(1_787_000_000).unwrap()),
        }];
        let response = observer::ObserveResponse {
            windows: windows_to_proto(&windows),
            ..Default::default()
        };
        assert_eq!(observed_from_proto(&response).unwrap().windows, windows);
    }
}
