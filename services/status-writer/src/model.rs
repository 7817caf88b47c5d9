//! Domain types of one reconcile pass: what the edges gathered (resolve, observe, evaluate,
//! revision) in the shape the pure middle ([`crate::compose`]) consumes. No prost types here:
//! [`crate::reconcile::backends`] converts the gRPC answers into these first.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use pacto_api::conditions::{
    CONTRACT_VALID, ConditionStatus, READINESS_SATISFIED, RUNTIME_OBSERVED, reason,
};
use pacto_api::{
    ContractStatus, EvaluationCoverage, FindingStatus, ObservationWindow, ObservedRuntime,
    ReadinessStatus, ResolutionPolicy, ResourcesStatus, Summary, ValidationResult,
};
use pacto_contract::model::Contract;

/// The services status-writer calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `pacto.resolver.v1.ContractResolver`.
    ContractResolver,
    /// `pacto.observer.v1.Observer`.
    Observer,
    /// `pacto.evaluator.v1.Evaluator`.
    Evaluator,
}

impl Backend {
    /// The service name users see in messages and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ContractResolver => "contract-resolver",
            Self::Observer => "observer",
            Self::Evaluator => "evaluator",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend call that did not produce an answer (down, slow, refused, or a malformed
/// response). Never a verdict: it is recorded as Unknown naming the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendFailure {
    /// Which service failed.
    pub backend: Backend,
    /// What happened (gRPC status text or the malformed field).
    pub detail: String,
}

impl BackendFailure {
    /// A failure of `backend`.
    pub fn new(backend: Backend, detail: impl Into<String>) -> Self {
        Self {
            backend,
            detail: detail.into(),
        }
    }

    /// The condition message: `<service> unavailable: <detail>`.
    pub fn message(&self) -> String {
        format!("{} unavailable: {}", self.backend, self.detail)
    }
}

/// A contract that was obtained, parsed and validated without errors.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedContract {
    /// The effective contract (overrides applied), parsed: shared with the backends' memo of
    /// parsed contracts (docs/design/crates.md#parse-memo).
    pub contract: Arc<Contract>,
    /// The effective contract YAML (sent to the observer and evaluator).
    pub effective_yaml: Vec<u8>,
    /// The resolved OCI reference without `oci://`; `None` for inline contracts.
    pub resolved_ref: Option<String>,
    /// The manifest digest at resolution; `None` for inline contracts or when unknown.
    pub digest: Option<String>,
    /// The resolution policy; `None` for inline contracts.
    pub policy: Option<ResolutionPolicy>,
    /// The validation result (valid, possibly with warnings).
    pub validation: ValidationResult,
    /// JSON Schemas of the locally resolvable configurations, by configuration name.
    pub configuration_schemas: BTreeMap<String, Vec<u8>>,
    /// Full lowercase SHA-256 hex of the original (pre-override) contract bytes.
    pub content_hash: String,
}

/// The outcome of resolving `spec.contractRef`.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Obtained and valid.
    Resolved(Box<ResolvedContract>),
    /// Obtained but invalid, or malformed (ContractValid False/Invalid).
    Invalid {
        /// The condition message.
        message: String,
        /// The validation report: every Invalid carries one, with a code and a path
        /// (docs/design/resolution.md#every-invalid-carries-a-validation-report).
        validation: ValidationResult,
        /// The reference's resolution policy, if derivable.
        policy: Option<ResolutionPolicy>,
    },
    /// Not obtainable right now (ContractValid Unknown/Unavailable).
    Unavailable {
        /// The condition message.
        message: String,
        /// The reference's resolution policy, if derivable.
        policy: Option<ResolutionPolicy>,
    },
    /// The contract-resolver itself could not be reached (ContractValid Unknown/Unavailable,
    /// message naming the service).
    Failed(BackendFailure),
}

