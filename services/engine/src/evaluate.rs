//! `Evaluate(contract, evidence) -> findings + coverage` (docs/design/evaluation.md#per-assertion-rules).
//!
//! Pure and stateless: it trusts the collector-stamped outcomes and applies no time or
//! Kubernetes logic.

use std::fmt::Write as _;

use pacto_contract::codes::FindingCode;
use serde::{Deserialize, Serialize};

use crate::evidence::{EvidenceSet, Observation, ObservationKind, Outcome, SubjectRef, Value};
use crate::finding::{Coverage, EvidenceRef, Finding, Summary, project_collector};
use crate::input::{CapabilityAssertion, ContractAssertions};
use crate::status::{ContractStatus, derive_status};

/// The engine's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evaluation {
    /// Findings in evaluation order: interfaces, capabilities, dependencies, configurations,
    /// workload, persistence (contract order within each).
    pub findings: Vec<Finding>,
    /// Required assertions evaluated vs. total.
    pub coverage: Coverage,
}

impl Evaluation {
    /// Prepends structural (validation) warnings, as the operator does before deriving status
    /// (docs/design/evaluation.md#per-assertion-rules).
    #[must_use]
    pub fn with_structural(mut self, structural: Vec<Finding>) -> Self {
        let mut findings = structural;
        findings.append(&mut self.findings);
        self.findings = findings;
        self
    }

    /// Severity counts of the findings.
    pub fn summary(&self) -> Summary {
        Summary::of(&self.findings)
    }

    /// The ladder of docs/design/evaluation.md#status-derivation over these findings and coverage.
    pub fn status(&self) -> ContractStatus {
        derive_status(&self.findings, self.coverage)
    }
}

/// Evaluates `contract` against `evidence`.
///
/// Matching takes the **first** observation whose kind equals the assertion's kind and whose
/// `subject.name` equals the assertion name (run [`EvidenceSet::validate`] first to reject
/// duplicates). Never fails: every outcome maps to a finding or to nothing.
pub fn evaluate(contract: &ContractAssertions, evidence: &EvidenceSet) -> Evaluation {
    let mut run = Run {
        unmatched: EvidenceRef::unmatched(evidence),
        observations: evidence.observations(),
        findings: Vec::new(),
        coverage: Coverage::default(),
    };

    if evidence.subject_missing {
        run.findings.push(missing_subject(evidence, &run.unmatched));
    }

    for name in &contract.interfaces {
        run.assertion(
            Assertion {
                kind: ObservationKind::InterfaceObserved,
                name,
                contract_path: Path::Keyed("interfaces[name=", name),
                required: true,
            },
            // The Kubernetes collector's reason is the upstream message; a negative the node
            // agents decided carries its own reason as the observation's detail
            // (docs/design/evaluation.md#finding-messages).
            |value, detail| match value {
                Value::Interface(v) if !v.present => Some((
                    FindingCode::InterfaceAbsent,
                    match detail {
                        None => format!(
                            "interface {} is not available (zero ready endpoints beyond the stabilization window)",
                            go_quote(name)
                        ),
                        Some(detail) => format!(
                            "interface {} is not available ({detail}, beyond the stabilization window)",
                            go_quote(name)
                        ),
                    },
                )),
                _ => None,
            },
        );
    }

    for capability in &contract.capabilities {
        let key = capability.key();
        if let CapabilityAssertion::Extension { reference } = capability {
            run.coverage.required += 1;
            run.findings.push(Finding {
                code: FindingCode::ExtensionEvaluatorUnavailable
                    .as_str()
                    .to_owned(),
                severity: FindingCode::ExtensionEvaluatorUnavailable.severity(true),
                category: FindingCode::ExtensionEvaluatorUnavailable.category(true),
                subject: Some(SubjectRef::new("capability", reference.as_str())),
                contract_path: Some(format!("capabilities[ref={reference}]")),
                message: format!(
                    "extension capability {} has no registered evaluator",
                    go_quote(reference)
                ),
                evidence_refs: vec![run.unmatched.clone()],
            });
            continue;
        }
        run.assertion(
            Assertion {
                kind: ObservationKind::CapabilityObserved,
                name: key,
                contract_path: Path::Keyed("capabilities[type=", key),
                required: true,
            },
            |value, _| match value {
                Value::Capability(v) if !v.present => Some((
                    FindingCode::CapabilityAbsent,
                    format!("capability {} is absent at runtime", go_quote(key)),
                )),
                _ => None,
            },
        );
    }

    for dependency in &contract.dependencies {
        let name = dependency.name.as_str();
        run.assertion(
            Assertion {
                kind: ObservationKind::DependencyReachable,
                name,
                contract_path: Path::Keyed("dependencies[name=", name),
                required: dependency.required,
            },
            |value, _| match value {
                Value::Dependency(v) if !v.reachable => Some((
                    FindingCode::DependencyUnreachable,
                    format!("dependency {} is unreachable", go_quote(name)),
                )),
                _ => None,
            },
        );
    }

    for configuration in &contract.configurations {
        let name = configuration.name.as_str();
        run.assertion(
            Assertion {
                kind: ObservationKind::ConfigurationPresent,
                name,
                contract_path: Path::Keyed("configurations[name=", name),
                required: configuration.required,
            },
            |value, _| match value {
                Value::Configuration(v) if !v.present => Some((
                    FindingCode::ConfigurationAbsent,
                    format!(
                        "required configuration {} is absent at runtime",
                        go_quote(name)
                    ),
                )),
                Value::Configuration(v) if !v.conformant => Some((
                    FindingCode::ConfigurationMismatch,
                    format!(
                        "configuration {} exists but does not conform to the declared schema",
                        go_quote(name)
                    ),
                )),
                _ => None,
            },
        );
    }

    let service = contract.service_name.as_str();
    if let Some(declared) = contract.declared_workload() {
        run.assertion(
            Assertion {
                kind: ObservationKind::WorkloadObserved,
                name: service,
                contract_path: Path::Fixed("workload"),
                required: true,
            },
            |value, _| match value {
                Value::Workload(v) if v.workload_type != declared => Some((
                    FindingCode::WorkloadMismatch,
                    format!(
                        "workload type is {} but observed as {}",
                        go_quote(declared),
                        go_quote(&v.workload_type)
                    ),
                )),
                _ => None,
            },
        );
    }

    if contract.persistent {
        run.assertion(
            Assertion {
                kind: ObservationKind::PersistenceObserved,
                name: service,
                contract_path: Path::Fixed("state.persistence.durability"),
                required: true,
            },
            |value, _| match value {
                Value::Persistence(v) if !v.durable => Some((
                    FindingCode::PersistenceMismatch,
                    "contract declares persistent durability but no persistent storage binding was observed"
                        .to_owned(),
                )),
                _ => None,
            },
        );
    }

    Evaluation {
        findings: run.findings,
        coverage: run.coverage,
    }
}

