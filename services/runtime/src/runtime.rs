//! One service process from start to stop: the [`Runtime`] every Pacto service's `run` builds
//! (docs/design/architecture.md#runtime).
//!
//! A service's `run` reads the same everywhere: start the runtime from its flags
//! ([`Runtime::start`]: crypto provider, logging, metrics recorder, signals, transport, the
//! admin port), build the service's state (with [`Runtime::kube_client`] and
//! [`Runtime::scope`] where it watches the cluster), [`Runtime::spawn`] its own tasks, add its
//! servers ([`Runtime::serve_grpc`], [`Runtime::serve_http`]) and await [`Runtime::run`].
//!
//! [`Runtime::run`] serves the admin endpoints and waits until the drain begins: SIGTERM or
//! SIGINT, the caller's stop token ([`Runtime::new`]), a server that ended, or a task spawned
//! with [`Runtime::spawn_critical`] that ended. It then drains in one fixed order:
//!
//! 1. `/readyz` turns not ready;
//! 2. the gRPC and HTTP servers stop accepting and finish their in-flight calls (gRPC at most
//!    its drain timeout);
//! 3. the shared [`CancellationToken`] ([`Runtime::shutdown`]) is cancelled, so watches,
//!    caches and the service's own tasks stop only after the calls that read them finished;
//! 4. the spawned tasks are joined, at most [`TASK_STOP_TIMEOUT`]; a task still running then is
//!    named in a warning and aborted;
//! 5. the admin server, and the HTTPS metrics server with `--metrics-secure`, stop (probes and
//!    scrapes are answered until here) and the log says `<process> stopped`.
//!
//! With `--metrics-secure`, [`Runtime::start`] also binds `--metrics-addr` and creates the
//! Kubernetes client the scrapes are reviewed with (the one [`Runtime::kube_client`] then hands
//! out); `/metrics` moves from the admin port to HTTPS there
//! (docs/design/architecture.md#secure-metrics).
//!
//! Every task the runtime runs is in a `task` span whose `task` field names it, so its log
//! lines say which task wrote them.

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc, time::Duration};

use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;
use tracing::Instrument as _;

use crate::{
    admin::{AdminServer, MetricsEndpoint, Readiness},
    args::{RuntimeArgs, ServerArgs},
    error::RuntimeError,
    grpc::{self, Transport},
    http::{Limits, Reply},
    identity::{AllowList, Authorizer},
    secure_metrics::{SecureMetrics, SecureMetricsError},
    service::{ServeConfig, ServiceNames},
    tasks::Tasks,
};

/// How long [`Runtime::run`] waits for the spawned tasks once the shared token is cancelled.
/// With the gRPC drain timeout (20 s) it stays within Kubernetes' default 30 s grace period.
pub const TASK_STOP_TIMEOUT: Duration = Duration::from_secs(10);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The gRPC port a runtime serves once [`Runtime::serve_grpc`] is called.
#[derive(Debug)]
struct GrpcPort {
    listener: TcpListener,
    transport: Transport,
    allowed: AllowList,
}

/// A running gRPC or HTTP server.
#[derive(Debug)]
struct Server {
    name: &'static str,
    task: JoinHandle<Result<(), RuntimeError>>,
}

