//! The Evidence Server (docs/design/evidence-server.md): signed evidence envelopes in over
//! HTTP on `/api/evidence/v1`, verified against the trust configuration, their contract
//! resolved through the contract-resolver and evaluated with the engine the evaluator uses,
//! and stored as one OCI referrer of the contract manifest per accepted record. The registry
//! is the only durable store; the process keeps no state that a restart would lose.
//!
//! - [`api`]: routing and the ingestion pipeline (its order and every stable error code:
//!   docs/design/evidence-server.md#pipeline);
//! - `body`: the byte-exact JSON bodies (Go `json.Encoder` forms);
//! - `pacto_runtime::http`: the accept loop, the connection cap and the deadlines, shared with
//!   every admin server (docs/design/evidence-server.md#limits);
//! - [`snapshot`]: `/ready` and `/targets` answered from a snapshot of the registry;
//! - [`resolve`]: the contract-resolver client;
//! - [`storage`]: what the server needs from the store, in the store's own types, implemented
//!   by the OCI store of `pacto-evidence` (`oci`);
//! - `metrics`: accepted/refused envelopes, commit latency, referrers mode;
//! - `testing` (feature `testing`): the server in process for tests;
//! - this module: flags, `run` and `serve` (the public HTTP port next to the shared admin
//!   server).

mod api;
mod body;
mod metrics;
mod oci;
mod resolve;
mod snapshot;
mod storage;
#[cfg(feature = "testing")]
pub mod testing;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use pacto_runtime::args::{EndpointArgs, GrpcClientArgs, Resolver, RuntimeArgs, service_env};
use pacto_runtime::grpc::{self, RetryPolicy, Transport};
use pacto_runtime::service::ServiceNames;
use pacto_runtime::{CancellationToken, Runtime, RuntimeError, parse_duration};
use tokio::net::TcpListener;

pub use api::{Api, MODE_HEADER, PREFIX, Verifier};
pub use metrics::{
    COMMIT_SECONDS, ENVELOPES_ACCEPTED_TOTAL, ENVELOPES_REFUSED_TOTAL, REFERRERS_MODE,
};
pub use pacto_runtime::http::Limits;
pub use resolve::ContractResolver;
pub use snapshot::Snapshots;
pub use storage::{NotReady, Storage, TargetsUnavailable};

/// The `pacto_name` the server sends with each Resolve (the resolver logs it; there is no Pacto).
pub const RESOLVE_CALLER: &str = "evidence-server";

