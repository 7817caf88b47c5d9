//! The watched revision index: the PactoRevisions of each Pacto as the controller's own
//! PactoRevision watch last delivered them (docs/design/status.md#the-revision-index). A steady
//! pass reads its revision here instead of listing it from the API server; anything the index
//! cannot vouch for (not synced, the revision missing, a status to backfill, a creation not yet
//! acknowledged, a tag that moved) sends the pass to the live list, so the index only ever
//! skips a read whose answer would have changed nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::ResourceExt;
use kube::runtime::watcher::{self, Event};
use pacto_api::labels::LABEL_PACTO;
use pacto_api::{PactoKey, PactoRevision};

use crate::revision::pacto_label;

/// The revisions of each Pacto, keyed by (namespace, `spec.pactoRef`).
#[derive(Debug, Default)]
pub struct RevisionIndex(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Each Pacto's revisions, shared with the passes that read them (replaced, never changed
    /// in place while a pass holds them).
    by_pacto: HashMap<PactoKey, Arc<Vec<PactoRevision>>>,
    /// A (re)list in progress: the objects since `Init`, until `InitDone` replaces the index.
    listing: Option<Vec<PactoRevision>>,
    /// True once a listing completed: before that, every lookup misses.
    synced: bool,
}

/// The key of a revision: its namespace and `spec.pactoRef` (`None` without a namespace).
fn key_of(revision: &PactoRevision) -> Option<PactoKey> {
    Some((revision.namespace()?, revision.spec.pacto_ref.clone()))
}

/// True when the live list of [`crate::reconcile::revisions::list`] would return `revision`
/// for its `spec.pactoRef`: it carries that Pacto's label.
fn labelled(revision: &PactoRevision) -> bool {
    revision.labels().get(LABEL_PACTO) == Some(&pacto_label(&revision.spec.pacto_ref))
}

/// Drops what no reader of the index reads, before the object enters it: the managed fields
/// (one entry per writer) and the annotations (docs/design/status.md#what-the-caches-keep).
fn trim(revision: &mut PactoRevision) {
    revision.metadata.managed_fields = None;
    revision.metadata.annotations = None;
}

impl State {
    fn apply(&mut self, mut revision: PactoRevision) {
        if !labelled(&revision) {
            self.delete(&revision);
            return;
        }
        let Some(key) = key_of(&revision) else {
            return;
        };
        trim(&mut revision);
        let revisions = Arc::make_mut(self.by_pacto.entry(key).or_default());
        match revisions
            .iter_mut()
            .find(|r| r.metadata.name == revision.metadata.name)
        {
            Some(slot) => *slot = revision,
            None => revisions.push(revision),
        }
    }

    fn delete(&mut self, revision: &PactoRevision) {
        let Some(key) = key_of(revision) else {
            return;
        };
        if let Some(revisions) = self.by_pacto.get_mut(&key) {
            Arc::make_mut(revisions).retain(|r| r.metadata.name != revision.metadata.name);
            if revisions.is_empty() {
                self.by_pacto.remove(&key);
            }
        }
    }

    fn reset(&mut self, listing: Vec<PactoRevision>) {
        self.by_pacto.clear();
        for revision in listing {
            self.apply(revision);
        }
        self.synced = true;
    }
}

impl RevisionIndex {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one item of the PactoRevision watch: a (re)list is buffered between `Init` and
    /// `InitDone` and then replaces the index, so no lookup sees half a listing; an error keeps
    /// what the index holds.
    pub fn observe(&self, item: &Result<Event<PactoRevision>, watcher::Error>) {
        let mut state = self.lock();
        match item {
            Ok(Event::Init) => state.listing = Some(Vec::new()),
            Ok(Event::InitApply(revision)) => state
                .listing
                .get_or_insert_with(Vec::new)
                .push(revision.clone()),
            Ok(Event::InitDone) => {
                let listing = state.listing.take().unwrap_or_default();
                state.reset(listing);
            }
            Ok(Event::Apply(revision)) => state.apply(revision.clone()),
            Ok(Event::Delete(revision)) => state.delete(revision),
            Err(_) => {}
        }
    }

