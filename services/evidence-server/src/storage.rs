//! What the server needs from the evidence store (docs/design/evidence-server.md#storage), in
//! the store's own types (`pacto_evidence::store`): the readiness preflight ([`Readiness`], each
//! subject with its [`ReferrersMode`](pacto_evidence::store::ReferrersMode)), the serialised
//! commit of one accepted [`Record`], and the `/targets` DTO ([`TargetsDto`]). Failures are the
//! store's errors ([`StoreError`], [`CommitError`]) or the typed errors below. [`Storage`] is
//! implemented by the OCI store of `pacto-evidence` (`pacto_evidence::store::Store`, module
//! `oci`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pacto_engine::Timestamp;
use pacto_evidence::store::{
    CommitError, Committed, FailedSubject, Readiness, Record, StoreError, TargetsDto,
};

/// The task running a snapshot's refresh failed (it panicked or the runtime is shutting down).
/// Here, beside the errors it becomes, so that `snapshot` depends on the port and not back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the refresh failed: {0}")]
pub struct RefreshFailed(pub(crate) String);

/// Why the server is not ready: the readiness preflight failed (`/ready` answers 503, a POST
/// `store_not_ready`). The detail goes to the log only.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotReady {
    /// A subject could not be resolved or its referrers not listed (or the registry client not
    /// built).
    #[error(transparent)]
    Store(Arc<StoreError>),
    /// The preflight did not finish within the server's budget.
    #[error("the registry preflight did not finish within {0:?}")]
    Timeout(Duration),
    /// The task running the preflight failed.
    #[error(transparent)]
    Refresh(#[from] RefreshFailed),
}

/// Why `/targets` has no answer (`503 registry_unavailable`). The detail goes to the log only.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TargetsUnavailable {
    /// No subject could be read (fewer failing subjects give a `partial` DTO instead).
    #[error("no subject could be read: {}", .0.iter().map(|f| format!("{}: {}", f.subject.reference(), f.error)).collect::<Vec<_>>().join("; "))]
    NoSubject(Vec<FailedSubject>),
    /// The task running the scan failed.
    #[error(transparent)]
    Refresh(#[from] RefreshFailed),
}

/// The evidence store, as the server uses it.
pub trait Storage: Send + Sync + 'static {
    /// Whether `reference` (`oci://…@sha256:…`) is exactly a configured subject.
    fn is_subject(&self, reference: &str) -> bool;

    /// Resolves every subject and walks its referrers without fetching anything; the first
    /// failure is the error (its detail is logged, never answered).
    fn preflight(&self) -> impl Future<Output = Result<Readiness, StoreError>> + Send;

    /// Commits one record (scan, replay check, push, confirm) under the store's lock.
    fn commit(
        &self,
        record: &Record,
    ) -> impl Future<Output = Result<Committed, CommitError>> + Send;

    /// The `/targets` DTO at `now`, or why no subject could be read.
    fn targets(
        &self,
        now: Timestamp,
    ) -> impl Future<Output = Result<TargetsDto, TargetsUnavailable>> + Send;
}
