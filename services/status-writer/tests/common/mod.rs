//! Shared harness of the cluster tests and the bench. Cluster tier: the status-writer controller against a real kube-apiserver + etcd (CRDs from
//! the chart), with the real evaluator and contract-resolver served in-process over mTLS with
//! certificates generated for the run. The observer is not started here: targeted Pactos show
//! how a down backend reads (Unknown naming the service).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test harness")]
#![allow(
    dead_code,
    unused_imports,
    reason = "each user needs a different subset"
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use pacto_api::conditions::{
    CONTRACT_VALID, READINESS_SATISFIED, RUNTIME_OBSERVED, find_condition,
};
use pacto_api::labels::{LABEL_PACTO, LABEL_VERSION};
use pacto_api::testing::PactoBuilder;
use pacto_api::{ContractRef, ContractStatus, Pacto, PactoSpec, PactoStatus, TargetRef};
use pacto_runtime::AllowList;
use pacto_runtime::CancellationToken;
use pacto_runtime::balance::BalanceConfig;
use pacto_runtime::grpc::{self, ChannelSpec, RetryPolicy, Transport};
use pacto_runtime::testing::{TestCa, TestEndpoint, write_tls_files};
use pacto_runtime::tls::TlsStore;
use pacto_status_writer::Gauges;
use pacto_status_writer::{Backends, Context};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};

pub const STATUS_WRITER: &str = "status-writer.pacto.svc";
pub const RESOLVER: &str = "contract-resolver.pacto.svc";
pub const EVALUATOR: &str = "evaluator.pacto.svc";
pub const OBSERVER: &str = "observer.pacto.svc";

pub fn crds() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/pacto-crds/templates");
    [
        "pacto.trianalab.io_pactos.yaml",
        "pacto.trianalab.io_pactorevisions.yaml",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect()
}

pub async fn cluster() -> &'static ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(|| {
        crds().into_iter().fold(
            ControlPlaneOptions::default(),
            ControlPlaneOptions::with_crd,
        )
    })
    .await
    .expect("start the control plane (scripts/k8s-binaries.sh provides the binaries)")
}

pub use pacto_runtime::testing::eventually;

/// The backends (real evaluator and resolver in-process) and a status-writer controller scoped
/// to one namespace.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub shutdown: CancellationToken,
    pub client: Client,
    pub namespace: String,
    pub gauges: Gauges,
    pub ctx: Arc<Context>,
    pub admin: SocketAddr,
    /// The in-process observer of [`start_with_observer`].
    pub observer: Option<InProcessObserver>,
}

/// The real observer served in-process (its watches and its gRPC server share one stop token),
/// which a test can stop and start again on the same address, like a restarted observer pod.
pub struct InProcessObserver {
    client: Client,
    namespace: String,
    addr: SocketAddr,
    store: Arc<TlsStore>,
    stop: std::sync::Mutex<CancellationToken>,
}

impl InProcessObserver {
    fn serve(&self, config: pacto_runtime::service::ServeConfig) {
        let stop = self.stop.lock().unwrap().clone();
        let hub = pacto_observer::watch::TargetHub::new();
        pacto_observer::watch::spawn_watchers(
            &self.client,
            Some(self.namespace.as_str()),
            &hub,
            &stop,
        );
        let observer = pacto_observer::Observer::new(
            pacto_observer::KubeCluster::new(self.client.clone(), Some(self.namespace.clone())),
            pacto_observer::Prober::new().unwrap(),
            pacto_observer::Options::default(),
        );
        tokio::spawn(pacto_observer::serve(
            config,
            pacto_observer::ObserverService::new(observer, hub, stop.clone()),
            stop,
        ));
    }

    /// Stops the observer (its streams end, its port closes) and waits until the port refuses.
    pub async fn stop(&self) {
        self.stop.lock().unwrap().cancel();
        eventually(
            "the observer's port closed",
            Duration::from_secs(30),
            || async {
                match tokio::net::TcpStream::connect(self.addr).await {
                    Err(_) => Ok(()),
                    Ok(_) => Err("still accepting".to_owned()),
                }
            },
        )
        .await;
    }

