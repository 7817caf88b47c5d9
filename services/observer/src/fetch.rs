//! The fetch edge: every read from the Kubernetes API, direct or through the [`crate::cache`]
//! reflector stores. NotFound is `Ok(None)`; any other error is an [`ApiFailure`] naming the
//! query. Secrets are read as metadata only.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use pacto_api::{Pacto, WorkloadKind};
use pacto_runtime::CancellationToken;
use serde_json::Value as Json;

use crate::cache::Caches;
pub use crate::k8s::{SECRET_FORBIDDEN_HINT, SERVICE_NAME_LABEL, error_text, is_forbidden};
use crate::verdict::{ApiFailure, Fetched};
use crate::workload::WorkloadObject;

fn failure(query: &str, error: &kube::Error) -> ApiFailure {
    ApiFailure::new(format!("{query}: {}", error_text(error)))
}

/// Read-only access to the cluster: direct GETs, or — when built with [`KubeCluster::cached`] —
/// reflector caches for Services, EndpointSlices, workloads and Pactos.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    watch_namespace: Option<String>,
    caches: Option<Caches>,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster")
            .field("watch_namespace", &self.watch_namespace)
            .field("caches", &self.caches)
            .finish_non_exhaustive()
    }
}

impl KubeCluster {
    /// Reads through `client`; sibling Pactos are listed cluster-wide, or only in
    /// `watch_namespace` when set.
    pub fn new(client: Client, watch_namespace: Option<String>) -> Self {
        Self {
            client,
            watch_namespace,
            caches: None,
        }
    }

    /// Reads Services, EndpointSlices, workloads and Pactos from reflector caches (started
    /// here, stopped at `shutdown`) of `watch_namespace` or the whole cluster; see
    /// [`KubeCluster::with_caches`].
    pub fn cached(
        client: Client,
        watch_namespace: Option<String>,
        shutdown: &CancellationToken,
    ) -> Self {
        let caches = crate::watch::spawn(
            &client,
            watch_namespace.as_deref(),
            None,
            crate::watch::Kinds::ALL,
            shutdown,
        )
        .caches;
        Self::with_caches(client, watch_namespace, caches)
    }

    /// Reads Services, EndpointSlices, workloads and Pactos from `caches` (of `watch_namespace`
    /// or the whole cluster); ConfigMaps and Secret metadata stay direct GETs. Reads outside the
    /// cached namespace are direct GETs.
    pub fn with_caches(client: Client, watch_namespace: Option<String>, caches: Caches) -> Self {
        Self {
            client,
            watch_namespace,
            caches: Some(caches),
        }
    }

    /// Waits until the caches (if any) completed their initial lists; `false` if one stopped.
    pub async fn wait_ready(&self) -> bool {
        match &self.caches {
            Some(caches) => caches.wait_ready().await,
            None => true,
        }
    }

    fn caches_for(&self, namespace: &str) -> Option<&Caches> {
        self.caches.as_ref().filter(|c| c.covers(namespace))
    }

