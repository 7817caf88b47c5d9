//! Strict JSON decoding (docs/design/evaluation.md#evidence-model) and `ValidateEvidenceSet`.

use pacto_engine::*;
use serde_json::{Value as Json, json};

fn observation(
    kind: &str,
    subject_kind: &str,
    name: &str,
    outcome: &str,
    value: Option<Json>,
) -> Json {
    let mut o = json!({
        "kind": kind,
        "subject": {"kind": subject_kind, "name": name},
        "outcome": outcome,
        "provenance": {"collector": "k8s-observer", "detectedAt": "2026-08-22T21:31:04Z"}
    });
    if let Some(v) = value {
        o["value"] = v;
    }
    o
}

type Mutation = Box<dyn Fn(&mut Json)>;

#[allow(clippy::needless_pass_by_value)] // reads like the JSON it builds
fn set(observations: Json) -> Json {
    json!({
        "Subject": {"kind": "service", "name": "shop/orders"},
        "ContractRef": "oci://ghcr.io/acme/orders@sha256:0000",
        "Source": "k8s",
        "ObservedAt": "2026-08-22T21:31:04.5+02:00",
        "Observations": observations
    })
}

fn decode(v: &Json) -> Result<EvidenceSet, DecodeError> {
    EvidenceSet::from_json(v.to_string().as_bytes())
}

fn decode_err(v: &Json) -> String {
    match decode(v) {
        Ok(set) => panic!("accepted: {set:?}"),
        Err(e) => pacto_contract::error_chain(&e),
    }
}

#[test]
fn decodes_every_kind_with_its_payload() {
    let doc = set(json!([
        observation(
            "CapabilityObserved",
            "capability",
            "health",
            "Observed",
            Some(json!({"present": true}))
        ),
        observation(
            "InterfaceObserved",
            "interface",
            "http",
            "Observed",
            Some(json!({"type": "openapi", "present": true}))
        ),
        observation(
            "DependencyReachable",
            "dependency",
            "db",
            "Observed",
            Some(json!({"reachable": false}))
        ),
        observation(
            "ConfigurationPresent",
            "configuration",
            "default",
            "Observed",
            Some(json!({"present": true, "conformant": false}))
        ),
        observation(
            "WorkloadObserved",
            "service",
            "orders",
            "Observed",
            Some(json!({"type": "job"}))
        ),
        observation(
            "PersistenceObserved",
            "service",
            "orders",
            "Observed",
            Some(json!({"durable": true}))
        ),
        observation(
            "InterfaceObserved",
            "interface",
            "grpc",
            "Unsupported",
            None
        ),
        observation("InterfaceObserved", "interface", "a", "Failed", None),
        observation("InterfaceObserved", "interface", "b", "Stale", None),
        observation("InterfaceObserved", "interface", "c", "Insufficient", None),
    ]));
    let ev = decode(&doc).expect("decodes");
    ev.validate().expect("valid");
    let obs = ev.observations();
    assert_eq!(obs.len(), 10);
    assert_eq!(
        obs[1].outcome,
        Outcome::Observed(Value::Interface(InterfaceValue {
            interface_type: "openapi".into(),
            present: true
        }))
    );
    assert_eq!(
        obs[3].outcome,
        Outcome::Observed(Value::Configuration(ConfigurationValue {
            present: true,
            conformant: false
        }))
    );
    assert_eq!(
        obs[4].outcome,
        Outcome::Observed(Value::Workload(WorkloadValue {
            workload_type: "job".into()
        }))
    );
    assert_eq!(obs[6].outcome.kind(), OutcomeKind::Unsupported);
    assert_eq!(obs[9].outcome, Outcome::Insufficient);
    assert_eq!(
        ev.observed_at.to_rfc3339_nano(),
        "2026-08-22T21:31:04.5+02:00"
    );

    // round trip: encode → decode is the identity, and the JSON keeps upstream's names
    let bytes = ev.to_json().expect("encode");
    let text = String::from_utf8(bytes.clone()).expect("utf8");
    for key in [
        "\"Subject\"",
        "\"ContractRef\"",
        "\"Source\"",
        "\"ObservedAt\"",
        "\"Observations\"",
        "\"detectedAt\"",
    ] {
        assert!(text.contains(key), "{key} missing in {text}");
    }
    assert!(
        !text.contains("\"value\":null"),
        "non-Observed outcomes omit value: {text}"
    );
    assert_eq!(EvidenceSet::from_json(&bytes).expect("re-decode"), ev);
}

