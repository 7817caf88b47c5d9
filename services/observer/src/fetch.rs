//! The fetch edge: reads from the Kubernetes API, direct or through the [`crate::cache`]
//! reflector stores. NotFound is `Ok(None)`; any
//! other error is an [`ApiFailure`] naming the query. Secrets are read as metadata only.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams};
use pacto_api::{Pacto, WorkloadKind};
use pacto_runtime::CancellationToken;

use crate::cache::Caches;

use crate::verdict::{ApiFailure, Fetched};
use crate::workload::WorkloadObject;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What a Forbidden Secret metadata read (or the Secret watch) tells the user: the chart grants
/// no access to Secrets by default, because RBAC cannot restrict a right to metadata.
pub const SECRET_FORBIDDEN_HINT: &str = "the observer has no access to Secrets (least-privilege \
     default), so Secret configuration bindings cannot be observed; to observe them, set the \
     pacto-observer chart value rbac.secretMetadata=true";

fn failure(query: &str, error: &kube::Error) -> ApiFailure {
    ApiFailure::new(format!("{query}: {}", error_text(error)))
}

/// How a failed query reads in the `RuntimeObserved` message and the log: for an error the API
/// server answered, its own Status text (`<message>: <reason>`, as kubectl prints it) rather
/// than kube's rendering, which appends the Rust debug form of the whole Status object.
pub fn error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.to_string(),
        other => other.to_string(),
    }
}

/// Whether the API server refused the request for lack of RBAC rights (HTTP 403).
pub fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_forbidden())
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
    /// here, stopped at `shutdown`) of `watch_namespace` or the whole cluster; ConfigMaps and
    /// Secret metadata stay direct GETs. Reads outside the cached namespace are direct GETs.
    pub fn cached(
        client: Client,
        watch_namespace: Option<String>,
        shutdown: &CancellationToken,
    ) -> Self {
        let caches = Caches::spawn(&client, watch_namespace.as_deref(), shutdown);
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

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
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

    /// LIST the Pactos visible to the observer (cluster-wide or the watch namespace).
    pub async fn pactos(&self) -> Result<Vec<Pacto>, ApiFailure> {
        if let Some(caches) = &self.caches {
            return caches.pactos().await;
        }
        let api: Api<Pacto> = match &self.watch_namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        api.list(&ListParams::default())
            .await
            .map(|list| list.items)
            .map_err(|e| failure("list pactos", &e))
    }
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