    /// The revisions of Pacto `pacto` in `namespace` as last watched; `None` before the first
    /// listing completed (the caller lists from the API server).
    pub fn revisions(&self, namespace: &str, pacto: &str) -> Option<Arc<Vec<PactoRevision>>> {
        let state = self.lock();
        if !state.synced {
            return None;
        }
        Some(
            state
                .by_pacto
                .get(&(namespace.to_owned(), pacto.to_owned()))
                .cloned()
                .unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn revision(namespace: &str, pacto: &str, name: &str) -> PactoRevision {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "PactoRevision",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"pacto.trianalab.io/pacto": pacto},
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "x"}],
            },
            "spec": {"pactoRef": pacto, "version": "1.0.0", "source": {}},
        }))
        .unwrap()
    }

    fn names(index: &RevisionIndex, namespace: &str, pacto: &str) -> Option<Vec<String>> {
        index
            .revisions(namespace, pacto)
            .map(|r| r.iter().map(ResourceExt::name_any).collect())
    }

    #[test]
    fn lookups_miss_until_a_listing_completed_and_then_follow_the_watch() {
        let index = RevisionIndex::default();
        index.observe(&Ok(Event::Init));
        index.observe(&Ok(Event::InitApply(revision(
            "shop", "orders", "orders-1",
        ))));
        assert_eq!(names(&index, "shop", "orders"), None, "half a listing");
        index.observe(&Ok(Event::InitDone));
        assert_eq!(
            names(&index, "shop", "orders"),
            Some(vec!["orders-1".to_owned()])
        );
        assert_eq!(names(&index, "shop", "billing"), Some(vec![]));
        assert_eq!(names(&index, "other", "orders"), Some(vec![]));

        // Applied, changed, deleted.
        index.observe(&Ok(Event::Apply(revision("shop", "orders", "orders-2"))));
        let mut changed = revision("shop", "orders", "orders-1");
        changed.metadata.resource_version = Some("9".into());
        index.observe(&Ok(Event::Apply(changed)));
        let held = index.revisions("shop", "orders").unwrap();
        assert_eq!(held.len(), 2);
        assert_eq!(held[0].metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(held[0].metadata.managed_fields, None, "trimmed");
        assert_eq!(held[0].metadata.annotations, None, "trimmed");
        index.observe(&Ok(Event::Delete(revision("shop", "orders", "orders-1"))));
        assert_eq!(
            names(&index, "shop", "orders"),
            Some(vec!["orders-2".to_owned()])
        );
        assert_eq!(held.len(), 2, "a pass keeps what it read");
        // Like the live list, only what carries the Pacto's label.
        let mut unlabelled = revision("shop", "orders", "orders-2");
        unlabelled.metadata.labels = None;
        index.observe(&Ok(Event::Apply(unlabelled)));
        assert_eq!(names(&index, "shop", "orders"), Some(vec![]));
    }

    #[test]
    fn a_relist_replaces_the_index_and_errors_keep_it() {
        let index = RevisionIndex::default();
        index.observe(&Ok(Event::Init));
        index.observe(&Ok(Event::InitApply(revision(
            "shop", "orders", "orders-1",
        ))));
        index.observe(&Ok(Event::InitDone));
        index.observe(&Err(watcher::Error::NoResourceVersion));
        assert_eq!(
            names(&index, "shop", "orders"),
            Some(vec!["orders-1".to_owned()])
        );
        // Deleted while the watch was down: gone after the relist.
        index.observe(&Ok(Event::Init));
        index.observe(&Ok(Event::InitApply(revision(
            "shop",
            "billing",
            "billing-1",
        ))));
        assert_eq!(
            names(&index, "shop", "orders"),
            Some(vec!["orders-1".to_owned()]),
            "the old index serves until the listing completes"
        );
        index.observe(&Ok(Event::InitDone));
        assert_eq!(names(&index, "shop", "orders"), Some(vec![]));
        assert_eq!(
            names(&index, "shop", "billing"),
            Some(vec!["billing-1".to_owned()])
        );
    }
}
