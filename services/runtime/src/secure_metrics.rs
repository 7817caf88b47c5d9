//! Secure metrics (`--metrics-secure`; docs/design/architecture.md#secure-metrics): `GET /metrics`
//! over HTTPS on `--metrics-addr`, served with the service's own certificate (reloaded like the
//! gRPC port's; no client certificate asked for) through the shared HTTP connection loop
//! ([`crate::http`], the admin port's limits).
//!
//! Each request is reviewed by the API server, nothing cached: the bearer token of its
//! `Authorization` header goes into a TokenReview (no audiences: the API server's own), and the
//! user it names, with uid, groups and extra, into a SubjectAccessReview of `get` on the
//! non-resource URL `/metrics`. No token or a token the API server does not accept answers 401
//! (`WWW-Authenticate: Bearer`), a user not allowed 403, a review that failed 500. The token is
//! never logged, kept or put into an error; only the reviewed user name is logged.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::Duration,
};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec, UserInfo},
    authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, api::PostParams};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::{admin::MetricsEndpoint, http::Reply, tls::TlsStore};

/// The path served, and the non-resource URL a scraper must be allowed to `get`.
pub const METRICS_PATH: &str = "/metrics";
/// How long one review may take before the scrape answers 500.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Content type of the Prometheus text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Setting up the secure metrics server failed.
#[derive(Debug, thiserror::Error)]
pub enum SecureMetricsError {
    /// `--metrics-addr` could not be bound.
    #[error("cannot bind the HTTPS metrics server to {addr} (--metrics-addr)")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The Kubernetes client the reviews are sent with could not be created.
    #[error("cannot create the Kubernetes client that reviews metrics scrapes (--metrics-secure)")]
    Client(#[source] kube::Error),
    /// The process runs without TLS material (a runtime built with `--insecure`).
    #[error("secure metrics need the service's TLS certificate; the process runs without one")]
    NoTls,
    /// `--metrics-addr` and `--listen-addr` name the same address.
    #[error(
        "--metrics-addr and --listen-addr are both {addr}: the HTTPS metrics server and the gRPC server need a port each"
    )]
    SameAddress {
        /// The address both name.
        addr: SocketAddr,
    },
}

/// A review the API server could not answer (the scrape answers 500). Carries no token.
#[derive(Debug, thiserror::Error)]
enum ReviewError {
    /// Creating the review failed (unreachable, refused, no right to create it).
    #[error("the {review} request failed")]
    Request {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer within [`REVIEW_TIMEOUT`].
    #[error("the {review} request took more than {REVIEW_TIMEOUT:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
    },
    /// The answer has no status.
    #[error("the {review} answer has no status")]
    NoStatus {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
    },
}

/// What one scrape's reviews decided.
#[derive(Debug)]
enum Decision {
    /// The token's user may get `/metrics`.
    Allowed,
    /// No token, or one the API server does not accept.
    Unauthenticated,
    /// The token's user may not get `/metrics`.
    Forbidden {
        /// The reviewed user name.
        user: String,
    },
}

/// Sends the two reviews of each scrape with the service's Kubernetes client.
#[derive(Clone)]
struct Reviewer {
    client: kube::Client,
}

impl Reviewer {
    /// Authenticates `token` (TokenReview) and authorises its user (SubjectAccessReview).
    async fn review(&self, token: &str) -> Result<Decision, ReviewError> {
        let Some(user) = self.authenticate(token).await? else {
            return Ok(Decision::Unauthenticated);
        };
        let name = user.username.clone().unwrap_or_default();
        if self.authorize(user).await? {
            tracing::debug!(user = %name, "metrics scrape allowed");
            Ok(Decision::Allowed)
        } else {
            Ok(Decision::Forbidden { user: name })
        }
    }

