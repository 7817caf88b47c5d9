//! The result of a scan (docs/design/evidence-store.md#scan): health, valid records, invalid
//! artifacts and failed subjects.

use std::sync::Arc;

use crate::store::record::{Malformed, Record};
use crate::store::subject::Subject;

use crate::store::mode::ReferrersMode;
/// The scan's overall health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthStatus {
    /// Every subject read, no invalid artifact.
    Ready,
    /// Some subject failed or some artifact is invalid.
    Partial,
    /// Every subject failed (a 503, never a `/targets` body).
    Unavailable,
}

impl HealthStatus {
    /// `ready`, `partial` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Partial => "partial",
            Self::Unavailable => "unavailable",
        }
    }
}

/// Health and its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The status.
    pub status: HealthStatus,
    /// Configured subjects.
    pub subjects: usize,
    /// Subjects that could not be read.
    pub failed_subjects: usize,
    /// Invalid record artifacts.
    pub invalid_artifacts: usize,
}

/// A valid stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    /// The subject it is attached to.
    pub subject: Subject,
    /// The record manifest's digest.
    pub digest: String,
    /// The record.
    pub record: Arc<Record>,
}

/// An artifact that claims to be a record but is not a valid one.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidArtifact {
    /// The subject it is attached to.
    pub subject: Subject,
    /// Its manifest digest.
    pub digest: String,
    /// Why it is invalid.
    pub reason: Malformed,
}

/// A subject that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedSubject {
    /// The subject.
    pub subject: Subject,
    /// The registry error.
    pub error: String,
}

/// The result of a scan (the read path of `/targets` and `pacto evidence list`).
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    /// Health and counts.
    pub health: Health,
    /// Every valid record within the retention, by subject in configuration order, then in
    /// listing order (records another tool unlisted from a referrers tag last).
    pub records: Vec<StoredRecord>,
    /// Every invalid record artifact.
    pub invalid: Vec<InvalidArtifact>,
    /// Every subject that could not be read.
    pub failed: Vec<FailedSubject>,
    /// Referrers that are not records (ignored).
    pub foreign: usize,
    /// Listed records outside the retention (not held; deleted or unlisted by a later
    /// commit, or kept listed where the registry refuses deletes).
    pub expired: usize,
    /// The mode of each subject that was read.
    pub modes: Vec<(Subject, ReferrersMode)>,
    /// Registry requests the scan cost.
    pub requests: u64,
    /// What this scan found changed in the registry by someone else since the store last read
    /// or wrote it (docs/design/evidence-store.md#verification); subjects without change left
    /// out.
    pub drift: Vec<Drift>,
}

/// Referrers of one subject that changed outside this store, found by a listing
/// (docs/design/evidence-store.md#verification). The index is resynced from the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The subject.
    pub subject: Subject,
    /// Listed digests the store had not read or written (another writer's referrers).
    pub added: usize,
    /// Digests the store knew that are no longer listed (unlisted or deleted by someone else).
    pub removed: usize,
}
