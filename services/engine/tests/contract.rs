//! The `pacto-contract` model → engine input conversion, on the worked examples of
//! the worked examples (docs/design/contract.md#worked-examples), and agreement between the engine's and the contract crate's registries.

use pacto_contract::model::Contract;
use pacto_engine::*;

fn contract(yaml: &str) -> Contract {
    pacto_contract::parse_contract(yaml.as_bytes())
        .expect("parses")
        .1
}

/// worked example 7.1 of docs/design/contract.md#worked-examples (abridged to the fields the engine reads).
const ORDERS_API: &str = r#"
pactoVersion: "2.0"
service:
  name: orders-api
  version: 3.4.1
  owner: { team: commerce, dri: j.doe }
interfaces:
  - { name: http-public, type: openapi, ref: interfaces/openapi.yaml, visibility: public }
configurations:
  - name: runtime
    schema: configuration/schema.json
    required: true
    values: { LOG_LEVEL: info, HTTP_TIMEOUT_MS: 2500 }
dependencies:
  - name: inventory
    ref: oci://registry.example.com/commerce/inventory-pacto@sha256:eae24bc941f8f244f0fb3ee7c18c0da3c30792916cb9f41078eef8f9dae4f166
    required: true
    compatibility: "^2.1.0"
  - name: recommendations
    ref: oci://registry.example.com/ml/recs-pacto
    required: false
    compatibility: ">= 1.4.0, < 2.0.0"
workload: service
state:
  type: stateless
  persistence: { scope: local, durability: ephemeral }
  dataCriticality: low
capabilities:
  - type: health
    binding: { type: http, interface: http-public, path: /healthz }
  - type: metrics
    binding: { type: http, interface: http-public, path: /metrics }
"#;

/// worked example 7.2 of docs/design/contract.md#worked-examples.
const LEDGER_STORE: &str = r#"
pactoVersion: "2.0"
service:
  name: ledger-store
  version: 1.12.0
  owner: { team: payments-platform }
interfaces:
  - { name: ledger-grpc, type: grpc, ref: interfaces/ledger.grpc.yaml }
  - { name: ops-http, type: openapi, ref: interfaces/ops.yaml }
  - { name: ledger-events, type: asyncapi, ref: interfaces/events.yaml }
configurations:
  - { name: storage, schema: configuration/schema.json, required: true }
  - { name: platform, ref: "oci://registry.example.com/platform/base-config-pacto:4.0.0", required: false }
policies:
  - { name: org-baseline, ref: "oci://registry.example.com/platform/policy-pacto:2.3.0" }
workload: service
state:
  type: stateful
  persistence: { scope: shared, durability: persistent }
  dataCriticality: high
capabilities:
  - type: health
    binding: { type: http, interface: ops-http, path: /ready }
  - type: extension
    ref: example.com/backup-verification
extensions:
  example.com/backup: { schedule: "0 2 * * *" }
"#;

/// worked example 7.3 of docs/design/contract.md#worked-examples.
const MONEY_LIB: &str = r#"
pactoVersion: "2.0"
service:
  name: money-lib
  version: 0.9.0-rc.2
  owner: { dri: a.smith }
metadata:
  kind: library
  language: rust
"#;

#[test]
fn orders_api_example_converts() {
    let input = ContractAssertions::try_from(&contract(ORDERS_API)).expect("converts");
    assert_eq!(
        input,
        ContractAssertions {
            service_name: "orders-api".into(),
            interfaces: vec!["http-public".into()],
            capabilities: vec![CapabilityAssertion::Health, CapabilityAssertion::Metrics],
            dependencies: vec![
                NamedAssertion::new("inventory", true),
                NamedAssertion::new("recommendations", false),
            ],
            configurations: vec![NamedAssertion::new("runtime", true)],
            workload: Some("service".into()),
            persistent: false,
        }
    );
    // 1 interface + 2 capabilities + 1 required dependency + 1 required configuration + workload
    assert_eq!(input.required_count(), 6);
}

