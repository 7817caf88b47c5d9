//! Reflector caches: watched, metadata-trimmed in-memory copies of the kinds Observe reads on
//! every call (Services, EndpointSlices, the workload kinds and sibling Pactos), cluster-wide or
//! in `--watch-namespace`. ConfigMaps and Secret metadata are not cached: least privilege keeps
//! them direct GETs by name (docs/design/observation.md#caches-and-least-privilege).
//!
//! A cache that has not completed its initial list is never read as "absent": lookups wait for
//! it (bounded by [`SYNC_TIMEOUT`]) and otherwise fail like an API query, so the observation is
//! an honest unknown. A cache whose list the API server refuses (RBAC: the Role lacks the kind)
//! fails lookups at once with the API server's answer, and counts as settled for readiness: the
//! observer serves, and observations read `RuntimeObserved=False/ObservationFailed` naming the
//! refused query (troubleshooting guide, "Operator RBAC errors"), instead of the observer never
//! becoming ready.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use pacto_api::{ContractRef, Pacto, PactoStatus, WorkloadKind};

use pacto_runtime::index::Index;

use crate::index::KeyIndex;
use crate::k8s::{
    MANAGED_BY_LABEL, SERVICE_NAME_LABEL, watch_error_is_forbidden, watch_error_text,
};
use crate::verdict::ApiFailure;
use crate::workload::WorkloadObject;

/// How long a lookup waits for a cache's initial list before failing.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

/// The annotation `kubectl apply` stores (a full copy of the object): never cached.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Why a cache's watch is failing: the API server's answer, and whether it was a refusal for
/// lack of RBAC rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchFailure {
    /// The error as the API server wrote it (see [`crate::k8s::error_text`]).
    pub message: String,
    /// HTTP 403.
    pub forbidden: bool,
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
    /// The cached EndpointSlices by their Service (docs/design/observation.md#indexed-lookups).
    slices_by_service: Arc<KeyIndex<EndpointSlice>>,
    deployments: Cached<Deployment>,
    stateful_sets: Cached<StatefulSet>,
    replica_sets: Cached<ReplicaSet>,
    jobs: Cached<Job>,
    cron_jobs: Cached<CronJob>,
    pactos: Cached<Pacto>,
}

/// The Service an EndpointSlice belongs to: its `kubernetes.io/service-name` label.
fn service_of(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)
        .map(String::as_str)
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

/// Drops what Observe never reads: managed fields and the last-applied copy
/// (docs/design/observation.md#what-the-caches-keep).
fn trim_metadata<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// As [`trim_metadata`], and every annotation (only Service annotations are read, for
/// Prometheus discovery).
fn trim_annotations<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
}

/// As [`trim_annotations`], and of the labels only the two the observer reads:
/// `kubernetes.io/service-name` (a slice is looked up by it) and
/// `endpointslice.kubernetes.io/managed-by` (metrics are scraped only from the controller's
/// slices). The EndpointSlice controller copies its Service's other labels onto every slice;
/// kept, a label change on a Service would come back as a change of each of its slices
/// (docs/design/observation.md#what-the-caches-keep).
fn trim_endpoint_slice(slice: &mut EndpointSlice) {
    trim_annotations(slice);
    if let Some(labels) = slice.metadata.labels.as_mut() {
        labels.retain(|key, _| key == SERVICE_NAME_LABEL || key == MANAGED_BY_LABEL);
    }
}

/// As [`trim_annotations`], and of the spec only what the WatchTargets index and sibling
/// matching read (the target, the check interval), of the status only `status.contract`
/// (docs/design/observation.md#what-the-caches-keep): findings, conditions and windows are
/// most of a Pacto and the observer reads none of them.
fn trim_pacto(pacto: &mut Pacto) {
    trim_annotations(pacto);
    pacto.spec.contract_ref = ContractRef::default();
    pacto.spec.overrides = None;
    if let Some(status) = pacto.status.take() {
        pacto.status = Some(PactoStatus {
            contract: status.contract,
            ..PactoStatus::default()
        });
    }
}

/// The writing side of one cache: the index its kind's watch stream feeds ([`crate::watch`]),
/// it applies the objects to the store, keeps the `kind` gauge of
/// [`crate::metrics::CACHE_OBJECTS`] up to date and publishes the state of the watch.
pub struct CacheFeed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer: reflector::store::Writer<K>,
    store: Store<K>,
    failure: tokio::sync::watch::Sender<Option<WatchFailure>>,
    kind: &'static str,
    trim: fn(&mut K),
    /// The secondary index fed the same events as the store, for a kind that has one.
    index: Option<Arc<KeyIndex<K>>>,
}

