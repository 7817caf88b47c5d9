//! The observer service: turns cluster state into an EvidenceSet the engine can judge — one
//! observation per declared assertion, each with an honest outcome and provenance
//! (docs/design/observation.md). A confirmed contradiction is a violation; an inability to observe
//! is never one.
//!
//! Layout (effects at the edges, pure middle):
//!
//! - [`wire`]: the Observe request into domain types (`InvalidArgument` naming the field) and
//!   the response back;
//! - [`fetch`]: the read edge: direct GETs (ConfigMaps, Secrets by metadata only, monitors) and
//!   the [`cache`] reflector stores (Services, EndpointSlices, workloads, sibling Pactos);
//! - [`watch`]: one watch stream per kind, feeding the caches and the WatchTargets hub;
//! - leaves shared by the modules above: [`k8s`] (labels, error texts) and [`target`];
//! - pure per-dimension decisions: [`workload`] (workload + persistence + snapshot),
//!   [`interfaces`], [`configuration`], [`dependency`], [`health`], [`metrics_capability`] —
//!   each returns a [`verdict::Verdict`];
//! - [`node_evidence`]: node-agent evidence (freshness, collection state, pod views) and how it
//!   decides or qualifies interfaces and dependencies; [`peers`]: the undeclared outbound peers
//!   it shows (an observation for the status, never a finding);
//! - [`window`]: the stabilization function and the persisted windows;
//! - [`observe`]: the orchestration of one Observe call;
//! - [`probe`]: SSRF-safe HTTP probing and scraping;
//! - [`targets`]: the WatchTargets index and coalesced notifications;
//! - [`service`]: the gRPC service; [`node_reports`]: the node agents' report stream and the
//!   latest report per node; this module: flags, serving and `run`.

mod addresses;
mod cache;
mod configuration;
mod dependency;
mod fetch;
mod health;
mod index;
mod interfaces;
mod k8s;
mod metrics;
mod metrics_capability;
pub mod node_evidence;
pub mod node_reports;
mod observe;
mod peers;
mod probe;
mod service;
mod target;
mod targets;
mod verdict;
pub mod watch;
mod window;
mod wire;
mod workload;

use std::time::Duration;

use clap::Parser;
use pacto_proto::observer::node_agent_reports_server::NodeAgentReportsServer;
use pacto_proto::observer::observer_server::ObserverServer;
pub use pacto_runtime::service::ServeConfig;
use pacto_runtime::{
    Authorizer, CancellationToken, Runtime, RuntimeError,
    args::{RuntimeArgs, ScopeArgs, ServerArgs, service_env},
    service::ServiceNames,
};

pub use cache::{CacheFeed, CacheFeeds, Caches};
pub use fetch::{KubeCluster, is_forbidden};
pub use metrics::watch_streams_started;
pub use node_reports::{AgentAccount, NodeReports, NodeReportsService, StoredReport};
pub use observe::{ObserveInput, ObserveOutput, Observer, Options};
pub use probe::Prober;
pub use service::{NodeAgentEndpoint, ObserverService};
pub use target::Target;
pub use verdict::Verdict;
pub use window::Window;

/// The gRPC service name (what the allow-list guards).
pub const SERVICE_NAME: &str = "pacto.observer.v1.Observer";

