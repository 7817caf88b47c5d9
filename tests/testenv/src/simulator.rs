//! Workload simulation for a control plane without kubelets.
//!
//! What this module does *instead of* real node components (everything else is the real
//! kube-apiserver and kube-controller-manager):
//!
//! * **Nodes** — creates `Node` objects (`spec.podCIDR`, capacity, an `InternalIP` from the
//!   documentation range 192.0.2.0/24, condition `Ready=True`) and keeps them alive by renewing
//!   their `Lease` in `kube-node-lease` (the kubelet heartbeat), so the node-lifecycle controller never
//!   marks them unreachable.
//! * **Scheduling** — binds every unscheduled Pod (default scheduler name) to a simulated node,
//!   round-robin, through the real `pods/binding` subresource, as kube-scheduler would.
//! * **Kubelet status** — for every Pod bound to a simulated node, writes `status` through the real
//!   `pods/status` subresource: phase `Running`, a pod IP from the node's CIDR, `hostIP`,
//!   `startTime`, a running `containerStatuses` entry per container and the conditions
//!   `PodReadyToStartContainers`, `Initialized`, `PodScheduled`, `ContainersReady` and `Ready`.
//!   `Ready`/`ContainersReady` follow the *readiness outcome* (see below). No container runs and no
//!   probe is executed: the outcome is declared.
//! * **Termination** — a Pod with `deletionTimestamp` on a simulated node is deleted with grace period
//!   0, as the kubelet does once its containers stopped.
//!
//! Readiness outcome of a Pod, first match wins:
//! 1. annotation [`READY_ANNOTATION`] on the Pod (from its template) = `"true"` or `"false"`;
//! 2. [`SimulatorOptions::default_ready`].
//!
//! The annotation may be changed on a running Pod; the simulator re-writes the status on the next
//! watch event. A `"false"` outcome is reported like a failing readiness probe: the container is
//! running, not ready, and the Pod's `Ready` condition is `False` with reason `ContainersNotReady`.
//!
//! Pod IP, first match wins:
//! 1. annotation [`POD_IP_ANNOTATION`] on the Pod (from its template) = an IPv4 address, for tests
//!    that must reach a server they run on this machine through the Pod's endpoint (the API server
//!    refuses loopback endpoint addresses, so use a non-loopback address of this host);
//! 2. the IP already in the Pod's status;
//! 3. the next address of the node's CIDR `10.244.<i>.0/24` (never reachable).
//!
//! An annotation that is not an IPv4 address leaves the Pod without a status (logged as a
//! warning), rather than silently using another address.

