//! Table tests of the pure middle: status fields, conditions (reasons, stickiness,
//! observedGeneration, absences), the eight events with their gating and messages (and a
//! transition table: every event compose emits has one of the eight reasons), the
//! backend-unavailable path and "no write when nothing changed".

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pacto_api::conditions::{
    CONTRACT_VALID, READINESS_SATISFIED, RUNTIME_OBSERVED, find_condition,
};
use pacto_api::labels::event_reason;
use pacto_api::*;
use pacto_status_writer::{
    Backend, BackendFailure, EnsuredRevision, Evaluated, Observed, Resolution, ResolvedContract,
    Runtime,
};
use pacto_status_writer::{Composed, EventKind, Pass, compose, derive_policy};

const CONTRACT: &str = r#"pactoVersion: "2.0"
service:
  name: orders
  version: 1.2.0
  owner:
    team: shop
    contacts:
      - type: email
        value: shop@example.com
interfaces:
  - name: http
    type: openapi
    ref: api.yaml
capabilities:
  - type: health
configurations:
  - name: default
    required: true
    values:
      LOG_LEVEL: info
      DB_PASSWORD: secret://db
dependencies:
  - name: db
    ref: oci://reg/db:1.0.0
    required: true
    compatibility: ^1.0.0
policies:
  - name: naming
    schema: policies/naming.json
metadata:
  tier: 1
  tags: [a, b]
"#;

fn t(secs: i64) -> Time {
    Time(Timestamp::from_second(1_787_000_000 + secs).unwrap())
}

fn resolved(yaml: &str, readiness: bool) -> Resolution {
    let mut yaml = yaml.to_owned();
    if readiness {
        yaml.push_str(
            "readiness:\n  expires: \"2099-01-01\"\n  minScore: 80\n  claims:\n    - id: runbook\n      type: url\n      status: done\n      evidence: https://x\n      weight: 100\n",
        );
    }
    let (_, contract) = pacto_contract::parse_contract(yaml.as_bytes()).unwrap();
    Resolution::Resolved(Box::new(ResolvedContract {
        contract: std::sync::Arc::new(contract),
        effective_yaml: yaml.into_bytes(),
        resolved_ref: Some("reg.local/orders:1.2.0".into()),
        digest: Some("sha256:abc".into()),
        policy: Some(ResolutionPolicy::PinnedTag),
        validation: ValidationResult {
            valid: true,
            errors: vec![],
            warnings: vec![ValidationIssue {
                code: Some("TAG_NOT_DIGEST".into()),
                path: Some("dependencies[0].ref".into()),
                message: "use a digest".into(),
            }],
            ..ValidationResult::default()
        },
        configuration_schemas: BTreeMap::new(),
        content_hash: "0123456789abcdef".into(),
    }))
}

fn spec(targeted: bool) -> PactoSpec {
    PactoSpec {
        contract_ref: ContractRef {
            oci: Some("oci://reg.local/orders:1.2.0".into()),
            inline: None,
            pull_secret_ref: None,
        },
        target: targeted.then(|| TargetRef {
            service_name: Some("orders".into()),
            ..TargetRef::default()
        }),
        overrides: Some(ContractOverrides {
            configurations: vec![ConfigurationOverride {
                name: "default".into(),
                values: BTreeMap::from([("LOG_LEVEL".into(), "debug".into())]),
            }],
        }),
        check_interval_seconds: None,
    }
}

fn readiness(passing: bool, expired: bool) -> ReadinessStatus {
    ReadinessStatus {
        score: if passing { 100 } else { 40 },
        min_score: 80,
        passing,
        expired,
        expires: Some("2099-01-01".into()),
        done_count: 1,
        partial_count: 1,
        not_done_count: 2,
        deferred_count: 0,
        ..ReadinessStatus::default()
    }
}

fn finding(code: &str, severity: Severity) -> FindingStatus {
    FindingStatus {
        code: code.into(),
        severity,
        category: "RuntimeDrift".into(),
        subject: Some("interface/http".into()),
        contract_path: Some("interfaces[name=http]".into()),
        message: "m".into(),
        evidence_refs: vec![],
    }
}

