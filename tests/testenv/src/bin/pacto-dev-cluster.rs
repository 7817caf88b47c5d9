//! `pacto-dev-cluster`: the test control plane for humans. Starts etcd, kube-apiserver,
//! kube-controller-manager and the workload simulator in `--dir`, installs the given CRDs, writes
//! `<dir>/kubeconfig` and `<dir>/ready`, then runs until SIGINT/SIGTERM and stops everything.
//! Driven by `scripts/dev-cluster.sh`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use pacto_testenv::simulator::{Simulator, SimulatorOptions};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(
    about = "Run a local control plane (etcd + kube-apiserver + kube-controller-manager + simulator)"
)]
struct Args {
    /// Working directory (certificates, logs, etcd data, kubeconfig).
    #[arg(long)]
    dir: PathBuf,
    /// CRD files to install.
    #[arg(long = "crd")]
    crds: Vec<PathBuf>,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Start-up deadline in seconds.
    #[arg(long, default_value_t = 120)]
    timeout_seconds: u64,
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
    let ready_marker = args.dir.join("ready");
    let _ = std::fs::remove_file(&ready_marker);
    let started = Instant::now();
    let options = ControlPlaneOptions {
        controller_manager: true,
        crds: args.crds.clone(),
        dir: Some(args.dir.clone()),
        timeout: Duration::from_secs(args.timeout_seconds),
        ..ControlPlaneOptions::default()
    };
    let cp = ControlPlane::start(options)
        .await
        .context("starting the control plane")?;
    let sim = Simulator::start(
        cp.client()?,
        SimulatorOptions {
            nodes: (0..args.nodes.max(1))
                .map(|i| format!("sim-node-{i}"))
                .collect(),
            ..SimulatorOptions::default()
        },
    )
    .await
    .context("starting the simulator")?;
    let kubeconfig = args.dir.join("kubeconfig");
    std::fs::copy(cp.kubeconfig_path(), &kubeconfig)
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    std::fs::write(&ready_marker, format!("{}\n", cp.server()))
        .with_context(|| format!("writing {}", ready_marker.display()))?;
    tracing::info!(
        server = cp.server(),
        kubeconfig = %kubeconfig.display(),
        elapsed_ms = started.elapsed().as_millis(),
        nodes = ?sim.nodes(),
        "dev cluster ready"
    );
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping");
    let _ = std::fs::remove_file(&ready_marker);
    drop(sim);
    drop(cp);
    Ok(())
}
