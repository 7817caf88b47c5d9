//! Client-side balancing over every address a backend's host name resolves to
//! (docs/design/scaling.md#replicas-and-client-side-balancing).
//!
//! A [`BalancedChannel`] resolves the host of its address (a headless Service name resolves to
//! one address per ready pod), keeps one lazily-connecting channel — one mTLS connection — per
//! address and spreads calls over them round robin, skipping ejected ones. The TLS server name
//! stays the one of the [`ChannelSpec`](crate::grpc::ChannelSpec) (the Service's name on the
//! certificate), whatever address is dialled.
//!
//! - The name is resolved again every [`BalanceConfig::resolve_interval`], and at once (at most
//!   once per [`MIN_RESOLVE_GAP`]) after a connection failure; endpoints are added and removed as
//!   the answer changes. A failed resolution keeps the last known endpoints.
//! - A call whose endpoint fails at the transport (connection refused or reset, handshake
//!   failed, connection lost mid-call) ejects that endpoint for [`BalanceConfig::ejection`] and
//!   is sent again at once to the next ready endpoint, so a killed replica costs a call one
//!   immediate retry. A timed-out call is not resent. Every Pacto RPC is an idempotent read, so
//!   a call the dead replica may have seen is safe to send again.
//! - When every endpoint is ejected, the one whose cooldown ends first is tried anyway: a single
//!   endpoint behaves as a plain channel.
//!
//! Request messages are buffered (one unary message per call), which is what lets a call be sent
//! again; a balanced channel is for RPCs with a unary request (all of the status-writer's).

use std::{
    collections::BTreeMap,
    error::Error as StdError,
    io,
    net::SocketAddr,
    sync::{
        Arc, Mutex, PoisonError, Weak,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use metrics::{counter, gauge};
use tokio::sync::{Notify, watch};
use tonic::{
    Status, TimeoutExpired,
    body::Body,
    transport::{Channel, Endpoint},
};
use tower::ServiceExt;

use crate::metrics::{GRPC_CLIENT_EJECTIONS_TOTAL, GRPC_CLIENT_ENDPOINTS};

/// The shortest pause between two resolutions triggered by failures.
pub const MIN_RESOLVE_GAP: Duration = Duration::from_millis(500);

/// Boxed error of a balanced call (what tonic's generated clients accept).
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Resolves `(host, port)` to socket addresses; [`system_resolver`] in production, a function
/// of the test's choosing in tests.
pub type Resolver =
    Arc<dyn Fn(String, u16) -> BoxFuture<'static, io::Result<Vec<SocketAddr>>> + Send + Sync>;

/// The system resolver (`getaddrinfo`: `/etc/hosts`, then DNS), every address it returns.
pub fn system_resolver() -> Resolver {
    Arc::new(|host: String, port: u16| {
        Box::pin(async move {
            tokio::net::lookup_host((host.as_str(), port))
                .await
                .map(Iterator::collect)
        })
    })
}

/// How a [`BalancedChannel`] finds and treats its endpoints.
#[derive(Clone)]
pub struct BalanceConfig {
    /// The `backend` label of the metrics (e.g. `observer`).
    pub backend: String,
    /// How often the host name is resolved again.
    pub resolve_interval: Duration,
    /// How long an endpoint whose connection failed is skipped.
    pub ejection: Duration,
    /// Name resolution.
    pub resolver: Resolver,
}

impl std::fmt::Debug for BalanceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalanceConfig")
            .field("backend", &self.backend)
            .field("resolve_interval", &self.resolve_interval)
            .field("ejection", &self.ejection)
            .finish_non_exhaustive()
    }
}

impl BalanceConfig {
    /// Defaults for `backend`: resolve every 5 s, eject for 5 s, the system resolver.
    pub fn new(backend: impl Into<String>) -> Self {
        Self {
            backend: backend.into(),
            resolve_interval: Duration::from_secs(5),
            ejection: Duration::from_secs(5),
            resolver: system_resolver(),
        }
    }
}

