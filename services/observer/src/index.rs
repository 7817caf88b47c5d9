//! A secondary index of one reflector cache (docs/design/observation.md#indexed-lookups): the
//! names of the cached objects by (namespace, key), kept from the same watch events as the store,
//! so that a lookup by key reads the few objects it returns instead of scanning every object of
//! the kind. The observer indexes EndpointSlices by their Service (`kubernetes.io/service-name`):
//! a scan of 10,000 slices on every Observe was most of the observer's CPU at 10,000 Services.

use std::collections::{BTreeSet, HashMap};
use std::sync::{PoisonError, RwLock};

use kube::Resource;
use kube::runtime::watcher::Event;

/// The entries of one namespace.
#[derive(Debug, Default)]
struct Namespace {
    /// key → names of the objects carrying it.
    names: HashMap<String, BTreeSet<String>>,
    /// name → the key it is filed under (objects without a key are not filed).
    keys: HashMap<String, String>,
}

/// Every entry, by namespace.
#[derive(Debug, Default)]
struct Entries(HashMap<String, Namespace>);

impl Entries {
    fn remove(&mut self, namespace: &str, name: &str) {
        let Some(entries) = self.0.get_mut(namespace) else {
            return;
        };
        if let Some(key) = entries.keys.remove(name)
            && let Some(names) = entries.names.get_mut(&key)
        {
            names.remove(name);
            if names.is_empty() {
                entries.names.remove(&key);
            }
        }
        if entries.keys.is_empty() {
            self.0.remove(namespace);
        }
    }

    fn file(&mut self, namespace: &str, name: &str, key: Option<&str>) {
        self.remove(namespace, name);
        let Some(key) = key else {
            return;
        };
        let entries = self.0.entry(namespace.to_owned()).or_default();
        entries
            .names
            .entry(key.to_owned())
            .or_default()
            .insert(name.to_owned());
        entries.keys.insert(name.to_owned(), key.to_owned());
    }
}

#[derive(Debug, Default)]
struct State {
    live: Entries,
    /// The entries of a relist in progress (between `Init` and `InitDone`), swapped in whole at
    /// its end, as the reflector store does: objects deleted while the watch was down go.
    relisting: Option<Entries>,
}

/// The index of one cached kind by `key_of`.
pub struct Index<K> {
    key_of: fn(&K) -> Option<&str>,
    state: RwLock<State>,
}

impl<K> std::fmt::Debug for Index<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Index")
            .field("namespaces", &state.live.0.len())
            .finish_non_exhaustive()
    }
}

impl<K: Resource> Index<K> {
    /// An empty index filing each object under `key_of` (not filed when it has none).
    pub fn new(key_of: fn(&K) -> Option<&str>) -> Self {
        Self {
            key_of,
            state: RwLock::new(State::default()),
        }
    }

    /// Applies one watch event, as the reflector store applies it.
    pub fn apply(&self, event: &Event<K>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let placed = |object: &K| {
            let meta = object.meta();
            Some((meta.namespace.clone()?, meta.name.clone()?))
        };
        match event {
            Event::Apply(object) => {
                if let Some((namespace, name)) = placed(object) {
                    state.live.file(&namespace, &name, (self.key_of)(object));
                }
            }
            Event::Delete(object) => {
                if let Some((namespace, name)) = placed(object) {
                    state.live.remove(&namespace, &name);
                }
            }
            Event::Init => state.relisting = Some(Entries::default()),
            Event::InitApply(object) => {
                if let Some((namespace, name)) = placed(object) {
                    state.relisting.get_or_insert_with(Entries::default).file(
                        &namespace,
                        &name,
                        (self.key_of)(object),
                    );
                }
            }
            Event::InitDone => {
                if let Some(relisted) = state.relisting.take() {
                    state.live = relisted;
                }
            }
        }
    }

    /// The names of the objects in `namespace` filed under `key`, sorted.
    pub fn names(&self, namespace: &str, key: &str) -> Vec<String> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        state
            .live
            .0
            .get(namespace)
            .and_then(|entries| entries.names.get(key))
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::ObjectMeta;

    use super::*;

    fn slice(namespace: &str, name: &str, service: Option<&str>) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                labels: service.map(|s| {
                    BTreeMap::from([("kubernetes.io/service-name".to_owned(), s.to_owned())])
                }),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            ..EndpointSlice::default()
        }
    }

    fn service_of(slice: &EndpointSlice) -> Option<&str> {
        slice
            .metadata
            .labels
            .as_ref()?
            .get("kubernetes.io/service-name")
            .map(String::as_str)
    }

    #[test]
    fn objects_are_filed_moved_and_removed_by_key() {
        let index = Index::new(service_of);
        index.apply(&Event::Apply(slice("a", "web-1", Some("web"))));
        index.apply(&Event::Apply(slice("a", "web-2", Some("web"))));
        index.apply(&Event::Apply(slice("b", "web-1", Some("web"))));
        index.apply(&Event::Apply(slice("a", "loose", None)));
        assert_eq!(index.names("a", "web"), ["web-1", "web-2"]);
        assert_eq!(index.names("b", "web"), ["web-1"]);
        assert!(index.names("a", "api").is_empty());
        assert!(index.names("c", "web").is_empty());

        // Relabelled to another Service: filed under the new key only.
        index.apply(&Event::Apply(slice("a", "web-2", Some("api"))));
        assert_eq!(index.names("a", "web"), ["web-1"]);
        assert_eq!(index.names("a", "api"), ["web-2"]);
        // Label removed: filed nowhere.
        index.apply(&Event::Apply(slice("a", "web-2", None)));
        assert!(index.names("a", "api").is_empty());

        index.apply(&Event::Delete(slice("a", "web-1", Some("web"))));
        assert!(index.names("a", "web").is_empty());
        assert_eq!(
            index.names("b", "web"),
            ["web-1"],
            "other namespaces keep theirs"
        );
    }

    #[test]
    fn a_relist_replaces_the_entries_when_it_completes() {
        let index = Index::new(service_of);
        index.apply(&Event::Apply(slice("a", "gone", Some("web"))));
        index.apply(&Event::Apply(slice("a", "kept", Some("web"))));
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(slice("a", "kept", Some("web"))));
        index.apply(&Event::InitApply(slice("a", "new", Some("web"))));
        // Until the relist completes, lookups see the previous entries.
        assert_eq!(index.names("a", "web"), ["gone", "kept"]);
        index.apply(&Event::InitDone);
        assert_eq!(index.names("a", "web"), ["kept", "new"]);
    }
}
