//! Reflector caches: watched, metadata-trimmed in-memory copies of the kinds Observe reads on
//! every call (Services, EndpointSlices, the workload kinds and sibling Pactos), cluster-wide or
//! in `--watch-namespace`. ConfigMaps and Secret metadata are not cached: least privilege keeps
//! them direct GETs by name (operator.md §8).
//!
//! A cache that has not completed its initial list is never read as "absent": lookups wait for
//! it (bounded by [`SYNC_TIMEOUT`]) and otherwise fail like an API query, so the observation is
//! an honest unknown. A cache whose list the API server refuses (RBAC: the Role lacks the kind)
//! fails lookups at once with the API server's answer, and counts as settled for readiness: the
//! observer serves, and observations read `RuntimeObserved=False/ObservationFailed` naming the
//! refused query (troubleshooting guide, "Operator RBAC errors"), instead of the observer never
//! becoming ready.

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector as reflect};
use kube::{Api, Client, Resource, ResourceExt};
use pacto_api::{Pacto, WorkloadKind};
use pacto_runtime::CancellationToken;

use crate::fetch::{SERVICE_NAME_LABEL, error_text};
use crate::verdict::ApiFailure;
use crate::watch::{WatchRetry, watch_error_is_forbidden};
use crate::workload::WorkloadObject;

/// How long a lookup waits for a cache's initial list before failing.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// The annotation `kubectl apply` stores (a full copy of the object): never cached.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Why a cache's watch is failing: the API server's answer, and whether it was a refusal for
/// lack of RBAC rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchFailure {
    /// The error as the API server wrote it (see [`crate::fetch::error_text`]).
    pub message: String,
    /// HTTP 403.
    pub forbidden: bool,
}

/// The text of a watch error: the API server's own answer where there is one.
fn watch_error_text(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => error_text(e),
        watcher::Error::WatchError(status) => status.to_string(),
        watcher::Error::NoResourceVersion => error.to_string(),
    }
}

/// One reflector store and the state of its watch (`Some` while it is failing).
#[derive(Clone)]
pub struct Cached<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store: Store<K>,
    failure: tokio::sync::watch::Receiver<Option<WatchFailure>>,
    /// What a lookup names: `list <plural> <namespace>` (or `(all namespaces)`).
    query: String,
}

/// The observer's reflector stores.
#[derive(Clone)]
pub struct Caches {
    namespace: Option<String>,
    services: Cached<Service>,
    endpoint_slices: Cached<EndpointSlice>,
    deployments: Cached<Deployment>,
    stateful_sets: Cached<StatefulSet>,
    replica_sets: Cached<ReplicaSet>,
    jobs: Cached<Job>,
    cron_jobs: Cached<CronJob>,
    pactos: Cached<Pacto>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("namespace", &self.namespace)
            .field("services", &self.services.store.len())
            .field("endpoint_slices", &self.endpoint_slices.store.len())
            .field("pactos", &self.pactos.store.len())
            .finish_non_exhaustive()
    }
}

/// Drops what Observe never reads: managed fields and the last-applied copy.
fn trim_metadata<K: Resource>(object: &mut K) {
    object.managed_fields_mut().clear();
    object.annotations_mut().remove(LAST_APPLIED);
}

/// As [`trim_metadata`], and every annotation (only Service annotations are read, for
/// Prometheus discovery).
fn trim_annotations<K: Resource>(object: &mut K) {
    object.managed_fields_mut().clear();
    object.annotations_mut().clear();
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Starts a reflector of `K` that applies `trim` to every object, retries with backoff, keeps
/// the `kind` gauge of [`crate::metrics::CACHE_OBJECTS`] up to date and publishes the state of
/// its watch; `query` names it in lookup failures.
fn spawn_store<K>(
    api: Api<K>,
    kind: &'static str,
    query: String,
    trim: fn(&mut K),
    shutdown: &CancellationToken,
) -> Cached<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    crate::metrics::watch_stream_started();
    let stream = reflect(
        writer,
        watcher::watcher(api, watcher::Config::default()).modify(trim),
    );
    let store = reader.clone();
    let shutdown = shutdown.clone();
    let (failure_tx, failure) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut retry = WatchRetry::new(kind);
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            match event {
                None => return,
                Some(Ok(Event::Init | Event::InitApply(_))) => {}
                Some(Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_))) => {
                    retry.succeeded();
                    failure_tx.send_if_modified(|f| f.take().is_some());
                    #[allow(
                        clippy::cast_precision_loss,
                        reason = "a gauge of object counts, far below 2^52"
                    )]
                    metrics::gauge!(crate::metrics::CACHE_OBJECTS, "kind" => kind)
                        .set(store.len() as f64);
                }
                Some(Err(error)) => {
                    let forbidden = watch_error_is_forbidden(&error);
                    let delay = retry.failed(&error, forbidden);
                    failure_tx.send_replace(Some(WatchFailure {
                        message: watch_error_text(&error),
                        forbidden,
                    }));
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    });
    Cached {
        store: reader,
        failure,
        query,
    }
}

