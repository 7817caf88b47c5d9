//! What the server needs from the evidence store (docs/design/evidence-server.md#storage):
//! the readiness preflight with the referrers mode of each subject, the serialised commit of
//! one accepted record, and the `/targets` DTO. [`Storage`] is implemented by the OCI store of
//! `pacto-evidence` (`pacto_evidence::store::Store`, module `oci` below).

use std::future::Future;

use pacto_engine::{Coverage, RecordFinding, Timestamp};
use pacto_evidence::{Envelope, ErrorCode};

/// How a subject's referrers are listed and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReferrersMode {
    /// The registry's Referrers API (`GET /v2/<repo>/referrers/<digest>`).
    Api,
    /// The OCI 1.1 tag schema (`sha256-<hex>` index), for registries without the API.
    TagSchema,
}

impl ReferrersMode {
    /// Both modes.
    pub const ALL: [Self; 2] = [Self::Api, Self::TagSchema];

    /// The label value (`api`, `tag-schema`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::TagSchema => "tag-schema",
        }
    }
}

/// A subject that passed the preflight, with its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectMode {
    /// `oci://<registry>/<repository>@sha256:<hex>`.
    pub subject: String,
    /// The referrers mode detected for it.
    pub mode: ReferrersMode,
}

/// An accepted record, ready to commit (the payload's `record` fields,
/// docs/design/evidence-store.md#records).
#[derive(Debug, Clone)]
pub struct AcceptedRecord {
    /// The signed envelope, signature included.
    pub envelope: Envelope,
    /// `Compliant`, `NonCompliant`, `Unknown` or `Warning`.
    pub compliance: String,
    /// The findings in the stored PascalCase shape.
    pub findings: Vec<RecordFinding>,
    /// The coverage.
    pub coverage: Coverage,
    /// The server's acceptance time (UTC).
    pub accepted_at: Timestamp,
    /// The resolved contract's `service.name`.
    pub service: String,
    /// The subject's domain (the ref minus scheme and digest, cut before the last `/`).
    pub domain: String,
    /// The subject digest.
    pub digest: String,
}

/// Why a commit failed, one variant per error code of the pipeline's commit step
/// (docs/design/evidence-server.md#pipeline).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitFailure {
    /// The id or sequence was accepted before (`replay`).
    #[error("replay: {0}")]
    Replay(String),
    /// A subject could not be enumerated (`registry_unavailable`).
    #[error("registry unavailable: {0}")]
    RegistryUnavailable(String),
    /// Invalid Pacto artifacts are present (`registry_incomplete`).
    #[error("registry incomplete: {0}")]
    RegistryIncomplete(String),
    /// Building, pushing or confirming the record failed (`store_degraded`).
    #[error("store degraded: {0}")]
    StoreDegraded(String),
    /// Anything else (`internal_error`).
    #[error("internal: {0}")]
    Internal(String),
}

impl CommitFailure {
    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Replay(_) => ErrorCode::Replay,
            Self::RegistryUnavailable(_) => ErrorCode::RegistryUnavailable,
            Self::RegistryIncomplete(_) => ErrorCode::RegistryIncomplete,
            Self::StoreDegraded(_) => ErrorCode::StoreDegraded,
            Self::Internal(_) => ErrorCode::InternalError,
        }
    }
}

/// The evidence store, as the server uses it.
pub trait Storage: Send + Sync + 'static {
    /// Whether `reference` (`oci://…@sha256:…`) is exactly a configured subject.
    fn is_subject(&self, reference: &str) -> bool;

    /// Resolves every subject and walks its referrers without fetching anything; the first
    /// failure is the error (its detail is logged, never answered).
    fn preflight(&self) -> impl Future<Output = Result<Vec<SubjectMode>, String>> + Send;

    /// Commits one record (scan, replay check, push, confirm) under the store's lock.
    fn commit(
        &self,
        record: AcceptedRecord,
    ) -> impl Future<Output = Result<(), CommitFailure>> + Send;

    /// The `/targets` DTO as JSON (no trailing newline), or the detail of why no subject could
    /// be read.
    fn targets(&self, now: Timestamp) -> impl Future<Output = Result<String, String>> + Send;
}
