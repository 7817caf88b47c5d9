use super::*;

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_787_000_000, 0).unwrap_or_default()
}

#[test]
fn typical_yaml_matches_the_engine_fixture() {
    let contract = convert::contract_from_proto(
        Some(&convert::contract_document(TYPICAL_CONTRACT_YAML)),
        "contract",
    )
    .unwrap();
    assert_eq!(
        convert::assertions_from_contract(&contract, "contract").unwrap(),
        pacto_engine::bench::typical_contract()
    );
}

#[test]
fn typical_request_evaluates_like_the_engine() {
    let response = evaluate_request(&typical_request(), now()).unwrap();
    let engine = pacto_engine::evaluate(
        &pacto_engine::bench::typical_contract(),
        &pacto_engine::bench::typical_evidence(),
    );
    // One structural warning prepended to the engine's findings.
    assert_eq!(response.findings.len(), engine.findings.len() + 1);
    assert_eq!(response.findings[0].code, "TAG_NOT_DIGEST");
    assert_eq!(
        response.findings[0].severity(),
        pacto_proto::evaluator::Severity::Warning
    );
    assert_eq!(
        response.coverage,
        Some(convert::coverage_to_proto(engine.coverage))
    );
    // The typical evidence has an absent (required) interface.
    assert_eq!(
        response.contract_status(),
        pacto_proto::evaluator::ContractStatus::NonCompliant
    );
    let summary = response.summary.unwrap();
    assert_eq!(summary.warning_count, engine.summary().warning_count + 1);
    let readiness = response.readiness.unwrap();
    assert_eq!(readiness.min_score, 80);
    assert!(!readiness.expired);
    assert!(!readiness.passing, "score {}", readiness.score);
    assert_eq!(readiness.gate_failure, "BelowMinScore");
}

#[test]
fn malformed_requests_name_the_field() {
    let mut request = typical_request();
    request.evidence = None;
    assert_eq!(
        evaluate_request(&request, now()).unwrap_err().to_string(),
        "evidence: required"
    );
    let mut request = typical_request();
    request.contract = Some(convert::contract_document("service: [unclosed"));
    assert_eq!(
        evaluate_request(&request, now()).unwrap_err().field,
        "contract.yaml"
    );
    let mut request = typical_request();
    request.structural_warnings[0].message.clear();
    assert_eq!(
        evaluate_request(&request, now()).unwrap_err().to_string(),
        "structural_warnings[0].message: must not be empty"
    );
}

#[test]
fn readiness_absent_without_declaration() {
    let request = AssessReadinessRequest {
        contract: Some(convert::contract_document(
            "pactoVersion: \"2.0\"\nservice:\n  name: x\n  version: 1.0.0\n",
        )),
        assessed_at: None,
    };
    assert!(assess_request(&request, now()).unwrap().readiness.is_none());
    let request = AssessReadinessRequest {
        contract: Some(convert::contract_document(TYPICAL_CONTRACT_YAML)),
        assessed_at: None,
    };
    assert!(assess_request(&request, now()).unwrap().readiness.is_some());
}

#[test]
fn command_line_is_consistent_and_defaults_to_status_writer() {
    use clap::CommandFactory;
    Args::command().debug_assert();
    assert_eq!(
        pacto_runtime::args::env_rule_violations(&Args::command(), "EVALUATOR"),
        Vec::<String>::new()
    );
    let args = Args::try_parse_from(["pacto-evaluator", "--insecure"]).unwrap();
    assert_eq!(
        args.server.allowed_identities,
        vec!["spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer".to_owned()]
    );
    assert_eq!(args.server.listen_addr, "0.0.0.0:8443".parse().unwrap());
    let args = Args::try_parse_from([
        "pacto-evaluator",
        "--insecure",
        "--allowed-identities",
        "a.pacto.svc,spiffe://pacto/sa/*",
    ])
    .unwrap();
    assert_eq!(args.server.allowed_identities.len(), 2);
}
