//! Serde round-trips of sample objects, spec helpers and the condition rules (docs/design/status.md#conditions).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use pacto_api::conditions::{
    CONTRACT_VALID, ConditionStatus, NewCondition, READINESS_SATISFIED, RUNTIME_OBSERVED,
    find_condition, has_status, is_stale, reason, remove_condition, set_condition,
};
use pacto_api::*;
use proptest::prelude::*;

const PACTO_YAML: &str = r#"
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata:
  name: orders
  namespace: shop
  generation: 3
spec:
  contractRef:
    oci: oci://ghcr.io/acme/orders-pacto:1.2.0
    pullSecretRef: regcred
  target:
    serviceName: orders
    workloadRef: {name: orders-api, kind: StatefulSet}
    interfaceBindings:
      - {interface: http-api, servicePort: http}
      - {interface: grpc-api, servicePort: 9090}
    configBindings:
      - {configuration: default, kind: ConfigMap, name: orders-config, key: config.yaml, format: yaml}
      - {configuration: secrets, kind: Secret, name: orders-secrets}
  overrides:
    configurations:
      - name: default
        values: {LOG_LEVEL: debug}
  checkIntervalSeconds: 60
status:
  contractStatus: NonCompliant
  evaluationCoverage: {evaluated: 3, required: 4}
  observationWindows:
    - {kind: interface, subject: http-api, firstObservedNegativeAt: "2026-08-22T21:29:04Z"}
  resolutionPolicy: PinnedTag
  summary: {errorCount: 1, warningCount: 1, infoCount: 0, unknownCount: 1}
  contractVersion: 1.2.0
  contract:
    serviceName: orders
    version: 1.2.0
    owner: {team: shop, contacts: [{type: email, value: shop@example.com, purpose: escalation}]}
    ownerDisplay: shop
    resolvedRef: ghcr.io/acme/orders-pacto:1.2.0
  validation:
    valid: true
    warnings: [{code: TAG_NOT_DIGEST, path: "dependencies[0].ref", message: use a digest}]
  findings:
    - code: TAG_NOT_DIGEST
      severity: warning
      category: InvalidReference
      contractPath: "dependencies[0].ref"
      message: use a digest
    - code: INTERFACE_ABSENT
      severity: error
      category: RuntimeDrift
      subject: interface/http-api
      contractPath: "interfaces[name=http-api]"
      message: 'interface "http-api" is not available (zero ready endpoints beyond the stabilization window)'
      evidenceRefs:
        - {source: k8s, observedAt: "2026-08-22T21:31:04Z", collector: k8s-observer, detectedAt: "2026-08-22T21:31:04Z"}
    - code: EVIDENCE_MISSING
      severity: unknown
      category: Inconclusive
      subject: service/orders
      contractPath: workload
      message: 'no observation was produced for required service "orders"'
      evidenceRefs: [{source: k8s, observedAt: "2026-08-22T21:31:04Z"}]
  resources:
    service: {name: orders, exists: true}
    workload: {name: orders-api, kind: StatefulSet, exists: false}
  interfaces: [{name: http-api, type: openapi, ref: api/openapi.yaml, visibility: public}]
  capabilities: []
  configurations:
    - name: default
      hasSchema: true
      valueKeys: [LOG_LEVEL]
      overriddenKeys: [LOG_LEVEL]
      properties: [{key: LOG_LEVEL, value: debug, type: string}]
  dependencies: [{name: db, ref: "ghcr.io/acme/db-pacto:2", required: true, compatibility: ^2.0.0}]
  policies: []
  observedRuntime: {workloadKind: StatefulSet, hasPVC: true, hasEmptyDir: false, containerImages: [acme/orders:1.2.0]}
  readiness:
    score: 80
    minScore: 70
    passing: true
    totalWeight: 100
    earnedWeight: 80
    expires: "2027-01-01"
    expired: false
    daysRemaining: 30
    doneCount: 1
    partialCount: 1
    notDoneCount: 0
    deferredCount: 1
    claims:
      - {id: runbook, type: url, status: done, weight: 60, earnedWeight: 60, excluded: false}
      - {id: dashboards, type: url, status: not-done, weight: 40, earnedWeight: 0, excluded: false}
  metadata: {tier: "1"}
  conditions:
    - {type: ContractValid, status: "True", reason: Parsed, message: Contract orders v1.2.0 is valid, lastTransitionTime: "2026-08-22T21:00:00Z", observedGeneration: 3}
  currentRevision: orders-1-2-0-abcdef1
  lastReconciledAt: "2026-08-22T21:31:04Z"
  observedGeneration: 3
