//! clap argument groups shared by every service. Each group is a `#[derive(Args)]` struct meant to
//! be `#[command(flatten)]`ed into a service's own `Parser`; defaults live here, in code.
//!
//! Environment variables are derived from the flag names, never written by hand: a service's
//! `Parser` carries `#[command(mut_args(service_env("<SERVICE>")))]`, which gives the shared
//! runtime flags ([`RuntimeArgs`], [`GrpcClientArgs`]) `PACTO_<FLAG>` and every other flag
//! `PACTO_<SERVICE>_<FLAG>` (`<FLAG>` is the long flag in upper snake case). A flag Kubernetes
//! fills from the pod (`POD_NAME`, …) names that variable itself and keeps it.
//! [`env_rule_violations`], called from every service's flags test, checks the outcome.
//!
//! Groups a service takes more than once or that several services share are declared once here:
//! [`EndpointArgs`] (the address and certificate name of a gRPC service called, its flags named
//! after the [`Peer`]) and [`ScopeArgs`] (the namespace scope).

use std::{marker::PhantomData, net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, ValueEnum};

use crate::{duration::parse_duration, tls::TlsFiles};

/// A combination of flags that cannot be used together or is incomplete.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// mTLS is the default, so the three PEM files are needed unless `--insecure` is given.
    #[error("{flag} is required unless --insecure is set (mTLS is the default)")]
    MissingTlsFile {
        /// The missing flag.
        flag: &'static str,
    },
    /// Secure metrics are served with the service's own certificate, which `--insecure` does
    /// without (docs/design/architecture.md#secure-metrics).
    #[error(
        "--metrics-secure serves /metrics over HTTPS with --tls-cert and --tls-key, which --insecure turns off; drop one of the two flags"
    )]
    SecureMetricsWithoutTls,
}

/// How the service's gRPC traffic is protected, derived from [`TlsArgs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportMode {
    /// Plaintext gRPC: only behind the explicit `--insecure` development flag.
    Insecure,
    /// Mutual TLS with the given PEM files.
    Mtls(TlsFiles),
}

/// The flags every service process has: mTLS material, admin port, secure metrics and logging.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// mTLS material (server port and clients).
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Admin port.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// `/metrics` over HTTPS with authenticated, authorised scrapes.
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

/// The gRPC port of a serving service and who may call it (service flags: their variables carry
/// the service's prefix, given by [`service_env`]).
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// gRPC listen address.
    #[arg(
        long = "listen-addr",
        value_name = "ADDR",
        default_value = "0.0.0.0:8443"
    )]
    pub listen_addr: SocketAddr,
    /// Client certificate identities (URI or DNS SANs; a trailing `*` matches a prefix) allowed
    /// to call the service. Comma-separated. The default is the status-writer's SPIFFE ID
    /// (docs/design/identity.md).
    #[arg(
        long = "allowed-identities",
        value_name = "SAN,…",
        value_delimiter = ',',
        default_value = crate::identity::DEFAULT_STATUS_WRITER_IDENTITY
    )]
    pub allowed_identities: Vec<String>,
}

/// The long flags of the shared runtime groups ([`RuntimeArgs`], [`GrpcClientArgs`]), whose
/// variables carry no service part.
fn shared_flags() -> Vec<String> {
    [
        RuntimeArgs::augment_args(clap::Command::new("runtime")),
        GrpcClientArgs::augment_args(clap::Command::new("client")),
    ]
    .iter()
    .flat_map(clap::Command::get_arguments)
    .filter_map(clap::Arg::get_long)
    .map(str::to_owned)
    .collect()
}

/// `--tls-reload-interval` → `TLS_RELOAD_INTERVAL`.
fn upper_snake(long: &str) -> String {
    long.to_uppercase().replace('-', "_")
}

