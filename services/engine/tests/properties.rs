//! Property tests of the engine.

use pacto_engine::*;
use proptest::prelude::*;

const NAMES: [&str; 4] = ["a", "b", "c", "orders"];

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(NAMES.to_vec()).prop_map(str::to_owned)
}

fn contract() -> impl Strategy<Value = ContractAssertions> {
    (
        prop::collection::vec(name(), 0..3),
        prop::collection::vec(
            prop_oneof![
                Just(CapabilityAssertion::Health),
                Just(CapabilityAssertion::Metrics),
                Just(CapabilityAssertion::Extension {
                    reference: "example.com/x".into()
                }),
            ],
            0..3,
        ),
        prop::collection::vec((name(), any::<bool>()), 0..3),
        prop::collection::vec((name(), any::<bool>()), 0..3),
        prop::option::of(prop::sample::select(vec![
            "service",
            "job",
            "scheduled",
            "",
        ])),
        any::<bool>(),
    )
        .prop_map(
            |(interfaces, capabilities, deps, cfgs, workload, persistent)| ContractAssertions {
                service_name: "orders".into(),
                interfaces,
                capabilities,
                dependencies: deps
                    .into_iter()
                    .map(|(n, r)| NamedAssertion::new(n, r))
                    .collect(),
                configurations: cfgs
                    .into_iter()
                    .map(|(n, r)| NamedAssertion::new(n, r))
                    .collect(),
                workload: workload.map(str::to_owned),
                persistent,
            },
        )
}

fn kind() -> impl Strategy<Value = ObservationKind> {
    prop::sample::select(ObservationKind::ALL.to_vec())
}

fn value_for(kind: ObservationKind) -> BoxedStrategy<Value> {
    match kind {
        ObservationKind::CapabilityObserved => any::<bool>()
            .prop_map(|present| Value::Capability(CapabilityValue { present }))
            .boxed(),
        ObservationKind::InterfaceObserved => any::<bool>()
            .prop_map(|present| {
                Value::Interface(InterfaceValue {
                    interface_type: "openapi".into(),
                    present,
                })
            })
            .boxed(),
        ObservationKind::DependencyReachable => any::<bool>()
            .prop_map(|reachable| Value::Dependency(DependencyValue { reachable }))
            .boxed(),
        ObservationKind::ConfigurationPresent => (any::<bool>(), any::<bool>())
            .prop_map(|(present, conformant)| {
                Value::Configuration(ConfigurationValue {
                    present,
                    conformant,
                })
            })
            .boxed(),
        ObservationKind::WorkloadObserved => {
            prop::sample::select(vec!["service", "job", "scheduled"])
                .prop_map(|t| {
                    Value::Workload(WorkloadValue {
                        workload_type: t.into(),
                    })
                })
                .boxed()
        }
        ObservationKind::PersistenceObserved => any::<bool>()
            .prop_map(|durable| Value::Persistence(PersistenceValue { durable }))
            .boxed(),
    }
}

fn non_observed() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Unsupported),
        Just(Outcome::Failed),
        Just(Outcome::Stale),
        Just(Outcome::Insufficient),
    ]
}

fn observation(observed_only: Option<bool>) -> impl Strategy<Value = Observation> {
    (
        kind(),
        name(),
        any::<bool>(),
        non_observed(),
        prop::sample::select(vec!["k8s-observer", "ebpf", "k8s-observer+ebpf"]),
    )
        .prop_flat_map(move |(kind, name, observed, other, collector)| {
            let observed = observed_only.unwrap_or(observed);
            let provenance = Provenance::new(
                collector,
                Timestamp::from_unix(1_787_000_000, 0).unwrap_or_default(),
            );
            if observed {
                value_for(kind)
                    .prop_map(move |v| {
                        Observation::new(
                            kind,
                            name.clone(),
                            Outcome::Observed(v),
                            provenance.clone(),
                        )
                    })
                    .boxed()
            } else {
                Just(Observation::new(kind, name, other, provenance)).boxed()
            }
        })
}

fn evidence_of(observations: Vec<Observation>) -> EvidenceSet {
    EvidenceSet {
        subject: SubjectRef::new("service", "shop/orders"),
        contract_ref: "oci://r/x@sha256:00".into(),
        source: "k8s".into(),
        observed_at: Timestamp::from_unix(1_787_000_100, 500_000_000).unwrap_or_default(),
        observations: Some(observations),
        subject_missing: false,
    }
}

