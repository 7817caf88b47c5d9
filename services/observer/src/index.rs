//! [`KeyIndex`]: a secondary index of one reflector cache (docs/design/observation.md#indexed-lookups): the
//! names of the cached objects by (namespace, key), kept from the same watch events as the store,
//! so that a lookup by key reads the few objects it returns instead of scanning every object of
//! the kind. The observer indexes EndpointSlices by their Service (`kubernetes.io/service-name`):
//! a scan of 10,000 slices on every Observe was most of the observer's CPU at 10,000 Services.

use std::collections::{BTreeSet, HashMap};
use std::sync::{PoisonError, RwLock};

use kube::Resource;

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

/// The index of one cached kind by `key_of`: the names of the objects by (namespace, key).
pub struct KeyIndex<K> {
    key_of: fn(&K) -> Option<&str>,
    entries: RwLock<Entries>,
}

impl<K> std::fmt::Debug for KeyIndex<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("KeyIndex")
            .field("namespaces", &entries.0.len())
            .finish_non_exhaustive()
    }
}

/// Where an object is filed: its namespace and name.
fn placed<K: Resource>(object: &K) -> Option<(String, String)> {
    let meta = object.meta();
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

impl<K: Resource> KeyIndex<K> {
    /// An empty index filing each object under `key_of` (not filed when it has none).
    pub fn new(key_of: fn(&K) -> Option<&str>) -> Self {
        Self {
            key_of,
            entries: RwLock::new(Entries::default()),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Files an applied object (under its new key, or nowhere).
    pub fn apply(&self, object: &K) {
        if let Some((namespace, name)) = placed(object) {
            self.write().file(&namespace, &name, (self.key_of)(object));
        }
    }

    /// Forgets a deleted object.
    pub fn delete(&self, object: &K) {
        if let Some((namespace, name)) = placed(object) {
            self.write().remove(&namespace, &name);
        }
    }

    /// Replaces every entry with those of a (re)list, as the reflector store does: objects
    /// deleted while the watch was down go.
    pub fn reset(&self, listing: &[K]) {
        let mut relisted = Entries::default();
        for object in listing {
            if let Some((namespace, name)) = placed(object) {
                relisted.file(&namespace, &name, (self.key_of)(object));
            }
        }
        *self.write() = relisted;
    }

    /// The names of the objects in `namespace` filed under `key`, sorted.
    pub fn names(&self, namespace: &str, key: &str) -> Vec<String> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries
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
        let index = KeyIndex::new(service_of);
        index.apply(&slice("a", "web-1", Some("web")));
        index.apply(&slice("a", "web-2", Some("web")));
        index.apply(&slice("b", "web-1", Some("web")));
        index.apply(&slice("a", "loose", None));
        assert_eq!(index.names("a", "web"), ["web-1", "web-2"]);
        assert_eq!(index.names("b", "web"), ["web-1"]);
        assert!(index.names("a", "api").is_empty());
        assert!(index.names("c", "web").is_empty());

        // Relabelled to another Service: filed under the new key only.
        index.apply(&slice("a", "web-2", Some("api")));
        assert_eq!(index.names("a", "web"), ["web-1"]);
        assert_eq!(index.names("a", "api"), ["web-2"]);
        // Label removed: filed nowhere.
        index.apply(&slice("a", "web-2", None));
        assert!(index.names("a", "api").is_empty());

        index.delete(&slice("a", "web-1", Some("web")));
        assert!(index.names("a", "web").is_empty());
        assert_eq!(
            index.names("b", "web"),
            ["web-1"],
            "other namespaces keep theirs"
        );
    }

    #[test]
    fn a_relist_replaces_the_entries() {
        let index = KeyIndex::new(service_of);
        index.apply(&slice("a", "gone", Some("web")));
        index.apply(&slice("a", "kept", Some("web")));
        index.apply(&slice("b", "gone", Some("web")));
        index.reset(&[
            slice("a", "kept", Some("web")),
            slice("a", "new", Some("web")),
        ]);
        assert_eq!(index.names("a", "web"), ["kept", "new"]);
        assert!(index.names("b", "web").is_empty());
    }
}