fn evaluated(status: ContractStatus, findings: Vec<FindingStatus>) -> Evaluated {
    let count = |s| findings.iter().filter(|f| f.severity == s).count() as i32;
    Evaluated {
        summary: Summary {
            error_count: count(Severity::Error),
            warning_count: count(Severity::Warning),
            info_count: count(Severity::Info),
            unknown_count: count(Severity::Unknown),
        },
        findings,
        coverage: EvaluationCoverage {
            evaluated: 3,
            required: 4,
        },
        status,
        readiness: None,
    }
}

fn observed(api_errors: Vec<String>) -> Observed {
    Observed {
        windows: vec![
            ObservationWindow {
                kind: ObservationWindowKind::Interface,
                subject: "http".into(),
                first_observed_negative_at: t(-5),
            },
            ObservationWindow {
                kind: ObservationWindowKind::Dependency,
                subject: "db".into(),
                first_observed_negative_at: t(-9),
            },
        ],
        api_errors,
        resources: Some(ResourcesStatus {
            service: Some(ResourceStatus {
                name: "orders".into(),
                kind: None,
                exists: true,
            }),
            workload: None,
        }),
        observed_runtime: None,
        window_due_at: None,
        evidence: None,
    }
}

struct Case<'a> {
    spec: PactoSpec,
    generation: i64,
    previous: Option<&'a PactoStatus>,
    now: Time,
    resolution: Resolution,
    runtime: Option<Runtime>,
    revision: Option<EnsuredRevision>,
}

impl Case<'_> {
    fn run(&self) -> Composed {
        compose(&Pass {
            spec: &self.spec,
            generation: Some(self.generation),
            previous: self.previous,
            now: self.now.clone(),
            resolution: &self.resolution,
            runtime: self.runtime.as_ref(),
            revision: self.revision.as_ref(),
        })
    }
}

fn case<'a>(targeted: bool, resolution: Resolution, runtime: Option<Runtime>) -> Case<'a> {
    Case {
        spec: spec(targeted),
        generation: 1,
        previous: None,
        now: t(0),
        resolution,
        runtime,
        revision: None,
    }
}

fn cond<'a>(s: &'a PactoStatus, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    find_condition(&s.conditions, type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

fn reasons(c: &Composed) -> Vec<&'static str> {
    c.events.iter().map(|e| e.reason).collect()
}

#[test]
fn reference_only_contract() {
    let mut c = case(
        false,
        resolved(CONTRACT, false),
        Some(Runtime::Reference(Ok(None))),
    );
    c.revision = Some(EnsuredRevision {
        name: "orders-1-2-0-0123456".into(),
    });
    let out = c.run();
    let s = &out.status;
    assert!(out.changed);
    assert_eq!(s.contract_status, Some(ContractStatus::Reference));
    assert_eq!(s.summary, Some(Summary::default()));
    assert_eq!(
        cond(s, CONTRACT_VALID),
        Some((
            "True",
            "ReferenceOnly",
            "Reference contract orders v1.2.0 is valid"
        ))
    );
    assert_eq!(cond(s, RUNTIME_OBSERVED), None);
    assert_eq!(cond(s, READINESS_SATISFIED), None);
    assert_eq!(s.evaluation_coverage, None);
    assert_eq!(s.current_revision.as_deref(), Some("orders-1-2-0-0123456"));
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(s.last_reconciled_at, Some(t(0)));
    assert_eq!(s.resolution_policy, Some(ResolutionPolicy::PinnedTag));
    // Contract-derived fields.
    assert_eq!(s.contract_version.as_deref(), Some("1.2.0"));
    let info = s.contract.as_ref().unwrap();
    assert_eq!(info.owner_display.as_deref(), Some("shop"));
    assert_eq!(info.resolved_ref.as_deref(), Some("reg.local/orders:1.2.0"));
    assert_eq!(s.interfaces[0].interface_type, InterfaceType::Openapi);
    assert_eq!(
        s.capabilities.as_ref().unwrap()[0].capability_type,
        "health"
    );
    let config = &s.configurations.as_ref().unwrap()[0];
    assert_eq!(config.value_keys, ["DB_PASSWORD", "LOG_LEVEL"]);
    assert_eq!(config.secret_keys, ["DB_PASSWORD"]);
    assert_eq!(config.overridden_keys, ["LOG_LEVEL"]);
    assert_eq!(config.properties.len(), 2);
    assert_eq!(s.dependencies[0].compatibility.as_deref(), Some("^1.0.0"));
    let policy = &s.policies.as_ref().unwrap()[0];
    assert!(policy.has_schema);
    assert_eq!(s.metadata["tier"], "1");
    assert_eq!(s.metadata["tags"], "[a b]");
    assert_eq!(s.validation.as_ref().unwrap().warnings.len(), 1);
    // No events: Reference from "" is not a recovery, and RevisionCreated is reported where the
    // revision is created (reconcile/revisions), not by the composed pass.
    assert!(reasons(&out).is_empty(), "{:?}", out.events);
}

