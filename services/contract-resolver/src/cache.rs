//! Caches and their keys (pure: the clock is a parameter).
//!
//! * Bundles are cached by **manifest digest** (content-addressed, so an unchanged tag needs only
//!   its manifest HEAD and no blob download), tag lists by repository with a TTL.
//! * Every key carries a [`CredentialScope`]: anonymous access is shared, but anything fetched
//!   with a pull Secret is keyed by the Pacto's namespace, the Secret's name and a salted
//!   fingerprint of the credentials, so one namespace's credentials never serve another namespace
//!   (nor a rotated Secret its predecessor's entries). Secret values themselves are never cached.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use pacto_oci::Credentials;
use sha2::{Digest as _, Sha256};

/// Whose access an entry was fetched with.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum CredentialScope {
    /// No pull Secret: anonymous registry access.
    Anonymous,
    /// A pull Secret of one namespace.
    Secret {
        /// The Pacto's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// Salted SHA-256 of the credential material (never printed).
        fingerprint: [u8; 32],
    },
}

impl fmt::Debug for CredentialScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialScope::Anonymous => f.write_str("Anonymous"),
            CredentialScope::Secret {
                namespace, name, ..
            } => write!(f, "Secret({namespace}/{name})"),
        }
    }
}

/// A per-process random salt for credential fingerprints.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Salt(u64);

impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Salt(<redacted>)")
    }
}

impl Salt {
    /// A random salt (from the standard library's randomly seeded hasher).
    pub fn random() -> Self {
        Salt(std::collections::hash_map::RandomState::new().hash_one(0x0070_6163_746f_u64))
    }
}

impl CredentialScope {
    /// The scope of `credentials` read from Secret `namespace/name`.
    pub fn for_secret(namespace: &str, name: &str, credentials: &Credentials, salt: Salt) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(salt.0.to_le_bytes());
        match credentials {
            Credentials::Anonymous => hasher.update(b"anonymous"),
            Credentials::Basic { username, password } => {
                hasher.update(b"basic\0");
                hasher.update(username.as_bytes());
                hasher.update(b"\0");
                hasher.update(password.as_bytes());
            }
            Credentials::Bearer(token) => {
                hasher.update(b"bearer\0");
                hasher.update(token.as_bytes());
            }
        }
        CredentialScope::Secret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            fingerprint: hasher.finalize().into(),
        }
    }
}

/// Key of a cached bundle: scope + repository + manifest digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleKey {
    /// Whose access fetched it.
    pub scope: CredentialScope,
    /// `registry/repository`.
    pub repository: String,
    /// `sha256:…`.
    pub digest: String,
}

/// Key of a tag's shared digest answer: scope + repository + tag
/// (docs/design/resolution.md#shared-resolves).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DigestKey {
    /// Whose access asked.
    pub scope: CredentialScope,
    /// `registry/repository`.
    pub repository: String,
    /// The tag.
    pub tag: String,
}

/// Key of a cached tag list: scope + repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TagsKey {
    /// Whose access fetched it.
    pub scope: CredentialScope,
    /// `registry/repository`.
    pub repository: String,
}

/// A bounded map whose entries expire `ttl` after insertion, bounded both in entries and in
/// bytes (docs/design/resolution.md#hostile-registries: a count bound alone lets a registry fill
/// memory with large bundles). When full, expired entries are dropped first, then the oldest. A
/// value heavier than the whole byte bound is not cached.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    max_bytes: u64,
    weigh: fn(&V) -> u64,
    entries: Mutex<Entries<K, V>>,
}