    /// The user the token names, if the API server accepts it.
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        const REVIEW: &str = "TokenReview";
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = create(REVIEW, api.create(&PostParams::default(), &review)).await?;
        let status = answer
            .status
            .ok_or(ReviewError::NoStatus { review: REVIEW })?;
        if status.authenticated != Some(true) {
            // status.error says why; it can quote what it was given, so it is not logged
            tracing::debug!("metrics scrape with a token the API server does not accept");
            return Ok(None);
        }
        Ok(Some(status.user.unwrap_or_default()))
    }

    /// Whether `user` may `get` the non-resource URL `/metrics`.
    async fn authorize(&self, user: UserInfo) -> Result<bool, ReviewError> {
        const REVIEW: &str = "SubjectAccessReview";
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = create(REVIEW, api.create(&PostParams::default(), &review)).await?;
        let status = answer
            .status
            .ok_or(ReviewError::NoStatus { review: REVIEW })?;
        Ok(status.allowed && status.denied != Some(true))
    }
}

/// Awaits one review request within [`REVIEW_TIMEOUT`].
async fn create<T>(
    review: &'static str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ReviewError> {
    match tokio::time::timeout(REVIEW_TIMEOUT, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(source)) => Err(ReviewError::Request { review, source }),
        Err(_) => Err(ReviewError::Timeout { review }),
    }
}

/// The bearer token of a request's `headers`, if it carries one.
fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Answers one request of the HTTPS metrics server.
async fn answer(request: Request<Incoming>, reviewer: Reviewer, metrics: MetricsEndpoint) -> Reply {
    if request.uri().path() != METRICS_PATH {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if request.method() != Method::GET {
        let mut reply = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        reply
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return reply;
    }
    let Some(token) = bearer_token(request.headers()) else {
        return unauthorized();
    };
    match reviewer.review(token).await {
        Ok(Decision::Allowed) => {
            let mut reply = Response::new(Full::new(Bytes::from(metrics.render())));
            reply.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(PROMETHEUS_TEXT),
            );
            reply
        }
        Ok(Decision::Unauthenticated) => unauthorized(),
        Ok(Decision::Forbidden { user }) => {
            tracing::debug!(%user, "metrics scrape refused: the user may not get /metrics");
            text(
                StatusCode::FORBIDDEN,
                format!("{user} may not get {METRICS_PATH}\n"),
            )
        }
        Err(error) => {
            tracing::warn!(error = %crate::tls::error_chain(&error), "cannot review a metrics scrape");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the scrape could not be reviewed\n",
            )
        }
    }
}

fn unauthorized() -> Reply {
    let mut reply = text(StatusCode::UNAUTHORIZED, "unauthorized\n");
    reply
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    reply
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Reply {
    let mut reply = Response::new(Full::new(body.into()));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

/// The secure metrics port of a runtime before it serves: the bound listener, the TLS material
/// and the client the reviews are sent with.
pub(crate) struct SecureMetrics {
    listener: TcpListener,
    store: Arc<TlsStore>,
    reviewer: Reviewer,
}

impl std::fmt::Debug for SecureMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureMetrics")
            .field("addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl SecureMetrics {
    /// The port on `listener`, served with `store`'s certificate, reviewed with `client`.
    pub(crate) fn new(listener: TcpListener, store: Arc<TlsStore>, client: kube::Client) -> Self {
        Self {
            listener,
            store,
            reviewer: Reviewer { client },
        }
    }

    /// Where it listens.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves `metrics` until `shutdown` (the admin port's limits); in-flight scrapes finish.
    pub(crate) async fn serve(
        self,
        metrics: MetricsEndpoint,
        shutdown: CancellationToken,
    ) -> io::Result<()> {
        let acceptor = TlsListener {
            listener: self.listener,
            store: self.store,
        };
        let reviewer = self.reviewer;
        let handler = move |request| answer(request, reviewer.clone(), metrics.clone());
        crate::http::serve(acceptor, crate::http::ADMIN_LIMITS, handler, shutdown).await
    }
}

/// Binds `--metrics-addr`.
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, SecureMetricsError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| SecureMetricsError::Bind { addr, source })
}

/// TCP connections whose TLS handshake, with the material current at accept, runs inside the
/// connection (bounded by the loop's header deadline and counted in its connection cap).
struct TlsListener {
    listener: TcpListener,
    store: Arc<TlsStore>,
}

impl crate::http::Acceptor for TlsListener {
    type Io = TlsConnection;

