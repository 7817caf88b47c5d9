//! The watch streams: one per kind the observer reads or reacts to, cluster-wide or in
//! `--watch-namespace`, each into its indexes (`pacto_runtime::index`). Each stream of a cached
//! kind (Services, EndpointSlices, the workload kinds, Pactos) feeds both its reflector cache
//! ([`crate::cache`]) and the WatchTargets hub ([`crate::targets`]); ConfigMaps and Secrets are watched as metadata only (Secret values and
//! ConfigMap data never sit in memory), for the hub alone. Every stream retries with the shared
//! backoff policy ([`pacto_runtime::watch`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Client, Resource};
use pacto_api::{Pacto, WorkloadKind};
use pacto_runtime::Tasks;
use pacto_runtime::index::{Index, run_index};
use pacto_runtime::watch::{WatchRetry, watch};

use crate::cache::{CacheFeed, Caches};
use crate::k8s::{SECRET_FORBIDDEN_HINT, api, watch_error_is_forbidden};
pub use crate::targets::{
    COALESCE, DependencyEdges, ObjectChange, PactoKey, PactoRefs, TargetChange, TargetHub,
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
/// its first refusal by RBAC; the last of the stream's indexes, after those that keep objects.
struct Readiness {
    ready: tokio::sync::watch::Sender<usize>,
    refusal_counts: bool,
    counted: bool,
}

impl Readiness {
    fn count(&mut self) {
        if !self.counted {
            self.counted = true;
            self.ready.send_modify(|n| *n += 1);
        }
    }
}

impl<K> Index<K> for Readiness {
    fn apply(&mut self, _: K) {}

    fn delete(&mut self, _: K) {}

    fn reset(&mut self, _: Vec<K>) {
        self.count();
    }

    fn failed(&mut self, error: &watcher::Error) {
        if self.refusal_counts && watch_error_is_forbidden(error) {
            self.count();
        }
    }
}

/// A change of a watched object for the hub.
fn object_change<K: Resource>(kind: WatchedKind, object: &K, verb: &'static str) -> ObjectChange {
    let meta = object.meta();
    ObjectChange {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        verb,
    }
}

/// The hub as an index of one watched kind: applied and deleted objects are changes.
///
/// With `seen` (the cached kinds, whose objects are whole), an applied object whose
/// [`fingerprint`] is the one last seen is no change: a write that altered nothing the observer
/// keeps (a status heartbeat of a field it trims, a Service label copied onto its slices) wakes
/// nobody. A relist after the first compares the listing with what was seen: objects new or
/// changed are applied, objects gone are deleted, so a watch that broke misses nothing
/// (docs/design/observation.md#change-notifications). Without `seen` (the metadata-only kinds,
/// where a data change shows only as a new resourceVersion) every event is a change and a list
/// is none.
struct HubFeed {
    hub: TargetHub,
    kind: WatchedKind,
    seen: Option<Seen>,
}

/// What a [`HubFeed`] last saw of each object: its fingerprint, and for EndpointSlices their
/// labels (a slice that is gone is mapped to its Service by its label; no other kind is mapped
/// by labels, see [`affected`], so theirs are not kept).
#[derive(Default)]
struct Seen {
    listed: bool,
    objects: HashMap<(String, String), (u64, BTreeMap<String, String>)>,
}

impl HubFeed {
    /// A feed of a cached kind: it compares fingerprints.
    fn cached(hub: TargetHub, kind: WatchedKind) -> Self {
        Self {
            hub,
            kind,
            seen: Some(Seen::default()),
        }
    }

    /// A feed of a metadata-only kind: every event is a change.
    fn metadata(hub: TargetHub, kind: WatchedKind) -> Self {
        Self {
            hub,
            kind,
            seen: None,
        }
    }
}

/// The labels [`Seen`] keeps of `change`'s object: an EndpointSlice's, else none.
fn kept_labels(kind: WatchedKind, change: &ObjectChange) -> BTreeMap<String, String> {
    if kind == WatchedKind::EndpointSlice {
        change.labels.clone()
    } else {
        BTreeMap::new()
    }
}

/// The namespace and name of `object`.
fn object_key<K: Resource>(object: &K) -> (String, String) {
    let meta = object.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// A hash of `object` as the observer keeps it (already trimmed), without the resourceVersion
/// every write bumps and the generation: a change of what the generation counts shows in the
/// object itself, unless it is a part the cache trims (an EndpointSlice's generation counts its
/// label changes too). `None` if it does not serialize (it then always counts as changed). Two
/// different objects share a fingerprint with a probability of about 2⁻⁶⁴.
fn fingerprint<K: Resource + serde::Serialize>(object: &mut K) -> Option<u64> {
    /// Feeds the serializer's bytes to the hasher, without a buffer.
    struct Hashing(std::collections::hash_map::DefaultHasher);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let meta = object.meta_mut();
    let (version, generation) = (meta.resource_version.take(), meta.generation.take());
    let mut hashing = Hashing(std::collections::hash_map::DefaultHasher::new());
    let written = serde_json::to_writer(&mut hashing, &*object);
    let meta = object.meta_mut();
    (meta.resource_version, meta.generation) = (version, generation);
    written.ok().map(|()| hashing.0.finish())
}

impl<K: Resource + serde::Serialize> Index<K> for HubFeed {
    fn apply(&mut self, mut object: K) {
        let change = object_change(self.kind, &object, "applied");
        if let Some(seen) = self.seen.as_mut() {
            let key = object_key(&object);
            match fingerprint(&mut object) {
                Some(print) => {
                    let last = seen
                        .objects
                        .insert(key, (print, kept_labels(self.kind, &change)));
                    if last.is_some_and(|(before, _)| before == print) {
                        return;
                    }
                }
                None => {
                    seen.objects.remove(&key);
                }
            }
        }
        self.hub.object_changed(&change);
    }

    fn delete(&mut self, object: K) {
        if let Some(seen) = self.seen.as_mut() {
            seen.objects.remove(&object_key(&object));
        }
        self.hub
            .object_changed(&object_change(self.kind, &object, "deleted"));
    }

    fn reset(&mut self, listing: Vec<K>) {
        let Some(seen) = self.seen.as_mut() else {
            return;
        };
        let first = !std::mem::replace(&mut seen.listed, true);
        let mut before = std::mem::take(&mut seen.objects);
        let mut changes = Vec::new();
        for mut object in listing {
            let key = object_key(&object);
            let change = object_change(self.kind, &object, "applied");
            let print = fingerprint(&mut object);
            let last = before.remove(&key).map(|(print, _)| print);
            if !first && (print.is_none() || last != print) {
                changes.push(change.clone());
            }
            if let Some(print) = print {
                seen.objects
                    .insert(key, (print, kept_labels(self.kind, &change)));
            }
        }
        if !first {
            for ((namespace, name), (_, labels)) in before {
                changes.push(ObjectChange {
                    kind: self.kind,
                    namespace,
                    name,
                    labels,
                    verb: "deleted",
                });
            }
        }
        for change in &changes {
            self.hub.object_changed(change);
        }
    }
}

/// The hub's index of the objects of `kind`.
fn to_hub<K: Resource + serde::Serialize>(
    kind: WatchedKind,
) -> impl FnOnce(TargetHub) -> Box<dyn Index<K> + Send> {
    move |hub| Box::new(HubFeed::cached(hub, kind))
}

/// The hub as the index of the Pactos (listed ones included): it learns what each references.
struct HubPactos(TargetHub);

impl Index<Pacto> for HubPactos {
    fn apply(&mut self, pacto: Pacto) {
        self.0.pacto_applied(&pacto);
    }

    fn delete(&mut self, pacto: Pacto) {
        self.0.pacto_deleted(&pacto);
    }

    fn reset(&mut self, listing: Vec<Pacto>) {
        for pacto in &listing {
            self.0.pacto_applied(pacto);
        }
    }
}

/// Starts the streams of one [`spawn`] call.
struct Streams<'a> {
    client: &'a Client,
    namespace: Option<&'a str>,
    hub: Option<&'a TargetHub>,
    tasks: Tasks,
    ready: tokio::sync::watch::Sender<usize>,
    total: usize,
}

/// The indexes one stream feeds, in order.
type Indexes<K> = Vec<Box<dyn Index<K> + Send>>;

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
    /// object trimmed with `trim`, into `indexes`, retried with [`retry`], stopped at shutdown.
    fn start<K>(&self, kind: &'static str, trim: fn(&mut K), indexes: Indexes<K>)
    where
        K: Watchable + serde::de::DeserializeOwned,
    {
        crate::metrics::watch_stream_started(kind);
        let stream = watch(
            api::<K>(self.client, self.namespace),
            watcher::Config::default(),
        )
        .retry(retry(kind))
        .modify(trim);
        // A runtime task (when `tasks` is the runtime's), joined by its drain.
        let shutdown = self.tasks.shutdown();
        self.tasks.spawn(kind, run_index(stream, indexes, shutdown));
    }

    /// The stream of a cached kind: it fills `cache`, then (with a hub) tells the hub through
    /// `to_hub`.
    fn cached<K>(
        &mut self,
        cache: CacheFeed<K>,
        to_hub: impl FnOnce(TargetHub) -> Box<dyn Index<K> + Send>,
    ) where
        K: Watchable + serde::de::DeserializeOwned,
    {
        let (kind, trim) = (cache.kind(), cache.trim());
        let mut indexes: Indexes<K> = vec![Box::new(cache)];
        if let Some(hub) = self.hub.cloned() {
            indexes.push(to_hub(hub));
        }
        indexes.push(Box::new(self.listed(false)));
        self.start(kind, trim, indexes);
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
        let listed = self.listed(kind == WatchedKind::Secret);
        let indexes: Indexes<PartialObjectMeta<K>> =
            vec![Box::new(HubFeed::metadata(hub, kind)), Box::new(listed)];
        self.start::<PartialObjectMeta<K>>(kind.as_str(), |_| {}, indexes);
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

/// Starts one watch stream per kind (cluster-wide, or in `namespace`), each a task of `tasks`
/// (the runtime's, [`pacto_runtime::Runtime::tasks`]; a bare token in tests) named after its
/// kind, stopped at its shutdown:
/// the cached kinds fill the returned [`Caches`] and, with a `hub`, feed it; with a `hub`,
/// ConfigMaps and (when `kinds.secrets`) Secrets are watched (metadata only) for it too.
/// [`WatchersReady::wait`] returns once every stream has completed its initial list.
pub fn spawn(
    client: &Client,
    namespace: Option<&str>,
    hub: Option<&TargetHub>,
    kinds: Kinds,
    tasks: impl Into<Tasks>,
) -> Watchers {
    let (caches, feeds) = Caches::new(namespace);
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(0usize);
    let mut streams = Streams {
        client,
        namespace,
        hub,
        tasks: tasks.into(),
        ready: ready_tx,
        total: 0,
    };
    streams.cached(feeds.pactos, |hub| Box::new(HubPactos(hub)));
    streams.cached(feeds.services, to_hub(WatchedKind::Service));
    streams.cached(feeds.endpoint_slices, to_hub(WatchedKind::EndpointSlice));
    streams.cached(
        feeds.deployments,
        to_hub(WatchedKind::Workload(WorkloadKind::Deployment)),
    );
    streams.cached(
        feeds.stateful_sets,
        to_hub(WatchedKind::Workload(WorkloadKind::StatefulSet)),
    );
    streams.cached(
        feeds.replica_sets,
        to_hub(WatchedKind::Workload(WorkloadKind::ReplicaSet)),
    );
    streams.cached(feeds.jobs, to_hub(WatchedKind::Workload(WorkloadKind::Job)));
    streams.cached(
        feeds.cron_jobs,
        to_hub(WatchedKind::Workload(WorkloadKind::CronJob)),
    );
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
    tasks: impl Into<Tasks>,
) -> WatchersReady {
    spawn(client, namespace, Some(hub), Kinds::ALL, tasks).ready
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::k8s::SERVICE_NAME_LABEL;

    fn slice(name: &str) -> EndpointSlice {
        slice_of(name, "orders")
    }

    /// The slice `name` in namespace `a` of the Service `service`.
    fn slice_of(name: &str, service: &str) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some("a".into()),
                name: Some(name.into()),
                labels: Some([(SERVICE_NAME_LABEL.to_owned(), service.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..EndpointSlice::default()
        }
    }

    #[test]
    fn a_change_names_the_object_its_labels_and_the_verb() {
        let change = object_change(WatchedKind::EndpointSlice, &slice("x"), "deleted");
        assert_eq!(
            (change.namespace.as_str(), change.name.as_str(), change.verb),
            ("a", "x", "deleted")
        );
        assert_eq!(
            change.labels.get(SERVICE_NAME_LABEL).map(String::as_str),
            Some("orders")
        );
    }

    /// A hub fed an EndpointSlice stream (a cached kind): the first list wakes nobody; a
    /// rewrite that changed nothing kept (a new resourceVersion, a copied Service label trimmed
    /// away) wakes nobody; a change does, at once (the batch's leading send); a relist wakes the
    /// Pactos of the slices that changed or went while the watch was down, and no other.
    #[tokio::test]
    async fn the_hub_hears_changes_not_rewrites_and_a_relist_only_what_it_missed() {
        use futures::StreamExt;
        use k8s_openapi::api::discovery::v1::Endpoint;
        let hub = TargetHub::new();
        for name in ["x", "y", "z"] {
            hub.pacto_applied(
                &pacto_api::testing::PactoBuilder::inline(&format!("p{name}"), "x")
                    .namespace("a")
                    .service(&format!("s{name}"))
                    .build(),
            );
        }
        let mut changes =
            Box::pin(hub.subscribe(String::new(), pacto_runtime::CancellationToken::new()));
        let mut feed = HubFeed::cached(hub.clone(), WatchedKind::EndpointSlice);
        let slice = |name: &str, address: Option<&str>| EndpointSlice {
            endpoints: address.map(|a| {
                vec![Endpoint {
                    addresses: vec![a.to_owned()],
                    ..Endpoint::default()
                }]
            }),
            ..slice_of(name, &format!("s{name}"))
        };
        feed.reset(vec![slice("x", None), slice("y", None), slice("z", None)]);
        let mut rewritten = slice("x", None);
        rewritten.metadata.resource_version = Some("2".into());
        rewritten.metadata.generation = Some(2);
        feed.apply(rewritten);
        feed.apply(slice("y", Some("10.0.0.1")));
        let batch = changes.next().await.unwrap();
        assert_eq!(
            batch,
            vec![TargetChange {
                pacto: ("a".into(), "py".into()),
                reason: "EndpointSlice a/y applied".into()
            }]
        );

        // The watch broke; meanwhile x changed and z went; y is as last seen.
        feed.reset(vec![
            slice("x", Some("10.0.0.2")),
            slice("y", Some("10.0.0.1")),
        ]);
        let batch = changes.next().await.unwrap();
        assert_eq!(
            batch,
            vec![
                TargetChange {
                    pacto: ("a".into(), "px".into()),
                    reason: "EndpointSlice a/x applied".into()
                },
                TargetChange {
                    pacto: ("a".into(), "pz".into()),
                    reason: "EndpointSlice a/z deleted".into()
                },
            ]
        );
        feed.delete(slice("y", Some("10.0.0.1")));
        let batch = changes.next().await.unwrap();
        assert_eq!(batch[0].reason, "EndpointSlice a/y deleted");
    }

    #[tokio::test]
    async fn a_stream_counts_as_listed_once_and_a_refusal_only_where_it_may() {
        let (ready, rx) = tokio::sync::watch::channel(0usize);
        let forbidden = watcher::Error::WatchError(
            kube::core::Status::failure("no", "Forbidden")
                .with_code(403)
                .boxed(),
        );
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
        Index::<()>::failed(&mut other, &forbidden);
        assert_eq!(*rx.borrow(), 0);
        Index::<()>::failed(&mut secret, &forbidden);
        Index::<()>::reset(&mut secret, vec![]);
        assert_eq!(*rx.borrow(), 1);
        Index::<()>::reset(&mut other, vec![]);
        Index::<()>::reset(&mut other, vec![]);
        assert_eq!(*rx.borrow(), 2);
    }
}
