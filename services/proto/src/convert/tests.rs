use super::*;

fn ts(seconds: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds, nanos: 0 }
}

fn observation(
    kind: common::ObservationKind,
    name: &str,
    value: Option<common::observation::Value>,
) -> common::Observation {
    let subject_kind = kind_from_proto(kind).map_or("", engine::ObservationKind::subject_kind);
    common::Observation {
        kind: kind.into(),
        subject: Some(common::SubjectRef {
            kind: subject_kind.to_owned(),
            name: name.to_owned(),
        }),
        outcome: if value.is_some() {
            common::Outcome::Observed.into()
        } else {
            common::Outcome::Failed.into()
        },
        value,
        provenance: Some(common::Provenance {
            collector: "k8s-observer".to_owned(),
            detected_at: Some(ts(1_700_000_000)),
        }),
        detail: String::new(),
    }
}

fn evidence(observations: Vec<common::Observation>) -> common::EvidenceSet {
    common::EvidenceSet {
        subject: Some(common::SubjectRef {
            kind: "service".to_owned(),
            name: "shop/orders".to_owned(),
        }),
        contract_ref: "oci://registry/orders@sha256:00".to_owned(),
        source: "k8s".to_owned(),
        observed_at: Some(ts(1_700_000_001)),
        observations,
        subject_missing: false,
    }
}

fn valid() -> common::EvidenceSet {
    use common::observation::Value;
    evidence(vec![
        observation(
            common::ObservationKind::InterfaceObserved,
            "http",
            Some(Value::Interface(common::InterfaceValue {
                r#type: "http".to_owned(),
                present: true,
            })),
        ),
        observation(common::ObservationKind::DependencyReachable, "db", None),
        observation(
            common::ObservationKind::WorkloadObserved,
            "orders",
            Some(Value::Workload(common::WorkloadValue {
                r#type: "service".to_owned(),
            })),
        ),
    ])
}

fn error_of(set: &common::EvidenceSet) -> String {
    evidence_from_proto(set, "evidence")
        .unwrap_err()
        .to_string()
}

#[test]
fn evidence_round_trips() {
    let wire = valid();
    let domain = evidence_from_proto(&wire, "evidence").unwrap();
    assert_eq!(domain.observations().len(), 3);
    assert_eq!(domain.observations()[1].outcome, engine::Outcome::Failed);
    assert_eq!(evidence_to_proto(&domain), wire);
}

#[test]
fn unknown_enum_values_name_the_field() {
    let mut set = valid();
    set.observations[2].outcome = 7;
    assert_eq!(
        error_of(&set),
        "evidence.observations[2].outcome: unknown value 7"
    );
    let mut set = valid();
    set.observations[0].kind = 42;
    assert_eq!(
        error_of(&set),
        "evidence.observations[0].kind: unknown value 42"
    );
    let mut set = valid();
    set.observations[1].kind = 0;
    assert_eq!(error_of(&set), "evidence.observations[1].kind: must be set");
}

#[test]
fn payload_rules() {
    use common::observation::Value;
    // A payload on a non-observed outcome.
    let mut set = valid();
    set.observations[1].value = Some(Value::Dependency(common::DependencyValue {
        reachable: true,
    }));
    set.observations[1].outcome = common::Outcome::Stale.into();
    let message = error_of(&set);
    assert!(
        message.starts_with("evidence.observations[1].dependency: "),
        "{message}"
    );
    // A payload of another kind.
    let mut set = valid();
    set.observations[0].value = Some(Value::Persistence(common::PersistenceValue {
        durable: true,
    }));
    let message = error_of(&set);
    assert!(
        message.starts_with("evidence.observations[0].persistence: "),
        "{message}"
    );
    // Observed without a payload decodes to the zero value.
    let mut set = valid();
    set.observations[0].value = None;
    set.observations[0].outcome = common::Outcome::Observed.into();
    let domain = evidence_from_proto(&set, "evidence").unwrap();
    assert_eq!(
        domain.observations()[0].outcome,
        engine::Outcome::Observed(engine::ObservationKind::InterfaceObserved.zero_value())
    );
}