impl<K> Cached<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// Whether the initial list completed.
    fn listed(&self) -> bool {
        matches!(self.store.wait_until_ready().now_or_never(), Some(Ok(())))
    }

    /// The current refusal of the watch, if the API server refuses it for lack of rights.
    fn refusal(&self) -> Option<WatchFailure> {
        self.failure.borrow().clone().filter(|f| f.forbidden)
    }

    /// Waits (bounded) for the initial list. A watch the API server refuses fails at once with
    /// its answer; a list that does not complete in time fails naming the last watch error.
    async fn synced(&self) -> Result<(), ApiFailure> {
        if self.listed() {
            return Ok(());
        }
        if let Some(refusal) = self.refusal() {
            return Err(ApiFailure::new(format!(
                "{}: {}",
                self.query, refusal.message
            )));
        }
        match tokio::time::timeout(SYNC_TIMEOUT, self.store.wait_until_ready()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ApiFailure::new(format!(
                "{}: the cache's watch stopped",
                self.query
            ))),
            Err(_) => Err(ApiFailure::new(match self.failure.borrow().as_ref() {
                Some(failure) => format!("{}: {}", self.query, failure.message),
                None => format!(
                    "{}: the initial list did not complete within {SYNC_TIMEOUT:?}",
                    self.query
                ),
            })),
        }
    }

    /// Waits until the initial list completed (`true`) or the API server refuses the watch
    /// (`true`: lookups then fail with the refusal); `false` if the watch stopped.
    async fn settled(&self) -> bool {
        let mut failure = self.failure.clone();
        tokio::select! {
            listed = self.store.wait_until_ready() => listed.is_ok(),
            refused = failure.wait_for(|f| f.as_ref().is_some_and(|f| f.forbidden)) => {
                refused.is_ok()
            }
        }
    }
}

fn cloned<K: Clone>(object: Option<std::sync::Arc<K>>) -> Option<K> {
    object.map(|o| K::clone(&o))
}

impl Caches {
    /// Starts the reflectors (cluster-wide, or in `namespace`); they stop at `shutdown`.
    pub fn spawn(client: &Client, namespace: Option<&str>, shutdown: &CancellationToken) -> Self {
        let query = |plural: &str| match namespace {
            Some(ns) => format!("list {plural} {ns}"),
            None => format!("list {plural} (all namespaces)"),
        };
        Self {
            namespace: namespace.map(str::to_owned),
            services: spawn_store(
                api(client, namespace),
                "Service",
                query("services"),
                trim_metadata,
                shutdown,
            ),
            endpoint_slices: spawn_store(
                api(client, namespace),
                "EndpointSlice",
                query("endpointslices"),
                trim_annotations,
                shutdown,
            ),
            deployments: spawn_store(
                api(client, namespace),
                "Deployment",
                query("deployments"),
                trim_annotations,
                shutdown,
            ),
            stateful_sets: spawn_store(
                api(client, namespace),
                "StatefulSet",
                query("statefulsets"),
                trim_annotations,
                shutdown,
            ),
            replica_sets: spawn_store(
                api(client, namespace),
                "ReplicaSet",
                query("replicasets"),
                trim_annotations,
                shutdown,
            ),
            jobs: spawn_store(
                api(client, namespace),
                "Job",
                query("jobs"),
                trim_annotations,
                shutdown,
            ),
            cron_jobs: spawn_store(
                api(client, namespace),
                "CronJob",
                query("cronjobs"),
                trim_annotations,
                shutdown,
            ),
            pactos: spawn_store(
                api(client, namespace),
                "Pacto",
                query("pactos"),
                trim_metadata,
                shutdown,
            ),
        }
    }

