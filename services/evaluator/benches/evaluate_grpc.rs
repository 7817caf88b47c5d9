//! Prints, side by side in one run, in-process evaluations/s and gRPC+mTLS Evaluate round trips/s
//! (with p50/p99 latency) for the typical contract.
//!
//! Run: `cargo bench -p pacto-evaluator --bench evaluate_grpc [-- SECONDS_PER_MEASUREMENT]`
//! (default 3 s per row; `PACTO_BENCH_SECONDS` works too).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use pacto_evaluator::{EvaluatorService, ServeConfig, evaluate_request, typical_request};
use pacto_proto::evaluator::evaluator_client::EvaluatorClient;
use pacto_runtime::{
    AllowList, CancellationToken,
    grpc::{self, ChannelSpec, Transport},
    testing::{TestCa, write_tls_files},
    tls::TlsStore,
};

struct Row {
    name: &'static str,
    ops: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Row {
    fn per_second(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Option<Duration> {
        if self.latencies.is_empty() {
            return None;
        }
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted.get(index).copied()
    }
}

fn run_in_process<F: FnMut()>(name: &'static str, budget: Duration, mut op: F) -> Row {
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < budget {
        for _ in 0..64 {
            op();
        }
        ops += 64;
    }
    Row {
        name,
        ops,
        elapsed: start.elapsed(),
        latencies: Vec::new(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("a rustls crypto provider is already installed"))?;
    // `cargo bench` passes `--bench`; the first non-flag argument is the duration per row.
    let seconds: f64 = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-'))
        .or_else(|| std::env::var("PACTO_BENCH_SECONDS").ok())
        .map(|s| s.parse())
        .transpose()
        .context("seconds per measurement")?
        .unwrap_or(3.0);
    let budget = Duration::from_secs_f64(seconds);
    let request = typical_request();
    let now = chrono::Utc::now();
    let contract = pacto_engine::bench::typical_contract();
    let evidence = pacto_engine::bench::typical_evidence();

    let mut rows = Vec::new();
    rows.push(run_in_process(
        "in-process engine::evaluate",
        budget,
        || {
            std::hint::black_box(pacto_engine::evaluate(
                std::hint::black_box(&contract),
                std::hint::black_box(&evidence),
            ));
        },
    ));
    rows.push(run_in_process(
        "in-process pacto_contract::parse_contract (YAML only)",
        budget,
        || {
            std::hint::black_box(
                pacto_contract::parse_contract(std::hint::black_box(
                    pacto_evaluator::TYPICAL_CONTRACT_YAML.as_bytes(),
                ))
                .ok(),
            );
        },
    ));
    rows.push(run_in_process(
        "in-process evaluate_request (parse YAML + convert + evaluate + readiness)",
        budget,
        || {
            std::hint::black_box(evaluate_request(std::hint::black_box(&request), now).ok());
        },
    ));
    let parsed = pacto_evaluator::ParsedContract::parse(request.contract.as_ref(), "contract")?;
    rows.push(run_in_process(
        "in-process evaluate_parsed (contract from the cache: convert + evaluate + readiness)",
        budget,
        || {
            std::hint::black_box(
                pacto_evaluator::evaluate_parsed(&parsed, std::hint::black_box(&request), now).ok(),
            );
        },
    ));

    // The real server over mTLS on loopback (its contract cache is on, as in production).
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new("bench CA")?;
    let server_files = write_tls_files(
        dir.path(),
        "server",
        &ca.pem(),
        &ca.issue(&["evaluator.pacto.svc", "127.0.0.1"])?,
    )?;
    let client_files = write_tls_files(
        dir.path(),
        "client",
        &ca.pem(),
        &ca.issue(&["status-writer.pacto.svc"])?,
    )?;
    let shutdown = CancellationToken::new();
    let grpc_listener = grpc::bind("127.0.0.1:0".parse()?).await?;
    let addr = grpc_listener.local_addr()?;
    let server = tokio::spawn(pacto_evaluator::serve(
        ServeConfig {
            grpc: grpc_listener,
            admin: pacto_runtime::admin::bind("127.0.0.1:0".parse()?).await?,
            transport: Transport::Mtls(TlsStore::load(server_files)?),
            allowed: AllowList::new(["status-writer.pacto.svc"]),
        },
        EvaluatorService::default(),
        shutdown.clone(),
    ));
    let spec = ChannelSpec {
        address: addr.to_string(),
        server_name: Some("evaluator.pacto.svc".to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
    };
    let channel = grpc::channel(&spec, &Transport::Mtls(TlsStore::load(client_files)?))?;
    let client = EvaluatorClient::new(channel);
    // Warm up the connection.
    client.clone().evaluate(request.clone()).await?;

    for (name, concurrency) in [
        ("gRPC+mTLS Evaluate, 1 in flight", 1usize),
        ("gRPC+mTLS Evaluate, 8 in flight (one connection)", 8),
    ] {
        let start = Instant::now();
        let deadline = start + budget;
        let request = Arc::new(request.clone());
        let mut workers = Vec::new();
        for _ in 0..concurrency {
            let mut client = client.clone();
            let request = Arc::clone(&request);
            workers.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    client.evaluate((*request).clone()).await?;
                    latencies.push(sent.elapsed());
                }
                Ok::<_, tonic::Status>(latencies)
            }));
        }
        let mut latencies = Vec::new();
        for worker in workers {
            latencies.extend(worker.await??);
        }
        rows.push(Row {
            name,
            ops: latencies.len() as u64,
            elapsed: start.elapsed(),
            latencies,
        });
    }
    shutdown.cancel();
    drop(client);
    server.await??;

    println!(
        "typical contract: 15 assertions (13 required), 13 observations, readiness with 4 claims; {seconds} s per row"
    );
    println!(
        "{:<84} {:>10} {:>12} {:>10} {:>10}",
        "measurement", "ops", "ops/s", "p50", "p99"
    );
    for row in &rows {
        let fmt = |d: Option<Duration>| d.map_or_else(|| "-".to_owned(), |d| format!("{d:.1?}"));
        println!(
            "{:<84} {:>10} {:>12.0} {:>10} {:>10}",
            row.name,
            row.ops,
            row.per_second(),
            fmt(row.percentile(0.50)),
            fmt(row.percentile(0.99)),
        );
    }
    Ok(())
}
