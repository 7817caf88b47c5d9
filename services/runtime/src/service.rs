//! Running one gRPC service process: the gRPC server and the admin server side by side, with
//! readiness and graceful shutdown handled the same way in every Pacto service.

use std::future::Future;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;

use crate::{
    admin::{self, AdminError, Readiness},
    grpc::{self, GrpcError, Transport},
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

/// How a service names itself in its logs.
#[derive(Debug, Clone, Copy)]
pub struct ServiceNames {
    /// The gRPC service, e.g. `Evaluator`.
    pub grpc: &'static str,
    /// The process, e.g. `evaluator`.
    pub process: &'static str,
}

/// Serving a service process failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The admin server failed.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The gRPC server failed.
    #[error(transparent)]
    Grpc(#[from] GrpcError),
    /// The admin server task panicked.
    #[error("admin server task failed")]
    AdminTask(#[source] tokio::task::JoinError),
}

impl ServeError {
    /// A low-cardinality label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Admin(_) => "admin",
            Self::Grpc(_) => "grpc",
            Self::AdminTask(_) => "admin_task",
        }
    }
}

/// Serves `router` on `config.grpc` and the admin endpoints on `config.admin` until `shutdown`
/// is cancelled, then drains in-flight calls and stops both.
///
/// `/readyz` turns ready when `ready` resolves to `true` (pass `std::future::ready(true)` for
/// a service that is ready at once) and unready as soon as shutdown starts. The logs say
/// `serving <names.grpc>` at start and `<names.process> stopped` at the end.
pub async fn serve<R>(
    config: ServeConfig,
    router: Router,
    metrics: PrometheusHandle,
    ready: R,
    names: ServiceNames,
    shutdown: CancellationToken,
) -> Result<(), ServeError>
where
    R: Future<Output = bool> + Send + 'static,
{
    let readiness = Readiness::new();
    let admin_addr = config.admin.local_addr().ok();
    let admin = tokio::spawn(admin::serve(
        config.admin,
        metrics,
        readiness.clone(),
        shutdown.clone(),
    ));
    tracing::info!(
        grpc_addr = ?config.grpc.local_addr().ok(),
        admin_addr = ?admin_addr,
        mtls = config.transport.is_mtls(),
        "serving {}",
        names.grpc
    );
    let ready_task = {
        let (readiness, shutdown) = (readiness.clone(), shutdown.clone());
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
    readiness.set(false);
    let admin_result = admin.await.map_err(ServeError::AdminTask)?;
    served?;
    admin_result?;
    tracing::info!("{} stopped", names.process);
    Ok(())
}
