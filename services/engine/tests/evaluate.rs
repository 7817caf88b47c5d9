//! Table-driven tests of `evaluate`: every assertion kind × outcome × required/optional, the
//! evidence refs, finding order, coverage, status derivation and the worked examples of docs/design/contract.md#worked-examples.

use pacto_engine::*;

const OBSERVED_AT: &str = "2026-08-22T21:31:04.250Z";
const DETECTED_AT: &str = "2026-08-22T21:31:03.999+00:00";

fn ts(s: &str) -> Timestamp {
    Timestamp::parse(s).expect("timestamp")
}

fn evidence(observations: Vec<Observation>) -> EvidenceSet {
    EvidenceSet {
        subject: SubjectRef::new("service", "shop/orders"),
        contract_ref: "oci://ghcr.io/acme/orders@sha256:00".into(),
        source: "k8s".into(),
        observed_at: ts(OBSERVED_AT),
        observations: Some(observations),
        subject_missing: false,
    }
}

fn prov(collector: &str) -> Provenance {
    Provenance::new(collector, ts(DETECTED_AT))
}

/// The outcome column of the matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Col {
    Missing,
    Satisfied,
    Contradicted,
    Unsupported,
    Failed,
    Stale,
    Insufficient,
}

const COLS: [Col; 7] = [
    Col::Missing,
    Col::Satisfied,
    Col::Contradicted,
    Col::Unsupported,
    Col::Failed,
    Col::Stale,
    Col::Insufficient,
];

/// One row of the matrix: an assertion kind with its contract, observation identity and the
/// satisfying / contradicting payloads.
struct Row {
    label: &'static str,
    contract: ContractAssertions,
    kind: ObservationKind,
    name: &'static str,
    satisfied: Value,
    contradicted: Value,
    required: bool,
    violation_code: &'static str,
    subject: (&'static str, &'static str),
    contract_path: &'static str,
    message_name: &'static str,
}

fn base() -> ContractAssertions {
    ContractAssertions {
        service_name: "orders".into(),
        ..ContractAssertions::default()
    }
}

fn rows() -> Vec<Row> {
    let cfg = |present, conformant| {
        Value::Configuration(ConfigurationValue {
            present,
            conformant,
        })
    };
    let mut rows = vec![
        Row {
            label: "interface",
            contract: ContractAssertions {
                interfaces: vec!["http-api".into()],
                ..base()
            },
            kind: ObservationKind::InterfaceObserved,
            name: "http-api",
            satisfied: Value::Interface(InterfaceValue {
                interface_type: "openapi".into(),
                present: true,
            }),
            contradicted: Value::Interface(InterfaceValue {
                interface_type: "openapi".into(),
                present: false,
            }),
            required: true,
            violation_code: "INTERFACE_ABSENT",
            subject: ("interface", "http-api"),
            contract_path: "interfaces[name=http-api]",
            message_name: "interface \"http-api\"",
        },
        Row {
            label: "health",
            contract: ContractAssertions {
                capabilities: vec![CapabilityAssertion::Health],
                ..base()
            },
            kind: ObservationKind::CapabilityObserved,
            name: "health",
            satisfied: Value::Capability(CapabilityValue { present: true }),
            contradicted: Value::Capability(CapabilityValue { present: false }),
            required: true,
            violation_code: "CAPABILITY_ABSENT",
            subject: ("capability", "health"),
            contract_path: "capabilities[type=health]",
            message_name: "capability \"health\"",
        },
        Row {
            label: "metrics",
            contract: ContractAssertions {
                capabilities: vec![CapabilityAssertion::Metrics],
                ..base()
            },
            kind: ObservationKind::CapabilityObserved,
            name: "metrics",
            satisfied: Value::Capability(CapabilityValue { present: true }),
            contradicted: Value::Capability(CapabilityValue { present: false }),
            required: true,
            violation_code: "CAPABILITY_ABSENT",
            subject: ("capability", "metrics"),
            contract_path: "capabilities[type=metrics]",
            message_name: "capability \"metrics\"",
        },
        Row {
            label: "workload",
            contract: ContractAssertions {
                workload: Some("service".into()),
                ..base()
            },
            kind: ObservationKind::WorkloadObserved,
            name: "orders",
            satisfied: Value::Workload(WorkloadValue {
                workload_type: "service".into(),
            }),
            contradicted: Value::Workload(WorkloadValue {
                workload_type: "job".into(),
            }),
            required: true,
            violation_code: "WORKLOAD_MISMATCH",
            subject: ("service", "orders"),
            contract_path: "workload",
            message_name: "service \"orders\"",
        },
        Row {
            label: "persistence",
            contract: ContractAssertions {
                persistent: true,
                ..base()
            },
            kind: ObservationKind::PersistenceObserved,
            name: "orders",
            satisfied: Value::Persistence(PersistenceValue { durable: true }),
            contradicted: Value::Persistence(PersistenceValue { durable: false }),
            required: true,
            violation_code: "PERSISTENCE_MISMATCH",
            subject: ("service", "orders"),
            contract_path: "state.persistence.durability",
            message_name: "service \"orders\"",
        },
    ];
    for required in [true, false] {
        rows.push(Row {
            label: if required {
                "dependency(required)"
            } else {
                "dependency(optional)"
            },
            contract: ContractAssertions {
                dependencies: vec![NamedAssertion::new("db", required)],
                ..base()
            },
            kind: ObservationKind::DependencyReachable,
            name: "db",
            satisfied: Value::Dependency(DependencyValue { reachable: true }),
            contradicted: Value::Dependency(DependencyValue { reachable: false }),
            required,
            violation_code: "DEPENDENCY_UNREACHABLE",
            subject: ("dependency", "db"),
            contract_path: "dependencies[name=db]",
            message_name: "dependency \"db\"",
        });
        rows.push(Row {
            label: if required {
                "config-absent(required)"
            } else {
                "config-absent(optional)"
            },
            contract: ContractAssertions {
                configurations: vec![NamedAssertion::new("default", required)],
                ..base()
            },
            kind: ObservationKind::ConfigurationPresent,
            name: "default",
            satisfied: cfg(true, true),
            contradicted: cfg(false, false),
            required,
            violation_code: "CONFIGURATION_ABSENT",
            subject: ("configuration", "default"),
            contract_path: "configurations[name=default]",
            message_name: "configuration \"default\"",
        });
        rows.push(Row {
            label: if required {
                "config-mismatch(required)"
            } else {
                "config-mismatch(optional)"
            },
            contract: ContractAssertions {
                configurations: vec![NamedAssertion::new("default", required)],
                ..base()
            },
            kind: ObservationKind::ConfigurationPresent,
            name: "default",
            satisfied: cfg(true, true),
            contradicted: cfg(true, false),
            required,
            violation_code: "CONFIGURATION_MISMATCH",
            subject: ("configuration", "default"),
            contract_path: "configurations[name=default]",
            message_name: "configuration \"default\"",
        });
    }
    rows
}

