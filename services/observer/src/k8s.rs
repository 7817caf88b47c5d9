//! Kubernetes vocabulary shared by the read edge ([`crate::fetch`]), the reflector caches
//! ([`crate::cache`]) and the watch streams ([`crate::watch`]): labels, error texts and API
//! handles. A leaf: it imports nothing from the crate.

use kube::{Api, Client, Resource};

pub use pacto_runtime::watch::{
    error_text, is_forbidden, watch_error_is_forbidden, watch_error_text,
};

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who wrote an EndpointSlice (metrics are scraped only from the controller's,
/// docs/design/observation.md#probe-safety).
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

/// What a Forbidden Secret metadata read (or the Secret watch) tells the user: the chart grants
/// no access to Secrets by default, because RBAC cannot restrict a right to metadata.
pub const SECRET_FORBIDDEN_HINT: &str = "the observer has no access to Secrets (least-privilege \
     default), so Secret configuration bindings cannot be observed; to observe them, set the \
     pacto-observer chart value rbac.secretMetadata=true";

/// An API of a namespaced kind in `namespace`, or across all namespaces.
pub fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
