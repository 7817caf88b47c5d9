//! The status-writer service: the reconcile hub over `Pacto` (docs/design/architecture.md#services). It resolves the
//! contract (contract-resolver), observes the target (observer), evaluates (evaluator), and is
//! the only writer of Pacto status, conditions, events, PactoRevisions and the contract gauges.
//!
//! Layout (effects at the edges, pure middle):
//!
//! - `model`: the domain inputs of a pass (the gRPC answers become these in
//!   `reconcile::backends`, field by field with `pacto_proto::convert::crd`);
//! - `compose`: the pure status/conditions/events composition;
//! - `derive`: the contract-derived status fields; `revision`: PactoRevision naming;
//! - `gauges`: the per-Pacto Prometheus gauges (removable series); `metrics`: metric names;
//! - `reconcile`: one pass as five steps, one module each (`reconcile::backends`,
//!   `reconcile::revisions`, `reconcile::apply`), with the last-write memo
//!   (`reconcile::memo`) and the requeue policy (`reconcile::requeue`);
//! - `controller`: the kube-runtime controller and its context; `triggers`: the watches and
//!   notification streams that start a pass or follow a deletion;
//! - `events`: the Events on a Pacto, aggregated (one object per recurring event, its count);
//! - `mirror`: the revision mirror (TagOverwritten); `leader`: Lease leader election;
//! - [`node_agent`]: the node agent namespace's Pod Security labels;
//! - [`agent_log`]: the node agents' state in the operator's log (heard, stale, collection
//!   failed, reports refused), on every replica;
//! - [`policy_report`]: the opt-in PolicyReport exporter, one `wgpolicyk8s.io` report per Pacto;
//! - [`producer`]: the producer mode, a signed evidence record of each verdict change posted
//!   to the Evidence Server;
//! - this module: flags, `run`, and the admin server, whose `/metrics` appends the contract
//!   gauges to the process metrics.
//!
//! Known gap: `status.policies[].title/description/properties` need the bundled policy schema
//! files, which `Resolve` does not return (only configuration schemas travel).

pub mod agent_log;
mod cached;
mod cause;
mod compose;
mod context;
mod controller;
mod derive;
mod events;
mod gauges;
mod leader;
mod metrics;
mod mirror;
mod model;
pub mod node_agent;
pub mod policy_report;
pub mod producer;
mod reconcile;
mod revision;
mod triggers;

pub use cause::{Trigger, Triggers};
pub use compose::{Composed, EventKind, LIST_CAP, LIST_TRUNCATED, Pass, compose, derive_policy};
pub use controller::{Backends, Context};
pub use gauges::Gauges;
pub use leader::{LeaseConfig, LeaseTimingError, run_elected};
pub use model::{
    Backend, BackendFailure, ConditionState, EnsuredRevision, Evaluated, Observed, Resolution,
    ResolvedContract, Runtime,
};

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use pacto_runtime::args::{
    EndpointArgs, Evaluator, GrpcClientArgs, Observer, Resolver, RuntimeArgs, ScopeArgs,
    service_env,
};
use pacto_runtime::balance::BalanceConfig;
use pacto_runtime::grpc::{self, ChannelSpec, GrpcError, RetryPolicy, Transport};
use pacto_runtime::parse_duration;
use pacto_runtime::service::ServiceNames;
use pacto_runtime::{CancellationToken, RuntimeError};
use tokio::net::TcpListener;
use tracing::Instrument as _;

