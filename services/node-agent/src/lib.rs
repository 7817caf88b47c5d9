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

pub use agent::{AgentConfig, Outputs, SourceFactory, run_agent};
pub use args::{Args, ObserverReports, cgroup2_mount};

use pacto_runtime::admin::Readiness;
use pacto_runtime::balance::BalanceConfig;
use pacto_runtime::grpc;
use pacto_runtime::service::ServiceNames;
use pacto_runtime::{CancellationToken, Runtime, RuntimeError};
use tokio::sync::watch;
use tracing::Instrument as _;

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

/// Runs the agent with its report stream (when `observer` is given) until `shutdown`.
/// `/readyz` (through `readiness`) turns ready once collection started (Running or Failed)
/// and the first status was written.
pub async fn serve(
    client: kube::Client,
    config: AgentConfig,
    source: SourceFactory,
    scanner: Box<dyn facts::HostScanner>,
    observer: Option<report::ReportTarget>,
    readiness: Readiness,
    shutdown: CancellationToken,
) {
    let (reports_tx, reports_rx) = watch::channel(None);
    let (published_tx, mut published_rx) = watch::channel(0_u64);
    let streams = publish::StreamStates::default();
    let reporter = observer.map(|target| {
        tokio::spawn(
            report::stream_reports_recording(target, reports_rx, streams.clone(), shutdown.clone())
                .instrument(tracing::info_span!("task", task = "reports")),
        )
    });
    let ready = {
        let shutdown = shutdown.clone();
        tokio::spawn(
            async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    seen = published_rx.wait_for(|n| *n > 0) => if seen.is_ok() {
                        readiness.set(true);
                        tracing::info!("node-agent ready");
                    },
                }
            }
            .instrument(tracing::info_span!("task", task = "readiness")),
        )
    };
    let outputs = Outputs {
        reports: reports_tx,
        published: published_tx,
        streams,
    };
    run_agent(client, config, source, scanner, outputs, shutdown.clone()).await;
    shutdown.cancel();
    if let Some(reporter) = reporter {
        let _ = reporter.await;
    }
    let _ = ready.await;
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

/// The binary: runtime, clients, the agent (whose end begins the drain), run until drained.
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
    let agent = serve(
        client,
        config,
        Box::new(move || wiring::kernel_source(&btf)),
        wiring::host_scanner(args.proc_root.clone(), cgroup_root),
        Some(report::ReportTarget {
            observer,
            token_path: args.token_path.clone(),
        }),
        rt.readiness(),
        rt.shutdown(),
    );
    rt.spawn_critical("agent", agent);
    Ok(rt.run().await?)
}