/// Names the environment variable of every flag of a service's `Parser` after the flag:
/// `#[command(mut_args(service_env("STATUS_WRITER")))]` gives the shared runtime flags
/// `PACTO_<FLAG>` and the rest `PACTO_STATUS_WRITER_<FLAG>`. A flag that already names a
/// variable (one Kubernetes fills from the pod, e.g. `POD_NAME`) keeps it. (`mut_args` keeps the
/// flags in place; `mut_arg` would move them to the end of `--help`.)
pub fn service_env(service: &'static str) -> impl FnMut(clap::Arg) -> clap::Arg {
    let shared = shared_flags();
    move |arg| {
        let Some(long) = arg.get_long() else {
            return arg;
        };
        if arg.get_env().is_some() || matches!(long, "help" | "version") {
            return arg;
        }
        let flag = upper_snake(long);
        let env = if shared.iter().any(|s| s == long) {
            format!("PACTO_{flag}")
        } else {
            format!("PACTO_{service}_{flag}")
        };
        arg.env(env)
    }
}

/// A gRPC service another service calls, as its callers' flags name it: [`EndpointArgs<P>`]
/// reads `--<ADDR_FLAG>` and `--<SERVER_NAME_FLAG>`. Implement it with [`peer!`](crate::peer).
pub trait Peer: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// The address flag, e.g. `resolver-addr` (also the argument's clap id).
    const ADDR_FLAG: &'static str;
    /// The certificate-name flag, e.g. `resolver-server-name` (also the argument's clap id).
    const SERVER_NAME_FLAG: &'static str;
    /// Default of the address flag.
    const DEFAULT_ADDR: &'static str;
    /// Help of the address flag.
    const ADDR_HELP: &'static str;
    /// Help of the certificate-name flag.
    const SERVER_NAME_HELP: &'static str;
}

/// Declares a [`Peer`]: a unit type whose flags are `--<flag>-addr` and `--<flag>-server-name`,
/// the second's help naming the service `<service>`.
///
/// ```
/// pacto_runtime::peer!(
///     /// The contract-resolver.
///     pub Resolver: "resolver" is "contract-resolver",
///     default "contract-resolver.pacto.svc:8443",
///     help "Address of the contract-resolver gRPC service (`host:port`)"
/// );
/// ```
#[macro_export]
macro_rules! peer {
    (
        $(#[$meta:meta])*
        $vis:vis $name:ident: $flag:literal is $service:literal,
        default $default:expr,
        help $help:expr
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy)]
        $vis struct $name;

        impl $crate::args::Peer for $name {
            const ADDR_FLAG: &'static str = concat!($flag, "-addr");
            const SERVER_NAME_FLAG: &'static str = concat!($flag, "-server-name");
            const DEFAULT_ADDR: &'static str = $default;
            const ADDR_HELP: &'static str = $help;
            const SERVER_NAME_HELP: &'static str = concat!(
                "Name the ",
                $service,
                "'s certificate must carry (default: the address's host)"
            );
        }
    };
}

peer!(
    /// The contract-resolver, as the status-writer and the Evidence Server call it.
    pub Resolver: "resolver" is "contract-resolver",
    default "contract-resolver.pacto.svc:8443",
    help "Address of the contract-resolver gRPC service (`host:port`)"
);
peer!(
    /// The observer, as the status-writer calls it.
    pub Observer: "observer" is "observer",
    default "observer.pacto.svc:8443",
    help "Address of the observer gRPC service"
);
peer!(
    /// The evaluator, as the status-writer calls it.
    pub Evaluator: "evaluator" is "evaluator",
    default "evaluator.pacto.svc:8443",
    help "Address of the evaluator gRPC service"
);

/// Where a called gRPC service is: `--<peer>-addr` and `--<peer>-server-name`, named by `P`.
/// (No clap group: a service flattens several of these.)
#[derive(Debug, Clone, Args)]
#[group(skip)]
pub struct EndpointArgs<P: Peer> {
    /// The service's address (`host:port`, or a URI).
    #[arg(
        id = P::ADDR_FLAG,
        long = P::ADDR_FLAG,
        value_name = "ADDR",
        default_value = P::DEFAULT_ADDR,
        help = P::ADDR_HELP
    )]
    pub addr: String,
    /// The name the service's certificate must carry (default: the address's host).
    #[arg(
        id = P::SERVER_NAME_FLAG,
        long = P::SERVER_NAME_FLAG,
        value_name = "NAME",
        help = P::SERVER_NAME_HELP
    )]
    pub server_name: Option<String>,
    #[arg(skip)]
    peer: PhantomData<P>,
}

