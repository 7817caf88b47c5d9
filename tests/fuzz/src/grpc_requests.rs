//! Fuzzes the gRPC request path: the first byte picks a message, the rest is decoded with prost as
//! that message (as tonic's codec does) and, when it decodes, converted into domain types with
//! the `pacto_proto::convert` functions the services call on it:
//!
//! - `EvaluateRequest` (evaluator): contract document → typed contract → engine assertions,
//!   evidence set, structural warnings, assessment time; then the engine evaluates and readiness
//!   is assessed, as the Evaluate RPC does;
//! - `AssessReadinessRequest` (evaluator): contract and assessment time;
//! - `ObserveRequest` (observer): the contract document and the persisted windows' timestamps;
//! - `EvaluateResponse` (what status-writer decodes from the evaluator): findings, coverage,
//!   status;
//! - `ResolveRequest`, `ListRevisionsRequest`, `NodeReport`: decoding only (their field checks
//!   live in the resolver and observer crates).
//!
//! Nothing may panic; whatever converts must encode back (`*_to_proto`) and convert again to the
//! same value (engine findings: after one round trip).

use chrono::{TimeZone, Utc};
use pacto_contract::readiness;
use pacto_proto::{common, convert, evaluator, observer, resolver};
use prost::Message;

fn evaluate(request: &evaluator::EvaluateRequest) {
    let Ok(contract) = convert::contract_from_proto(request.contract.as_ref(), "contract") else {
        return;
    };
    let assertions = convert::assertions_from_contract(&contract, "contract");
    let Some(evidence) = request.evidence.as_ref() else {
        return;
    };
    let Ok(evidence) = convert::evidence_from_proto(evidence, "evidence") else {
        return;
    };
    let again = convert::evidence_from_proto(&convert::evidence_to_proto(&evidence), "evidence")
        .expect("an encoded evidence set converts again");
    assert_eq!(again, evidence);
    let Ok(structural) = convert::structural_warnings_from_proto(
        &request.structural_warnings,
        "structural_warnings",
    ) else {
        return;
    };
    let at = match request.assessed_at.as_ref() {
        None => Utc
            .with_ymd_and_hms(2027, 1, 10, 9, 0, 0)
            .single()
            .expect("valid instant"),
        Some(ts) => match convert::timestamp_from_proto(ts, "assessed_at") {
            Ok(t) => t.as_datetime().with_timezone(&Utc),
            Err(_) => return,
        },
    };
    let Ok(assertions) = assertions else {
        return;
    };
    let evaluation = pacto_engine::evaluate(&assertions, &evidence).with_structural(structural);
    let status = evaluation.status();
    assert_eq!(
        convert::status_from_proto(convert::status_to_proto(status).into(), "s"),
        Ok(status)
    );
    for finding in &evaluation.findings {
        let once = convert::finding_from_proto(&convert::finding_to_proto(finding), "f")
            .expect("an engine finding converts back");
        let twice = convert::finding_from_proto(&convert::finding_to_proto(&once), "f");
        assert_eq!(twice.as_ref(), Ok(&once));
    }
    if let Some(a) = readiness::assess(contract.readiness.as_ref(), at) {
        let _ = convert::readiness_to_proto(&a);
    }
}

fn assess(request: &evaluator::AssessReadinessRequest) {
    if let Ok(contract) = convert::contract_from_proto(request.contract.as_ref(), "contract")
        && let Some(ts) = request.assessed_at.as_ref()
        && let Ok(at) = convert::timestamp_from_proto(ts, "assessed_at")
    {
        let _ = readiness::assess(
            contract.readiness.as_ref(),
            at.as_datetime().with_timezone(&Utc),
        );
    }
}

fn observe(request: &observer::ObserveRequest) {
    let _ = convert::contract_from_proto(request.contract.as_ref(), "contract");
    for (i, window) in request.windows.iter().enumerate() {
        if let Some(ts) = window.first_observed_negative_at.as_ref()
            && let Ok(t) = convert::timestamp_from_proto(ts, &format!("windows[{i}]"))
        {
            let wire = convert::timestamp_to_proto(&t);
            assert_eq!(convert::timestamp_from_proto(&wire, "t"), Ok(t));
        }
    }
}

fn evaluate_response(response: &evaluator::EvaluateResponse) {
    for (i, finding) in response.findings.iter().enumerate() {
        if let Ok(f) = convert::finding_from_proto(finding, &format!("findings[{i}]")) {
            let again = convert::finding_from_proto(&convert::finding_to_proto(&f), "f");
            assert_eq!(again.as_ref(), Ok(&f));
        }
    }
    if let Some(c) = response.coverage.as_ref()
        && let Ok(coverage) = convert::coverage_from_proto(c, "coverage")
    {
        assert!(coverage.evaluated <= coverage.required);
    }
    let _ = convert::status_from_proto(response.contract_status, "contract_status");
    if let Some(s) = response.summary.as_ref() {
        let _ = convert::summary_from_proto(s);
    }
}

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 7 {
        0 => {
            if let Ok(r) = evaluator::EvaluateRequest::decode(body) {
                evaluate(&r);
            }
        }
        1 => {
            if let Ok(r) = evaluator::AssessReadinessRequest::decode(body) {
                assess(&r);
            }
        }
        2 => {
            if let Ok(r) = observer::ObserveRequest::decode(body) {
                observe(&r);
            }
        }
        3 => {
            if let Ok(r) = evaluator::EvaluateResponse::decode(body) {
                evaluate_response(&r);
            }
        }
        4 => {
            let _ = resolver::ResolveRequest::decode(body);
        }
        5 => {
            let _ = resolver::ListRevisionsRequest::decode(body);
        }
        _ => {
            // The observer measures an accepted report by its encoded length.
            if let Ok(r) = observer::NodeReport::decode(body) {
                let _ = r.encoded_len();
            }
        }
    }
    let _ = common::ContractDocument::decode(body);
}