#[test]
fn empty_lists_are_initialised_on_the_success_path() {
    let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: a\n  version: 1.0.0\n";
    let out = case(
        false,
        resolved(yaml, false),
        Some(Runtime::Reference(Ok(None))),
    )
    .run();
    let json = serde_json::to_value(&out.status).unwrap();
    assert_eq!(json["configurations"], serde_json::json!([]));
    assert_eq!(json["policies"], serde_json::json!([]));
    assert_eq!(json["capabilities"], serde_json::json!([]));
}

#[test]
fn targeted_non_compliant_with_counts_event() {
    let out = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::Observed {
            observed: Box::new(observed(vec![])),
            evaluated: Ok(evaluated(
                ContractStatus::NonCompliant,
                vec![
                    finding("TAG_NOT_DIGEST", Severity::Warning),
                    finding("INTERFACE_ABSENT", Severity::Error),
                    finding("DEPENDENCY_UNREACHABLE", Severity::Error),
                ],
            )),
        }),
    )
    .run();
    let s = &out.status;
    assert_eq!(s.contract_status, Some(ContractStatus::NonCompliant));
    assert_eq!(
        cond(s, CONTRACT_VALID),
        Some(("True", "Parsed", "Contract orders v1.2.0 is valid"))
    );
    assert_eq!(
        cond(s, RUNTIME_OBSERVED),
        Some(("True", "Found", "Runtime evidence collected successfully"))
    );
    assert_eq!(s.findings.len(), 3);
    assert_eq!(
        s.evaluation_coverage,
        Some(EvaluationCoverage {
            evaluated: 3,
            required: 4
        })
    );
    // Windows sorted by (kind, subject): dependency < interface.
    assert_eq!(s.observation_windows[0].subject, "db");
    assert!(s.resources.is_some());
    assert_eq!(reasons(&out), [event_reason::VALIDATION_FAILED]);
    assert_eq!(
        out.events[0].message,
        "ContractStatus: NonCompliant, 2 errors, 1 warnings"
    );
    assert_eq!(out.events[0].kind, EventKind::Warning);
}

#[test]
fn observation_failure_sets_runtime_observed_false_with_first_error() {
    let out = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::Observed {
            observed: Box::new(observed(vec![
                "services \"orders\" is forbidden".into(),
                "second".into(),
            ])),
            evaluated: Ok(evaluated(
                ContractStatus::Unknown,
                vec![finding("COLLECTION_FAILED", Severity::Unknown)],
            )),
        }),
    )
    .run();
    assert_eq!(
        cond(&out.status, RUNTIME_OBSERVED),
        Some((
            "False",
            "ObservationFailed",
            "Runtime observation failed: services \"orders\" is forbidden"
        ))
    );
    assert_eq!(
        out.events[0].message,
        "ContractStatus: Unknown, 0 errors, 0 warnings"
    );
}