#[derive(Clone, Copy)]
struct Assertion<'a> {
    kind: ObservationKind,
    name: &'a str,
    contract_path: Path<'a>,
    required: bool,
}

/// A contract path, rendered only when a finding needs it (most assertions produce none).
#[derive(Clone, Copy)]
enum Path<'a> {
    /// `<prefix><key>]`, e.g. `interfaces[name=` + `http` + `]`.
    Keyed(&'static str, &'a str),
    /// A fixed path.
    Fixed(&'static str),
}

impl Path<'_> {
    fn render(self) -> String {
        match self {
            Self::Keyed(prefix, key) => {
                let mut out = String::with_capacity(prefix.len() + key.len() + 1);
                out.push_str(prefix);
                out.push_str(key);
                out.push(']');
                out
            }
            Self::Fixed(path) => path.to_owned(),
        }
    }
}

struct Run<'a> {
    /// The ref of findings without a matched observation (formatted once).
    unmatched: EvidenceRef,
    observations: &'a [Observation],
    findings: Vec<Finding>,
    coverage: Coverage,
}

impl Run<'_> {
    fn matched_ref(&self, observation: &Observation) -> EvidenceRef {
        EvidenceRef {
            collector: Some(project_collector(&observation.provenance.collector).to_owned()),
            detected_at: Some(observation.provenance.detected_at.to_rfc3339_seconds()),
            ..self.unmatched.clone()
        }
    }

    /// The uniform per-assertion algorithm (docs/design/evaluation.md#per-assertion-rules). `contradiction` inspects an
    /// Observed payload and returns the violated code and message, if any.
    fn assertion(
        &mut self,
        assertion: Assertion<'_>,
        contradiction: impl FnOnce(&Value, Option<&str>) -> Option<(FindingCode, String)>,
    ) {
        let subject_kind = assertion.kind.subject_kind();
        let matched = self
            .observations
            .iter()
            .find(|o| o.kind == assertion.kind && o.subject.name == assertion.name);
        let value = match matched.map(|o| &o.outcome) {
            // A payload of another kind (only possible when built programmatically without
            // validation) is not evidence for this assertion: it reads as insufficient.
            Some(Outcome::Observed(value)) if value.kind() == assertion.kind => value,
            other => {
                if assertion.required {
                    self.coverage.required += 1;
                    let code = match other {
                        None => FindingCode::EvidenceMissing,
                        Some(Outcome::Unsupported) => FindingCode::ObservationUnsupported,
                        Some(Outcome::Failed) => FindingCode::CollectionFailed,
                        Some(Outcome::Stale) => FindingCode::EvidenceStale,
                        Some(Outcome::Insufficient | Outcome::Observed(_)) => {
                            FindingCode::EvidenceInsufficient
                        }
                    };
                    let mut message = unknown_message(code, subject_kind, assertion.name);
                    if let Some(detail) = matched.and_then(|o| o.detail.as_deref()) {
                        message.push_str(": ");
                        message.push_str(detail);
                    }
                    let evidence_ref =
                        matched.map_or_else(|| self.unmatched.clone(), |o| self.matched_ref(o));
                    self.findings.push(Finding {
                        code: code.as_str().to_owned(),
                        severity: code.severity(true),
                        category: code.category(true),
                        subject: Some(SubjectRef::new(subject_kind, assertion.name)),
                        contract_path: Some(assertion.contract_path.render()),
                        message,
                        evidence_refs: vec![evidence_ref],
                    });
                }
                return;
            }
        };
        if assertion.required {
            self.coverage.required += 1;
            self.coverage.evaluated += 1;
        }
        if let Some((code, message)) =
            contradiction(value, matched.and_then(|o| o.detail.as_deref()))
        {
            let observation =
                matched.map_or_else(|| self.unmatched.clone(), |o| self.matched_ref(o));
            self.findings.push(Finding {
                code: code.as_str().to_owned(),
                severity: code.severity(assertion.required),
                category: code.category(assertion.required),
                subject: Some(SubjectRef::new(subject_kind, assertion.name)),
                contract_path: Some(assertion.contract_path.render()),
                message,
                evidence_refs: vec![observation],
            });
        }
    }
}

