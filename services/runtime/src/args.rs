//! clap argument groups shared by every service. Each group is a `#[derive(Args)]` struct meant to
//! be `#[command(flatten)]`ed into a service's own `Parser`; defaults live here, in code.
//!
//! Environment variables follow one rule, checked for every binary by
//! `testing::env_rule_violations`: the shared runtime flags ([`RuntimeArgs`], [`GrpcClientArgs`])
//! read `PACTO_<FLAG>`, every other flag reads `PACTO_<SERVICE>_<FLAG>` (`<FLAG>` is the long flag
//! in upper snake case). [`ServerArgs`] belongs to the second kind: the service names its two
//! variables with [`server_env`].

use std::{net::SocketAddr, path::PathBuf, time::Duration};

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
}

/// How the service's gRPC traffic is protected, derived from [`TlsArgs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportMode {
    /// Plaintext gRPC: only behind the explicit `--insecure` development flag.
    Insecure,
    /// Mutual TLS with the given PEM files.
    Mtls(TlsFiles),
}

/// The flags every service process has: mTLS material, admin port and logging.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// mTLS material (server port and clients).
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Admin port.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
}

/// The gRPC port of a serving service and who may call it.
///
/// Both flags are service flags, so their variables carry the service's prefix, which a derived
/// group cannot know; the service names them with [`server_env`] on its `Parser`.
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

/// Names the environment variables of the [`ServerArgs`] flags, for the service's `Parser`:
/// `#[command(mut_args(server_env("PACTO_EVALUATOR_LISTEN_ADDR", "PACTO_EVALUATOR_ALLOWED_IDENTITIES")))]`.
/// (`mut_args` keeps the flags in place; `mut_arg` would move them to the end of `--help`.)
pub fn server_env(
    listen_addr: &'static str,
    allowed_identities: &'static str,
) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |arg| match arg.get_id().as_str() {
        "listen_addr" => arg.env(listen_addr),
        "allowed_identities" => arg.env(allowed_identities),
        _ => arg,
    }
}

/// mTLS material shared by the service's server port and its clients.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// PEM bundle of the certificate authorities that sign peer certificates (clients of this
    /// service and the servers it calls).
    #[arg(long = "tls-ca", env = "PACTO_TLS_CA", value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// PEM certificate chain of this service (leaf first). Used both as the server certificate and
    /// as the client certificate when calling other services.
    #[arg(long = "tls-cert", env = "PACTO_TLS_CERT", value_name = "PATH")]
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `--tls-cert`.
    #[arg(long = "tls-key", env = "PACTO_TLS_KEY", value_name = "PATH")]
    pub key: Option<PathBuf>,
    /// How often the three files are checked for changes; a changed, valid set replaces the
    /// current one for new connections without a restart. Go duration syntax.
    #[arg(
        long = "tls-reload-interval",
        env = "PACTO_TLS_RELOAD_INTERVAL",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub reload_interval: Duration,
    /// Development only: serve and call gRPC in plaintext, without client authentication.
    #[arg(long = "insecure", env = "PACTO_INSECURE", default_value_t = false)]
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
        env = "PACTO_ADMIN_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:9090"
    )]
    pub addr: SocketAddr,
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
    #[arg(
        long = "log-level",
        env = "PACTO_LOG_LEVEL",
        value_name = "FILTER",
        default_value = "info"
    )]
    pub level: String,
    /// Log output format.
    #[arg(
        long = "log-format",
        env = "PACTO_LOG_FORMAT",
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
        env = "PACTO_GRPC_CONNECT_TIMEOUT",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_duration
    )]
    pub connect_timeout: Duration,
    /// Deadline of a single RPC attempt.
    #[arg(
        long = "grpc-request-timeout",
        env = "PACTO_GRPC_REQUEST_TIMEOUT",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub request_timeout: Duration,
    /// Retries of a call that failed with a transient status (Unavailable, ResourceExhausted,
    /// Aborted); 0 disables retries.
    #[arg(
        long = "grpc-max-retries",
        env = "PACTO_GRPC_MAX_RETRIES",
        value_name = "N",
        default_value_t = 3
    )]
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
    let shared: Vec<clap::Command> = vec![
        RuntimeArgs::augment_args(clap::Command::new("runtime")),
        GrpcClientArgs::augment_args(clap::Command::new("client")),
    ];
    let is_shared = |long: &str| {
        shared
            .iter()
            .flat_map(clap::Command::get_arguments)
            .any(|arg| arg.get_long() == Some(long))
    };
    let mut violations = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else {
            violations.push(format!("{} is not a --flag", arg.get_id()));
            continue;
        };
        if matches!(long, "help" | "version") {
            continue;
        }
        let flag = long.to_uppercase().replace('-', "_");
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

    #[test]
    fn command_is_consistent() {
        use clap::CommandFactory;
        TestArgs::command().debug_assert();
        DemoArgs::command().debug_assert();
    }

    /// A service `DEMO` laid out like the real ones.
    #[derive(Debug, Parser)]
    #[command(mut_args(server_env("PACTO_DEMO_LISTEN_ADDR", "PACTO_DEMO_ALLOWED_IDENTITIES")))]
    struct DemoArgs {
        #[arg(long = "watch-namespace", env = "PACTO_DEMO_WATCH_NAMESPACE")]
        watch_namespace: Option<String>,
        #[arg(long = "pod-name", env = "POD_NAME")]
        pod_name: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        client: GrpcClientArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    /// `DEMO` breaking the rule in each possible way.
    #[derive(Debug, Parser)]
    struct UnprefixedArgs {
        #[arg(long = "watch-namespace", env = "PACTO_WATCH_NAMESPACE")]
        watch_namespace: Option<String>,
        #[arg(long = "no-env")]
        no_env: bool,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
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
                "--listen-addr reads PACTO_DEMO_LISTEN_ADDR, expected PACTO_OTHER_LISTEN_ADDR",
                "--allowed-identities reads PACTO_DEMO_ALLOWED_IDENTITIES, expected PACTO_OTHER_ALLOWED_IDENTITIES",
            ]
        );
        let broken = env_rule_violations(&UnprefixedArgs::command(), "DEMO");
        assert_eq!(
            broken,
            [
                "--watch-namespace reads PACTO_WATCH_NAMESPACE, expected PACTO_DEMO_WATCH_NAMESPACE",
                "--no-env has no environment variable (PACTO_DEMO_NO_ENV)",
                "--listen-addr has no environment variable (PACTO_DEMO_LISTEN_ADDR)",
                "--allowed-identities has no environment variable (PACTO_DEMO_ALLOWED_IDENTITIES)",
            ]
        );
    }
}