impl<K> CacheFeed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    /// A new, empty cache of `kind` (trimmed with `trim`) and its feed; `query` names the cache
    /// in lookup failures.
    fn new(kind: &'static str, query: String, trim: fn(&mut K)) -> (Cached<K>, Self) {
        let (store, writer) = reflector::store();
        let (failure_tx, failure) = tokio::sync::watch::channel(None);
        let feed = Self {
            writer,
            store: store.clone(),
            failure: failure_tx,
            kind,
            trim,
            index: None,
        };
        (
            Cached {
                store,
                failure,
                query,
            },
            feed,
        )
    }

    /// The kind, as logs name it.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// What the watch strips from each object before it is cached.
    pub fn trim(&self) -> fn(&mut K) {
        self.trim
    }

    /// The watch delivered: the failure is over; the gauge counts the store.
    fn delivered(&self) {
        self.failure.send_if_modified(|f| f.take().is_some());
        #[allow(
            clippy::cast_precision_loss,
            reason = "a gauge of object counts, far below 2^52"
        )]
        metrics::gauge!(crate::metrics::CACHE_OBJECTS, "kind" => self.kind)
            .set(self.store.len() as f64);
    }
}

/// The cache as the index of its kind's watch ([`crate::watch`]): the events reach the
/// secondary index, if any, then the store.
impl<K> Index<K> for CacheFeed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    fn apply(&mut self, object: K) {
        if let Some(index) = &self.index {
            index.apply(&object);
        }
        self.writer.apply_watcher_event(&Event::Apply(object));
        self.delivered();
    }

    fn delete(&mut self, object: K) {
        if let Some(index) = &self.index {
            index.delete(&object);
        }
        self.writer.apply_watcher_event(&Event::Delete(object));
        self.delivered();
    }

    fn reset(&mut self, listing: Vec<K>) {
        if let Some(index) = &self.index {
            index.reset(&listing);
        }
        self.writer.apply_watcher_event(&Event::Init);
        for object in listing {
            self.writer.apply_watcher_event(&Event::InitApply(object));
        }
        self.writer.apply_watcher_event(&Event::InitDone);
        self.delivered();
    }

    fn failed(&mut self, error: &watcher::Error) {
        self.failure.send_replace(Some(WatchFailure {
            message: watch_error_text(error),
            forbidden: watch_error_is_forbidden(error),
        }));
    }
}