"#;

#[test]
fn pacto_sample_round_trips() -> anyhow::Result<()> {
    let pacto: Pacto = serde_norway::from_str(PACTO_YAML)?;
    let spec = &pacto.spec;
    assert_eq!(spec.check_interval_seconds(), 60);
    assert!(!spec.is_reference());
    assert_eq!(
        spec.resolved_workload(),
        Some(("orders-api".into(), WorkloadKind::StatefulSet))
    );
    assert!(spec.workload_explicit());
    let status = pacto.status.as_ref().expect("status");
    assert_eq!(status.contract_status, Some(ContractStatus::NonCompliant));
    assert_eq!(
        status.findings[1].evidence_refs[0].collector.as_deref(),
        Some("k8s-observer")
    );
    assert_eq!(status.findings[2].evidence_refs[0].collector, None);
    assert_eq!(status.capabilities.as_deref(), Some(&[][..]));
    // JSON round trip is lossless, and the empty lists stay `[]`
    let json = serde_json::to_value(&pacto)?;
    assert_eq!(json["status"]["capabilities"], serde_json::json!([]));
    assert_eq!(json["status"]["policies"], serde_json::json!([]));
    assert_eq!(
        json["status"]["observedRuntime"]["hasPVC"],
        serde_json::json!(true)
    );
    assert_eq!(json["status"]["observationWindows"][0]["kind"], "interface");
    assert_eq!(
        json["spec"]["target"]["interfaceBindings"][1]["servicePort"],
        9090
    );
    let back: Pacto = serde_json::from_value(json)?;
    assert_eq!(back, pacto);
    // YAML round trip too
    let yaml = serde_norway::to_string(&pacto)?;
    let again: Pacto = serde_norway::from_str(&yaml)?;
    assert_eq!(again, pacto);
    Ok(())
}

#[test]
fn unknown_enum_values_are_rejected() {
    let bad = PACTO_YAML.replace("kind: StatefulSet}", "kind: DaemonSet}");
    let err = serde_norway::from_str::<Pacto>(&bad).expect_err("DaemonSet is not a workload kind");
    assert!(err.to_string().contains("DaemonSet"), "{err}");
}

#[test]
fn reference_only_and_defaults() -> anyhow::Result<()> {
    let minimal: Pacto = serde_json::from_value(serde_json::json!({
        "apiVersion": "pacto.trianalab.io/v1alpha1",
        "kind": "Pacto",
        "metadata": {"name": "lib", "namespace": "x"},
        "spec": {"contractRef": {"inline": "pactoVersion: \"2.0\""}}
    }))?;
    assert!(minimal.spec.is_reference());
    assert_eq!(
        minimal.spec.check_interval_seconds(),
        DEFAULT_CHECK_INTERVAL_SECONDS
    );
    assert_eq!(minimal.spec.resolved_workload(), None);
    assert!(!minimal.spec.workload_explicit());
    // serialising does not invent fields
    let json = serde_json::to_value(&minimal.spec)?;
    assert_eq!(
        json,
        serde_json::json!({"contractRef": {"inline": "pactoVersion: \"2.0\""}})
    );

    let mut spec = minimal.spec.clone();
    spec.check_interval_seconds = Some(0);
    assert_eq!(spec.check_interval_seconds(), 300, "≤0 falls back to 5 min");
    spec.target = Some(TargetRef::default());
    assert!(spec.is_reference(), "an empty target is reference-only");
    spec.target = Some(TargetRef {
        service_name: Some("orders".into()),
        ..TargetRef::default()
    });
    assert!(!spec.is_reference());
    assert_eq!(
        spec.resolved_workload(),
        Some(("orders".into(), WorkloadKind::Deployment))
    );
    spec.target = Some(TargetRef {
        workload_ref: Some(WorkloadRef {
            name: "batch".into(),
            kind: None,
        }),
        ..TargetRef::default()
    });
    assert!(!spec.is_reference(), "a workloadRef alone is a target");
    assert_eq!(
        spec.resolved_workload(),
        Some(("batch".into(), WorkloadKind::Deployment))
    );
    assert!(!spec.workload_explicit(), "kind not explicit");
    Ok(())
}