fn observation_for(row: &Row, col: Col) -> Option<Observation> {
    let outcome = match col {
        Col::Missing => return None,
        Col::Satisfied => Outcome::Observed(row.satisfied.clone()),
        Col::Contradicted => Outcome::Observed(row.contradicted.clone()),
        Col::Unsupported => Outcome::Unsupported,
        Col::Failed => Outcome::Failed,
        Col::Stale => Outcome::Stale,
        Col::Insufficient => Outcome::Insufficient,
    };
    Some(Observation::new(
        row.kind,
        row.name,
        outcome,
        prov("k8s-observer+ebpf"),
    ))
}

#[test]
fn matrix_assertion_kind_by_outcome_by_requiredness() {
    let mut checked = 0;
    for row in rows() {
        for col in COLS {
            let ctx = format!("{} × {col:?}", row.label);
            let obs = observation_for(&row, col);
            let matched = obs.is_some();
            let ev = evidence(obs.into_iter().collect());
            let result = evaluate(&row.contract, &ev);

            // coverage
            let want_required = u32::from(row.required);
            let want_evaluated =
                u32::from(row.required && matches!(col, Col::Satisfied | Col::Contradicted));
            assert_eq!(
                result.coverage,
                Coverage {
                    evaluated: want_evaluated,
                    required: want_required
                },
                "{ctx}: coverage"
            );

            // findings
            let unknown = |code| Some((code, Severity::Unknown, Category::Inconclusive));
            let want: Option<(&str, Severity, Category)> = match col {
                Col::Satisfied => None,
                Col::Contradicted => Some((
                    row.violation_code,
                    if row.required {
                        Severity::Error
                    } else {
                        Severity::Warning
                    },
                    Category::RuntimeDrift,
                )),
                _ if !row.required => None,
                Col::Missing => unknown("EVIDENCE_MISSING"),
                Col::Unsupported => unknown("OBSERVATION_UNSUPPORTED"),
                Col::Failed => unknown("COLLECTION_FAILED"),
                Col::Stale => unknown("EVIDENCE_STALE"),
                Col::Insufficient => unknown("EVIDENCE_INSUFFICIENT"),
            };
            match want {
                None => assert!(result.findings.is_empty(), "{ctx}: {:?}", result.findings),
                Some((code, severity, category)) => {
                    assert_eq!(result.findings.len(), 1, "{ctx}: {:?}", result.findings);
                    let f = &result.findings[0];
                    assert_eq!(f.code, code, "{ctx}");
                    assert_eq!(f.severity, severity, "{ctx}");
                    assert_eq!(f.category, Some(category), "{ctx}");
                    assert_eq!(
                        f.subject,
                        Some(SubjectRef::new(row.subject.0, row.subject.1)),
                        "{ctx}"
                    );
                    assert_eq!(f.contract_path.as_deref(), Some(row.contract_path), "{ctx}");
                    assert!(
                        f.message.contains(row.message_name)
                            || f.message.contains(&go_quote(row.name))
                            || matches!(code, "PERSISTENCE_MISMATCH" | "WORKLOAD_MISMATCH"),
                        "{ctx}: message {:?}",
                        f.message
                    );
                    // evidence ref: one per finding; collector/detectedAt iff matched
                    assert_eq!(f.evidence_refs.len(), 1, "{ctx}");
                    let r = &f.evidence_refs[0];
                    assert_eq!(r.source, "k8s");
                    assert_eq!(
                        r.observed_at, "2026-08-22T21:31:04Z",
                        "{ctx}: seconds precision"
                    );
                    if matched {
                        assert_eq!(r.collector.as_deref(), Some("k8s-observer+ebpf"), "{ctx}");
                        assert_eq!(
                            r.detected_at.as_deref(),
                            Some("2026-08-22T21:31:03Z"),
                            "{ctx}"
                        );
                    } else {
                        assert_eq!(r.collector, None, "{ctx}");
                        assert_eq!(r.detected_at, None, "{ctx}");
                    }
                    // registry agrees with what the engine emitted
                    assert_eq!(severity_for(code, row.required), f.severity, "{ctx}");
                    assert_eq!(category_for(code, row.required), f.category, "{ctx}");
                }
            }

            // status
            let want_status = match want {
                None if row.required && !matches!(col, Col::Satisfied) => ContractStatus::Unknown,
                None => ContractStatus::Compliant,
                Some((_, Severity::Error, _)) => ContractStatus::NonCompliant,
                Some((_, Severity::Warning, _)) => ContractStatus::Warning,
                Some(_) => ContractStatus::Unknown,
            };
            assert_eq!(result.status(), want_status, "{ctx}: status");
            checked += 1;
        }
    }
    assert_eq!(checked, 11 * COLS.len());
}

