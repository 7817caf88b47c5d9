//! Steps 1 and 3 of a reconcile: the gRPC calls to the three backends (Resolve; AssessReadiness,
//! or Observe then Evaluate) and their answers as domain inputs ([`crate::model`]).
//!
//! The field-by-field conversions live in `pacto_proto::convert::crd`; here the answers are
//! assembled into the pass's model types. A call that fails, or an answer that does not fit (a
//! `FieldError` naming the field), is a [`BackendFailure`]: Unknown naming the service, never a
//! verdict.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use metrics::counter;
use pacto_api::{ObservationWindow, Pacto, ReadinessStatus, ValidationResult};
use pacto_contract::model::Contract;
use pacto_proto::convert::{FieldError, crd};
use pacto_proto::evaluator::evaluator_client::EvaluatorClient;
use pacto_proto::evaluator::{self, AssessReadinessRequest, EvaluateRequest};
use pacto_proto::observer::observer_client::ObserverClient;
use pacto_proto::observer::{self, ObserveRequest};
use pacto_proto::resolver;
use pacto_proto::resolver::contract_resolver_client::ContractResolverClient;
use pacto_proto::{common, prost_types};
use pacto_runtime::balance::BalancedChannel;
use pacto_runtime::grpc::{GRPC_MAX_MESSAGE_BYTES, RetryPolicy, call_with_retries};
use pacto_runtime::memo::{DEFAULT_MEMO_ENTRIES, ParseMemo};
use sha2::{Digest, Sha256};

use crate::metrics::{BACKEND_FAILURES_TOTAL, CONTRACT_MEMO_TOTAL};
use crate::model::{
    Backend, BackendFailure, Evaluated, Observed, Resolution, ResolvedContract, Runtime,
};

/// The gRPC clients of the three backends, each balanced over every replica its address
/// resolves to (docs/design/scaling.md#replicas-and-client-side-balancing).
#[derive(Debug, Clone)]
pub struct Backends {
    /// contract-resolver.
    pub resolver: ContractResolverClient<BalancedChannel>,
    /// observer.
    pub observer: ObserverClient<BalancedChannel>,
    /// evaluator.
    pub evaluator: EvaluatorClient<BalancedChannel>,
    /// The observer's endpoints: WatchTargets is subscribed on each of them.
    pub observer_endpoints: BalancedChannel,
    /// Retries of transient failures within one call.
    pub retry: RetryPolicy,
    /// The effective contracts of the resolver's answers, parsed once per distinct document
    /// (docs/design/crates.md#parse-memo).
    pub contracts: Arc<ParseMemo<Contract>>,
}

