//! The contract-resolver service: turns a Pacto's `spec.contractRef` into a validated contract,
//! or into a precisely classified failure (docs/design/resolution.md).
//!
//! It is the only service that talks to registries and the only one that reads Secret values
//! (the pull Secret, with one direct GET per resolve from the Pacto's namespace). The gRPC edge
//! (`service`) validates requests into domain types (`outcome`); [`Resolver`] runs
//! fetch (Secret, `registry`, `cache`) → validate (pure, `pacto-contract`) → outcome. Only the
//! identities on `--allowed-identities` (status-writer by default) may call it.

mod budget;
mod cache;
mod metrics;
mod outcome;
mod registry;
mod resolve;
mod secrets;
mod service;
mod shared;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use pacto_oci::ClientOptions;
use pacto_proto::resolver::contract_resolver_server::ContractResolverServer;
pub use pacto_runtime::service::ServeConfig;
use pacto_runtime::{
    CancellationToken, Runtime, RuntimeError,
    args::{RuntimeArgs, ServerArgs, service_env},
    parse_duration,
    service::ServiceNames,
};

pub use budget::{MemoryPlan, PlanInput, parse_quantity};
pub use outcome::{
    ContractSource, ListInput, Outcome, ResolutionPolicy, ResolveInput, ResolvedContract,
};
pub use registry::RegistryOptions;
pub use resolve::{Resolver, ResolverConfig, TagRevision, sha256_hex};
pub use secrets::{KubeSecrets, SecretData, SecretReadError, SecretSource};
pub use service::ResolverService;

/// The gRPC service name (what the allow-list guards).
pub const SERVICE_NAME: &str = "pacto.resolver.v1.ContractResolver";

/// The token service and blob CDN hosts of Docker Hub and ghcr.io, trusted by default
/// (`pacto_oci::DEFAULT_ALLOWED_HOSTS`, joined; a unit test keeps the two equal).
pub const DEFAULT_ALLOWED_HOSTS: &str =
    "auth.docker.io,production.cloudflare.docker.com,pkg-containers.githubusercontent.com";

/// Command line of `pacto-contract-resolver`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pacto-contract-resolver",
    version,
    about = "Serves the Pacto ContractResolver gRPC API over mTLS.",
    mut_args(service_env("RESOLVER"))
)]
pub struct Args {
    /// gRPC port and the identities allowed to call the resolver.
    #[command(flatten)]
    pub server: ServerArgs,
    /// Registry hosts (`host[:port]`) reached over plain HTTP. Comma-separated.
    #[arg(
        long = "insecure-registries",
        value_name = "HOST,…",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,
    /// TCP connect timeout for registries.
    #[arg(
        long = "registry-connect-timeout",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_duration
    )]
    pub registry_connect_timeout: Duration,
    /// Deadline of one registry operation (a HEAD, a tag list, a whole pull).
    #[arg(
        long = "registry-timeout",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub registry_timeout: Duration,
    /// Retries of a registry operation that failed transiently (unreachable, 5xx, 429,
    /// timeout), with exponential backoff from 200ms up to 2s; 0 disables retries.
    #[arg(long = "registry-max-retries", value_name = "N", default_value_t = 2)]
    pub registry_max_retries: usize,
    /// Largest accepted bundle layer (compressed), in bytes.
    #[arg(
        long = "max-bundle-bytes",
        value_name = "BYTES",
        default_value_t = 50 * 1024 * 1024
    )]
    pub max_bundle_bytes: u64,
    /// Largest accepted inline contract, in bytes.
    #[arg(
        long = "max-inline-bytes",
        value_name = "BYTES",
        default_value_t = 1024 * 1024
    )]
    pub max_inline_bytes: usize,
    /// How long a tag list is cached (an unversioned reference picks up a new version at most
    /// this late).
    #[arg(
        long = "tags-cache-ttl",
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub tags_cache_ttl: Duration,
    /// How long a pulled bundle is cached by manifest digest.
    #[arg(
        long = "bundle-cache-ttl",
        value_name = "DURATION",
        default_value = "1h",
        value_parser = parse_duration
    )]
    pub bundle_cache_ttl: Duration,
    /// Most bundles kept in the cache.
    #[arg(long = "bundle-cache-size", value_name = "N", default_value_t = 512)]
    pub bundle_cache_size: usize,
    /// Most bytes bundles hold in the cache (the oldest bundles are dropped first; a bundle
    /// larger than this is not cached). Default: what --memory-limit leaves after the pulls,
    /// validations and tag lists (docs/design/resolution.md#memory).
    #[arg(long = "bundle-cache-bytes", value_name = "BYTES")]
    pub bundle_cache_bytes: Option<u64>,
    /// The container's memory limit (a Kubernetes quantity such as 256Mi; the chart passes
    /// resources.limits.memory). The bundle cache, concurrent pulls and concurrent validations
    /// are derived from it so that together they fit; a start with budgets over it is refused
    /// (docs/design/resolution.md#memory).
    #[arg(
        long = "memory-limit",
        value_name = "QUANTITY",
        default_value = "256Mi",
        value_parser = parse_quantity
    )]
    pub memory_limit: u64,
    /// How long a registry failure (not found, authentication rejected, unreachable, …) is
    /// remembered and given, with its original message, to the requests of the same reference
    /// and credentials that accept an answer that old (status-writer's requeues); 0 disables.
    /// Fresh requests (a changed Pacto) always ask the registry.
    #[arg(
        long = "failure-cache-ttl",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub failure_cache_ttl: Duration,
    /// Most bundle pulls in flight at once (further pulls wait for a slot). Default: as many
    /// as half of --memory-limit holds at the worst case of each (up to 8).
    #[arg(
        long = "max-concurrent-pulls",
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_concurrent_pulls: Option<u32>,
    /// Hosts (`host` or `host:port`) besides a registry's own host that its redirects and token
    /// realms may send the resolver to: a CDN serving blobs or a separate token service. The
    /// default trusts those of Docker Hub and GitHub's registry; an empty value trusts none.
    /// Comma-separated; anything else is refused.
    #[arg(
        long = "registry-allowed-hosts",
        value_name = "HOST,…",
        value_delimiter = ',',
        default_value = DEFAULT_ALLOWED_HOSTS
    )]
    pub registry_allowed_hosts: Vec<String>,
    /// Run without Kubernetes access (development): any pull Secret is then Unavailable.
    #[arg(long = "no-kubernetes", default_value_t = false)]
    pub no_kubernetes: bool,
    /// mTLS, admin port, logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