use std::net::{AddrParseError, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Mutex;

/// Pod annotation declaring the readiness outcome: `"true"` or `"false"`.
pub const READY_ANNOTATION: &str = "testenv.pacto.trianalab.io/ready";
/// Pod annotation setting `status.podIP`/`podIPs` to this IPv4 address instead of one from the
/// node's CIDR.
pub const POD_IP_ANNOTATION: &str = "testenv.pacto.trianalab.io/pod-ip";
/// Label put on every simulated Node.
pub const NODE_LABEL: &str = "testenv.pacto.trianalab.io/simulated";
const FIELD_MANAGER: &str = "pacto-sim";

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimulatorError {
    #[error("creating node {name}")]
    CreateNode {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of node {name}")]
    NodeStatus {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("renewing the lease of node {name}")]
    Lease {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("binding pod {namespace}/{name} to node {node}")]
    Bind {
        namespace: String,
        name: String,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of pod {namespace}/{name}")]
    PodStatus {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting terminating pod {namespace}/{name}")]
    DeletePod {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the Pod has no {field}")]
    PodField { field: &'static str },
    #[error(
        "pod {namespace}/{name}: annotation {POD_IP_ANNOTATION}={value:?} is not an IPv4 address"
    )]
    PodIpAnnotation {
        namespace: String,
        name: String,
        value: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("the pod watch failed")]
    Watch(#[source] watcher::Error),
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulatorOptions {
    /// Names of the simulated nodes (at least one).
    pub nodes: Vec<String>,
    /// Only handle Pods of this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Readiness outcome of Pods without [`READY_ANNOTATION`].
    pub default_ready: bool,
    /// Lease renewal interval of the simulated kubelets.
    pub heartbeat: Duration,
}

impl Default for SimulatorOptions {
    fn default() -> Self {
        Self {
            nodes: vec!["sim-node-0".to_owned()],
            namespace: None,
            default_ready: true,
            heartbeat: Duration::from_secs(10),
        }
    }
}

/// A running simulator (background Tokio tasks, stopped on drop).
pub struct Simulator {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    nodes: Vec<String>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

struct SimNode {
    name: String,
    index: usize,
    next_ip: AtomicUsize,
}

impl SimNode {
    fn host_ip(&self) -> String {
        format!("192.0.2.{}", self.index + 10)
    }
    fn pod_cidr(&self) -> String {
        format!("10.244.{}.0/24", self.index)
    }
    fn allocate_pod_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        format!("10.244.{}.{}", self.index, n % 250 + 2)
    }
}

struct State {
    client: Client,
    nodes: Vec<SimNode>,
    default_ready: bool,
    next_node: AtomicUsize,
    // Serializes status writes so IP allocation and writes stay consistent.
    write_lock: Mutex<()>,
}

impl Simulator {
    /// Creates (or adopts) the nodes and starts simulating.
    pub async fn start(client: Client, options: SimulatorOptions) -> Result<Self, SimulatorError> {
        let state = Arc::new(Self::prepare(client, &options).await?);
        let mut tasks = Vec::new();
        let s = state.clone();
        let heartbeat = options.heartbeat;
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(heartbeat).await;
                for node in &s.nodes {
                    if let Err(e) = renew_lease(&s.client, &node.name).await {
                        tracing::warn!(error = %e, "simulator heartbeat failed");
                    }
                }
            }
        }));
        let s = state.clone();
        let namespace = options.namespace.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = watch_pods(s, namespace).await {
                tracing::error!(error = %e, "simulator pod loop ended");
            }
        }));
        Ok(Self {
            tasks,
            nodes: options.nodes,
        })
    }

    /// Runs the simulator in the current task until an error (for the `pacto-sim` binary).
    pub async fn run(client: Client, options: SimulatorOptions) -> Result<(), SimulatorError> {
        let state = Arc::new(Self::prepare(client, &options).await?);
        let s = state.clone();
        let heartbeat = options.heartbeat;
        let beat = async move {
            loop {
                tokio::time::sleep(heartbeat).await;
                for node in &s.nodes {
                    // A missed renewal is retried on the next beat; node lifecycle waits ~50 s.
                    if let Err(e) = renew_lease(&s.client, &node.name).await {
                        tracing::warn!(error = %e, "simulator heartbeat failed");
                    }
                }
            }
        };
        tokio::select! {
            () = beat => Ok(()),
            r = watch_pods(state, options.namespace.clone()) => r,
        }
    }

    async fn prepare(client: Client, options: &SimulatorOptions) -> Result<State, SimulatorError> {
        let mut nodes = Vec::new();
        for (index, name) in options.nodes.iter().enumerate() {
            let node = SimNode {
                name: name.clone(),
                index,
                next_ip: AtomicUsize::new(0),
            };
            register_node(&client, &node).await?;
            renew_lease(&client, name).await?;
            nodes.push(node);
        }
        Ok(State {
            client,
            nodes,
            default_ready: options.default_ready,
            next_node: AtomicUsize::new(0),
            write_lock: Mutex::new(()),
        })
    }

    /// Names of the simulated nodes.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }
}

fn now_rfc3339() -> String {
    Timestamp::now().to_string()
}

async fn register_node(client: &Client, node: &SimNode) -> Result<(), SimulatorError> {
    let api: Api<Node> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let body = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                NODE_LABEL: "true",
            },
        },
        "spec": { "podCIDR": node.pod_cidr(), "podCIDRs": [node.pod_cidr()] },
    });
    api.patch(&node.name, &params, &Patch::Apply(&body))
        .await
        .map_err(|source| SimulatorError::CreateNode {
            name: node.name.clone(),
            source,
        })?;
    let now = now_rfc3339();
    let resources =
        json!({ "cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi" });
    let cond = |type_: &str, status: &str, reason: &str| {
        json!({ "type": type_, "status": status, "reason": reason,
                "message": "simulated by pacto-testenv", "lastHeartbeatTime": now, "lastTransitionTime": now })
    };
    let status = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": node.name },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "addresses": [
                { "type": "InternalIP", "address": node.host_ip() },
                { "type": "Hostname", "address": node.name },
            ],
            "conditions": [
                cond("Ready", "True", "KubeletReady"),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
            "nodeInfo": {
                "kubeletVersion": crate::bins::K8S_VERSION,
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "pacto-sim://0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "simulated",
                "kernelVersion": "simulated",
                "machineID": "", "systemUUID": "", "bootID": "",
            },
        },
    });
    api.patch_status(&node.name, &params, &Patch::Apply(&status))
        .await
        .map_err(|source| SimulatorError::NodeStatus {
            name: node.name.clone(),
            source,
        })?;
    Ok(())
}

