//! Reflector caches: watched, metadata-trimmed in-memory copies of the kinds Observe reads on
//! every call (Services, EndpointSlices, the workload kinds and sibling Pactos), cluster-wide or
//! in `--watch-namespace`. ConfigMaps and Secret metadata are not cached: least privilege keeps
//! them direct GETs by name (operator.md §8).
//!
//! A cache that has not completed its initial list is never read as "absent": lookups wait for
//! it (bounded by [`SYNC_TIMEOUT`]) and otherwise fail like an API query, so the observation is
//! an honest unknown.

use std::time::Duration;

use futures::StreamExt;
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

use crate::fetch::SERVICE_NAME_LABEL;
use crate::verdict::ApiFailure;
use crate::watch::{WatchRetry, watch_error_is_forbidden};
use crate::workload::WorkloadObject;

/// How long a lookup waits for a cache's initial list before failing.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// The annotation `kubectl apply` stores (a full copy of the object): never cached.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The observer's reflector stores.
#[derive(Clone)]
pub struct Caches {
    namespace: Option<String>,
    services: Store<Service>,
    endpoint_slices: Store<EndpointSlice>,
    deployments: Store<Deployment>,
    stateful_sets: Store<StatefulSet>,
    replica_sets: Store<ReplicaSet>,
    jobs: Store<Job>,
    cron_jobs: Store<CronJob>,
    pactos: Store<Pacto>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("namespace", &self.namespace)
            .field("services", &self.services.len())
            .field("endpoint_slices", &self.endpoint_slices.len())
            .field("pactos", &self.pactos.len())
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

/// Starts a reflector of `K` that applies `trim` to every object, retries with backoff and
/// keeps the `kind` gauge of [`crate::metrics::CACHE_OBJECTS`] up to date.
fn spawn_store<K>(
    api: Api<K>,
    kind: &'static str,
    trim: fn(&mut K),
    shutdown: &CancellationToken,
) -> Store<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let stream = reflect(
        writer,
        watcher::watcher(api, watcher::Config::default()).modify(trim),
    );
    let store = reader.clone();
    let shutdown = shutdown.clone();
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
                    #[allow(
                        clippy::cast_precision_loss,
                        reason = "a gauge of object counts, far below 2^52"
                    )]
                    metrics::gauge!(crate::metrics::CACHE_OBJECTS, "kind" => kind)
                        .set(store.len() as f64);
                }
                Some(Err(error)) => {
                    let delay = retry.failed(&error, watch_error_is_forbidden(&error));
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    });
    reader
}

/// Waits (bounded) for `store`'s initial list.
async fn synced<K>(store: &Store<K>, kind: &str) -> Result<(), ApiFailure>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    match tokio::time::timeout(SYNC_TIMEOUT, store.wait_until_ready()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(ApiFailure::new(format!("{kind} cache: its watch stopped"))),
        Err(_) => Err(ApiFailure::new(format!(
            "{kind} cache: the initial list did not complete within {SYNC_TIMEOUT:?}"
        ))),
    }
}

fn cloned<K: Clone>(object: Option<std::sync::Arc<K>>) -> Option<K> {
    object.map(|o| K::clone(&o))
}

impl Caches {
    /// Starts the reflectors (cluster-wide, or in `namespace`); they stop at `shutdown`.
    pub fn spawn(client: &Client, namespace: Option<&str>, shutdown: &CancellationToken) -> Self {
        Self {
            namespace: namespace.map(str::to_owned),
            services: spawn_store(api(client, namespace), "Service", trim_metadata, shutdown),
            endpoint_slices: spawn_store(
                api(client, namespace),
                "EndpointSlice",
                trim_annotations,
                shutdown,
            ),
            deployments: spawn_store(
                api(client, namespace),
                "Deployment",
                trim_annotations,
                shutdown,
            ),
            stateful_sets: spawn_store(
                api(client, namespace),
                "StatefulSet",
                trim_annotations,
                shutdown,
            ),
            replica_sets: spawn_store(
                api(client, namespace),
                "ReplicaSet",
                trim_annotations,
                shutdown,
            ),
            jobs: spawn_store(api(client, namespace), "Job", trim_annotations, shutdown),
            cron_jobs: spawn_store(
                api(client, namespace),
                "CronJob",
                trim_annotations,
                shutdown,
            ),
            pactos: spawn_store(api(client, namespace), "Pacto", trim_metadata, shutdown),
        }
    }

    /// Whether `namespace` is inside the cached scope.
    pub fn covers(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == namespace)
    }

    /// Waits until every store has completed its initial list (`false` if a watch stopped).
    pub async fn wait_ready(&self) -> bool {
        self.services.wait_until_ready().await.is_ok()
            && self.endpoint_slices.wait_until_ready().await.is_ok()
            && self.deployments.wait_until_ready().await.is_ok()
            && self.stateful_sets.wait_until_ready().await.is_ok()
            && self.replica_sets.wait_until_ready().await.is_ok()
            && self.jobs.wait_until_ready().await.is_ok()
            && self.cron_jobs.wait_until_ready().await.is_ok()
            && self.pactos.wait_until_ready().await.is_ok()
    }

    /// A cached Service.
    pub async fn service(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Service>, ApiFailure> {
        synced(&self.services, "services").await?;
        Ok(cloned(
            self.services.get(&ObjectRef::new(name).within(namespace)),
        ))
    }

    /// The cached EndpointSlices of a Service (by the `kubernetes.io/service-name` label).
    pub async fn endpoint_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<EndpointSlice>, ApiFailure> {
        synced(&self.endpoint_slices, "endpointslices").await?;
        Ok(self
            .endpoint_slices
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
            ($store:expr, $what:literal) => {{
                synced(&$store, $what).await?;
                cloned($store.get(&ObjectRef::new(name).within(namespace)))
                    .map(WorkloadObject::from)
            }};
        }
        Ok(match kind {
            WorkloadKind::Deployment => lookup!(self.deployments, "deployments"),
            WorkloadKind::StatefulSet => lookup!(self.stateful_sets, "statefulsets"),
            WorkloadKind::ReplicaSet => lookup!(self.replica_sets, "replicasets"),
            WorkloadKind::Job => lookup!(self.jobs, "jobs"),
            WorkloadKind::CronJob => lookup!(self.cron_jobs, "cronjobs"),
        })
    }

    /// Every cached Pacto.
    pub async fn pactos(&self) -> Result<Vec<Pacto>, ApiFailure> {
        synced(&self.pactos, "pactos").await?;
        Ok(self
            .pactos
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
