//! The evaluator service: `Evaluate(contract, evidence) -> findings + coverage + contractStatus`
//! and the readiness assessment, over mTLS gRPC (docs/design/architecture.md#services).
//!
//! The request is turned into domain types first ([`pacto_proto::convert`]; malformed input is
//! answered with `InvalidArgument` naming the field), then the pure middle ([`evaluate_request`],
//! [`assess_request`]) calls `pacto-engine` and `pacto-contract`'s readiness assessment. Only the
//! identities on `--allowed-identities` (status-writer by default) may call the service.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use clap::Parser;
use metrics::{Unit, counter, describe_counter};
use pacto_contract::readiness;
use pacto_proto::{
    convert::{self, FieldError},
    evaluator::{
        AssessReadinessRequest, AssessReadinessResponse, EvaluateRequest, EvaluateResponse,
        evaluator_server::{Evaluator, EvaluatorServer},
    },
};
pub use pacto_runtime::service::ServeConfig;
use pacto_runtime::{
    CancellationToken, Runtime, RuntimeError,
    args::{RuntimeArgs, ServerArgs, service_env},
    metrics::RpcTimer,
    service::ServiceNames,
};
use tonic::{Request, Response, Status};

mod cache;

pub use cache::{ContractCache, ParsedContract};

/// Default of `--contract-cache-entries`.
pub const DEFAULT_CONTRACT_CACHE_ENTRIES: usize = pacto_runtime::memo::DEFAULT_MEMO_ENTRIES;
/// The gRPC service name (what the allow-list guards).
pub const SERVICE_NAME: &str = "pacto.evaluator.v1.Evaluator";
/// Evaluations by resulting contract status.
pub const EVALUATIONS_TOTAL: &str = "pacto_evaluator_evaluations_total";
/// Findings produced, by severity.
pub const FINDINGS_TOTAL: &str = "pacto_evaluator_findings_total";

/// Command line of `pacto-evaluator`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pacto-evaluator",
    version,
    about = "Serves the Pacto Evaluator gRPC API over mTLS.",
    mut_args(service_env("EVALUATOR"))
)]
pub struct Args {
    /// gRPC port and the identities allowed to call Evaluate.
    #[command(flatten)]
    pub server: ServerArgs,
    /// Parsed contracts kept in memory, keyed by their exact YAML (status-writer resends the same
    /// contract every reconcile); 0 disables the cache.
    #[arg(
        long = "contract-cache-entries",
        value_name = "N",
        default_value_t = DEFAULT_CONTRACT_CACHE_ENTRIES
    )]
    pub contract_cache_entries: usize,
    /// mTLS, admin port, logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// The evaluator failed to start or to serve: it has no failures of its own.
pub type EvaluatorError = RuntimeError;

/// Evaluates one request (the pure middle of the Evaluate RPC): parse and validate the wire
/// request, run the engine, prepend the structural warnings, derive the status and assess
/// readiness at `assessed_at` or `now`.
pub fn evaluate_request(
    request: &EvaluateRequest,
    now: DateTime<Utc>,
) -> Result<EvaluateResponse, FieldError> {
    let parsed = ParsedContract::parse(request.contract.as_ref(), "contract")?;
    evaluate_parsed(&parsed, request, now)
}

/// [`evaluate_request`] with the contract already parsed (e.g. from the [`ContractCache`]).
pub fn evaluate_parsed(
    parsed: &ParsedContract,
    request: &EvaluateRequest,
    now: DateTime<Utc>,
) -> Result<EvaluateResponse, FieldError> {
    let assertions = parsed.assertions.as_ref().map_err(Clone::clone)?;
    let evidence = convert::evidence_from_proto(
        request
            .evidence
            .as_ref()
            .ok_or_else(|| FieldError::new("evidence", "required"))?,
        "evidence",
    )?;
    let structural = convert::structural_warnings_from_proto(
        &request.structural_warnings,
        "structural_warnings",
    )?;
    let at = assessment_time(request.assessed_at.as_ref(), "assessed_at", now)?;

    let evaluation = pacto_engine::evaluate(assertions, &evidence).with_structural(structural);
    let status = evaluation.status();
    Ok(EvaluateResponse {
        findings: evaluation
            .findings
            .iter()
            .map(convert::finding_to_proto)
            .collect(),
        coverage: Some(convert::coverage_to_proto(evaluation.coverage)),
        summary: Some(convert::summary_to_proto(evaluation.summary())),
        contract_status: convert::status_to_proto(status).into(),
        readiness: readiness::assess(parsed.contract.readiness.as_ref(), at)
            .as_ref()
            .map(convert::readiness_to_proto),
    })
}