#[test]
fn violation_messages_are_upstreams() {
    let cases: Vec<(ContractAssertions, Observation, &str)> = vec![
        (
            ContractAssertions {
                interfaces: vec!["http".into()],
                ..base()
            },
            Observation::observed(
                "http",
                Value::Interface(InterfaceValue::default()),
                prov("k8s-observer"),
            ),
            "interface \"http\" is not available (zero ready endpoints beyond the stabilization window)",
        ),
        (
            ContractAssertions {
                capabilities: vec![CapabilityAssertion::Health],
                ..base()
            },
            Observation::observed(
                "health",
                Value::Capability(CapabilityValue::default()),
                prov("k8s-observer"),
            ),
            "capability \"health\" is absent at runtime",
        ),
        (
            ContractAssertions {
                dependencies: vec![NamedAssertion::new("db", false)],
                ..base()
            },
            Observation::observed(
                "db",
                Value::Dependency(DependencyValue::default()),
                prov("k8s-observer"),
            ),
            "dependency \"db\" is unreachable",
        ),
        (
            ContractAssertions {
                configurations: vec![NamedAssertion::new("default", true)],
                ..base()
            },
            Observation::observed(
                "default",
                Value::Configuration(ConfigurationValue::default()),
                prov("k8s-observer"),
            ),
            "required configuration \"default\" is absent at runtime",
        ),
        (
            ContractAssertions {
                configurations: vec![NamedAssertion::new("default", true)],
                ..base()
            },
            Observation::observed(
                "default",
                Value::Configuration(ConfigurationValue {
                    present: true,
                    conformant: false,
                }),
                prov("k8s-observer"),
            ),
            "configuration \"default\" exists but does not conform to the declared schema",
        ),
        (
            ContractAssertions {
                workload: Some("scheduled".into()),
                ..base()
            },
            Observation::observed(
                "orders",
                Value::Workload(WorkloadValue {
                    workload_type: "service".into(),
                }),
                prov("k8s-observer"),
            ),
            "workload type is \"scheduled\" but observed as \"service\"",
        ),
        (
            ContractAssertions {
                persistent: true,
                ..base()
            },
            Observation::observed(
                "orders",
                Value::Persistence(PersistenceValue::default()),
                prov("k8s-observer"),
            ),
            "contract declares persistent durability but no persistent storage binding was observed",
        ),
    ];
    for (contract, obs, message) in cases {
        let result = evaluate(&contract, &evidence(vec![obs]));
        assert_eq!(result.findings.len(), 1);
        assert_eq!(result.findings[0].message, message);
    }
}