/// The namespaces a service works on (the observer's and the status-writer's;
/// docs/design/architecture.md#namespace-scope).
#[derive(Debug, Clone, Args)]
pub struct ScopeArgs {
    /// Watch and list only this namespace (default: every namespace).
    #[arg(long = "watch-namespace", value_name = "NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// Work only on namespaces whose labels match this Kubernetes label selector (e.g.
    /// `pacto.trianalab.io/audit=enabled`; default: every namespace): the status-writer
    /// reconciles no Pacto elsewhere; the observer refuses Observe for another namespace and
    /// streams no target change from it. Needs list/watch on Namespaces.
    #[arg(long = "namespace-selector", value_name = "SELECTOR")]
    pub namespace_selector: Option<String>,
    /// Never work on these namespaces (comma-separated), selector or not.
    #[arg(
        long = "exclude-namespaces",
        value_name = "NAMESPACES",
        value_delimiter = ','
    )]
    pub exclude_namespaces: Vec<String>,
}

#[cfg(feature = "watch")]
impl ScopeArgs {
    /// The scope `--namespace-selector` and `--exclude-namespaces` describe.
    pub fn namespace_scope(
        &self,
    ) -> Result<crate::scope::NamespaceScope, crate::scope::ScopeError> {
        crate::scope::NamespaceScope::new(
            self.namespace_selector.as_deref(),
            self.exclude_namespaces.clone(),
        )
    }
}

/// mTLS material shared by the service's server port and its clients.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// PEM bundle of the certificate authorities that sign peer certificates (clients of this
    /// service and the servers it calls).
    #[arg(long = "tls-ca", value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// PEM certificate chain of this service (leaf first). Used both as the server certificate and
    /// as the client certificate when calling other services.
    #[arg(long = "tls-cert", value_name = "PATH")]
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `--tls-cert`.
    #[arg(long = "tls-key", value_name = "PATH")]
    pub key: Option<PathBuf>,
    /// How often the three files are checked for changes; a changed, valid set replaces the
    /// current one for new connections without a restart. Go duration syntax.
    #[arg(
        long = "tls-reload-interval",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub reload_interval: Duration,
    /// Development only: serve and call gRPC in plaintext, without client authentication.
    #[arg(long = "insecure", default_value_t = false)]
    pub insecure: bool,
}

impl TlsArgs {
    /// The transport the flags select; mTLS needs all three files.
    pub fn mode(&self) -> Result<TransportMode, ArgsError> {
        if self.insecure {
            return Ok(TransportMode::Insecure);
        }
        let ca = self
            .ca
            .clone()
            .ok_or(ArgsError::MissingTlsFile { flag: "--tls-ca" })?;
        let cert = self
            .cert
            .clone()
            .ok_or(ArgsError::MissingTlsFile { flag: "--tls-cert" })?;
        let key = self
            .key
            .clone()
            .ok_or(ArgsError::MissingTlsFile { flag: "--tls-key" })?;
        Ok(TransportMode::Mtls(TlsFiles { ca, cert, key }))
    }
}

/// The admin HTTP port (`/metrics`, `/healthz`, `/readyz`).
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Listen address of the admin HTTP server.
    #[arg(
        long = "admin-addr",
        value_name = "ADDR",
        default_value = "0.0.0.0:9090"
    )]
    pub addr: SocketAddr,
}

/// Secure metrics (docs/design/architecture.md#secure-metrics): `/metrics` over HTTPS, each
/// scrape authenticated with a TokenReview and authorised with a SubjectAccessReview.
#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    /// Serve `/metrics` over HTTPS on `--metrics-addr` (with `--tls-cert`/`--tls-key`; no client
    /// certificate asked for) instead of on the admin port, to scrapers whose bearer token the
    /// API server authenticates and allows `get` on the non-resource URL `/metrics`. The probes
    /// stay on the admin port. Needs create on TokenReviews and SubjectAccessReviews.
    #[arg(
        id = "metrics_secure",
        long = "metrics-secure",
        default_value_t = false
    )]
    pub secure: bool,
    /// Listen address of the HTTPS metrics server (used only with `--metrics-secure`).
    #[arg(
        id = "metrics_addr",
        long = "metrics-addr",
        value_name = "ADDR",
        default_value = "0.0.0.0:9443"
    )]
    pub addr: SocketAddr,
}

