//! What a service's `serve` is given and how the service names itself; serving it is the
//! [`crate::Runtime`]'s (`Runtime::serving`).

use tokio::net::TcpListener;

use crate::{
    grpc::Transport,
    identity::{AllowList, Authorizer},
};

/// The listeners and transport of a gRPC service's `serve`, prepared by a test (a process binds
/// its own: `Runtime::start`, `Runtime::bind_grpc`).
#[derive(Debug)]
pub struct ServeConfig {
    /// Bound gRPC listener.
    pub grpc: TcpListener,
    /// Bound admin listener.
    pub admin: TcpListener,
    /// mTLS (or `--insecure`) transport.
    pub transport: Transport,
    /// Identities allowed to call the service (ignored with `--insecure`).
    pub allowed: AllowList,
}

impl ServeConfig {
    /// The interceptor guarding the gRPC service `service`: the allow-list under mTLS, and
    /// a pass-through in `--insecure` mode (no identities exist there).
    pub fn authorizer(&self, service: &'static str) -> Authorizer {
        if self.transport.is_mtls() {
            Authorizer::new(service, self.allowed.clone())
        } else {
            Authorizer::insecure(service)
        }
    }
}

/// How a service names itself in its logs, and its own metrics.
#[derive(Debug, Clone, Copy)]
pub struct ServiceNames {
    /// The gRPC service, e.g. `Evaluator` (in `serving <grpc>`; empty for a process without a
    /// gRPC server).
    pub grpc: &'static str,
    /// The process, e.g. `evaluator`.
    pub process: &'static str,
    /// Describes the service's own metrics (called once the recorder is installed).
    pub describe_metrics: fn(),
    /// What `/version` reports: `pacto_runtime::build_info!()` in the service crate.
    pub build: crate::build_info::BuildInfo,
}
