//! Which namespaces a service works on (feature `watch`; docs/design/architecture.md#namespace-scope).
//!
//! Beside `--watch-namespace` (one namespace, which narrows the watches themselves), the
//! status-writer and the observer take a namespace **label selector** and an **exclusion list**,
//! the way policy engines scope their audits. A namespace is in scope when it is not excluded
//! and, with a selector, its labels match it. Matching is decided by the API server: a
//! [`NamespaceScope::run`] task watches the Namespaces with the selector as a server-side label
//! selector (a namespace whose labels stop matching arrives as a deletion), so the selector
//! syntax and semantics are exactly Kubernetes' own. [`NamespaceScope::check`] asks the API
//! server once at start-up, so a malformed selector stops the service with the server's
//! message instead of a watch that fails forever.
//!
//! Until the first list of Namespaces has arrived, a selective scope admits nothing; every
//! namespace that enters the scope (in the first list or later) is announced to the
//! subscribers, which then pick up the objects they skipped.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::index::{Index, run_index};
use crate::watch::{error_text, watch};

/// How many scope entries a slow subscriber may fall behind before it is told it lagged.
const ANNOUNCE_CAPACITY: usize = 1024;

/// The scope flags could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// The API server refused the label selector (or the list it was tried with).
    #[error("--namespace-selector {selector:?}: the API server refused it: {message}")]
    Selector {
        /// The selector as given.
        selector: String,
        /// The API server's answer.
        message: String,
    },
    /// An excluded name is not a namespace name (a DNS label).
    #[error(
        "--exclude-namespaces: {name:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
    )]
    ExcludedName {
        /// The offending entry.
        name: String,
    },
}

/// The namespaces a service works on. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct NamespaceScope {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    selector: Option<String>,
    excluded: BTreeSet<String>,
    /// The namespaces the selector matches; `None` until the first list.
    matching: RwLock<Option<BTreeSet<String>>>,
    entered: broadcast::Sender<String>,
}

impl Default for NamespaceScope {
    fn default() -> Self {
        Self::all()
    }
}

fn is_namespace_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

impl NamespaceScope {
    /// Every namespace.
    pub fn all() -> Self {
        Self::build(None, BTreeSet::new())
    }

    /// The namespaces matching `selector` (an empty one is no selector) and not in `excluded`
    /// (empty entries are ignored).
    pub fn new(
        selector: Option<&str>,
        excluded: impl IntoIterator<Item = String>,
    ) -> Result<Self, ScopeError> {
        let selector = selector
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let mut names = BTreeSet::new();
        for name in excluded {
            let name = name.trim().to_owned();
            if name.is_empty() {
                continue;
            }
            if !is_namespace_name(&name) {
                return Err(ScopeError::ExcludedName { name });
            }
            names.insert(name);
        }
        Ok(Self::build(selector, names))
    }

    fn build(selector: Option<String>, excluded: BTreeSet<String>) -> Self {
        let (entered, _) = broadcast::channel(ANNOUNCE_CAPACITY);
        Self {
            inner: Arc::new(Inner {
                selector,
                excluded,
                matching: RwLock::new(None),
                entered,
            }),
        }
    }

    /// The label selector, if any.
    pub fn selector(&self) -> Option<&str> {
        self.inner.selector.as_deref()
    }

    /// Whether a [`run`](Self::run) task is needed (there is a selector).
    pub fn is_selective(&self) -> bool {
        self.inner.selector.is_some()
    }