/// The feeds of [`Caches`], one per cached kind.
pub struct CacheFeeds {
    /// Services.
    pub services: CacheFeed<Service>,
    /// EndpointSlices.
    pub endpoint_slices: CacheFeed<EndpointSlice>,
    /// Deployments.
    pub deployments: CacheFeed<Deployment>,
    /// StatefulSets.
    pub stateful_sets: CacheFeed<StatefulSet>,
    /// ReplicaSets.
    pub replica_sets: CacheFeed<ReplicaSet>,
    /// Jobs.
    pub jobs: CacheFeed<Job>,
    /// CronJobs.
    pub cron_jobs: CacheFeed<CronJob>,
    /// Pactos.
    pub pactos: CacheFeed<Pacto>,
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
    /// Empty caches of `namespace` (or the whole cluster) and the feeds that fill them.
    pub fn new(namespace: Option<&str>) -> (Self, CacheFeeds) {
        let query = |plural: &str| match namespace {
            Some(ns) => format!("list {plural} {ns}"),
            None => format!("list {plural} (all namespaces)"),
        };
        let (services, services_feed) = CacheFeed::new("Service", query("services"), trim_metadata);
        let (endpoint_slices, mut endpoint_slices_feed) = CacheFeed::new(
            "EndpointSlice",
            query("endpointslices"),
            trim_endpoint_slice,
        );
        let slices_by_service = Arc::new(KeyIndex::new(service_of));
        endpoint_slices_feed.index = Some(Arc::clone(&slices_by_service));
        let (deployments, deployments_feed) =
            CacheFeed::new("Deployment", query("deployments"), trim_annotations);
        let (stateful_sets, stateful_sets_feed) =
            CacheFeed::new("StatefulSet", query("statefulsets"), trim_annotations);
        let (replica_sets, replica_sets_feed) =
            CacheFeed::new("ReplicaSet", query("replicasets"), trim_annotations);
        let (jobs, jobs_feed) = CacheFeed::new("Job", query("jobs"), trim_annotations);
        let (cron_jobs, cron_jobs_feed) =
            CacheFeed::new("CronJob", query("cronjobs"), trim_annotations);
        let (pactos, pactos_feed) = CacheFeed::new("Pacto", query("pactos"), trim_pacto);
        let caches = Self {
            namespace: namespace.map(str::to_owned),
            services,
            endpoint_slices,
            slices_by_service,
            deployments,
            stateful_sets,
            replica_sets,
            jobs,
            cron_jobs,
            pactos,
        };
        let feeds = CacheFeeds {
            services: services_feed,
            endpoint_slices: endpoint_slices_feed,
            deployments: deployments_feed,
            stateful_sets: stateful_sets_feed,
            replica_sets: replica_sets_feed,
            jobs: jobs_feed,
            cron_jobs: cron_jobs_feed,
            pactos: pactos_feed,
        };
        (caches, feeds)
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

    /// The cached EndpointSlices of a Service (by the `kubernetes.io/service-name` label),
    /// looked up in the index, sorted by name.
    pub async fn endpoint_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Result<Vec<EndpointSlice>, ApiFailure> {
        self.endpoint_slices.synced().await?;
        Ok(self
            .slices_by_service
            .names(namespace, service)
            .into_iter()
            .filter_map(|name| {
                let slice = self
                    .endpoint_slices
                    .store
                    .get(&ObjectRef::new(&name).within(namespace))?;
                // The store may have applied a later event than the index read.
                (service_of(&slice) == Some(service)).then(|| EndpointSlice::clone(&slice))
            })
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

    /// Which cached Service each of `wanted` belongs to (by ClusterIP, else by endpoint
    /// address; docs/design/observation.md#undeclared-peers).
    pub async fn services_by_address(
        &self,
        wanted: &std::collections::BTreeSet<std::net::IpAddr>,
    ) -> Result<std::collections::BTreeMap<std::net::IpAddr, (String, String)>, ApiFailure> {
        self.services.synced().await?;
        self.endpoint_slices.synced().await?;
        let services = self.services.store.state();
        let slices = self.endpoint_slices.store.state();
        Ok(crate::peers::services_by_address(
            services.iter().map(AsRef::as_ref),
            slices.iter().map(AsRef::as_ref),
            wanted,
        ))
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

    use kube::ResourceExt;
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
        assert_eq!(service.metadata.managed_fields, None);
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
        assert_eq!(deployment.metadata.managed_fields, None);
        assert_eq!(deployment.metadata.annotations, None);
        assert_eq!(deployment.metadata.name.as_deref(), Some("web"));
        let mut slice = EndpointSlice {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::from([
                    (SERVICE_NAME_LABEL.to_owned(), "web".to_owned()),
                    ("app".to_owned(), "web".to_owned()),
                    (
                        MANAGED_BY_LABEL.to_owned(),
                        "endpointslice-controller.k8s.io".to_owned(),
                    ),
                ])),
                ..meta()
            },
            ..EndpointSlice::default()
        };
        trim_endpoint_slice(&mut slice);
        assert_eq!(slice.metadata.managed_fields, None);
        assert_eq!(slice.metadata.annotations, None);
        assert_eq!(
            slice.metadata.labels,
            Some(BTreeMap::from([
                (
                    MANAGED_BY_LABEL.to_owned(),
                    "endpointslice-controller.k8s.io".to_owned()
                ),
                (SERVICE_NAME_LABEL.to_owned(), "web".to_owned()),
            ])),
            "the Service's copied labels are not the slice's"
        );
    }

    /// The names of objects cached with managed fields or the last-applied copy.
    fn untrimmed<K: Resource>(objects: &[std::sync::Arc<K>]) -> Vec<String> {
        objects
            .iter()
            .filter(|o| {
                o.meta().managed_fields.is_some()
                    || o.meta()
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(LAST_APPLIED))
            })
            .map(|o| o.meta().name.clone().unwrap_or_default())
            .collect()
    }

    /// Every store, filled by the real watches of a real kube-apiserver ([`crate::watch::spawn`]),
    /// holds objects without managed fields or the last-applied copy, and Pactos with only
    /// `status.contract` of their status. The API server's own copies are checked to carry
    /// managed fields, so the test cannot pass on objects that never had them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_caches_hold_objects_without_managed_fields() {
        use kube::api::{Api, Patch, PatchParams};
        use serde_json::json;

