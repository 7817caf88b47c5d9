//! [`RuntimeError`]: everything the shared runtime can fail with while a service starts or
//! serves. Each service's own error wraps it in one variant, next to the failures only that
//! service has (a Kubernetes client, a registry client, …).

use crate::{
    admin::AdminError, args::ArgsError, grpc::GrpcError, metrics::MetricsError,
    secure_metrics::SecureMetricsError, shutdown::ShutdownError, telemetry::TelemetryError,
};

/// Starting or serving a service process failed in the shared runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Invalid flag combination.
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// Logging could not be initialised.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// The metrics recorder could not be installed.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// Signal handlers could not be installed.
    #[error(transparent)]
    Shutdown(#[from] ShutdownError),
    /// The admin server failed.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The HTTPS metrics server could not be set up (`--metrics-secure`).
    #[error(transparent)]
    SecureMetrics(#[from] SecureMetricsError),
    /// The gRPC server or a client channel failed (including TLS loading).
    #[error(transparent)]
    Grpc(#[from] GrpcError),
    /// An HTTP server's listener failed (accepting stopped).
    #[error("the HTTP server on {} stopped accepting", addr.map_or_else(|| "?".to_owned(), |a| a.to_string()))]
    Http {
        /// The listener's address, if it had one.
        addr: Option<std::net::SocketAddr>,
        /// The accept error.
        #[source]
        source: std::io::Error,
    },
    /// A server task panicked or was cancelled.
    #[error("the {name} server task failed")]
    Task {
        /// `grpc`, `http` or `secure-metrics`.
        name: &'static str,
        /// The join error.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The process has no transport (a runtime built without one cannot bind a gRPC port).
    #[error("the runtime has no transport to serve gRPC with")]
    NoTransport,
    /// `serve_grpc` without a bound gRPC port (or called twice).
    #[error("the runtime has no gRPC port to serve on")]
    NoGrpcPort,
}
