//! The pure middle of a reconcile (docs/design/status.md#reconcile-steps): from the Pacto (spec,
//! generation, persisted status), what the backends answered and the clock, compose the new
//! status, the conditions and the transition-gated events, and decide whether anything changed.
//!
//! Nothing here performs I/O; [`crate::controller`] gathers the inputs and applies the result.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pacto_api::conditions::{
    self, ConditionStatus, NewCondition, READINESS_SATISFIED, RUNTIME_OBSERVED,
};
use pacto_api::labels::event_reason;
use pacto_api::{
    ContractStatus, FindingStatus, PactoSpec, PactoStatus, ReadinessStatus, ResolutionPolicy,
    Severity, Summary, UndeclaredPeer, UndeclaredPeerKind, ValidationIssue, ValidationResult,
    sort_observation_windows,
};

use crate::derive::apply_contract;
use crate::model::{BackendFailure, ConditionState, EnsuredRevision, Resolution, Runtime};

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// One event to publish on the Pacto.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Normal or Warning.
    pub kind: EventKind,
    /// One of the eight reasons of [`event_reason::ALL`].
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

impl EventSpec {
    fn warning(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind: EventKind::Warning,
            reason,
            message: message.into(),
        }
    }

    fn normal(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind: EventKind::Normal,
            reason,
            message: message.into(),
        }
    }
}

/// Everything one pass knows.
#[derive(Debug, Clone)]
pub struct Pass<'a> {
    /// The Pacto's spec.
    pub spec: &'a PactoSpec,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The persisted status (`None` = never reconciled).
    pub previous: Option<&'a PactoStatus>,
    /// The instant of this pass.
    pub now: Time,
    /// How the contract resolved.
    pub resolution: &'a Resolution,
    /// The runtime stage; only meaningful when the contract resolved.
    pub runtime: Option<&'a Runtime>,
    /// The revision ensured for the resolved contract (`None`: not resolved, or the revision
    /// could not be ensured; `currentRevision` is then kept).
    pub revision: Option<&'a EnsuredRevision>,
}

/// The result of a pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Composed {
    /// The status to persist.
    pub status: PactoStatus,
    /// Whether it differs from the persisted one (no write otherwise).
    pub changed: bool,
    /// Events to publish, in order.
    pub events: Vec<EventSpec>,
    /// The occurrence key of those events: the persisted status they move away from
    /// ([`status_occurrence`]).
    pub occurrence: String,
}

/// The occurrence key of the transition events of a pass that starts from the persisted status
/// `previous` (docs/design/status.md#exactly-once-events): a replay of the pass (after a crash or
/// a failed write) starts from the same persisted status and gets the same key; a later
/// transition starts from a status written since, which differs at least in `lastReconciledAt`
/// (or, within one second, in what that write changed). Only fields that round-trip through the
/// API server unchanged are hashed, so the status held in the write memo and the one read back
/// give the same key.
pub fn status_occurrence(previous: Option<&PactoStatus>) -> String {
    use sha2::{Digest, Sha256};
    let Some(previous) = previous else {
        return "status:none".to_owned();
    };
    let mut hasher = Sha256::new();
    let mut field = |value: &str| {
        hasher.update((value.len() as u64).to_be_bytes());
        hasher.update(value.as_bytes());
    };
    field(
        &previous
            .last_reconciled_at
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    );
    field(previous.contract_status.map_or("", ContractStatus::as_str));
    field(
        &previous
            .observed_generation
            .map(|g| g.to_string())
            .unwrap_or_default(),
    );
    field(previous.current_revision.as_deref().unwrap_or_default());
    for condition in &previous.conditions {
        field(&condition.type_);
        field(&condition.status);
        field(&condition.reason);
        field(&condition.last_transition_time.0.to_string());
    }
    let mut hex = hex::encode(hasher.finalize());
    hex.truncate(16);
    format!("status:{hex}")
}

