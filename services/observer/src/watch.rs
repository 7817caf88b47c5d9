//! The watch streams: one per kind the observer reads or reacts to, cluster-wide or in
//! `--watch-namespace`. Each stream of a cached kind (Services, EndpointSlices, the workload
//! kinds, Pactos) feeds both its reflector cache ([`crate::cache`]) and the WatchTargets hub
//! ([`crate::targets`]); ConfigMaps and Secrets are watched as metadata only (Secret values and
//! ConfigMap data never sit in memory), for the hub alone. Every stream retries with the shared
//! backoff policy ([`pacto_runtime::watch`]).

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use pacto_api::{Pacto, WorkloadKind};
use pacto_runtime::CancellationToken;
use pacto_runtime::watch::{WatchRetry, WatchRetryExt};

use crate::cache::{CacheFeed, Caches};
use crate::k8s::{SECRET_FORBIDDEN_HINT, api, watch_error_is_forbidden};
pub use crate::targets::{
    COALESCE, DependencyEdges, Index, ObjectChange, PactoKey, PactoRefs, TargetChange, TargetHub,
    WatchedKind, affected,
};

/// Counts the watches whose initial list completed.
#[derive(Debug, Clone)]
pub struct WatchersReady {
    rx: tokio::sync::watch::Receiver<usize>,
    total: usize,
}

impl WatchersReady {
    /// Waits until every watch has listed once (or the watches stopped).
    pub async fn wait(&mut self) {
        let total = self.total;
        let _ = self.rx.wait_for(|n| *n >= total).await;
    }
}

/// What [`spawn`] started.
#[derive(Debug, Clone)]
pub struct Watchers {
    /// The caches the streams fill.
    pub caches: Caches,
    /// Readiness of the streams.
    pub ready: WatchersReady,
}

/// The retry policy of the watch of `kind`, with the observer's hint for a refused one.
fn retry(kind: &'static str) -> WatchRetry {
    let retry = WatchRetry::new(kind);
    if kind == WatchedKind::Secret.as_str() {
        retry.when_forbidden(format!(
            "Secret watch forbidden: changes of bound Secrets will not trigger re-observation; \
             {SECRET_FORBIDDEN_HINT}"
        ))
    } else {
        retry.when_forbidden(
            "watch forbidden: the observer's ClusterRole (or Role) is missing this kind; \
             retrying with backoff",
        )
    }
}

/// Counts one stream as listed once: at its first completed list or, when `refusal_counts`, at
/// its first refusal by RBAC.
struct Readiness {
    ready: tokio::sync::watch::Sender<usize>,
    refusal_counts: bool,
    counted: bool,
}

impl Readiness {
    fn observe<K>(&mut self, item: &Result<Event<K>, watcher::Error>) {
        let now = match item {
            Ok(Event::InitDone) => true,
            Err(error) => self.refusal_counts && watch_error_is_forbidden(error),
            Ok(_) => false,
        };
        if now && !self.counted {
            self.counted = true;
            self.ready.send_modify(|n| *n += 1);
        }
    }
}

/// A change of a watched object for the hub (applied or deleted; list events are not changes).
fn object_change<K: Resource>(kind: WatchedKind, event: &Event<K>) -> Option<ObjectChange> {
    let (object, verb) = match event {
        Event::Apply(object) => (object, "applied"),
        Event::Delete(object) => (object, "deleted"),
        Event::Init | Event::InitApply(_) | Event::InitDone => return None,
    };
    let meta = object.meta();
    Some(ObjectChange {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        verb,
    })
}

fn notify<K: Resource>(hub: &TargetHub, kind: WatchedKind, event: &Event<K>) {
    if let Some(change) = object_change(kind, event) {
        hub.object_changed(&change);
    }
}

/// Pactos feed the index (listed ones included), not object changes.
fn pacto_event(hub: &TargetHub, event: &Event<Pacto>) {
    match event {
        Event::Apply(pacto) | Event::InitApply(pacto) => hub.pacto_applied(pacto),
        Event::Delete(pacto) => hub.pacto_deleted(pacto),
        Event::Init | Event::InitDone => {}
    }
}