    /// Whether namespace `namespace` is in scope now.
    pub fn admits(&self, namespace: &str) -> bool {
        if self.inner.excluded.contains(namespace) {
            return false;
        }
        if self.inner.selector.is_none() {
            return true;
        }
        self.inner
            .matching
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|set| set.contains(namespace))
    }

    /// The scope in words, for messages: `all namespaces`, `namespaces labelled <sel>`, plus
    /// `except a, b`.
    pub fn describe(&self) -> String {
        let mut text = match &self.inner.selector {
            Some(selector) => format!("namespaces labelled {selector:?}"),
            None => "all namespaces".to_owned(),
        };
        if !self.inner.excluded.is_empty() {
            let names: Vec<&str> = self.inner.excluded.iter().map(String::as_str).collect();
            text.push_str(" except ");
            text.push_str(&names.join(", "));
        }
        text
    }

    /// The namespaces that enter the scope from now on (the first list's included), each once
    /// per entry. A receiver that falls behind gets `Lagged`: it should then re-examine
    /// everything.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.inner.entered.subscribe()
    }

    /// Asks the API server to list Namespaces with the selector once: a malformed selector (or
    /// missing rights) is refused here, with the server's message. No-op without a selector.
    pub async fn check(&self, client: &Client) -> Result<(), ScopeError> {
        let Some(selector) = &self.inner.selector else {
            return Ok(());
        };
        let api: Api<Namespace> = Api::all(client.clone());
        api.list_metadata(&ListParams::default().labels(selector).limit(1))
            .await
            .map(drop)
            .map_err(|error| ScopeError::Selector {
                selector: selector.clone(),
                message: error_text(&error),
            })
    }

    /// Records the namespaces the selector matches (a full list), announcing those that entered.
    fn replace(&self, names: BTreeSet<String>) {
        let entered: Vec<String> = {
            let mut matching = self
                .inner
                .matching
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let before = matching.take().unwrap_or_default();
            let entered = names.difference(&before).cloned().collect();
            *matching = Some(names);
            entered
        };
        for name in entered {
            self.announce(name);
        }
    }

    /// Records one namespace that matches (`true`) or stopped matching (`false`).
    fn set(&self, name: &str, matches: bool) {
        let entered = {
            let mut matching = self
                .inner
                .matching
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let set = matching.get_or_insert_with(BTreeSet::new);
            if matches {
                set.insert(name.to_owned())
            } else {
                set.remove(name);
                false
            }
        };
        if entered {
            self.announce(name.to_owned());
        }
    }

    fn announce(&self, name: String) {
        if self.inner.excluded.contains(&name) {
            return;
        }
        tracing::info!(namespace = %name, "namespace entered the scope");
        // No subscriber is not an error.
        let _ = self.inner.entered.send(name);
    }

    /// Keeps the set of matching namespaces up to date until `shutdown` (with a selector;
    /// returns at once without one): the Namespace watch with the selector, into the scope as
    /// an [`Index`]. Watch errors are retried with the shared backoff.
    pub async fn run(self, client: Client, shutdown: CancellationToken) {
        let Some(selector) = self.inner.selector.clone() else {
            return;
        };
        let api: Api<Namespace> = Api::all(client);
        let config = watcher::Config::default().labels(&selector);
        run_index(watch(api, config), Matching(self), shutdown).await;
    }
}

/// The scope as the index of the Namespaces its selector matches.
struct Matching(NamespaceScope);

impl Index<Namespace> for Matching {
    fn apply(&mut self, namespace: Namespace) {
        self.0.set(&namespace.name_any(), true);
    }

    fn delete(&mut self, namespace: Namespace) {
        self.0.set(&namespace.name_any(), false);
    }

    fn reset(&mut self, listing: Vec<Namespace>) {
        self.0
            .replace(listing.iter().map(ResourceExt::name_any).collect());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn without_a_selector_every_namespace_but_the_excluded_is_in_scope() {
        let scope = NamespaceScope::new(None, ["kube-system".to_owned(), String::new()]).unwrap();
        assert!(!scope.is_selective());
        assert!(scope.admits("shop"));
        assert!(!scope.admits("kube-system"));
        assert_eq!(scope.describe(), "all namespaces except kube-system");
        assert!(NamespaceScope::all().admits("anything"));
        // An empty selector is no selector.
        assert!(!NamespaceScope::new(Some(" "), []).unwrap().is_selective());
    }

    #[test]
    fn with_a_selector_only_matching_namespaces_once_listed_are_in_scope() {
        let scope = NamespaceScope::new(Some("audit=on"), ["shop-dev".to_owned()]).unwrap();
        let mut entered = scope.subscribe();
        // Nothing before the first list.
        assert!(!scope.admits("shop"));
        scope.replace(["shop".to_owned(), "shop-dev".to_owned()].into());
        assert!(scope.admits("shop"));
        assert!(!scope.admits("shop-dev"), "excluded wins over the selector");
        assert!(!scope.admits("other"));
        // Entries are announced once; an excluded namespace is not.
        assert_eq!(entered.try_recv().unwrap(), "shop");
        assert!(entered.try_recv().is_err());
        scope.set("other", true);
        scope.set("other", true);
        assert_eq!(entered.try_recv().unwrap(), "other");
        assert!(
            entered.try_recv().is_err(),
            "a repeated apply is no new entry"
        );
        scope.set("shop", false);
        assert!(!scope.admits("shop"));
        // A relist announces what entered while the watch was down.
        scope.replace(["other".to_owned(), "shop".to_owned()].into());
        assert_eq!(entered.try_recv().unwrap(), "shop");
        assert_eq!(
            scope.describe(),
            "namespaces labelled \"audit=on\" except shop-dev"
        );
    }

    #[test]
    fn a_malformed_excluded_name_is_refused_naming_it() {
        let error = NamespaceScope::new(None, ["Shop".to_owned()]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--exclude-namespaces: \"Shop\" is not a namespace name (lowercase letters, digits and '-', at most 63)"
        );
    }
}