#[test]
fn null_and_empty_observations_are_distinct() {
    let mut doc = set(Json::Null);
    let ev = decode(&doc).expect("null observations");
    assert_eq!(ev.observations, None);
    assert!(
        ev.to_json()
            .is_ok_and(|b| String::from_utf8_lossy(&b).contains("\"Observations\":null"))
    );
    doc["Observations"] = json!([]);
    let ev = decode(&doc).expect("empty observations");
    assert_eq!(ev.observations, Some(vec![]));
    assert!(
        ev.to_json()
            .is_ok_and(|b| String::from_utf8_lossy(&b).contains("\"Observations\":[]"))
    );
    // missing key reads as null
    let mut missing = set(json!([]));
    missing
        .as_object_mut()
        .expect("object")
        .remove("Observations");
    assert_eq!(decode(&missing).expect("missing").observations, None);
}

#[test]
fn decode_time_rejections_name_the_problem() {
    let cases: Vec<(Json, &str)> = vec![
        (
            set(json!([observation(
                "PodObserved",
                "pod",
                "x",
                "Observed",
                Some(json!({}))
            )])),
            "kind",
        ),
        (
            set(json!([observation(
                "InterfaceObserved",
                "interface",
                "x",
                "Absent",
                None
            )])),
            "outcome",
        ),
        (
            set(json!([observation(
                "InterfaceObserved",
                "service",
                "x",
                "Stale",
                None
            )])),
            "subject.kind",
        ),
        (
            set(json!([observation(
                "WorkloadObserved",
                "workload",
                "x",
                "Stale",
                None
            )])),
            "subject.kind",
        ),
        (
            set(json!([observation(
                "InterfaceObserved",
                "interface",
                "x",
                "Observed",
                None
            )])),
            "value",
        ),
        (
            set(json!([observation(
                "InterfaceObserved",
                "interface",
                "x",
                "Stale",
                Some(json!({"present": true}))
            )])),
            "value",
        ),
        (
            set(json!([observation(
                "InterfaceObserved",
                "interface",
                "x",
                "Failed",
                Some(Json::Null)
            )])),
            "value",
        ),
        (
            set(json!([observation(
                "InterfaceObserved",
                "interface",
                "x",
                "Observed",
                Some(json!({"present": true, "ready": 3}))
            )])),
            "ready",
        ),
        (
            set(json!([observation(
                "CapabilityObserved",
                "capability",
                "x",
                "Observed",
                Some(json!([true]))
            )])),
            "value",
        ),
        (
            set(json!([observation(
                "CapabilityObserved",
                "capability",
                "x",
                "Observed",
                Some(json!({"present": "yes"}))
            )])),
            "value",
        ),
    ];
    for (doc, needle) in cases {
        let err = decode_err(&doc);
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
    }
}

#[test]
fn unknown_keys_are_rejected_everywhere() {
    let base = set(json!([observation(
        "InterfaceObserved",
        "interface",
        "x",
        "Stale",
        None
    )]));
    let mutations: Vec<(&str, Mutation)> = vec![
        ("top level", Box::new(|d: &mut Json| d["Extra"] = json!(1))),
        (
            "lower-case top level key",
            Box::new(|d: &mut Json| {
                let obj = d.as_object_mut().expect("object");
                let v = obj.remove("Source").expect("Source");
                obj.insert("source".into(), v);
            }),
        ),
        (
            "Subject",
            Box::new(|d: &mut Json| d["Subject"]["extra"] = json!(1)),
        ),
        (
            "observation",
            Box::new(|d: &mut Json| d["Observations"][0]["extra"] = json!(1)),
        ),
        (
            "observation subject",
            Box::new(|d: &mut Json| d["Observations"][0]["subject"]["x"] = json!(1)),
        ),
        (
            "provenance",
            Box::new(|d: &mut Json| d["Observations"][0]["provenance"]["x"] = json!(1)),
        ),
    ];
    for (label, mutate) in mutations {
        let mut doc = base.clone();
        mutate(&mut doc);
        assert!(decode(&doc).is_err(), "{label}: accepted {doc}");
    }
    decode(&base).expect("the unmutated document decodes");
}

