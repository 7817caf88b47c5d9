//! Serving tonic routers over mTLS and building client channels.
//!
//! Server: [`serve`] accepts TCP connections itself, performs the rustls handshake with the
//! *current* [`TlsMaterial`](crate::tls::TlsMaterial) (so reloads apply to new connections), and
//! hands tonic a stream of [`MtlsStream`]s whose connect info is a [`PeerInfo`] carrying the verified
//! client identity. Handshakes run concurrently, each bounded by [`HANDSHAKE_TIMEOUT`]; refused
//! handshakes (no client certificate, untrusted issuer) are logged and counted.
//!
//! Client: [`channel`] builds a lazily-connecting tonic [`Channel`] whose connector opens TCP and
//! performs the rustls handshake with the current client material; [`call_with_retries`] retries
//! calls that failed with a transient status, with exponential backoff and jitter (`backon`).

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use backon::Retryable;
use hyper_util::rt::TokioIo;
use metrics::counter;
use rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{
    Code, Status,
    transport::{Channel, Endpoint, Uri, server::Connected, server::Router},
};

use crate::{
    args::{EndpointArgs, GrpcClientArgs, Peer, TransportMode},
    backoff::Backoff,
    identity::{PeerIdentity, PeerInfo},
    metrics::TLS_HANDSHAKE_FAILURES_TOTAL,
    tls::{TlsError, TlsStore, error_chain},
};

/// Upper bound for a server-side TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a shutting-down server waits for open connections to finish their requests and
/// close (kept below Kubernetes' default 30 s termination grace period).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// The largest gRPC message any Pacto server or client decodes or encodes, in bytes: the same
/// bound on both sides of every call (docs/design/status.md#size-limits). A message over it
/// fails at once with `OutOfRange`, which [`is_transient`] does not retry.
pub const GRPC_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Serving or connecting failed.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The gRPC listen address could not be bound.
    #[error("cannot bind the gRPC server to {addr}")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The TLS material could not be loaded.
    #[error("cannot load the TLS material")]
    Tls(#[source] TlsError),
    /// The tonic server failed.
    #[error("gRPC server failed")]
    Serve(#[source] tonic::transport::Error),
    /// A client address is not a valid URI.
    #[error("invalid gRPC address {address:?}")]
    Address {
        /// The rejected address.
        address: String,
        /// The parser's complaint.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// A client address has no host.
    #[error("gRPC address {address:?} has no host")]
    MissingHost {
        /// The rejected address.
        address: String,
    },
    /// The TLS server name is not a valid DNS name or IP address.
    #[error("invalid TLS server name {name:?}")]
    ServerName {
        /// The rejected name.
        name: String,
    },
}

/// How a server port or a client is protected; derived from the `--tls-*`/`--insecure` flags.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Plaintext (the `--insecure` development flag).
    Insecure,
    /// mTLS with reloadable material.
    Mtls(Arc<TlsStore>),
}

impl Transport {
    /// Loads the TLS files of `mode` (if any) and starts their reloader, which stops on
    /// `shutdown`.
    pub fn start(
        mode: &TransportMode,
        reload_interval: Duration,
        shutdown: &CancellationToken,
    ) -> Result<Self, GrpcError> {
        match mode {
            TransportMode::Insecure => {
                tracing::warn!("--insecure: gRPC runs in plaintext without client authentication");
                Ok(Self::Insecure)
            }
            TransportMode::Mtls(files) => {
                let store = TlsStore::load(files.clone()).map_err(GrpcError::Tls)?;
                store.spawn_reloader(reload_interval, shutdown.clone());
                Ok(Self::Mtls(store))
            }
        }
    }

    /// Whether client identities can be authorised (false in `--insecure` mode).
    pub fn is_mtls(&self) -> bool {
        matches!(self, Self::Mtls(_))
    }
}

/// Binds a gRPC listen address (port 0 picks a free port).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, GrpcError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| GrpcError::Bind { addr, source })
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then stops accepting and waits for
/// in-flight requests and streams to finish (HTTP/2 GOAWAY), at most [`DRAIN_TIMEOUT`].
pub async fn serve(
    router: Router,
    listener: TcpListener,
    transport: &Transport,
    shutdown: CancellationToken,
) -> Result<(), GrpcError> {
    let signal = shutdown.clone().cancelled_owned();
    let served = async {
        match transport {
            Transport::Insecure => {
                router
                    .serve_with_incoming_shutdown(TcpListenerStream::new(listener), signal)
                    .await
            }
            Transport::Mtls(store) => {
                let incoming = mtls_incoming(listener, Arc::clone(store), shutdown.clone());
                router.serve_with_incoming_shutdown(incoming, signal).await
            }
        }
    };
    let drain_deadline = async {
        shutdown.cancelled().await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        result = served => result.map_err(GrpcError::Serve),
        () = drain_deadline => {
            tracing::warn!(timeout = ?DRAIN_TIMEOUT, "connections still open after the drain timeout; stopping anyway");
            Ok(())
        }
    }
}

/// An accepted, handshaken mTLS connection with its peer's identity.
#[derive(Debug)]
pub struct MtlsStream {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    info: PeerInfo,
}

impl Connected for MtlsStream {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

impl AsyncRead for MtlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for MtlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Accepts TCP connections and completes TLS handshakes concurrently; yields the successful ones.
fn mtls_incoming(
    listener: TcpListener,
    store: Arc<TlsStore>,
    shutdown: CancellationToken,
) -> ReceiverStream<Result<MtlsStream, io::Error>> {
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
                () = sender.closed() => return,
            };
            let (tcp, remote_addr) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Per-connection accept errors (resets, fd exhaustion) must not stop the server.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let acceptor = TlsAcceptor::from(Arc::clone(&store.current().server));
            let sender = sender.clone();
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let stream = MtlsStream {
                            info: peer_info(&tls, remote_addr),
                            inner: tls,
                        };
                        let _ = sender.send(Ok(stream)).await;
                    }
                    Ok(Err(error)) => {
                        let reason = handshake_failure_reason(&error);
                        counter!(TLS_HANDSHAKE_FAILURES_TOTAL, "reason" => reason).increment(1);
                        tracing::info!(%remote_addr, reason, error = %error_chain(&error), "TLS handshake refused");
                    }
                    Err(_) => {
                        counter!(TLS_HANDSHAKE_FAILURES_TOTAL, "reason" => "timeout").increment(1);
                        tracing::info!(%remote_addr, "TLS handshake timed out");
                    }
                }
            });
        }
    });
    ReceiverStream::new(receiver)
}