    /// Whether `namespace` is inside the cached scope.
    pub fn covers(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == namespace)
    }

    /// Waits until every store has completed its initial list or is refused by the API server
    /// (`false` if a watch stopped).
    pub async fn wait_ready(&self) -> bool {
        self.services.settled().await
            && self.endpoint_slices.settled().await
            && self.deployments.settled().await
            && self.stateful_sets.settled().await
            && self.replica_sets.settled().await
            && self.jobs.settled().await
            && self.cron_jobs.settled().await
            && self.pactos.settled().await
    }

    /// A cached Service.
    pub async fn service(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Service>, ApiFailure> {
        self.services.synced().await?;
        Ok(cloned(
            self.services
                .store
                .get(&ObjectRef::new(name).within(namespace)),
        ))
    }

    /// The cached EndpointSlices of a Service (by the `kubernetes.io/service-name` label).
    pub async fn endpoint_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<EndpointSlice>, ApiFailure> {
        self.endpoint_slices.synced().await?;
        Ok(self
            .endpoint_slices
            .store
            .state_filter(|s| {
                s.metadata.namespace.as_deref() == Some(namespace)
                    && s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(service)
            })
            .into_iter()
            .map(|s| EndpointSlice::clone(&s))
            .collect())
    }

    /// A cached workload of any supported kind.
    pub async fn workload(
        &self,
        namespace: &str,
        name: &str,
        kind: WorkloadKind,
    ) -> Result<Option<WorkloadObject>, ApiFailure> {
        macro_rules! lookup {
            ($cached:expr) => {{
                $cached.synced().await?;
                cloned($cached.store.get(&ObjectRef::new(name).within(namespace)))
                    .map(WorkloadObject::from)
            }};
        }
        Ok(match kind {
            WorkloadKind::Deployment => lookup!(self.deployments),
            WorkloadKind::StatefulSet => lookup!(self.stateful_sets),
            WorkloadKind::ReplicaSet => lookup!(self.replica_sets),
            WorkloadKind::Job => lookup!(self.jobs),
            WorkloadKind::CronJob => lookup!(self.cron_jobs),
        })
    }

    /// Every cached Pacto.
    pub async fn pactos(&self) -> Result<Vec<Pacto>, ApiFailure> {
        self.pactos.synced().await?;
        Ok(self
            .pactos
            .store
            .state()
            .into_iter()
            .map(|p| Pacto::clone(&p))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::ObjectMeta;

    use super::*;

    fn cached() -> (
        Cached<EndpointSlice>,
        reflector::store::Writer<EndpointSlice>,
        tokio::sync::watch::Sender<Option<WatchFailure>>,
    ) {
        let (store, writer) = reflector::store();
        let (failure_tx, failure) = tokio::sync::watch::channel(None);
        let cached = Cached {
            store,
            failure,
            query: "list endpointslices team".to_owned(),
        };
        (cached, writer, failure_tx)
    }

    #[tokio::test]
    async fn a_refused_list_fails_lookups_at_once_and_counts_as_settled() {
        let (cached, _writer, failure_tx) = cached();
        // A transient error is not a refusal: readiness keeps waiting for the list.
        failure_tx.send_replace(Some(WatchFailure {
            message: "connection refused".to_owned(),
            forbidden: false,
        }));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), cached.settled())
                .await
                .is_err()
        );
        let refusal = "endpointslices.discovery.k8s.io is forbidden: User \"obs\" cannot list resource \"endpointslices\": Forbidden";
        failure_tx.send_replace(Some(WatchFailure {
            message: refusal.to_owned(),
            forbidden: true,
        }));
        assert!(cached.settled().await);
        let started = std::time::Instant::now();
        let failure = cached.synced().await.unwrap_err();
        assert!(started.elapsed() < SYNC_TIMEOUT);
        assert_eq!(
            failure.message,
            format!("list endpointslices team: {refusal}")
        );
    }

    #[tokio::test]
    async fn a_listed_cache_is_read_even_after_a_later_watch_error() {
        let (cached, mut writer, failure_tx) = cached();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        failure_tx.send_replace(Some(WatchFailure {
            message: "forbidden".to_owned(),
            forbidden: true,
        }));
        assert!(cached.settled().await);
        assert!(cached.synced().await.is_ok());
    }

    #[test]
    fn watch_errors_read_as_the_api_server_wrote_them() {
        let status =
            kube::core::Status::failure("endpointslices is forbidden", "Forbidden").with_code(403);
        let error = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        assert_eq!(
            watch_error_text(&error),
            "endpointslices is forbidden: Forbidden"
        );
    }

    #[test]
    fn trimming_drops_managed_fields_and_the_last_applied_copy() {
        let meta = || ObjectMeta {
            name: Some("web".into()),
            annotations: Some(BTreeMap::from([
                (LAST_APPLIED.to_owned(), "{…}".to_owned()),
                ("prometheus.io/scrape".to_owned(), "true".to_owned()),
            ])),
            managed_fields: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry::default(),
            ]),
            ..ObjectMeta::default()
        };
        let mut service = Service {
            metadata: meta(),
            ..Service::default()
        };
        trim_metadata(&mut service);
        assert!(
            service
                .metadata
                .managed_fields
                .unwrap_or_default()
                .is_empty()
        );
        assert_eq!(
            service.metadata.annotations,
            Some(BTreeMap::from([(
                "prometheus.io/scrape".to_owned(),
                "true".to_owned()
            )])),
            "Service annotations are read for Prometheus discovery"
        );
        let mut deployment = Deployment {
            metadata: meta(),
            ..Deployment::default()
        };
        trim_annotations(&mut deployment);
        assert!(
            deployment
                .metadata
                .managed_fields
                .unwrap_or_default()
                .is_empty()
        );
        assert!(
            deployment
                .metadata
                .annotations
                .unwrap_or_default()
                .is_empty()
        );
        assert_eq!(deployment.metadata.name.as_deref(), Some("web"));
    }
}