/// A service process: its admin port, its servers, its tasks and their drain (see the module
/// documentation).
pub struct Runtime {
    names: ServiceNames,
    /// Cancelled when the drain begins.
    stop: CancellationToken,
    /// Cancelled once the servers stopped; the spawned tasks drain on it.
    shutdown: CancellationToken,
    /// Cancelled to stop the gRPC and HTTP servers (step 2).
    servers_stop: CancellationToken,
    transport: Option<Transport>,
    admin: TcpListener,
    metrics: MetricsEndpoint,
    readiness: Readiness,
    ready: Option<BoxFuture<bool>>,
    grpc: Option<GrpcPort>,
    /// The HTTPS metrics port (`--metrics-secure`), served from [`Runtime::run`].
    secure_metrics: Option<SecureMetrics>,
    /// The Kubernetes client created for secure metrics, shared with the service.
    kube: Option<kube::Client>,
    servers: Vec<Server>,
    /// The tasks, joined in the drain (also spawned through [`Runtime::tasks`]).
    tasks: Tasks,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("process", &self.names.process)
            .field("servers", &self.servers)
            .field("tasks", &self.tasks.names())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Starts the process from its runtime flags: rustls' `ring` provider (kept if one is
    /// installed already), logging, the metrics recorder (before anything records), the signal
    /// handlers, the transport with its reloader, the admin port and, with `--metrics-secure`,
    /// the HTTPS metrics port and the Kubernetes client its reviews use. SIGTERM or SIGINT
    /// begins the drain.
    pub async fn start(args: &RuntimeArgs, names: ServiceNames) -> Result<Self, RuntimeError> {
        // An error only says a provider is installed already, which is all this ensures.
        let _ = rustls::crypto::ring::default_provider().install_default();
        crate::telemetry::init_tracing(&args.log)?;
        let mode = args.tls.mode()?;
        args.metrics.check(&args.tls)?;
        crate::metrics::install_recorder()?;
        let stop = crate::shutdown::on_signal()?;
        let admin = crate::admin::bind(args.admin.addr).await?;
        let mut runtime = Self::new(names, admin, stop)?;
        // The reloader runs until the tasks stop: clients of the spawned tasks keep using it.
        let transport = Transport::start(&mode, args.tls.reload_interval, &runtime.shutdown)?;
        runtime.transport = Some(transport);
        if args.metrics.secure {
            // the one place a service without a cluster client of its own gets one
            let client = kube::Client::try_default()
                .await
                .map_err(SecureMetricsError::Client)?;
            let listener = crate::secure_metrics::bind(args.metrics.addr).await?;
            runtime.serve_metrics_securely(listener, client)?;
        }
        Ok(runtime)
    }

    /// A runtime on a bound admin listener whose drain begins when `stop` is cancelled (a
    /// test's or an embedding's own lifecycle; [`Runtime::start`] for a process). Installs the
    /// metrics recorder if no one did yet and describes the service's metrics.
    pub fn new(
        names: ServiceNames,
        admin: TcpListener,
        stop: CancellationToken,
    ) -> Result<Self, RuntimeError> {
        let recorder = crate::metrics::install_recorder()?;
        (names.describe_metrics)();
        let shutdown = CancellationToken::new();
        Ok(Self {
            names,
            stop,
            tasks: Tasks::joined(shutdown.clone()),
            shutdown,
            servers_stop: CancellationToken::new(),
            transport: None,
            admin,
            metrics: MetricsEndpoint::new(recorder),
            readiness: Readiness::new(),
            ready: None,
            grpc: None,
            secure_metrics: None,
            kube: None,
            servers: Vec::new(),
        })
    }

    /// A runtime for the listeners and transport of `config` (see [`Runtime::new`]); its gRPC
    /// port is `config.grpc`.
    pub fn serving(
        config: ServeConfig,
        names: ServiceNames,
        stop: CancellationToken,
    ) -> Result<Self, RuntimeError> {
        let mut runtime = Self::new(names, config.admin, stop)?;
        runtime.transport = Some(config.transport.clone());
        runtime.grpc = Some(GrpcPort {
            listener: config.grpc,
            transport: config.transport,
            allowed: config.allowed,
        });
        Ok(runtime)
    }

    /// Binds the gRPC port of `server` (served by [`Runtime::serve_grpc`]).
    pub async fn bind_grpc(&mut self, server: &ServerArgs) -> Result<(), RuntimeError> {
        let transport = self.transport.clone().ok_or(RuntimeError::NoTransport)?;
        if self.secure_metrics_addr() == Some(server.listen_addr) && server.listen_addr.port() != 0
        {
            return Err(SecureMetricsError::SameAddress {
                addr: server.listen_addr,
            }
            .into());
        }
        self.grpc = Some(GrpcPort {
            listener: grpc::bind(server.listen_addr).await?,
            transport,
            allowed: AllowList::new(&server.allowed_identities),
        });
        Ok(())
    }