        const DEADLINE: Duration = Duration::from_secs(30);
        pacto_testenv::controlplane::ensure_crypto_provider();
        let cp = pacto_testenv::shared(|| {
            pacto_testenv::ControlPlaneOptions::default()
                .with_crds(pacto_api::crdgen::checked_in_paths())
        })
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)");
        let client = cp.client().unwrap();
        let ns = cp.create_namespace("cached").await.unwrap();
        let apply = PatchParams::apply("kubectl").force();
        let annotations = json!({
            LAST_APPLIED: "{}",
            "prometheus.io/scrape": "true",
        });
        let labels = json!({ "app": "web" });
        let template = json!({
            "metadata": { "labels": labels },
            "spec": { "containers": [{ "name": "web", "image": "web:1" }] },
        });
        let objects = [
            (
                "v1",
                "Service",
                "services",
                json!({ "spec": { "ports": [{ "port": 80 }] } }),
            ),
            (
                "discovery.k8s.io/v1",
                "EndpointSlice",
                "endpointslices",
                json!({ "addressType": "IPv4", "endpoints": [] }),
            ),
            (
                "apps/v1",
                "Deployment",
                "deployments",
                json!({ "spec": { "selector": { "matchLabels": labels }, "template": template } }),
            ),
        ];
        for (api_version, kind, plural, body) in objects {
            let mut object = json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {
                    "name": "web",
                    "annotations": annotations,
                    "labels": { SERVICE_NAME_LABEL: "web" },
                },
            });
            object
                .as_object_mut()
                .unwrap()
                .extend(body.as_object().unwrap().clone());
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let resource = kube::api::ApiResource {
                group: group.to_owned(),
                version: version.to_owned(),
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                plural: plural.to_owned(),
            };
            let api: Api<kube::api::DynamicObject> =
                Api::namespaced_with(client.clone(), &ns, &resource);
            api.patch("web", &apply, &Patch::Apply(&object))
                .await
                .unwrap();
        }
        let pactos: Api<Pacto> = Api::namespaced(client.clone(), &ns);
        let pacto = pacto_api::testing::PactoBuilder::inline("web", "x")
            .namespace(&ns)
            .service("web")
            .build();
        let contract = json!({
            "serviceName": "web",
            "version": "1.0.0",
            "resolvedRef": "oci://registry.example/web:1.0.0@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        });
        let status = json!({ "contractVersion": "1.0.0", "contract": contract });
        let served = pacto_api::testing::apply_as_two_managers(&pactos, &pacto, status)
            .await
            .unwrap();
        let served_service: Service = Api::namespaced(client.clone(), &ns)
            .get("web")
            .await
            .unwrap();
        assert!(served_service.metadata.managed_fields.is_some());
        assert!(served_service.annotations().contains_key(LAST_APPLIED));

        let shutdown = pacto_runtime::CancellationToken::new();
        let mut watchers = crate::watch::spawn(
            &client,
            Some(&ns),
            None,
            crate::watch::Kinds { secrets: false },
            &shutdown,
        );
        tokio::time::timeout(DEADLINE, watchers.ready.wait())
            .await
            .expect("every initial list within the deadline");
        let caches = &watchers.caches;
        let counts = [
            (
                "Service",
                caches.services.store.len(),
                untrimmed(&caches.services.store.state()),
            ),
            (
                "EndpointSlice",
                caches.endpoint_slices.store.len(),
                untrimmed(&caches.endpoint_slices.store.state()),
            ),
            (
                "Deployment",
                caches.deployments.store.len(),
                untrimmed(&caches.deployments.store.state()),
            ),
            (
                "StatefulSet",
                usize::MAX,
                untrimmed(&caches.stateful_sets.store.state()),
            ),
            (
                "ReplicaSet",
                usize::MAX,
                untrimmed(&caches.replica_sets.store.state()),
            ),
            ("Job", usize::MAX, untrimmed(&caches.jobs.store.state())),
            (
                "CronJob",
                usize::MAX,
                untrimmed(&caches.cron_jobs.store.state()),
            ),
            (
                "Pacto",
                caches.pactos.store.len(),
                untrimmed(&caches.pactos.store.state()),
            ),
        ];
        for (kind, len, untrimmed) in counts {
            assert_ne!(len, 0, "{kind}: the object is cached");
            assert!(
                untrimmed.is_empty(),
                "{kind}: cached with managed fields or the last-applied copy: {untrimmed:?}"
            );
        }
        let service = caches.service(&ns, "web").await.unwrap().unwrap();
        assert_eq!(
            service
                .annotations()
                .get("prometheus.io/scrape")
                .map(String::as_str),
            Some("true"),
            "Service annotations are read for Prometheus discovery"
        );
        let cached = caches.pactos().await.unwrap();
        let [cached] = cached.as_slice() else {
            panic!("one Pacto cached: {cached:?}")
        };
        assert_eq!(cached.spec.target, served.spec.target);
        assert_eq!(
            cached.status,
            Some(PactoStatus {
                contract: served.status.as_ref().unwrap().contract.clone(),
                ..PactoStatus::default()
            }),
            "of the status only what sibling matching reads"
        );
        shutdown.cancel();
    }
}
