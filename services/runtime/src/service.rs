//! Running one gRPC service process: the gRPC server and the admin server side by side, with
//! readiness and graceful shutdown handled the same way in every Pacto service.

use std::future::Future;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;

use crate::{
    admin::{AdminServer, MetricsEndpoint},
    error::RuntimeError,
    grpc::{self, Transport},
    identity::{AllowList, Authorizer},
};

/// Everything a service's `serve` needs, prepared by its `run` or by a test.
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
    /// The gRPC service, e.g. `Evaluator`.
    pub grpc: &'static str,
    /// The process, e.g. `evaluator`.
    pub process: &'static str,
    /// Describes the service's own metrics (called once the recorder is installed).
    pub describe_metrics: fn(),
    /// What `/version` reports: `pacto_runtime::build_info!()` in the service crate.
    pub build: crate::build_info::BuildInfo,
}

/// Serves `router` on `config.grpc` and the admin endpoints on `config.admin` until `shutdown`
/// is cancelled, then drains in-flight calls and stops both. Installs the metrics recorder (if
/// no one did yet) and describes the service's metrics first.
///
/// `/readyz` turns ready when `ready` resolves to `true` (pass `std::future::ready(true)` for
/// a service that is ready at once) and unready as soon as shutdown starts. The logs say
/// `serving <names.grpc>` at start and `<names.process> stopped` at the end.
pub async fn serve<R>(
    config: ServeConfig,
    router: Router,
    ready: R,
    names: ServiceNames,
    shutdown: CancellationToken,
) -> Result<(), RuntimeError>
where
    R: Future<Output = bool> + Send + 'static,
{
    let metrics = crate::metrics::install_recorder()?;
    (names.describe_metrics)();
    let admin_addr = config.admin.local_addr().ok();
    let admin = AdminServer::spawn(
        config.admin,
        MetricsEndpoint::new(metrics),
        names.build,
        &shutdown,
    );
    tracing::info!(
        grpc_addr = ?config.grpc.local_addr().ok(),
        admin_addr = ?admin_addr,
        mtls = config.transport.is_mtls(),
        "serving {}",
        names.grpc
    );
    let ready_task = {
        let (readiness, shutdown) = (admin.readiness().clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                ready = ready => {
                    if ready {
                        readiness.set(true);
                        tracing::info!("{} ready", names.process);
                    }
                }
            }
        })
    };
    let served = grpc::serve(router, config.grpc, &config.transport, shutdown.clone()).await;
    shutdown.cancel();
    // The ready task ends as soon as shutdown is cancelled; its outcome carries nothing.
    let _ = ready_task.await;
    let admin_result = admin.stop().await;
    served?;
    admin_result?;
    tracing::info!("{} stopped", names.process);
    Ok(())
}
