//! The pure Pacto evaluation engine: evidence model, `evaluate`, coverage, the finding code
//! registry and status derivation. No I/O, no Kubernetes, no gRPC.
//!
//! # API overview
//!
//! **Input: the contract's assertions** ([`ContractAssertions`], docs/design/evaluation.md#engine-inputs):
//! `service_name`, `interfaces` (names), `capabilities` ([`CapabilityAssertion`]: `Health`,
//! `Metrics`, `Extension { reference }`), `dependencies` / `configurations`
//! ([`NamedAssertion`] `{name, required}`), `workload` (`Option<String>`), `persistent` (bool).
//! Build it from a parsed contract with
//! `ContractAssertions::try_from(&pacto_contract::model::Contract)`; it fails
//! (naming the field) only for capabilities no valid contract contains.
//!
//! **Input: the evidence** ([`EvidenceSet`], docs/design/evaluation.md#evidence-model): `subject` ([`SubjectRef`]),
//! `contract_ref`, `source`, `observed_at` ([`Timestamp`]), `observations:
//! Option<Vec<Observation>>` (`None` ≙ JSON `null`). An [`Observation`] is
//! `{kind: ObservationKind, subject: SubjectRef, outcome: Outcome, provenance: Provenance}`;
//! [`Outcome::Observed`] carries the kind's payload [`Value`] (`Capability{present}`,
//! `Interface{interface_type, present}`, `Dependency{reachable}`,
//! `Configuration{present, conformant}`, `Workload{workload_type}`, `Persistence{durable}`);
//! the other outcomes (`Unsupported`, `Failed`, `Stale`, `Insufficient`) carry nothing.
//! [`OutcomeKind`] is the payload-free label. Build observations with [`Observation::new`] /
//! [`Observation::observed`] (they set the paired `subject.kind`).
//!
//! - JSON: [`EvidenceSet::from_json`] (strict, upstream key names) / [`EvidenceSet::to_json`].
//! - Validation: [`EvidenceSet::validate`] → `Result<(), ValidationErrors>`; every
//!   [`ValidationError`] names its field (`Observations[3].provenance.collector`, …) via
//!   [`ValidationError::field`] — use it for gRPC `InvalidArgument`.
//!
//! **Evaluate**: [`evaluate()`]`(&ContractAssertions, &EvidenceSet) -> Evaluation`
//! (`{findings: Vec<Finding>, coverage: Coverage{evaluated, required}}`), infallible.
//! [`Evaluation::with_structural`] prepends structural warnings (build them with
//! [`Finding::structural`]); [`Evaluation::summary`] and [`Evaluation::status`] give
//! `status.summary` and `status.contractStatus`.
//!
//! **Findings** ([`Finding`]): `code: String`, `severity: Severity`,
//! `category: Option<Category>` (`None` ≙ `""` for unregistered codes),
//! `subject: Option<SubjectRef>`, `contract_path: Option<String>`, `message`,
//! `evidence_refs: Vec<EvidenceRef>` where [`EvidenceRef`] is
//! `{source, observed_at, collector: Option, detected_at: Option}` (strings, RFC3339 seconds).
//!
//! **Status**: [`derive_status`]`(&[Finding], Coverage) -> ContractStatus` (NonCompliant >
//! Unknown > Warning > Compliant); [`verdict`]`(Stage)` adds the Invalid / Unavailable /
//! ReferenceOnly short-circuits and the [`Summary`].
//!
//! **Registry** (re-exported from `pacto_contract::codes`, the one registry): [`FindingCode`]
//! (every code), [`category_for`] / [`severity_for`] / [`category_of`] over code strings.
//!
//! **Benchmark helpers** (feature `bench`, off in production builds): `bench::typical_contract`,
//! `bench::typical_evidence` and `bench::evaluations_per_second` build the "typical contract"
//! used by the in-process and gRPC benches so both measure the same input.

#[cfg(feature = "bench")]
pub mod bench;
mod contract;
mod evaluate;
mod evidence;
mod finding;
mod input;
mod status;
mod time;

pub use evaluate::{Evaluation, evaluate, go_quote};
pub use evidence::{
    CapabilityValue, ConfigurationValue, DecodeError, DependencyValue, EvidenceSet, InterfaceValue,
    MAX_OBSERVATIONS, Observation, ObservationKind, Outcome, OutcomeKind, PersistenceValue,
    Provenance, SubjectRef, ValidationError, ValidationErrors, Value, WorkloadValue,
};
pub use finding::{
    Coverage, EvidenceRef, Finding, RecordEvidenceRef, RecordFinding, RecordSubject, Summary,
    project_collector,
};
pub use input::{CapabilityAssertion, ContractAssertions, InputError, NamedAssertion};
/// The finding registry lives in `pacto-contract` (one table for the validator and the engine).
pub use pacto_contract::codes::{
    Category, FindingCode, RegistryEntry, Severity, UnknownCode, category_for, category_of,
    severity_for,
};
pub use status::{ContractStatus, Stage, Verdict, derive_status, verdict};
pub use time::{Timestamp, TimestampError};