#[test]
fn revision_and_node_observation_round_trip() -> anyhow::Result<()> {
    let revision: PactoRevision = serde_norway::from_str(
        r#"
apiVersion: pacto.trianalab.io/v1alpha1
kind: PactoRevision
metadata:
  name: orders-1-2-0-abcdef1
  labels: {pacto.trianalab.io/pacto: orders, pacto.trianalab.io/version: 1.2.0}
spec:
  version: 1.2.0
  source: {oci: "ghcr.io/acme/orders-pacto:1.2.0", digest: "sha256:aaaa"}
  pactoRef: orders
  serviceName: orders
status:
  resolved: true
  contractHash: abcdef1234
  createdAt: "2026-08-22T21:00:00Z"
  observedDigest: "sha256:aaaa"
"#,
    )?;
    assert_eq!(revision.spec.source.digest.as_deref(), Some("sha256:aaaa"));
    let back: PactoRevision = serde_json::from_value(serde_json::to_value(&revision)?)?;
    assert_eq!(back, revision);

    let nro: NodeRuntimeObservation = serde_norway::from_str(
        r#"
apiVersion: pacto.trianalab.io/v1alpha1
kind: NodeRuntimeObservation
metadata: {name: node-a, namespace: pacto-node-agent}
spec: {nodeName: node-a}
status:
  lastPublished: "2026-08-22T21:31:00Z"
  agentVersion: 0.1.0
  kernel: {release: 6.8.0, btf: true}
  collection: {state: Running}
  podCount: 1
  pods:
    - uid: 1b4e28ba-2fa1-11d2-883f-0016d3cca427
      namespace: shop
      name: orders-0
      coverage: Partial
      partialReason: started after pod
      listeners: [{protocol: TCP, port: 8080, address: 0.0.0.0}]
      connections:
        - {direction: outbound, protocol: TCP, peerIP: 10.96.0.12, peerPort: 5432, firstSeen: "2026-08-22T21:00:00Z", lastSeen: "2026-08-22T21:30:00Z", count: 12}
  truncated: false
"#,
    )?;
    let status = nro.status.as_ref().expect("status");
    assert_eq!(status.pods[0].coverage, Some(PodCoverage::Partial));
    assert_eq!(status.pods[0].connections[0].direction, Direction::Outbound);
    let json = serde_json::to_value(&nro)?;
    assert_eq!(
        json["status"]["pods"][0]["connections"][0]["peerIP"],
        "10.96.0.12"
    );
    let back: NodeRuntimeObservation = serde_json::from_value(json)?;
    assert_eq!(back, nro);
    Ok(())
}

fn time(secs: i64) -> Time {
    Time(Timestamp::from_second(1_787_000_000 + secs).expect("valid"))
}

fn cond(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    msg: &str,
    generation: i64,
) -> NewCondition<'static> {
    NewCondition {
        type_: Box::leak(type_.to_owned().into_boxed_str()),
        status,
        reason: Box::leak(reason.to_owned().into_boxed_str()),
        message: msg.to_owned(),
        observed_generation: Some(generation),
    }
}

#[test]
fn conditions_are_sticky_until_status_flips() {
    let mut conditions: Vec<Condition> = Vec::new();
    assert!(set_condition(
        &mut conditions,
        cond(
            CONTRACT_VALID,
            ConditionStatus::True,
            reason::PARSED,
            "Contract orders v1 is valid",
            1
        ),
        &time(0)
    ));
    assert_eq!(conditions[0].last_transition_time, time(0));

    // same everything: no change
    assert!(!set_condition(
        &mut conditions,
        cond(
            CONTRACT_VALID,
            ConditionStatus::True,
            reason::PARSED,
            "Contract orders v1 is valid",
            1
        ),
        &time(10)
    ));
    // reason/message/generation change but same status: lastTransitionTime stays
    assert!(set_condition(
        &mut conditions,
        cond(
            CONTRACT_VALID,
            ConditionStatus::True,
            reason::REFERENCE_ONLY,
            "Reference contract orders v1 is valid",
            2
        ),
        &time(20)
    ));
    let c = find_condition(&conditions, CONTRACT_VALID).expect("present");
    assert_eq!(c.last_transition_time, time(0));
    assert_eq!(c.reason, "ReferenceOnly");
    assert_eq!(c.observed_generation, Some(2));
    // status flip moves it
    assert!(set_condition(
        &mut conditions,
        cond(
            CONTRACT_VALID,
            ConditionStatus::False,
            reason::INVALID,
            "Contract validation failed: x",
            2
        ),
        &time(30)
    ));
    let c = find_condition(&conditions, CONTRACT_VALID).expect("present");
    assert_eq!(c.last_transition_time, time(30));
    assert!(has_status(
        &conditions,
        CONTRACT_VALID,
        ConditionStatus::False
    ));
    assert!(!has_status(
        &conditions,
        CONTRACT_VALID,
        ConditionStatus::True
    ));

    // other types are independent, appended in order
    set_condition(
        &mut conditions,
        cond(
            RUNTIME_OBSERVED,
            ConditionStatus::True,
            reason::FOUND,
            "Runtime evidence collected successfully",
            2,
        ),
        &time(40),
    );
    set_condition(
        &mut conditions,
        cond(
            READINESS_SATISFIED,
            ConditionStatus::False,
            reason::BELOW_MIN_SCORE,
            "readiness score 10 below minScore 80",
            2,
        ),
        &time(40),
    );
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        [CONTRACT_VALID, RUNTIME_OBSERVED, READINESS_SATISFIED]
    );

    // removal
    assert!(remove_condition(&mut conditions, RUNTIME_OBSERVED));
    assert!(!remove_condition(&mut conditions, RUNTIME_OBSERVED));
    assert!(find_condition(&conditions, RUNTIME_OBSERVED).is_none());
    assert_eq!(conditions.len(), 2);
}