/// `ContractStatus: <status>, <errors> errors, <warnings> warnings`.
pub fn counts_message(status: ContractStatus, summary: Option<&Summary>) -> String {
    let summary = summary.copied().unwrap_or_default();
    format!(
        "ContractStatus: {}, {} errors, {} warnings",
        status.as_str(),
        summary.error_count,
        summary.warning_count
    )
}

/// Degraded ≡ set and not Compliant/Reference.
pub fn is_degraded(status: Option<ContractStatus>) -> bool {
    status.is_some_and(|s| !matches!(s, ContractStatus::Compliant | ContractStatus::Reference))
}

/// Composes the status of one pass.
pub fn compose(pass: &Pass<'_>) -> Composed {
    let previous = pass.previous.cloned().unwrap_or_default();
    let prev_status = previous.contract_status;
    let prev_readiness = conditions::find_condition(&previous.conditions, READINESS_SATISFIED)
        .and_then(|c| ConditionStatus::parse(&c.status));

    // Step 3: reset the derived status, keeping conditions, currentRevision, windows,
    // lastReconciledAt and observedGeneration.
    let mut status = PactoStatus {
        conditions: previous.conditions.clone(),
        current_revision: previous.current_revision.clone(),
        observation_windows: previous.observation_windows.clone(),
        last_reconciled_at: previous.last_reconciled_at.clone(),
        observed_generation: previous.observed_generation,
        ..PactoStatus::default()
    };
    let mut writer = Writer {
        status: &mut status,
        generation: pass.generation,
        now: &pass.now,
        events: Vec::new(),
    };

    match pass.resolution {
        Resolution::Invalid {
            message,
            validation,
            policy,
        } => writer.fail(
            ContractStatus::Invalid,
            message,
            Some(validation.clone()),
            *policy,
            prev_status,
        ),
        Resolution::Unavailable { message, policy } => {
            writer.fail(ContractStatus::Unknown, message, None, *policy, prev_status);
        }
        Resolution::Failed(failure) => writer.fail(
            ContractStatus::Unknown,
            &failure.message(),
            None,
            derive_policy(pass.spec),
            prev_status,
        ),
        Resolution::Resolved(resolved) => {
            let contract = &resolved.contract;
            writer.status.resolution_policy = resolved.policy;
            apply_contract(writer.status, resolved, pass.spec);
            writer.status.validation = Some(resolved.validation.clone());
            writer.set(
                ConditionState::ContractParsed,
                format!(
                    "Contract {} v{} is valid",
                    contract.service.name, contract.service.version
                ),
            );

            if let Some(revision) = pass.revision {
                writer.status.current_revision = Some(revision.name.clone());
            }

            // Readiness: absent declaration removes the condition; an unanswered evaluator
            // leaves the previous assessment and condition in place.
            let readiness = match pass.runtime {
                Some(Runtime::Reference(Ok(r))) => Ok(r.clone()),
                Some(Runtime::Observed {
                    evaluated: Ok(e), ..
                }) => Ok(e.readiness.clone()),
                _ => Err(()),
            };
            if contract.readiness.is_none() {
                conditions::remove_condition(&mut writer.status.conditions, READINESS_SATISFIED);
            } else {
                match readiness {
                    Ok(Some(assessment)) => writer.readiness(assessment, prev_readiness),
                    Ok(None) => {
                        conditions::remove_condition(
                            &mut writer.status.conditions,
                            READINESS_SATISFIED,
                        );
                    }
                    Err(()) => writer.status.readiness.clone_from(&previous.readiness),
                }
            }

            let final_status = writer.runtime(pass, &previous, contract);
            writer.loaded_events(final_status, prev_status);
        }
    }

    let events = writer.events;
    bound_status(&mut status);
    status.observed_generation = pass.generation;
    let changed = status != previous;
    if changed {
        status.last_reconciled_at = Some(pass.now.clone());
    }
    Composed {
        status,
        changed,
        events,
        occurrence: status_occurrence(pass.previous),
    }
}