#[test]
fn invalid_contract_fail_path() {
    let previous = PactoStatus {
        conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: RUNTIME_OBSERVED.into(),
            status: "True".into(),
            reason: "Found".into(),
            message: "x".into(),
            observed_generation: Some(1),
            last_transition_time: t(-100),
        }],
        contract_status: Some(ContractStatus::Compliant),
        current_revision: Some("orders-1-1-0-aaaaaaa".into()),
        observation_windows: observed(vec![]).windows,
        ..PactoStatus::default()
    };
    let validation = schema_violation();
    let mut c = case(
        true,
        Resolution::Invalid {
            message: "Contract validation failed: service.version: bad".into(),
            validation: validation.clone(),
            policy: Some(ResolutionPolicy::PinnedTag),
        },
        None,
    );
    c.previous = Some(&previous);
    c.generation = 2;
    let out = c.run();
    let s = &out.status;
    assert_eq!(s.contract_status, Some(ContractStatus::Invalid));
    assert_eq!(s.summary.unwrap().error_count, 1);
    assert_eq!(s.validation, Some(validation));
    assert_eq!(
        cond(s, CONTRACT_VALID),
        Some((
            "False",
            "Invalid",
            "Contract validation failed: service.version: bad"
        ))
    );
    assert_eq!(
        cond(s, RUNTIME_OBSERVED),
        None,
        "removed on a ContractValid failure"
    );
    assert_eq!(
        s.current_revision.as_deref(),
        Some("orders-1-1-0-aaaaaaa"),
        "kept"
    );
    assert!(
        s.observation_windows.is_empty(),
        "a ContractValid failure ends the negative streaks"
    );
    assert_eq!(s.observed_generation, Some(2));
    assert_eq!(
        find_condition(&s.conditions, CONTRACT_VALID)
            .unwrap()
            .observed_generation,
        Some(2)
    );
    assert_eq!(reasons(&out), [event_reason::CONTRACT_INVALID]);
    assert_eq!(
        out.events[0].message,
        "Contract validation failed: service.version: bad"
    );

    // Staying Invalid emits nothing and writes nothing.
    let again = Case {
        previous: Some(s),
        now: t(300),
        ..c
    }
    .run();
    assert!(again.events.is_empty());
    assert!(!again.changed);
    assert_eq!(again.status.last_reconciled_at, s.last_reconciled_at);
}

#[test]
fn unavailable_contract_fail_path_has_no_validation() {
    let out = case(
        false,
        Resolution::Unavailable {
            message: "registry reg.local unreachable".into(),
            policy: Some(ResolutionPolicy::Latest),
        },
        None,
    )
    .run();
    let s = &out.status;
    assert_eq!(s.contract_status, Some(ContractStatus::Unknown));
    assert_eq!(s.summary.unwrap().unknown_count, 1);
    assert_eq!(s.validation, None);
    assert_eq!(s.resolution_policy, Some(ResolutionPolicy::Latest));
    assert_eq!(
        cond(s, CONTRACT_VALID),
        Some(("Unknown", "Unavailable", "registry reg.local unreachable"))
    );
    assert_eq!(reasons(&out), [event_reason::CONTRACT_UNAVAILABLE]);
}

#[test]
fn backend_down_is_unknown_naming_the_service_never_a_verdict() {
    // Resolver down.
    let out = case(
        true,
        Resolution::Failed(BackendFailure::new(
            Backend::ContractResolver,
            "connection refused",
        )),
        None,
    )
    .run();
    assert_eq!(out.status.contract_status, Some(ContractStatus::Unknown));
    assert_eq!(
        cond(&out.status, CONTRACT_VALID),
        Some((
            "Unknown",
            "Unavailable",
            "contract-resolver unavailable: connection refused"
        ))
    );
    assert_eq!(out.status.validation, None);
    assert_eq!(
        out.status.resolution_policy,
        Some(ResolutionPolicy::PinnedTag)
    );

    // Observer down.
    let out = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::ObserveFailed(BackendFailure::new(
            Backend::Observer,
            "deadline exceeded",
        ))),
    )
    .run();
    assert_eq!(out.status.contract_status, Some(ContractStatus::Unknown));
    assert_eq!(cond(&out.status, CONTRACT_VALID).unwrap().1, "Parsed");
    assert_eq!(
        cond(&out.status, RUNTIME_OBSERVED),
        Some((
            "False",
            "ObservationFailed",
            "observer unavailable: deadline exceeded"
        ))
    );
    assert_eq!(
        out.events[0].message,
        "ContractStatus: Unknown, 0 errors, 0 warnings"
    );

    // Evaluator down after a good observation: the observation stands on its own
    // (RuntimeObserved True/Found, its windows and resources); the verdict is Unknown.
    let out = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::Observed {
            observed: Box::new(observed(vec![])),
            evaluated: Err(BackendFailure::new(Backend::Evaluator, "unavailable")),
        }),
    )
    .run();
    assert_eq!(out.status.contract_status, Some(ContractStatus::Unknown));
    assert_eq!(
        cond(&out.status, RUNTIME_OBSERVED),
        Some(("True", "Found", "Runtime evidence collected successfully"))
    );
    assert!(out.status.findings.is_empty());
    assert_eq!(out.status.summary.unwrap().unknown_count, 1);
    assert_eq!(out.status.observation_windows.len(), 2);
    assert!(out.status.resources.is_some());
    assert_eq!(
        out.events[0].message,
        "ContractStatus: Unknown, 0 errors, 0 warnings"
    );

    // Evaluator down after an observation whose query failed: the API error stands.
    let out = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::Observed {
            observed: Box::new(observed(vec!["services \"orders\" is forbidden".into()])),
            evaluated: Err(BackendFailure::new(Backend::Evaluator, "unavailable")),
        }),
    )
    .run();
    assert_eq!(out.status.contract_status, Some(ContractStatus::Unknown));
    assert_eq!(
        cond(&out.status, RUNTIME_OBSERVED),
        Some((
            "False",
            "ObservationFailed",
            "Runtime observation failed: services \"orders\" is forbidden"
        ))
    );
}