#[test]
fn staleness_by_observed_generation() {
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        cond(
            CONTRACT_VALID,
            ConditionStatus::True,
            reason::PARSED,
            "ok",
            2,
        ),
        &time(0),
    );
    let c = &conditions[0];
    assert!(!is_stale(c, Some(2)));
    assert!(is_stale(c, Some(3)));
    assert!(!is_stale(c, None));
    let mut no_gen = c.clone();
    no_gen.observed_generation = None;
    assert!(is_stale(&no_gen, Some(1)));
    assert_eq!(
        ConditionStatus::parse("Unknown"),
        Some(ConditionStatus::Unknown)
    );
    assert_eq!(ConditionStatus::parse("maybe"), None);
}

proptest! {
    /// lastTransitionTime equals the time of the last status flip (or creation), whatever
    /// sequence of updates is applied.
    #[test]
    fn last_transition_time_tracks_status_flips(
        updates in proptest::collection::vec((0u8..3, 0u8..3, 0u8..2), 1..30)
    ) {
        let statuses = [ConditionStatus::True, ConditionStatus::False, ConditionStatus::Unknown];
        let reasons = ["A", "B", "C"];
        let mut conditions = Vec::new();
        let mut last_flip = None;
        let mut current = None;
        for (i, (s, r, m)) in updates.into_iter().enumerate() {
            let status = statuses[usize::from(s)];
            if current != Some(status) {
                last_flip = Some(i as i64);
                current = Some(status);
            }
            set_condition(
                &mut conditions,
                NewCondition {
                    type_: CONTRACT_VALID,
                    status,
                    reason: reasons[usize::from(r)],
                    message: format!("m{m}"),
                    observed_generation: Some(1),
                },
                &time(i as i64),
            );
            prop_assert_eq!(conditions.len(), 1);
            prop_assert_eq!(&conditions[0].last_transition_time, &time(last_flip.unwrap_or(0)));
            prop_assert_eq!(conditions[0].status.as_str(), status.as_str());
            prop_assert_eq!(conditions[0].reason.as_str(), reasons[usize::from(r)]);
        }
    }
}

#[test]
fn event_reasons_are_exactly_eight() {
    let mut reasons = labels::event_reason::ALL.to_vec();
    reasons.sort_unstable();
    reasons.dedup();
    assert_eq!(reasons.len(), 8);
}

#[test]
fn observation_windows_sort_by_wire_kind_then_subject() {
    let w = |kind, subject: &str| ObservationWindow {
        kind,
        subject: subject.into(),
        first_observed_negative_at: time(0),
    };
    let mut windows = vec![
        w(ObservationWindowKind::Interface, "b"),
        w(ObservationWindowKind::Capability, "health"),
        w(ObservationWindowKind::Interface, "a"),
        w(ObservationWindowKind::Dependency, "db"),
        w(ObservationWindowKind::Configuration, "default"),
    ];
    sort_observation_windows(&mut windows);
    let keys: Vec<String> = windows
        .iter()
        .map(|w| format!("{}/{}", w.kind.as_str(), w.subject))
        .collect();
    assert_eq!(
        keys,
        [
            "capability/health",
            "configuration/default",
            "dependency/db",
            "interface/a",
            "interface/b"
        ]
    );
}