/// The `EVIDENCE_MISSING` finding of a subject whose own object does not exist
/// (docs/design/evaluation.md#the-target): about the EvidenceSet's subject, with no contract path
/// (the target is not part of the contract) and no coverage (it is not a contract assertion).
fn missing_subject(evidence: &EvidenceSet, unmatched: &EvidenceRef) -> Finding {
    let code = FindingCode::EvidenceMissing;
    Finding {
        code: code.as_str().to_owned(),
        severity: code.severity(true),
        category: code.category(true),
        subject: Some(evidence.subject.clone()),
        contract_path: None,
        message: format!(
            "target {} {} does not exist: nothing about it can be observed",
            evidence.subject.kind,
            go_quote(&evidence.subject.name)
        ),
        evidence_refs: vec![unmatched.clone()],
    }
}

fn unknown_message(code: FindingCode, subject_kind: &str, name: &str) -> String {
    let name = go_quote(name);
    match code {
        FindingCode::EvidenceMissing => {
            format!("no observation was produced for required {subject_kind} {name}")
        }
        FindingCode::ObservationUnsupported => {
            format!("{subject_kind} {name} cannot be observed in this environment")
        }
        FindingCode::CollectionFailed => format!("collection failed for {subject_kind} {name}"),
        FindingCode::EvidenceStale => format!("evidence for {subject_kind} {name} is stale"),
        _ => format!(
            "evidence for {subject_kind} {name} is insufficient to satisfy or contradict the contract"
        ),
    }
}

/// Quotes like Go's `%q` (`strconv.Quote`) for the characters contract names can contain:
/// `"` and `\` escaped, C escapes for control characters, `\xHH` for other ASCII controls,
/// `\uHHHH` for other non-printable characters.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0b}' => out.push_str("\\v"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote("http-api"), "\"http-api\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote("x\ny\u{0}"), "\"x\\ny\\x00\"");
        assert_eq!(go_quote("é"), "\"é\"");
        assert_eq!(go_quote("\u{85}"), "\"\\u0085\"");
    }
}