/// `resolutionPolicy` from the shape of `spec.contractRef` (inline wins; `@` ⇒ PinnedDigest;
/// a tag after the last `/` ⇒ PinnedTag; otherwise Latest), for paths where the resolver did
/// not answer.
pub fn derive_policy(spec: &PactoSpec) -> Option<ResolutionPolicy> {
    let reference = &spec.contract_ref;
    if reference.inline.as_deref().is_some_and(|i| !i.is_empty()) {
        return None;
    }
    let oci = reference.oci.as_deref().filter(|o| !o.is_empty())?;
    let oci = oci.trim_start_matches("oci://");
    if oci.contains('@') {
        Some(ResolutionPolicy::PinnedDigest)
    } else if oci
        .rsplit('/')
        .next()
        .is_some_and(|last| last.contains(':'))
    {
        Some(ResolutionPolicy::PinnedTag)
    } else {
        Some(ResolutionPolicy::Latest)
    }
}

struct Writer<'s> {
    status: &'s mut PactoStatus,
    generation: Option<i64>,
    now: &'s Time,
    events: Vec<EventSpec>,
}

impl Writer<'_> {
    fn set(&mut self, state: ConditionState, message: String) {
        let (type_, status, reason) = state.parts();
        let message = truncate_message(message, CONDITION_MESSAGE_LIMIT);
        conditions::set_condition(
            &mut self.status.conditions,
            NewCondition {
                type_,
                status,
                reason,
                message,
                observed_generation: self.generation,
            },
            self.now,
        );
    }

    /// The fail path: Invalid or Unknown at ContractValid.
    fn fail(
        &mut self,
        verdict: ContractStatus,
        message: &str,
        validation: Option<ValidationResult>,
        policy: Option<ResolutionPolicy>,
        prev: Option<ContractStatus>,
    ) {
        let (state, summary, event) = if verdict == ContractStatus::Invalid {
            (
                ConditionState::ContractInvalid,
                Summary {
                    error_count: 1,
                    ..Summary::default()
                },
                event_reason::CONTRACT_INVALID,
            )
        } else {
            (
                ConditionState::ContractUnavailable,
                Summary {
                    unknown_count: 1,
                    ..Summary::default()
                },
                event_reason::CONTRACT_UNAVAILABLE,
            )
        };
        self.set(state, message.to_owned());
        // Nothing was observed: no RuntimeObserved, and no negative streak continues across
        // the spell (docs/design/status.md#failure-paths).
        conditions::remove_condition(&mut self.status.conditions, RUNTIME_OBSERVED);
        self.status.observation_windows.clear();
        self.status.contract_status = Some(verdict);
        self.status.summary = Some(summary);
        self.status.resolution_policy = policy;
        self.status.validation = if verdict == ContractStatus::Invalid {
            validation
        } else {
            None
        };
        if prev != Some(verdict) {
            self.events.push(EventSpec::warning(event, message));
        }
    }

    /// Sets `status.readiness`, the ReadinessSatisfied condition and the readiness pair.
    fn readiness(&mut self, assessment: ReadinessStatus, prev: Option<ConditionStatus>) {
        let (state, message) = readiness_condition(&assessment);
        self.set(state, message.clone());
        match state.parts().1 {
            ConditionStatus::False if prev != Some(ConditionStatus::False) => self.events.push(
                EventSpec::warning(event_reason::READINESS_GATE_UNMET, message),
            ),
            ConditionStatus::True if prev == Some(ConditionStatus::False) => self.events.push(
                EventSpec::normal(event_reason::READINESS_RECOVERED, message),
            ),
            _ => {}
        }
        self.status.readiness = Some(assessment);
    }

    /// Steps 12–16: reference-only, or observe + evaluate. Returns the contract status.
    fn runtime(
        &mut self,
        pass: &Pass<'_>,
        previous: &PactoStatus,
        contract: &pacto_contract::model::Contract,
    ) -> ContractStatus {
        let reference = pass.spec.is_reference();
        match pass.runtime {
            _ if reference => {
                self.set(
                    ConditionState::ContractReferenceOnly,
                    format!(
                        "Reference contract {} v{} is valid",
                        contract.service.name, contract.service.version
                    ),
                );
                // Nothing is observed: no RuntimeObserved, and no negative streak continues
                // across the spell (docs/design/status.md#failure-paths).
                conditions::remove_condition(&mut self.status.conditions, RUNTIME_OBSERVED);
                self.status.observation_windows.clear();
                self.status.summary = Some(Summary::default());
                ContractStatus::Reference
            }
            Some(Runtime::Observed {
                observed,
                evaluated,
            }) => {
                let mut windows = observed.windows.clone();
                sort_observation_windows(&mut windows);
                self.status.observation_windows = windows;
                self.status.resources.clone_from(&observed.resources);
                self.status
                    .observed_runtime
                    .clone_from(&observed.observed_runtime);
                // The observation's own result, whatever became of the evaluation.
                match observed.api_errors.first() {
                    Some(error) => self.set(
                        ConditionState::RuntimeObservationFailed,
                        format!("Runtime observation failed: {error}"),
                    ),
                    None => self.set(
                        ConditionState::RuntimeFound,
                        "Runtime evidence collected successfully".to_owned(),
                    ),
                }
                match evaluated {
                    Ok(evaluation) => {
                        self.status.findings.clone_from(&evaluation.findings);
                        self.status.evaluation_coverage = Some(evaluation.coverage);
                        self.status.summary = Some(evaluation.summary);
                        evaluation.status
                    }
                    // The evaluator did not answer: no findings to show, the verdict is
                    // Unknown (docs/design/status.md#failure-paths).
                    Err(_) => self.unevaluated(),
                }
            }
            Some(Runtime::ObserveFailed(failure)) => {
                self.status
                    .observation_windows
                    .clone_from(&previous.observation_windows);
                self.observer_unavailable(failure)
            }
            Some(Runtime::Reference(_)) | None => {
                // A targeted Pacto without an observation: treat as the observer not
                // answering (the controller always supplies one; defensive).
                self.status
                    .observation_windows
                    .clone_from(&previous.observation_windows);
                self.observer_unavailable(&BackendFailure::new(
                    crate::model::Backend::Observer,
                    "no observation was made",
                ))
            }
        }
    }

    /// The observer did not answer: RuntimeObserved False/ObservationFailed naming it (the
    /// observer is how the operator queries the cluster; docs/design/status.md#conditions).
    fn observer_unavailable(&mut self, failure: &BackendFailure) -> ContractStatus {
        self.set(ConditionState::RuntimeObservationFailed, failure.message());
        self.unevaluated()
    }

    /// Nothing was evaluated this pass: Unknown, counted as one unknown.
    fn unevaluated(&mut self) -> ContractStatus {
        self.status.summary = Some(Summary {
            unknown_count: 1,
            ..Summary::default()
        });
        ContractStatus::Unknown
    }

    /// The finish-path events (the contract loaded and validated).
    fn loaded_events(&mut self, status: ContractStatus, prev: Option<ContractStatus>) {
        self.status.contract_status = Some(status);
        let message = counts_message(status, self.status.summary.as_ref());
        match status {
            ContractStatus::Warning | ContractStatus::NonCompliant | ContractStatus::Unknown
                if prev != Some(status) =>
            {
                self.events
                    .push(EventSpec::warning(event_reason::VALIDATION_FAILED, message));
            }
            ContractStatus::Compliant | ContractStatus::Reference if is_degraded(prev) => {
                self.events
                    .push(EventSpec::normal(event_reason::CONTRACT_RECOVERED, message));
            }
            _ => {}
        }
    }
}