/// One address of the backend with its own channel (connection).
#[derive(Debug)]
pub struct BackendEndpoint {
    addr: SocketAddr,
    channel: Channel,
    ejected_until: Mutex<Option<Instant>>,
}

impl BackendEndpoint {
    /// The address dialled.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A channel to this address only (e.g. for a stream every replica must serve).
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    fn ejected_until(&self) -> Option<Instant> {
        *self
            .ejected_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_ejected_until(&self, until: Option<Instant>) {
        *self
            .ejected_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = until;
    }

    fn is_ejected(&self, now: Instant) -> bool {
        self.ejected_until().is_some_and(|until| until > now)
    }
}

/// The endpoints of a backend at one moment.
#[derive(Debug, Clone, Default)]
pub struct EndpointSet {
    /// Whether a resolution has completed (before that, calls wait for it).
    pub resolved: bool,
    /// The endpoints, sorted by address.
    pub endpoints: Arc<[Arc<BackendEndpoint>]>,
    /// The last resolution's error, if it failed (the endpoints are then the last known ones).
    pub error: Option<String>,
}

/// Builds the channel of one address.
pub(crate) type Dial = Arc<dyn Fn(SocketAddr) -> Channel + Send + Sync>;

struct Shared {
    host: String,
    port: u16,
    config: BalanceConfig,
    /// How long a call waits for the first resolution.
    first_resolution: Duration,
    dial: Dial,
    set: watch::Sender<EndpointSet>,
    next: AtomicUsize,
    refresh: Arc<Notify>,
}

/// A gRPC channel over every address of a host name (see the module docs). Cheap to clone; the
/// resolution task stops when the last clone is dropped.
#[derive(Clone)]
pub struct BalancedChannel {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BalancedChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalancedChannel")
            .field("host", &self.shared.host)
            .field("port", &self.shared.port)
            .field("backend", &self.shared.config.backend)
            .finish_non_exhaustive()
    }
}

impl BalancedChannel {
    /// A balanced channel to `host:port`, each address dialled with `dial`; starts the
    /// resolution task (needs a Tokio runtime).
    pub(crate) fn start(
        host: String,
        port: u16,
        config: BalanceConfig,
        first_resolution: Duration,
        dial: Dial,
    ) -> Self {
        let (set, _) = watch::channel(EndpointSet::default());
        let refresh = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            host,
            port,
            config,
            first_resolution,
            dial,
            set,
            next: AtomicUsize::new(0),
            refresh: Arc::clone(&refresh),
        });
        tokio::spawn(resolve_loop(Arc::downgrade(&shared), refresh));
        Self { shared }
    }

    /// The current endpoints, updated on every change (closed when the channel is dropped).
    pub fn endpoints(&self) -> watch::Receiver<EndpointSet> {
        self.shared.set.subscribe()
    }

    /// Asks for a resolution now (rate-limited by [`MIN_RESOLVE_GAP`]).
    pub fn refresh(&self) {
        self.shared.refresh.notify_one();
    }
}