#[derive(Debug)]
struct Entries<K, V> {
    map: HashMap<K, (V, Instant, u64)>,
    bytes: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    /// A cache of at most `capacity` entries living `ttl` each (`capacity` 0 disables caching),
    /// without a byte bound until [`TtlCache::with_max_bytes`].
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            max_bytes: u64::MAX,
            weigh: |_| 0,
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                bytes: 0,
            }),
        }
    }

    /// Bounds the sum of the entries' weights (`weigh`, in bytes) by `max_bytes`.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64, weigh: fn(&V) -> u64) -> Self {
        self.max_bytes = max_bytes;
        self.weigh = weigh;
        self
    }

    /// The live value for `key` at `now`.
    #[cfg(test)]
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.get_aged(key, now).map(|(value, _)| value)
    }

    /// The live value for `key` at `now` and its age (time since it was stored).
    pub fn get_aged(&self, key: &K, now: Instant) -> Option<(V, Duration)> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.map.get(key) {
            Some((value, at, _)) if now.saturating_duration_since(*at) < self.ttl => {
                Some((value.clone(), now.saturating_duration_since(*at)))
            }
            Some(_) => {
                if let Some((_, _, weight)) = entries.map.remove(key) {
                    entries.bytes -= weight;
                }
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `key` at `now`.
    pub fn insert(&self, key: K, value: V, now: Instant) {
        let weight = (self.weigh)(&value);
        if self.capacity == 0 || self.ttl.is_zero() || weight > self.max_bytes {
            return;
        }
        let mut guard = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entries = &mut *guard;
        if let Some((_, _, old)) = entries.map.remove(&key) {
            entries.bytes -= old;
        }
        let full = |e: &Entries<K, V>| {
            e.map.len() >= self.capacity || e.bytes.saturating_add(weight) > self.max_bytes
        };
        if full(entries) {
            let ttl = self.ttl;
            let mut freed = 0;
            entries.map.retain(|_, (_, at, w)| {
                let live = now.saturating_duration_since(*at) < ttl;
                if !live {
                    freed += *w;
                }
                live
            });
            entries.bytes -= freed;
            while full(entries) {
                let oldest = entries
                    .map
                    .iter()
                    .min_by_key(|(_, (_, at, _))| *at)
                    .map(|(k, _)| k.clone());
                match oldest.and_then(|k| entries.map.remove(&k)) {
                    Some((_, _, w)) => entries.bytes -= w,
                    None => break,
                }
            }
        }
        entries.bytes += weight;
        entries.map.insert(key, (value, now, weight));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Salt {
        /// A fixed salt.
        fn fixed(value: u64) -> Self {
            Salt(value)
        }
    }

    impl<K, V> TtlCache<K, V> {
        /// Number of stored entries (live or not yet evicted).
        fn len(&self) -> usize {
            self.entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .map
                .len()
        }

        /// Whether nothing is stored.
        fn is_empty(&self) -> bool {
            self.len() == 0
        }
    }

    #[test]
    fn entries_expire_and_capacity_evicts_oldest() {
        let cache = TtlCache::new(Duration::from_secs(10), 2);
        let t0 = Instant::now();
        cache.insert("a", 1, t0);
        cache.insert("b", 2, t0 + Duration::from_secs(1));
        assert_eq!(cache.get(&"a", t0 + Duration::from_secs(9)), Some(1));
        assert_eq!(
            cache.get(&"a", t0 + Duration::from_secs(10)),
            None,
            "expired"
        );
        cache.insert("a", 1, t0 + Duration::from_secs(2));
        cache.insert("c", 3, t0 + Duration::from_secs(3));
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.get(&"b", t0 + Duration::from_secs(3)),
            None,
            "oldest evicted"
        );
        assert_eq!(cache.get(&"c", t0 + Duration::from_secs(3)), Some(3));
        let off = TtlCache::new(Duration::from_secs(10), 0);
        off.insert("a", 1, t0);
        assert!(off.is_empty());
    }

    #[test]
    fn the_byte_bound_evicts_oldest_and_refuses_oversized_values() {
        let cache = TtlCache::new(Duration::from_secs(10), 100)
            .with_max_bytes(100, |v: &Vec<u8>| v.len() as u64);
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        cache.insert("a", vec![0; 40], at(0));
        cache.insert("b", vec![0; 40], at(1));
        cache.insert("c", vec![0; 40], at(2));
        assert_eq!(cache.get(&"a", at(2)), None, "oldest evicted for bytes");
        assert!(cache.get(&"b", at(2)).is_some());
        assert!(cache.get(&"c", at(2)).is_some());
        cache.insert("huge", vec![0; 101], at(3));
        assert_eq!(cache.get(&"huge", at(3)), None, "heavier than the bound");
        assert_eq!(
            cache.len(),
            2,
            "nothing evicted for a value that is not cached"
        );
        cache.insert("b", vec![0; 60], at(4));
        assert_eq!(
            cache.get(&"c", at(4)),
            Some(vec![0; 40]),
            "replacing frees the old weight"
        );
        assert_eq!(cache.entries.lock().expect("lock").bytes, 100);
        // Expired entries are released first and their bytes with them.
        cache.insert("d", vec![0; 100], at(20));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.entries.lock().expect("lock").bytes, 100);
    }

    #[test]
    fn scopes_separate_namespaces_and_rotations() {
        let salt = Salt::fixed(7);
        let creds = Credentials::Basic {
            username: "u".into(),
            password: "p".into(),
        };
        let a = CredentialScope::for_secret("team-a", "pull", &creds, salt);
        let b = CredentialScope::for_secret("team-b", "pull", &creds, salt);
        assert_ne!(a, b, "same secret name and value, other namespace");
        let rotated = CredentialScope::for_secret(
            "team-a",
            "pull",
            &Credentials::Basic {
                username: "u".into(),
                password: "q".into(),
            },
            salt,
        );
        assert_ne!(a, rotated);
        assert_eq!(
            a,
            CredentialScope::for_secret("team-a", "pull", &creds, salt)
        );
        assert_ne!(a, CredentialScope::Anonymous);
        let key = |scope| BundleKey {
            scope,
            repository: "r/x".into(),
            digest: "sha256:1".into(),
        };
        assert_ne!(key(a.clone()), key(b));
        let shown = format!("{a:?}");
        assert_eq!(shown, "Secret(team-a/pull)");
        assert_ne!(
            CredentialScope::for_secret("n", "s", &creds, Salt::fixed(1)),
            CredentialScope::for_secret("n", "s", &creds, Salt::fixed(2))
        );
    }
}
