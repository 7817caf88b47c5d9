//! The HTTP connection loop of every plain-HTTP server: the admin endpoints of each service and
//! the Evidence Server's ingestion API (docs/design/architecture.md#http-servers). One accept
//! loop, one connection cap, the same deadlines:
//!
//! - At most [`Limits::max_connections`] connections are served at once. Once every slot is
//!   taken the loop stops accepting (the connection it holds waits for a slot, the next ones
//!   wait in the kernel's listen queue: first come, first served) instead of accepting and
//!   refusing them. While every slot is taken, each answer carries `Connection: close`: a
//!   kept-alive connection gives its slot back after one request, so a flood of kept-alive
//!   clients cannot hold the slots others wait for.
//! - Request headers, and the idle time before the next request of a kept-alive connection, are
//!   bounded by [`Limits::header_timeout`] (hyper's header read timeout); every write of the
//!   answer by [`Limits::write_timeout`] (a client that stops reading loses its connection). A
//!   body, when a handler reads one, is bounded by [`Limits::body_timeout`], which the handler
//!   applies (the Evidence Server's API).
//! - An accept error backs off (5 ms, doubling to 1 s, reset by the next accepted connection)
//!   instead of retrying at once: out of file descriptors (`EMFILE`, `ENFILE`) or memory, the
//!   pending connection stays queued and an immediate retry fails the same way, a busy loop.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Request, Response, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;

/// An answer of the API.
pub type Reply = Response<Full<Bytes>>;

/// The bounds every connection is held to (the Evidence Server's flags `--read-header-timeout`,
/// `--read-body-timeout`, `--write-timeout`, `--max-connections`; [`ADMIN_LIMITS`] for admin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time to send the request headers; also the longest idle time between two requests of a
    /// kept-alive connection.
    pub header_timeout: Duration,
    /// Time to send the whole body once the headers are in.
    pub body_timeout: Duration,
    /// Longest time one write of an answer may make no progress.
    pub write_timeout: Duration,
    /// Connections served at once; more wait in the listen queue.
    pub max_connections: usize,
}

/// The admin endpoints' bounds: scrapes and probes are small GETs, so a few connections and short
/// deadlines (no body is read).
pub const ADMIN_LIMITS: Limits = Limits {
    header_timeout: Duration::from_secs(10),
    body_timeout: Duration::from_secs(10),
    write_timeout: Duration::from_secs(10),
    max_connections: 32,
};

impl Default for Limits {
    /// The flags' defaults: 10 s, 10 s, 10 s, 64 connections.
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            max_connections: 64,
        }
    }
}

/// Where connections come from: a [`TcpListener`], or a test's stand-in.
pub trait Acceptor: Send + 'static {
    /// One connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

impl Acceptor for TcpListener {
    type Io = TcpStream;

    async fn accept(&mut self) -> io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(stream, _)| stream)
    }
}

/// The first and the longest pause after an accept error (Go's `http.Server` uses the same).
const BACKOFF_MIN: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The pause after consecutive accept errors: the shared backoff from [`BACKOFF_MIN`] doubling to
/// [`BACKOFF_MAX`], a streak logged once (docs/design/architecture.md#backoff).
fn accept_backoff() -> Backoff {
    Backoff::new(BACKOFF_MIN, BACKOFF_MAX)
        .named("accept")
        .on_failure(
            "accept failed; backing off (5 ms doubling to 1 s) until a connection is accepted",
        )
        .on_recovery("accepting connections again")
}

// Linux errno values (the project runs on Linux only).
const ENOMEM: i32 = 12;
const ENFILE: i32 = 23;
const EMFILE: i32 = 24;
const ENONET: i32 = 64;
const EPROTO: i32 = 71;
const ENOPROTOOPT: i32 = 92;
const EOPNOTSUPP: i32 = 95;
const ENETDOWN: i32 = 100;
const ENETUNREACH: i32 = 101;
const ENOBUFS: i32 = 105;
const EHOSTDOWN: i32 = 112;
const EHOSTUNREACH: i32 = 113;

/// Whether the listener is still usable after `error`: a failure of one pending connection
/// (aborted, reset, or a network error Linux reports through `accept`), or a lack of file
/// descriptors or memory that ends when connections close. Anything else (a closed or invalid
/// listener) stops the server.
fn is_retryable(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
    ) || error.raw_os_error().is_some_and(|code| {
        [
            ENOMEM,
            ENFILE,
            EMFILE,
            ENOBUFS,
            ENONET,
            EPROTO,
            ENOPROTOOPT,
            EOPNOTSUPP,
            ENETDOWN,
            ENETUNREACH,
            EHOSTDOWN,
            EHOSTUNREACH,
        ]
        .contains(&code)
    })
}