impl Backends {
    /// The clients over the three channels, with the message size bound of every Pacto call
    /// (docs/design/status.md#size-limits).
    pub fn new(
        resolver: BalancedChannel,
        observer: BalancedChannel,
        evaluator: BalancedChannel,
        retry: RetryPolicy,
    ) -> Self {
        Self {
            resolver: ContractResolverClient::new(resolver)
                .max_decoding_message_size(GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(GRPC_MAX_MESSAGE_BYTES),
            observer: ObserverClient::new(observer.clone())
                .max_decoding_message_size(GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(GRPC_MAX_MESSAGE_BYTES),
            evaluator: EvaluatorClient::new(evaluator)
                .max_decoding_message_size(GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(GRPC_MAX_MESSAGE_BYTES),
            observer_endpoints: observer,
            retry,
            contracts: Arc::new(ParseMemo::new(DEFAULT_MEMO_ENTRIES, CONTRACT_MEMO_TOTAL)),
        }
    }

    /// `method` on a clone of `client` with a clone of `request`, retried on transient failures
    /// per [`Backends::retry`].
    pub(crate) async fn call<C, Req, Resp, F, Fut>(
        &self,
        client: &C,
        request: &Req,
        method: F,
    ) -> Result<Resp, tonic::Status>
    where
        C: Clone,
        Req: Clone,
        F: Fn(C, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        call_with_retries(&self.retry, || method(client.clone(), request.clone()))
            .await
            .map(tonic::Response::into_inner)
    }
}

fn failure(backend: Backend, status: &tonic::Status) -> BackendFailure {
    let message = if status.message().is_empty() {
        format!("{:?}", status.code())
    } else {
        status.message().to_owned()
    };
    failed(BackendFailure::new(backend, message))
}

fn malformed(backend: Backend, error: &FieldError) -> BackendFailure {
    failed(BackendFailure::new(
        backend,
        format!("malformed response: {error}"),
    ))
}

/// Counts and logs a failed call: the log line is where an evaluator outage is named, since no
/// condition belongs to the evaluator (docs/design/status.md#failure-paths).
fn failed(failure: BackendFailure) -> BackendFailure {
    counter!(BACKEND_FAILURES_TOTAL, "backend" => failure.backend.as_str()).increment(1);
    tracing::warn!(backend = %failure.backend, detail = %failure.detail, "backend call failed: {}", failure.message());
    failure
}

fn now_proto() -> prost_types::Timestamp {
    let now = Timestamp::now();
    prost_types::Timestamp {
        seconds: now.as_second(),
        nanos: now.subsec_nanosecond(),
    }
}

/// Step 1: Resolve, accepting shared registry answers up to `max_age` old
/// (docs/design/resolution.md#shared-resolves).
pub async fn resolve(
    backends: &Backends,
    pacto: &Pacto,
    namespace: &str,
    max_age: Duration,
) -> Resolution {
    let mut request = crd::resolve_request(pacto, namespace);
    request.max_age_seconds = u32::try_from(max_age.as_secs()).unwrap_or(u32::MAX);
    let answer = backends
        .call(&backends.resolver, &request, |mut c, r| async move {
            c.resolve(r).await
        })
        .await;
    match answer {
        Ok(response) => resolution_from_proto(&response, &backends.contracts)
            .unwrap_or_else(|e| Resolution::Failed(malformed(Backend::ContractResolver, &e))),
        Err(status) => Resolution::Failed(failure(Backend::ContractResolver, &status)),
    }
}

/// Step 3: reference-only readiness, or Observe + Evaluate. `windows` are the previous status's
/// observation windows (the same previous status the pass composes over).
pub async fn runtime(
    backends: &Backends,
    stabilization_window: Option<Duration>,
    pacto: &Pacto,
    namespace: &str,
    resolved: &ResolvedContract,
    windows: &[ObservationWindow],
) -> Runtime {
    let document = common::ContractDocument {
        yaml: resolved.effective_yaml.clone(),
    };
    if pacto.spec.is_reference() {
        return Runtime::Reference(assess_readiness(backends, resolved, document).await);
    }
    match observe(
        backends,
        Observation {
            stabilization_window,
            pacto,
            namespace,
            resolved,
            windows,
        },
        document.clone(),
    )
    .await
    {
        Ok((mut observed, evidence)) => Runtime::Observed {
            observed: Box::new({
                observed.evidence =
                    pacto_proto::convert::evidence_from_proto(&evidence, "evidence").ok();
                observed
            }),
            evaluated: evaluate(backends, resolved, document, evidence).await,
        },
        Err(failure) => Runtime::ObserveFailed(failure),
    }
}

/// The readiness of a reference-only Pacto (`None` without `readiness:`, no call made).
async fn assess_readiness(
    backends: &Backends,
    resolved: &ResolvedContract,
    document: common::ContractDocument,
) -> Result<Option<ReadinessStatus>, BackendFailure> {
    if resolved.contract.readiness.is_none() {
        return Ok(None);
    }
    let request = AssessReadinessRequest {
        contract: Some(document),
        assessed_at: Some(now_proto()),
    };
    backends
        .call(&backends.evaluator, &request, |mut c, r| async move {
            c.assess_readiness(r).await
        })
        .await
        .map(|r| r.readiness.as_ref().map(crd::readiness_from_proto))
        .map_err(|status| failure(Backend::Evaluator, &status))
}

/// What one Observe call is about.
struct Observation<'a> {
    stabilization_window: Option<Duration>,
    pacto: &'a Pacto,
    namespace: &'a str,
    resolved: &'a ResolvedContract,
    /// The previous status's windows.
    windows: &'a [ObservationWindow],
}

/// Observe: the observation and the EvidenceSet to evaluate.
async fn observe(
    backends: &Backends,
    about: Observation<'_>,
    document: common::ContractDocument,
) -> Result<(Observed, common::EvidenceSet), BackendFailure> {
    let Observation {
        stabilization_window,
        pacto,
        namespace,
        resolved,
        windows,
    } = about;
    let request = ObserveRequest {
        target: Some(crd::target_to_proto(pacto, namespace)),
        contract: Some(document),
        configuration_schemas: resolved
            .configuration_schemas
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        // The EvidenceSet needs a non-empty contractRef; inline contracts have no resolved
        // reference, so they are named after their Pacto.
        contract_ref: resolved.resolved_ref.clone().unwrap_or_else(|| {
            format!(
                "inline://{namespace}/{}",
                kube::ResourceExt::name_any(pacto)
            )
        }),
        windows: crd::windows_to_proto(windows),
        stabilization_window: stabilization_window.map(|d| prost_types::Duration {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
        }),
    };
    let response = backends
        .call(&backends.observer, &request, |mut c, r| async move {
            c.observe(r).await
        })
        .await
        .map_err(|status| failure(Backend::Observer, &status))?;
    tracing::debug!("observed");
    let observed = observed_from_proto(&response).map_err(|e| malformed(Backend::Observer, &e))?;
    let evidence = response
        .evidence
        .ok_or_else(|| malformed(Backend::Observer, &FieldError::new("evidence", "required")))?;
    Ok((observed, evidence))
}

/// Evaluate the evidence against the contract (structural warnings first).
async fn evaluate(
    backends: &Backends,
    resolved: &ResolvedContract,
    document: common::ContractDocument,
    evidence: common::EvidenceSet,
) -> Result<Evaluated, BackendFailure> {
    let request = EvaluateRequest {
        contract: Some(document),
        evidence: Some(evidence),
        structural_warnings: resolved
            .validation
            .warnings
            .iter()
            .map(crd::validation_issue_to_proto)
            .collect(),
        assessed_at: Some(now_proto()),
    };
    match backends
        .call(&backends.evaluator, &request, |mut c, r| async move {
            c.evaluate(r).await
        })
        .await
    {
        Ok(response) => {
            evaluated_from_proto(&response).map_err(|e| malformed(Backend::Evaluator, &e))
        }
        Err(status) => Err(failure(Backend::Evaluator, &status)),
    }
}

fn required<'a, T>(value: Option<&'a T>, field: &str) -> Result<&'a T, FieldError> {
    value.ok_or_else(|| FieldError::new(field, "required"))
}

