//! The admin HTTP server: `/metrics` (Prometheus text), `/healthz` (process alive), `/readyz`
//! (ready to serve, flipped by the service and cleared on shutdown) and `/version` (the binary's
//! [`BuildInfo`] as JSON).
//!
//! `/metrics` renders the process-wide recorder, then an optional [`ExtraMetrics`] hook: series
//! that must disappear with the object they describe (the global recorder cannot forget a
//! series) are kept by the service and rendered there.
//!
//! With `--metrics-secure` the same text is served over HTTPS on `--metrics-addr` instead, each
//! scrape reviewed by the API server; the admin port then answers `/metrics` with 404 and a line
//! saying where the metrics went (docs/design/architecture.md#secure-metrics).
//!
//! Connections go through the shared loop of [`crate::http`] with [`crate::http::ADMIN_LIMITS`]:
//! 32 at once, 10 s to send the headers (and at most 10 s idle between requests), 10 s per
//! stalled write, and a backoff instead of a busy loop when accept fails (`EMFILE`).

use std::{
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
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use tracing::Instrument as _;

use crate::build_info::BuildInfo;

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
    /// The admin server task panicked.
    #[error("admin server task failed")]
    Task(#[source] tokio::task::JoinError),
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
    fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Renders exposition text appended to `/metrics` after the recorder's own.
pub type ExtraMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// What `/metrics` serves: the global recorder's metrics, then the optional extra text.
#[derive(Clone)]
pub struct MetricsEndpoint {
    recorder: PrometheusHandle,
    extra: Option<ExtraMetrics>,
    /// Where the metrics are served over HTTPS instead (`--metrics-addr`), if they are.
    secure_at: Option<SocketAddr>,
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsEndpoint")
            .field("extra", &self.extra.is_some())
            .field("secure_at", &self.secure_at)
            .finish_non_exhaustive()
    }
}

impl MetricsEndpoint {
    /// The recorder's metrics only.
    pub fn new(recorder: PrometheusHandle) -> Self {
        Self {
            recorder,
            extra: None,
            secure_at: None,
        }
    }

    /// Appends `render`'s text to every `/metrics` answer.
    #[must_use]
    pub fn with_extra(mut self, render: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.extra = Some(Arc::new(render));
        self
    }

    /// The admin port no longer serves the metrics: they are on HTTPS at `addr` (the secure
    /// metrics server renders them with [`MetricsEndpoint::render`]).
    #[must_use]
    pub fn served_securely_at(mut self, addr: SocketAddr) -> Self {
        self.secure_at = Some(addr);
        self
    }

    /// The exposition text: the recorder's series, then the extra text.
    pub(crate) fn render(&self) -> String {
        let mut body = self.recorder.render();
        if let Some(extra) = &self.extra {
            body.push_str(&extra());
        }
        body
    }
}

/// A running admin server (see [`AdminServer::spawn`]).
#[derive(Debug)]
pub struct AdminServer {
    readiness: Readiness,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), AdminError>>,
}

impl AdminServer {
    /// Serves the admin endpoints on `listener` in a task until `shutdown` is cancelled (or
    /// [`AdminServer::stop`]). `/readyz` starts not ready; `/version` answers `build`.
    pub fn spawn(
        listener: TcpListener,
        metrics: MetricsEndpoint,
        build: BuildInfo,
        shutdown: &CancellationToken,
    ) -> Self {
        Self::spawn_with(listener, metrics, build, &Readiness::new(), shutdown)
    }

    /// [`AdminServer::spawn`] with `/readyz` following `readiness`.
    pub fn spawn_with(
        listener: TcpListener,
        metrics: MetricsEndpoint,
        build: BuildInfo,
        readiness: &Readiness,
        shutdown: &CancellationToken,
    ) -> Self {
        let readiness = readiness.clone();
        let task = tokio::spawn(
            serve(
                listener,
                metrics,
                build,
                readiness.clone(),
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("task", task = "admin")),
        );
        Self {
            readiness,
            shutdown: shutdown.clone(),
            task,
        }
    }