/// Serves `handler` on the connections of `acceptor` within `limits` until `shutdown`; in-flight
/// requests finish first. An accept error that leaves the listener usable backs off; any other
/// ends the loop with that error.
pub async fn serve<A, H, F>(
    mut acceptor: A,
    limits: Limits,
    handler: H,
    shutdown: CancellationToken,
) -> io::Result<()>
where
    A: Acceptor,
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = tokio_util::task::TaskTracker::new();
    let mut backoff = accept_backoff();
    let outcome = loop {
        let accepted = tokio::select! {
            accepted = acceptor.accept() => accepted,
            () = shutdown.cancelled() => break Ok(()),
        };
        let io = match accepted {
            Ok(io) => {
                backoff.succeeded();
                io
            }
            Err(error) if is_retryable(&error) => {
                let delay = backoff.failed(&error);
                tokio::select! {
                    () = tokio::time::sleep(delay) => continue,
                    () = shutdown.cancelled() => break Ok(()),
                }
            }
            Err(error) => break Err(error),
        };
        // every slot taken: this connection waits here, the next ones in the listen queue
        let permit = tokio::select! {
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break Ok(()),
            },
            () = shutdown.cancelled() => break Ok(()),
        };
        connections.spawn(connection(
            io,
            permit,
            Arc::clone(&slots),
            limits,
            handler.clone(),
            shutdown.clone(),
        ));
    };
    connections.close();
    connections.wait().await;
    outcome
}