#[test]
fn ledger_store_example_converts_and_evaluates() {
    let input = ContractAssertions::try_from(&contract(LEDGER_STORE)).expect("converts");
    assert_eq!(
        input.interfaces,
        ["ledger-grpc", "ops-http", "ledger-events"]
    );
    assert_eq!(
        input.capabilities,
        [
            CapabilityAssertion::Health,
            CapabilityAssertion::Extension {
                reference: "example.com/backup-verification".into()
            }
        ]
    );
    assert_eq!(
        input.configurations,
        [
            NamedAssertion::new("storage", true),
            NamedAssertion::new("platform", false)
        ]
    );
    assert!(input.persistent, "durability: persistent");
    assert_eq!(input.declared_workload(), Some("service"));

    // everything observed and satisfied: still Unknown, because the extension capability has no
    // evaluator (EXTENSION_EVALUATOR_UNAVAILABLE is required and never covered)
    let at = Timestamp::parse("2026-08-22T21:31:04Z").expect("ts");
    let p = Provenance::new("k8s-observer", at);
    let iface = |n: &str| {
        Observation::observed(
            n,
            Value::Interface(InterfaceValue {
                interface_type: String::new(),
                present: true,
            }),
            p.clone(),
        )
    };
    let ev = EvidenceSet {
        subject: SubjectRef::new("service", "payments/ledger-store"),
        contract_ref: "oci://r/ledger@sha256:00".into(),
        source: "k8s".into(),
        observed_at: at,
        observations: Some(vec![
            iface("ledger-grpc"),
            iface("ops-http"),
            iface("ledger-events"),
            Observation::observed(
                "health",
                Value::Capability(CapabilityValue { present: true }),
                p.clone(),
            ),
            Observation::observed(
                "storage",
                Value::Configuration(ConfigurationValue {
                    present: true,
                    conformant: true,
                }),
                p.clone(),
            ),
            Observation::observed(
                "ledger-store",
                Value::Workload(WorkloadValue {
                    workload_type: "service".into(),
                }),
                p.clone(),
            ),
            Observation::observed(
                "ledger-store",
                Value::Persistence(PersistenceValue { durable: true }),
                p,
            ),
        ]),
        subject_missing: false,
    };
    ev.validate().expect("valid evidence");
    let result = evaluate(&input, &ev);
    let codes: Vec<&str> = result.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, ["EXTENSION_EVALUATOR_UNAVAILABLE"]);
    assert_eq!(
        result.coverage,
        Coverage {
            evaluated: 7,
            required: 8
        }
    );
    assert_eq!(result.status(), ContractStatus::Unknown);
    // with the local-only validation warning prepended (worked example 7.2: POLICY_REF_NOT_ENFORCED)
    let with_warning = result.with_structural(vec![Finding::structural(
        "POLICY_REF_NOT_ENFORCED",
        Some("policies[0].ref"),
        "policy ref not enforced",
    )]);
    assert_eq!(with_warning.summary().warning_count, 1);
    assert_eq!(with_warning.status(), ContractStatus::Unknown);
}

#[test]
fn reference_library_has_nothing_to_assert() {
    let input = ContractAssertions::try_from(&contract(MONEY_LIB)).expect("converts");
    assert_eq!(input.service_name, "money-lib");
    assert_eq!(input.required_count(), 0);
    assert_eq!(input.declared_workload(), None);
    assert!(!input.persistent);
}

#[test]
fn impossible_capabilities_are_rejected_with_the_field() {
    let bad_type = r#"
pactoVersion: "2.0"
service: { name: x, version: 1.0.0 }
capabilities:
  - type: health
  - type: tracing
"#;
    let err = ContractAssertions::try_from(&contract(bad_type)).expect_err("unknown type");
    assert_eq!(
        err,
        InputError::UnknownCapabilityType {
            field: "capabilities[1].type".into(),
            value: "tracing".into()
        }
    );
    let no_ref = r#"
pactoVersion: "2.0"
service: { name: x, version: 1.0.0 }
capabilities:
  - type: extension
"#;
    let err = ContractAssertions::try_from(&contract(no_ref)).expect_err("no ref");
    assert_eq!(
        err.to_string(),
        "capabilities[0].ref: an extension capability needs a ref"
    );
}

#[test]
fn empty_workload_and_missing_state() {
    let yaml = r#"
pactoVersion: "2.0"
service: { name: x, version: 1.0.0 }
workload: ""
state: { type: stateful, persistence: { scope: local, durability: ephemeral } }
"#;
    let input = ContractAssertions::try_from(&contract(yaml)).expect("converts");
    assert_eq!(input.workload, None);
    assert!(!input.persistent);
}

/// The engine's view of the registry (typed [`FindingCode`], re-exported) and the validator's
/// (`pacto_contract::codes::REGISTRY`) come from one table and agree on every code.
#[test]
fn registry_agrees_with_the_contract_crate() {
    let theirs = pacto_contract::codes::REGISTRY;
    for (code, category, severity) in theirs {
        let ours: FindingCode = code.parse().unwrap_or_else(|_| {
            panic!("{code} is in pacto-contract's registry but not the engine's")
        });
        assert_eq!(
            ours.category(true).map_or("", Category::as_str),
            category.as_str(),
            "{code}: category"
        );
        assert_eq!(
            ours.severity(true).as_str(),
            severity.as_str(),
            "{code}: severity"
        );
    }
    for code in FindingCode::ALL {
        assert!(
            theirs.iter().any(|(c, _, _)| *c == code.as_str()),
            "{code} is in the engine's registry but not pacto-contract's"
        );
    }
}