#[test]
fn windows_end_when_the_pacto_stops_being_observed() {
    let targeted = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::Observed {
            observed: Box::new(observed(vec![])),
            evaluated: Ok(evaluated(ContractStatus::Unknown, vec![])),
        }),
    )
    .run()
    .status;
    assert_eq!(targeted.observation_windows.len(), 2);

    // Reference-only: the windows are cleared with RuntimeObserved.
    let mut c = case(
        false,
        resolved(CONTRACT, false),
        Some(Runtime::Reference(Ok(None))),
    );
    c.previous = Some(&targeted);
    let reference = c.run();
    assert!(reference.status.observation_windows.is_empty());
    assert_eq!(cond(&reference.status, RUNTIME_OBSERVED), None);

    // Every ContractValid failure clears them too.
    for resolution in [
        Resolution::Invalid {
            message: "bad".into(),
            validation: ValidationResult::default(),
            policy: None,
        },
        Resolution::Unavailable {
            message: "registry down".into(),
            policy: None,
        },
        Resolution::Failed(BackendFailure::new(Backend::ContractResolver, "down")),
    ] {
        let mut c = case(true, resolution.clone(), None);
        c.previous = Some(&targeted);
        let out = c.run();
        assert!(
            out.status.observation_windows.is_empty(),
            "{resolution:?}: {:?}",
            out.status.observation_windows
        );
    }

    // The observer down keeps them: a streak survives an outage of collection.
    let mut c = case(
        true,
        resolved(CONTRACT, false),
        Some(Runtime::ObserveFailed(BackendFailure::new(
            Backend::Observer,
            "down",
        ))),
    );
    c.previous = Some(&targeted);
    let out = c.run();
    assert_eq!(out.status.observation_windows, targeted.observation_windows);
}

#[test]
fn every_condition_state_is_one_the_api_defines() {
    use pacto_status_writer::ConditionState;
    let mut seen = std::collections::BTreeSet::new();
    for state in ConditionState::ALL {
        let (type_, status, reason) = state.parts();
        assert!(
            [CONTRACT_VALID, RUNTIME_OBSERVED, READINESS_SATISFIED].contains(&type_),
            "{state:?}"
        );
        assert!(!reason.is_empty());
        assert!(
            seen.insert((type_, status.as_str(), reason)),
            "{state:?} twice"
        );
    }
    // Exactly the guide's table ("Reading the conditions"): RuntimeObserved has two states.
    let guide: std::collections::BTreeSet<_> = [
        (CONTRACT_VALID, "True", "Parsed"),
        (CONTRACT_VALID, "True", "ReferenceOnly"),
        (CONTRACT_VALID, "False", "Invalid"),
        (CONTRACT_VALID, "Unknown", "Unavailable"),
        (RUNTIME_OBSERVED, "True", "Found"),
        (RUNTIME_OBSERVED, "False", "ObservationFailed"),
        (READINESS_SATISFIED, "True", "Satisfied"),
        (READINESS_SATISFIED, "False", "BelowMinScore"),
        (READINESS_SATISFIED, "False", "Expired"),
    ]
    .into_iter()
    .collect();
    assert_eq!(seen, guide);
}