/// The ReadinessSatisfied condition of an assessment: its state and message
/// (docs/design/status.md#conditions).
pub fn readiness_condition(r: &ReadinessStatus) -> (ConditionState, String) {
    let breakdown = format!(
        "({} done, {} partial, {} not-done, {} deferred)",
        r.done_count, r.partial_count, r.not_done_count, r.deferred_count
    );
    if r.passing {
        (
            ConditionState::ReadinessSatisfied,
            format!("readiness score {} meets minScore {}", r.score, r.min_score),
        )
    } else if r.expired {
        (
            ConditionState::ReadinessExpired,
            format!(
                "readiness assessment expired (expires {}); score {} below minScore {} {breakdown}",
                r.expires.as_deref().unwrap_or_default(),
                r.score,
                r.min_score
            ),
        )
    } else {
        (
            ConditionState::ReadinessBelowMinScore,
            format!(
                "readiness score {} below minScore {} {breakdown}",
                r.score, r.min_score
            ),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Size limits (docs/design/status.md#size-limits)
// ---------------------------------------------------------------------------------------------

/// The longest Event message the API server accepts, in bytes.
pub const EVENT_MESSAGE_LIMIT: usize = 1024;
/// The longest condition message written, in bytes.
pub const CONDITION_MESSAGE_LIMIT: usize = 4096;
/// The longest message of one validation issue or finding, in bytes.
pub const ITEM_MESSAGE_LIMIT: usize = 1024;
/// How many entries of `validation.errors`, `validation.warnings` and `findings` are kept.
pub const LIST_CAP: usize = 100;
/// The end of a message that was cut.
pub const TRUNCATED_MARKER: &str = " … (truncated)";
/// The code of the entry that closes a capped list.
pub const LIST_TRUNCATED: &str = "LIST_TRUNCATED";

/// `message` within `limit` bytes: unchanged when it fits, otherwise cut on a character
/// boundary and ended with [`TRUNCATED_MARKER`] (the whole, marker included, within `limit`).
pub fn truncate_message(message: String, limit: usize) -> String {
    if message.len() <= limit {
        return message;
    }
    let Some(room) = limit.checked_sub(TRUNCATED_MARKER.len()) else {
        // No room for the marker: a bare cut.
        return message[..floor_boundary(&message, limit)].to_owned();
    };
    let mut cut = message;
    cut.truncate(floor_boundary(&cut, room));
    cut.push_str(TRUNCATED_MARKER);
    cut
}

/// The largest character boundary of `text` at or below `index`.
fn floor_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The message of the entry closing a list of `total` that keeps [`LIST_CAP`].
fn overflow_message(total: usize, what: &str, field: &str) -> String {
    format!(
        "{} more {what} not listed; {field} gives the total ({total})",
        total - LIST_CAP
    )
}

/// Bounds the message of each of `items`, then caps the list at [`LIST_CAP`] plus one
/// [`LIST_TRUNCATED`] entry made by `overflow` from the true count. A list already capped (its
/// overflow entry last, as read back from the API server) is left as it is. Returns the true
/// count when entries were left out.
fn cap_list<T>(
    items: &mut Vec<T>,
    message: fn(&mut T) -> &mut String,
    is_overflow: fn(&T) -> bool,
    overflow: impl FnOnce(usize) -> T,
) -> Option<u64> {
    for item in items.iter_mut() {
        let text = message(item);
        *text = truncate_message(std::mem::take(text), ITEM_MESSAGE_LIMIT);
    }
    let total = items.len();
    let capped = items.last().is_some_and(is_overflow);
    if total <= LIST_CAP || (capped && total == LIST_CAP + 1) {
        return None;
    }
    items.truncate(LIST_CAP);
    items.push(overflow(total));
    Some(total as u64)
}

/// Caps `issues` at [`LIST_CAP`] plus a [`LIST_TRUNCATED`] entry and bounds each message;
/// returns the true count when entries were left out.
pub fn cap_issues(issues: &mut Vec<ValidationIssue>, what: &str, field: &str) -> Option<u64> {
    cap_list(
        issues,
        |issue| &mut issue.message,
        |issue| issue.code.as_deref() == Some(LIST_TRUNCATED),
        |total| ValidationIssue {
            code: Some(LIST_TRUNCATED.to_owned()),
            path: None,
            message: overflow_message(total, what, field),
        },
    )
}

/// Caps `findings` at [`LIST_CAP`] plus a [`LIST_TRUNCATED`] entry (severity info, so the
/// summary's counts are not disturbed) and bounds each message; returns the true count when
/// entries were left out.
pub fn cap_findings(findings: &mut Vec<FindingStatus>) -> Option<u64> {
    cap_list(
        findings,
        |finding| &mut finding.message,
        |finding| finding.code == LIST_TRUNCATED,
        |total| FindingStatus {
            code: LIST_TRUNCATED.to_owned(),
            severity: Severity::Info,
            category: "Overflow".to_owned(),
            subject: None,
            contract_path: None,
            message: overflow_message(total, "findings", "status.totalFindings"),
            evidence_refs: Vec::new(),
        },
    )
}

/// Caps `peers` (status.observedRuntime.undeclaredPeers) at [`LIST_CAP`] plus a
/// [`LIST_TRUNCATED`] entry whose name says how many were left out; returns the true count when
/// entries were left out.
pub fn cap_peers(peers: &mut Vec<UndeclaredPeer>) -> Option<u64> {
    cap_list(
        peers,
        |peer| &mut peer.name,
        |peer| peer.kind == UndeclaredPeerKind::ListTruncated,
        |total| UndeclaredPeer {
            kind: UndeclaredPeerKind::ListTruncated,
            name: overflow_message(
                total,
                "undeclared peers",
                "status.observedRuntime.totalUndeclaredPeers",
            ),
            ports: Vec::new(),
        },
    )
}

/// How many undeclared peers `status` lists (the true count when the list was capped); `None`
/// when it says nothing about them.
pub fn undeclared_peer_count(status: &PactoStatus) -> Option<u64> {
    let runtime = status.observed_runtime.as_ref()?;
    let peers = runtime.undeclared_peers.as_ref()?;
    Some(runtime.total_undeclared_peers.unwrap_or(peers.len() as u64))
}

/// Bounds the lists and messages of a composed status. A status already bounded is left as it
/// is, so a pass over an unchanged input composes the same status again.
pub fn bound_status(status: &mut PactoStatus) {
    if let Some(validation) = status.validation.as_mut() {
        let errors = cap_issues(
            &mut validation.errors,
            "errors",
            "status.validation.totalErrors",
        );
        let warnings = cap_issues(
            &mut validation.warnings,
            "warnings",
            "status.validation.totalWarnings",
        );
        // A list that was capped before (read back from the API server) keeps its total.
        validation.total_errors = errors.or(validation.total_errors);
        validation.total_warnings = warnings.or(validation.total_warnings);
    }
    status.total_findings = cap_findings(&mut status.findings).or(status.total_findings);
    if let Some(runtime) = status.observed_runtime.as_mut()
        && let Some(peers) = runtime.undeclared_peers.as_mut()
    {
        runtime.total_undeclared_peers = cap_peers(peers).or(runtime.total_undeclared_peers);
    }
    for condition in &mut status.conditions {
        condition.message = truncate_message(
            std::mem::take(&mut condition.message),
            CONDITION_MESSAGE_LIMIT,
        );
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    fn issue(i: usize) -> ValidationIssue {
        ValidationIssue {
            code: Some("SCHEMA_VIOLATION".into()),
            path: Some(format!("interfaces.{i}")),
            message: format!("error {i}"),
        }
    }

    #[test]
    fn a_message_that_fits_is_unchanged_and_the_exact_limit_fits() {
        assert_eq!(truncate_message("short".into(), 10), "short");
        let exact = "x".repeat(EVENT_MESSAGE_LIMIT);
        assert_eq!(truncate_message(exact.clone(), EVENT_MESSAGE_LIMIT), exact);
    }

    #[test]
    fn a_long_message_is_cut_to_the_limit_with_the_marker() {
        let cut = truncate_message("x".repeat(EVENT_MESSAGE_LIMIT + 1), EVENT_MESSAGE_LIMIT);
        assert_eq!(cut.len(), EVENT_MESSAGE_LIMIT);
        assert!(cut.ends_with(TRUNCATED_MARKER), "{cut}");
        assert!(cut.starts_with("xxx"));
    }

    #[test]
    fn multi_byte_characters_at_the_boundary_are_never_split() {
        // 'é' is two bytes, '€' three: every offset of the cut lands inside some character.
        for shift in 0..3 {
            let text = format!("{}{}", "a".repeat(shift), "é€".repeat(400));
            let cut = truncate_message(text.clone(), EVENT_MESSAGE_LIMIT);
            assert!(cut.len() <= EVENT_MESSAGE_LIMIT, "{}", cut.len());
            assert!(cut.len() > EVENT_MESSAGE_LIMIT - TRUNCATED_MARKER.len() - 4);
            let kept = cut.strip_suffix(TRUNCATED_MARKER).expect("marker");
            assert!(text.starts_with(kept));
        }
        // A limit below the marker's own length: a bare cut, still on a boundary.
        assert_eq!(truncate_message("ééé".into(), 3), "é");
    }

    #[test]
    fn a_list_over_the_cap_keeps_the_first_entries_an_overflow_entry_and_the_total() {
        let mut issues: Vec<_> = (0..20_000).map(issue).collect();
        let total = cap_issues(&mut issues, "errors", "status.validation.totalErrors");
        assert_eq!(total, Some(20_000));
        assert_eq!(issues.len(), LIST_CAP + 1);
        assert_eq!(issues[LIST_CAP - 1], issue(LIST_CAP - 1));
        let overflow = &issues[LIST_CAP];
        assert_eq!(overflow.code.as_deref(), Some(LIST_TRUNCATED));
        assert!(
            overflow.message.contains("19900 more errors"),
            "{}",
            overflow.message
        );

        let mut exact: Vec<_> = (0..LIST_CAP).map(issue).collect();
        assert_eq!(cap_issues(&mut exact, "errors", "x"), None);
        assert_eq!(exact.len(), LIST_CAP);
    }

    #[test]
    fn bounding_is_idempotent_and_keeps_the_true_totals() {
        let finding = |i: usize| FindingStatus {
            code: "INTERFACE_ABSENT".into(),
            severity: Severity::Error,
            category: "RuntimeDrift".into(),
            subject: Some(format!("interface/i{i}")),
            contract_path: None,
            message: "m".repeat(5000),
            evidence_refs: Vec::new(),
        };
        let mut status = PactoStatus {
            validation: Some(ValidationResult {
                valid: false,
                errors: (0..300).map(issue).collect(),
                warnings: (0..101).map(issue).collect(),
                ..ValidationResult::default()
            }),
            findings: (0..150).map(finding).collect(),
            ..PactoStatus::default()
        };
        bound_status(&mut status);
        let validation = status.validation.as_ref().expect("validation");
        assert_eq!(validation.total_errors, Some(300));
        assert_eq!(validation.total_warnings, Some(101));
        assert_eq!(status.total_findings, Some(150));
        assert_eq!(status.findings.len(), LIST_CAP + 1);
        assert_eq!(status.findings[LIST_CAP].severity, Severity::Info);
        assert!(status.findings[0].message.len() <= ITEM_MESSAGE_LIMIT);
        let once = status.clone();
        bound_status(&mut status);
        assert_eq!(status, once);
    }

    #[test]
    fn undeclared_peers_are_capped_with_a_marker_and_counted() {
        let peer = |i: usize| UndeclaredPeer {
            kind: UndeclaredPeerKind::Ip,
            name: format!("203.0.113.{i}"),
            ports: vec![443],
        };
        let runtime = |peers: Option<Vec<UndeclaredPeer>>| PactoStatus {
            observed_runtime: Some(pacto_api::ObservedRuntime {
                undeclared_peers: peers,
                ..pacto_api::ObservedRuntime::default()
            }),
            ..PactoStatus::default()
        };
        let mut status = runtime(Some((0..250).map(peer).collect()));
        bound_status(&mut status);
        let observed = status.observed_runtime.as_ref().expect("runtime");
        let peers = observed.undeclared_peers.as_ref().expect("peers");
        assert_eq!(peers.len(), LIST_CAP + 1);
        assert_eq!(peers[LIST_CAP - 1], peer(LIST_CAP - 1));
        assert_eq!(peers[LIST_CAP].kind, UndeclaredPeerKind::ListTruncated);
        assert!(
            peers[LIST_CAP].name.contains("150 more undeclared peers"),
            "{}",
            peers[LIST_CAP].name
        );
        assert_eq!(observed.total_undeclared_peers, Some(250));
        assert_eq!(undeclared_peer_count(&status), Some(250));
        let once = status.clone();
        bound_status(&mut status);
        assert_eq!(status, once, "bounding twice changes nothing");

        let mut few = runtime(Some(vec![peer(1)]));
        bound_status(&mut few);
        assert_eq!(undeclared_peer_count(&few), Some(1));
        assert_eq!(undeclared_peer_count(&runtime(Some(Vec::new()))), Some(0));
        // Nothing said (node evidence off, stale, failed or partial): no count at all.
        assert_eq!(undeclared_peer_count(&runtime(None)), None);
        assert_eq!(undeclared_peer_count(&PactoStatus::default()), None);
    }
}

#[cfg(test)]
mod occurrence_tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn written(second: i64, status: ContractStatus) -> PactoStatus {
        PactoStatus {
            contract_status: Some(status),
            last_reconciled_at: Some(at(second)),
            observed_generation: Some(1),
            conditions: vec![Condition {
                type_: "ContractValid".into(),
                status: "True".into(),
                reason: "Valid".into(),
                message: "m".into(),
                last_transition_time: at(second),
                observed_generation: Some(1),
            }],
            ..PactoStatus::default()
        }
    }

    #[test]
    fn a_replay_of_a_pass_gets_the_key_of_the_pass() {
        assert_eq!(status_occurrence(None), "status:none");
        let a = written(100, ContractStatus::Compliant);
        assert_eq!(
            status_occurrence(Some(&a)),
            status_occurrence(Some(&a.clone()))
        );
        // What the API server does not round-trip exactly (messages, lists) is not hashed.
        let mut read_back = a.clone();
        read_back.conditions[0].message = "other".into();
        read_back.summary = Some(Summary::default());
        assert_eq!(
            status_occurrence(Some(&a)),
            status_occurrence(Some(&read_back))
        );
    }

    #[test]
    fn each_later_write_gives_another_key() {
        let a = written(100, ContractStatus::Compliant);
        let keys = [
            status_occurrence(Some(&a)),
            status_occurrence(Some(&written(101, ContractStatus::Compliant))),
            status_occurrence(Some(&written(100, ContractStatus::NonCompliant))),
            {
                let mut b = a.clone();
                b.current_revision = Some("orders-1-0-0-abcdef0".into());
                status_occurrence(Some(&b))
            },
            {
                let mut b = a.clone();
                b.conditions[0].status = "False".into();
                status_occurrence(Some(&b))
            },
            status_occurrence(None),
        ];
        let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len(), "{keys:?}");
    }
}