/// Runs one task per endpoint of `endpoints` until `shutdown` or until the channel is dropped: a
/// stream or subscription that every replica of a backend must get, not one of them (the node
/// agent's report stream, the status-writer's WatchTargets;
/// docs/design/scaling.md#replicas-and-client-side-balancing). `start(addr, channel, token)`
/// spawns the task of an endpoint that appears; its token is cancelled when the endpoint goes
/// away. `on_count` hears the number of endpoints after every change. At the end every token is
/// cancelled and every task awaited. `what` names the task in the log lines.
pub async fn for_each_endpoint<S, C>(
    mut endpoints: watch::Receiver<EndpointSet>,
    shutdown: crate::CancellationToken,
    what: &'static str,
    mut start: S,
    mut on_count: C,
) where
    S: FnMut(SocketAddr, Channel, crate::CancellationToken) -> tokio::task::JoinHandle<()>,
    C: FnMut(usize),
{
    let mut running: BTreeMap<SocketAddr, (crate::CancellationToken, tokio::task::JoinHandle<()>)> =
        BTreeMap::new();
    loop {
        let current: Vec<(SocketAddr, Channel)> = endpoints
            .borrow_and_update()
            .endpoints
            .iter()
            .map(|e| (e.addr(), e.channel()))
            .collect();
        running.retain(|addr, (token, _)| {
            let keep = current.iter().any(|(a, _)| a == addr);
            if !keep {
                tracing::info!(endpoint = %addr, what, "endpoint gone; its task ends");
                token.cancel();
            }
            keep
        });
        for (addr, channel) in current {
            if running.contains_key(&addr) {
                continue;
            }
            tracing::info!(endpoint = %addr, what, "endpoint found; starting its task");
            let token = shutdown.child_token();
            let task = start(addr, channel, token.clone());
            running.insert(addr, (token, task));
        }
        on_count(running.len());
        tokio::select! {
            () = shutdown.cancelled() => break,
            changed = endpoints.changed() => if changed.is_err() { break },
        }
    }
    for (token, task) in running.into_values() {
        token.cancel();
        let _ = task.await;
    }
}

/// Resolves the name every interval, and soon after a failure asks for it, while the channel
/// lives.
async fn resolve_loop(shared: Weak<Shared>, refresh: Arc<Notify>) {
    loop {
        let Some(current) = shared.upgrade() else {
            return;
        };
        let started = Instant::now();
        let resolved = (current.config.resolver)(current.host.clone(), current.port).await;
        current.update(resolved);
        let interval = current.config.resolve_interval;
        drop(current);
        tokio::select! {
            () = refresh.notified() => {
                tokio::time::sleep(MIN_RESOLVE_GAP.saturating_sub(started.elapsed())).await;
            }
            () = tokio::time::sleep(interval) => {}
        }
    }
}

impl Shared {
    fn update(&self, resolved: io::Result<Vec<SocketAddr>>) {
        let backend = self.config.backend.clone();
        let addrs = match resolved {
            Ok(addrs) if !addrs.is_empty() => addrs,
            Ok(_) => {
                return self.failed_resolution(format!("{} resolved to no address", self.host));
            }
            Err(error) => {
                return self.failed_resolution(format!("cannot resolve {}: {error}", self.host));
            }
        };
        let mut changed = None;
        self.set.send_if_modified(|set| {
            let wanted: std::collections::BTreeSet<SocketAddr> = addrs.iter().copied().collect();
            let same = set.resolved
                && set.error.is_none()
                && set.endpoints.len() == wanted.len()
                && set.endpoints.iter().all(|e| wanted.contains(&e.addr));
            if same {
                return false;
            }
            let mut kept: BTreeMap<SocketAddr, Arc<BackendEndpoint>> = set
                .endpoints
                .iter()
                .filter(|e| wanted.contains(&e.addr))
                .map(|e| (e.addr, Arc::clone(e)))
                .collect();
            for addr in &wanted {
                kept.entry(*addr).or_insert_with(|| {
                    Arc::new(BackendEndpoint {
                        addr: *addr,
                        channel: (self.dial)(*addr),
                        ejected_until: Mutex::new(None),
                    })
                });
            }
            let before: Vec<SocketAddr> = set.endpoints.iter().map(|e| e.addr).collect();
            *set = EndpointSet {
                resolved: true,
                endpoints: kept.into_values().collect(),
                error: None,
            };
            changed = Some((before, wanted));
            true
        });
        if let Some((before, after)) = changed {
            let count = after.len();
            gauge!(GRPC_CLIENT_ENDPOINTS, "backend" => backend.clone()).set(count as f64);
            tracing::info!(backend = %backend, host = %self.host, ?before, after = ?after, "backend endpoints changed");
        }
    }

