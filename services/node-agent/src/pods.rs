//! The pods of this node: a watch with `fieldSelector=spec.nodeName=<node>`, kept as a map from
//! pod uid to what attribution needs (docs/design/node-agent.md#aggregation).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Api, Client};
use pacto_runtime::CancellationToken;
use pacto_runtime::index::{Index, run_index};
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
    let pods = NodePods {
        current: BTreeMap::new(),
        out,
    };
    run_index(pacto_runtime::watch::watch(api, config), pods, shutdown).await;
}

/// The index of the node's pods: the latest view, sent on every change.
struct NodePods {
    current: BTreeMap<String, PodMeta>,
    out: watch::Sender<Option<PodIndex>>,
}

impl NodePods {
    fn send(&self) {
        self.out.send_replace(Some(Arc::new(self.current.clone())));
    }
}

impl Index<Pod> for NodePods {
    fn apply(&mut self, pod: Pod) {
        let changed = match (pod_meta(&pod), pod.metadata.uid.as_ref()) {
            (Some(meta), _) => self.current.insert(meta.uid.clone(), meta.clone()) != Some(meta),
            (None, Some(uid)) => self.current.remove(uid).is_some(),
            (None, None) => false,
        };
        if changed {
            self.send();
        }
    }

    fn delete(&mut self, pod: Pod) {
        if pod
            .metadata
            .uid
            .as_ref()
            .is_some_and(|uid| self.current.remove(uid).is_some())
        {
            self.send();
        }
    }

    fn reset(&mut self, listing: Vec<Pod>) {
        self.current = listing
            .iter()
            .filter_map(pod_meta)
            .map(|meta| (meta.uid.clone(), meta))
            .collect();
        self.send();
    }
}