impl Args {
    /// How the flags spend --memory-limit (docs/design/resolution.md#memory).
    pub fn memory_plan(&self) -> MemoryPlan {
        MemoryPlan::derive(&PlanInput {
            limit: self.memory_limit,
            max_layer_bytes: self.max_bundle_bytes,
            max_files_bytes: pacto_contract::bundle::Limits::default().max_total_bytes,
            pulls: self.max_concurrent_pulls.map(|n| n as usize),
            cache_bytes: self.bundle_cache_bytes,
        })
    }

    /// The resolver configuration the flags describe.
    pub fn resolver_config(&self) -> ResolverConfig {
        let defaults = ResolverConfig::default();
        let plan = self.memory_plan();
        let client = ClientOptions {
            insecure_registries: self
                .insecure_registries
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
            connect_timeout: self.registry_connect_timeout,
            operation_timeout: self.registry_timeout,
            max_layer_bytes: self.max_bundle_bytes,
            allowed_hosts: self
                .registry_allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            ..ClientOptions::default()
        };
        ResolverConfig {
            registry: registry::RegistryOptions {
                client,
                max_retries: self.registry_max_retries,
                max_concurrent_pulls: plan.concurrent_pulls,
                ..defaults.registry.clone()
            },
            bundle_ttl: self.bundle_cache_ttl,
            bundle_capacity: self.bundle_cache_size,
            bundle_cache_bytes: plan.bundle_cache_bytes,
            tags_cache_bytes: plan.tags_cache_bytes,
            max_concurrent_validations: plan.concurrent_parses,
            tags_ttl: self.tags_cache_ttl,
            failure_ttl: self.failure_cache_ttl,
            max_inline_bytes: self.max_inline_bytes,
            ..defaults
        }
    }
}

/// The resolver failed to start or to serve.
#[derive(Debug, thiserror::Error)]
pub enum ResolverError {
    /// The shared runtime failed (flags, logging, signals, TLS, listeners, serving).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The registry client could not be built.
    #[error(transparent)]
    Registry(#[from] registry::RegistryError),
    /// The budgets do not fit the memory limit.
    #[error(
        "the resolver's budgets do not fit --memory-limit: {0}; raise the limit or lower \
         --max-bundle-bytes, --max-concurrent-pulls or --bundle-cache-bytes"
    )]
    Memory(MemoryPlan),
    /// No Kubernetes client configuration was found.
    #[error(
        "no Kubernetes client configuration (in-cluster or KUBECONFIG); pass --no-kubernetes to run without pull-secret support"
    )]
    Kubernetes(#[source] kube::Error),
}

/// How the resolver names itself in its logs, and its metrics.
fn names() -> ServiceNames {
    ServiceNames {
        grpc: "ContractResolver",
        process: "contract resolver",
        describe_metrics: metrics::describe,
        build: pacto_runtime::build_info!(),
    }
}

