//! Ingest throughput of the Evidence Server (printed, never asserted): envelopes/s and the
//! per-envelope latency (p50, p99) of sequential POSTs through the whole pipeline — decode,
//! verify, Resolve over mTLS at the real contract-resolver, evaluate, commit to the registry and
//! confirm — in both referrers modes (go-containerregistry's registry with the Referrers API;
//! docker-registry 2.8 with the tag-schema fallback). Debug build, the stage only:
//! `cargo test -p pacto-evidence-server --bench ingest` (or `cargo bench` for a release build).
//! Needs `scripts/registry-tools.sh` and the docker-registry package.

#![allow(clippy::unwrap_used, reason = "bench harness")]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{Payments, payments_envelope, post_envelope, start_payments};
use pacto_runtime::CancellationToken;
use pacto_testenv::ggcr::GgcrRegistry;
use pacto_testenv::registry::Registry;

const ENVELOPES: u64 = 100;

async fn run(mode: &str, host: String) {
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let Payments {
        server,
        subject,
        key,
        ..
    } = start_payments(dir.path(), &host, &stop).await;
    let envelopes: Vec<Vec<u8>> = (0..ENVELOPES)
        .map(|n| payments_envelope(&key, &subject, &format!("bench-{n}"), n))
        .collect();
    let mut latencies = Vec::with_capacity(envelopes.len());
    let started = Instant::now();
    for envelope in &envelopes {
        let one = Instant::now();
        let (status, body) = post_envelope(server.api, envelope).await;
        assert_eq!(status, 202, "{body}");
        latencies.push(one.elapsed());
    }
    let total = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "ingest {mode}: {ENVELOPES} envelopes (0 to {} records stored) in {:.2} s = {:.1} envelopes/s; latency p50 {:.1} ms, p99 {:.1} ms",
        ENVELOPES - 1,
        total.as_secs_f64(),
        ENVELOPES as f64 / total.as_secs_f64(),
        ms(at(0.5)),
        ms(at(0.99))
    );
    stop.cancel();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ggcr = GgcrRegistry::start().unwrap();
        run("Referrers API (ggcr registry)", ggcr.host()).await;
        let registry = Registry::start().unwrap();
        run("tag schema (docker-registry 2.8)", registry.host()).await;
    });
}
