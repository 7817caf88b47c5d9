//! Starting a service process: the part of every service's `run` that comes before its own
//! wiring. [`start`] installs the rustls crypto provider, logging, the metrics recorder and the
//! signal handlers and loads the transport; [`Process::bind`] binds the gRPC and admin ports.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{
    admin,
    args::{RuntimeArgs, ServerArgs},
    error::RuntimeError,
    grpc::{self, Transport},
    identity::AllowList,
    service::ServeConfig,
};

/// A started service process.
#[derive(Debug)]
pub struct Process {
    /// Cancelled on SIGTERM or SIGINT; everything the process runs drains on it.
    pub shutdown: CancellationToken,
    /// mTLS with reloading material, or plaintext under `--insecure`.
    pub transport: Transport,
    admin_addr: SocketAddr,
}

/// Starts the process from its runtime flags: rustls' `ring` provider (kept if the process
/// already installed one), logging, the metrics recorder (before anything records), the signal
/// handlers, and the transport with its reloader.
///
/// Needs a Tokio runtime (the signal and reload tasks are spawned on it).
pub fn start(args: &RuntimeArgs) -> Result<Process, RuntimeError> {
    // An error only says a provider is installed already, which is all this ensures.
    let _ = rustls::crypto::ring::default_provider().install_default();
    crate::telemetry::init_tracing(&args.log)?;
    let mode = args.tls.mode()?;
    crate::metrics::install_recorder()?;
    let shutdown = crate::shutdown::on_signal()?;
    let transport = Transport::start(&mode, args.tls.reload_interval, &shutdown)?;
    Ok(Process {
        shutdown,
        transport,
        admin_addr: args.admin.addr,
    })
}

impl Process {
    /// Binds the gRPC port of `server` and the admin port: the [`ServeConfig`] of a serving
    /// service.
    pub async fn bind(&self, server: &ServerArgs) -> Result<ServeConfig, RuntimeError> {
        Ok(ServeConfig {
            grpc: grpc::bind(server.listen_addr).await?,
            admin: self.bind_admin().await?,
            transport: self.transport.clone(),
            allowed: AllowList::new(&server.allowed_identities),
        })
    }

    /// Binds the admin port only (a process without a gRPC server).
    pub async fn bind_admin(&self) -> Result<TcpListener, RuntimeError> {
        Ok(admin::bind(self.admin_addr).await?)
    }
}