#[test]
fn unknown_messages_are_upstreams() {
    let contract = ContractAssertions {
        interfaces: vec!["a".into(), "b".into(), "c".into(), "d".into(), "e".into()],
        ..base()
    };
    let k = ObservationKind::InterfaceObserved;
    let ev = evidence(vec![
        Observation::new(k, "b", Outcome::Unsupported, prov("k8s-observer")),
        Observation::new(k, "c", Outcome::Failed, prov("k8s-observer")),
        Observation::new(k, "d", Outcome::Stale, prov("ebpf")),
        Observation::new(k, "e", Outcome::Insufficient, prov("k8s-observer+ebpf")),
    ]);
    let messages: Vec<String> = evaluate(&contract, &ev)
        .findings
        .into_iter()
        .map(|f| f.message)
        .collect();
    assert_eq!(
        messages,
        [
            "no observation was produced for required interface \"a\"",
            "interface \"b\" cannot be observed in this environment",
            "collection failed for interface \"c\"",
            "evidence for interface \"d\" is stale",
            "evidence for interface \"e\" is insufficient to satisfy or contradict the contract",
        ]
    );
}

#[test]
fn extension_capabilities_are_always_unavailable_and_ignore_observations() {
    let contract = ContractAssertions {
        capabilities: vec![CapabilityAssertion::Extension {
            reference: "example.com/tracing".into(),
        }],
        ..base()
    };
    // even an Observed present observation under the extension key is ignored
    let ev = evidence(vec![Observation::observed(
        "example.com/tracing",
        Value::Capability(CapabilityValue { present: true }),
        prov("k8s-observer"),
    )]);
    let result = evaluate(&contract, &ev);
    assert_eq!(
        result.coverage,
        Coverage {
            evaluated: 0,
            required: 1
        }
    );
    assert_eq!(result.findings.len(), 1);
    let f = &result.findings[0];
    assert_eq!(f.code, "EXTENSION_EVALUATOR_UNAVAILABLE");
    assert_eq!(f.severity, Severity::Unknown);
    assert_eq!(f.category, Some(Category::Inconclusive));
    assert_eq!(
        f.subject,
        Some(SubjectRef::new("capability", "example.com/tracing"))
    );
    assert_eq!(
        f.contract_path.as_deref(),
        Some("capabilities[ref=example.com/tracing]")
    );
    assert_eq!(
        f.message,
        "extension capability \"example.com/tracing\" has no registered evaluator"
    );
    assert_eq!(
        f.evidence_refs[0].collector, None,
        "no observation was matched"
    );
    assert_eq!(result.status(), ContractStatus::Unknown);
}

