//! The last-write memo: the status this controller last wrote per Pacto, kept until the Pacto
//! cache shows that write (docs/design/status.md#the-write-memo).
//!
//! A reconcile can read the Pacto from a cache that is older than our own last status write:
//! right after the write (e.g. triggered by the PactoRevision it created), or because someone
//! else's edit landed between that pass's read and its write, so the cache shows their edit over
//! the status we replaced. That write's status is then the real previous one. Without it, such a
//! pass would write the same status again and repeat its transition events, and would send the
//! observer older windows than the ones we persisted.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use pacto_api::{Pacto, PactoStatus};

pub use pacto_api::PactoKey;

/// A status this controller wrote, and the objects around the write.
#[derive(Debug)]
struct Written {
    uid: Option<String>,
    /// resourceVersion of the cached Pacto the written status was composed from.
    over: Option<String>,
    /// resourceVersion the API server returned for the write (`None` if it returned none).
    wrote: Option<String>,
    status: PactoStatus,
}

impl Written {
    /// Whether this write is still newer than the cached `pacto` (same object, older version).
    fn shadows(&self, pacto: &Pacto) -> bool {
        self.uid == pacto.metadata.uid
            && self.is_newer_than(pacto.metadata.resource_version.as_deref())
    }

    /// Whether a cached object with `cached` as its resourceVersion is older than this write
    /// (docs/design/status.md#the-write-memo).
    fn is_newer_than(&self, cached: Option<&str>) -> bool {
        match (self.wrote.as_deref(), cached) {
            (Some(wrote), Some(cached)) => match compare_versions(cached, wrote) {
                Some(order) => order == Ordering::Less,
                // Not comparable: only the very object the status was composed over is known
                // to be older.
                None => self.over.as_deref() == Some(cached),
            },
            _ => self.over.as_deref() == cached,
        }
    }
}

/// Orders two resourceVersions when both are decimal integers (what etcd-backed API servers
/// give); `None` otherwise, because the API contract calls them opaque.
fn compare_versions(a: &str, b: &str) -> Option<Ordering> {
    let parse = |v: &str| {
        (!v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()))
            .then(|| v.parse::<u128>().ok())
            .flatten()
    };
    Some(parse(a)?.cmp(&parse(b)?))
}

/// The last status write per Pacto, kept until the Pacto cache shows it.
#[derive(Debug, Default)]
pub struct WriteMemo(Mutex<HashMap<PactoKey, Written>>);

impl WriteMemo {
    fn lock(&self) -> MutexGuard<'_, HashMap<PactoKey, Written>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Our last write for `pacto` if the cached object is older than it; a write the cache has
    /// caught up with (or that belongs to an older object of the same name) is dropped.
    pub fn unseen(&self, key: &PactoKey, pacto: &Pacto) -> Option<PactoStatus> {
        let mut written = self.lock();
        let w = written.get(key)?;
        if w.shadows(pacto) {
            return Some(w.status.clone());
        }
        written.remove(key);
        None
    }

    /// Drops the write of `key` once the cached `pacto` shows it (or replaced the object). The
    /// Pacto watch calls this for every object it stores, so the memo holds only the writes the
    /// cache has not caught up with, not one status per Pacto until its next reconcile (after a
    /// backlog of 10,000 that was 10,000 statuses for up to an interval).
    pub fn caught_up(&self, key: &PactoKey, pacto: &Pacto) {
        let mut written = self.lock();
        if written.get(key).is_some_and(|w| !w.shadows(pacto)) {
            written.remove(key);
        }
    }

    /// How many writes the cache has not shown yet.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Remembers `status`, just written over the cached `pacto`; `wrote` is the resourceVersion
    /// the API server answered the write with.
    pub fn remember(
        &self,
        key: PactoKey,
        pacto: &Pacto,
        wrote: Option<&str>,
        status: &PactoStatus,
    ) {
        self.lock().insert(
            key,
            Written {
                uid: pacto.metadata.uid.clone(),
                over: pacto.metadata.resource_version.clone(),
                wrote: wrote.map(str::to_owned),
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
        // Written over rv 10, answered with rv 12; the cache still shows rv 10: the written
        // status, as often as asked.
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        for _ in 0..2 {
            assert_eq!(
                verdict(memo.unseen(&key, &pacto("u1", "10"))),
                Some(ContractStatus::Compliant)
            );
        }
        // Someone's edit landed between the read and the write (rv 11): the cache is still
        // older than the write, so the write is still the previous status.
        assert_eq!(
            verdict(memo.unseen(&key, &pacto("u1", "11"))),
            Some(ContractStatus::Compliant)
        );
        // The cache shows the write, or anything after it: the write is dropped for good.
        assert_eq!(memo.unseen(&key, &pacto("u1", "12")), None);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        assert_eq!(memo.unseen(&key, &pacto("u1", "13")), None);
        // Integers compare as numbers, not as text.
        memo.remember(key.clone(), &pacto("u1", "98"), Some("100"), &compliant);
        assert!(memo.unseen(&key, &pacto("u1", "99")).is_some());
        assert_eq!(memo.unseen(&key, &pacto("u1", "100")), None);
        // A Pacto of the same name re-created (another uid) never gets the old write; it is
        // dropped.
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        assert_eq!(memo.unseen(&key, &pacto("u2", "10")), None);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // Versions that are not integers (an API server not backed by etcd) cannot be ordered:
        // only the very object the write was composed over is known to be older.
        memo.remember(key.clone(), &pacto("u1", "a10"), Some("a12"), &compliant);
        assert!(memo.unseen(&key, &pacto("u1", "a10")).is_some());
        assert_eq!(memo.unseen(&key, &pacto("u1", "a11")), None);
        memo.remember(key.clone(), &pacto("u1", "10"), None, &compliant);
        assert!(memo.unseen(&key, &pacto("u1", "10")).is_some());
        assert_eq!(memo.unseen(&key, &pacto("u1", "11")), None);
        // The watch stores an object: a write it shows is dropped without waiting for a
        // reconcile; one it does not show yet is kept.
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        memo.caught_up(&key, &pacto("u1", "11"));
        assert_eq!(memo.len(), 1);
        assert!(memo.unseen(&key, &pacto("u1", "11")).is_some());
        memo.caught_up(&key, &pacto("u1", "12"));
        assert_eq!(memo.len(), 0);
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        memo.caught_up(&key, &pacto("u2", "1"));
        assert_eq!(memo.len(), 0, "a re-created Pacto never inherits the write");
        memo.caught_up(&key, &pacto("u1", "13"));
        // Deleted Pactos, while watched or not, are forgotten.
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        memo.forget(&key);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        memo.remember(key.clone(), &pacto("u1", "10"), Some("12"), &compliant);
        memo.retain(|k| k != &key);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
    }

    #[test]
    fn resource_versions_order_only_as_integers() {
        assert_eq!(compare_versions("9", "10"), Some(Ordering::Less));
        assert_eq!(compare_versions("10", "10"), Some(Ordering::Equal));
        assert_eq!(compare_versions("11", "10"), Some(Ordering::Greater));
        assert_eq!(compare_versions("", "10"), None);
        assert_eq!(compare_versions("+9", "10"), None);
        assert_eq!(compare_versions("x", "10"), None);
    }
}