fn peer_info(
    tls: &tokio_rustls::server::TlsStream<TcpStream>,
    remote_addr: SocketAddr,
) -> PeerInfo {
    let identity = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|leaf| match PeerIdentity::from_der(leaf) {
            Ok(identity) => Some(Arc::new(identity)),
            Err(error) => {
                tracing::warn!(%remote_addr, %error, "cannot read the client certificate identity");
                None
            }
        });
    PeerInfo {
        remote_addr: Some(remote_addr),
        identity,
    }
}

/// A low-cardinality label for a refused handshake.
fn handshake_failure_reason(error: &io::Error) -> &'static str {
    use rustls::{CertificateError, Error};
    match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>())
    {
        Some(Error::NoCertificatesPresented) => "no_client_certificate",
        Some(Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        )) => "untrusted_certificate",
        Some(Error::InvalidCertificate(_)) => "invalid_certificate",
        Some(_) => "tls_error",
        None => "io_error",
    }
}

/// Where and how a client connects.
#[derive(Debug, Clone)]
pub struct ChannelSpec {
    /// `host:port`, or a URI (`https://host:port`); the scheme is implied by the transport.
    pub address: String,
    /// The name the server certificate must carry; defaults to the address's host.
    pub server_name: Option<String>,
    /// Bound on TCP connect + TLS handshake.
    pub connect_timeout: Duration,
    /// Deadline of each request.
    pub request_timeout: Duration,
}

impl ChannelSpec {
    /// A spec for `address` with the timeouts from the client flags.
    pub fn new(address: impl Into<String>, args: &GrpcClientArgs) -> Self {
        Self {
            address: address.into(),
            server_name: None,
            connect_timeout: args.connect_timeout,
            request_timeout: args.request_timeout,
        }
    }
}

// Here rather than in `args`, so that `args` (flags) does not import `grpc` (channels), which
// imports it (docs/design/crates.md, dependency rule 5).
impl<P: Peer> EndpointArgs<P> {
    /// The channel these flags describe, with the timeouts of `client`.
    pub fn spec(&self, client: &GrpcClientArgs) -> ChannelSpec {
        let mut spec = ChannelSpec::new(&self.addr, client);
        spec.server_name.clone_from(&self.server_name);
        spec
    }
}

