//! `pacto-dev-cluster`: the test control plane for humans. Starts etcd, kube-apiserver,
//! kube-controller-manager and the workload simulator in `--dir`, installs the given CRDs, writes
//! `<dir>/kubeconfig` and `<dir>/ready`, then runs until SIGINT/SIGTERM and stops everything.
//! Driven by `scripts/dev-cluster.sh`.
//!
//! With `--node` (root only) a real node replaces the simulator: the control plane gets the
//! node-ready settings and kube-scheduler, then containerd, kubelet, kube-proxy and CoreDNS start
//! (`pacto_testenv::node`); stopping tears the node down and restores the host.
//! `--cleanup-node` only tears down what a node that died without teardown left behind.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use pacto_testenv::node::{self, RealNode, RealNodeOptions};
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
    /// Run a real node (root only) instead of the simulator.
    #[arg(long)]
    node: bool,
    /// Image archives (docker-archive) to import into the node's containerd (`scripts/node-images.sh`).
    #[arg(long = "image", requires = "node")]
    images: Vec<PathBuf>,
    /// The CoreDNS image of the node.
    #[arg(long, default_value = node::COREDNS_IMAGE, requires = "node")]
    coredns_image: String,
    /// Tear down what a node that died without teardown left behind, then exit.
    #[arg(long, conflicts_with = "node")]
    cleanup_node: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // kube's client logs every refused connection while the API server starts.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("info,kube_client::client::builder=off")
                }),
        )
        .init();
    let args = Args::parse();
    if args.cleanup_node {
        let problems = node::cleanup_stale();
        for p in &problems {
            eprintln!("pacto-dev-cluster: cleanup: {p}");
        }
        anyhow::ensure!(problems.is_empty(), "the host is not fully restored");
        return Ok(());
    }
    if args.node {
        return run_node(args).await;
    }
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

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}

/// `--node`: the control plane with a real node; on SIGINT/SIGTERM the node's teardown.
async fn run_node(args: Args) -> anyhow::Result<()> {
    let ready_marker = args.dir.join("ready");
    let _ = std::fs::remove_file(&ready_marker);
    let options = RealNodeOptions {
        dir: Some(args.dir.clone()),
        crds: args.crds.clone(),
        image_archives: args.images.clone(),
        coredns_image: args.coredns_image.clone(),
        timeout: Duration::from_secs(args.timeout_seconds),
        ..RealNodeOptions::default()
    };
    // The one line of a refusal (not root, a program missing, a port in use, another node).
    let node = match RealNode::start(options).await {
        Ok(node) => node,
        Err(e) => {
            let mut line = format!("Error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                let _ = write!(line, ": {s}");
                source = s.source();
            }
            eprintln!("{line}");
            std::process::exit(1);
        }
    };
    let cp = node.control_plane();
    let kubeconfig = args.dir.join("kubeconfig");
    std::fs::copy(cp.kubeconfig_path(), &kubeconfig)
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    let t = node.timings();
    std::fs::write(&ready_marker, format!("{}\n", cp.server()))
        .with_context(|| format!("writing {}", ready_marker.display()))?;
    tracing::info!(
        server = cp.server(),
        kubeconfig = %kubeconfig.display(),
        node = node::NODE_NAME,
        host_ip = node.host_ip(),
        control_plane_ms = t.control_plane.as_millis(),
        containerd_ms = t.containerd.as_millis(),
        images_ms = t.images.as_millis(),
        node_ready_ms = t.node_ready.as_millis(),
        kube_proxy_ms = t.kube_proxy.as_millis(),
        coredns_ready_ms = t.coredns_ready.as_millis(),
        total_ms = t.total.as_millis(),
        "dev cluster with a real node ready"
    );
    let rss: Vec<String> = node
        .rss_kib()
        .iter()
        .map(|(name, kib)| format!("{name}={}MiB", kib / 1024))
        .collect();
    tracing::info!(rss = %rss.join(" "), "node processes");
    wait_for_signal().await?;
    tracing::info!("stopping the node and restoring the host");
    let _ = std::fs::remove_file(&ready_marker);
    let started = Instant::now();
    let problems = node.down();
    for p in &problems {
        tracing::error!(problem = %p, "teardown");
    }
    tracing::info!(
        teardown_ms = started.elapsed().as_millis(),
        "node torn down"
    );
    anyhow::ensure!(problems.is_empty(), "the host is not fully restored");
    Ok(())
}