    /// Where the admin endpoints are served.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.local_addr().ok()
    }

    /// Where `/metrics` is served over HTTPS, with `--metrics-secure`.
    pub fn secure_metrics_addr(&self) -> Option<SocketAddr> {
        self.secure_metrics
            .as_ref()
            .and_then(SecureMetrics::local_addr)
    }

    /// Serves `/metrics` over HTTPS on `listener` from [`Runtime::run`] instead of on the admin
    /// port (which then answers it with 404), with the process's certificate; each scrape's
    /// bearer token is reviewed with `client` (TokenReview, then SubjectAccessReview of `get` on
    /// `/metrics`), which [`Runtime::kube_client`] hands out from then on
    /// (docs/design/architecture.md#secure-metrics). [`Runtime::start`] calls it for
    /// `--metrics-secure`. Fails without TLS material (`--insecure`).
    pub fn serve_metrics_securely(
        &mut self,
        listener: TcpListener,
        client: kube::Client,
    ) -> Result<(), RuntimeError> {
        let Some(Transport::Mtls(store)) = &self.transport else {
            return Err(SecureMetricsError::NoTls.into());
        };
        let port = SecureMetrics::new(listener, Arc::clone(store), client.clone());
        if let Some(addr) = port.local_addr() {
            self.metrics = self.metrics.clone().served_securely_at(addr);
        }
        self.secure_metrics = Some(port);
        self.kube = Some(client);
        Ok(())
    }

    /// The transport of the process (mTLS with reloading material, or plaintext under
    /// `--insecure`), for the service's clients.
    pub fn transport(&self) -> Result<&Transport, RuntimeError> {
        self.transport.as_ref().ok_or(RuntimeError::NoTransport)
    }

    /// Cancelled when the drain begins: what streams served to clients end on, so the gRPC
    /// drain does not wait for them.
    pub fn stopping(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// The shared token, cancelled once the servers stopped: what the spawned tasks, watches
    /// and caches drain on.
    pub fn shutdown(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// The flag behind `/readyz`, for a service that decides itself when it is ready (see also
    /// [`Runtime::ready_when`]). It starts not ready and is cleared when the drain begins.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// `/readyz` turns ready, and the log says `<process> ready`, when `ready` resolves to
    /// `true` (before the drain begins).
    pub fn ready_when(&mut self, ready: impl Future<Output = bool> + Send + 'static) {
        self.ready = Some(Box::pin(ready));
    }

    /// Appends `render`'s text to every `/metrics` answer: series the service keeps itself
    /// because they disappear with the object they describe.
    pub fn metrics_extra(&mut self, render: impl Fn() -> String + Send + Sync + 'static) {
        self.metrics = self.metrics.clone().with_extra(render);
    }

    /// The interceptor guarding the gRPC service `service` on the gRPC port: its allow-list
    /// under mTLS, a pass-through under `--insecure` (no identities exist there).
    pub fn authorizer(&self, service: &'static str) -> Authorizer {
        match &self.grpc {
            Some(port) if port.transport.is_mtls() => {
                Authorizer::new(service, port.allowed.clone())
            }
            _ => Authorizer::insecure(service),
        }
    }

    /// Whether the process runs mTLS (client identities can be authorised).
    pub fn is_mtls(&self) -> bool {
        self.transport.as_ref().is_some_and(Transport::is_mtls)
    }

    /// Serves `router` on the gRPC port (bound by [`Runtime::bind_grpc`] or given to
    /// [`Runtime::serving`]) until the drain. The log says `serving <names.grpc>`.
    pub fn serve_grpc(&mut self, router: Router) -> Result<(), RuntimeError> {
        let port = self.grpc.take().ok_or(RuntimeError::NoGrpcPort)?;
        tracing::info!(
            grpc_addr = ?port.listener.local_addr().ok(),
            admin_addr = ?self.admin.local_addr().ok(),
            mtls = port.transport.is_mtls(),
            "serving {}",
            self.names.grpc
        );
        let stop = self.servers_stop.clone();
        let served = async move {
            grpc::serve(router, port.listener, &port.transport, stop)
                .await
                .map_err(RuntimeError::from)
        };
        self.add_server("grpc", served);
        Ok(())
    }

    /// Serves `handler` on `listener` within `limits` through the shared HTTP connection loop
    /// ([`crate::http`]) until the drain.
    pub fn serve_http<H, F>(&mut self, listener: TcpListener, limits: Limits, handler: H)
    where
        H: Fn(http::Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = Reply> + Send + 'static,
    {
        let addr = listener.local_addr().ok();
        let stop = self.servers_stop.clone();
        let served = async move {
            crate::http::serve(listener, limits, handler, stop)
                .await
                .map_err(|source| RuntimeError::Http { addr, source })
        };
        self.add_server("http", served);
    }

    fn add_server(
        &mut self,
        name: &'static str,
        served: impl Future<Output = Result<(), RuntimeError>> + Send + 'static,
    ) {
        let stop = self.stop.clone();
        // A server that ends (it failed, or the listener closed) begins the drain.
        let task = tokio::spawn(
            async move {
                let result = served.await;
                stop.cancel();
                result
            }
            .instrument(tracing::info_span!("task", task = name)),
        );
        self.servers.push(Server { name, task });
    }

    /// Runs `task` in a `task` span named `name` until it ends; [`Runtime::run`] joins it after
    /// cancelling the shared token ([`Runtime::shutdown`]), which it should stop on.
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(name, task);
    }

    /// A handle on the runtime's tasks, for code that spawns its tasks later or deeper down
    /// (an index's watch, a leader term's work): they too run in a `task` span, stop on
    /// [`Runtime::shutdown`] and are joined by [`Runtime::run`].
    pub fn tasks(&self) -> Tasks {
        self.tasks.clone()
    }

    /// [`Runtime::spawn`] for the task the process exists for (a controller, an agent): when it
    /// ends, the drain begins.
    pub fn spawn_critical(
        &mut self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let stop = self.stop.clone();
        self.spawn(name, async move {
            task.await;
            stop.cancel();
        });
    }

    /// Serves the admin endpoints, waits until the drain begins, then drains in the order of
    /// the module documentation. Returns the first error of a server or of the admin server.
    pub async fn run(self) -> Result<(), RuntimeError> {
        let Self {
            names,
            stop,
            shutdown,
            servers_stop,
            admin,
            metrics,
            readiness,
            ready,
            secure_metrics,
            servers,
            tasks,
            ..
        } = self;
        // The admin server has its own token: it answers until every task stopped; so does the
        // HTTPS metrics server, which stops with it.
        let admin_stop = CancellationToken::new();
        let secure_metrics = secure_metrics.map(|port| {
            let addr = port.local_addr();
            tracing::info!(metrics_addr = ?addr, "serving /metrics over HTTPS (--metrics-secure)");
            let (metrics, admin_stop, stop) = (metrics.clone(), admin_stop.clone(), stop.clone());
            tokio::spawn(
                async move {
                    let result = port
                        .serve(metrics, admin_stop)
                        .await
                        .map_err(|source| RuntimeError::Http { addr, source });
                    // ending before the drain (the listener failed) begins it
                    stop.cancel();
                    result
                }
                .instrument(tracing::info_span!("task", task = "secure-metrics")),
            )
        });
        let admin = AdminServer::spawn_with(admin, metrics, names.build, &readiness, &admin_stop);
        if let Some(ready) = ready {
            let readiness = readiness.clone();
            tokio::select! {
                () = stop.cancelled() => {}
                ready = ready => {
                    if ready && !stop.is_cancelled() {
                        readiness.set(true);
                        tracing::info!("{} ready", names.process);
                    }
                    stop.cancelled().await;
                }
            }
        } else {
            stop.cancelled().await;
        }
        // 1. unready
        readiness.set(false);
        // 2. the servers finish their calls
        servers_stop.cancel();
        let mut first_error = None;
        for server in servers {
            let result = match server.task.await {
                Ok(result) => result,
                Err(error) => Err(RuntimeError::Task {
                    name: server.name,
                    source: error,
                }),
            };
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
        }
        // 3. the tasks stop
        shutdown.cancel();
        // 4. within the deadline, with the tasks spawned while the first ones stopped
        let deadline = tokio::time::Instant::now() + TASK_STOP_TIMEOUT;
        loop {
            let spawned = tasks.take();
            if spawned.is_empty() {
                break;
            }
            join(
                spawned,
                deadline.saturating_duration_since(tokio::time::Instant::now()),
            )
            .await;
        }
        // 5. the admin server (and the HTTPS metrics server) last
        let admin_result = admin.stop().await;
        if let Some(task) = secure_metrics {
            let result = match task.await {
                Ok(result) => result,
                Err(source) => Err(RuntimeError::Task {
                    name: "secure-metrics",
                    source,
                }),
            };
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
        admin_result?;
        tracing::info!("{} stopped", names.process);
        Ok(())
    }
}

impl Runtime {
    /// The in-cluster (or kubeconfig) Kubernetes client: the one secure metrics review with,
    /// if the runtime has it, otherwise a new one.
    pub async fn kube_client(&self) -> Result<kube::Client, kube::Error> {
        match &self.kube {
            Some(client) => Ok(client.clone()),
            None => kube::Client::try_default().await,
        }
    }
}

#[cfg(feature = "watch")]
impl Runtime {
    /// Checks that `client` may read what `scope` needs, then follows it in the
    /// `namespace-scope` task.
    pub async fn scope(
        &mut self,
        client: &kube::Client,
        scope: &crate::scope::NamespaceScope,
    ) -> Result<(), crate::scope::ScopeError> {
        scope.check(client).await?;
        self.follow_scope(client, scope);
        Ok(())
    }

    /// Follows `scope` in the `namespace-scope` task (already checked).
    pub fn follow_scope(&mut self, client: &kube::Client, scope: &crate::scope::NamespaceScope) {
        let shutdown = self.shutdown();
        self.spawn(
            "namespace-scope",
            scope.clone().run(client.clone(), shutdown),
        );
    }
}

/// Joins `tasks` within `timeout` (one deadline for all); a task still running then is named
/// in a warning and aborted, one that panicked is logged.
async fn join(tasks: Vec<(&'static str, JoinHandle<()>)>, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    for (name, mut handle) in tasks {
        match tokio::time::timeout_at(deadline, &mut handle).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(task = name, %error, "task failed"),
            Err(_) => {
                tracing::warn!(
                    task = name,
                    ?timeout,
                    "task did not stop in time; aborting it"
                );
                handle.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::convert::Infallible;
    use std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    };
    use std::task::{Context, Poll};

    use futures::future::BoxFuture;
    use http_body_util::BodyExt as _;
    use tokio::sync::{Notify, oneshot};
    use tonic::body::Body;
    use tower::ServiceExt as _;

    use super::*;
    use crate::testing::{admin_get, eventually};

    const WAIT: Duration = Duration::from_secs(10);

    fn names() -> ServiceNames {
        crate::testing::service_names("Slow", "slow")
    }

    /// What happened, in order.
    type Log = Arc<Mutex<Vec<&'static str>>>;

    /// A gRPC service whose one call waits for `release` before answering, and notes whether
    /// the shared token was cancelled by then.
    #[derive(Clone)]
    struct Slow {
        started: Arc<Notify>,
        release: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
        shutdown: CancellationToken,
        log: Log,
    }

    impl tonic::server::NamedService for Slow {
        const NAME: &'static str = "test.Slow";
    }

    impl tower::Service<http::Request<Body>> for Slow {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: http::Request<Body>) -> Self::Future {
            let this = self.clone();
            Box::pin(async move {
                let release = this.release.lock().unwrap().take().expect("one call");
                this.started.notify_one();
                release.await.unwrap();
                this.log
                    .lock()
                    .unwrap()
                    .push(if this.shutdown.is_cancelled() {
                        "call answered after the shared token was cancelled"
                    } else {
                        "call answered"
                    });
                let body = Body::new(http_body_util::Full::new(hyper::body::Bytes::from_static(
                    b"done",
                )));
                Ok(http::Response::new(body))
            })
        }
    }

    async fn local() -> TcpListener {
        TcpListener::bind("127.0.0.1:0").await.unwrap()
    }

    /// With a call in flight when the drain begins: `/readyz` turns 503 while the admin port
    /// still answers, the call is answered before the shared token is cancelled, the task that
    /// drains on that token stops after it, and the admin port closes last.
    #[tokio::test]
    async fn the_drain_unreadies_stops_the_server_then_cancels_and_joins() {
        let grpc = local().await;
        let grpc_addr = grpc.local_addr().unwrap();
        let admin = local().await;
        let admin_addr = admin.local_addr().unwrap();
        let stop = CancellationToken::new();
        let config = ServeConfig {
            grpc,
            admin,
            transport: Transport::Insecure,
            allowed: AllowList::new(Vec::<String>::new()),
        };
        let mut rt = Runtime::serving(config, names(), stop.clone()).unwrap();
        let log = Log::default();
        let (release_tx, release_rx) = oneshot::channel();
        let slow = Slow {
            started: Arc::new(Notify::new()),
            release: Arc::new(Mutex::new(Some(release_rx))),
            shutdown: rt.shutdown(),
            log: Arc::clone(&log),
        };
        let started = Arc::clone(&slow.started);
        let router = tonic::transport::Server::builder().add_service(slow);
        rt.serve_grpc(router).unwrap();
        rt.ready_when(std::future::ready(true));
        let worker_stopped = Arc::new(AtomicBool::new(false));
        {
            let (shutdown, log, stopped) =
                (rt.shutdown(), Arc::clone(&log), Arc::clone(&worker_stopped));
            rt.spawn("worker", async move {
                shutdown.cancelled().await;
                log.lock().unwrap().push("worker stopped");
                stopped.store(true, Ordering::SeqCst);
            });
        }
        let running = tokio::spawn(rt.run());
        eventually("/readyz to answer 200", WAIT, || async {
            admin_get(admin_addr, "/readyz").await.0 == 200
        })
        .await;

        let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let call = tokio::spawn(async move {
            let request = http::Request::builder()
                .uri(format!("http://{grpc_addr}/test.Slow/Call"))
                .header("content-type", "application/grpc")
                .body(Body::empty())
                .unwrap();
            let response = channel.oneshot(request).await.unwrap();
            response.into_body().collect().await.unwrap().to_bytes()
        });
        tokio::time::timeout(WAIT, started.notified())
            .await
            .expect("the call reached the server");

        stop.cancel();
        eventually(
            "/readyz to answer 503 once the drain began",
            WAIT,
            || async { admin_get(admin_addr, "/readyz").await.0 == 503 },
        )
        .await;
        assert!(
            !worker_stopped.load(Ordering::SeqCst),
            "the shared token was cancelled while a call was in flight"
        );
        release_tx.send(()).unwrap();
        let body = tokio::time::timeout(WAIT, call).await.unwrap().unwrap();
        assert_eq!(&body[..], b"done");
        tokio::time::timeout(WAIT, running)
            .await
            .expect("run returns")
            .unwrap()
            .unwrap();
        assert_eq!(*log.lock().unwrap(), ["call answered", "worker stopped"]);
        assert!(
            tokio::net::TcpStream::connect(admin_addr).await.is_err(),
            "the admin port is closed once run returned"
        );
    }

    /// A task that ends on its own begins the drain when spawned as critical; the other tasks
    /// are joined and `run` returns.
    #[tokio::test]
    async fn a_critical_task_that_ends_begins_the_drain() {
        let stop = CancellationToken::new();
        let mut rt = Runtime::new(names(), local().await, stop.clone()).unwrap();
        let shutdown = rt.shutdown();
        let joined = Arc::new(AtomicBool::new(false));
        {
            let joined = Arc::clone(&joined);
            rt.spawn("follower", async move {
                shutdown.cancelled().await;
                joined.store(true, Ordering::SeqCst);
            });
        }
        rt.spawn_critical("main", async {});
        tokio::time::timeout(WAIT, rt.run())
            .await
            .expect("run returns once the critical task ended")
            .unwrap();
        assert!(stop.is_cancelled());
        assert!(joined.load(Ordering::SeqCst), "the follower was joined");
    }

    /// Sets a flag when dropped (a task aborted drops its future).
    struct DropFlag(Arc<AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// The join waits for the tasks up to one deadline, then aborts the one still running.
    #[tokio::test]
    async fn a_task_that_does_not_stop_is_aborted_at_the_deadline() {
        let finished = Arc::new(AtomicBool::new(false));
        let aborted = Arc::new(AtomicBool::new(false));
        let quick = {
            let finished = Arc::clone(&finished);
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                finished.store(true, Ordering::SeqCst);
            })
        };
        let stuck = {
            let flag = DropFlag(Arc::clone(&aborted));
            tokio::spawn(async move {
                let _flag = flag;
                std::future::pending::<()>().await;
            })
        };
        let timeout = Duration::from_millis(200);
        let started = tokio::time::Instant::now();
        join(vec![("quick", quick), ("stuck", stuck)], timeout).await;
        let took = started.elapsed();
        assert!(finished.load(Ordering::SeqCst));
        assert!(took >= timeout, "returned after {took:?}");
        assert!(took < WAIT, "returned after {took:?}");
        eventually("the stuck task to be aborted", WAIT, || {
            std::future::ready(aborted.load(Ordering::SeqCst))
        })
        .await;
    }

    /// Log lines written in a spawned task carry its `task` span.
    #[tokio::test]
    async fn a_spawned_task_logs_in_its_span() {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        use tracing_subscriber::prelude::*;
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone()),
        );
        // The test runtime has one thread: the spawned task runs under this default.
        let _default = tracing::subscriber::set_default(subscriber);
        let stop = CancellationToken::new();
        let mut rt = Runtime::new(names(), local().await, stop.clone()).unwrap();
        rt.spawn_critical("greeter", async {
            tracing::info!("hello from a task");
        });
        tokio::time::timeout(WAIT, rt.run()).await.unwrap().unwrap();
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let line = text
            .lines()
            .find(|line| line.contains("hello from a task"))
            .unwrap_or_else(|| panic!("no task line in {text}"));
        assert!(line.contains("task{task=\"greeter\"}"), "{line}");
        assert!(text.contains("slow stopped"), "{text}");
    }
}