#[test]
fn status_transition_gating() {
    use ContractStatus::*;
    // (prev, new, expected event)
    let table: &[(Option<ContractStatus>, ContractStatus, Option<&str>)] = &[
        (None, Compliant, None),
        (None, Warning, Some(event_reason::VALIDATION_FAILED)),
        (None, Unknown, Some(event_reason::VALIDATION_FAILED)),
        (
            Some(Warning),
            NonCompliant,
            Some(event_reason::VALIDATION_FAILED),
        ),
        (
            Some(NonCompliant),
            Unknown,
            Some(event_reason::VALIDATION_FAILED),
        ),
        (Some(NonCompliant), NonCompliant, None),
        (Some(Unknown), Unknown, None),
        (
            Some(NonCompliant),
            Compliant,
            Some(event_reason::CONTRACT_RECOVERED),
        ),
        (
            Some(Invalid),
            Compliant,
            Some(event_reason::CONTRACT_RECOVERED),
        ),
        (Some(Compliant), Compliant, None),
        (Some(Reference), Compliant, None),
    ];
    for (prev, new, expected) in table {
        let previous = PactoStatus {
            contract_status: *prev,
            ..PactoStatus::default()
        };
        let mut c = case(
            true,
            resolved(CONTRACT, false),
            Some(Runtime::Observed {
                observed: Box::new(observed(vec![])),
                evaluated: Ok(evaluated(*new, vec![])),
            }),
        );
        c.previous = Some(&previous);
        let out = c.run();
        let got: Vec<_> = reasons(&out);
        assert_eq!(
            got,
            expected.iter().copied().collect::<Vec<_>>(),
            "{prev:?} -> {new:?}"
        );
        if *expected == Some(event_reason::CONTRACT_RECOVERED) {
            assert_eq!(
                out.events[0].message,
                format!("ContractStatus: {}, 0 errors, 0 warnings", new.as_str())
            );
            assert_eq!(out.events[0].kind, EventKind::Normal);
        }
    }
    // Same-status switch of cause (runtime Unknown -> registry Unknown) emits nothing.
    let previous = PactoStatus {
        contract_status: Some(Unknown),
        ..PactoStatus::default()
    };
    let mut c = case(
        true,
        Resolution::Unavailable {
            message: "x".into(),
            policy: None,
        },
        None,
    );
    c.previous = Some(&previous);
    assert!(c.run().events.is_empty());
}

#[test]
fn readiness_condition_pair_and_absence() {
    let runtime = |r: ReadinessStatus| Some(Runtime::Reference(Ok(Some(r))));
    // First evaluation unmet: GateUnmet.
    let out = case(
        false,
        resolved(CONTRACT, true),
        runtime(readiness(false, false)),
    )
    .run();
    assert_eq!(
        cond(&out.status, READINESS_SATISFIED),
        Some((
            "False",
            "BelowMinScore",
            "readiness score 40 below minScore 80 (1 done, 1 partial, 2 not-done, 0 deferred)"
        ))
    );
    assert_eq!(reasons(&out), [event_reason::READINESS_GATE_UNMET]);
    let unmet = out.status.clone();

    // Still unmet (now expired): same status, no event, lastTransitionTime kept.
    let mut c = case(
        false,
        resolved(CONTRACT, true),
        runtime(readiness(false, true)),
    );
    c.previous = Some(&unmet);
    c.now = t(60);
    let out = c.run();
    assert!(out.events.is_empty());
    let condition = find_condition(&out.status.conditions, READINESS_SATISFIED).unwrap();
    assert_eq!(condition.reason, "Expired");
    assert_eq!(
        condition.message,
        "readiness assessment expired (expires 2099-01-01); score 40 below minScore 80 (1 done, 1 partial, 2 not-done, 0 deferred)"
    );
    assert_eq!(condition.last_transition_time, t(0), "sticky");

    // Met again: Recovered, transition time moves.
    let mut c = case(
        false,
        resolved(CONTRACT, true),
        runtime(readiness(true, false)),
    );
    c.previous = Some(&unmet);
    c.now = t(120);
    let out = c.run();
    assert_eq!(reasons(&out), [event_reason::READINESS_RECOVERED]);
    let condition = find_condition(&out.status.conditions, READINESS_SATISFIED).unwrap();
    assert_eq!(condition.message, "readiness score 100 meets minScore 80");
    assert_eq!(condition.last_transition_time, t(120));
    assert_eq!(out.status.readiness.as_ref().unwrap().score, 100);

    // Contract stops declaring readiness: the condition is removed.
    let mut c = case(
        false,
        resolved(CONTRACT, false),
        Some(Runtime::Reference(Ok(None))),
    );
    c.previous = Some(&unmet);
    let out = c.run();
    assert_eq!(cond(&out.status, READINESS_SATISFIED), None);
    assert_eq!(out.status.readiness, None);

    // A fail path leaves the readiness condition as it was.
    let mut c = case(
        false,
        Resolution::Unavailable {
            message: "x".into(),
            policy: None,
        },
        None,
    );
    c.previous = Some(&unmet);
    c.generation = 5;
    let out = c.run();
    let condition = find_condition(&out.status.conditions, READINESS_SATISFIED).unwrap();
    assert_eq!(
        condition.observed_generation,
        Some(1),
        "stale, not re-evaluated"
    );

    // Evaluator down for a reference contract with readiness: previous assessment kept.
    let mut c = case(
        false,
        resolved(CONTRACT, true),
        Some(Runtime::Reference(Err(BackendFailure::new(
            Backend::Evaluator,
            "down",
        )))),
    );
    c.previous = Some(&unmet);
    let out = c.run();
    assert_eq!(out.status.readiness, unmet.readiness);
    // The Reference verdict needs no evaluator; only readiness waits for the retry.
    assert_eq!(out.status.contract_status, Some(ContractStatus::Reference));
    assert!(out.events.is_empty());
}