#[test]
fn findings_follow_the_evaluation_order_and_contract_order() {
    let contract = ContractAssertions {
        service_name: "orders".into(),
        interfaces: vec!["z-last".into(), "a-first".into()],
        capabilities: vec![CapabilityAssertion::Metrics, CapabilityAssertion::Health],
        dependencies: vec![NamedAssertion::new("db", true)],
        configurations: vec![NamedAssertion::new("cfg", true)],
        workload: Some("service".into()),
        persistent: true,
    };
    let result = evaluate(&contract, &evidence(vec![]));
    let paths: Vec<&str> = result
        .findings
        .iter()
        .map(|f| f.contract_path.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(
        paths,
        [
            "interfaces[name=z-last]",
            "interfaces[name=a-first]",
            "capabilities[type=metrics]",
            "capabilities[type=health]",
            "dependencies[name=db]",
            "configurations[name=cfg]",
            "workload",
            "state.persistence.durability",
        ]
    );
    assert!(result.findings.iter().all(|f| f.code == "EVIDENCE_MISSING"));
    assert_eq!(
        result.coverage,
        Coverage {
            evaluated: 0,
            required: 8
        }
    );
    assert_eq!(contract.required_count(), 8);
}

#[test]
fn matching_uses_kind_and_name_and_takes_the_first() {
    let contract = ContractAssertions {
        interfaces: vec!["api".into()],
        dependencies: vec![NamedAssertion::new("api", true)],
        ..base()
    };
    let ev = evidence(vec![
        // same name, other kind: must not satisfy the interface
        Observation::observed(
            "api",
            Value::Dependency(DependencyValue { reachable: true }),
            prov("k8s-observer"),
        ),
        // first interface observation wins over the second
        Observation::new(
            ObservationKind::InterfaceObserved,
            "api",
            Outcome::Stale,
            prov("ebpf"),
        ),
        Observation::observed(
            "api",
            Value::Interface(InterfaceValue {
                interface_type: "grpc".into(),
                present: true,
            }),
            prov("k8s-observer"),
        ),
    ]);
    let result = evaluate(&contract, &ev);
    assert_eq!(result.findings.len(), 1);
    assert_eq!(result.findings[0].code, "EVIDENCE_STALE");
    assert_eq!(
        result.findings[0].evidence_refs[0].collector.as_deref(),
        Some("ebpf")
    );
    assert_eq!(
        result.coverage,
        Coverage {
            evaluated: 1,
            required: 2
        }
    );
    // the top-level subject plays no part
    let mut other = ev.clone();
    other.subject = SubjectRef::new("service", "elsewhere/other");
    assert_eq!(evaluate(&contract, &other), result);
}

#[test]
fn workload_and_persistence_share_a_subject_but_not_a_kind() {
    let contract = ContractAssertions {
        workload: Some("service".into()),
        persistent: true,
        ..base()
    };
    let ev = evidence(vec![
        Observation::observed(
            "orders",
            Value::Workload(WorkloadValue {
                workload_type: "service".into(),
            }),
            prov("k8s-observer"),
        ),
        Observation::observed(
            "orders",
            Value::Persistence(PersistenceValue { durable: true }),
            prov("k8s-observer"),
        ),
    ]);
    ev.validate().expect("both may appear");
    let result = evaluate(&contract, &ev);
    assert!(result.findings.is_empty());
    assert_eq!(result.status(), ContractStatus::Compliant);
    // a service name mismatch means no match at all
    let mut renamed = contract.clone();
    renamed.service_name = "billing".into();
    let result = evaluate(&renamed, &ev);
    assert_eq!(result.findings.len(), 2);
    assert!(result.findings.iter().all(|f| f.code == "EVIDENCE_MISSING"));
}

#[test]
fn empty_workload_string_is_undeclared() {
    let contract = ContractAssertions {
        workload: Some(String::new()),
        ..base()
    };
    let result = evaluate(&contract, &evidence(vec![]));
    assert!(result.findings.is_empty());
    assert_eq!(result.coverage, Coverage::default());
    assert_eq!(result.status(), ContractStatus::Compliant);
}

#[test]
fn metrics_collector_detail_is_projected() {
    let contract = ContractAssertions {
        capabilities: vec![CapabilityAssertion::Metrics],
        ..base()
    };
    let ev = evidence(vec![Observation::observed(
        "metrics",
        Value::Capability(CapabilityValue { present: false }),
        prov("k8s-observer/metrics:servicemonitor"),
    )]);
    let f = &evaluate(&contract, &ev).findings[0];
    assert_eq!(
        f.evidence_refs[0].collector.as_deref(),
        Some("k8s-observer")
    );
    assert_eq!(project_collector("k8s-observer+ebpf"), "k8s-observer+ebpf");
    assert_eq!(project_collector("ebpf"), "ebpf");
}

#[test]
fn a_payload_of_another_kind_is_not_evidence() {
    // only constructible programmatically; validation rejects it, evaluate reads it as
    // insufficient rather than as satisfied or violated
    let contract = ContractAssertions {
        interfaces: vec!["api".into()],
        ..base()
    };
    let bogus = Observation {
        kind: ObservationKind::InterfaceObserved,
        subject: SubjectRef::new("interface", "api"),
        outcome: Outcome::Observed(Value::Dependency(DependencyValue { reachable: false })),
        provenance: prov("k8s-observer"),
        detail: None,
    };
    let ev = evidence(vec![bogus]);
    assert!(ev.validate().is_err());
    let result = evaluate(&contract, &ev);
    assert_eq!(result.findings[0].code, "EVIDENCE_INSUFFICIENT");
    assert_eq!(
        result.coverage,
        Coverage {
            evaluated: 0,
            required: 1
        }
    );
}

// ----------------------------------------------------------------------------------------------
// Worked examples from the specs
// ----------------------------------------------------------------------------------------------

/// docs/design/evaluation.md#status-derivation: a fresh, valid, targeted contract whose target does not exist yet is
/// Unknown (never NotEvaluated); every required assertion reads EVIDENCE_MISSING.
#[test]
fn example_target_not_yet_created_is_unknown() {
    let contract = bench::typical_contract();
    let mut ev = bench::typical_evidence();
    ev.observations = None; // `null`
    let result = evaluate(&contract, &ev);
    assert_eq!(result.status(), ContractStatus::Unknown);
    assert_eq!(result.coverage.evaluated, 0);
    assert_eq!(result.coverage.required as usize, contract.required_count());
    let summary = result.summary();
    assert_eq!(summary.error_count + summary.warning_count, 0);
    assert_eq!(summary.unknown_count, result.coverage.required);
}

/// docs/design/evaluation.md#the-target: a missing subject is its own EVIDENCE_MISSING, first,
/// outside coverage, so a contract without runtime assertions (0/0) is Unknown, not Compliant;
/// present (or not said to be missing), 0/0 stays Compliant.
#[test]
fn a_missing_target_is_unknown_even_without_assertions() {
    let contract = ContractAssertions::default();
    let mut ev = evidence(vec![]);
    assert_eq!(evaluate(&contract, &ev).status(), ContractStatus::Compliant);
    ev.subject_missing = true;
    let result = evaluate(&contract, &ev);
    assert_eq!(result.status(), ContractStatus::Unknown);
    assert_eq!(result.coverage, Coverage::default());
    assert_eq!(result.findings.len(), 1);
    let finding = &result.findings[0];
    assert_eq!(finding.code, "EVIDENCE_MISSING");
    assert_eq!(finding.severity, Severity::Unknown);
    assert_eq!(finding.category, Some(Category::Inconclusive));
    assert_eq!(
        finding.subject,
        Some(SubjectRef::new("service", "shop/orders"))
    );
    assert_eq!(finding.contract_path, None);
    assert_eq!(
        finding.message,
        "target service \"shop/orders\" does not exist: nothing about it can be observed"
    );
    assert_eq!(finding.evidence_refs.len(), 1);
    assert_eq!(finding.evidence_refs[0].collector, None);

    // With assertions, the target's finding comes first and the assertions' follow.
    let contract = ContractAssertions {
        interfaces: vec!["http".into()],
        ..base()
    };
    let result = evaluate(&contract, &ev);
    let subjects: Vec<String> = result
        .findings
        .iter()
        .filter_map(|f| f.subject.as_ref().map(|s| format!("{}/{}", s.kind, s.name)))
        .collect();
    assert_eq!(subjects, ["service/shop/orders", "interface/http"]);
    assert_eq!(result.coverage.required, 1);
}

/// An observation's `detail` (why it could not be decided) ends the unknown finding's message.
#[test]
fn an_observation_detail_explains_the_unknown_finding() {
    let contract = ContractAssertions {
        configurations: vec![NamedAssertion {
            name: "token".into(),
            required: true,
        }],
        ..base()
    };
    let ev = evidence(vec![
        Observation::new(
            ObservationKind::ConfigurationPresent,
            "token",
            Outcome::Unsupported,
            prov("k8s-observer"),
        )
        .with_detail("set rbac.secretMetadata=true"),
    ]);
    let result = evaluate(&contract, &ev);
    assert_eq!(result.findings[0].code, "OBSERVATION_UNSUPPORTED");
    assert_eq!(
        result.findings[0].message,
        "configuration \"token\" cannot be observed in this environment: set rbac.secretMetadata=true"
    );
    // The detail survives JSON (an extension key, written only when set) and a set without it
    // encodes exactly as before.
    let json = String::from_utf8(ev.to_json().unwrap()).unwrap();
    assert!(
        json.contains("\"detail\":\"set rbac.secretMetadata=true\""),
        "{json}"
    );
    assert!(!json.contains("SubjectMissing"), "{json}");
    assert_eq!(EvidenceSet::from_json(json.as_bytes()).unwrap(), ev);
}

/// An absence the node agents decided (docs/design/evaluation.md#finding-messages) gives their
/// reason, not the endpoint one: the endpoints were Ready.
#[test]
fn a_node_agent_absence_names_the_silent_pod_not_the_endpoints() {
    let contract = ContractAssertions {
        interfaces: vec!["admin".into()],
        ..base()
    };
    let detail = "node-agent evidence: pod web-0 is Ready but has no LISTEN socket on port 9000";
    let ev = evidence(vec![
        Observation::observed(
            "admin",
            Value::Interface(InterfaceValue::default()),
            prov("k8s-observer+ebpf"),
        )
        .with_detail(detail),
    ]);
    let result = evaluate(&contract, &ev);
    assert_eq!(result.findings[0].code, "INTERFACE_ABSENT");
    assert_eq!(
        result.findings[0].message,
        format!("interface \"admin\" is not available ({detail}, beyond the stabilization window)")
    );
    assert!(!result.findings[0].message.contains("endpoints"));
}

/// docs/troubleshooting.md "Status is NonCompliant": a CONFIGURATION_MISMATCH is NonCompliant on the
/// first reconcile that observes it; an absence inside the window arrives as Insufficient and
/// reads Unknown until the streak spans the window.
#[test]
fn example_configuration_mismatch_immediate_absence_unknown() {
    let contract = ContractAssertions {
        configurations: vec![NamedAssertion::new("default", true)],
        ..base()
    };
    let mismatch = evidence(vec![Observation::observed(
        "default",
        Value::Configuration(ConfigurationValue {
            present: true,
            conformant: false,
        }),
        prov("k8s-observer"),
    )]);
    assert_eq!(
        evaluate(&contract, &mismatch).status(),
        ContractStatus::NonCompliant
    );
    let in_window = evidence(vec![Observation::new(
        ObservationKind::ConfigurationPresent,
        "default",
        Outcome::Insufficient,
        prov("k8s-observer"),
    )]);
    let r = evaluate(&contract, &in_window);
    assert_eq!(r.status(), ContractStatus::Unknown);
    assert_eq!(r.findings[0].code, "EVIDENCE_INSUFFICIENT");
    let beyond = evidence(vec![Observation::observed(
        "default",
        Value::Configuration(ConfigurationValue {
            present: false,
            conformant: false,
        }),
        prov("k8s-observer"),
    )]);
    let r = evaluate(&contract, &beyond);
    assert_eq!(r.findings[0].code, "CONFIGURATION_ABSENT");
    assert_eq!(r.status(), ContractStatus::NonCompliant);
}

/// docs/troubleshooting.md "Chasing the evidence behind a finding": the whole evidenceRef record.
#[test]
fn example_evidence_ref_record() {
    let contract = ContractAssertions {
        interfaces: vec!["http-api".into()],
        ..base()
    };
    let mut ev = evidence(vec![Observation::observed(
        "http-api",
        Value::Interface(InterfaceValue::default()),
        Provenance::new("k8s-observer", ts("2026-08-22T21:31:04Z")),
    )]);
    ev.observed_at = ts("2026-08-22T21:31:04Z");
    let f = &evaluate(&contract, &ev).findings[0];
    let json = serde_json::to_value(&f.evidence_refs).expect("json");
    assert_eq!(
        json,
        serde_json::json!([{
            "source": "k8s",
            "observedAt": "2026-08-22T21:31:04Z",
            "collector": "k8s-observer",
            "detectedAt": "2026-08-22T21:31:04Z"
        }])
    );
    // EVIDENCE_MISSING carries source and observedAt only
    let missing = evaluate(&contract, &evidence(vec![]));
    let json = serde_json::to_value(&missing.findings[0].evidence_refs).expect("json");
    assert_eq!(
        json,
        serde_json::json!([{"source": "k8s", "observedAt": "2026-08-22T21:31:04Z"}])
    );
}

/// docs/design/evaluation.md#evidence-model: an Observed capability with `value: {}` decodes as present=false and is a
/// confirmed violation; `value: null` passes validation and evaluates with zero values too.
#[test]
fn example_empty_and_null_values_are_zero_payloads() {
    let contract = ContractAssertions {
        capabilities: vec![CapabilityAssertion::Health],
        ..base()
    };
    for value in ["{}", "null"] {
        let json = format!(
            r#"{{"Subject":{{"kind":"service","name":"shop/orders"}},"ContractRef":"oci://r/x@sha256:00",
            "Source":"k8s","ObservedAt":"2026-08-22T21:31:04Z","Observations":[
            {{"kind":"CapabilityObserved","subject":{{"kind":"capability","name":"health"}},
              "outcome":"Observed","value":{value},
              "provenance":{{"collector":"k8s-observer","detectedAt":"2026-08-22T21:31:04Z"}}}}]}}"#
        );
        let ev = EvidenceSet::from_json(json.as_bytes()).expect("decodes");
        ev.validate().expect("valid");
        let r = evaluate(&contract, &ev);
        assert_eq!(r.findings.len(), 1, "{value}");
        assert_eq!(r.findings[0].code, "CAPABILITY_ABSENT", "{value}");
        assert_eq!(r.status(), ContractStatus::NonCompliant, "{value}");
    }
}

