//! Condition helpers (docs/design/status.md#conditions) as pure functions over `status.conditions`.
//!
//! Semantics of [`set_condition`]: a new condition gets `lastTransitionTime = now`;
//! an existing one keeps its `lastTransitionTime` unless its `status` flips (reason, message
//! and observedGeneration updates do not move it).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition type: the contract was obtained, overrides applied and validation passed.
pub const CONTRACT_VALID: &str = "ContractValid";
/// Condition type: runtime evidence was collected (targeted path only).
pub const RUNTIME_OBSERVED: &str = "RuntimeObserved";
/// Condition type: the readiness gate is met (absent without `readiness:`).
pub const READINESS_SATISFIED: &str = "ReadinessSatisfied";

/// Condition reasons (the only ones emitted).
pub mod reason {
    /// ContractValid True: loaded and valid.
    pub const PARSED: &str = "Parsed";
    /// ContractValid True: valid, no target.
    pub const REFERENCE_ONLY: &str = "ReferenceOnly";
    /// ContractValid False: invalid.
    pub const INVALID: &str = "Invalid";
    /// ContractValid Unknown: could not be obtained.
    pub const UNAVAILABLE: &str = "Unavailable";
    /// RuntimeObserved True.
    pub const FOUND: &str = "Found";
    /// RuntimeObserved False.
    pub const OBSERVATION_FAILED: &str = "ObservationFailed";
    /// ReadinessSatisfied True.
    pub const SATISFIED: &str = "Satisfied";
    /// ReadinessSatisfied False: past its expiry date.
    pub const EXPIRED: &str = "Expired";
    /// ReadinessSatisfied False: score below minScore.
    pub const BELOW_MIN_SCORE: &str = "BelowMinScore";
}

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Parses the wire value.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::True, Self::False, Self::Unknown]
            .into_iter()
            .find(|s| s.as_str() == value)
    }
}

/// A condition to set: everything except `lastTransitionTime`, which [`set_condition`] owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCondition<'a> {
    /// Condition type, e.g. [`CONTRACT_VALID`].
    pub type_: &'a str,
    /// Status.
    pub status: ConditionStatus,
    /// Reason (CamelCase identifier).
    pub reason: &'a str,
    /// Human-readable message.
    pub message: String,
    /// `metadata.generation` of the spec this condition was computed from.
    pub observed_generation: Option<i64>,
}

/// Sets `new` in `conditions` at time `now`. Returns whether anything changed.
///
/// - absent → appended with `lastTransitionTime = now`;
/// - present with another status → status, reason, message, observedGeneration updated and
///   `lastTransitionTime = now`;
/// - present with the same status → reason, message and observedGeneration updated,
///   `lastTransitionTime` kept.
pub fn set_condition(conditions: &mut Vec<Condition>, new: NewCondition<'_>, now: &Time) -> bool {
    let status = new.status.as_str();
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        let mut changed = false;
        if existing.status != status {
            status.clone_into(&mut existing.status);
            existing.last_transition_time = now.clone();
            changed = true;
        }
        if existing.reason != new.reason {
            new.reason.clone_into(&mut existing.reason);
            changed = true;
        }
        if existing.message != new.message {
            existing.message = new.message;
            changed = true;
        }
        if existing.observed_generation != new.observed_generation {
            existing.observed_generation = new.observed_generation;
            changed = true;
        }
        changed
    } else {
        conditions.push(Condition {
            type_: new.type_.to_owned(),
            status: status.to_owned(),
            reason: new.reason.to_owned(),
            message: new.message,
            observed_generation: new.observed_generation,
            last_transition_time: now.clone(),
        });
        true
    }
}

/// Removes the condition of `type_`. Returns whether one was removed.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with `status`.
pub fn has_status(conditions: &[Condition], type_: &str, status: ConditionStatus) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == status.as_str())
}

/// A condition is stale when its observedGeneration is behind `generation` (it was not
/// re-evaluated on the latest spec). A condition without observedGeneration is stale whenever
/// a generation is known.
pub fn is_stale(condition: &Condition, generation: Option<i64>) -> bool {
    match (condition.observed_generation, generation) {
        (Some(observed), Some(current)) => observed < current,
        (None, Some(_)) => true,
        (_, None) => false,
    }
}