#[test]
fn nothing_changed_means_no_write() {
    let mk = |previous: Option<&PactoStatus>, now: Time| {
        compose(&Pass {
            spec: &spec(true),
            generation: Some(3),
            previous,
            now,
            resolution: &resolved(CONTRACT, true),
            runtime: Some(&Runtime::Observed {
                observed: Box::new(observed(vec![])),
                evaluated: Ok(Evaluated {
                    readiness: Some(readiness(true, false)),
                    ..evaluated(ContractStatus::Compliant, vec![])
                }),
            }),
            revision: Some(&EnsuredRevision {
                name: "orders-1-2-0-0123456".into(),
            }),
        })
    };
    let first = mk(None, t(0));
    assert!(first.changed);
    let second = mk(Some(&first.status), t(300));
    assert!(!second.changed, "steady state: no write");
    assert!(second.events.is_empty());
    assert_eq!(second.status, first.status);

    // A spec change (generation) is a change: conditions carry the new observedGeneration.
    let third = compose(&Pass {
        generation: Some(4),
        ..Pass {
            spec: &spec(true),
            generation: None,
            previous: Some(&first.status),
            now: t(600),
            resolution: &resolved(CONTRACT, true),
            runtime: Some(&Runtime::Observed {
                observed: Box::new(observed(vec![])),
                evaluated: Ok(Evaluated {
                    readiness: Some(readiness(true, false)),
                    ..evaluated(ContractStatus::Compliant, vec![])
                }),
            }),
            revision: None,
        }
    });
    assert!(third.changed);
    assert_eq!(third.status.last_reconciled_at, Some(t(600)));
    assert!(
        third
            .status
            .conditions
            .iter()
            .all(|c| c.observed_generation == Some(4))
    );
    assert_eq!(
        third.status.current_revision.as_deref(),
        Some("orders-1-2-0-0123456"),
        "kept"
    );
}

#[test]
fn policy_from_reference_shape() {
    let mut s = spec(false);
    assert_eq!(derive_policy(&s), Some(ResolutionPolicy::PinnedTag));
    s.contract_ref.oci = Some("reg.local:5000/orders".into());
    assert_eq!(derive_policy(&s), Some(ResolutionPolicy::Latest));
    s.contract_ref.oci = Some("reg.local/orders@sha256:abc".into());
    assert_eq!(derive_policy(&s), Some(ResolutionPolicy::PinnedDigest));
    s.contract_ref.inline = Some("x".into());
    assert_eq!(derive_policy(&s), None);
}

