//! A producer's commit latency under a flood (docs/design/evidence-server.md#limits), printed,
//! never asserted: the real server in process (the real contract-resolver over mTLS,
//! docker-registry 2.8 in the tag-schema mode behind a proxy that counts the registry requests),
//! first idle, then while 200 keep-alive connections cycle through garbage POSTs (bytes that are
//! not JSON; a well-formed envelope signed by a key nobody trusts), `GET /targets` and
//! `GET /ready`. Printed per phase: the producer's POST latency (p50, p99; a fresh connection
//! per POST, so the wait for a connection slot counts), the flood's answers, the registry
//! requests (per garbage POST in a garbage-only phase), and the process's RSS (the server and
//! the flood's clients share the process).
//!
//! `cargo test -p pacto-evidence-server --bench flood` (debug build) or `cargo bench …` (release).
//! `PACTO_BENCH_CONNECTIONS` (default 200), `PACTO_BENCH_COMMITS` (default 20 per phase),
//! `PACTO_BENCH_SEED` (records stored before the first phase, default 50). Needs the
//! docker-registry package. Builds against any version of the server: it only uses the test
//! harness (`tests/common`) and raw sockets.

#![allow(clippy::unwrap_used, reason = "bench harness")]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/flood.rs"]
mod flood;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Payments, payments_envelope, post_envelope, start_payments};
use flood::{CountingProxy, Flood, Load, quantile_ms, rss_mib};
use pacto_evidence::keys;
use pacto_evidence_server::PREFIX;
use pacto_runtime::CancellationToken;
use pacto_testenv::registry::Registry;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Producer {
    api: SocketAddr,
    key: ed25519_dalek::SigningKey,
    subject: String,
    next: u64,
}

impl Producer {
    /// `count` sequential POSTs of fresh envelopes; their latencies.
    async fn commit(&mut self, count: usize) -> Vec<Duration> {
        let mut latencies = Vec::with_capacity(count);
        for _ in 0..count {
            let id = format!("flood-bench-{}", self.next);
            let envelope = payments_envelope(&self.key, &self.subject, &id, self.next);
            self.next += 1;
            let started = Instant::now();
            let (status, body) = post_envelope(self.api, &envelope).await;
            latencies.push(started.elapsed());
            assert_eq!(status, 202, "{body}");
        }
        latencies
    }
}

fn row(phase: &str, latencies: &mut [Duration], extra: &str) {
    let (rss, peak) = rss_mib();
    println!(
        "| {phase} | {} | {:.1} ms | {:.1} ms | {extra} | {rss:.0} MiB (peak {peak:.0}) |",
        latencies.len(),
        quantile_ms(latencies, 0.5),
        quantile_ms(latencies, 0.99),
    );
}

async fn run() {
    let connections = setting("PACTO_BENCH_CONNECTIONS", 200);
    let commits = setting("PACTO_BENCH_COMMITS", 20);
    let seed = setting("PACTO_BENCH_SEED", 50);
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let registry = Registry::start().unwrap();
    let proxy = CountingProxy::start(registry.host().parse().unwrap()).await;
    let host = proxy.host();
    let Payments {
        server,
        subject,
        key,
        ..
    } = start_payments(dir.path(), &host, &stop).await;
    let mut producer = Producer {
        api: server.api,
        key,
        subject: subject.clone(),
        next: 1,
    };
    producer.commit(seed).await;

    let post = format!("{PREFIX}/envelopes");
    let forged = payments_envelope(&keys::generate().unwrap(), &subject, "forged", 1);
    let junk = b"this is not an envelope".to_vec();
    let garbage = vec![
        Load::Post(post.clone(), junk.clone()),
        Load::Post(post.clone(), forged.clone()),
    ];
    let mixed = vec![
        Load::Post(post.clone(), junk),
        Load::Get(format!("{PREFIX}/targets")),
        Load::Post(post, forged),
        Load::Get(format!("{PREFIX}/ready")),
    ];

    println!(
        "evidence-server flood: docker-registry 2.8 (tag schema), {seed} records stored first, {commits} commits per phase, {connections} flood connections"
    );
    println!("| phase | commits | p50 | p99 | flood answers, registry requests | RSS |");
    println!("|---|---|---|---|---|---|");

    // idle
    let before = proxy.requests();
    let mut idle = producer.commit(commits).await;
    let per_commit = (proxy.requests() - before) as f64 / commits as f64;
    row("idle", &mut idle, &format!("-, {per_commit:.1} per commit"));

    // garbage POSTs alone: what each costs the registry
    let before = proxy.requests();
    let load = Flood::start(server.api, connections, &garbage);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tally = load.stop().await;
    let requests = proxy.requests() - before;
    let posts = tally.answered("POST");
    println!(
        "| garbage POSTs only, 3 s | - | - | - | {posts} POSTs answered ({} errors), {requests} registry requests = {:.2} per garbage POST | {:.0} MiB |",
        tally.errors,
        requests as f64 / posts.max(1) as f64,
        rss_mib().0
    );

    // the mixed flood while the producer commits
    let before = proxy.requests();
    let started = Instant::now();
    let load = Flood::start(server.api, connections, &mixed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut flooded = producer.commit(commits).await;
    let (rss_flooded, _) = rss_mib();
    let tally = load.stop().await;
    let seconds = started.elapsed().as_secs_f64();
    let requests = proxy.requests() - before;
    println!(
        "| flood: garbage POSTs, /targets, /ready | {} | {:.1} ms | {:.1} ms | {} answers in {seconds:.1} s ({} POST, {} /targets, {} /ready; {} connections, {} errors), {requests} registry requests | {rss_flooded:.0} MiB (peak {:.0}) |",
        flooded.len(),
        quantile_ms(&mut flooded, 0.5),
        quantile_ms(&mut flooded, 0.99),
        tally.total(),
        tally.answered("POST"),
        tally.answered("GET /api/evidence/v1/targets"),
        tally.answered("GET /api/evidence/v1/ready"),
        tally.connections,
        tally.errors,
        rss_mib().1,
    );
    for ((label, status), count) in &tally.answers {
        println!("  {label} -> {status}: {count}");
    }
    stop.cancel();
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}
