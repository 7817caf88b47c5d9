//! Conversions between wire messages and the `Pacto` custom resource (`pacto-api`): the Pacto's
//! spec into the requests of the resolver and the observer, and the backend answers into the
//! fields of `status`. Used by the status-writer, which records a malformed answer as the
//! backend's failure (Unknown naming the service), never as a verdict.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use pacto_api::{
    ClaimState, ClaimStatus, ConfigBindingKind, ConfigFormat, ContractStatus, EvaluationCoverage,
    EvidenceRefStatus, FindingStatus, ObservationWindow, ObservationWindowKind, ObservedRuntime,
    Pacto, ReadinessRevision, ReadinessStatus, ResolutionPolicy, ResourceStatus, ResourcesStatus,
    Severity, Summary, UndeclaredPeer, UndeclaredPeerKind, ValidationIssue, ValidationResult,
};

use super::FieldError;
use crate::{common, evaluator, observer, resolver};

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn clamp(value: i64) -> i32 {
    i32::try_from(value).unwrap_or(if value < 0 { i32::MIN } else { i32::MAX })
}

fn count(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// The Pacto's name (its `generateName` while it has none, as kube's `name_any`).
fn pacto_name(pacto: &Pacto) -> String {
    let meta = &pacto.metadata;
    meta.name
        .clone()
        .or_else(|| meta.generate_name.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Times

/// A wire timestamp as a Kubernetes `Time`.
pub fn time_from_proto(ts: &prost_types::Timestamp, field: &str) -> Result<Time, FieldError> {
    Timestamp::new(ts.seconds, ts.nanos)
        .map(Time)
        .map_err(|e| FieldError::new(field, e.to_string()))
}

/// A Kubernetes `Time` on the wire.
fn time_to_proto(time: &Time) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: time.0.as_second(),
        nanos: time.0.subsec_nanosecond(),
    }
}

// ---------------------------------------------------------------------------------------------
// Requests from the Pacto's spec

/// The Resolve request of `pacto` (in `namespace`): its contract reference and overrides.
pub fn resolve_request(pacto: &Pacto, namespace: &str) -> resolver::ResolveRequest {
    let spec = &pacto.spec;
    resolver::ResolveRequest {
        namespace: namespace.to_owned(),
        pacto_name: pacto_name(pacto),
        contract_ref: Some(resolver::ContractRef {
            oci: spec.contract_ref.oci.clone().unwrap_or_default(),
            inline: spec.contract_ref.inline.clone().unwrap_or_default(),
            pull_secret_ref: spec
                .contract_ref
                .pull_secret_ref
                .clone()
                .unwrap_or_default(),
        }),
        overrides: spec
            .overrides
            .iter()
            .flat_map(|o| &o.configurations)
            .map(|c| resolver::ConfigurationOverride {
                name: c.name.clone(),
                values: c.values.clone().into_iter().collect(),
            })
            .collect(),
        // Fresh; the caller sets the max age it accepts (status-writer: its trigger).
        max_age_seconds: 0,
    }
}

/// The observation target of `pacto` (in `namespace`), from `spec.target` (empty when unset).
pub fn target_to_proto(pacto: &Pacto, namespace: &str) -> observer::Target {
    let target = pacto.spec.target.clone().unwrap_or_default();
    observer::Target {
        namespace: namespace.to_owned(),
        pacto_name: pacto_name(pacto),
        service_name: target.service_name.unwrap_or_default(),
        workload_ref: target.workload_ref.map(|w| observer::WorkloadRef {
            name: w.name,
            kind: w.kind.map(|k| k.as_str().to_owned()).unwrap_or_default(),
        }),
        interface_bindings: target
            .interface_bindings
            .into_iter()
            .map(|b| observer::InterfaceBinding {
                interface: b.interface,
                service_port: Some(match b.service_port {
                    IntOrString::Int(n) => observer::interface_binding::ServicePort::PortNumber(n),
                    IntOrString::String(s) => observer::interface_binding::ServicePort::PortName(s),
                }),
            })
            .collect(),
        config_bindings: target
            .config_bindings
            .into_iter()
            .map(|b| observer::ConfigBinding {
                configuration: b.configuration,
                kind: match b.kind {
                    ConfigBindingKind::ConfigMap => "ConfigMap".to_owned(),
                    ConfigBindingKind::Secret => "Secret".to_owned(),
                },
                name: b.name,
                key: b.key.unwrap_or_default(),
                format: match b.format {
                    Some(ConfigFormat::Yaml) => "yaml".to_owned(),
                    Some(ConfigFormat::Json) => "json".to_owned(),
                    None => String::new(),
                },
            })
            .collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Resolve

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
        total_errors: None,
        total_warnings: None,
    }
}

/// `status.validation` of an Invalid answer. Every Invalid carries a report with a code and a
/// path (docs/design/resolution.md#every-invalid-carries-a-validation-report); an answer without
/// errors (a contract-resolver from before that rule) gets one `PARSE_ERROR` at
/// `spec.contractRef` carrying the answer's message, so the status never reads Invalid without
/// saying why.
pub fn invalid_validation(invalid: &resolver::Invalid) -> ValidationResult {
    let mut validation = invalid
        .validation
        .as_ref()
        .map(validation_from_proto)
        .unwrap_or_default();
    if validation.errors.is_empty() {
        validation.errors.push(ValidationIssue {
            code: Some(pacto_contract::codes::PARSE_ERROR.to_owned()),
            path: Some("spec.contractRef".to_owned()),
            message: invalid.message.clone(),
        });
    }
    validation.valid = false;
    validation
}

/// A validation issue on the wire (e.g. a structural warning sent to Evaluate).
pub fn validation_issue_to_proto(issue: &ValidationIssue) -> common::ValidationIssue {
    common::ValidationIssue {
        code: issue.code.clone().unwrap_or_default(),
        path: issue.path.clone().unwrap_or_default(),
        message: issue.message.clone(),
    }
}

/// A resolution policy; `UNSPECIFIED` (inline contracts) is `None`.
pub fn policy_from_proto(value: i32, field: &str) -> Result<Option<ResolutionPolicy>, FieldError> {
    match resolver::ResolutionPolicy::try_from(value) {
        Ok(resolver::ResolutionPolicy::Unspecified) => Ok(None),
        Ok(resolver::ResolutionPolicy::Latest) => Ok(Some(ResolutionPolicy::Latest)),
        Ok(resolver::ResolutionPolicy::PinnedTag) => Ok(Some(ResolutionPolicy::PinnedTag)),
        Ok(resolver::ResolutionPolicy::PinnedDigest) => Ok(Some(ResolutionPolicy::PinnedDigest)),
        Err(_) => Err(FieldError::new(field, format!("unknown value {value}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Observe

fn window_kind(kind: &str, field: &str) -> Result<ObservationWindowKind, FieldError> {
    match kind {
        "interface" => Ok(ObservationWindowKind::Interface),
        "dependency" => Ok(ObservationWindowKind::Dependency),
        "configuration" => Ok(ObservationWindowKind::Configuration),
        "capability" => Ok(ObservationWindowKind::Capability),
        other => Err(FieldError::new(field, format!("unknown kind {other:?}"))),
    }
}

/// Windows as persisted in the status, for an Observe request.
pub fn windows_to_proto(windows: &[ObservationWindow]) -> Vec<observer::ObservationWindow> {
    windows
        .iter()
        .map(|w| observer::ObservationWindow {
            kind: w.kind.as_str().to_owned(),
            subject: w.subject.clone(),
            first_observed_negative_at: Some(time_to_proto(&w.first_observed_negative_at)),
        })
        .collect()
}

/// The windows of an Observe answer (`field` is their path, e.g. `windows`).
pub fn windows_from_proto(
    windows: &[observer::ObservationWindow],
    field: &str,
) -> Result<Vec<ObservationWindow>, FieldError> {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let field = format!("{field}[{i}]");
            let first_field = format!("{field}.first_observed_negative_at");
            Ok(ObservationWindow {
                kind: window_kind(&w.kind, &format!("{field}.kind"))?,
                subject: w.subject.clone(),
                first_observed_negative_at: time_from_proto(
                    super::require(w.first_observed_negative_at.as_ref(), &first_field)?,
                    &first_field,
                )?,
            })
        })
        .collect()
}

/// The legacy existence flags (`status.resources`) of a snapshot; `None` when it names neither
/// a Service nor a workload.
pub fn resources_from_proto(snapshot: &observer::RuntimeSnapshot) -> Option<ResourcesStatus> {
    let existence = |r: &observer::ResourceExistence| ResourceStatus {
        name: r.name.clone(),
        kind: non_empty(&r.kind),
        exists: r.exists,
    };
    (snapshot.service.is_some() || snapshot.workload.is_some()).then(|| ResourcesStatus {
        service: snapshot.service.as_ref().map(existence),
        workload: snapshot.workload.as_ref().map(existence),
    })
}

/// `status.observedRuntime` from the wire.
pub fn observed_runtime_from_proto(r: &observer::ObservedRuntime) -> ObservedRuntime {
    ObservedRuntime {
        workload_kind: non_empty(&r.workload_kind),
        deployment_strategy: non_empty(&r.deployment_strategy),
        pod_management_policy: non_empty(&r.pod_management_policy),
        termination_grace_period_seconds: r.termination_grace_period_seconds,
        container_images: r.container_images.clone(),
        has_pvc: r.has_pvc,
        has_empty_dir: r.has_empty_dir,
        health_probe_initial_delay_seconds: r.health_probe_initial_delay_seconds,
        undeclared_peers: None,
        total_undeclared_peers: None,
    }
}

/// `status.observedRuntime.undeclaredPeers` from the wire (`field` names the message); an
/// unknown kind is an error naming its path.
pub fn undeclared_peers_from_proto(
    peers: &observer::UndeclaredPeers,
    field: &str,
) -> Result<Vec<UndeclaredPeer>, FieldError> {
    peers
        .peers
        .iter()
        .enumerate()
        .map(|(i, peer)| {
            let kind = match peer.kind.as_str() {
                "Pacto" => UndeclaredPeerKind::Pacto,
                "Service" => UndeclaredPeerKind::Service,
                "IP" => UndeclaredPeerKind::Ip,
                other => {
                    return Err(FieldError::new(
                        format!("{field}.peers[{i}].kind"),
                        format!("unknown kind {other:?}"),
                    ));
                }
            };
            Ok(UndeclaredPeer {
                kind,
                name: peer.name.clone(),
                ports: peer.ports.clone(),
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Evaluate

fn severity_from_proto(value: i32, field: &str) -> Result<Severity, FieldError> {
    super::severity_from_proto(value, field).map(super::severity_to_crd)
}

/// The contract status of an evaluation: only Compliant, Warning, NonCompliant and Unknown are
/// evaluation results.
pub fn status_from_proto(value: i32, field: &str) -> Result<ContractStatus, FieldError> {
    use evaluator::ContractStatus as P;
    match P::try_from(value) {
        Ok(P::Compliant | P::Warning | P::NonCompliant | P::Unknown) => {
            super::status_from_proto(value, field).map(super::status_to_crd)
        }
        Ok(other) => Err(FieldError::new(
            field,
            format!("{} is not an evaluation result", other.as_str_name()),
        )),
        Err(_) => Err(FieldError::new(field, format!("unknown value {value}"))),
    }
}

/// One finding as written to `status.findings`.
pub fn finding_from_proto(
    f: &evaluator::Finding,
    field: &str,
) -> Result<FindingStatus, FieldError> {
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

/// The findings of an Evaluate answer (`field` is their path, e.g. `findings`).
pub fn findings_from_proto(
    findings: &[evaluator::Finding],
    field: &str,
) -> Result<Vec<FindingStatus>, FieldError> {
    findings
        .iter()
        .enumerate()
        .map(|(i, f)| finding_from_proto(f, &format!("{field}[{i}]")))
        .collect()
}

/// `status.coverage` from the wire, refused (as a malformed answer) when `evaluated` exceeds
/// `required`: the check of [`super::coverage_from_proto`].
pub fn coverage_from_proto(
    coverage: &evaluator::Coverage,
    field: &str,
) -> Result<EvaluationCoverage, FieldError> {
    let checked = super::coverage_from_proto(coverage, field)?;
    Ok(EvaluationCoverage {
        evaluated: count(checked.evaluated),
        required: count(checked.required),
    })
}

/// `status.summary` from the wire.
pub fn summary_from_proto(summary: &evaluator::Summary) -> Summary {
    Summary {
        error_count: count(summary.error_count),
        warning_count: count(summary.warning_count),
        info_count: count(summary.info_count),
        unknown_count: count(summary.unknown_count),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_with_more_evaluated_than_required_is_refused() {
        let wire = |evaluated, required| evaluator::Coverage {
            evaluated,
            required,
        };
        assert_eq!(
            coverage_from_proto(&wire(2, 2), "coverage"),
            Ok(EvaluationCoverage {
                evaluated: 2,
                required: 2
            })
        );
        assert_eq!(
            coverage_from_proto(&wire(0, 3), "coverage"),
            Ok(EvaluationCoverage {
                evaluated: 0,
                required: 3
            })
        );
        let err = coverage_from_proto(&wire(3, 2), "coverage").unwrap_err();
        assert_eq!(err.field, "coverage.evaluated");
        assert_eq!(err.to_string(), "coverage.evaluated: 3 exceeds required 2");
    }

    #[test]
    fn an_invalid_answer_always_gives_a_report() {
        let issue = |code: &str, path: &str, message: &str| ValidationIssue {
            code: Some(code.into()),
            path: Some(path.into()),
            message: message.into(),
        };
        let bare = resolver::Invalid {
            message: "no contract source specified".into(),
            ..Default::default()
        };
        assert_eq!(
            invalid_validation(&bare),
            ValidationResult {
                valid: false,
                errors: vec![issue(
                    "PARSE_ERROR",
                    "spec.contractRef",
                    "no contract source specified"
                )],
                warnings: vec![],
                total_errors: None,
                total_warnings: None,
            }
        );
        let reported = resolver::Invalid {
            message: "m".into(),
            validation: Some(common::ValidationResult {
                valid: false,
                errors: vec![common::ValidationIssue {
                    code: "INVALID_OCI_REF".into(),
                    path: "spec.contractRef.oci".into(),
                    message: "bad".into(),
                }],
                warnings: vec![],
            }),
            ..Default::default()
        };
        assert_eq!(
            invalid_validation(&reported).errors,
            [issue("INVALID_OCI_REF", "spec.contractRef.oci", "bad")]
        );
    }

    #[test]
    fn malformed_findings_and_statuses_name_the_field() {
        let finding = evaluator::Finding {
            code: "X".into(),
            severity: 9,
            ..Default::default()
        };
        assert_eq!(
            findings_from_proto(&[finding], "findings")
                .unwrap_err()
                .field,
            "findings[0].severity"
        );
        assert_eq!(
            status_from_proto(evaluator::ContractStatus::Invalid.into(), "contract_status")
                .unwrap_err()
                .field,
            "contract_status"
        );
    }

    #[test]
    fn the_target_carries_the_bindings_and_the_generated_name() {
        use observer::interface_binding::ServicePort;
        use pacto_api::{
            ConfigBinding, ContractRef, InterfaceBinding, PactoSpec, TargetRef, WorkloadKind,
            WorkloadRef,
        };
        let mut pacto = Pacto::new(
            "",
            PactoSpec {
                contract_ref: ContractRef {
                    oci: Some("reg/x:1".into()),
                    inline: None,
                    pull_secret_ref: None,
                },
                target: Some(TargetRef {
                    service_name: Some("orders".into()),
                    workload_ref: Some(WorkloadRef {
                        name: "orders-db".into(),
                        kind: Some(WorkloadKind::StatefulSet),
                    }),
                    interface_bindings: vec![
                        InterfaceBinding {
                            interface: "api".into(),
                            service_port: IntOrString::Int(8080),
                        },
                        InterfaceBinding {
                            interface: "admin".into(),
                            service_port: IntOrString::String("admin".into()),
                        },
                    ],
                    config_bindings: vec![ConfigBinding {
                        configuration: "settings".into(),
                        kind: ConfigBindingKind::ConfigMap,
                        name: "orders-settings".into(),
                        key: Some("settings.yaml".into()),
                        format: Some(ConfigFormat::Yaml),
                    }],
                }),
                overrides: None,
                check_interval_seconds: None,
            },
        );
        pacto.metadata.name = None;
        pacto.metadata.generate_name = Some("orders-".into());
        let target = target_to_proto(&pacto, "shop");
        assert_eq!(target.pacto_name, "orders-");
        assert_eq!(target.namespace, "shop");
        assert_eq!(target.service_name, "orders");
        let workload = target.workload_ref.unwrap();
        assert_eq!(
            (workload.name.as_str(), workload.kind.as_str()),
            ("orders-db", "StatefulSet")
        );
        assert_eq!(
            target
                .interface_bindings
                .iter()
                .map(|b| b.service_port.clone())
                .collect::<Vec<_>>(),
            vec![
                Some(ServicePort::PortNumber(8080)),
                Some(ServicePort::PortName("admin".into()))
            ]
        );
        let config = &target.config_bindings[0];
        assert_eq!(
            (
                config.kind.as_str(),
                config.format.as_str(),
                config.key.as_str()
            ),
            ("ConfigMap", "yaml", "settings.yaml")
        );
        assert_eq!(resolve_request(&pacto, "shop").pacto_name, "orders-");
    }

    #[test]
    fn windows_round_trip() {
        let windows = vec![ObservationWindow {
            kind: ObservationWindowKind::Dependency,
            subject: "db".into(),
            first_observed_negative_at: Time(Timestamp::from_second(1_787_000_000).unwrap()),
        }];
        assert_eq!(
            windows_from_proto(&windows_to_proto(&windows), "windows").unwrap(),
            windows
        );
        let missing = observer::ObservationWindow {
            kind: "dependency".into(),
            subject: "db".into(),
            first_observed_negative_at: None,
        };
        assert_eq!(
            windows_from_proto(&[missing], "windows").unwrap_err(),
            FieldError::new("windows[0].first_observed_negative_at", "required")
        );
    }

    #[test]
    fn undeclared_peers_from_the_wire() {
        let wire = observer::UndeclaredPeers {
            peers: vec![
                observer::UndeclaredPeer {
                    kind: "Pacto".into(),
                    name: "shop/payments".into(),
                    ports: vec![443],
                },
                observer::UndeclaredPeer {
                    kind: "IP".into(),
                    name: "203.0.113.7".into(),
                    ports: vec![],
                },
            ],
        };
        let peers = undeclared_peers_from_proto(&wire, "undeclared_peers").unwrap();
        assert_eq!(
            peers
                .iter()
                .map(|p| (p.kind, p.name.as_str(), p.ports.clone()))
                .collect::<Vec<_>>(),
            [
                (UndeclaredPeerKind::Pacto, "shop/payments", vec![443]),
                (UndeclaredPeerKind::Ip, "203.0.113.7", vec![]),
            ]
        );
        let bad = observer::UndeclaredPeers {
            peers: vec![observer::UndeclaredPeer {
                kind: "LIST_TRUNCATED".into(),
                ..observer::UndeclaredPeer::default()
            }],
        };
        assert_eq!(
            undeclared_peers_from_proto(&bad, "undeclared_peers").unwrap_err(),
            FieldError::new(
                "undeclared_peers.peers[0].kind",
                "unknown kind \"LIST_TRUNCATED\""
            )
        );
    }
}
