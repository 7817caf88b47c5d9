//! The cause of each reconcile (a leaf: the shared [`crate::context::Context`] holds
//! [`Triggers`], and the trigger sources in [`crate::triggers`] mark it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::metrics::TRIGGERS_TOTAL;
use crate::reconcile::memo::PactoKey;

/// What started a reconcile. The controller merges its triggers into one queue; each source
/// marks the Pacto it queues, and the reconcile takes the mark (see [`Triggers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A change of the Pacto's spec, labels or annotations (or its first listing, or its
    /// namespace entering the scope).
    Pacto,
    /// A WatchTargets notification of the observer (its target changed).
    WatchTargets,
    /// A change of a PactoRevision the Pacto owns (its creation included).
    Revision,
    /// Anything unmarked: a requeue (check interval, window due, backoff, error retry).
    Requeue,
}

impl Trigger {
    /// Every trigger, in the order of [`Trigger::index`].
    pub const ALL: [Self; 4] = [
        Self::Pacto,
        Self::WatchTargets,
        Self::Revision,
        Self::Requeue,
    ];

    /// The `trigger` label of [`TRIGGERS_TOTAL`].
    pub fn label(self) -> &'static str {
        match self {
            Self::Pacto => "pacto",
            Self::WatchTargets => "watch_targets",
            Self::Revision => "revision",
            Self::Requeue => "requeue",
        }
    }

    /// The oldest shared registry answer the Resolve of a reconcile started by this trigger
    /// accepts (docs/design/resolution.md#shared-resolves). A change of the Pacto itself asks
    /// the registry again, so a `kubectl annotate` nudge re-reads a force-pushed tag at once;
    /// every other cause accepts an answer up to one check interval old, so the Pactos that
    /// reference one tag with the same credentials cost one registry request per interval.
    pub fn resolve_max_age(self, check_interval: Duration) -> Duration {
        match self {
            Self::Pacto => Duration::ZERO,
            Self::WatchTargets | Self::Revision | Self::Requeue => check_interval,
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Pacto => 0,
            Self::WatchTargets => 1,
            Self::Revision => 2,
            Self::Requeue => 3,
        }
    }
}

/// The pending trigger of each queued Pacto, the reconciles started per trigger and the trigger
/// of each Pacto's last status write (what the tests read to tell a cause from a coincidence).
#[derive(Debug, Default)]
pub struct Triggers {
    pending: Mutex<HashMap<PactoKey, Trigger>>,
    last_write: Mutex<HashMap<PactoKey, Trigger>>,
    started: [AtomicU64; 4],
}

impl Triggers {
    /// Marks `key` as queued by `trigger` (the first mark until a reconcile takes it).
    pub(crate) fn mark(&self, key: PactoKey, trigger: Trigger) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_insert(trigger);
    }

    /// What triggered the reconcile of `key` now starting ([`Trigger::Requeue`] when no source
    /// marked it), counted.
    pub(crate) fn take(&self, key: &PactoKey) -> Trigger {
        let trigger = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key)
            .unwrap_or(Trigger::Requeue);
        self.started[trigger.index()].fetch_add(1, Ordering::SeqCst);
        metrics::counter!(TRIGGERS_TOTAL, "trigger" => trigger.label()).increment(1);
        trigger
    }

    /// Remembers that a reconcile started by `trigger` wrote the status of `key`.
    pub(crate) fn wrote(&self, key: PactoKey, trigger: Trigger) {
        self.last_write
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, trigger);
    }

    /// Reconciles started so far, whatever their trigger.
    pub fn started_total(&self) -> u64 {
        Trigger::ALL.iter().map(|t| self.started(*t)).sum()
    }

    /// Reconciles started by `trigger` so far.
    pub fn started(&self, trigger: Trigger) -> u64 {
        self.started[trigger.index()].load(Ordering::SeqCst)
    }

    /// The trigger of the reconcile that last wrote the status of Pacto `namespace/name`.
    pub fn last_write(&self, namespace: &str, name: &str) -> Option<Trigger> {
        self.last_write
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(namespace.to_owned(), name.to_owned()))
            .copied()
    }

    /// Drops what is kept for Pactos `keep` rejects (deleted ones).
    pub(crate) fn retain(&self, keep: impl Fn(&PactoKey) -> bool) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| keep(key));
        self.last_write
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| keep(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_change_of_the_pacto_asks_the_registry_again() {
        let interval = Duration::from_mins(5);
        let ages: Vec<_> = Trigger::ALL
            .iter()
            .map(|t| (t.label(), t.resolve_max_age(interval).as_secs()))
            .collect();
        assert_eq!(
            ages,
            [
                ("pacto", 0),
                ("watch_targets", 300),
                ("revision", 300),
                ("requeue", 300)
            ]
        );
    }
}
