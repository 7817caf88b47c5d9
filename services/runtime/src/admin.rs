//! The admin HTTP server: `/metrics` (Prometheus text), `/healthz` (process alive) and `/readyz`
//! (ready to serve, flipped by the service and cleared on shutdown).

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Content type of the Prometheus text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// How often histogram/summary buffers of the recorder are drained.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The admin server failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The admin address could not be bound.
    #[error("cannot bind the admin server to {addr}")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Accepting a connection failed.
    #[error("admin server accept failed")]
    Accept(#[source] std::io::Error),
}

/// The readiness flag behind `/readyz`. Cloning shares the flag.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// A flag that starts not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }

    /// Reads the flag.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Binds the admin address (port 0 picks a free port; see [`TcpListener::local_addr`]).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, AdminError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AdminError::Bind { addr, source })
}

/// Serves the admin endpoints on `listener` until `shutdown` is cancelled; in-flight requests
/// finish first. Readiness is cleared as soon as shutdown starts.
pub async fn serve(
    listener: TcpListener,
    metrics: PrometheusHandle,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), AdminError> {
    let upkeep = {
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
            loop {
                tokio::select! {
                    _ = tick.tick() => metrics.run_upkeep(),
                    () = shutdown.cancelled() => return,
                }
            }
        })
    };
    let result = loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_transient_accept_error(&error) => {
                    tracing::warn!(%error, "admin accept failed, continuing");
                    continue;
                }
                Err(error) => break Err(AdminError::Accept(error)),
            },
            () = shutdown.cancelled() => break Ok(()),
        };
        let metrics = metrics.clone();
        let readiness = readiness.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = route(&request, &metrics, &readiness);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let outcome = tokio::select! {
                outcome = connection.as_mut() => outcome,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = outcome {
                tracing::debug!(%error, "admin connection ended with an error");
            }
        });
    };
    readiness.set(false);
    upkeep.abort();
    result
}

fn is_transient_accept_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::Interrupted
            | std::io::ErrorKind::WouldBlock
    ) || error
        .raw_os_error()
        .is_some_and(|code| code == 24 || code == 23) // EMFILE / ENFILE
}

fn route(
    request: &Request<Incoming>,
    metrics: &PrometheusHandle,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = Response::new(Full::new(Bytes::from(metrics.render())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(PROMETHEUS_TEXT),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if readiness.is_ready() => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