    /// Starts a new observer (new watches, new hub) on the same address and identity.
    pub async fn start(&self, parent: &CancellationToken) {
        *self.stop.lock().unwrap() = parent.child_token();
        let config = pacto_runtime::service::ServeConfig {
            grpc: grpc::bind(self.addr).await.unwrap(),
            admin: pacto_runtime::admin::bind("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap(),
            transport: Transport::Mtls(Arc::clone(&self.store)),
            allowed: AllowList::new([STATUS_WRITER]),
        };
        self.serve(config);
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A loopback port with nothing listening.
pub async fn closed_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

pub async fn start(resolver_up: bool) -> Harness {
    start_with(resolver_up, Vec::new(), Duration::from_mins(5)).await
}

/// A harness whose observer is real too (in-process, watching the test namespace).
pub async fn start_with_observer() -> Harness {
    start_full(true, Vec::new(), Duration::from_mins(5), true).await
}

pub async fn start_with(
    resolver_up: bool,
    insecure: Vec<String>,
    mirror_interval: Duration,
) -> Harness {
    start_full(resolver_up, insecure, mirror_interval, false).await
}

pub async fn start_full(
    resolver_up: bool,
    insecure: Vec<String>,
    mirror_interval: Duration,
    observer_up: bool,
) -> Harness {
    start_concurrent(resolver_up, insecure, mirror_interval, observer_up, None).await
}

/// [`start_full`] with `--max-concurrent-reconciles` (`None`: the default).
pub async fn start_concurrent(
    resolver_up: bool,
    insecure: Vec<String>,
    mirror_interval: Duration,
    observer_up: bool,
    concurrency: Option<u16>,
) -> Harness {
    start_harness(
        resolver_up,
        insecure,
        mirror_interval,
        observer_up,
        concurrency,
        |_| pacto_runtime::scope::NamespaceScope::all(),
        |ctx| ctx,
    )
    .await
}

/// A harness with the real observer and resolver (reaching `insecure` registries over plain
/// HTTP) whose status-writer posts a record of each verdict change to `producer`.
pub async fn start_producing(
    insecure: Vec<String>,
    producer: pacto_status_writer::producer::Producer,
) -> Harness {
    start_harness(
        true,
        insecure,
        Duration::from_mins(5),
        true,
        None,
        |_| pacto_runtime::scope::NamespaceScope::all(),
        move |ctx| ctx.with_producer(producer),
    )
    .await
}

/// [`start`] with the namespace scope `scope` makes of the test namespace's name.
pub async fn start_scoped(
    scope: impl FnOnce(&str) -> pacto_runtime::scope::NamespaceScope,
) -> Harness {
    start_harness(
        true,
        Vec::new(),
        Duration::from_mins(5),
        false,
        None,
        scope,
        |ctx| ctx,
    )
    .await
}

/// A harness with the real observer whose status-writer also writes a PolicyReport per Pacto
/// (`--policy-reports`; the PolicyReport CRD must be installed).
pub async fn start_reporting() -> Harness {
    start_harness(
        true,
        Vec::new(),
        Duration::from_mins(5),
        true,
        None,
        |_| pacto_runtime::scope::NamespaceScope::all(),
        Context::with_policy_reports,
    )
    .await
}

async fn start_harness(
    resolver_up: bool,
    insecure: Vec<String>,
    mirror_interval: Duration,
    observer_up: bool,
    concurrency: Option<u16>,
    scope: impl FnOnce(&str) -> pacto_runtime::scope::NamespaceScope,
    configure: impl FnOnce(Context) -> Context,
) -> Harness {
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let namespace = cp.create_namespace("sw").await.unwrap();
    let scope = scope(&namespace);
    let shutdown = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto status-writer test CA").unwrap();

    // Evaluator.
    let (endpoint, config) = TestEndpoint::bind(&ca, dir.path(), EVALUATOR, &[STATUS_WRITER]).await;
    let evaluator_addr = endpoint.grpc;
    tokio::spawn(pacto_evaluator::serve(
        config,
        pacto_evaluator::EvaluatorService::default(),
        shutdown.clone(),
    ));

    // Contract resolver (no registry needed for inline contracts; no pull secrets).
    let resolver_addr = if resolver_up {
        let (endpoint, serve_config) =
            TestEndpoint::bind(&ca, dir.path(), RESOLVER, &[STATUS_WRITER]).await;
        let defaults = pacto_contract_resolver::ResolverConfig::default();
        let config = pacto_contract_resolver::ResolverConfig {
            registry: pacto_contract_resolver::RegistryOptions {
                client: pacto_oci::ClientOptions {
                    insecure_registries: insecure,
                    ..defaults.registry.client.clone()
                },
                ..defaults.registry.clone()
            },
            ..defaults
        };
        let resolver = pacto_contract_resolver::Resolver::new(config, None).unwrap();
        tokio::spawn(pacto_contract_resolver::serve(
            serve_config,
            pacto_contract_resolver::ResolverService::new(Arc::new(resolver)),
            shutdown.clone(),
        ));
        endpoint.grpc
    } else {
        closed_port().await
    };
    let (observer_addr, observer) = if observer_up {
        let (endpoint, config) =
            TestEndpoint::bind(&ca, dir.path(), OBSERVER, &[STATUS_WRITER]).await;
        let observer = InProcessObserver {
            client: client.clone(),
            namespace: namespace.clone(),
            addr: endpoint.grpc,
            store: Arc::clone(&endpoint.store),
            stop: std::sync::Mutex::new(shutdown.child_token()),
        };
        observer.serve(config);
        (endpoint.grpc, Some(observer))
    } else {
        (closed_port().await, None)
    };

    // status-writer's client identity.
    let files = ca.client_files(dir.path(), "status-writer", &[STATUS_WRITER]);
    let transport = Transport::Mtls(TlsStore::load(files).unwrap());
    let channel = |addr: SocketAddr, name: &str| {
        let spec = ChannelSpec {
            address: addr.to_string(),
            server_name: Some(name.to_owned()),
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
        };
        grpc::balanced_channel(&spec, &transport, BalanceConfig::new(name)).unwrap()
    };
    let backends = Backends::new(
        channel(resolver_addr, RESOLVER),
        channel(observer_addr, OBSERVER),
        channel(evaluator_addr, EVALUATOR),
        RetryPolicy {
            max_retries: 1,
            min_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
        },
    );
    let gauges = Gauges::new();
    let ctx = Context::new(
        client.clone(),
        backends,
        gauges.clone(),
        None,
        Some("status-writer-test".into()),
    );
    let ctx = match concurrency {
        Some(n) => ctx.with_concurrency(n),
        None => ctx,
    }
    .with_scope(scope);
    // The producer or the PolicyReport exporter of the caller.
    let ctx = Arc::new(configure(ctx));
    let ns = namespace.clone();
    let stop = shutdown.clone();
    let run_ctx = Arc::clone(&ctx);
    let admin_listener = pacto_runtime::admin::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let admin = admin_listener.local_addr().unwrap();
    tokio::spawn(pacto_status_writer::serve_elected(
        run_ctx,
        Some(ns),
        None,
        mirror_interval,
        admin_listener,
        stop,
    ));
    Harness {
        dir,
        shutdown,
        client,
        namespace,
        gauges,
        ctx,
        admin,
        observer,
    }
}

/// Creates the Deployment `batch` (label `app: batch`) in `ns`: a workload a contract that says
/// `workload: job` does not match (WORKLOAD_MISMATCH).
pub async fn create_batch_deployment(client: &Client, ns: &str) {
    let deployment: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "batch"},
            "spec": {
                "selector": {"matchLabels": {"app": "batch"}},
                "template": {
                    "metadata": {"labels": {"app": "batch"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.local/batch:1"}]}
                }
            }
        }))
        .unwrap();
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
}

pub fn pacto(name: &str, inline: &str, service: Option<&str>) -> Pacto {
    let builder = PactoBuilder::inline(name, inline).check_interval(30);
    match service {
        Some(service) => builder.service(service),
        None => builder,
    }
    .build()
}

pub const VALID: &str = "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.2.0\n";

pub async fn wait_status(
    api: &Api<Pacto>,
    name: &str,
    want: ContractStatus,
) -> (Pacto, PactoStatus) {
    eventually(
        &format!("{name} to be {want:?}"),
        Duration::from_secs(30),
        || async {
            let p = api
                .get(name)
                .await
                .map_err(|e| format!("GET failed: {e}"))?;
            let s = p.status.clone().ok_or("no status yet")?;
            if s.contract_status == Some(want) {
                Ok((p, s))
            } else {
                Err(format!("status: {s:?}"))
            }
        },
    )
    .await
}

/// The Events of `ns` regarding the object `name`.
pub async fn events_regarding(client: &Client, ns: &str, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// How many times an Event was recorded: its count (a recurrence is counted on one Event,
/// docs/design/status.md#events).
pub fn event_count(event: &Event) -> i32 {
    event
        .deprecated_count
        .or_else(|| event.series.as_ref().map(|s| s.count))
        .unwrap_or(1)
}

pub async fn events_of(client: &Client, ns: &str, name: &str) -> Vec<(String, String, String)> {
    events_regarding(client, ns, name)
        .await
        .into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

pub async fn wait_event(client: &Client, ns: &str, name: &str, reason: &str) -> (String, String) {
    eventually(
        &format!("event {reason} on {name}"),
        Duration::from_secs(20),
        || async {
            let events = events_of(client, ns, name).await;
            events
                .iter()
                .find(|(_, r, _)| r == reason)
                .map(|(t, _, m)| (t.clone(), m.clone()))
                .ok_or_else(|| format!("events: {events:?}"))
        },
    )
    .await
}

/// How many times `reason` was recorded on `name`: the sum of the Events' counts (a recurrence
/// is counted on one Event, docs/design/status.md#events), not the number of objects.
pub async fn times_recorded(client: &Client, ns: &str, name: &str, reason: &str) -> i64 {
    events_regarding(client, ns, name)
        .await
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| i64::from(event_count(e)))
        .sum()
}

/// The target of the `orders` Pacto: a Deployment and its Service (`serviceName: orders` must
/// exist for Compliant).
pub async fn create_orders_target(client: &Client, namespace: &str) {
    let deployment: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "orders"},
            "spec": {
                "selector": {"matchLabels": {"app": "orders"}},
                "template": {
                    "metadata": {"labels": {"app": "orders"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.local/orders:1"}]}
                }
            }
        }))
        .unwrap();
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orders"},
        "spec": {"selector": {"app": "orders"}, "ports": [{"name": "http", "port": 80}]}
    }))
    .unwrap();
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
}