/// Serves gRPC and the admin endpoints until `shutdown` is cancelled, then drains in-flight calls.
pub async fn serve(
    config: ServeConfig,
    service: ResolverService,
    shutdown: CancellationToken,
) -> Result<(), ResolverError> {
    let mut rt = Runtime::serving(config, names(), shutdown)?;
    serve_grpc(&mut rt, service)?;
    Ok(rt.run().await?)
}

/// Adds the ContractResolver service to `rt`'s gRPC port; ready at once.
fn serve_grpc(rt: &mut Runtime, service: ResolverService) -> Result<(), ResolverError> {
    let router = tonic::transport::Server::builder().add_service(
        tonic::service::interceptor::InterceptedService::new(
            ContractResolverServer::new(service)
                .max_decoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES)
                .max_encoding_message_size(pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES),
            rt.authorizer(SERVICE_NAME),
        ),
    );
    rt.serve_grpc(router)?;
    rt.ready_when(std::future::ready(true));
    Ok(())
}

/// Runs the service as the binary does: runtime, Kubernetes client, resolver, gRPC server, run
/// until drained.
pub async fn run(args: Args) -> Result<(), ResolverError> {
    let plan = args.memory_plan();
    if !plan.fits() {
        return Err(ResolverError::Memory(plan));
    }
    let mut rt = Runtime::start(&args.runtime, names()).await?;
    tracing::info!(%plan, "memory plan");
    let secrets: Option<Arc<dyn secrets::SecretSource>> = if args.no_kubernetes {
        tracing::warn!("--no-kubernetes: pull secrets cannot be read");
        None
    } else {
        let client = kube::Client::try_default()
            .await
            .map_err(ResolverError::Kubernetes)?;
        Some(Arc::new(secrets::KubeSecrets::new(client)))
    };
    let resolver = Resolver::new(args.resolver_config(), secrets)?;
    rt.bind_grpc(&args.server).await?;
    serve_grpc(&mut rt, ResolverService::new(Arc::new(resolver)))?;
    Ok(rt.run().await?)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn flags_have_defaults_and_env_vars() {
        Args::command().debug_assert();
        let args = Args::try_parse_from(["x", "--insecure-registries=127.0.0.1:5000, r.local"])
            .expect("parses");
        let config = args.resolver_config();
        assert_eq!(
            config.registry.client.insecure_registries,
            ["127.0.0.1:5000", "r.local"]
        );
        assert_eq!(config.tags_ttl, Duration::from_mins(5));
        assert_eq!(config.failure_ttl, Duration::from_secs(10));
        let off = Args::try_parse_from(["x", "--failure-cache-ttl=0"]).expect("parses");
        assert_eq!(off.resolver_config().failure_ttl, Duration::ZERO);
        assert_eq!(config.registry.max_retries, 2);
        assert_eq!(
            args.server.allowed_identities,
            ["spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer"]
        );
        // Derived from --memory-limit (256Mi): one worst-case pull and one validation at once.
        let plan = args.memory_plan();
        assert!(plan.fits(), "{plan}");
        assert_eq!(plan.limit, 256 * 1024 * 1024);
        assert_eq!(config.registry.max_concurrent_pulls, plan.concurrent_pulls);
        assert_eq!(config.bundle_cache_bytes, plan.bundle_cache_bytes);
        assert_eq!(config.max_concurrent_validations, plan.concurrent_parses);
        let explicit = Args::try_parse_from([
            "x",
            "--memory-limit=2Gi",
            "--max-concurrent-pulls=3",
            "--bundle-cache-bytes=1000",
        ])
        .expect("parses");
        let config = explicit.resolver_config();
        assert_eq!(config.registry.max_concurrent_pulls, 3);
        assert_eq!(config.bundle_cache_bytes, 1000);
        assert!(Args::try_parse_from(["x", "--memory-limit=lots"]).is_err());
        assert_eq!(
            config.registry.client.allowed_hosts.join(","),
            DEFAULT_ALLOWED_HOSTS
        );
        assert_eq!(
            pacto_oci::DEFAULT_ALLOWED_HOSTS.join(","),
            DEFAULT_ALLOWED_HOSTS
        );
        let none = Args::try_parse_from(["x", "--registry-allowed-hosts="]).expect("parses");
        assert!(
            none.resolver_config()
                .registry
                .client
                .allowed_hosts
                .is_empty()
        );
        assert!(Args::try_parse_from(["x", "--max-concurrent-pulls=0"]).is_err());
        assert_eq!(
            pacto_runtime::args::env_rule_violations(&Args::command(), "RESOLVER"),
            Vec::<String>::new()
        );
    }
}
