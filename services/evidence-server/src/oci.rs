//! [`Storage`] over the OCI store of `pacto-evidence` (docs/design/evidence-store.md).

use pacto_engine::Timestamp;
use pacto_evidence::store::{CommitError, HealthStatus, Record, ReferrersMode as StoreMode, Store};

use crate::storage::{AcceptedRecord, CommitFailure, ReferrersMode, Storage, SubjectMode};

fn mode(mode: StoreMode) -> ReferrersMode {
    match mode {
        StoreMode::Api => ReferrersMode::Api,
        StoreMode::TagSchema => ReferrersMode::TagSchema,
    }
}

impl Storage for Store {
    fn is_subject(&self, reference: &str) -> bool {
        self.authorize_subject(reference).is_some()
    }

    async fn preflight(&self) -> Result<Vec<SubjectMode>, String> {
        let readiness = Store::preflight(self).await.map_err(|e| e.to_string())?;
        Ok(readiness
            .subjects
            .into_iter()
            .map(|s| SubjectMode {
                subject: s.subject.reference(),
                mode: mode(s.mode),
            })
            .collect())
    }

    async fn commit(&self, record: AcceptedRecord) -> Result<(), CommitFailure> {
        let record = Record {
            envelope: record.envelope,
            compliance: record.compliance,
            findings: record.findings,
            coverage: record.coverage,
            accepted_at: record.accepted_at,
            service: record.service,
            domain: record.domain,
            digest: record.digest,
        };
        match Store::commit(self, &record).await {
            Ok(committed) => {
                tracing::debug!(digest = %committed.digest, mode = committed.mode.as_str(), requests = committed.requests, "record committed");
                Ok(())
            }
            Err(error) => Err(match &error {
                CommitError::Replay(_) => CommitFailure::Replay(error.to_string()),
                CommitError::RegistryUnavailable { .. } => {
                    CommitFailure::RegistryUnavailable(error.to_string())
                }
                CommitError::RegistryIncomplete { .. } => {
                    CommitFailure::RegistryIncomplete(error.to_string())
                }
                CommitError::StoreDegraded { .. } => {
                    CommitFailure::StoreDegraded(error.to_string())
                }
                // the pipeline checked membership before; a race with configuration is internal
                CommitError::UnknownSubject { .. } => CommitFailure::Internal(error.to_string()),
            }),
        }
    }

    async fn targets(&self, now: Timestamp) -> Result<String, String> {
        let scan = self.scan().await;
        if scan.health.status == HealthStatus::Unavailable {
            let detail = scan
                .failed
                .iter()
                .map(|f| format!("{}: {}", f.subject.reference(), f.error))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(format!("no subject could be read: {detail}"));
        }
        Ok(scan.targets(now).to_json())
    }
}