/// docs/troubleshooting.md "Reading the events": `ContractStatus: NonCompliant, 2 errors, 1 warnings`
/// — summary counts by severity with structural warnings prepended.
#[test]
fn example_summary_with_structural_warning() {
    let contract = ContractAssertions {
        interfaces: vec!["a".into(), "b".into()],
        ..base()
    };
    let absent = |n: &str| {
        Observation::observed(
            n,
            Value::Interface(InterfaceValue::default()),
            prov("k8s-observer"),
        )
    };
    let result =
        evaluate(&contract, &evidence(vec![absent("a"), absent("b")])).with_structural(vec![
            Finding::structural(
                "TAG_NOT_DIGEST",
                Some("dependencies[0].ref"),
                "use a digest",
            ),
        ]);
    assert_eq!(
        result.findings[0].code, "TAG_NOT_DIGEST",
        "structural first"
    );
    assert_eq!(result.findings[0].severity, Severity::Warning);
    assert_eq!(
        result.findings[0].category,
        Some(Category::InvalidReference)
    );
    assert!(
        result.findings[0].evidence_refs.is_empty(),
        "structural findings carry no ref"
    );
    let v = verdict(Stage::Evaluated {
        findings: &result.findings,
        coverage: result.coverage,
    });
    assert_eq!(v.status, ContractStatus::NonCompliant);
    assert_eq!(
        (
            v.summary.error_count,
            v.summary.warning_count,
            v.summary.unknown_count
        ),
        (2, 1, 0)
    );
    // a structural warning alone makes an otherwise compliant contract Warning
    let ok = evaluate(&ContractAssertions::default(), &evidence(vec![])).with_structural(vec![
        Finding::structural("POLICY_REF_NOT_ENFORCED", None, "not enforced"),
    ]);
    assert_eq!(ok.status(), ContractStatus::Warning);
}