/// Assesses readiness only (the pure middle of AssessReadiness).
pub fn assess_request(
    request: &AssessReadinessRequest,
    now: DateTime<Utc>,
) -> Result<AssessReadinessResponse, FieldError> {
    let parsed = ParsedContract::parse(request.contract.as_ref(), "contract")?;
    assess_parsed(&parsed, request, now)
}

/// [`assess_request`] with the contract already parsed.
pub fn assess_parsed(
    parsed: &ParsedContract,
    request: &AssessReadinessRequest,
    now: DateTime<Utc>,
) -> Result<AssessReadinessResponse, FieldError> {
    let at = assessment_time(request.assessed_at.as_ref(), "assessed_at", now)?;
    Ok(AssessReadinessResponse {
        readiness: readiness::assess(parsed.contract.readiness.as_ref(), at)
            .as_ref()
            .map(convert::readiness_to_proto),
    })
}

fn assessment_time(
    value: Option<&pacto_proto::prost_types::Timestamp>,
    field: &str,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, FieldError> {
    match value {
        None => Ok(now),
        Some(ts) => Ok(convert::timestamp_from_proto(ts, field)?
            .as_datetime()
            .with_timezone(&Utc)),
    }
}

/// The clock used when a request does not pin the assessment time.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The Evaluator gRPC service.
#[derive(Clone)]
pub struct EvaluatorService {
    clock: Clock,
    cache: Arc<ContractCache>,
}

impl std::fmt::Debug for EvaluatorService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvaluatorService").finish_non_exhaustive()
    }
}

impl Default for EvaluatorService {
    fn default() -> Self {
        Self::new(Arc::new(Utc::now), DEFAULT_CONTRACT_CACHE_ENTRIES)
    }
}

impl EvaluatorService {
    /// A service reading the time from `clock`, memoising up to `cache_entries` parsed contracts.
    pub fn new(clock: Clock, cache_entries: usize) -> Self {
        Self {
            clock,
            cache: Arc::new(ContractCache::new(cache_entries)),
        }
    }

    fn evaluate_now(&self, request: &EvaluateRequest) -> Result<EvaluateResponse, FieldError> {
        let parsed = self
            .cache
            .get_or_parse(request.contract.as_ref(), "contract")?;
        evaluate_parsed(&parsed, request, (self.clock)())
    }

    fn assess_now(
        &self,
        request: &AssessReadinessRequest,
    ) -> Result<AssessReadinessResponse, FieldError> {
        let parsed = self
            .cache
            .get_or_parse(request.contract.as_ref(), "contract")?;
        assess_parsed(&parsed, request, (self.clock)())
    }
}

#[tonic::async_trait]
impl Evaluator for EvaluatorService {
    /// In an `Evaluate` span with the evidence's subject (`<namespace>/<service>`; the request
    /// does not carry the Pacto's name).
    #[tracing::instrument(name = "Evaluate", skip_all, fields(subject = subject(request.get_ref())))]
    async fn evaluate(
        &self,
        request: Request<EvaluateRequest>,
    ) -> Result<Response<EvaluateResponse>, Status> {
        let timer = RpcTimer::start(SERVICE_NAME, "Evaluate");
        let result = self.evaluate_now(request.get_ref()).map_err(|error| {
            tracing::info!(%error, "rejected Evaluate request");
            Status::from(error)
        });
        if let Ok(response) = &result {
            record_evaluation(response);
        }
        timer.finish(result).map(Response::new)
    }

    async fn assess_readiness(
        &self,
        request: Request<AssessReadinessRequest>,
    ) -> Result<Response<AssessReadinessResponse>, Status> {
        let timer = RpcTimer::start(SERVICE_NAME, "AssessReadiness");
        let result = self.assess_now(request.get_ref()).map_err(|error| {
            tracing::info!(%error, "rejected AssessReadiness request");
            Status::from(error)
        });
        timer.finish(result).map(Response::new)
    }
}