/// Builds a lazily-connecting channel; connection errors surface as `Unavailable` on calls.
/// With mTLS every new connection uses the store's current client material.
pub fn channel(spec: &ChannelSpec, transport: &Transport) -> Result<Channel, GrpcError> {
    match transport {
        Transport::Insecure => {
            let target = Target::parse(spec, false)?;
            Ok(target
                .endpoint
                .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                    let host = target.host.clone();
                    let port = target.port;
                    async move {
                        Ok::<_, io::Error>(TokioIo::new(dial_tcp((host.as_str(), port)).await?))
                    }
                })))
        }
        Transport::Mtls(store) => {
            let store = Arc::clone(store);
            tls_channel(spec, move || Arc::clone(&store.current().client))
        }
    }
}

/// Builds a lazily-connecting TLS channel with a fixed rustls client configuration (for callers
/// that manage their own material, and for tests of refusal paths).
pub fn channel_with_tls_config(
    spec: &ChannelSpec,
    config: Arc<rustls::ClientConfig>,
) -> Result<Channel, GrpcError> {
    tls_channel(spec, move || Arc::clone(&config))
}

fn tls_channel<F>(spec: &ChannelSpec, config: F) -> Result<Channel, GrpcError>
where
    F: Fn() -> Arc<rustls::ClientConfig> + Send + 'static,
{
    let target = Target::parse(spec, true)?;
    let server_name = target.server_name(spec)?;
    let (host, port) = (target.host, target.port);
    Ok(target
        .endpoint
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let host = host.clone();
            let server_name = server_name.clone();
            let connector = TlsConnector::from(config());
            async move {
                let tcp = dial_tcp((host.as_str(), port)).await?;
                let tls = connector.connect(server_name, tcp).await?;
                Ok::<_, io::Error>(TokioIo::new(tls))
            }
        })))
}

/// Builds a [`BalancedChannel`](crate::balance::BalancedChannel) to every address the host of
/// `spec.address` resolves to: one lazily-connecting channel per address, each presenting the
/// store's current client material (mTLS) and checking `spec.server_name` (default: the host),
/// whichever address it dials (docs/design/scaling.md#replicas-and-client-side-balancing).
pub fn balanced_channel(
    spec: &ChannelSpec,
    transport: &Transport,
    config: crate::balance::BalanceConfig,
) -> Result<crate::balance::BalancedChannel, GrpcError> {
    let first_resolution = spec.connect_timeout;
    let (host, port, dial) = match transport {
        Transport::Insecure => {
            let target = Target::parse(spec, false)?;
            let (host, port) = (target.host, target.port);
            let dial = crate::balance::dial_with(target.endpoint, |addr: SocketAddr| async move {
                Ok::<_, io::Error>(TokioIo::new(dial_tcp(addr).await?))
            });
            (host, port, dial)
        }
        Transport::Mtls(store) => {
            let target = Target::parse(spec, true)?;
            let server_name = target.server_name(spec)?;
            let store = Arc::clone(store);
            let (host, port) = (target.host, target.port);
            let dial = crate::balance::dial_with(target.endpoint, move |addr: SocketAddr| {
                let server_name = server_name.clone();
                let connector = TlsConnector::from(Arc::clone(&store.current().client));
                async move {
                    let tcp = dial_tcp(addr).await?;
                    let tls = connector.connect(server_name, tcp).await?;
                    Ok::<_, io::Error>(TokioIo::new(tls))
                }
            });
            (host, port, dial)
        }
    };
    Ok(crate::balance::BalancedChannel::start(
        host,
        port,
        config,
        first_resolution,
        dial,
    ))
}

/// Opens a TCP connection to a backend, with Nagle's algorithm off (small gRPC frames).
async fn dial_tcp(addr: impl tokio::net::ToSocketAddrs) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// A parsed client address.
struct Target {
    endpoint: Endpoint,
    host: String,
    port: u16,
}

