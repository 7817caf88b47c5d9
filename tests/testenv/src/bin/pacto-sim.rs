//! `pacto-sim`: the workload simulator as a process (no kubelet): creates Nodes, binds Pods to them
//! and writes their status Running/Ready, against the cluster of `$KUBECONFIG` / `--kubeconfig`.
//! See `docs/testing.md`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use pacto_testenv::simulator::{Simulator, SimulatorOptions};

#[derive(Debug, Parser)]
#[command(about = "Simulate nodes and kubelets for a control plane without kubelets")]
struct Args {
    /// Kubeconfig of the cluster.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Number of simulated nodes (named sim-node-0 ...).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Only handle Pods in this namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Pods without the readiness annotation are reported not Ready (failing readiness probe).
    #[arg(long)]
    not_ready: bool,
    /// Lease renewal interval in seconds.
    #[arg(long, default_value_t = 10)]
    heartbeat_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    pacto_testenv::controlplane::ensure_crypto_provider();
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", args.kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .context("loading the kubeconfig")?;
    let client = kube::Client::try_from(config).context("building the client")?;
    let options = SimulatorOptions {
        nodes: (0..args.nodes.max(1))
            .map(|i| format!("sim-node-{i}"))
            .collect(),
        namespace: args.namespace,
        default_ready: !args.not_ready,
        heartbeat: Duration::from_secs(args.heartbeat_seconds.max(1)),
    };
    tracing::info!(nodes = ?options.nodes, "pacto-sim running");
    tokio::select! {
        r = Simulator::run(client, options) => r.context("simulator failed")?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
    }
    Ok(())
}