#[test]
fn status_ladder_and_short_circuits() {
    use ContractStatus as S;
    use Severity::{Error, Info, Unknown, Warning};
    let f = |severity: Severity| Finding {
        code: "X".into(),
        severity,
        category: None,
        subject: None,
        contract_path: None,
        message: String::new(),
        evidence_refs: vec![],
    };
    let full = Coverage {
        evaluated: 2,
        required: 2,
    };
    let short = Coverage {
        evaluated: 1,
        required: 2,
    };
    let cases: Vec<(Vec<Finding>, Coverage, ContractStatus)> = vec![
        (vec![], full, S::Compliant),
        (vec![f(Info)], full, S::Compliant),
        (vec![f(Warning)], full, S::Warning),
        (vec![f(Warning), f(Info)], full, S::Warning),
        (vec![], short, S::Unknown),
        (vec![f(Warning)], short, S::Unknown),
        (vec![f(Unknown)], full, S::Unknown),
        (vec![f(Unknown), f(Warning)], full, S::Unknown),
        (vec![f(Error)], full, S::NonCompliant),
        (
            vec![f(Error), f(Unknown), f(Warning)],
            short,
            S::NonCompliant,
        ),
        (vec![], Coverage::default(), S::Compliant),
    ];
    for (findings, coverage, want) in cases {
        assert_eq!(
            derive_status(&findings, coverage),
            want,
            "{findings:?} {coverage:?}"
        );
    }
    assert_eq!(
        verdict(Stage::Invalid),
        Verdict {
            status: S::Invalid,
            summary: Summary {
                error_count: 1,
                ..Summary::default()
            }
        }
    );
    assert_eq!(
        verdict(Stage::Unavailable),
        Verdict {
            status: S::Unknown,
            summary: Summary {
                unknown_count: 1,
                ..Summary::default()
            }
        }
    );
    assert_eq!(
        verdict(Stage::ReferenceOnly),
        Verdict {
            status: S::Reference,
            summary: Summary::default()
        }
    );
    for s in S::ALL {
        assert_eq!(S::parse(s.as_str()), Some(s));
    }
    assert!(!S::Compliant.is_degraded() && !S::Reference.is_degraded());
    assert!(S::Unknown.is_degraded() && S::Warning.is_degraded() && S::Invalid.is_degraded());
}

