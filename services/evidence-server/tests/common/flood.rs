//! The load of docs/design/evidence-server.md#limits, shared by `tests/flood.rs` and
//! `benches/flood.rs`: a flood of keep-alive HTTP/1.1 connections cycling through garbage POSTs
//! and GETs, a TCP proxy in front of the registry that counts the HTTP requests passing through
//! it, and the process's RSS. Only raw sockets and tokio: nothing of the server's own API, so the
//! bench builds against any version of the server.

#![allow(dead_code, reason = "the test and the bench use different subsets")]
#![allow(clippy::unwrap_used, reason = "test harness")]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pacto_runtime::CancellationToken;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One request of the flood.
#[derive(Debug, Clone)]
pub enum Load {
    /// `POST <path>` with this body.
    Post(String, Vec<u8>),
    /// `GET <path>`.
    Get(String),
}

impl Load {
    fn bytes(&self, addr: SocketAddr) -> Vec<u8> {
        let (method, path, body): (&str, &str, &[u8]) = match self {
            Self::Post(path, body) => ("POST", path, body),
            Self::Get(path) => ("GET", path, b""),
        };
        let mut out = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// `POST` or `GET`, and the path.
    pub fn label(&self) -> String {
        match self {
            Self::Post(path, _) => format!("POST {path}"),
            Self::Get(path) => format!("GET {path}"),
        }
    }
}

/// What the flood's connections got.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Answers by request label and status.
    pub answers: BTreeMap<(String, u16), u64>,
    /// Connections opened (the first of each task included).
    pub connections: u64,
    /// Connections that failed (connect, write, read or a malformed answer).
    pub errors: u64,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        for (k, v) in other.answers {
            *self.answers.entry(k).or_default() += v;
        }
        self.connections += other.connections;
        self.errors += other.errors;
    }

    /// Answers of requests whose label starts with `prefix`.
    pub fn answered(&self, prefix: &str) -> u64 {
        self.answers
            .iter()
            .filter(|((label, _), _)| label.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every answer.
    pub fn total(&self) -> u64 {
        self.answers.values().sum()
    }
}

/// A running flood; [`Flood::stop`] ends it and sums what its connections got. Its clients run
/// on a runtime of their own (two threads), as if on other machines: they do not queue on the
/// server's workers.
pub struct Flood {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<Tally>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Flood {
    /// `connections` tasks, each on one keep-alive connection to `addr` (a new one whenever the
    /// server closes it), sending `loads` in turn from its own offset, each request after the
    /// previous answer.
    pub fn start(addr: SocketAddr, connections: usize, loads: &[Load]) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("flood")
            .enable_all()
            .build()
            .unwrap();
        let stop = CancellationToken::new();
        let requests: Arc<Vec<(String, Vec<u8>)>> = Arc::new(
            loads
                .iter()
                .map(|load| (load.label(), load.bytes(addr)))
                .collect(),
        );
        let tasks = (0..connections)
            .map(|n| {
                let stop = stop.clone();
                let requests = Arc::clone(&requests);
                runtime.spawn(async move {
                    let mut tally = Tally::default();
                    tokio::select! {
                        () = connection_loop(addr, &requests, n, &mut tally) => {}
                        () = stop.cancelled() => {}
                    }
                    tally
                })
            })
            .collect();
        Self {
            stop,
            tasks,
            runtime: Some(runtime),
        }
    }

    /// Stops every connection and sums their tallies.
    pub async fn stop(mut self) -> Tally {
        self.stop.cancel();
        let mut total = Tally::default();
        for task in std::mem::take(&mut self.tasks) {
            total.merge(task.await.unwrap());
        }
        total
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn connection_loop(
    addr: SocketAddr,
    requests: &[(String, Vec<u8>)],
    offset: usize,
    tally: &mut Tally,
) {
    let mut next = offset;
    loop {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            tally.errors += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tally.connections += 1;
        loop {
            let (label, bytes) = &requests[next % requests.len()];
            next += 1;
            if stream.write_all(bytes).await.is_err() {
                tally.errors += 1;
                break;
            }
            let Some((status, close)) = read_answer(&mut stream).await else {
                tally.errors += 1;
                break;
            };
            *tally.answers.entry((label.clone(), status)).or_default() += 1;
            if close {
                break;
            }
        }
    }
}

/// Reads one answer (head and `Content-Length` body): its status and whether the server closes
/// the connection after it.
async fn read_answer(stream: &mut TcpStream) -> Option<(u16, bool)> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let close = head.contains("\r\nconnection: close");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut remaining = (head_end + length).saturating_sub(buffer.len());
    while remaining > 0 {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        remaining = remaining.saturating_sub(n);
    }
    Some((status, close))
}

/// A TCP proxy in front of a registry that counts the HTTP/1.1 requests passing through it (one
/// per request line, `… HTTP/1.1\r\n`, in the client-to-registry direction).
pub struct CountingProxy {
    /// The proxy's address: use it as the registry host.
    pub addr: SocketAddr,
    count: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl CountingProxy {
    /// Starts the proxy in front of `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let (counter, token) = (Arc::clone(&count), stop.clone());
        tokio::spawn(async move {
            loop {
                let (inbound, _) = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(_) => continue,
                    },
                    () = token.cancelled() => return,
                };
                let counter = Arc::clone(&counter);
                let token = token.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut from_client, mut to_client) = inbound.into_split();
                    let (mut from_registry, mut to_registry) = outbound.into_split();
                    let up = async {
                        let mut tail: Vec<u8> = Vec::new();
                        let mut chunk = vec![0u8; 64 * 1024];
                        loop {
                            let n = match from_client.read(&mut chunk).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            tail.extend_from_slice(&chunk[..n]);
                            let lines = tail.windows(11).filter(|w| w == b" HTTP/1.1\r\n").count();
                            counter.fetch_add(lines as u64, Ordering::Relaxed);
                            let keep = tail.len().min(10);
                            tail.drain(..tail.len() - keep);
                            if to_registry.write_all(&chunk[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = to_registry.shutdown().await;
                    };
                    let down = async {
                        let _ = tokio::io::copy(&mut from_registry, &mut to_client).await;
                        let _ = to_client.shutdown().await;
                    };
                    tokio::select! {
                        _ = async { tokio::join!(up, down) } => {}
                        () = token.cancelled() => {}
                    }
                });
            }
        });
        Self { addr, count, stop }
    }

    /// The registry host through the proxy (`127.0.0.1:<port>`).
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// HTTP requests forwarded so far.
    pub fn requests(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The process's resident set size and its peak (`VmRSS`, `VmHWM`), in MiB.
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The `q` quantile of `samples` (sorted in place), in milliseconds.
pub fn quantile_ms(samples: &mut [Duration], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort();
    let at = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples[at].as_secs_f64() * 1000.0
}