/// The passes of the transition table: every resolution outcome, and for a resolved contract
/// every runtime outcome the helpers build (reference with and without readiness, each evaluated
/// verdict, a failing readiness gate, each backend failure).
fn passes() -> Vec<(bool, Resolution, Option<Runtime>)> {
    let down = |backend| BackendFailure::new(backend, "connection refused");
    let targeted = |status, findings, readiness: Option<ReadinessStatus>| {
        Some(Runtime::Observed {
            observed: Box::new(observed(vec![])),
            evaluated: Ok(Evaluated {
                readiness,
                ..evaluated(status, findings)
            }),
        })
    };
    let invalid = schema_violation();
    vec![
        (
            false,
            resolved(CONTRACT, true),
            Some(Runtime::Reference(Ok(Some(readiness(true, false))))),
        ),
        (
            false,
            resolved(CONTRACT, true),
            Some(Runtime::Reference(Ok(Some(readiness(false, false))))),
        ),
        (
            false,
            resolved(CONTRACT, true),
            Some(Runtime::Reference(Ok(Some(readiness(true, true))))),
        ),
        (
            false,
            resolved(CONTRACT, false),
            Some(Runtime::Reference(Ok(None))),
        ),
        (
            false,
            resolved(CONTRACT, true),
            Some(Runtime::Reference(Err(down(Backend::Evaluator)))),
        ),
        (
            true,
            resolved(CONTRACT, false),
            targeted(ContractStatus::Compliant, vec![], None),
        ),
        (
            true,
            resolved(CONTRACT, false),
            targeted(
                ContractStatus::Warning,
                vec![finding("PORT_MISMATCH", Severity::Warning)],
                None,
            ),
        ),
        (
            true,
            resolved(CONTRACT, false),
            targeted(
                ContractStatus::NonCompliant,
                vec![finding("WORKLOAD_MISMATCH", Severity::Error)],
                None,
            ),
        ),
        (
            true,
            resolved(CONTRACT, false),
            targeted(
                ContractStatus::Unknown,
                vec![finding("PROBE_UNKNOWN", Severity::Unknown)],
                None,
            ),
        ),
        (
            true,
            resolved(CONTRACT, true),
            targeted(
                ContractStatus::Compliant,
                vec![],
                Some(readiness(false, false)),
            ),
        ),
        (
            true,
            resolved(CONTRACT, true),
            targeted(
                ContractStatus::Compliant,
                vec![],
                Some(readiness(true, false)),
            ),
        ),
        (
            true,
            resolved(CONTRACT, false),
            Some(Runtime::Observed {
                observed: Box::new(observed(vec![])),
                evaluated: Err(down(Backend::Evaluator)),
            }),
        ),
        (
            true,
            resolved(CONTRACT, false),
            Some(Runtime::ObserveFailed(down(Backend::Observer))),
        ),
        (
            false,
            Resolution::Invalid {
                message: "service.version: bad".into(),
                validation: invalid,
                policy: Some(ResolutionPolicy::PinnedTag),
            },
            None,
        ),
        (
            false,
            Resolution::Unavailable {
                message: "registry reg.local unreachable".into(),
                policy: Some(ResolutionPolicy::Latest),
            },
            None,
        ),
        (
            true,
            Resolution::Failed(down(Backend::ContractResolver)),
            None,
        ),
    ]
}

#[test]
fn every_event_of_every_transition_has_one_of_the_eight_reasons() {
    // Every transition of the table: no previous status, or the status each pass composes,
    // followed by each pass.
    let mut previous: Vec<Option<PactoStatus>> = vec![None];
    previous.extend(passes().into_iter().map(|(targeted, resolution, runtime)| {
        Some(case(targeted, resolution, runtime).run().status)
    }));
    let mut reached = std::collections::BTreeSet::new();
    for (i, before) in previous.iter().enumerate() {
        for (j, (targeted, resolution, runtime)) in passes().into_iter().enumerate() {
            let mut next = case(targeted, resolution, runtime);
            next.previous = before.as_ref();
            next.now = t(60);
            for event in next.run().events {
                assert!(
                    event_reason::ALL.contains(&event.reason),
                    "transition {i} -> {j} emitted {:?}, not one of the eight reasons",
                    event.reason
                );
                reached.insert(event.reason);
            }
        }
    }
    // The table reaches every reason compose emits (RevisionCreated and TagOverwritten are
    // published by the revision step and the mirror, not by compose).
    assert_eq!(
        reached,
        std::collections::BTreeSet::from([
            event_reason::CONTRACT_INVALID,
            event_reason::CONTRACT_UNAVAILABLE,
            event_reason::VALIDATION_FAILED,
            event_reason::CONTRACT_RECOVERED,
            event_reason::READINESS_GATE_UNMET,
            event_reason::READINESS_RECOVERED,
        ])
    );
}

/// A failed validation with one SCHEMA_VIOLATION error at `service.version`.
fn schema_violation() -> ValidationResult {
    ValidationResult {
        valid: false,
        errors: vec![ValidationIssue {
            code: Some("SCHEMA_VIOLATION".into()),
            path: Some("service.version".into()),
            message: "bad".into(),
        }],
        ..ValidationResult::default()
    }
}
