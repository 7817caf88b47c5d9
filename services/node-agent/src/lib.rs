//! `pacto-node-agent`: an eBPF view of the sockets of the pods on one node, published as the
//! node's `NodeRuntimeObservation` and streamed to the observer (docs/design/node-agent.md).

pub mod facts;
pub mod host;
pub mod kernel;

mod agent;
pub mod aggregate;
mod args;
mod metrics;
mod pods;
mod publish;
pub mod report;
mod wiring;

use agent::run_agent;
pub use agent::{AgentConfig, Outputs, SourceFactory};
pub use args::{Args, ObserverReports, cgroup2_mount};

use pacto_runtime::balance::BalanceConfig;
use pacto_runtime::grpc;
use pacto_runtime::service::ServiceNames;
use pacto_runtime::{CancellationToken, Runtime, RuntimeError};
use tokio::sync::watch;

/// The agent failed to start (it never fails once running).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The shared runtime failed (flags, logging, signals, TLS, the observer channel, admin).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// No Kubernetes client configuration.
    #[error("no Kubernetes client configuration (in-cluster or KUBECONFIG)")]
    Kubernetes(#[source] kube::Error),
}

/// Runs the agent with its report stream (when `observer` is given) and the admin endpoints on
/// `admin` until `stop` is cancelled, then drains as the binary does (a test's lifecycle; see
/// [`spawn_agent`]).
pub async fn serve(
    client: kube::Client,
    config: AgentConfig,
    source: SourceFactory,
    scanner: Box<dyn facts::HostScanner>,
    observer: Option<report::ReportTarget>,
    admin: tokio::net::TcpListener,
    stop: CancellationToken,
) -> Result<(), AgentError> {
    let mut rt = Runtime::new(names(), admin, stop)?;
    spawn_agent(&mut rt, client, config, source, scanner, observer);
    Ok(rt.run().await?)
}

/// Adds the agent to `rt` as runtime tasks (docs/design/architecture.md#runtime), in the start
/// order of docs/design/node-agent.md: the Lease heartbeat, the pod watch, the report stream
/// (when `observer` is given), then the agent itself, whose end begins the drain. `/readyz`
/// turns ready once collection started (Running or Failed) and the first status was written.
pub fn spawn_agent(
    rt: &mut Runtime,
    client: kube::Client,
    config: AgentConfig,
    source: SourceFactory,
    scanner: Box<dyn facts::HostScanner>,
    observer: Option<report::ReportTarget>,
) {
    let shutdown = rt.shutdown();
    rt.spawn(
        "lease-heartbeat",
        publish::heartbeat(client.clone(), config.lease_settings(), shutdown.clone()),
    );
    let (pods_tx, pods_rx) = watch::channel(None);
    rt.spawn(
        "pods",
        pods::watch_pods(
            client.clone(),
            config.node_name.clone(),
            pods_tx,
            shutdown.clone(),
        ),
    );
    let (reports_tx, reports_rx) = watch::channel(None);
    let (published_tx, mut published_rx) = watch::channel(0_u64);
    let streams = publish::StreamStates::default();
    if let Some(target) = observer {
        rt.spawn(
            "reports",
            report::stream_reports_recording(target, reports_rx, streams.clone(), shutdown.clone()),
        );
    }
    rt.ready_when(async move { published_rx.wait_for(|n| *n > 0).await.is_ok() });
    let outputs = Outputs {
        reports: reports_tx,
        published: published_tx,
        streams,
    };
    rt.spawn_critical(
        "agent",
        run_agent(client, config, source, scanner, pods_rx, outputs, shutdown),
    );
}

/// How the agent names itself in its logs, and its metrics.
fn names() -> ServiceNames {
    ServiceNames {
        grpc: "",
        process: "node-agent",
        describe_metrics: metrics::describe,
        build: pacto_runtime::build_info!(),
    }
}

/// The binary: runtime, clients, the agent's tasks ([`spawn_agent`]), run until drained.
pub async fn run(args: Args) -> Result<(), AgentError> {
    let mut rt = Runtime::start(&args.runtime, names()).await?;
    let client = rt.kube_client().await.map_err(AgentError::Kubernetes)?;
    // Every observer replica gets its own stream: the address's name (the headless `-peers`
    // Service) resolves to one address per replica, each checked against the Service's
    // certificate name (docs/design/node-agent.md#reports).
    let spec = args.observer.spec(&args.client);
    let observer = grpc::balanced_channel(&spec, rt.transport()?, BalanceConfig::new("observer"))
        .map_err(RuntimeError::from)?;
    let config = args.config();
    tracing::info!(node = %config.node_name, namespace = %config.namespace, "node-agent starting");
    let btf = args.btf_path.clone();
    let cgroup_root = args.cgroup_root();
    spawn_agent(
        &mut rt,
        client,
        config,
        Box::new(move || wiring::kernel_source(&btf)),
        wiring::host_scanner(args.proc_root.clone(), cgroup_root),
        Some(report::ReportTarget {
            observer,
            token_path: args.token_path.clone(),
        }),
    );
    Ok(rt.run().await?)
}
