//! [`Storage`] over the OCI store of `pacto-evidence` (docs/design/evidence-store.md): the
//! store's own methods, and `/targets` refused when no subject could be read.

use pacto_engine::Timestamp;
use pacto_evidence::store::{
    CommitError, Committed, HealthStatus, Readiness, Record, Store, StoreError, TargetsDto,
};

use crate::storage::{Storage, TargetsUnavailable};

impl Storage for Store {
    fn is_subject(&self, reference: &str) -> bool {
        self.authorize_subject(reference).is_some()
    }

    async fn preflight(&self) -> Result<Readiness, StoreError> {
        Store::preflight(self).await
    }

    async fn commit(&self, record: &Record) -> Result<Committed, CommitError> {
        Store::commit(self, record).await
    }

    async fn targets(&self, now: Timestamp) -> Result<TargetsDto, TargetsUnavailable> {
        let scan = self.scan().await;
        if scan.health.status == HealthStatus::Unavailable {
            return Err(TargetsUnavailable::NoSubject(scan.failed));
        }
        Ok(scan.targets(now))
    }
}