    /// The flag behind `/readyz`.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Clears readiness, cancels the shutdown token the server was spawned with (the process is
    /// stopping) and waits until in-flight admin requests are answered.
    pub async fn stop(self) -> Result<(), AdminError> {
        self.readiness.set(false);
        self.shutdown.cancel();
        self.task.await.map_err(AdminError::Task)??;
        Ok(())
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
async fn serve(
    listener: TcpListener,
    metrics: MetricsEndpoint,
    build: BuildInfo,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), AdminError> {
    let upkeep = {
        let metrics = metrics.recorder.clone();
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
    // The shared connection loop: a cap, header and write deadlines, and a backoff on accept
    // errors such as EMFILE (crate::http; docs/design/architecture.md#http-servers).
    let handler = {
        let readiness = readiness.clone();
        move |request: Request<Incoming>| {
            let response = route(&request, &metrics, &build, &readiness);
            async move { response }
        }
    };
    let result = crate::http::serve(listener, crate::http::ADMIN_LIMITS, handler, shutdown)
        .await
        .map_err(AdminError::Accept);
    readiness.set(false);
    upkeep.abort();
    result
}

fn route(
    request: &Request<Incoming>,
    metrics: &MetricsEndpoint,
    build: &BuildInfo,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    match request.uri().path() {
        "/metrics" if let Some(addr) = metrics.secure_at => text(
            StatusCode::NOT_FOUND,
            format!("metrics are served over HTTPS on {addr} (--metrics-secure, --metrics-addr)\n"),
        ),
        "/metrics" => {
            let mut response = Response::new(Full::new(Bytes::from(metrics.render())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(PROMETHEUS_TEXT),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/version" => {
            let mut response = Response::new(Full::new(Bytes::from(build.to_json())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        }
        "/readyz" if readiness.is_ready() => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::admin_get;

    #[tokio::test]
    async fn metrics_end_with_the_extra_text_and_readyz_follows_the_flag() {
        let recorder = crate::metrics::install_recorder().unwrap();
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let metrics = MetricsEndpoint::new(recorder).with_extra(|| "extra_series 1\n".to_owned());
        let build = BuildInfo {
            name: "pacto-test",
            version: "9.8.7",
            commit: "0123abc",
            build_time: "2026-12-04T15:30:45Z",
        };
        let admin = AdminServer::spawn(listener, metrics, build, &shutdown);

        let (status, body) = admin_get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.ends_with("extra_series 1\n"), "{body}");
        assert_eq!(admin_get(addr, "/healthz").await.0, 200);
        assert_eq!(admin_get(addr, "/version").await, (200, build.to_json()));
        assert_eq!(admin_get(addr, "/readyz").await.0, 503);
        admin.readiness().set(true);
        assert_eq!(admin_get(addr, "/readyz").await.0, 200);

        admin.stop().await.unwrap();
        assert!(shutdown.is_cancelled());
    }

    /// A client that connects and sends nothing is cut off by the admin header deadline
    /// (`ADMIN_LIMITS`, 10 s) instead of holding its connection for ever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_connection_is_closed_after_the_header_deadline() {
        use tokio::io::AsyncReadExt as _;
        let recorder = crate::metrics::install_recorder().unwrap();
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let build = BuildInfo {
            name: "pacto-test",
            version: "1.0.0",
            commit: "0",
            build_time: "2026-12-06T00:00:00Z",
        };
        let admin = AdminServer::spawn(listener, MetricsEndpoint::new(recorder), build, &shutdown);
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut rest = Vec::new();
        let limit = crate::http::ADMIN_LIMITS.header_timeout * 3;
        let closed = tokio::time::timeout(limit, silent.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "a silent admin connection still open after {limit:?}"
        );
        admin.stop().await.unwrap();
    }
}
