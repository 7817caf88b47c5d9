//! What a per-dimension evaluation decides, before stabilization and provenance are applied.

use pacto_engine::{Outcome, Value};

/// The provenance collector of every Kubernetes observation.
pub const COLLECTOR: &str = "k8s-observer";

/// A Kubernetes API query that failed (anything but NotFound). The message becomes
/// `ObserveResponse.api_errors` and, for the first one, the `RuntimeObserved` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// `<verb> <resource> <namespace>/<name>: <error>`.
    pub message: String,
}

impl ApiFailure {
    /// Convenience constructor.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// The result of one read: the object, `None` for NotFound, or the failure.
pub type Fetched<T> = Result<Option<T>, ApiFailure>;

/// The decision for one assertion.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Emit no observation (the engine reports `EVIDENCE_MISSING` if the assertion is required).
    Skip,
    /// Emit this outcome; the assertion's window (if any) is left as it is.
    Report(Outcome),
    /// As `Report`, with the reason the assertion could not be decided (the observation's
    /// `detail`, which the finding's message carries).
    Explained(Outcome, &'static str),
    /// A positive reading: the window is cleared and this outcome is emitted.
    Clear(Outcome),
    /// A negative reading (an absence): `Insufficient` while the streak is inside the
    /// stabilization window, `Observed(value)` once it spans it.
    Negative(Value),
}

impl Verdict {
    /// `Report(Unsupported)`.
    pub fn unsupported() -> Self {
        Self::Report(Outcome::Unsupported)
    }

    /// `Report(Failed)`.
    pub fn failed() -> Self {
        Self::Report(Outcome::Failed)
    }

    /// `Report(Insufficient)`.
    pub fn insufficient() -> Self {
        Self::Report(Outcome::Insufficient)
    }

    /// `Report(Observed(value))`.
    pub fn observed(value: Value) -> Self {
        Self::Report(Outcome::Observed(value))
    }
}