    async fn accept(&mut self) -> io::Result<TlsConnection> {
        let (tcp, _) = self.listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let acceptor = TlsAcceptor::from(Arc::clone(&self.store.current().https));
        Ok(TlsConnection::Handshake(Box::new(acceptor.accept(tcp))))
    }
}

/// A server-side TLS connection that completes its handshake on first use.
enum TlsConnection {
    Handshake(Box<tokio_rustls::Accept<TcpStream>>),
    Ready(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Failed,
}

impl TlsConnection {
    /// Drives the handshake; `Ready` once the stream is established.
    fn poll_established(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<&mut tokio_rustls::server::TlsStream<TcpStream>>> {
        if let Self::Handshake(accept) = self {
            match ready!(Pin::new(accept).poll(cx)) {
                Ok(stream) => *self = Self::Ready(Box::new(stream)),
                Err(error) => {
                    *self = Self::Failed;
                    return Poll::Ready(Err(error));
                }
            }
        }
        match self {
            Self::Ready(stream) => Poll::Ready(Ok(stream.as_mut())),
            Self::Handshake(_) | Self::Failed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the TLS handshake failed",
            ))),
        }
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let stream = ready!(self.get_mut().poll_established(cx))?;
        Pin::new(stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let stream = ready!(self.get_mut().poll_established(cx))?;
        Pin::new(stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let stream = ready!(self.get_mut().poll_established(cx))?;
        Pin::new(stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TlsConnection::Ready(stream) => Pin::new(stream).poll_shutdown(cx),
            // nothing established to close
            TlsConnection::Handshake(_) | TlsConnection::Failed => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        CancellationToken, Runtime, RuntimeError,
        args::ServerArgs,
        service::ServiceNames,
        testing::{TestCa, TestEndpoint},
    };

    #[test]
    fn only_a_non_empty_bearer_token_is_taken() {
        let token = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            bearer_token(&headers).map(str::to_owned)
        };
        assert_eq!(token("Bearer abc.def").as_deref(), Some("abc.def"));
        assert_eq!(token("bearer abc").as_deref(), Some("abc"));
        assert_eq!(token("Bearer  abc ").as_deref(), Some("abc"));
        assert_eq!(token("Bearer "), None);
        assert_eq!(token("Bearer"), None);
        assert_eq!(token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token(&http::HeaderMap::new()), None);
    }

    fn names() -> ServiceNames {
        crate::testing::service_names("", "secure-metrics-unit")
    }

    /// A client of an API server that is never called (the checks below fail before a review).
    fn unused_client() -> kube::Client {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    /// Secure metrics need the process's certificate; a gRPC port on the metrics address is
    /// refused naming both flags.
    #[tokio::test]
    async fn secure_metrics_need_tls_and_a_port_of_their_own() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let admin = crate::admin::bind(loopback).await.unwrap();
        let mut plain = Runtime::new(names(), admin, CancellationToken::new()).unwrap();
        let error = plain
            .serve_metrics_securely(bind(loopback).await.unwrap(), unused_client())
            .unwrap_err();
        assert!(
            matches!(
                error,
                RuntimeError::SecureMetrics(SecureMetricsError::NoTls)
            ),
            "{error:?}"
        );

        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("unit CA").unwrap();
        let (_endpoint, config) = TestEndpoint::bind(&ca, dir.path(), "unit.pacto.svc", &[]).await;
        let mut rt = Runtime::serving(config, names(), CancellationToken::new()).unwrap();
        let listener = bind(loopback).await.unwrap();
        let addr = listener.local_addr().unwrap();
        rt.serve_metrics_securely(listener, unused_client())
            .unwrap();
        let server = ServerArgs {
            listen_addr: addr,
            allowed_identities: Vec::new(),
        };
        let error = rt.bind_grpc(&server).await.unwrap_err();
        assert!(
            matches!(
                error,
                RuntimeError::SecureMetrics(SecureMetricsError::SameAddress { addr: same }) if same == addr
            ),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("--metrics-addr") && text.contains("--listen-addr"),
            "{text}"
        );
    }
}
