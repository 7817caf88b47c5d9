//! The Evidence Server under a flood (docs/design/evidence-server.md#limits): the real server in
//! process, the real contract-resolver over mTLS, docker-registry 2.8 (tag-schema mode) behind a
//! proxy that counts every registry request (the server's and the resolver's).
//!
//! - 200 kept-alive connections of garbage POSTs (bytes that are not JSON; a well-formed envelope
//!   under the trusted key id, signed by another key) cost the registry 0 requests;
//! - 200 connections of `GET /targets` and `GET /ready` cost a bounded number of registry reads
//!   (one scan per `--targets-max-age`, one preflight per second), not one per request;
//! - a producer commits while 200 connections mix both: every POST is accepted; its latency,
//!   idle and under the flood, and the RSS are printed;
//! - a body that stops arriving is refused with `invalid_envelope` after `--read-body-timeout`
//!   and its connection closed.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;
#[path = "common/flood.rs"]
mod flood;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use flood::{CountingProxy, Flood, Load, quantile_ms, rss_mib};
use pacto_evidence::keys;
use pacto_evidence_server::PREFIX;
use pacto_runtime::CancellationToken;
use pacto_testenv::registry::Registry;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const CONNECTIONS: usize = 200;

async fn commit(
    api: SocketAddr,
    key: &ed25519_dalek::SigningKey,
    subject: &str,
    sequences: std::ops::Range<u64>,
) -> Vec<Duration> {
    let mut latencies = Vec::new();
    for sequence in sequences {
        let envelope = payments_envelope(key, subject, &format!("flood-{sequence}"), sequence);
        let started = Instant::now();
        let (status, body) = post_envelope(api, &envelope).await;
        latencies.push(started.elapsed());
        assert_eq!(status, 202, "{body}");
    }
    latencies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_costs_the_registry_nothing_per_garbage_post_and_a_producer_still_commits() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start().unwrap();
    let proxy = CountingProxy::start(registry.host().parse().unwrap()).await;
    let host = proxy.host();
    let stop = CancellationToken::new();
    let Payments {
        server,
        subject,
        key,
        ..
    } = start_payments(dir.path(), &host, &stop).await;
    let mut idle = commit(server.api, &key, &subject, 1..11).await;

    let post = format!("{PREFIX}/envelopes");
    let forged = payments_envelope(&keys::generate().unwrap(), &subject, "forged", 1);
    let junk = b"this is not an envelope".to_vec();

    // garbage POSTs: refused before anything reaches the registry
    let before = proxy.requests();
    let load = Flood::start(
        server.api,
        CONNECTIONS,
        &[
            Load::Post(post.clone(), junk.clone()),
            Load::Post(post.clone(), forged.clone()),
        ],
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tally = load.stop().await;
    let requests = proxy.requests() - before;
    let posts = tally.answered("POST");
    println!(
        "garbage POSTs over {CONNECTIONS} connections: {posts} answered, {} connections, {} errors, {requests} registry requests",
        tally.connections, tally.errors
    );
    assert!(posts >= CONNECTIONS as u64, "{tally:?}");
    for (label, status) in tally.answers.keys() {
        assert!([400, 401].contains(status), "{label} -> {status}");
    }
    assert_eq!(
        requests, 0,
        "registry requests during {posts} garbage POSTs"
    );

    // GETs: the registry is read once per snapshot, not once per request
    let before = proxy.requests();
    let started = Instant::now();
    let load = Flood::start(
        server.api,
        CONNECTIONS,
        &[
            Load::Get(format!("{PREFIX}/targets")),
            Load::Get(format!("{PREFIX}/ready")),
        ],
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tally = load.stop().await;
    let seconds = started.elapsed().as_secs_f64();
    let requests = proxy.requests() - before;
    println!(
        "GET /targets and /ready over {CONNECTIONS} connections: {} answered in {seconds:.1} s, {requests} registry requests",
        tally.total()
    );
    assert!(tally.total() >= CONNECTIONS as u64, "{tally:?}");
    for (label, status) in tally.answers.keys() {
        assert_eq!(*status, 200, "{label}");
    }
    // a scan (2 s snapshot) and a preflight (1 s snapshot) read one referrers index each;
    // at most 2 scans and 4 preflights fit in the window (with room for a late one)
    assert!(
        requests <= 2 * (seconds.ceil() as u64 + 2) + 4,
        "{requests} registry requests for {} GETs in {seconds:.1} s",
        tally.total()
    );

    // both while the producer commits
    let load = Flood::start(
        server.api,
        CONNECTIONS,
        &[
            Load::Post(post.clone(), junk),
            Load::Get(format!("{PREFIX}/targets")),
            Load::Post(post, forged),
            Load::Get(format!("{PREFIX}/ready")),
        ],
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut flooded = commit(server.api, &key, &subject, 11..21).await;
    let (rss, peak) = rss_mib();
    let tally = load.stop().await;
    println!(
        "commit latency (debug build; the flood clients on a runtime of their own): idle p50 {:.1} ms, p99 {:.1} ms; under the flood p50 {:.1} ms, p99 {:.1} ms ({} flood answers, {} errors); RSS {rss:.0} MiB, peak {peak:.0} MiB",
        quantile_ms(&mut idle, 0.5),
        quantile_ms(&mut idle, 0.99),
        quantile_ms(&mut flooded, 0.5),
        quantile_ms(&mut flooded, 0.99),
        tally.total(),
        tally.errors
    );
    assert!(
        tally.answered("POST") > 0 && tally.answered("GET") > 0,
        "{tally:?}"
    );

    // a body that stops arriving: refused after the body timeout, the connection closed
    let mut slow = tokio::net::TcpStream::connect(server.api).await.unwrap();
    slow.write_all(
        format!(
            "POST {PREFIX}/envelopes HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{\"apiV"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    tokio::time::timeout(BODY_TIMEOUT * 10, slow.read_to_end(&mut answer))
        .await
        .expect("the connection is closed after the body timeout")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(
        started.elapsed() >= BODY_TIMEOUT / 2,
        "{:?}",
        started.elapsed()
    );
    assert!(answer.starts_with("http/1.1 400"), "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");
    assert!(
        answer.ends_with(
            &error_body("invalid_envelope", "envelope could not be decoded").to_lowercase()
        ),
        "{answer}"
    );
    stop.cancel();
}