#[test]
fn required_fields_and_engine_validation_are_mapped() {
    let mut set = valid();
    set.observed_at = None;
    assert_eq!(error_of(&set), "evidence.observed_at: required");
    let mut set = valid();
    set.observations[2].provenance = None;
    assert_eq!(
        error_of(&set),
        "evidence.observations[2].provenance: required"
    );
    let mut set = valid();
    set.source.clear();
    assert_eq!(error_of(&set), "evidence.source: must not be empty");
    let mut set = valid();
    set.observations[1]
        .provenance
        .as_mut()
        .unwrap()
        .collector
        .clear();
    assert_eq!(
        error_of(&set),
        "evidence.observations[1].provenance.collector: must not be empty"
    );
    let mut set = valid();
    set.observations[0].subject.as_mut().unwrap().kind = "service".to_owned();
    let message = error_of(&set);
    assert!(
        message.starts_with("evidence.observations[0].subject.kind: "),
        "{message}"
    );
    let mut set = valid();
    let duplicate = set.observations[0].clone();
    set.observations.push(duplicate);
    let message = error_of(&set);
    assert!(message.starts_with("evidence.observations[3]"), "{message}");
    assert!(message.contains("duplicate"), "{message}");
    assert!(
        message.contains("(first at evidence.observations[0])"),
        "{message}"
    );
    let mut set = valid();
    set.observed_at = Some(prost_types::Timestamp {
        seconds: 1,
        nanos: -1,
    });
    assert_eq!(
        error_of(&set),
        "evidence.observed_at.nanos: -1 is outside 0..999999999"
    );
}

#[test]
fn engine_paths_become_proto_paths() {
    assert_eq!(
        engine_path_to_proto("evidence", "ContractRef"),
        "evidence.contract_ref"
    );
    assert_eq!(
        engine_path_to_proto("evidence", "Observations[3].provenance.detectedAt"),
        "evidence.observations[3].provenance.detected_at"
    );
    assert_eq!(engine_path_to_proto("", "Subject.kind"), "subject.kind");
}

#[test]
fn findings_round_trip() {
    let finding = engine::Finding {
        code: "INTERFACE_ABSENT".to_owned(),
        severity: engine::Severity::Error,
        category: engine::Category::parse("RuntimeDrift"),
        subject: Some(engine::SubjectRef::new("interface", "http")),
        contract_path: Some("interfaces[name=http]".to_owned()),
        message: "gone".to_owned(),
        evidence_refs: vec![engine::EvidenceRef {
            source: "k8s".to_owned(),
            observed_at: "2026-01-01T00:00:00Z".to_owned(),
            collector: Some("k8s-observer".to_owned()),
            detected_at: None,
        }],
    };
    assert!(finding.category.is_some());
    let wire = finding_to_proto(&finding);
    assert_eq!(finding_from_proto(&wire, "findings[0]").unwrap(), finding);
    let mut bad = wire;
    bad.severity = 9;
    assert_eq!(
        finding_from_proto(&bad, "findings[0]")
            .unwrap_err()
            .to_string(),
        "findings[0].severity: unknown value 9"
    );
}

#[test]
fn contract_documents() {
    let missing = contract_from_proto(None, "contract").unwrap_err();
    assert_eq!(missing.to_string(), "contract: required");
    let empty = contract_from_proto(Some(&contract_document("  \n")), "contract").unwrap_err();
    assert_eq!(empty.to_string(), "contract.yaml: must not be empty");
    let broken = contract_from_proto(Some(&contract_document("a: [")), "contract").unwrap_err();
    assert_eq!(broken.field, "contract.yaml");
    let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.0.0\nworkload: service\ninterfaces:\n  - name: http\n    type: openapi\ncapabilities:\n  - type: health\n  - type: extension\n    ref: acme.io/x\ndependencies:\n  - name: db\n    ref: oci://r/db:1.0.0\n    required: false\nstate:\n  type: stateful\n  persistence:\n    scope: local\n    durability: persistent\n";
    let contract = contract_from_proto(Some(&contract_document(yaml)), "contract").unwrap();
    let assertions = assertions_from_contract(&contract, "contract").unwrap();
    assert_eq!(assertions.service_name, "orders");
    assert_eq!(assertions.interfaces, vec!["http".to_owned()]);
    assert_eq!(assertions.capabilities.len(), 2);
    assert_eq!(assertions.workload.as_deref(), Some("service"));
    assert!(assertions.persistent);
    assert!(!assertions.dependencies[0].required);
}