impl Target {
    /// The name the server certificate must carry: `spec.server_name`, else the address's host.
    fn server_name(&self, spec: &ChannelSpec) -> Result<ServerName<'static>, GrpcError> {
        let name = spec
            .server_name
            .clone()
            .unwrap_or_else(|| self.host.clone());
        ServerName::try_from(name.clone()).map_err(|_| GrpcError::ServerName { name })
    }

    fn parse(spec: &ChannelSpec, tls: bool) -> Result<Self, GrpcError> {
        let scheme = if tls { "https" } else { "http" };
        let with_scheme = if spec.address.contains("://") {
            spec.address.clone()
        } else {
            format!("{scheme}://{}", spec.address)
        };
        let uri: Uri = with_scheme.parse().map_err(|source| GrpcError::Address {
            address: spec.address.clone(),
            source,
        })?;
        let host = uri
            .host()
            .map(|host| {
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned()
            })
            .filter(|host| !host.is_empty())
            .ok_or_else(|| GrpcError::MissingHost {
                address: spec.address.clone(),
            })?;
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let endpoint = Endpoint::from(uri)
            .connect_timeout(spec.connect_timeout)
            .timeout(spec.request_timeout);
        Ok(Self {
            endpoint,
            host,
            port,
        })
    }
}

/// Backoff for retried calls: the shared [`Backoff`] with jitter, at most `max_retries` times
/// (docs/design/architecture.md#backoff).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = no retries).
    pub max_retries: usize,
    /// First delay.
    pub min_delay: Duration,
    /// Delay cap.
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// The policy from the client flags (100 ms doubling up to 5 s, with jitter).
    pub fn from_args(args: &GrpcClientArgs) -> Self {
        Self {
            max_retries: args.max_retries,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
        }
    }
}

/// Whether a failed call may succeed when retried: the server was unreachable or overloaded.
/// All Pacto RPCs are idempotent reads, so retrying them is safe.
pub fn is_transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::ResourceExhausted | Code::Aborted
    )
}

/// Runs `call` and retries it on transient statuses per `policy`.
pub async fn call_with_retries<T, F, Fut>(policy: &RetryPolicy, call: F) -> Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let backoff = Backoff::new(policy.min_delay, policy.max_delay)
        .with_jitter()
        .delays()
        .take(policy.max_retries);
    call.retry(backoff)
        .when(is_transient)
        .notify(|status: &Status, delay: Duration| {
            tracing::debug!(code = ?status.code(), message = status.message(), ?delay, "retrying gRPC call");
        })
        .await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn policy(max_retries: usize) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_until_success() {
        let attempts = AtomicUsize::new(0);
        let result = call_with_retries(&policy(3), || async {
            if attempts.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(Status::unavailable("down"))
            } else {
                Ok(42)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 42);
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_message_over_the_size_limit_is_not_retried() {
        // tonic reports a message over `max_{de,en}coding_message_size` as OutOfRange: a
        // permanent failure, so the caller sees it at once instead of retrying it.
        assert!(!is_transient(&Status::out_of_range(
            "Error, decoded message length too large"
        )));
        const { assert!(GRPC_MAX_MESSAGE_BYTES >= 4 * 1024 * 1024) };
    }

    #[tokio::test]
    async fn permanent_failures_and_exhausted_retries_surface() {
        let attempts = AtomicUsize::new(0);
        let status = call_with_retries(&policy(3), || async {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(Status::invalid_argument("bad"))
        })
        .await
        .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(attempts.load(Ordering::SeqCst), 1, "not retried");

        let attempts = AtomicUsize::new(0);
        let status = call_with_retries(&policy(2), || async {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(Status::unavailable("down"))
        })
        .await
        .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(attempts.load(Ordering::SeqCst), 3, "1 attempt + 2 retries");
    }

    #[test]
    fn addresses_are_parsed() {
        let spec = |address: &str| ChannelSpec {
            address: address.to_owned(),
            server_name: None,
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
        };
        let target = Target::parse(&spec("evaluator.pacto.svc:8443"), true).unwrap();
        assert_eq!(
            (target.host.as_str(), target.port),
            ("evaluator.pacto.svc", 8443)
        );
        let target = Target::parse(&spec("https://[::1]:9000"), true).unwrap();
        assert_eq!((target.host.as_str(), target.port), ("::1", 9000));
        let target = Target::parse(&spec("observer"), false).unwrap();
        assert_eq!(target.port, 80);
        assert!(matches!(
            Target::parse(&spec("http://"), false),
            Err(GrpcError::Address { .. } | GrpcError::MissingHost { .. })
        ));
    }
}