    fn failed_resolution(&self, error: String) {
        tracing::warn!(backend = %self.config.backend, %error, "resolving the backend failed; keeping its last known endpoints");
        self.set.send_if_modified(|set| {
            let first = !set.resolved;
            let new_error = set.error.as_deref() != Some(error.as_str());
            set.resolved = true;
            set.error = Some(error);
            first || new_error
        });
    }

    /// The current set, waiting (bounded) for the first resolution.
    async fn current(&self) -> EndpointSet {
        let mut receiver = self.set.subscribe();
        if !receiver.borrow().resolved {
            let _ =
                tokio::time::timeout(self.first_resolution, receiver.wait_for(|set| set.resolved))
                    .await;
        }
        receiver.borrow().clone()
    }

    /// The endpoints to try for one call, in order: the ready ones from the round-robin position,
    /// or, when all are ejected, the one whose cooldown ends first.
    fn order(&self, set: &EndpointSet) -> Vec<Arc<BackendEndpoint>> {
        let n = set.endpoints.len();
        if n == 0 {
            return Vec::new();
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let now = Instant::now();
        let ready: Vec<Arc<BackendEndpoint>> = (0..n)
            .map(|i| &set.endpoints[(start + i) % n])
            .filter(|e| !e.is_ejected(now))
            .cloned()
            .collect();
        if !ready.is_empty() {
            return ready;
        }
        set.endpoints
            .iter()
            .min_by_key(|e| e.ejected_until())
            .cloned()
            .into_iter()
            .collect()
    }

    fn eject(&self, endpoint: &BackendEndpoint, error: &tonic::transport::Error) {
        endpoint.set_ejected_until(Some(Instant::now() + self.config.ejection));
        counter!(GRPC_CLIENT_EJECTIONS_TOTAL, "backend" => self.config.backend.clone())
            .increment(1);
        tracing::warn!(
            backend = %self.config.backend,
            endpoint = %endpoint.addr,
            cooldown = ?self.config.ejection,
            error = %crate::tls::error_chain(error),
            "backend endpoint failed; ejected, the call goes to another endpoint"
        );
        self.refresh.notify_one();
    }

    async fn call(
        self: Arc<Self>,
        request: http::Request<Body>,
    ) -> Result<http::Response<Body>, BoxError> {
        let (parts, body) = request.into_parts();
        let message = body.collect().await?.to_bytes();
        let set = self.current().await;
        let order = self.order(&set);
        if order.is_empty() {
            self.refresh.notify_one();
            let why = set
                .error
                .unwrap_or_else(|| format!("{} is not resolved yet", self.host));
            return Err(Box::new(Status::unavailable(format!(
                "no endpoint of {} ({why})",
                self.config.backend
            ))));
        }
        let mut last = None;
        for endpoint in order {
            let request = http::Request::from_parts(
                parts.clone(),
                Body::new(http_body_util::Full::new(message.clone())),
            );
            match endpoint.channel.clone().oneshot(request).await {
                Ok(response) => {
                    if endpoint.ejected_until().is_some() {
                        endpoint.set_ejected_until(None);
                    }
                    return Ok(response);
                }
                Err(error) if timed_out(&error) => return Err(Box::new(error)),
                Err(error) => {
                    self.eject(&endpoint, &error);
                    last = Some(error);
                }
            }
        }
        // Every endpoint tried failed at the transport: Unavailable (retried by the caller's
        // policy), whatever the last failure looked like (a reset mid-call reads Unknown).
        let detail = last.map_or_else(
            || "no endpoint answered".to_owned(),
            |error| crate::tls::error_chain(&error),
        );
        Err(Box::new(Status::unavailable(format!(
            "every endpoint of {} failed: {detail}",
            self.config.backend
        ))))
    }
}

/// Whether the transport error is the request deadline (not resent: the endpoint is slow, not
/// gone).
fn timed_out(error: &tonic::transport::Error) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(current) = source {
        if current.is::<TimeoutExpired>() {
            return true;
        }
        source = current.source();
    }
    false
}