impl MetricsArgs {
    /// Checks the flags against the TLS flags: secure metrics need the service's certificate.
    pub fn check(&self, tls: &TlsArgs) -> Result<(), ArgsError> {
        if self.secure && tls.insecure {
            return Err(ArgsError::SecureMetricsWithoutTls);
        }
        Ok(())
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the default; for log collectors).
    Json,
    /// Human-readable text.
    Text,
}

/// Logging.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log filter in `tracing` `EnvFilter` syntax, e.g. `info` or `info,pacto_runtime=debug`.
    #[arg(long = "log-level", value_name = "FILTER", default_value = "info")]
    pub level: String,
    /// Log output format.
    #[arg(
        long = "log-format",
        value_enum,
        default_value_t = LogFormat::Json
    )]
    pub format: LogFormat,
}

/// Timeouts and retries of the gRPC clients a service uses to call other services.
#[derive(Debug, Clone, Args)]
pub struct GrpcClientArgs {
    /// Timeout for establishing a connection (TCP + TLS handshake).
    #[arg(
        long = "grpc-connect-timeout",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_duration
    )]
    pub connect_timeout: Duration,
    /// Deadline of a single RPC attempt.
    #[arg(
        long = "grpc-request-timeout",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub request_timeout: Duration,
    /// Retries of a call that failed with a transient status (Unavailable, ResourceExhausted,
    /// Aborted); 0 disables retries.
    #[arg(long = "grpc-max-retries", value_name = "N", default_value_t = 3)]
    pub max_retries: usize,
}

/// Variables Kubernetes fills from the pod's own metadata and spec (the charts set them through
/// the downward API); a service flag may read one of these instead of a `PACTO_<SERVICE>_`
/// variable. `NODE_NAME` (`spec.nodeName`) is the node agent's.
#[cfg(any(test, feature = "test-support"))]
const POD_ENV: &[&str] = &["POD_NAME", "POD_NAMESPACE", "NODE_NAME"];