/// A Resolve answer.
fn resolution_from_proto(
    response: &resolver::ResolveResponse,
    contracts: &ParseMemo<Contract>,
) -> Result<Resolution, FieldError> {
    use resolver::resolve_response::Result as R;
    match required(response.result.as_ref(), "result")? {
        R::Invalid(invalid) => Ok(Resolution::Invalid {
            message: invalid.message.clone(),
            validation: crd::invalid_validation(invalid),
            policy: crd::policy_from_proto(invalid.resolution_policy, "invalid.resolution_policy")?,
        }),
        R::Unavailable(unavailable) => Ok(Resolution::Unavailable {
            message: unavailable.reason.clone(),
            policy: crd::policy_from_proto(
                unavailable.resolution_policy,
                "unavailable.resolution_policy",
            )?,
        }),
        R::Resolved(resolved) => {
            let document = required(resolved.contract.as_ref(), "resolved.contract")?;
            let contract = contracts.get_or_parse(&document.yaml, || {
                pacto_contract::parse_contract(&document.yaml)
                    .map(|(_, contract)| contract)
                    .map_err(|e| FieldError::new("resolved.contract.yaml", e.to_string()))
            })?;
            let content_hash = if resolved.content_hash.is_empty() {
                hex::encode(Sha256::digest(&resolved.raw_yaml))
            } else {
                resolved.content_hash.clone()
            };
            let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            Ok(Resolution::Resolved(Box::new(ResolvedContract {
                contract,
                effective_yaml: document.yaml.clone(),
                resolved_ref: non_empty(&resolved.resolved_ref),
                digest: non_empty(&resolved.digest),
                policy: crd::policy_from_proto(
                    resolved.resolution_policy,
                    "resolved.resolution_policy",
                )?,
                validation: resolved.validation.as_ref().map_or(
                    ValidationResult {
                        valid: true,
                        ..ValidationResult::default()
                    },
                    crd::validation_from_proto,
                ),
                configuration_schemas: resolved
                    .configuration_schemas
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                content_hash,
            })))
        }
    }
}