/// Serves one connection, holding `permit` (its slot) until it ends.
async fn connection<Io, H, F>(
    io: Io,
    permit: OwnedSemaphorePermit,
    slots: Arc<Semaphore>,
    limits: Limits,
    handler: H,
    shutdown: CancellationToken,
) where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let (handler, slots) = (handler.clone(), Arc::clone(&slots));
        async move {
            let mut reply = handler(request).await;
            // every slot taken: give this one back after the answer
            if slots.available_permits() == 0 {
                reply
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(reply)
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(
            TokioIo::new(WriteDeadline::new(io, limits.write_timeout)),
            service,
        );
    tokio::pin!(connection);
    let outcome = tokio::select! {
        outcome = connection.as_mut() => outcome,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = outcome {
        tracing::debug!(%error, "connection ended with an error");
    }
    drop(permit);
}

/// A connection whose writes fail with `TimedOut` once one makes no progress for `timeout`
/// (reads pass through: hyper bounds them itself).
struct WriteDeadline<Io> {
    io: Io,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<Io> WriteDeadline<Io> {
    fn new(io: Io, timeout: Duration) -> Self {
        Self {
            io,
            timeout,
            stalled: None,
        }
    }

    /// After an operation: progress disarms the deadline; `Pending` arms it (once) and turns
    /// into `TimedOut` when it passes.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for WriteDeadline<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.io).poll_flush(cx);
        this.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.io).poll_shutdown(cx);
        this.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::time::Instant;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn ok(text: &'static str) -> Reply {
        Response::new(Full::new(Bytes::from_static(text.as_bytes())))
    }

    #[test]
    fn the_backoff_doubles_to_a_second_and_resets() {
        let mut backoff = accept_backoff();
        let emfile = io::Error::from_raw_os_error(EMFILE);
        let delays: Vec<Duration> = (0..10).map(|_| backoff.failed(&emfile)).collect();
        assert_eq!(delays[0], Duration::from_millis(5));
        assert_eq!(delays[1], Duration::from_millis(10));
        assert_eq!(delays[7], Duration::from_millis(640));
        assert_eq!(delays[8], Duration::from_secs(1));
        assert_eq!(delays[9], Duration::from_secs(1));
        assert!(
            backoff.succeeded(),
            "an accepted connection ends the streak"
        );
        assert!(!backoff.succeeded());
        assert_eq!(backoff.failed(&emfile), Duration::from_millis(5));
    }

    #[test]
    fn only_errors_that_leave_the_listener_usable_are_retried() {
        for code in [EMFILE, ENFILE, ENOBUFS, ENOMEM, EPROTO, ENETUNREACH] {
            assert!(is_retryable(&io::Error::from_raw_os_error(code)), "{code}");
        }
        assert!(is_retryable(&io::ErrorKind::ConnectionAborted.into()));
        // EBADF, EINVAL: the listener itself is gone
        assert!(!is_retryable(&io::Error::from_raw_os_error(9)));
        assert!(!is_retryable(&io::Error::from_raw_os_error(22)));
    }

    /// Fails every accept with `EMFILE` at once, noting when each call came; stops the server
    /// at the seventh.
    struct OutOfFiles {
        calls: Arc<std::sync::Mutex<Vec<Instant>>>,
        shutdown: CancellationToken,
    }

    impl Acceptor for OutOfFiles {
        type Io = TcpStream;

        async fn accept(&mut self) -> io::Result<TcpStream> {
            let mut calls = self.calls.lock().unwrap();
            calls.push(Instant::now());
            if calls.len() == 7 {
                self.shutdown.cancel();
            }
            Err(io::Error::from_raw_os_error(EMFILE))
        }
    }

    /// The regression of the busy loop: with every accept failing at once, the loop waits
    /// 5, 10, 20, 40, 80, 160 ms between the calls (a loop that retries at once makes them all
    /// within microseconds).
    #[tokio::test]
    async fn emfile_backs_off_instead_of_spinning() {
        let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let shutdown = CancellationToken::new();
        let acceptor = OutOfFiles {
            calls: Arc::clone(&calls),
            shutdown: shutdown.clone(),
        };
        serve(acceptor, Limits::default(), |_| async { ok("") }, shutdown)
            .await
            .unwrap();
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 7);
        for (n, pair) in calls.windows(2).enumerate() {
            let gap = pair[1] - pair[0];
            let least = BACKOFF_MIN * 2u32.pow(n as u32);
            assert!(
                gap >= least,
                "call {}: {gap:?} after the previous one, want {least:?}",
                n + 2
            );
        }
    }

    /// A fatal accept error ends the loop with it.
    #[tokio::test]
    async fn an_unusable_listener_stops_the_loop() {
        struct Closed;
        impl Acceptor for Closed {
            type Io = TcpStream;
            async fn accept(&mut self) -> io::Result<TcpStream> {
                Err(io::Error::from_raw_os_error(9))
            }
        }
        let error = serve(
            Closed,
            Limits::default(),
            |_| async { ok("") },
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert_eq!(error.raw_os_error(), Some(9));
    }

    async fn start(
        limits: Limits,
        body: &'static [u8],
    ) -> (std::net::SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            limits,
            move |_| async move { Response::new(Full::new(Bytes::from_static(body))) },
            shutdown.clone(),
        ));
        (addr, shutdown)
    }

    /// One keep-alive GET on `stream`: the answer's head (lower case), after the body was read.
    async fn get(stream: &mut TcpStream) -> String {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before an answer: {out:?}");
            out.extend_from_slice(&chunk[..n]);
            if let Some(at) = out.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&out[..at]).to_lowercase();
                if out.len() >= at + 4 + 2 {
                    return head;
                }
            }
        }
    }

    /// With two slots: a kept-alive connection keeps its slot while one is free; the answer
    /// that takes the last slot closes its connection; with both slots held (one kept alive,
    /// one sending its headers) a further request waits unanswered until a slot frees.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_over_the_cap_wait_and_a_full_server_closes_after_each_answer() {
        let limits = Limits {
            header_timeout: Duration::from_secs(30),
            max_connections: 2,
            ..Limits::default()
        };
        let (addr, shutdown) = start(limits, b"ok").await;
        let mut kept = TcpStream::connect(addr).await.unwrap();
        let head = get(&mut kept).await;
        assert!(!head.contains("connection: close"), "{head}");
        let mut closed = TcpStream::connect(addr).await.unwrap();
        let head = get(&mut closed).await;
        assert!(head.contains("connection: close"), "{head}");
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), closed.read_to_end(&mut rest))
            .await
            .expect("the server closes the connection that took the last slot")
            .unwrap();
        // its slot is back: taken by a client still sending its headers
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut waiting = TcpStream::connect(addr).await.unwrap();
        waiting
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut byte = [0u8; 1];
        let early = tokio::time::timeout(Duration::from_millis(300), waiting.read(&mut byte)).await;
        assert!(early.is_err(), "served over the cap");
        drop(kept);
        let started = Instant::now();
        let n = tokio::time::timeout(Duration::from_secs(5), waiting.read(&mut byte))
            .await
            .expect("served once a slot was free")
            .unwrap();
        assert_eq!(n, 1, "answered after {:?}", started.elapsed());
        drop(slow);
        shutdown.cancel();
    }

    /// A kept-alive connection that sends nothing more is closed after the header timeout,
    /// which frees its slot.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_kept_alive_connection_is_closed_after_the_header_timeout() {
        let limits = Limits {
            header_timeout: Duration::from_millis(200),
            ..Limits::default()
        };
        let (addr, shutdown) = start(limits, b"ok").await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        get(&mut stream).await;
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "still open 5 s after the answer");
        shutdown.cancel();
    }

    /// A client that stops reading a large answer loses its connection after the write
    /// timeout, and its slot serves the next client.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_stops_reading_is_cut_off_after_the_write_timeout() {
        static LARGE: std::sync::LazyLock<Vec<u8>> =
            std::sync::LazyLock::new(|| vec![b'x'; 64 << 20]);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let limits = Limits {
            write_timeout: Duration::from_millis(300),
            max_connections: 1,
            ..Limits::default()
        };
        tokio::spawn(serve(
            listener,
            limits,
            |_| async { Response::new(Full::new(Bytes::from_static(LARGE.as_slice()))) },
            shutdown.clone(),
        ));
        let mut stalled = TcpStream::connect(addr).await.unwrap();
        stalled
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // never read `stalled`; the next client gets the only slot once it is cut off
        let mut next = TcpStream::connect(addr).await.unwrap();
        next.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(10), next.read(&mut byte))
            .await
            .expect("the stalled client still holds the slot")
            .unwrap();
        assert_eq!(n, 1);
        drop(stalled);
        shutdown.cancel();
    }
}