/// Command line of `pacto-status-writer`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pacto-status-writer",
    version,
    about = "Reconciles Pactos: resolves, observes and evaluates them and writes their status.",
    mut_args(service_env("STATUS_WRITER"))
)]
pub struct Args {
    /// `--resolver-addr`, `--resolver-server-name`.
    #[command(flatten)]
    pub resolver: EndpointArgs<Resolver>,
    /// `--observer-addr`, `--observer-server-name`.
    #[command(flatten)]
    pub observer: EndpointArgs<Observer>,
    /// `--evaluator-addr`, `--evaluator-server-name`.
    #[command(flatten)]
    pub evaluator: EndpointArgs<Evaluator>,
    /// How often the backends' host names are resolved again: each address is one replica
    /// (a headless Service), and calls are spread over all of them. Also resolved at once after
    /// a connection failure. Go duration syntax.
    #[arg(
        long = "backend-resolve-interval",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_duration
    )]
    pub backend_resolve_interval: Duration,
    /// How long a backend replica whose connection failed gets no calls (its calls go to the
    /// other replicas at once). Go duration syntax.
    #[arg(
        long = "backend-ejection",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_duration
    )]
    pub backend_ejection: Duration,
    /// `--watch-namespace`, `--namespace-selector`, `--exclude-namespaces`.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Stabilization window for absences, passed to Observe (default: the observer's own
    /// `--stabilization-window`). Go duration syntax.
    #[arg(
        long = "stabilization-window",
        value_name = "DURATION",
        value_parser = parse_duration
    )]
    pub stabilization_window: Option<Duration>,
    /// How often the revision mirror re-checks the digests of tags that have revisions
    /// (TagOverwritten). Go duration syntax.
    #[arg(
        long = "revision-mirror-interval",
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub revision_mirror_interval: Duration,
    /// Pactos reconciled at the same time (each pass calls the resolver, the observer and the
    /// evaluator). Bounds the load a backlog puts on the backends, e.g. after a restart with
    /// thousands of Pactos; more Pactos wait in the queue instead of timing out at a backend.
    #[arg(
        long = "max-concurrent-reconciles",
        value_name = "N",
        default_value_t = controller::DEFAULT_CONCURRENT_RECONCILES,
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub max_concurrent_reconciles: u16,
    /// Reconcile only while holding the Lease `--leader-election-id` in
    /// `--leader-election-namespace` (run several replicas safely).
    #[arg(long = "leader-elect", default_value_t = false)]
    pub leader_elect: bool,
    /// Name of the leader-election Lease.
    #[arg(
        long = "leader-election-id",
        value_name = "NAME",
        default_value = "pacto-status-writer"
    )]
    pub leader_election_id: String,
    /// Namespace of the leader-election Lease (required with --leader-elect).
    #[arg(
        long = "leader-election-namespace",
        env = "POD_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub leader_election_namespace: Option<String>,
    /// How long the Lease is valid without renewal: another replica may take it once it has seen
    /// the Lease record unchanged for this long, on its own monotonic clock (the holder's
    /// renewTime is never compared with another clock).
    #[arg(
        long = "leader-election-lease-duration",
        value_name = "DURATION",
        default_value = "15s",
        value_parser = parse_duration
    )]
    pub lease_duration: Duration,
    /// The leader's local deadline: when it could not renew the Lease for this long it stops all
    /// work (no more writes), even without an answer from the API server. Must be shorter than
    /// the lease duration.
    #[arg(
        long = "leader-election-renew-deadline",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub renew_deadline: Duration,
    /// How often the leader renews the Lease and a candidate tries to take it; also the timeout
    /// of one Lease call. Must be shorter than the renew deadline.
    #[arg(
        long = "leader-election-retry-period",
        value_name = "DURATION",
        default_value = "2s",
        value_parser = parse_duration
    )]
    pub retry_period: Duration,
    /// The node agent's namespace: its Pod Security labels are kept at privileged (set when the
    /// chart's nodeAgent.enabled is on; unset, no namespace is touched).
    #[arg(long = "node-agent-namespace", value_name = "NS")]
    pub node_agent_namespace: Option<String>,
    /// How often the node agent namespace's labels are checked (and restored).
    #[arg(
        long = "node-agent-resync-interval",
        value_name = "DURATION",
        default_value = "1m",
        value_parser = parse_duration
    )]
    pub node_agent_resync_interval: Duration,
    /// How long a node's agent counts as heard after the newer of its Lease renewTime and its
    /// NodeRuntimeObservation's lastPublished; older, the log says `stale since` (the
    /// observer's flag of the same name: set both alike). Go duration syntax.
    #[arg(
        long = "node-evidence-stale-after",
        value_name = "DURATION",
        default_value = "90s",
        value_parser = parse_duration
    )]
    pub node_evidence_stale_after: Duration,
    /// Base URL of the Evidence Server (e.g. `http://pacto-evidence.pacto.svc:8686`): post a
    /// signed record of each verdict change to `<url>/api/evidence/v1/envelopes` (producer
    /// mode; off when unset). Needs --evidence-key.
    #[arg(long = "evidence-url", value_name = "URL")]
    pub evidence_url: Option<String>,
    /// The producer's Ed25519 private key file (`pacto evidence keygen`'s `<keyId>.key`, mounted
    /// from a Secret). Read once at start.
    #[arg(long = "evidence-key", value_name = "FILE")]
    pub evidence_key: Option<std::path::PathBuf>,
    /// The key id records are signed with (default: the key file's name without `.key`).
    #[arg(long = "evidence-key-id", value_name = "ID")]
    pub evidence_key_id: Option<String>,
    /// The producer id records are signed as (the trust store binds the key to it).
    #[arg(
        long = "evidence-producer",
        value_name = "ID",
        default_value = producer::DEFAULT_PRODUCER
    )]
    pub evidence_producer: String,
    /// Records waiting to be sent at most; when the Evidence Server is slow or down, more are
    /// dropped (counted in pacto_status_writer_evidence_dropped_total).
    #[arg(
        long = "evidence-queue-size",
        value_name = "N",
        default_value_t = producer::DEFAULT_QUEUE_SIZE
    )]
    pub evidence_queue_size: usize,
    /// Write one wgpolicyk8s.io/v1alpha2 PolicyReport per Pacto, in its namespace, with one
    /// result per finding (docs/reports.md). Needs the PolicyReport CRD and the chart value
    /// policyReports.enabled (its RBAC).
    #[arg(long = "policy-reports", default_value_t = false)]
    pub policy_reports: bool,
    /// The reporting instance of events (the pod name).
    #[arg(long = "pod-name", env = "POD_NAME", value_name = "NAME")]
    pub pod_name: Option<String>,
    /// Timeouts and retries of the backend calls.
    #[command(flatten)]
    pub client: GrpcClientArgs,
    /// mTLS (also the client certificate presented to the backends), admin port, logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// status-writer failed to start or to run.