#[test]
fn trailing_data_and_bad_times_are_rejected() {
    let text = set(json!([])).to_string();
    for bad in [
        format!("{text}}}"),
        format!("{text}]"),
        format!("{text}{{}}"),
    ] {
        assert!(EvidenceSet::from_json(bad.as_bytes()).is_err(), "{bad}");
    }
    assert!(
        EvidenceSet::from_json(format!("{text}\n").as_bytes()).is_ok(),
        "whitespace is fine"
    );
    let mut doc = set(json!([]));
    doc["ObservedAt"] = json!("yesterday");
    assert!(decode_err(&doc).contains("RFC3339"));
}

#[test]
fn validation_collects_every_error_in_order_with_field_names() {
    let mut doc = json!({
        "Subject": {"kind": "", "name": ""},
        "ContractRef": "",
        "Source": "",
        "ObservedAt": "0001-01-01T00:00:00Z",
        "Observations": [
            observation("InterfaceObserved", "interface", "a", "Stale", None),
            observation("InterfaceObserved", "interface", "", "Stale", None),
            observation("InterfaceObserved", "interface", "a", "Failed", None),
        ]
    });
    doc["Observations"][1]["provenance"] =
        json!({"collector": "", "detectedAt": "0001-01-01T00:00:00Z"});
    let ev = decode(&doc).expect("decode-time checks pass");
    let errors = ev.validate().expect_err("invalid").0;
    let fields: Vec<&str> = errors.iter().map(ValidationError::field).collect();
    assert_eq!(
        fields,
        [
            "Subject.kind",
            "Subject.name",
            "ContractRef",
            "Source",
            "ObservedAt",
            "Observations[1].subject.name",
            "Observations[1].provenance.collector",
            "Observations[1].provenance.detectedAt",
            "Observations[2].subject",
        ]
    );
    assert!(matches!(
        &errors[8],
        ValidationError::DuplicateAssertion {
            first_index: 0,
            kind: ObservationKind::InterfaceObserved,
            ..
        }
    ));
    let message = ev.validate().expect_err("invalid").to_string();
    assert!(
        message.contains("Observations[2].subject: duplicate observation"),
        "{message}"
    );
}

#[test]
fn missing_provenance_is_a_validation_error_not_a_decode_error() {
    let mut doc = set(json!([observation(
        "InterfaceObserved",
        "interface",
        "x",
        "Stale",
        None
    )]));
    doc["Observations"][0]
        .as_object_mut()
        .expect("obj")
        .remove("provenance");
    let ev = decode(&doc).expect("decodes with zero provenance");
    let fields: Vec<String> = ev
        .validate()
        .expect_err("invalid")
        .0
        .iter()
        .map(|e| e.field().to_owned())
        .collect();
    assert_eq!(
        fields,
        [
            "Observations[0].provenance.collector",
            "Observations[0].provenance.detectedAt"
        ]
    );
}

#[test]
fn programmatic_observations_are_checked_structurally() {
    let ts = Timestamp::parse("2026-08-22T21:31:04Z").expect("ts");
    let mut ev = EvidenceSet {
        subject: SubjectRef::new("service", "x"),
        contract_ref: "r".into(),
        source: "k8s".into(),
        observed_at: ts,
        observations: Some(vec![Observation {
            kind: ObservationKind::WorkloadObserved,
            subject: SubjectRef::new("workload", "x"),
            outcome: Outcome::Stale,
            provenance: Provenance::new("k8s-observer", ts),
            detail: None,
        }]),
        subject_missing: false,
    };
    let errors = ev.validate().expect_err("pairing").0;
    assert_eq!(errors[0].field(), "Observations[0].subject.kind");
    ev.observations = Some(vec![Observation {
        kind: ObservationKind::WorkloadObserved,
        subject: SubjectRef::new("service", "x"),
        outcome: Outcome::Observed(Value::Persistence(PersistenceValue { durable: true })),
        provenance: Provenance::new("k8s-observer", ts),
        detail: None,
    }]);
    let errors = ev.validate().expect_err("payload kind").0;
    assert_eq!(errors[0].field(), "Observations[0].value");
    assert_eq!(MAX_OBSERVATIONS, 10_000);
}
