//! Well-known names: API group, labels, event reasons.

/// The API group.
pub const GROUP: &str = "pacto.trianalab.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";

/// Label on a PactoRevision naming its Pacto.
pub const LABEL_PACTO: &str = "pacto.trianalab.io/pacto";
/// Label on a PactoRevision carrying its (sanitised) contract version.
pub const LABEL_VERSION: &str = "pacto.trianalab.io/version";

/// The eight event reasons (docs/design/status.md#events); no others are emitted.
pub mod event_reason {
    /// Warning: the contract was obtained and judged invalid.
    pub const CONTRACT_INVALID: &str = "ContractInvalid";
    /// Warning: the contract could not be obtained.
    pub const CONTRACT_UNAVAILABLE: &str = "ContractUnavailable";
    /// Warning: a loaded contract ended degraded with a changed status.
    pub const VALIDATION_FAILED: &str = "ValidationFailed";
    /// Normal: back to Compliant or Reference.
    pub const CONTRACT_RECOVERED: &str = "ContractRecovered";
    /// Normal: a PactoRevision was created.
    pub const REVISION_CREATED: &str = "RevisionCreated";
    /// Warning: a tag moved to another digest.
    pub const TAG_OVERWRITTEN: &str = "TagOverwritten";
    /// Warning: the readiness gate became unmet.
    pub const READINESS_GATE_UNMET: &str = "ReadinessGateUnmet";
    /// Normal: the readiness gate became met.
    pub const READINESS_RECOVERED: &str = "ReadinessRecovered";

    /// All eight.
    pub const ALL: [&str; 8] = [
        CONTRACT_INVALID,
        CONTRACT_UNAVAILABLE,
        VALIDATION_FAILED,
        CONTRACT_RECOVERED,
        REVISION_CREATED,
        TAG_OVERWRITTEN,
        READINESS_GATE_UNMET,
        READINESS_RECOVERED,
    ];
}