/// Command line of `pacto-observer`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pacto-observer",
    version,
    about = "Serves the Pacto Observer gRPC API over mTLS: Kubernetes evidence for contracts.",
    mut_args(service_env("OBSERVER"))
)]
pub struct Args {
    /// gRPC port and the identities allowed to call Observe and WatchTargets.
    #[command(flatten)]
    pub server: ServerArgs,
    /// How long an absence must persist before it is reported as a violation (Go duration).
    #[arg(
        long = "stabilization-window",
        value_name = "DURATION",
        default_value = "2m",
        value_parser = pacto_runtime::parse_duration
    )]
    pub stabilization_window: Duration,
    /// Probe the health capability over HTTP (otherwise only the passive fallback runs).
    #[arg(long = "enable-probing")]
    pub enable_probing: bool,
    /// Observe the metrics capability (discovery and one scrape); off means Unsupported.
    #[arg(long = "enable-metrics-observation")]
    pub enable_metrics_observation: bool,
    /// Without an interfaceBinding, count a Service port named like the interface.
    #[arg(long = "interface-name-match-discovery")]
    pub interface_name_match_discovery: bool,
    /// Read the metadata of Secrets bound in configBindings and watch Secrets (the chart sets it
    /// with rbac.secretMetadata, which grants that access); off, Secret bindings read
    /// OBSERVATION_UNSUPPORTED and no Secret is ever requested.
    #[arg(long = "observe-secrets")]
    pub observe_secrets: bool,
    /// `--watch-namespace`, `--namespace-selector`, `--exclude-namespaces`.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Who may stream node-agent reports.
    #[command(flatten)]
    pub node_agents: NodeAgentArgs,
    /// mTLS, admin port, logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// The NodeAgentReports endpoint's callers (docs/design/node-agent.md#report-stream).
#[derive(Debug, Clone, clap::Args)]
pub struct NodeAgentArgs {
    /// Client certificate identities allowed to call NodeAgentReports (separate from
    /// --allowed-identities, which guards Observe and WatchTargets). The default is the node
    /// agent's SPIFFE ID (docs/design/identity.md).
    #[arg(
        long = "node-agent-identities",
        value_name = "NAMES",
        value_delimiter = ',',
        default_value = pacto_runtime::DEFAULT_NODE_AGENT_IDENTITY
    )]
    pub identities: Vec<String>,
    /// Audience the node agents' projected ServiceAccount tokens are issued for (the TokenReview
    /// checks it).
    #[arg(
        long = "node-agent-token-audience",
        value_name = "AUDIENCE",
        default_value = "pacto-observer"
    )]
    pub token_audience: String,
    /// Namespace of the node agents' ServiceAccount.
    #[arg(
        long = "node-agent-namespace",
        value_name = "NS",
        default_value = "pacto-node-agent"
    )]
    pub namespace: String,
    /// The node agents' ServiceAccount.
    #[arg(
        long = "node-agent-service-account",
        value_name = "NAME",
        default_value = "pacto-node-agent"
    )]
    pub service_account: String,
    /// The node agent DaemonSet in --node-agent-namespace: its placement (nodeSelector, required
    /// node affinity, tolerations) says which nodes should report; a node it does not run on by
    /// design keeps the Kubernetes verdict. Absent or unreadable, every node should report.
    #[arg(
        long = "node-agent-daemonset",
        value_name = "NAME",
        default_value = "pacto-node-agent"
    )]
    pub daemonset: String,
    /// Use node-agent evidence: watch the NodeRuntimeObservations, Leases and the node agent
    /// DaemonSet in --node-agent-namespace and the Nodes, and combine them (and the streamed reports) with Kubernetes
    /// evidence. Off, no finding ever carries the collector k8s-observer+ebpf.
    #[arg(long = "node-evidence")]
    pub node_evidence: bool,
    /// How long a node's evidence stays fresh after the newer of its Lease renewTime and its
    /// observation's lastPublished (Go duration); older, it reads EVIDENCE_STALE.
    #[arg(
        long = "node-evidence-stale-after",
        value_name = "DURATION",
        default_value = "90s",
        value_parser = pacto_runtime::parse_duration
    )]
    pub stale_after: Duration,
}

impl NodeAgentArgs {
    /// Where the node agents are.
    pub fn site(&self) -> node_evidence::AgentSite {
        node_evidence::AgentSite {
            namespace: self.namespace.clone(),
            daemonset: self.daemonset.clone(),
        }
    }

    /// The ServiceAccount whose tokens are accepted.
    pub fn account(&self) -> AgentAccount {
        AgentAccount {
            namespace: self.namespace.clone(),
            service_account: self.service_account.clone(),
        }
    }