#[derive(Debug, thiserror::Error)]
pub enum StatusWriterError {
    /// The shared runtime failed (flags, logging, signals, TLS, backend channels, admin server).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// No Kubernetes client configuration.
    #[error("no Kubernetes client configuration (in-cluster or KUBECONFIG)")]
    Kubernetes(#[source] kube::Error),
    /// `--leader-elect` without a namespace for the Lease.
    #[error("--leader-elect needs --leader-election-namespace (or POD_NAMESPACE)")]
    LeaseNamespace,
    /// The leader-election durations are not ordered retry < deadline < lease duration.
    #[error(transparent)]
    LeaseTiming(#[from] leader::LeaseTimingError),
    /// The producer mode's flags cannot be used.
    #[error(transparent)]
    Producer(#[from] producer::ProducerError),
    /// `--namespace-selector` or `--exclude-namespaces` cannot be used.
    #[error(transparent)]
    Scope(#[from] pacto_runtime::scope::ScopeError),
}

/// The backend clients of `args` over `transport`: each balanced over every address its host
/// resolves to (a headless Service: one per ready replica), re-resolved every
/// `--backend-resolve-interval` (docs/design/scaling.md#replicas-and-client-side-balancing).
pub fn backends(args: &Args, transport: &Transport) -> Result<controller::Backends, GrpcError> {
    let balanced = |backend: &str, spec: ChannelSpec| {
        let mut config = BalanceConfig::new(backend);
        config.resolve_interval = args.backend_resolve_interval;
        config.ejection = args.backend_ejection;
        grpc::balanced_channel(&spec, transport, config)
    };
    Ok(controller::Backends::new(
        balanced("contract-resolver", args.resolver.spec(&args.client))?,
        balanced("observer", args.observer.spec(&args.client))?,
        balanced("evaluator", args.evaluator.spec(&args.client))?,
        RetryPolicy::from_args(&args.client),
    ))
}

/// Runs the controller and the admin server until `shutdown`.
pub async fn serve(
    ctx: Arc<controller::Context>,
    namespace: Option<String>,
    admin_listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StatusWriterError> {
    serve_elected(
        ctx,
        namespace,
        None,
        Duration::from_mins(5),
        admin_listener,
        shutdown,
    )
    .await
}

/// The leader's work: the controller and the revision mirror, until `token`; the evidence
/// producer (if any) posts until `token` too (docs/design/status.md#evidence-producer).
pub async fn work(
    ctx: Arc<controller::Context>,
    namespace: Option<String>,
    mirror_interval: Duration,
    token: CancellationToken,
) {
    if let Some(producer) = &ctx.producer {
        producer.post_during(&token);
    }
    let mirror = tokio::spawn(
        mirror::run(
            Arc::clone(&ctx),
            namespace.clone(),
            mirror_interval,
            token.clone(),
        )
        .instrument(tracing::info_span!("task", task = "revision-mirror")),
    );
    // On cancellation the controller is dropped, not drained: reconciles in flight stop at
    // their next step, so none writes after a lost Lease (docs/design/status.md#leader-election).
    tokio::select! {
        biased;
        () = token.cancelled() => {}
        () = controller::run(Arc::clone(&ctx), namespace, token.clone()) => {}
    }
    token.cancel();
    if let Err(error) = mirror.await {
        tracing::warn!(%error, "revision mirror task failed");
    }
    // Only the leader exports the per-Pacto gauges.
    ctx.gauges.clear();
    // Another leader may write PolicyReports meanwhile: the next term reads them anew
    // (docs/design/status.md#policyreports).
    if let Some(reports) = &ctx.policy_reports {
        reports.clear();
    }
}

/// How the status-writer names itself in its logs, and its metrics.
fn names() -> ServiceNames {
    ServiceNames {
        grpc: "",
        process: "status-writer",
        describe_metrics: crate::metrics::describe,
        build: pacto_runtime::build_info!(),
    }
}

/// [`serve`], reconciling only while holding `lease` (when given), with the revision mirror
/// every `mirror_interval`.
pub async fn serve_elected(
    ctx: Arc<controller::Context>,
    namespace: Option<String>,
    lease: Option<leader::LeaseConfig>,
    mirror_interval: Duration,
    admin_listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StatusWriterError> {
    let mut rt = pacto_runtime::Runtime::new(names(), admin_listener, shutdown)?;
    // Every replica follows the scope, leader or not, so a new leader starts with it.
    rt.follow_scope(&ctx.client, &ctx.scope);
    spawn_controller(&mut rt, ctx, namespace, lease, mirror_interval);
    Ok(rt.run().await?)
}

/// Adds the controller to `rt`: the leader's [`work`] (under `lease` when given) until the
/// drain, the per-Pacto gauges on `/metrics`, ready at once.
fn spawn_controller(
    rt: &mut pacto_runtime::Runtime,
    ctx: Arc<controller::Context>,
    namespace: Option<String>,
    lease: Option<leader::LeaseConfig>,
    mirror_interval: Duration,
) {
    let gauges = ctx.gauges.clone();
    rt.metrics_extra(move || gauges.render());
    rt.readiness().set(true);
    tracing::info!(namespace = ?namespace, scope = %ctx.scope.describe(), "status-writer reconciling Pactos");
    let shutdown = rt.shutdown();
    rt.spawn_critical("controller", async move {
        match lease {
            None => work(ctx, namespace, mirror_interval, shutdown).await,
            Some(lease) => {
                // Between terms the producer posts nothing: a record queued by a term that ended
                // waits for the next one (docs/design/status.md#evidence-producer).
                if let Some(producer) = &ctx.producer {
                    producer.pause();
                }
                let client = ctx.client.clone();
                leader::run_elected(client, lease, shutdown, move |token| {
                    work(Arc::clone(&ctx), namespace.clone(), mirror_interval, token)
                })
                .await;
            }
        }
    });
}

/// The binary: flags → clients → controller.
pub async fn run(args: Args) -> Result<(), StatusWriterError> {
    let mut rt = pacto_runtime::Runtime::start(&args.runtime, names()).await?;
    let client = rt
        .kube_client()
        .await
        .map_err(StatusWriterError::Kubernetes)?;
    let scope = args.scope.namespace_scope()?;
    rt.scope(&client, &scope).await?;
    let producer = producer::config_from_flags(
        args.evidence_url.as_deref(),
        args.evidence_key.as_ref(),
        args.evidence_key_id.as_deref(),
        &args.evidence_producer,
        args.evidence_queue_size,
    )?
    .map(|config| {
        tracing::info!(url = %config.shown_url(), producer = %config.producer_id, key_id = %config.key_id, "producer mode: posting a signed record of each verdict change");
        producer::Producer::start(config, rt.tasks())
    })
    .transpose()?;
    let mut ctx = controller::Context::new(
        client,
        backends(&args, rt.transport()?).map_err(RuntimeError::from)?,
        gauges::Gauges::new(),
        args.stabilization_window,
        args.pod_name.clone(),
    )
    .with_concurrency(args.max_concurrent_reconciles)
    .with_scope(scope);
    if let Some(producer) = producer {
        ctx = ctx.with_producer(producer);
    }
    if args.policy_reports {
        ctx = ctx.with_policy_reports();
    }
    let ctx = Arc::new(ctx);
    let lease = if args.leader_elect {
        let lease = leader::LeaseConfig {
            name: args.leader_election_id.clone(),
            namespace: args
                .leader_election_namespace
                .clone()
                .ok_or(StatusWriterError::LeaseNamespace)?,
            identity: args
                .pod_name
                .clone()
                .unwrap_or_else(|| format!("status-writer-{}", std::process::id())),
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
        };
        lease.check()?;
        Some(lease)
    } else {
        None
    };
    // Every replica keeps the labels (an idempotent patch), leader or not, and logs the node
    // agents' state, so that whichever pod `kubectl logs deploy/pacto-operator` reads tells it
    // (docs/design/node-agent.md#operator-log).
    if let Some(namespace) = args.node_agent_namespace.clone().filter(|n| !n.is_empty()) {
        let shutdown = rt.shutdown();
        rt.spawn(
            "node-agent-labels",
            node_agent::keep_privileged(
                ctx.client.clone(),
                namespace.clone(),
                args.node_agent_resync_interval,
                shutdown.clone(),
            ),
        );
        rt.spawn(
            "node-agent-log",
            agent_log::log_node_agents(
                ctx.client.clone(),
                namespace,
                args.node_evidence_stale_after,
                shutdown,
            ),
        );
    }
    spawn_controller(
        &mut rt,
        ctx,
        args.scope.watch_namespace.clone(),
        lease,
        args.revision_mirror_interval,
    );
    Ok(rt.run().await?)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn flags_have_defaults_and_env_vars() {
        Args::command().debug_assert();
        assert_eq!(
            pacto_runtime::args::env_rule_violations(&Args::command(), "STATUS_WRITER"),
            Vec::<String>::new()
        );
        let args = Args::try_parse_from(["x", "--insecure", "--stabilization-window=30s"])
            .expect("parses");
        assert_eq!(args.stabilization_window, Some(Duration::from_secs(30)));
        assert_eq!(args.evaluator.addr, "evaluator.pacto.svc:8443");
        assert_eq!(
            args.node_evidence_stale_after,
            agent_log::DEFAULT_STALE_AFTER
        );
        for arg in Args::command().get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            assert!(arg.get_env().is_some(), "flag {id} has no env var");
        }
    }
}