fn evidence(observed_only: Option<bool>) -> impl Strategy<Value = EvidenceSet> {
    prop::collection::vec(observation(observed_only), 0..12).prop_map(evidence_of)
}

fn rank(s: ContractStatus) -> u8 {
    s.ladder_rank()
}

/// The observation `evaluate` matches for a finding (first of its kind and name).
fn matched<'a>(ev: &'a EvidenceSet, f: &Finding) -> Option<&'a Observation> {
    let subject = f.subject.as_ref()?;
    let kind = match (subject.kind.as_str(), f.contract_path.as_deref()) {
        ("interface", _) => ObservationKind::InterfaceObserved,
        ("capability", _) => ObservationKind::CapabilityObserved,
        ("dependency", _) => ObservationKind::DependencyReachable,
        ("configuration", _) => ObservationKind::ConfigurationPresent,
        ("service", Some("workload")) => ObservationKind::WorkloadObserved,
        ("service", _) => ObservationKind::PersistenceObserved,
        _ => return None,
    };
    ev.observations()
        .iter()
        .find(|o| o.kind == kind && o.subject.name == subject.name)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// No outcome other than Observed ever yields a violation.
    #[test]
    fn only_observed_outcomes_yield_violations(c in contract(), ev in evidence(None)) {
        let result = evaluate(&c, &ev);
        for f in &result.findings {
            if matches!(f.severity, Severity::Error | Severity::Warning) {
                prop_assert_eq!(f.category, Some(Category::RuntimeDrift));
                let obs = matched(&ev, f);
                prop_assert!(obs.is_some(), "violation without an observation: {:?}", f);
                prop_assert!(
                    matches!(obs.map(|o| &o.outcome), Some(Outcome::Observed(_))),
                    "violation from a non-Observed outcome: {:?}", f
                );
            }
        }
    }

    /// With only non-Observed outcomes there is never an error or warning at all.
    #[test]
    fn non_observed_evidence_never_violates(c in contract(), ev in evidence(Some(false))) {
        let result = evaluate(&c, &ev);
        prop_assert!(result.findings.iter().all(|f| f.severity == Severity::Unknown));
        prop_assert_eq!(result.coverage.evaluated, 0);
        let s = result.status();
        prop_assert!(s == ContractStatus::Unknown || s == ContractStatus::Compliant);
        prop_assert_eq!(s == ContractStatus::Compliant, result.coverage.required == 0);
    }

    /// Coverage: `required` counts every required assertion, `evaluated <= required`, and one
    /// unknown finding per uncovered required assertion.
    #[test]
    fn coverage_is_consistent(c in contract(), ev in evidence(None)) {
        let result = evaluate(&c, &ev);
        prop_assert_eq!(result.coverage.required as usize, c.required_count());
        prop_assert!(result.coverage.evaluated <= result.coverage.required);
        let unknowns = result.findings.iter().filter(|f| f.severity == Severity::Unknown).count();
        prop_assert_eq!(unknowns as u32, result.coverage.required - result.coverage.evaluated);
        // every finding carries exactly one evidence ref with the set's source and time
        for f in &result.findings {
            prop_assert_eq!(f.evidence_refs.len(), 1);
            prop_assert_eq!(&f.evidence_refs[0].source, "k8s");
            prop_assert_eq!(&f.evidence_refs[0].observed_at, "2026-08-17T20:55:00Z");
            prop_assert_eq!(f.evidence_refs[0].collector.is_some(), matched(&ev, f).is_some() && f.code != "EXTENSION_EVALUATOR_UNAVAILABLE");
        }
        // the evaluation ladder and the operator ladder (docs/design/evaluation.md#status-derivation) agree on engine output
        let ingest = if result.findings.iter().any(|f| f.severity == Severity::Error) {
            ContractStatus::NonCompliant
        } else if result.coverage.required > 0 && result.coverage.evaluated < result.coverage.required {
            ContractStatus::Unknown
        } else if result.findings.iter().any(|f| f.severity == Severity::Warning) {
            ContractStatus::Warning
        } else {
            ContractStatus::Compliant
        };
        prop_assert_eq!(result.status(), ingest);
    }

    /// Adding an unknown never improves the status: a new required assertion whose evidence is
    /// missing or not Observed.
    #[test]
    fn adding_an_unknown_assertion_never_improves(
        c in contract(),
        ev in evidence(None),
        extra in name(),
        outcome in prop::option::of(non_observed()),
        which in 0usize..4,
    ) {
        let before = evaluate(&c, &ev).status();
        let mut c2 = c.clone();
        let mut ev2 = ev.clone();
        let extra = format!("extra-{extra}");
        let kind = match which {
            0 => { c2.interfaces.push(extra.clone()); ObservationKind::InterfaceObserved }
            1 => { c2.dependencies.push(NamedAssertion::new(extra.clone(), true)); ObservationKind::DependencyReachable }
            2 => { c2.configurations.push(NamedAssertion::new(extra.clone(), true)); ObservationKind::ConfigurationPresent }
            _ => { c2.capabilities.push(CapabilityAssertion::Extension { reference: extra.clone() }); ObservationKind::CapabilityObserved }
        };
        if let Some(o) = outcome {
            let p = Provenance::new("k8s-observer", Timestamp::from_unix(1_787_000_000, 0).unwrap_or_default());
            ev2.observations.get_or_insert_with(Vec::new).push(Observation::new(kind, extra, o, p));
        }
        let after = evaluate(&c2, &ev2).status();
        prop_assert!(rank(after) >= rank(before), "{:?} -> {:?}", before, after);
        prop_assert!(after != ContractStatus::Compliant && after != ContractStatus::Warning);
    }

    /// Adding an unknown never improves the status: a satisfied Observed reading replaced by a
    /// non-Observed outcome (or dropped).
    #[test]
    fn degrading_a_satisfied_reading_never_improves(
        c in contract(),
        ev in evidence(None),
        index in any::<prop::sample::Index>(),
        outcome in prop::option::of(non_observed()),
    ) {
        let before = evaluate(&c, &ev);
        let Some(observations) = ev.observations.as_ref().filter(|o| !o.is_empty()) else {
            return Ok(());
        };
        let i = index.index(observations.len());
        let mut ev2 = ev.clone();
        let list = ev2.observations.as_mut().expect("some");
        // only degrade readings that produced no violation (a satisfied or unmatched one)
        let violating = before.findings.iter().any(|f| {
            matches!(f.severity, Severity::Error | Severity::Warning)
                && matched(&ev, f).is_some_and(|o| std::ptr::eq(o, &raw const observations[i]))
        });
        if violating {
            return Ok(());
        }
        match outcome {
            Some(o) => list[i].outcome = o,
            None => { list.remove(i); }
        }
        let after = evaluate(&c, &ev2).status();
        let before = before.status();
        prop_assert!(rank(after) >= rank(before), "{:?} -> {:?}", before, after);
    }

    /// Adding an unknown finding (with its uncovered assertion) to any finding list never
    /// improves `derive_status`.
    #[test]
    fn derive_status_is_monotone_in_unknowns(
        severities in prop::collection::vec(prop::sample::select(Severity::ALL.to_vec()), 0..8),
        evaluated in 0u32..5,
        extra_required in 0u32..3,
    ) {
        let findings: Vec<Finding> = severities
            .iter()
            .map(|s| Finding {
                code: "X".into(),
                severity: *s,
                category: None,
                subject: None,
                contract_path: None,
                message: String::new(),
                evidence_refs: vec![],
            })
            .collect();
        let coverage = Coverage { evaluated, required: evaluated + extra_required };
        let before = derive_status(&findings, coverage);
        let mut more = findings.clone();
        more.push(Finding::structural("EVIDENCE_MISSING", None, "unknown"));
        let after = derive_status(&more, Coverage { evaluated, required: coverage.required + 1 });
        prop_assert!(rank(after) >= rank(before));
        prop_assert!(after == ContractStatus::Unknown || after == ContractStatus::NonCompliant);
    }

    /// JSON encode → strict decode is the identity, and the decoded set validates.
    #[test]
    fn evidence_json_round_trips(ev in evidence(None)) {
        let bytes = ev.to_json().expect("encode");
        let back = EvidenceSet::from_json(&bytes).expect("decode");
        prop_assert_eq!(&back, &ev);
        // duplicates are the only validation errors the generator can produce
        if let Err(errors) = back.validate() {
            let only_duplicates = errors
                .0
                .iter()
                .all(|e| matches!(e, ValidationError::DuplicateAssertion { .. }));
            prop_assert!(only_duplicates, "unexpected validation errors: {}", errors);
        }
    }

    /// Evaluation is deterministic and pure.
    #[test]
    fn evaluate_is_deterministic(c in contract(), ev in evidence(None)) {
        prop_assert_eq!(evaluate(&c, &ev), evaluate(&c, &ev.clone()));
    }
}
