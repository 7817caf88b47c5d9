//! The pods of this node: a watch with `fieldSelector=spec.nodeName=<node>`, kept as a map from
//! pod uid to what attribution needs (docs/design/node-agent.md#aggregation).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use pacto_runtime::CancellationToken;
use pacto_runtime::watch::WatchRetryExt as _;
use tokio::sync::watch;

use crate::aggregate::PodMeta;

/// Pod uid → pod, the latest complete view of the watch.
pub type PodIndex = Arc<BTreeMap<String, PodMeta>>;

/// What attribution needs from a pod; `None` for a pod without a uid or one that finished
/// (phase Succeeded or Failed: it has no sockets any more).
pub fn pod_meta(pod: &Pod) -> Option<PodMeta> {
    let uid = pod.metadata.uid.clone()?;
    let status = pod.status.as_ref();
    if status
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
    {
        return None;
    }
    Some(PodMeta {
        uid,
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        host_network: pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false),
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
    })
}

/// Watches the pods bound to `node` in all namespaces until `shutdown`, sending the index after
/// the initial list and after every change. Errors are retried with backoff, never fatal.
pub async fn watch_pods(
    client: Client,
    node: String,
    out: watch::Sender<Option<PodIndex>>,
    shutdown: CancellationToken,
) {
    let api: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut stream = watcher::watcher(api, config).with_backoff("Pod").boxed();
    let mut current: BTreeMap<String, PodMeta> = BTreeMap::new();
    let mut listing: BTreeMap<String, PodMeta> = BTreeMap::new();
    loop {
        let item = tokio::select! {
            () = shutdown.cancelled() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        let changed = match item {
            Ok(Event::Init) => {
                listing.clear();
                false
            }
            Ok(Event::InitApply(pod)) => {
                if let Some(meta) = pod_meta(&pod) {
                    listing.insert(meta.uid.clone(), meta);
                }
                false
            }
            Ok(Event::InitDone) => {
                current = std::mem::take(&mut listing);
                true
            }
            Ok(Event::Apply(pod)) => match (pod_meta(&pod), pod.metadata.uid.as_ref()) {
                (Some(meta), _) => current.insert(meta.uid.clone(), meta.clone()) != Some(meta),
                (None, Some(uid)) => current.remove(uid).is_some(),
                (None, None) => false,
            },
            Ok(Event::Delete(pod)) => pod
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| current.remove(uid).is_some()),
            // Logged and delayed by the backoff wrapper.
            Err(_) => false,
        };
        if changed {
            out.send_replace(Some(Arc::new(current.clone())));
        }
    }
}
