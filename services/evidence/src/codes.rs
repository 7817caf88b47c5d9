//! The stable error codes of the ingestion API and their HTTP statuses
//! (docs/design/envelopes.md#error-codes). Every refusal of this crate maps onto one of them
//! through its error's `code()`.

use std::fmt;

/// A stable error code (`{"code": …}` in an ingestion error body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// The body could not be read or decoded as an envelope (400).
    InvalidEnvelope,
    /// Signature, key, producer binding, subject scope or freshness refused (401).
    UnauthorizedProducer,
    /// The evidence set failed validation (422).
    InvalidEvidence,
    /// The ContractRef is malformed, outside the key's repositories or not a configured
    /// subject (422).
    ContractRefRejected,
    /// The contract could not be resolved from the registry (502).
    ContractResolutionFailed,
    /// The envelope id or sequence was already accepted (409).
    Replay,
    /// No configured subject could be read from the registry (503).
    RegistryUnavailable,
    /// The registry holds invalid evidence artifacts (503).
    RegistryIncomplete,
    /// Writing or confirming the record failed (503).
    StoreDegraded,
    /// The readiness preflight failed before the body was read (503).
    StoreNotReady,
    /// Anything else (500).
    InternalError,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [Self; 11] = [
        Self::InvalidEnvelope,
        Self::UnauthorizedProducer,
        Self::InvalidEvidence,
        Self::ContractRefRejected,
        Self::ContractResolutionFailed,
        Self::Replay,
        Self::RegistryUnavailable,
        Self::RegistryIncomplete,
        Self::StoreDegraded,
        Self::StoreNotReady,
        Self::InternalError,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidEnvelope => "invalid_envelope",
            Self::UnauthorizedProducer => "unauthorized_producer",
            Self::InvalidEvidence => "invalid_evidence",
            Self::ContractRefRejected => "contract_ref_rejected",
            Self::ContractResolutionFailed => "contract_resolution_failed",
            Self::Replay => "replay",
            Self::RegistryUnavailable => "registry_unavailable",
            Self::RegistryIncomplete => "registry_incomplete",
            Self::StoreDegraded => "store_degraded",
            Self::StoreNotReady => "store_not_ready",
            Self::InternalError => "internal_error",
        }
    }

    /// The code of its wire string (`None` for a string that is none of [`ErrorCode::ALL`]).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// Whether sending the same record again can succeed without anyone acting: `false` for
    /// the refusals of the envelope itself (the 4xx codes) and for `registry_incomplete`, which
    /// stays until an operator fixes or removes the invalid artifact on the record's subject
    /// (docs/design/evidence-store.md#commit); `true` for the other 5xx codes.
    pub fn is_retryable(self) -> bool {
        self.http_status() >= 500 && self != Self::RegistryIncomplete
    }

    /// The HTTP status the ingestion API answers with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidEnvelope => 400,
            Self::UnauthorizedProducer => 401,
            Self::Replay => 409,
            Self::InvalidEvidence | Self::ContractRefRejected => 422,
            Self::InternalError => 500,
            Self::ContractResolutionFailed => 502,
            Self::RegistryUnavailable
            | Self::RegistryIncomplete
            | Self::StoreDegraded
            | Self::StoreNotReady => 503,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_parse_and_say_whether_a_retry_can_succeed() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("http_418"), None);
        let retryable: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|c| c.is_retryable())
            .map(|c| c.as_str())
            .collect();
        assert_eq!(
            retryable,
            [
                "contract_resolution_failed",
                "registry_unavailable",
                "store_degraded",
                "store_not_ready",
                "internal_error"
            ]
        );
    }

    #[test]
    fn codes_and_statuses_are_the_protocol_ones() {
        let table: Vec<(&str, u16)> = ErrorCode::ALL
            .iter()
            .map(|c| (c.as_str(), c.http_status()))
            .collect();
        assert_eq!(
            table,
            [
                ("invalid_envelope", 400),
                ("unauthorized_producer", 401),
                ("invalid_evidence", 422),
                ("contract_ref_rejected", 422),
                ("contract_resolution_failed", 502),
                ("replay", 409),
                ("registry_unavailable", 503),
                ("registry_incomplete", 503),
                ("store_degraded", 503),
                ("store_not_ready", 503),
                ("internal_error", 500),
            ]
        );
    }
}