/// Starts the streams of one [`spawn`] call.
struct Streams<'a> {
    client: &'a Client,
    namespace: Option<&'a str>,
    hub: Option<&'a TargetHub>,
    shutdown: &'a CancellationToken,
    ready: tokio::sync::watch::Sender<usize>,
    total: usize,
}

impl Streams<'_> {
    fn listed(&mut self, refusal_counts: bool) -> Readiness {
        self.total += 1;
        Readiness {
            ready: self.ready.clone(),
            refusal_counts,
            counted: false,
        }
    }

    /// Starts one watch stream of `K` (named `kind` in the metric and the retry policy): each
    /// object trimmed with `trim`, each item handed to `feed`, retried with [`retry`], stopped
    /// at shutdown.
    fn start<K>(
        &self,
        kind: &'static str,
        trim: fn(&mut K),
        mut feed: impl FnMut(&Result<Event<K>, watcher::Error>) + Send + 'static,
    ) where
        K: Watchable + serde::de::DeserializeOwned,
    {
        crate::metrics::watch_stream_started(kind);
        let stream = watcher::watcher(
            api::<K>(self.client, self.namespace),
            watcher::Config::default(),
        )
        .modify(trim)
        .with_retry(retry(kind));
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                let item = tokio::select! {
                    () = shutdown.cancelled() => return,
                    item = stream.next() => item,
                };
                let Some(item) = item else { return };
                feed(&item);
            }
        });
    }

    /// The stream of a cached kind: it fills `cache`, then (with a hub) tells the hub through
    /// `to_hub`.
    fn cached<K>(&mut self, mut cache: CacheFeed<K>, to_hub: fn(&TargetHub, &Event<K>))
    where
        K: Watchable + serde::de::DeserializeOwned,
    {
        let hub = self.hub.cloned();
        let mut listed = self.listed(false);
        self.start(cache.kind(), cache.trim(), move |item| {
            cache.apply(item);
            if let (Some(hub), Ok(event)) = (&hub, item) {
                to_hub(hub, event);
            }
            listed.observe(item);
        });
    }

    /// The metadata-only stream of a kind that is not cached (only with a hub). A refused
    /// Secret watch is refused by design without the opt-in chart value: it does not hold
    /// readiness back (bound Secrets then read as honest unknowns).
    fn metadata<K>(&mut self, kind: WatchedKind)
    where
        K: Watchable,
    {
        let Some(hub) = self.hub.cloned() else {
            return;
        };
        let mut listed = self.listed(kind == WatchedKind::Secret);
        self.start::<PartialObjectMeta<K>>(
            kind.as_str(),
            |_| {},
            move |item| {
                if let Ok(event) = item {
                    notify(&hub, kind, event);
                }
                listed.observe(item);
            },
        );
    }
}

/// A namespaced kind one watch stream carries: the typed k8s-openapi objects and their
/// metadata-only form, none of which has a dynamic type.
trait Watchable:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watchable for K where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// The optional kinds [`spawn`] watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kinds {
    /// Secrets (metadata only, for the hub): only when the observer reads them
    /// (`--observe-secrets`), so an observer without Secret access never asks for them.
    pub secrets: bool,
}

impl Kinds {
    /// Every kind, Secrets included.
    pub const ALL: Self = Self { secrets: true };
}