    async fn get<K>(&self, namespace: &str, name: &str, what: &str) -> Fetched<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|e| failure(&format!("get {what} {namespace}/{name}"), &e))
    }

    /// GET a Service.
    pub async fn service(&self, namespace: &str, name: &str) -> Fetched<Service> {
        if let Some(caches) = self.caches_for(namespace) {
            return caches.service(namespace, name).await;
        }
        self.get(namespace, name, "services").await
    }

    /// LIST the EndpointSlices of a Service (by the `kubernetes.io/service-name` label).
    pub async fn endpoint_slices(
        &self,
        namespace: &str,
        service: &str,
    ) -> Fetched<Vec<EndpointSlice>> {
        if let Some(caches) = self.caches_for(namespace) {
            return caches.endpoint_slices(namespace, service).await.map(Some);
        }
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        let params = ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={service}"));
        api.list(&params)
            .await
            .map(|list| Some(list.items))
            .map_err(|e| {
                failure(
                    &format!("list endpointslices {namespace} for service {service}"),
                    &e,
                )
            })
    }

    /// GET a workload of any supported kind.
    pub async fn workload(
        &self,
        namespace: &str,
        name: &str,
        kind: WorkloadKind,
    ) -> Fetched<WorkloadObject> {
        if let Some(caches) = self.caches_for(namespace) {
            return caches.workload(namespace, name, kind).await;
        }
        Ok(match kind {
            WorkloadKind::Deployment => self
                .get::<Deployment>(namespace, name, "deployments")
                .await?
                .map(WorkloadObject::from),
            WorkloadKind::StatefulSet => self
                .get::<StatefulSet>(namespace, name, "statefulsets")
                .await?
                .map(WorkloadObject::from),
            WorkloadKind::ReplicaSet => self
                .get::<ReplicaSet>(namespace, name, "replicasets")
                .await?
                .map(WorkloadObject::from),
            WorkloadKind::Job => self
                .get::<Job>(namespace, name, "jobs")
                .await?
                .map(WorkloadObject::from),
            WorkloadKind::CronJob => self
                .get::<CronJob>(namespace, name, "cronjobs")
                .await?
                .map(WorkloadObject::from),
        })
    }

    /// GET a ConfigMap's `data` (binary data is not read).
    pub async fn config_map_data(
        &self,
        namespace: &str,
        name: &str,
    ) -> Fetched<BTreeMap<String, String>> {
        Ok(self
            .get::<ConfigMap>(namespace, name, "configmaps")
            .await?
            .map(|cm| cm.data.unwrap_or_default()))
    }

    /// GET a Secret's **metadata only** (`PartialObjectMetadata`); its values are never read.
    /// Forbidden (the chart's default grants no Secret access) is a failure whose message
    /// names the chart value that grants it ([`SECRET_FORBIDDEN_HINT`]).
    pub async fn secret_exists(&self, namespace: &str, name: &str) -> Fetched<()> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        api.get_metadata_opt(name)
            .await
            .map(|m| m.map(|_| ()))
            .map_err(|e| {
                let query = format!("get secrets {namespace}/{name} (metadata)");
                if is_forbidden(&e) {
                    ApiFailure::new(format!(
                        "{query}: {}; {SECRET_FORBIDDEN_HINT}",
                        error_text(&e)
                    ))
                } else {
                    failure(&query, &e)
                }
            })
    }

    /// Which Service each of `wanted` belongs to, among the Services visible to the observer
    /// (the cache, else a LIST of Services and EndpointSlices, cluster-wide or in the watch
    /// namespace); docs/design/observation.md#undeclared-peers.
    pub async fn services_by_address(
        &self,
        wanted: &BTreeSet<IpAddr>,
    ) -> Result<BTreeMap<IpAddr, (String, String)>, ApiFailure> {
        if wanted.is_empty() {
            return Ok(BTreeMap::new());
        }
        if let Some(caches) = &self.caches {
            return caches.services_by_address(wanted).await;
        }
        let ns = self.watch_namespace.as_deref();
        let services = crate::k8s::api::<Service>(&self.client, ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| failure("list services", &e))?;
        let slices = crate::k8s::api::<EndpointSlice>(&self.client, ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| failure("list endpointslices", &e))?;
        Ok(crate::peers::services_by_address(
            &services.items,
            &slices.items,
            wanted,
        ))
    }

    /// LIST the Pactos visible to the observer (cluster-wide or the watch namespace).
    pub async fn pactos(&self) -> Result<Vec<Pacto>, ApiFailure> {
        if let Some(caches) = &self.caches {
            return caches.pactos().await;
        }
        let api: Api<Pacto> = crate::k8s::api(&self.client, self.watch_namespace.as_deref());
        api.list(&ListParams::default())
            .await
            .map(|list| list.items)
            .map_err(|e| failure("list pactos", &e))
    }

    /// LIST the `spec` of the ServiceMonitors and PodMonitors in `namespace` (metrics
    /// discovery). Monitors are optional: a kind that is not installed or not granted reads as
    /// none (a refusal is logged at `warn`, naming the right to grant).
    pub async fn monitors(&self, namespace: &str) -> Monitors {
        Monitors {
            service_monitors: self
                .monitor_specs(namespace, "ServiceMonitor", "servicemonitors")
                .await,
            pod_monitors: self
                .monitor_specs(namespace, "PodMonitor", "podmonitors")
                .await,
        }
    }

    async fn monitor_specs(&self, namespace: &str, kind: &str, plural: &str) -> Vec<Json> {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("monitoring.coreos.com", "v1", kind),
            plural,
        );
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        match api.list(&ListParams::default()).await {
            Ok(list) => list
                .items
                .into_iter()
                .filter_map(|o| o.data.get("spec").cloned())
                .collect(),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!(
                    namespace,
                    resource = plural,
                    "forbidden to list {plural}.monitoring.coreos.com; grant list on it to use {kind} discovery"
                );
                Vec::new()
            }
            Err(error) => {
                tracing::debug!(namespace, resource = plural, %error, "monitor discovery skipped");
                Vec::new()
            }
        }
    }
}

/// The Prometheus Operator monitors of a namespace (their `spec`s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Monitors {
    /// ServiceMonitors.
    pub service_monitors: Vec<Json>,
    /// PodMonitors.
    pub pod_monitors: Vec<Json>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_read_as_the_api_server_wrote_them() {
        let status = kube::core::Status::failure(
            "configmaps \"settings\" is forbidden: User \"system:serviceaccount:ns:obs\" cannot get resource \"configmaps\"",
            "Forbidden",
        )
        .with_code(403);
        let error = kube::Error::Api(Box::new(status));
        let failure = failure("get configmaps ns/settings", &error);
        assert_eq!(
            failure.message,
            "get configmaps ns/settings: configmaps \"settings\" is forbidden: User \"system:serviceaccount:ns:obs\" cannot get resource \"configmaps\": Forbidden"
        );
        assert!(is_forbidden(&error));
        let other = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(error_text(&other), other.to_string());
    }
}