/// Command line of `pacto-evidence-server`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pacto-evidence-server",
    version,
    about = "Serves the Evidence Server ingestion API (/api/evidence/v1): signed evidence in, one OCI referrer of the contract per accepted record out.",
    mut_args(service_env("EVIDENCE_SERVER"))
)]
pub struct Args {
    /// Listen address of the ingestion API (plain HTTP; terminate TLS in front of it).
    #[arg(
        long = "listen-address",
        value_name = "ADDR",
        default_value = "0.0.0.0:8686"
    )]
    pub listen_address: SocketAddr,
    /// The trust configuration: a `pacto.dev/evidence-trust/v1` YAML file, one `.pub` file, or
    /// a directory of `.pub` files.
    #[arg(long = "trust", value_name = "PATH")]
    pub trust: PathBuf,
    /// Contract subjects the server stores evidence for, `oci://<registry>/<repository>@sha256:<hex>`.
    /// Repeatable or comma-separated; at least one.
    #[arg(
        long = "subject",
        value_name = "REF",
        value_delimiter = ',',
        required = true
    )]
    pub subjects: Vec<String>,
    /// Producer ids listed by `/producers` (informational; the trust configuration decides who
    /// may post). Repeatable or comma-separated.
    #[arg(long = "producer", value_name = "ID", value_delimiter = ',')]
    pub producers: Vec<String>,
    /// Registry hosts (`host[:port]`) reached over plain HTTP. Comma-separated.
    #[arg(
        long = "insecure-registries",
        value_name = "HOSTS",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,
    /// `--resolver-addr`, `--resolver-server-name`.
    #[command(flatten)]
    pub resolver: EndpointArgs<Resolver>,
    /// Namespace sent with each Resolve (the server's own; no pull Secret is ever named).
    #[arg(
        long = "namespace",
        env = "POD_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "pacto-operator-system"
    )]
    pub namespace: String,
    /// Budget of the registry preflight behind `/ready` and the POST readiness gate.
    #[arg(
        long = "ready-timeout",
        value_name = "DURATION",
        default_value = "3s",
        value_parser = parse_duration
    )]
    pub ready_timeout: Duration,
    /// How long a client may take to send the request headers; also how long a kept-alive
    /// connection may stay idle between two requests.
    #[arg(
        long = "read-header-timeout",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub read_header_timeout: Duration,
    /// How long a client may take to send the request body once the headers are in (a late body
    /// is refused with invalid_envelope and the connection closed).
    #[arg(
        long = "read-body-timeout",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub read_body_timeout: Duration,
    /// How long one write of an answer may make no progress before the connection is closed (a
    /// client that stops reading).
    #[arg(
        long = "write-timeout",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub write_timeout: Duration,
    /// Connections served at once; more wait in the listen queue until one ends. Each may buffer
    /// a body of up to 1 MiB.
    #[arg(
        long = "max-connections",
        value_name = "N",
        default_value_t = 64,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_connections: u32,
    /// How long a /targets answer is reused before the registry is scanned again.
    #[arg(
        long = "targets-max-age",
        value_name = "DURATION",
        default_value = "2s",
        value_parser = parse_duration
    )]
    pub targets_max_age: Duration,
    /// Records kept per subject: the oldest beyond it are dropped from the listing
    /// (docs/design/evidence-store.md#retention); at most 10000.
    #[arg(
        long = "retention-max-records",
        value_name = "N",
        default_value_t = 1000,
        value_parser = clap::value_parser!(u32).range(1..=10_000)
    )]
    pub retention_max_records: u32,
    /// Age beyond which a record is dropped, counted from its subject's newest record (a
    /// target's latest record is always kept); 0s keeps records of any age.
    #[arg(
        long = "retention-max-age",
        value_name = "DURATION",
        default_value = "720h",
        value_parser = parse_duration
    )]
    pub retention_max_age: Duration,
    /// Timeouts and retries of the contract-resolver calls.
    #[command(flatten)]
    pub client: GrpcClientArgs,
    /// mTLS (the client certificate presented to the contract-resolver), admin port, logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// The server failed to start or to run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The shared runtime failed (flags, logging, signals, TLS, the resolver channel, admin).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The trust configuration could not be loaded (the source names the file and the entry).
    #[error("--trust: the trust configuration could not be loaded")]
    Trust(#[source] pacto_evidence::TrustError),
    /// A `--subject` value is not a digest-pinned `oci://` reference.
    #[error("--subject")]
    Subjects(#[source] pacto_evidence::store::SubjectsError),
    /// The registry credentials (`DOCKER_CONFIG`) could not be read.
    #[error("registry credentials (DOCKER_CONFIG)")]
    Credentials(#[source] pacto_oci::CredentialsError),
    /// The store (its registry clients) could not be built.
    #[error(transparent)]
    Store(#[from] pacto_evidence::StoreError),
    /// The API port could not be bound or accepting failed.
    #[error("ingestion API on {addr}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Args {
    /// The store's retention of the flags (`--retention-max-age=0s`: no age limit).
    pub fn retention(&self) -> pacto_evidence::Retention {
        pacto_evidence::Retention {
            max_age: (!self.retention_max_age.is_zero()).then_some(self.retention_max_age),
            max_records: usize::try_from(self.retention_max_records).unwrap_or(usize::MAX),
        }
    }

    /// The connection limits of the flags.
    pub fn limits(&self) -> Limits {
        Limits {
            header_timeout: self.read_header_timeout,
            body_timeout: self.read_body_timeout,
            write_timeout: self.write_timeout,
            max_connections: self.max_connections as usize,
        }
    }
}

/// The contract-resolver client of `args` over `transport`.
pub fn resolver(args: &Args, transport: &Transport) -> Result<ContractResolver, RuntimeError> {
    let spec = args.resolver.spec(&args.client);
    let channel = grpc::channel(&spec, transport).map_err(RuntimeError::from)?;
    Ok(ContractResolver::new(
        channel,
        RetryPolicy::from_args(&args.client),
        args.namespace.clone(),
    ))
}

/// Runs the server: starts the process (logging, metrics, signals, mTLS material), loads the
/// trust configuration, builds the store (no network I/O) and the resolver client, binds both
/// ports and serves until SIGTERM/SIGINT.
pub async fn run(args: Args) -> Result<(), ServerError> {
    let mut rt = Runtime::start(&args.runtime, names()).await?;
    let trust = pacto_evidence::TrustStore::load(&args.trust).map_err(ServerError::Trust)?;
    let subjects =
        pacto_evidence::store::Subjects::parse(&args.subjects).map_err(ServerError::Subjects)?;
    let docker = pacto_oci::DockerConfig::load_default().map_err(ServerError::Credentials)?;
    let keychain = pacto_oci::Keychain::new().with_docker_config(docker);
    let options = pacto_evidence::store::StoreOptions {
        client: pacto_oci::ClientOptions {
            insecure_registries: args.insecure_registries.clone(),
            ..pacto_oci::ClientOptions::default()
        },
        retention: args.retention(),
        ..pacto_evidence::store::StoreOptions::default()
    };
    let storage = pacto_evidence::store::Store::new(subjects, options, &keychain)?;
    let api = Api {
        verifier: Verifier::new(trust),
        producers: args.producers.clone(),
        storage,
        resolver: resolver(&args, rt.transport()?)?,
        ready_timeout: args.ready_timeout,
        body_timeout: args.read_body_timeout,
        snapshots: Snapshots::new(args.targets_max_age),
    };
    let listener = TcpListener::bind(args.listen_address)
        .await
        .map_err(|source| ServerError::Listen {
            addr: args.listen_address,
            source,
        })?;
    serve_api(&mut rt, api, listener, args.limits());
    run_runtime(rt).await
}

/// How the Evidence Server names itself in its logs, and its metrics.
fn names() -> ServiceNames {
    ServiceNames {
        grpc: "",
        process: "evidence-server",
        describe_metrics: metrics::describe,
        build: pacto_runtime::build_info!(),
    }
}

/// Serves `api` on `listener` within `limits` and the admin endpoints on `admin` until
/// `shutdown`, then drains. `/readyz` on the admin port turns ready once the API port serves.
pub async fn serve<S: Storage>(
    api: Api<S>,
    listener: TcpListener,
    admin: TcpListener,
    limits: Limits,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let mut rt = Runtime::new(names(), admin, shutdown)?;
    serve_api(&mut rt, api, listener, limits);
    run_runtime(rt).await
}

/// Adds the ingestion API on `listener` to `rt`; ready at once.
fn serve_api<S: Storage>(rt: &mut Runtime, api: Api<S>, listener: TcpListener, limits: Limits) {
    let api_addr = listener.local_addr().ok();
    tracing::info!(?api_addr, admin_addr = ?rt.admin_addr(), "serving the evidence API");
    rt.readiness().set(true);
    let api = Arc::new(api);
    rt.serve_http(listener, limits, move |request| {
        Arc::clone(&api).handle(request)
    });
}

/// Runs `rt` until drained; a failed API listener is reported as [`ServerError::Listen`].
async fn run_runtime(rt: Runtime) -> Result<(), ServerError> {
    rt.run().await.map_err(|error| match error {
        RuntimeError::Http { addr, source } => ServerError::Listen {
            addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            source,
        },
        error => ServerError::Runtime(error),
    })
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::Args;

    #[test]
    fn flags_follow_the_environment_variable_rule() {
        Args::command().debug_assert();
        assert_eq!(
            pacto_runtime::args::env_rule_violations(&Args::command(), "EVIDENCE_SERVER"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_subject_and_the_trust_configuration_are_required() {
        let err = Args::try_parse_from(["pacto-evidence-server", "--trust=/t"]).unwrap_err();
        assert!(err.to_string().contains("--subject"), "{err}");
        let err = Args::try_parse_from(["pacto-evidence-server", "--subject=oci://r/x@sha256:a"])
            .unwrap_err();
        assert!(err.to_string().contains("--trust"), "{err}");
        let args = Args::try_parse_from([
            "pacto-evidence-server",
            "--trust=/t",
            "--subject=oci://a/b@sha256:1,oci://a/c@sha256:2",
        ])
        .unwrap();
        assert_eq!(args.subjects.len(), 2);
        assert_eq!(args.listen_address.port(), 8686);
        assert_eq!(args.ready_timeout, std::time::Duration::from_secs(3));
        assert_eq!(args.limits(), super::Limits::default());
        assert_eq!(args.targets_max_age, std::time::Duration::from_secs(2));
        // The flags' defaults are the store's.
        assert_eq!(args.retention(), pacto_evidence::Retention::default());
        let err = Args::try_parse_from([
            "pacto-evidence-server",
            "--trust=/t",
            "--subject=oci://a/b@sha256:1",
            "--retention-max-records=10001",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("--retention-max-records"), "{err}");
        let forever = Args::try_parse_from([
            "pacto-evidence-server",
            "--trust=/t",
            "--subject=oci://a/b@sha256:1",
            "--retention-max-age=0s",
        ])
        .unwrap();
        assert_eq!(forever.retention().max_age, None);
        let err = Args::try_parse_from([
            "pacto-evidence-server",
            "--trust=/t",
            "--subject=oci://a/b@sha256:1",
            "--max-connections=0",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("--max-connections"), "{err}");
    }
}
