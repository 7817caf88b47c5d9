//! The last-write memo: the status this controller last wrote per Pacto, kept until the Pacto
//! cache shows that write.
//!
//! A reconcile triggered right after a status write (e.g. by the PactoRevision it created) can
//! read the Pacto from a cache that is still exactly the object the write was composed from
//! (same uid and resourceVersion); that write's status is then the real previous one. Without
//! it, such a pass would write the same status again and could repeat its transition events.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use pacto_api::{Pacto, PactoStatus};

/// A Pacto's (namespace, name).
pub type PactoKey = (String, String);

/// A status this controller wrote, and the object it was composed from.
#[derive(Debug)]
struct Written {
    uid: Option<String>,
    /// resourceVersion of the Pacto the written status was composed from.
    over: Option<String>,
    status: PactoStatus,
}

/// The last status write per Pacto, kept until the Pacto cache shows it.
#[derive(Debug, Default)]
pub struct WriteMemo(Mutex<HashMap<PactoKey, Written>>);

impl WriteMemo {
    fn lock(&self) -> MutexGuard<'_, HashMap<PactoKey, Written>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Our last write for `pacto` if the cached object has not seen it yet; a write the cache
    /// has caught up with (or that belongs to an older object of the same name) is dropped.
    pub fn unseen(&self, key: &PactoKey, pacto: &Pacto) -> Option<PactoStatus> {
        let mut written = self.lock();
        let w = written.get(key)?;
        if w.uid == pacto.metadata.uid && w.over == pacto.metadata.resource_version {
            return Some(w.status.clone());
        }
        written.remove(key);
        None
    }

    /// Remembers `status`, just written over the cached `pacto`.
    pub fn remember(&self, key: PactoKey, pacto: &Pacto, status: &PactoStatus) {
        self.lock().insert(
            key,
            Written {
                uid: pacto.metadata.uid.clone(),
                over: pacto.metadata.resource_version.clone(),
                status: status.clone(),
            },
        );
    }

    /// Forgets the write of a deleted Pacto.
    pub fn forget(&self, key: &PactoKey) {
        self.lock().remove(key);
    }

    /// Forgets the writes of Pactos for which `exists` is false (deleted while not watched).
    pub fn retain(&self, exists: impl Fn(&PactoKey) -> bool) {
        self.lock().retain(|key, _| exists(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_the_cache_has_not_seen_is_the_previous_status() {
        use pacto_api::{ContractRef, ContractStatus, PactoSpec, PactoStatus};
        let pacto = |uid: &str, rv: &str| {
            let mut p = Pacto::new(
                "p",
                PactoSpec {
                    contract_ref: ContractRef {
                        oci: None,
                        inline: Some("yaml".into()),
                        pull_secret_ref: None,
                    },
                    target: None,
                    overrides: None,
                    check_interval_seconds: None,
                },
            );
            p.metadata.uid = Some(uid.into());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        let verdict = |s: Option<PactoStatus>| s.and_then(|s| s.contract_status);
        let key = ("ns".to_owned(), "p".to_owned());
        let compliant = PactoStatus {
            contract_status: Some(ContractStatus::Compliant),
            ..PactoStatus::default()
        };
        let memo = WriteMemo::default();
        // Nothing written.
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // Written over rv 10; the cache still shows rv 10: the written status, as often as asked.
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        for _ in 0..2 {
            assert_eq!(
                verdict(memo.unseen(&key, &pacto("u1", "10"))),
                Some(ContractStatus::Compliant)
            );
        }
        // A Pacto of the same name re-created (another uid) never gets the old write; it is
        // dropped.
        assert_eq!(memo.unseen(&key, &pacto("u2", "10")), None);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // The cache has moved on (our write or anyone's): the write is dropped.
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        assert_eq!(memo.unseen(&key, &pacto("u1", "11")), None);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // Deleted Pactos, while watched or not, are forgotten.
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        memo.forget(&key);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        memo.retain(|k| k != &key);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
    }
}