/// Starts one watch stream per kind (cluster-wide, or in `namespace`), stopped at `shutdown`:
/// the cached kinds fill the returned [`Caches`] and, with a `hub`, feed it; with a `hub`,
/// ConfigMaps and (when `kinds.secrets`) Secrets are watched (metadata only) for it too.
/// [`WatchersReady::wait`] returns once every stream has completed its initial list.
pub fn spawn(
    client: &Client,
    namespace: Option<&str>,
    hub: Option<&TargetHub>,
    kinds: Kinds,
    shutdown: &CancellationToken,
) -> Watchers {
    let (caches, feeds) = Caches::new(namespace);
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(0usize);
    let mut streams = Streams {
        client,
        namespace,
        hub,
        shutdown,
        ready: ready_tx,
        total: 0,
    };
    streams.cached(feeds.pactos, pacto_event);
    streams.cached(feeds.services, |hub, e| {
        notify(hub, WatchedKind::Service, e);
    });
    streams.cached(feeds.endpoint_slices, |hub, e| {
        notify(hub, WatchedKind::EndpointSlice, e);
    });
    streams.cached(feeds.deployments, |hub, e| {
        notify(hub, WatchedKind::Workload(WorkloadKind::Deployment), e);
    });
    streams.cached(feeds.stateful_sets, |hub, e| {
        notify(hub, WatchedKind::Workload(WorkloadKind::StatefulSet), e);
    });
    streams.cached(feeds.replica_sets, |hub, e| {
        notify(hub, WatchedKind::Workload(WorkloadKind::ReplicaSet), e);
    });
    streams.cached(feeds.jobs, |hub, e| {
        notify(hub, WatchedKind::Workload(WorkloadKind::Job), e);
    });
    streams.cached(feeds.cron_jobs, |hub, e| {
        notify(hub, WatchedKind::Workload(WorkloadKind::CronJob), e);
    });
    streams.metadata::<ConfigMap>(WatchedKind::ConfigMap);
    if kinds.secrets {
        streams.metadata::<Secret>(WatchedKind::Secret);
    }
    Watchers {
        caches,
        ready: WatchersReady {
            rx: ready_rx,
            total: streams.total,
        },
    }
}

/// Starts the watch streams of every kind, Secrets included, feeding `hub` (and caches this
/// call does not keep); see [`spawn`].
pub fn spawn_watchers(
    client: &Client,
    namespace: Option<&str>,
    hub: &TargetHub,
    shutdown: &CancellationToken,
) -> WatchersReady {
    spawn(client, namespace, Some(hub), Kinds::ALL, shutdown).ready
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::k8s::SERVICE_NAME_LABEL;

    fn slice(name: &str) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some("a".into()),
                name: Some(name.into()),
                labels: Some([(SERVICE_NAME_LABEL.to_owned(), "orders".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..EndpointSlice::default()
        }
    }

    #[test]
    fn only_applied_and_deleted_objects_are_changes() {
        let kind = WatchedKind::EndpointSlice;
        assert_eq!(object_change(kind, &Event::<EndpointSlice>::Init), None);
        assert_eq!(object_change(kind, &Event::InitApply(slice("x"))), None);
        assert_eq!(object_change(kind, &Event::<EndpointSlice>::InitDone), None);
        let change = object_change(kind, &Event::Delete(slice("x"))).unwrap();
        assert_eq!(
            (change.namespace.as_str(), change.name.as_str(), change.verb),
            ("a", "x", "deleted")
        );
        assert_eq!(
            change.labels.get(SERVICE_NAME_LABEL).map(String::as_str),
            Some("orders")
        );
        assert_eq!(
            object_change(kind, &Event::Apply(slice("x"))).map(|c| c.verb),
            Some("applied")
        );
    }

    #[tokio::test]
    async fn a_stream_counts_as_listed_once_and_a_refusal_only_where_it_may() {
        let (ready, rx) = tokio::sync::watch::channel(0usize);
        let forbidden: Result<Event<()>, _> = Err(watcher::Error::WatchError(
            kube::core::Status::failure("no", "Forbidden")
                .with_code(403)
                .boxed(),
        ));
        let mut secret = Readiness {
            ready: ready.clone(),
            refusal_counts: true,
            counted: false,
        };
        let mut other = Readiness {
            ready,
            refusal_counts: false,
            counted: false,
        };
        other.observe(&forbidden);
        assert_eq!(*rx.borrow(), 0);
        secret.observe(&forbidden);
        secret.observe(&Ok(Event::<()>::InitDone));
        assert_eq!(*rx.borrow(), 1);
        other.observe(&Ok(Event::<()>::InitDone));
        other.observe(&Ok(Event::<()>::InitDone));
        assert_eq!(*rx.borrow(), 2);
    }
}