/// An Observe answer (the evidence is taken separately).
fn observed_from_proto(response: &observer::ObserveResponse) -> Result<Observed, FieldError> {
    let windows = crd::windows_from_proto(&response.windows, "windows")?;
    let snapshot = response.snapshot.clone().unwrap_or_default();
    let window_due_at = response
        .window_due_at
        .as_ref()
        .map(|ts| crd::time_from_proto(ts, "window_due_at"))
        .transpose()?;
    let undeclared_peers = response
        .undeclared_peers
        .as_ref()
        .map(|peers| crd::undeclared_peers_from_proto(peers, "undeclared_peers"))
        .transpose()?;
    // The peers live in status.observedRuntime, which exists only with the workload
    // (docs/design/status.md#undeclared-peers).
    let observed_runtime = snapshot.observed_runtime.as_ref().map(|runtime| {
        let mut runtime = crd::observed_runtime_from_proto(runtime);
        runtime.undeclared_peers.clone_from(&undeclared_peers);
        runtime
    });
    Ok(Observed {
        windows,
        api_errors: response.api_errors.clone(),
        resources: crd::resources_from_proto(&snapshot),
        observed_runtime,
        window_due_at,
        evidence: None,
    })
}

/// An Evaluate answer.
fn evaluated_from_proto(response: &evaluator::EvaluateResponse) -> Result<Evaluated, FieldError> {
    let findings = crd::findings_from_proto(&response.findings, "findings")?;
    let coverage = required(response.coverage.as_ref(), "coverage")?;
    let summary = required(response.summary.as_ref(), "summary")?;
    Ok(Evaluated {
        findings,
        coverage: crd::coverage_from_proto(coverage, "coverage")?,
        summary: crd::summary_from_proto(summary),
        status: crd::status_from_proto(response.contract_status, "contract_status")?,
        readiness: response.readiness.as_ref().map(crd::readiness_from_proto),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use pacto_api::{ObservationWindow, ObservationWindowKind};

    use super::*;

    fn memo() -> ParseMemo<Contract> {
        ParseMemo::new(DEFAULT_MEMO_ENTRIES, CONTRACT_MEMO_TOTAL)
    }

    #[test]
    fn malformed_answers_name_the_field() {
        let err = resolution_from_proto(&resolver::ResolveResponse { result: None }, &memo())
            .unwrap_err();
        assert_eq!(
            malformed(Backend::ContractResolver, &err).detail,
            "malformed response: result: required"
        );

        let response = evaluator::EvaluateResponse {
            findings: vec![evaluator::Finding {
                code: "X".into(),
                severity: 9,
                ..Default::default()
            }],
            coverage: Some(evaluator::Coverage::default()),
            summary: Some(evaluator::Summary::default()),
            contract_status: evaluator::ContractStatus::Compliant.into(),
            readiness: None,
        };
        let err = evaluated_from_proto(&response).unwrap_err();
        assert_eq!(err.field, "findings[0].severity");

        let response = evaluator::EvaluateResponse {
            contract_status: evaluator::ContractStatus::Invalid.into(),
            coverage: Some(evaluator::Coverage::default()),
            summary: Some(evaluator::Summary::default()),
            ..Default::default()
        };
        assert_eq!(
            evaluated_from_proto(&response).unwrap_err().field,
            "contract_status"
        );

        // More assertions evaluated than required is refused like any other malformed answer.
        let response = evaluator::EvaluateResponse {
            contract_status: evaluator::ContractStatus::Compliant.into(),
            coverage: Some(evaluator::Coverage {
                evaluated: 3,
                required: 2,
            }),
            summary: Some(evaluator::Summary::default()),
            ..Default::default()
        };
        let err = evaluated_from_proto(&response).unwrap_err();
        assert_eq!(
            malformed(Backend::Evaluator, &err).detail,
            "malformed response: coverage.evaluated: 3 exceeds required 2"
        );
    }

    #[test]
    fn resolved_contract_hash_falls_back_to_sha256_of_raw_bytes() {
        let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: a\n  version: 1.0.0\n";
        let response = resolver::ResolveResponse {
            result: Some(resolver::resolve_response::Result::Resolved(
                resolver::Resolved {
                    contract: Some(common::ContractDocument {
                        yaml: yaml.as_bytes().to_vec(),
                    }),
                    raw_yaml: yaml.as_bytes().to_vec(),
                    ..Default::default()
                },
            )),
        };
        let Resolution::Resolved(resolved) = resolution_from_proto(&response, &memo()).unwrap()
        else {
            panic!("resolved");
        };
        assert_eq!(resolved.content_hash, hex::encode(Sha256::digest(yaml)));
        assert_eq!(resolved.contract.service.name, "a");
        assert_eq!(resolved.policy, None);
        assert!(resolved.validation.valid);
    }

    #[test]
    fn windows_round_trip() {
        let windows = vec![ObservationWindow {
            kind: ObservationWindowKind::Dependency,
            subject: "db".into(),
            first_observed_negative_at: Time(Timestamp::from_second(1_787_000_000).unwrap()),
        }];
        let response = observer::ObserveResponse {
            windows: crd::windows_to_proto(&windows),
            ..Default::default()
        };
        assert_eq!(observed_from_proto(&response).unwrap().windows, windows);
    }

    #[test]
    fn undeclared_peers_go_into_observed_runtime_only_with_the_workload() {
        let peers = observer::UndeclaredPeers {
            peers: vec![observer::UndeclaredPeer {
                kind: "IP".into(),
                name: "203.0.113.7".into(),
                ports: vec![443],
            }],
        };
        let with_workload = observer::ObserveResponse {
            undeclared_peers: Some(peers.clone()),
            snapshot: Some(observer::RuntimeSnapshot {
                observed_runtime: Some(observer::ObservedRuntime::default()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let runtime = observed_from_proto(&with_workload)
            .unwrap()
            .observed_runtime
            .unwrap();
        assert_eq!(
            runtime.undeclared_peers,
            Some(vec![pacto_api::UndeclaredPeer {
                kind: pacto_api::UndeclaredPeerKind::Ip,
                name: "203.0.113.7".into(),
                ports: vec![443],
            }])
        );
        // Nothing said: no list at all (not an empty one).
        let silent = observer::ObserveResponse {
            undeclared_peers: None,
            ..with_workload.clone()
        };
        assert_eq!(
            observed_from_proto(&silent)
                .unwrap()
                .observed_runtime
                .unwrap()
                .undeclared_peers,
            None
        );
        // Without the workload there is no observedRuntime to hold them.
        let no_workload = observer::ObserveResponse {
            undeclared_peers: Some(peers),
            ..Default::default()
        };
        assert_eq!(
            observed_from_proto(&no_workload).unwrap().observed_runtime,
            None
        );
        // A malformed answer names the field.
        let bad = observer::ObserveResponse {
            undeclared_peers: Some(observer::UndeclaredPeers {
                peers: vec![observer::UndeclaredPeer {
                    kind: "Node".into(),
                    ..Default::default()
                }],
            }),
            ..with_workload
        };
        assert_eq!(
            observed_from_proto(&bad).unwrap_err().field,
            "undeclared_peers.peers[0].kind"
        );
    }
}