/// What the observer returned for a targeted Pacto.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// The windows to persist (sorted by kind, subject).
    pub windows: Vec<ObservationWindow>,
    /// Kubernetes API errors met while observing, first one first.
    pub api_errors: Vec<String>,
    /// Legacy existence flags.
    pub resources: Option<ResourcesStatus>,
    /// Observed runtime facts; `None` when the workload does not exist.
    pub observed_runtime: Option<ObservedRuntime>,
    /// When the earliest pending absence spans its stabilization window: the reconcile is
    /// requeued for then (not after the full interval), so the absence is confirmed promptly.
    pub window_due_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// The evidence set the observer collected (what the evaluation rests on; the record the
    /// producer mode signs, docs/design/status.md#evidence-producer). `None` when it does not
    /// decode.
    pub evidence: Option<pacto_engine::EvidenceSet>,
}

/// What the evaluator returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// Structural warnings first, then runtime findings.
    pub findings: Vec<FindingStatus>,
    /// Coverage of required assertions.
    pub coverage: EvaluationCoverage,
    /// Counts by severity.
    pub summary: Summary,
    /// The derived contract status (Compliant, Warning, NonCompliant or Unknown).
    pub status: ContractStatus,
    /// The readiness assessment; `None` without `readiness:`.
    pub readiness: Option<ReadinessStatus>,
}

/// The runtime stage of a pass whose contract resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Runtime {
    /// No target: only readiness is assessed (the evaluator may have failed).
    Reference(Result<Option<ReadinessStatus>, BackendFailure>),
    /// The observer answered; the evaluator may have failed.
    Observed {
        /// The observation.
        observed: Box<Observed>,
        /// The evaluation.
        evaluated: Result<Evaluated, BackendFailure>,
    },
    /// The observer could not be reached.
    ObserveFailed(BackendFailure),
}

/// The PactoRevision ensured for the resolved contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsuredRevision {
    /// Its name (`status.currentRevision`). `RevisionCreated` is reported where it is created
    /// ([`crate::reconcile::revisions`]), not by the composed pass.
    pub name: String,
}

/// Declares [`ConditionState`] and its list from one table, so that the list is every variant
/// by construction.
macro_rules! condition_states {
    ($($(#[$doc:meta])* $state:ident = ($type_:expr, $status:ident, $reason:expr),)*) => {
        /// Every condition state the status-writer can write: a (type, status, reason) triple
        /// (docs/design/status.md#conditions). [`crate::compose`] sets conditions only through
        /// these, and the user guide's conditions table is checked against
        /// [`ConditionState::ALL`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ConditionState {
            $($(#[$doc])* $state,)*
        }

        impl ConditionState {
            /// Every state, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$state,)*];

            /// `(type, status, reason)`.
            pub fn parts(self) -> (&'static str, ConditionStatus, &'static str) {
                match self {
                    $(Self::$state => ($type_, ConditionStatus::$status, $reason),)*
                }
            }
        }
    };
}

condition_states! {
    /// The contract was obtained and is valid.
    ContractParsed = (CONTRACT_VALID, True, reason::PARSED),
    /// The same, without a target.
    ContractReferenceOnly = (CONTRACT_VALID, True, reason::REFERENCE_ONLY),
    /// The contract was obtained and is invalid.
    ContractInvalid = (CONTRACT_VALID, False, reason::INVALID),
    /// The contract could not be obtained (registry, credentials, resolver down).
    ContractUnavailable = (CONTRACT_VALID, Unknown, reason::UNAVAILABLE),
    /// The observer answered and no Kubernetes query failed.
    RuntimeFound = (RUNTIME_OBSERVED, True, reason::FOUND),
    /// A query for the runtime failed: the observer answered that a Kubernetes query failed, or
    /// the observer itself could not be reached (or answered something malformed; the message
    /// then starts `observer unavailable: `). The guide allows RuntimeObserved only True/Found
    /// and False/ObservationFailed (docs/design/status.md#conditions).
    RuntimeObservationFailed = (RUNTIME_OBSERVED, False, reason::OBSERVATION_FAILED),
    /// The readiness score meets minScore.
    ReadinessSatisfied = (READINESS_SATISFIED, True, reason::SATISFIED),
    /// The readiness assessment is past its expiry date.
    ReadinessExpired = (READINESS_SATISFIED, False, reason::EXPIRED),
    /// The readiness score is below minScore.
    ReadinessBelowMinScore = (READINESS_SATISFIED, False, reason::BELOW_MIN_SCORE),
}