    /// The NodeAgentReports endpoint these flags describe, reviewing tokens with `client`.
    pub fn endpoint(&self, client: kube::Client, registry: NodeReports) -> NodeAgentEndpoint {
        NodeAgentEndpoint {
            service: NodeReportsService::new(
                registry,
                std::sync::Arc::new(node_reports::KubeTokenReviewer::new(
                    client,
                    self.token_audience.clone(),
                )),
                self.account(),
            ),
            allowed: pacto_runtime::AllowList::new(&self.identities),
        }
    }
}

impl Args {
    /// The observation options the flags select.
    pub fn options(&self) -> Options {
        Options {
            name_match_discovery: self.interface_name_match_discovery,
            enable_probing: self.enable_probing,
            enable_metrics: self.enable_metrics_observation,
            stabilization_window: self.stabilization_window,
            observe_secrets: self.observe_secrets,
        }
    }
}

/// The observer failed to start or to serve.
#[derive(Debug, thiserror::Error)]
pub enum ObserverError {
    /// The shared runtime failed (flags, logging, signals, TLS, listeners, serving).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// No Kubernetes client could be configured.
    #[error("kubernetes client configuration failed")]
    Kube(#[source] kube::Error),
    /// The HTTP prober could not be built.
    #[error(transparent)]
    Probe(#[from] probe::ProbeError),
    /// `--namespace-selector` or `--exclude-namespaces` cannot be used.
    #[error(transparent)]
    Scope(#[from] pacto_runtime::scope::ScopeError),
}

/// How the observer names itself in its logs, and its metrics.
fn names() -> ServiceNames {
    ServiceNames {
        grpc: "Observer",
        process: "observer",
        describe_metrics: metrics::describe,
        build: pacto_runtime::build_info!(),
    }
}

/// Serves gRPC and the admin endpoints until `shutdown` is cancelled, then drains in-flight
/// calls (WatchTargets streams end with OK). `/readyz` turns true once the observer's caches
/// completed their initial lists or were refused by RBAC (see [`cache`]).
pub async fn serve(
    config: ServeConfig,
    service: ObserverService,
    shutdown: CancellationToken,
) -> Result<(), ObserverError> {
    let mut rt = Runtime::serving(config, names(), shutdown)?;
    serve_grpc(&mut rt, service)?;
    Ok(rt.run().await?)
}

/// Adds the Observer service (and the node agents' report service, when enabled) to `rt`'s
/// gRPC port; ready once the caches synced.
fn serve_grpc(rt: &mut Runtime, service: ObserverService) -> Result<(), ObserverError> {
    let ready = {
        let service = service.clone();
        async move { service.wait_ready().await }
    };
    let node_agents = service.node_agents().cloned();
    let router = tonic::transport::Server::builder().add_service(
        tonic::service::interceptor::InterceptedService::new(
            ObserverServer::new(service)
                .max_decoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES),
            rt.authorizer(SERVICE_NAME),
        ),
    );
    // Node agents: their own allow-list (plaintext --insecure admits everyone, as for Observe).
    let mtls = rt.is_mtls();
    let router = router.add_optional_service(node_agents.map(|endpoint| {
        let authorizer = if mtls {
            Authorizer::new(node_reports::NODE_REPORTS_SERVICE, endpoint.allowed)
                .clients("node-agent")
        } else {
            Authorizer::insecure(node_reports::NODE_REPORTS_SERVICE)
        };
        tonic::service::interceptor::InterceptedService::new(
            NodeAgentReportsServer::new(endpoint.service)
                .max_decoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES),
            authorizer,
        )
    }));
    rt.serve_grpc(router)?;
    rt.ready_when(ready);
    Ok(())
}

/// Runs the service as the binary does: runtime (which installs the metrics recorder before the
/// caches record their first sizes), the in-cluster (or kubeconfig) client and the namespace
/// scope, watches, gRPC server, run until drained. Watches and caches stop after the gRPC
/// server drained; WatchTargets streams end when the drain begins.
pub async fn run(args: Args) -> Result<(), ObserverError> {
    let mut rt = Runtime::start(&args.runtime, names()).await?;
    let client = rt.kube_client().await.map_err(ObserverError::Kube)?;
    let namespace = args.scope.watch_namespace.clone().filter(|n| !n.is_empty());
    let scope = args.scope.namespace_scope()?;
    rt.scope(&client, &scope).await?;
    let hub = watch::TargetHub::new();
    let kinds = watch::Kinds {
        secrets: args.observe_secrets,
    };
    let caches = watch::spawn(&client, namespace.as_deref(), Some(&hub), kinds, rt.tasks()).caches;
    let registry = NodeReports::new();
    let node_agents = args.node_agents.endpoint(client.clone(), registry.clone());
    let mut observer = Observer::new(
        fetch::KubeCluster::with_caches(client.clone(), namespace, caches),
        probe::Prober::new()?,
        args.options(),
    );
    if args.node_agents.node_evidence {
        observer = observer.with_node_evidence(node_evidence::NodeEvidence::spawn(
            &client,
            args.node_agents.site(),
            registry,
            args.node_agents.stale_after,
            Some(hub.clone()),
            rt.tasks(),
        ));
    }
    rt.bind_grpc(&args.server).await?;
    let service = ObserverService::new(observer, hub, rt.stopping())
        .with_node_agents(node_agents)
        .with_scope(scope);
    serve_grpc(&mut rt, service)?;
    Ok(rt.run().await?)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_defaults_and_flags() {
        Args::command().debug_assert();
        assert_eq!(
            pacto_runtime::args::env_rule_violations(&Args::command(), "OBSERVER"),
            Vec::<String>::new()
        );
        let args = Args::try_parse_from(["pacto-observer", "--insecure"]).unwrap();
        assert_eq!(
            args.stabilization_window,
            window::DEFAULT_STABILIZATION_WINDOW
        );
        assert_eq!(args.stabilization_window, Duration::from_mins(2));
        let options = args.options();
        assert!(
            !options.enable_probing
                && !options.enable_metrics
                && !options.name_match_discovery
                && !options.observe_secrets
        );
        assert_eq!(
            args.server.allowed_identities,
            ["spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer"]
        );
        assert_eq!(
            args.node_agents.identities,
            ["spiffe://pacto/ns/pacto-node-agent/sa/pacto-node-agent"]
        );
        assert_eq!(args.node_agents.token_audience, "pacto-observer");
        assert_eq!(args.node_agents.daemonset, "pacto-node-agent");
        assert!(!args.node_agents.node_evidence);
        assert_eq!(
            args.node_agents.stale_after,
            node_evidence::DEFAULT_STALE_AFTER
        );
        assert_eq!(
            args.node_agents.account().username(),
            "system:serviceaccount:pacto-node-agent:pacto-node-agent"
        );
        let args = Args::try_parse_from([
            "pacto-observer",
            "--insecure",
            "--stabilization-window=90s",
            "--enable-probing",
            "--enable-metrics-observation",
            "--interface-name-match-discovery",
            "--watch-namespace=team",
            "--observe-secrets",
            "--node-evidence",
            "--node-evidence-stale-after=5s",
            "--node-agent-daemonset=agents",
        ])
        .unwrap();
        assert_eq!(args.node_agents.daemonset, "agents");
        assert!(args.node_agents.node_evidence);
        assert_eq!(args.node_agents.stale_after, Duration::from_secs(5));
        let options = args.options();
        assert_eq!(options.stabilization_window, Duration::from_secs(90));
        assert!(options.enable_probing && options.enable_metrics && options.name_match_discovery);
        assert!(options.observe_secrets);
        assert_eq!(args.scope.watch_namespace.as_deref(), Some("team"));
        assert!(Args::try_parse_from(["pacto-observer", "--stabilization-window=soon"]).is_err());
    }
}