/// Where the flags of a service binary break the environment-variable rule: every flag reads
/// `PACTO_<FLAG>` if it is a shared runtime flag ([`RuntimeArgs`], [`GrpcClientArgs`]) and
/// `PACTO_<service>_<FLAG>` otherwise (or one of [`POD_ENV`]), where `<FLAG>` is the long flag in
/// upper snake case and `service` the upper-snake service part, e.g. `STATUS_WRITER`.
#[cfg(any(test, feature = "test-support"))]
pub fn env_rule_violations(cmd: &clap::Command, service: &str) -> Vec<String> {
    let shared_flags = shared_flags();
    let is_shared = |long: &str| shared_flags.iter().any(|s| s == long);
    let mut violations = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else {
            violations.push(format!("{} is not a --flag", arg.get_id()));
            continue;
        };
        if matches!(long, "help" | "version") {
            continue;
        }
        let flag = upper_snake(long);
        let shared = is_shared(long);
        let expected = if shared {
            format!("PACTO_{flag}")
        } else {
            format!("PACTO_{service}_{flag}")
        };
        match arg.get_env().and_then(std::ffi::OsStr::to_str) {
            Some(env) if env == expected || (!shared && POD_ENV.contains(&env)) => {}
            Some(env) => violations.push(format!("--{long} reads {env}, expected {expected}")),
            None => violations.push(format!("--{long} has no environment variable ({expected})")),
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct TestArgs {
        #[command(flatten)]
        tls: TlsArgs,
        #[command(flatten)]
        admin: AdminArgs,
        #[command(flatten)]
        log: LogArgs,
        #[command(flatten)]
        client: GrpcClientArgs,
    }

    #[test]
    fn defaults_and_mtls_requirement() {
        let args = TestArgs::try_parse_from(["x"]).unwrap();
        assert_eq!(args.admin.addr, "0.0.0.0:9090".parse().unwrap());
        assert_eq!(args.log.format, LogFormat::Json);
        assert_eq!(args.tls.reload_interval, Duration::from_secs(10));
        assert_eq!(args.client.max_retries, 3);
        let err = args.tls.mode().unwrap_err();
        assert!(err.to_string().contains("--tls-ca"), "{err}");

        let args = TestArgs::try_parse_from(["x", "--insecure"]).unwrap();
        assert_eq!(args.tls.mode().unwrap(), TransportMode::Insecure);

        let args = TestArgs::try_parse_from([
            "x",
            "--tls-ca=/a",
            "--tls-cert=/b",
            "--tls-key=/c",
            "--tls-reload-interval=500ms",
        ])
        .unwrap();
        assert_eq!(args.tls.reload_interval, Duration::from_millis(500));
        assert!(matches!(args.tls.mode().unwrap(), TransportMode::Mtls(_)));
    }

    /// A service's runtime flags as the binaries flatten them.
    #[derive(Debug, Parser)]
    struct RuntimeOnly {
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    #[test]
    fn secure_metrics_default_off_on_9443_and_refuse_insecure() {
        let args = RuntimeOnly::try_parse_from(["x", "--insecure"]).unwrap();
        assert!(!args.runtime.metrics.secure);
        assert_eq!(args.runtime.metrics.addr, "0.0.0.0:9443".parse().unwrap());
        args.runtime.metrics.check(&args.runtime.tls).unwrap();

        let args = RuntimeOnly::try_parse_from([
            "x",
            "--tls-ca=/a",
            "--tls-cert=/b",
            "--tls-key=/c",
            "--metrics-secure",
            "--metrics-addr=127.0.0.1:9443",
        ])
        .unwrap();
        assert!(args.runtime.metrics.secure);
        assert_eq!(args.runtime.metrics.addr, "127.0.0.1:9443".parse().unwrap());
        args.runtime.metrics.check(&args.runtime.tls).unwrap();

        let args = RuntimeOnly::try_parse_from(["x", "--insecure", "--metrics-secure"]).unwrap();
        let error = args.runtime.metrics.check(&args.runtime.tls).unwrap_err();
        assert!(
            matches!(error, ArgsError::SecureMetricsWithoutTls),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("--metrics-secure") && text.contains("--insecure"),
            "{text}"
        );
    }

    #[test]
    fn command_is_consistent() {
        use clap::CommandFactory;
        TestArgs::command().debug_assert();
        RuntimeOnly::command().debug_assert();
        DemoArgs::command().debug_assert();
        MisnamedArgs::command().debug_assert();
        UnnamedArgs::command().debug_assert();
    }

    /// A service `DEMO` laid out like the real ones.
    #[derive(Debug, Parser)]
    #[command(mut_args(service_env("DEMO")))]
    struct DemoArgs {
        #[command(flatten)]
        scope: ScopeArgs,
        #[arg(long = "pod-name", env = "POD_NAME")]
        pod_name: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        resolver: EndpointArgs<Resolver>,
        #[command(flatten)]
        observer: EndpointArgs<Observer>,
        #[command(flatten)]
        client: GrpcClientArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    /// `DEMO` with a variable written by hand, wrongly.
    #[derive(Debug, Parser)]
    #[command(mut_args(service_env("DEMO")))]
    struct MisnamedArgs {
        #[arg(long = "watch-namespace", env = "PACTO_WATCH_NAMESPACE")]
        watch_namespace: Option<String>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    /// `DEMO` without `service_env`: no flag has a variable.
    #[derive(Debug, Parser)]
    struct UnnamedArgs {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        admin: AdminArgs,
    }

    fn env_of(cmd: &clap::Command, long: &str) -> Option<String> {
        let arg = cmd.get_arguments().find(|a| a.get_long() == Some(long))?;
        Some(arg.get_env()?.to_str()?.to_owned())
    }

    #[test]
    fn variables_are_named_after_the_flags() {
        use clap::CommandFactory;
        let cmd = DemoArgs::command();
        for (long, env) in [
            ("watch-namespace", "PACTO_DEMO_WATCH_NAMESPACE"),
            ("exclude-namespaces", "PACTO_DEMO_EXCLUDE_NAMESPACES"),
            ("pod-name", "POD_NAME"),
            ("listen-addr", "PACTO_DEMO_LISTEN_ADDR"),
            ("resolver-addr", "PACTO_DEMO_RESOLVER_ADDR"),
            ("resolver-server-name", "PACTO_DEMO_RESOLVER_SERVER_NAME"),
            ("observer-server-name", "PACTO_DEMO_OBSERVER_SERVER_NAME"),
            ("grpc-max-retries", "PACTO_GRPC_MAX_RETRIES"),
            ("tls-reload-interval", "PACTO_TLS_RELOAD_INTERVAL"),
            ("log-format", "PACTO_LOG_FORMAT"),
        ] {
            assert_eq!(env_of(&cmd, long).as_deref(), Some(env), "--{long}");
        }
        assert_eq!(env_of(&cmd, "help"), None);
    }

    #[test]
    fn endpoint_groups_are_told_apart() {
        let args = DemoArgs::try_parse_from([
            "x",
            "--observer-addr=o:1",
            "--resolver-server-name=r.local",
        ])
        .unwrap();
        assert_eq!(args.resolver.addr, "contract-resolver.pacto.svc:8443");
        assert_eq!(args.resolver.server_name.as_deref(), Some("r.local"));
        assert_eq!(args.observer.addr, "o:1");
        assert_eq!(args.observer.server_name, None);
        let spec = args.resolver.spec(&args.client);
        assert_eq!(spec.address, "contract-resolver.pacto.svc:8443");
        assert_eq!(spec.server_name.as_deref(), Some("r.local"));
        assert_eq!(spec.request_timeout, Duration::from_secs(30));

        let args = DemoArgs::try_parse_from(["x", "--exclude-namespaces=a,b"]).unwrap();
        assert_eq!(args.scope.exclude_namespaces, ["a", "b"]);
        assert_eq!(args.scope.watch_namespace, None);
    }

    #[test]
    fn env_rule_separates_runtime_and_service_flags() {
        use clap::CommandFactory;
        assert_eq!(
            env_rule_violations(&DemoArgs::command(), "DEMO"),
            Vec::<String>::new()
        );
        let other = env_rule_violations(&DemoArgs::command(), "OTHER");
        assert_eq!(
            other,
            [
                "--watch-namespace reads PACTO_DEMO_WATCH_NAMESPACE, expected PACTO_OTHER_WATCH_NAMESPACE",
                "--namespace-selector reads PACTO_DEMO_NAMESPACE_SELECTOR, expected PACTO_OTHER_NAMESPACE_SELECTOR",
                "--exclude-namespaces reads PACTO_DEMO_EXCLUDE_NAMESPACES, expected PACTO_OTHER_EXCLUDE_NAMESPACES",
                "--listen-addr reads PACTO_DEMO_LISTEN_ADDR, expected PACTO_OTHER_LISTEN_ADDR",
                "--allowed-identities reads PACTO_DEMO_ALLOWED_IDENTITIES, expected PACTO_OTHER_ALLOWED_IDENTITIES",
                "--resolver-addr reads PACTO_DEMO_RESOLVER_ADDR, expected PACTO_OTHER_RESOLVER_ADDR",
                "--resolver-server-name reads PACTO_DEMO_RESOLVER_SERVER_NAME, expected PACTO_OTHER_RESOLVER_SERVER_NAME",
                "--observer-addr reads PACTO_DEMO_OBSERVER_ADDR, expected PACTO_OTHER_OBSERVER_ADDR",
                "--observer-server-name reads PACTO_DEMO_OBSERVER_SERVER_NAME, expected PACTO_OTHER_OBSERVER_SERVER_NAME",
            ]
        );
        assert_eq!(
            env_rule_violations(&MisnamedArgs::command(), "DEMO"),
            ["--watch-namespace reads PACTO_WATCH_NAMESPACE, expected PACTO_DEMO_WATCH_NAMESPACE",]
        );
        assert_eq!(
            env_rule_violations(&UnnamedArgs::command(), "DEMO"),
            [
                "--listen-addr has no environment variable (PACTO_DEMO_LISTEN_ADDR)",
                "--allowed-identities has no environment variable (PACTO_DEMO_ALLOWED_IDENTITIES)",
                "--admin-addr has no environment variable (PACTO_ADMIN_ADDR)",
            ]
        );
    }
}