async fn renew_lease(client: &Client, node: &str) -> Result<(), SimulatorError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(node.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_owned()),
            lease_duration_seconds: Some(40),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    let mut value =
        serde_json::to_value(&lease).map_err(|_| SimulatorError::PodField { field: "lease" })?;
    value["apiVersion"] = json!("coordination.k8s.io/v1");
    value["kind"] = json!("Lease");
    api.patch(
        node,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&value),
    )
    .await
    .map_err(|source| SimulatorError::Lease {
        name: node.to_owned(),
        source,
    })?;
    Ok(())
}

async fn watch_pods(state: Arc<State>, namespace: Option<String>) -> Result<(), SimulatorError> {
    let api: Api<Pod> = match &namespace {
        Some(ns) => Api::namespaced(state.client.clone(), ns),
        None => Api::all(state.client.clone()),
    };
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(item) = stream.next().await {
        match item {
            Ok(pod) => match sync_pod(&state, &pod).await {
                Ok(()) => {}
                Err(e @ SimulatorError::PodIpAnnotation { .. }) => {
                    tracing::warn!(error = %e, "simulator: pod left without a status");
                }
                // Conflicts and races with controllers are expected; the next event retries.
                Err(e) => tracing::debug!(error = %e, "simulator: pod sync failed"),
            },
            Err(e) => tracing::warn!(error = %e, "simulator: pod watch error"),
        }
    }
    Ok(())
}

/// The readiness outcome for `pod`.
fn desired_ready(pod: &Pod, default_ready: bool) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(READY_ANNOTATION))
        .map_or(default_ready, |v| v.trim().eq_ignore_ascii_case("true"))
}

/// The value of [`POD_IP_ANNOTATION`], if any, parsed as an IPv4 address.
fn declared_pod_ip(pod: &Pod) -> Option<(&str, Result<Ipv4Addr, AddrParseError>)> {
    let value = pod.metadata.annotations.as_ref()?.get(POD_IP_ANNOTATION)?;
    Some((value, value.trim().parse()))
}

