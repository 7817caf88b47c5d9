//! clap argument groups shared by every service. Each group is a `#[derive(Args)]` struct meant to
//! be `#[command(flatten)]`ed into a service's own `Parser`. Every flag has an environment variable
//! (`PACTO_…`); defaults live here, in code.

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
    }
}