fn record_evaluation(response: &EvaluateResponse) {
    let status = response.contract_status().as_str_name();
    counter!(EVALUATIONS_TOTAL, "status" => status).increment(1);
    for finding in &response.findings {
        counter!(FINDINGS_TOTAL, "severity" => finding.severity().as_str_name()).increment(1);
    }
}

/// Describes the evaluator's own metrics (the runtime describes the shared RPC metrics).
pub fn describe_metrics() {
    describe_counter!(
        EVALUATIONS_TOTAL,
        Unit::Count,
        "Successful evaluations, by resulting contract status."
    );
    describe_counter!(
        cache::CONTRACT_CACHE_TOTAL,
        Unit::Count,
        "Parsed-contract cache lookups, by result (hit or miss)."
    );
    describe_counter!(
        FINDINGS_TOTAL,
        Unit::Count,
        "Findings returned by Evaluate, by severity."
    );
}

/// The benches' and tests' "typical contract" as YAML (the YAML form of
/// `pacto_engine::bench::typical_contract()`, plus a readiness block). Feature `bench`.
#[cfg(feature = "bench")]
pub const TYPICAL_CONTRACT_YAML: &str = include_str!("../testdata/typical.pacto.yaml");

/// A typical Evaluate request: [`TYPICAL_CONTRACT_YAML`] with `pacto_engine::bench::typical_evidence()`,
/// one structural warning and a pinned assessment time. Feature `bench`.
#[cfg(feature = "bench")]
pub fn typical_request() -> EvaluateRequest {
    EvaluateRequest {
        contract: Some(convert::contract_document(TYPICAL_CONTRACT_YAML)),
        evidence: Some(convert::evidence_to_proto(
            &pacto_engine::bench::typical_evidence(),
        )),
        structural_warnings: vec![pacto_proto::common::ValidationIssue {
            code: "TAG_NOT_DIGEST".to_owned(),
            path: "dependencies[0].ref".to_owned(),
            message: "dependency ref uses a tag, not a digest".to_owned(),
        }],
        assessed_at: Some(pacto_proto::prost_types::Timestamp {
            seconds: 1_787_000_000,
            nanos: 0,
        }),
    }
}

/// The subject of an Evaluate request, for its span.
fn subject(request: &EvaluateRequest) -> Option<&str> {
    let subject = request.evidence.as_ref()?.subject.as_ref()?;
    Some(subject.name.as_str())
}

/// How the evaluator names itself in its logs, and its metrics.
fn names() -> ServiceNames {
    ServiceNames {
        grpc: "Evaluator",
        process: "evaluator",
        describe_metrics,
        build: pacto_runtime::build_info!(),
    }
}

/// Serves gRPC and the admin endpoints until `shutdown` is cancelled, then drains in-flight calls.
pub async fn serve(
    config: ServeConfig,
    service: EvaluatorService,
    shutdown: CancellationToken,
) -> Result<(), EvaluatorError> {
    let mut rt = Runtime::serving(config, names(), shutdown)?;
    serve_grpc(&mut rt, service)?;
    rt.run().await
}

/// Adds the Evaluator service to `rt`'s gRPC port; ready at once.
fn serve_grpc(rt: &mut Runtime, service: EvaluatorService) -> Result<(), EvaluatorError> {
    let router = tonic::transport::Server::builder().add_service(
        tonic::service::interceptor::InterceptedService::new(
            EvaluatorServer::new(service)
                .max_decoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES),
            rt.authorizer(SERVICE_NAME),
        ),
    );
    rt.serve_grpc(router)?;
    rt.ready_when(std::future::ready(true));
    Ok(())
}

/// Runs the service as the binary does: runtime, service state, gRPC server, run until drained.
pub async fn run(args: Args) -> Result<(), EvaluatorError> {
    let mut rt = Runtime::start(&args.runtime, names()).await?;
    let service = EvaluatorService::new(Arc::new(Utc::now), args.contract_cache_entries);
    rt.bind_grpc(&args.server).await?;
    serve_grpc(&mut rt, service)?;
    rt.run().await
}

#[cfg(test)]
mod tests;