async fn sync_pod(state: &State, pod: &Pod) -> Result<(), SimulatorError> {
    let name = pod.metadata.name.clone().ok_or(SimulatorError::PodField {
        field: "metadata.name",
    })?;
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .ok_or(SimulatorError::PodField {
            field: "metadata.namespace",
        })?;
    let Some(spec) = &pod.spec else {
        return Err(SimulatorError::PodField { field: "spec" });
    };
    let api: Api<Pod> = Api::namespaced(state.client.clone(), &namespace);

    let node_name = spec.node_name.clone();
    let ours = |n: &str| state.nodes.iter().find(|s| s.name == n);

    if pod.metadata.deletion_timestamp.is_some() {
        if node_name.as_deref().is_none_or(|n| ours(n).is_some()) {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    return Err(SimulatorError::DeletePod {
                        namespace,
                        name,
                        source,
                    });
                }
            }
        }
        return Ok(());
    }

    let Some(node_name) = node_name else {
        let scheduler = spec
            .scheduler_name
            .as_deref()
            .unwrap_or("default-scheduler");
        if scheduler != "default-scheduler" || state.nodes.is_empty() {
            return Ok(());
        }
        let i = state.next_node.fetch_add(1, Ordering::Relaxed) % state.nodes.len();
        let node = &state.nodes[i];
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.name.clone()),
                ..ObjectReference::default()
            },
        };
        let created: Result<serde_json::Value, _> = api
            .create_subresource("binding", &name, &PostParams::default(), &binding)
            .await;
        return match created {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
            Err(source) => Err(SimulatorError::Bind {
                namespace,
                name,
                node: node.name.clone(),
                source,
            }),
        };
    };
    let Some(node) = ours(&node_name) else {
        return Ok(());
    };

    let ready = desired_ready(pod, state.default_ready);
    let declared_ip = match declared_pod_ip(pod) {
        None => None,
        Some((_, Ok(ip))) => Some(ip.to_string()),
        Some((value, Err(source))) => {
            return Err(SimulatorError::PodIpAnnotation {
                namespace,
                name,
                value: value.to_owned(),
                source,
            });
        }
    };
    let status = pod.status.clone().unwrap_or_default();
    let condition = |t: &str| {
        status
            .conditions
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.type_ == t))
            .map(|c| c.status.clone())
    };
    let want = if ready { "True" } else { "False" };
    if status.phase.as_deref() == Some("Running")
        && status.pod_ip.is_some()
        && declared_ip
            .as_ref()
            .is_none_or(|ip| status.pod_ip.as_ref() == Some(ip))
        && condition("Ready").as_deref() == Some(want)
        && condition("ContainersReady").as_deref() == Some(want)
    {
        return Ok(());
    }

    let _guard = state.write_lock.lock().await;
    let now = now_rfc3339();
    let pod_ip = declared_ip
        .or_else(|| status.pod_ip.clone())
        .unwrap_or_else(|| node.allocate_pod_ip());
    let start_time = status
        .start_time
        .as_ref()
        .map_or_else(|| now.clone(), |t| t.0.to_string());
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let containers: Vec<serde_json::Value> = spec
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": format!("sim://{}", c.image.clone().unwrap_or_default()),
                "containerID": format!("sim://{uid}/{}", c.name),
                "ready": ready,
                "started": true,
                "restartCount": 0,
                "state": { "running": { "startedAt": start_time } },
            })
        })
        .collect();
    let transition = |t: &str, s: &str| -> String {
        // Keep the transition time when the status does not change.
        status
            .conditions
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.type_ == t && c.status == s))
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or_else(|| now.clone(), |t| t.0.to_string())
    };
    let mut conditions = Vec::new();
    for (t, s) in [
        ("PodReadyToStartContainers", "True"),
        ("Initialized", "True"),
        ("PodScheduled", "True"),
        ("ContainersReady", want),
        ("Ready", want),
    ] {
        let mut c = json!({ "type": t, "status": s, "lastTransitionTime": transition(t, s) });
        if s == "False" {
            c["reason"] = json!("ContainersNotReady");
            c["message"] =
                json!("containers with unready status: simulated readiness probe failure");
        }
        conditions.push(c);
    }
    let patch = json!({
        "status": {
            "phase": "Running",
            "hostIP": node.host_ip(),
            "hostIPs": [{ "ip": node.host_ip() }],
            "podIP": pod_ip,
            "podIPs": [{ "ip": pod_ip }],
            "startTime": start_time,
            "conditions": conditions,
            "containerStatuses": containers,
            "qosClass": status.qos_class.clone().unwrap_or_else(|| "BestEffort".to_owned()),
        }
    });
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| SimulatorError::PodStatus {
            namespace,
            name,
            source,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn readiness_outcome_follows_the_annotation_then_the_default() {
        let mut pod = Pod::default();
        assert!(desired_ready(&pod, true));
        assert!(!desired_ready(&pod, false));
        pod.metadata.annotations = Some(BTreeMap::from([(
            READY_ANNOTATION.to_owned(),
            "false".to_owned(),
        )]));
        assert!(!desired_ready(&pod, true));
        pod.metadata.annotations = Some(BTreeMap::from([(
            READY_ANNOTATION.to_owned(),
            "True".to_owned(),
        )]));
        assert!(desired_ready(&pod, false));
    }

    #[test]
    fn pod_ip_follows_the_annotation() {
        let mut pod = Pod::default();
        assert!(declared_pod_ip(&pod).is_none());
        let annotate = |pod: &mut Pod, value: &str| {
            pod.metadata.annotations = Some(BTreeMap::from([(
                POD_IP_ANNOTATION.to_owned(),
                value.to_owned(),
            )]));
        };
        annotate(&mut pod, " 192.0.2.2 ");
        let (_, parsed) = declared_pod_ip(&pod).unwrap();
        assert_eq!(parsed.unwrap(), Ipv4Addr::new(192, 0, 2, 2));
        for bad in ["", "not-an-ip", "2001:db8::1", "192.0.2.256"] {
            annotate(&mut pod, bad);
            let (value, parsed) = declared_pod_ip(&pod).unwrap();
            assert_eq!(value, bad);
            let error = SimulatorError::PodIpAnnotation {
                namespace: "ns".into(),
                name: "web".into(),
                value: value.to_owned(),
                source: parsed.unwrap_err(),
            }
            .to_string();
            assert!(error.contains(POD_IP_ANNOTATION), "{error}");
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }
}