impl tower::Service<http::Request<Body>> for BalancedChannel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Each endpoint's channel has its own buffer; readiness is decided per call.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(Arc::clone(&self.shared).call(request))
    }
}

/// The endpoint channel of `addr` for a [`BalancedChannel`] built from `endpoint` (URI and
/// timeouts) and `connect` (TCP, then TLS with the fixed server name).
pub(crate) fn dial_with<C, Fut, S>(endpoint: Endpoint, connect: C) -> Dial
where
    C: Fn(SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = io::Result<S>> + Send + 'static,
    S: hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
{
    Arc::new(move |addr: SocketAddr| {
        let connect = connect.clone();
        endpoint.connect_with_connector_lazy(tower::service_fn(move |_: http::Uri| connect(addr)))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::collections::BTreeMap;
    use std::convert::Infallible;
    use std::future::Ready;

    use tonic::codegen::Bytes;

    use super::*;
    use crate::grpc::{ChannelSpec, Transport};
    use crate::testing::{TestCa, eventually};
    use crate::tls::TlsStore;

    const SERVER_NAME: &str = "echo.pacto.svc";

    /// A server that answers every request with its own name.
    #[derive(Clone)]
    struct Echo(&'static str);

    impl tonic::server::NamedService for Echo {
        const NAME: &'static str = "test.Echo";
    }

    impl tower::Service<http::Request<Body>> for Echo {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = Ready<Result<http::Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: http::Request<Body>) -> Self::Future {
            let body = Body::new(http_body_util::Full::new(Bytes::from_static(
                self.0.as_bytes(),
            )));
            std::future::ready(Ok(http::Response::new(body)))
        }
    }

    /// A replica on its own runtime: shutting that runtime down kills it like SIGKILL (every
    /// connection dropped, nothing drained).
    struct Replica {
        runtime: Option<tokio::runtime::Runtime>,
    }

    impl Replica {
        fn start(
            name: &'static str,
            listener: std::net::TcpListener,
            store: Arc<TlsStore>,
        ) -> Self {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let router = tonic::transport::Server::builder().add_service(Echo(name));
                let shutdown = tokio_util::sync::CancellationToken::new();
                crate::grpc::serve(router, listener, &Transport::Mtls(store), shutdown)
                    .await
                    .unwrap();
            });
            Self {
                runtime: Some(runtime),
            }
        }

        fn kill(&mut self) {
            if let Some(runtime) = self.runtime.take() {
                runtime.shutdown_background();
            }
        }
    }

    impl Drop for Replica {
        fn drop(&mut self) {
            self.kill();
        }
    }

    fn listen(addr: SocketAddr) -> std::net::TcpListener {
        let listener = std::net::TcpListener::bind(addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        listener
    }

    async fn call(channel: &BalancedChannel) -> Result<String, BoxError> {
        let request = http::Request::builder()
            .uri(format!("https://{SERVER_NAME}/test.Echo/Call"))
            .header("content-type", "application/grpc")
            .body(Body::empty())
            .unwrap();
        let response = channel.clone().oneshot(request).await?;
        let body = response.into_body().collect().await?.to_bytes();
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    async fn answers(channel: &BalancedChannel, calls: usize) -> BTreeMap<String, usize> {
        let mut seen = BTreeMap::new();
        for i in 0..calls {
            let name = call(channel)
                .await
                .unwrap_or_else(|e| panic!("call {i} failed: {e}"));
            *seen.entry(name).or_default() += 1;
        }
        seen
    }

    async fn wait_endpoints(channel: &BalancedChannel, want: &[SocketAddr]) {
        let mut receiver = channel.endpoints();
        eventually(
            &format!("the endpoints to be {want:?}"),
            Duration::from_secs(10),
            || {
                let got: Vec<SocketAddr> = receiver
                    .borrow_and_update()
                    .endpoints
                    .iter()
                    .map(|e| e.addr())
                    .collect();
                std::future::ready(if got == want {
                    Ok(())
                } else {
                    Err(format!("{got:?}"))
                })
            },
        )
        .await;
    }

    #[tokio::test]
    async fn calls_survive_a_killed_replica_and_follow_the_resolved_endpoints() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("balance test CA").unwrap();
        let server = TlsStore::load(ca.client_files(dir.path(), "server", &[SERVER_NAME])).unwrap();
        let client = TlsStore::load(ca.client_files(dir.path(), "client", &["client"])).unwrap();

        // Two replicas on 127.0.0.2 and 127.0.0.3, the same port (as two pods behind a
        // headless Service).
        let first = listen(SocketAddr::from(([127, 0, 0, 2], 0)));
        let port = first.local_addr().unwrap().port();
        let a = SocketAddr::from(([127, 0, 0, 2], port));
        let b = SocketAddr::from(([127, 0, 0, 3], port));
        let mut replica_a = Replica::start("a", first, Arc::clone(&server));
        let mut replica_b = Replica::start("b", listen(b), Arc::clone(&server));

        // The name resolves to whatever the test says.
        let answer: Arc<Mutex<Vec<SocketAddr>>> = Arc::new(Mutex::new(vec![a, b]));
        let resolved = Arc::clone(&answer);
        let config = BalanceConfig {
            backend: "echo".into(),
            resolve_interval: Duration::from_hours(1),
            ejection: Duration::from_hours(1),
            resolver: Arc::new(move |host: String, p: u16| {
                assert_eq!((host.as_str(), p), ("echo-peers.test", port));
                let addrs = resolved.lock().unwrap().clone();
                Box::pin(async move { Ok(addrs) })
            }),
        };
        let spec = ChannelSpec {
            address: format!("echo-peers.test:{port}"),
            server_name: Some(SERVER_NAME.into()),
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
        };
        let channel =
            crate::grpc::balanced_channel(&spec, &Transport::Mtls(client), config).unwrap();

        // Both replicas get calls, each over its own mTLS connection checked against the
        // Service's name.
        wait_endpoints(&channel, &[a, b]).await;
        let seen = answers(&channel, 20).await;
        assert_eq!(seen, BTreeMap::from([("a".into(), 10), ("b".into(), 10)]));

        // b is killed with connections open: every call still succeeds (the one sent to b is
        // sent again to a at once), then b is ejected and gets none.
        replica_b.kill();
        let seen = answers(&channel, 20).await;
        assert_eq!(seen, BTreeMap::from([("a".into(), 20)]));
        let ejected: Vec<SocketAddr> = channel
            .endpoints()
            .borrow()
            .endpoints
            .iter()
            .filter(|e| e.is_ejected(Instant::now()))
            .map(|e| e.addr())
            .collect();
        assert_eq!(ejected, vec![b]);

        // The name stops resolving to b: the failure asked for a resolution, so b is removed.
        *answer.lock().unwrap() = vec![a];
        channel.refresh();
        wait_endpoints(&channel, &[a]).await;

        // A new replica at b's address appears in the answer: it is added and gets calls.
        // (The killed runtime closes its listener in the background: bind when it is free.)
        let listener = eventually("b's address to be free", Duration::from_secs(10), || {
            std::future::ready(std::net::TcpListener::bind(b).ok())
        })
        .await;
        listener.set_nonblocking(true).unwrap();
        let mut replica_b = Replica::start("b2", listener, Arc::clone(&server));
        *answer.lock().unwrap() = vec![a, b];
        channel.refresh();
        wait_endpoints(&channel, &[a, b]).await;
        let seen = answers(&channel, 20).await;
        assert_eq!(seen, BTreeMap::from([("a".into(), 10), ("b2".into(), 10)]));

        // Both gone: the call fails as Unavailable (retryable), after trying each once.
        replica_a.kill();
        replica_b.kill();
        let error = call(&channel).await.unwrap_err();
        let status = Status::from_error(error);
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
}
