//! Reconcile bench against a real kube-apiserver + etcd with the real contract-resolver and
//! evaluator in-process over mTLS. Prints:
//!
//! - first-reconcile throughput for N reference-only inline Pactos (resolve, readiness,
//!   PactoRevision create, status apply, events);
//! - status writes per steady-state reconcile (each Pacto nudged with an annotation; must be 0);
//! - spec change → updated status latency p50/p99 (contract version bumped, status read back).
//!
//! `cargo bench -p pacto-status-writer --bench reconcile [-- N]` (default N = 1000). The observer
//! is not part of this bench (targeted Pactos need the node/workload simulation of the
//! end-to-end suite).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "bench")]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{eventually, pacto, start};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use pacto_api::{ContractStatus, Pacto};

fn contract(version: &str) -> String {
    format!("pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: {version}\n")
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let h = start(true).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);

    // 1. First reconcile of N Pactos.
    let started = Instant::now();
    for i in 0..n {
        api.create(
            &PostParams::default(),
            &pacto(&format!("p{i}"), &contract("1.0.0"), None),
        )
        .await
        .unwrap();
    }
    let created = started.elapsed();
    eventually("all Pactos reconciled", Duration::from_mins(10), || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        let done = list
            .items
            .iter()
            .filter(|p| {
                p.status.as_ref().and_then(|s| s.contract_status) == Some(ContractStatus::Reference)
            })
            .count();
        (done == n).then_some(())
    })
    .await;
    let total = started.elapsed();
    println!(
        "first reconcile: {n} Pactos in {:.2} s ({:.1} Pactos/s; creating them took {:.2} s)",
        total.as_secs_f64(),
        n as f64 / total.as_secs_f64(),
        created.as_secs_f64()
    );

    // 2. Steady state: nudge every Pacto, count status writes per reconcile.
    let (reconciles, writes) = (h.ctx.reconciles(), h.ctx.status_writes());
    let started = Instant::now();
    for i in 0..n {
        api.patch(
            &format!("p{i}"),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"nudge": "1"}}})),
        )
        .await
        .unwrap();
    }
    eventually("nudges reconciled", Duration::from_mins(10), || async {
        (h.ctx.reconciles() >= reconciles + n as u64).then_some(())
    })
    .await;
    let elapsed = started.elapsed();
    let done = h.ctx.reconciles() - reconciles;
    let wrote = h.ctx.status_writes() - writes;
    println!(
        "steady state: {done} reconciles in {:.2} s ({:.1} reconciles/s), {wrote} status writes ({:.3} per reconcile)",
        elapsed.as_secs_f64(),
        done as f64 / elapsed.as_secs_f64(),
        wrote as f64 / done as f64
    );

    // 3. Spec change → status latency.
    let samples = 50.min(n);
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("p{i}");
        let version = format!("1.0.{}", i + 1);
        let started = Instant::now();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"contractRef": {"inline": contract(&version)}}}),
            ),
        )
        .await
        .unwrap();
        eventually("status updated", Duration::from_mins(1), || async {
            let p = api.get(&name).await.ok()?;
            (p.status?.contract_version.as_deref() == Some(version.as_str())).then_some(())
        })
        .await;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "spec change -> status: p50 {:.1} ms, p99 {:.1} ms ({samples} samples, polled every 100 ms)",
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3
    );
}