#[test]
fn record_shape_is_upstreams_pascal_case() {
    let contract = ContractAssertions {
        interfaces: vec!["http".into()],
        ..base()
    };
    let f = evaluate(&contract, &evidence(vec![])).findings.remove(0);
    let json = serde_json::to_value(f.to_record()).expect("json");
    assert_eq!(
        json,
        serde_json::json!({
            "Code": "EVIDENCE_MISSING",
            "Severity": "unknown",
            "Category": "Inconclusive",
            "Subject": {"Kind": "interface", "Name": "http"},
            "ContractPath": "interfaces[name=http]",
            "Message": "no observation was produced for required interface \"http\"",
            "EvidenceRefs": [{"Source": "k8s", "ObservedAt": "2026-08-22T21:31:04Z"}]
        })
    );
    let structural = Finding::structural("PORT_REQUIRED", None, "bad");
    let json = serde_json::to_value(structural.to_record()).expect("json");
    assert_eq!(json["Category"], "");
    assert_eq!(json["Severity"], "error");
    assert_eq!(json["EvidenceRefs"], serde_json::Value::Null);
    assert_eq!(json["ContractPath"], "");
}

#[test]
fn typical_bench_workload_is_realistic() {
    let r = evaluate(&bench::typical_contract(), &bench::typical_evidence());
    bench::typical_evidence()
        .validate()
        .expect("bench evidence is valid");
    let codes: Vec<&str> = r.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "INTERFACE_ABSENT",
            "OBSERVATION_UNSUPPORTED",
            "EXTENSION_EVALUATOR_UNAVAILABLE",
            "EVIDENCE_STALE",
            "DEPENDENCY_UNREACHABLE",
            "EVIDENCE_INSUFFICIENT",
        ]
    );
    assert_eq!(
        r.coverage,
        Coverage {
            evaluated: 9,
            required: 13
        }
    );
    assert_eq!(r.status(), ContractStatus::NonCompliant);
}
