//! Status derivation (docs/design/evaluation.md#status-derivation) and the fail-path short-circuits.

use std::fmt;

use pacto_contract::codes::Severity;
use serde::{Deserialize, Serialize};

use crate::finding::{Coverage, Finding, Summary};

/// `status.contractStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ContractStatus {
    /// Every required assertion observed and satisfied; no warnings.
    Compliant,
    /// Only warnings.
    Warning,
    /// At least one confirmed violation (an `error` finding).
    NonCompliant,
    /// No target: parsed and validated, never observed.
    Reference,
    /// A required assertion could not be evaluated, or the contract could not be obtained.
    Unknown,
    /// Structural errors, a malformed artifact or override errors.
    Invalid,
    /// Reserved; never emitted.
    NotEvaluated,
}

impl ContractStatus {
    /// All seven values (the `pacto_contract_status` series).
    pub const ALL: [Self; 7] = [
        Self::Compliant,
        Self::Warning,
        Self::NonCompliant,
        Self::Reference,
        Self::Unknown,
        Self::Invalid,
        Self::NotEvaluated,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compliant => "Compliant",
            Self::Warning => "Warning",
            Self::NonCompliant => "NonCompliant",
            Self::Reference => "Reference",
            Self::Unknown => "Unknown",
            Self::Invalid => "Invalid",
            Self::NotEvaluated => "NotEvaluated",
        }
    }

    /// Parses the wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Degraded ≡ not Compliant and not Reference (docs/design/status.md#events; the empty status of a
    /// never-reconciled object is represented by `None` by callers).
    pub fn is_degraded(self) -> bool {
        !matches!(self, Self::Compliant | Self::Reference)
    }

    /// Rank on the evidence ladder: NonCompliant > Unknown > Warning > Compliant. Statuses
    /// outside the ladder rank highest.
    pub fn ladder_rank(self) -> u8 {
        match self {
            Self::Compliant => 0,
            Self::Warning => 1,
            Self::Unknown => 2,
            Self::NonCompliant => 3,
            Self::Reference | Self::Invalid | Self::NotEvaluated => 4,
        }
    }
}

impl fmt::Display for ContractStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `derive_status(findings, coverage)`:
/// 1. any `error` ⇒ NonCompliant; 2. any `unknown` or `evaluated < required` ⇒ Unknown;
/// 3. any `warning` ⇒ Warning; 4. otherwise Compliant (`info` is ignored).
pub fn derive_status(findings: &[Finding], coverage: Coverage) -> ContractStatus {
    let has = |severity: Severity| findings.iter().any(|f| f.severity == severity);
    if has(Severity::Error) {
        ContractStatus::NonCompliant
    } else if has(Severity::Unknown) || coverage.evaluated < coverage.required {
        ContractStatus::Unknown
    } else if has(Severity::Warning) {
        ContractStatus::Warning
    } else {
        ContractStatus::Compliant
    }
}

/// Where a reconcile ended, for [`verdict`].
#[derive(Debug, Clone, Copy)]
pub enum Stage<'a> {
    /// Structural errors, a malformed artifact or an override error.
    Invalid,
    /// The contract could not be obtained (transient).
    Unavailable,
    /// Valid, no target.
    ReferenceOnly,
    /// Evaluated against evidence (structural warnings already prepended).
    Evaluated {
        /// All findings.
        findings: &'a [Finding],
        /// Coverage.
        coverage: Coverage,
    },
}

/// Status plus summary for a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// `status.contractStatus`.
    pub status: ContractStatus,
    /// `status.summary`.
    pub summary: Summary,
}

/// The short-circuits outside the ladder, then the ladder: Invalid ⇒ `{errorCount:1}`,
/// Unavailable ⇒ Unknown with `{unknownCount:1}`, ReferenceOnly ⇒ Reference with zeros
/// (docs/design/status.md#reconcile-steps), Evaluated ⇒ [`derive_status`] and severity counts.
pub fn verdict(stage: Stage<'_>) -> Verdict {
    match stage {
        Stage::Invalid => Verdict {
            status: ContractStatus::Invalid,
            summary: Summary {
                error_count: 1,
                ..Summary::default()
            },
        },
        Stage::Unavailable => Verdict {
            status: ContractStatus::Unknown,
            summary: Summary {
                unknown_count: 1,
                ..Summary::default()
            },
        },
        Stage::ReferenceOnly => Verdict {
            status: ContractStatus::Reference,
            summary: Summary::default(),
        },
        Stage::Evaluated { findings, coverage } => Verdict {
            status: derive_status(findings, coverage),
            summary: Summary::of(findings),
        },
    }
}
