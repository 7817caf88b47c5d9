//! Observe latency (p50/p99) against a real kube-apiserver holding 1,000 headless Services (the test API server's Service CIDR is small; each with an
//! EndpointSlice of 5 Ready endpoints), 1,000 Deployments and 5,000 Pods, with the WatchTargets
//! watches running; then the process RSS. Measured twice: with direct GETs (every read an API
//! round trip on loopback), then through the reflector caches the binary uses.
//! Run: `cargo bench -p pacto-observer --bench observe`.

#![allow(
    clippy::unwrap_used,
    reason = "bench harness: a failed setup step should abort the bench"
)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use pacto_engine::Timestamp;
use pacto_observer::KubeCluster;
use pacto_observer::Prober;
use pacto_observer::{ObserveInput, Observer, Options, Target};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use serde_json::json;

const SERVICES: usize = 1_000;
const PODS_PER_SERVICE: usize = 5;
const NAMESPACES: usize = 10;
const CALLS: usize = 1_000;

const CONTRACT: &str = r#"
pactoVersion: "2.0"
service:
  name: svc
  version: 1.0.0
workload: service
interfaces:
  - name: api
    type: openapi
    ref: interfaces/openapi.yaml
capabilities:
  - type: health
    binding:
      type: http
      interface: api
      path: /healthz
state:
  type: stateful
  persistence:
    scope: local
    durability: persistent
"#;

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Observes `CALLS` targets spread over the populated Services; the latency of each call.
async fn measure(
    observer: &Observer,
    jobs: &[(String, String)],
    contract: &std::sync::Arc<pacto_contract::model::Contract>,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(CALLS);
    for call in 0..CALLS {
        let (ns, name) = &jobs[(call * 7919) % jobs.len()];
        let target: Target = Target {
            namespace: ns.clone(),
            pacto_name: name.clone(),
            spec: serde_json::from_value(json!({"serviceName": name,
                "interfaceBindings": [{"interface": "api", "servicePort": "http"}]}))
            .unwrap(),
        };
        let input = ObserveInput {
            target,
            contract: std::sync::Arc::clone(contract),
            schemas: std::collections::BTreeMap::new(),
            contract_ref: "oci://registry.example/svc:1.0.0".into(),
            windows: vec![],
            stabilization_window: None,
        };
        let t = Instant::now();
        let out = observer.observe(input, Timestamp::now()).await;
        latencies.push(t.elapsed());
        assert!(out.api_errors.is_empty(), "{:?}", out.api_errors);
        assert_eq!(out.evidence.observations().len(), 4);
    }
    latencies.sort();
    latencies
}

fn report(mode: &str, latencies: &[Duration]) {
    println!(
        "Observe latency with {mode} over {CALLS} calls (1 interface, passive health, workload, persistence): p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        percentile(latencies, 0.50),
        percentile(latencies, 0.99),
        latencies[latencies.len() - 1]
    );
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    pacto_testenv::bins::require_kubernetes();
    pacto_testenv::controlplane::ensure_crypto_provider();
    let options = ControlPlaneOptions {
        timeout: Duration::from_mins(2),
        ..ControlPlaneOptions::default()
    }
    .with_crds(pacto_api::crdgen::checked_in_paths());
    let cp = ControlPlane::start(options).await.unwrap();
    let client = cp.client().unwrap();
    let mut namespaces = Vec::new();
    for _ in 0..NAMESPACES {
        namespaces.push(cp.create_namespace("bench").await.unwrap());
    }

    let started = Instant::now();
    let per_ns = SERVICES / NAMESPACES;
    let mut jobs = Vec::new();
    for ns in &namespaces {
        for i in 0..per_ns {
            jobs.push((ns.clone(), format!("svc-{i}")));
        }
    }
    futures::stream::iter(jobs.clone())
        .for_each_concurrent(16, |(ns, name)| {
            let client = client.clone();
            async move {
                let services: Api<Service> = Api::namespaced(client.clone(), &ns);
                let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
                let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
                let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
                let container = json!({"name": "app", "image": "registry.example/app:1",
                    "ports": [{"name": "web", "containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}}});
                create(&services, json!({"metadata": {"name": name},
                    "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})).await;
                create(&deployments, json!({"metadata": {"name": name},
                    "spec": {"selector": {"matchLabels": {"app": name}},
                             "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}})).await;
                let endpoints: Vec<serde_json::Value> = (0..PODS_PER_SERVICE)
                    .map(|p| json!({"addresses": [format!("10.{}.{}.{}", p, name.len(), p + 1)], "conditions": {"ready": true}}))
                    .collect();
                create(&slices, json!({"metadata": {"name": format!("{name}-1"), "labels": {"kubernetes.io/service-name": name}},
                    "addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "http", "port": 8080}]})).await;
                for p in 0..PODS_PER_SERVICE {
                    create(&pods, json!({"metadata": {"name": format!("{name}-{p}"), "labels": {"app": name}},
                        "spec": {"containers": [container]}})).await;
                }
            }
        })
        .await;
    println!(
        "populated {SERVICES} Services, {SERVICES} EndpointSlices ({} Ready endpoints), {SERVICES} Deployments, {} Pods in {:.1?}",
        SERVICES * PODS_PER_SERVICE,
        SERVICES * PODS_PER_SERVICE,
        started.elapsed()
    );

    let hub = pacto_observer::watch::TargetHub::new();
    let shutdown = pacto_runtime::CancellationToken::new();
    // As the binary runs: one watch stream per kind feeds both the hub and the caches.
    let started = Instant::now();
    let kinds = pacto_observer::watch::Kinds::ALL;
    let watchers = pacto_observer::watch::spawn(&client, None, Some(&hub), kinds, &shutdown);
    let mut ready = watchers.ready.clone();
    ready.wait().await;
    println!(
        "watch streams listed (caches and WatchTargets) in {:.1?}",
        started.elapsed()
    );
    let rss_before = rss_kib();

    let contract = std::sync::Arc::new(
        pacto_contract::parse_contract(CONTRACT.as_bytes())
            .unwrap()
            .1,
    );

    // Direct GETs (no object cache): every read is an API round trip on loopback.
    let direct = Observer::new(
        KubeCluster::new(client.clone(), None),
        Prober::new().unwrap(),
        Options::default(),
    );
    let latencies = measure(&direct, &jobs, &contract).await;
    report("direct GETs", &latencies);
    println!(
        "bench process RSS (observer + watches + kube client; the API server is a separate process): {} MiB after the watches (which fill the caches) listed, {} MiB after the direct-GET calls",
        rss_before / 1024,
        rss_kib() / 1024
    );
    drop(direct);

    // Reflector caches (as the binary runs): Services, EndpointSlices, workloads and Pactos
    // watched cluster-wide with trimmed metadata, filled by the streams started above.
    let cached = Observer::new(
        KubeCluster::with_caches(client.clone(), None, watchers.caches.clone()),
        Prober::new().unwrap(),
        Options::default(),
    );
    assert!(cached.wait_ready().await);
    println!(
        "watch streams started (WatchTargets watches and reflector caches, as the binary runs): {}",
        pacto_observer::watch_streams_started()
    );
    let rss_cached = rss_kib();
    let latencies = measure(&cached, &jobs, &contract).await;
    report("reflector caches", &latencies);
    println!(
        "bench process RSS before the cached calls: {} MiB, {} MiB after the cached calls",
        rss_cached / 1024,
        rss_kib() / 1024
    );
    shutdown.cancel();
}
