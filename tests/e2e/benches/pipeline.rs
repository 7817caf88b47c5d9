//! The pipeline bench through the real process stack of the end-to-end suite (see
//! the `pacto-e2e` library): the four service binaries as separate processes over mTLS, etcd +
//! kube-apiserver + kube-controller-manager, the workload simulator, docker-registry. Prints:
//!
//! 1. workload change → updated status, p50/p99: a targeted Pacto whose contract requires a
//!    configuration bound to a ConfigMap; the ConfigMap is flipped between a conforming and a
//!    non-conforming value (CONFIGURATION_MISMATCH is immediate, no stabilization window).
//!    Timed from the completion of the ConfigMap PATCH to the moment a kube watch on the Pactos
//!    (`kube::runtime::watcher`) delivers the new `contractStatus`. Measured on an otherwise
//!    idle stack and again with the 2N Pactos of (2) present.
//! 2. reconcile throughput: N targeted Pactos (each `spec.target.serviceName` → its own headless
//!    Service; the Services select the pods of four Deployments) until the watch has seen a
//!    `contractStatus` on all of them: (a) as a backlog — created while the status-writer is
//!    stopped (the bench's create cost alone), timed from its restart; (b) N more, timed from the
//!    first create with the whole pipeline running;
//! 3. API writes per steady-state reconcile: the N Pactos of (2b) nudged with an annotation; the
//!    kube-apiserver's own `apiserver_request_total` counts the writes to `pactos/status`,
//!    `pactorevisions` and `events` while the status-writer's reconcile counter advances by N.
//!
//! `cargo bench -p pacto-e2e --bench pipeline [-- N]` (default N = 1000). Needs what the
//! end-to-end suite needs (`PACTO_CHART_TOOLS`, the Kubernetes binaries, docker-registry,
//! Prometheus). No timed assertions: the numbers are printed.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "bench")]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use pacto_api::testing::PactoBuilder;
use pacto_api::{ConfigBinding, ConfigBindingKind, ConfigFormat, Pacto, TargetRef};
use pacto_e2e::Stack;

/// Deployments whose pods the N Services select.
const DEPLOYMENTS: usize = 4;
/// Workload changes timed in (1), per round.
const CHANGES: usize = 40;
/// Requests in flight when the bench creates or nudges objects.
const IN_FLIGHT: usize = 8;
/// The fleet's requeue period: long, so that periodic re-checks do not run during the bench.
const FLEET_CHECK_INTERVAL: u32 = 3600;
/// Deadline of each wait.
const PHASE_DEADLINE: Duration = Duration::from_mins(8);

const CONFORMING: &str = r#"{"mode": "fast"}"#;
const NON_CONFORMING: &str = r#"{"mode": "slow"}"#;

// ---------------------------------------------------------------------------------------------
// The watch: contractStatus of every Pacto and when it last changed.

#[derive(Debug, Clone)]
struct Seen {
    status: Option<String>,
    since: Instant,
}

#[derive(Clone)]
struct Statuses {
    map: Arc<Mutex<HashMap<String, Seen>>>,
    changed: tokio::sync::watch::Receiver<u64>,
}

impl Statuses {
    /// Starts a `kube::runtime::watcher` over the Pactos of `namespace`; every event records
    /// the Pacto's `contractStatus` and, when it differs from the last one, the arrival time.
    fn start(client: Client, namespace: &str) -> Self {
        let map: Arc<Mutex<HashMap<String, Seen>>> = Arc::default();
        let (tx, changed) = tokio::sync::watch::channel(0u64);
        let api: Api<Pacto> = Api::namespaced(client, namespace);
        let writer = map.clone();
        tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let Ok(pacto) = event else { continue };
                let now = Instant::now();
                let status = pacto
                    .status
                    .as_ref()
                    .and_then(|s| s.contract_status)
                    .map(|s| format!("{s:?}"));
                {
                    let mut map = writer.lock().unwrap_or_else(PoisonError::into_inner);
                    let entry = map.entry(pacto.name_any()).or_insert(Seen {
                        status: None,
                        since: now,
                    });
                    if entry.status != status {
                        *entry = Seen { status, since: now };
                    }
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        Self { map, changed }
    }

    fn snapshot<T>(&self, f: impl FnOnce(&HashMap<String, Seen>) -> T) -> T {
        f(&self.map.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits (on watch events, no polling) until `done` holds for the map, printing `progress`
    /// every 15 s.
    async fn wait<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&HashMap<String, Seen>) -> Option<T>,
        progress: impl Fn(&HashMap<String, Seen>) -> String,
    ) -> anyhow::Result<T> {
        let mut changed = self.changed.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut report = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            changed.borrow_and_update();
            if let Some(value) = self.snapshot(&mut done) {
                return Ok(value);
            }
            let wake = report.min(deadline);
            match tokio::time::timeout_at(wake, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("the Pacto watch ended while waiting for {what}"),
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    bail!(
                        "{what}: not reached within {timeout:?} ({})",
                        self.snapshot(&progress)
                    )
                }
                Err(_) => {
                    eprintln!("  … waiting for {what}: {}", self.snapshot(&progress));
                    report += Duration::from_secs(15);
                }
            }
        }
    }
}

fn status_counts<'a>(map: &'a HashMap<String, Seen>, prefix: &str) -> BTreeMap<&'a str, usize> {
    let mut counts = BTreeMap::new();
    for (name, seen) in map {
        if name.starts_with(prefix) {
            *counts
                .entry(seen.status.as_deref().unwrap_or("(none)"))
                .or_insert(0) += 1;
        }
    }
    counts
}

fn format_counts(counts: &BTreeMap<&str, usize>) -> String {
    counts
        .iter()
        .map(|(status, n)| format!("{status}={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// The kube-apiserver's request counters.

/// `apiserver_request_total` summed by (resource, subresource, verb).
type Requests = BTreeMap<(String, String, String), f64>;

const WRITE_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// The value of `label="…"` in a Prometheus label set `{a="x",b="y"}`.
fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let needle = format!("{name}=\"");
    labels
        .split(',')
        .find_map(|pair| pair.trim_start_matches('{').strip_prefix(needle.as_str()))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
}

async fn apiserver_requests(client: &Client) -> anyhow::Result<Requests> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("building GET /metrics")?;
    let text = client
        .request_text(request)
        .await
        .context("GET /metrics of the kube-apiserver")?;
    let mut requests = Requests::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let key = (
            label(labels, "resource").to_owned(),
            label(labels, "subresource").to_owned(),
            label(labels, "verb").to_owned(),
        );
        *requests.entry(key).or_insert(0.0) += value;
    }
    Ok(requests)
}

/// Write requests made between `before` and `after`, by (resource, subresource, verb).
fn writes_between(before: &Requests, after: &Requests) -> Vec<((String, String, String), u64)> {
    after
        .iter()
        .filter(|((_, _, verb), _)| WRITE_VERBS.contains(&verb.as_str()))
        .filter_map(|(key, value)| {
            let delta = value - before.get(key).copied().unwrap_or(0.0);
            (delta > 0.0).then(|| (key.clone(), delta.round() as u64))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Service processes.

/// (peak RSS, current RSS) in MiB from `/proc/<pid>/status`.
fn rss_mib(pid: u32) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32, ticks_per_second: f64) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let after = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second)
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

struct CpuMeter {
    ticks: f64,
    start: Vec<(&'static str, u32, f64)>,
}

impl CpuMeter {
    /// Starts measuring now; `fresh` names a service restarted just before, counted from its
    /// process start.
    fn start(stack: &Stack, ticks: f64, fresh: Option<&str>) -> Self {
        let start = stack
            .services
            .iter()
            .map(|s| {
                let pid = s.process.pid();
                let before = if fresh == Some(s.name) {
                    0.0
                } else {
                    cpu_seconds(pid, ticks).unwrap_or(0.0)
                };
                (s.name, pid, before)
            })
            .collect();
        Self { ticks, start }
    }

    /// CPU seconds used per service since `start`.
    fn report(&self) -> String {
        self.start
            .iter()
            .map(|(name, pid, before)| {
                let used = cpu_seconds(*pid, self.ticks).map_or(f64::NAN, |now| now - before);
                format!("{name} {used:.1} s")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

// ---------------------------------------------------------------------------------------------
// Objects.

fn deployment(name: &str, app: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {app}}}\n  template:\n    metadata:\n      labels: {{app: {app}}}\n    spec:\n      containers:\n        - name: app\n          image: registry.local/{app}:1\n          ports:\n            - containerPort: 8080\n"
    )
}

/// A headless Service (`clusterIP: None`: the test control plane's service range is a /24, too
/// small for a thousand ClusterIPs) selecting `app`.
fn headless_service(name: &str, app: &str) -> anyhow::Result<Service> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": app},
            "ports": [{"name": "http", "port": 8080, "targetPort": 8080}],
        },
    }))?)
}

fn pacto(
    name: &str,
    reference: &str,
    service: &str,
    check_interval: u32,
    config_map: Option<&str>,
) -> anyhow::Result<Pacto> {
    let mut target = TargetRef {
        service_name: Some(service.to_owned()),
        ..TargetRef::default()
    };
    if let Some(config_map) = config_map {
        target.config_bindings.push(ConfigBinding {
            configuration: "app".into(),
            kind: ConfigBindingKind::ConfigMap,
            name: config_map.into(),
            key: Some("config.json".into()),
            format: Some(ConfigFormat::Json),
        });
    }
    Ok(PactoBuilder::oci(name, reference)
        .target(target)
        .check_interval(i32::try_from(check_interval)?)
        .build())
}

/// Pushes a bundle (`pacto.yaml` plus `files`) and returns its digest-pinned reference
/// (`oci://…:tag@sha256:…`; digest-pinned, so the status-writer's revision mirror — running
/// every second in the suite's stack — does not re-check it).
async fn push(
    stack: &Stack,
    name: &str,
    contract: &str,
    files: &[(&str, &str)],
) -> anyhow::Result<String> {
    let bundle = stack.dir.path().join(name);
    std::fs::create_dir_all(&bundle)?;
    std::fs::write(bundle.join("pacto.yaml"), contract)?;
    for (path, text) in files {
        let path = bundle.join(path);
        std::fs::create_dir_all(path.parent().context("bundle file without a parent")?)?;
        std::fs::write(path, text)?;
    }
    let repository = format!("oci://{}/pacto/{name}", stack.registry.host());
    let out = stack
        .pacto_cli(&["push", bundle.to_str().context("bundle path")?, &repository])
        .await?;
    let reference = out
        .split_whitespace()
        .find(|w| w.contains("@sha256:"))
        .with_context(|| format!("no digest in the output of `pacto push`: {out}"))?;
    Ok(reference.to_owned())
}

/// Runs `f(i)` for `0..n` with [`IN_FLIGHT`] requests in flight.
async fn for_each_concurrent<F, Fut>(n: usize, f: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    futures::stream::iter((0..n).map(&f))
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await
}

/// Creates the Pactos `<prefix>-<i>` (`i` in `0..n`), each targeting the Service `s-<i>`;
/// returns how long the creates took.
async fn create_fleet(
    pactos: &Api<Pacto>,
    reference: &str,
    prefix: &str,
    n: usize,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for_each_concurrent(n, |i| {
        let pactos = pactos.clone();
        let object = pacto(
            &format!("{prefix}-{i}"),
            reference,
            &format!("s-{i}"),
            FLEET_CHECK_INTERVAL,
            None,
        );
        async move {
            pactos.create(&PostParams::default(), &object?).await?;
            Ok(())
        }
    })
    .await?;
    Ok(started.elapsed())
}

/// Waits until the watch has seen a `contractStatus` on `n` Pactos named `<prefix>…`.
async fn wait_fleet(statuses: &Statuses, prefix: &str, n: usize) -> anyhow::Result<()> {
    statuses
        .wait(
            &format!("{n} Pactos {prefix}* with a contractStatus"),
            PHASE_DEADLINE,
            |map| {
                let done = map
                    .iter()
                    .filter(|(name, seen)| name.starts_with(prefix) && seen.status.is_some())
                    .count();
                (done >= n).then_some(())
            },
            |map| format_counts(&status_counts(map, prefix)),
        )
        .await
}

/// The writes between two snapshots to the resources the pipeline writes (Pactos, revisions,
/// events), as `VERB resource[/subresource] count`.
fn pipeline_writes(before: &Requests, after: &Requests) -> String {
    writes_between(before, after)
        .into_iter()
        .filter(|((resource, _, _), _)| {
            matches!(resource.as_str(), "pactos" | "pactorevisions" | "events")
        })
        .map(|((resource, sub, verb), count)| {
            let sub = if sub.is_empty() {
                String::new()
            } else {
                format!("/{sub}")
            };
            format!("{verb} {resource}{sub} {count}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// When Pactos `<prefix>…` are Unknown, prints why: the status-writer's reconcile results and
/// backend failures, and the conditions of one of them.
async fn explain_unknown(stack: &Stack, statuses: &Statuses, prefix: &str) -> anyhow::Result<()> {
    let unknown = statuses.snapshot(|map| {
        map.iter()
            .find(|(name, seen)| {
                name.starts_with(prefix) && seen.status.as_deref() == Some("Unknown")
            })
            .map(|(name, _)| name.clone())
    });
    let Some(name) = unknown else {
        return Ok(());
    };
    let results = stack
        .metric_lines("status-writer", "pacto_status_writer_reconciles_total")
        .await?;
    let failures = stack
        .metric_lines(
            "status-writer",
            "pacto_status_writer_backend_failures_total",
        )
        .await?;
    println!(
        "  Unknown: status-writer reconciles by result {}; backend failures {}",
        results.join(", "),
        if failures.is_empty() {
            "none".to_owned()
        } else {
            failures.join(", ")
        }
    );
    let pacto = stack.get_pacto(&name).await?;
    for kind in ["ContractValid", "RuntimeObserved"] {
        if let Some((status, reason, message)) = pacto_e2e::condition(&pacto, kind) {
            println!("  {name} {kind}: {status}/{reason}: {message}");
        }
    }
    Ok(())
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

// ---------------------------------------------------------------------------------------------
// The phases.

/// (1): flips the probe's ConfigMap `CHANGES` times and returns the sorted latencies.
async fn workload_changes(stack: &Stack, statuses: &Statuses) -> anyhow::Result<Vec<Duration>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.cp.client()?, &stack.namespace);
    let mut latencies = Vec::with_capacity(CHANGES);
    for i in 0..CHANGES {
        // The probe starts Compliant; even changes break it, odd ones repair it.
        let (value, want) = if i % 2 == 0 {
            (NON_CONFORMING, "NonCompliant")
        } else {
            (CONFORMING, "Compliant")
        };
        config_maps
            .patch(
                "probe-config",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"data": {"config.json": value}})),
            )
            .await
            .context("patching the probe's ConfigMap")?;
        let written = Instant::now();
        let seen = statuses
            .wait(
                &format!("probe {want} (change {i})"),
                Duration::from_mins(2),
                |map| {
                    map.get("probe")
                        .filter(|s| s.status.as_deref() == Some(want))
                        .map(|s| s.since)
                },
                |map| format!("{:?}", map.get("probe").map(|s| &s.status)),
            )
            .await?;
        latencies.push(seen.saturating_duration_since(written));
    }
    latencies.sort();
    Ok(latencies)
}

fn print_latencies(label: &str, latencies: &[Duration]) {
    println!(
        "workload change -> status ({label}): p50 {:.0} ms, p99 {:.0} ms, min {:.0} ms, max {:.0} ms ({} changes)",
        millis(percentile(latencies, 0.5)),
        millis(percentile(latencies, 0.99)),
        millis(latencies[0]),
        millis(latencies[latencies.len() - 1]),
        latencies.len()
    );
}

async fn wait_endpoint_slices(stack: &Stack, n: usize) -> anyhow::Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(stack.cp.client()?, &stack.namespace);
    let deadline = Instant::now() + PHASE_DEADLINE;
    let mut next_report = Instant::now() + Duration::from_secs(15);
    loop {
        let list = slices
            .list_metadata(&ListParams::default().labels("kubernetes.io/service-name"))
            .await?;
        let ready: std::collections::HashSet<String> = list
            .items
            .iter()
            .filter_map(|s| s.labels().get("kubernetes.io/service-name").cloned())
            .filter(|s| s.starts_with("s-"))
            .collect();
        if ready.len() >= n {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "only {} of {n} EndpointSlices after {PHASE_DEADLINE:?}",
                ready.len()
            );
        }
        if Instant::now() >= next_report {
            eprintln!("  … waiting for EndpointSlices: {} of {n}", ready.len());
            next_report += Duration::from_secs(15);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let wall = Instant::now();
    let ticks = clock_ticks();

    let mut stack = Stack::start().await?;
    let client = stack.cp.client()?;
    let ns = stack.namespace.clone();
    println!(
        "stack: control plane, simulator, registries, 4 services over mTLS, Prometheus; ready after {:.1} s (namespace {ns})",
        wall.elapsed().as_secs_f64()
    );
    let statuses = Statuses::start(client.clone(), &ns);

    // Contracts: the probe's requires configuration `app` (a JSON schema in the bundle); the
    // fleet's is a bare service contract.
    let schema =
        r#"{"type": "object", "properties": {"mode": {"enum": ["fast"]}}, "required": ["mode"]}"#;
    let probe_ref = push(
        &stack,
        "probe",
        "pactoVersion: \"2.0\"\nservice:\n  name: probe\n  version: 1.0.0\nconfigurations:\n  - name: app\n    schema: configuration/schema.json\n    required: true\n",
        &[("configuration/schema.json", schema)],
    )
    .await?;
    let fleet_ref = push(
        &stack,
        "fleet",
        "pactoVersion: \"2.0\"\nservice:\n  name: fleet\n  version: 1.0.0\n",
        &[],
    )
    .await?;

    // Workloads: the probe's Deployment and Service, the fleet's four Deployments.
    let mut workloads = deployment("probe", "probe");
    for d in 0..DEPLOYMENTS {
        workloads.push_str("---\n");
        workloads.push_str(&deployment(&format!("w{d}"), &format!("w{d}")));
    }
    stack.apply(&workloads).await?;
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    services
        .create(&PostParams::default(), &headless_service("probe", "probe")?)
        .await?;
    stack
        .kubectl(
            &[
                "wait",
                "-n",
                &ns,
                "--for=condition=Available",
                "deployment",
                "--all",
                "--timeout=120s",
            ],
            None,
        )
        .await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "probe-config"},
                "data": {"config.json": CONFORMING},
            }))?,
        )
        .await?;
    let pactos: Api<Pacto> = Api::namespaced(client.clone(), &ns);
    pactos
        .create(
            &PostParams::default(),
            &pacto("probe", &probe_ref, "probe", 30, Some("probe-config"))?,
        )
        .await?;
    statuses
        .wait(
            "probe Compliant",
            Duration::from_mins(2),
            |map| (map.get("probe")?.status.as_deref() == Some("Compliant")).then_some(()),
            |map| format!("{:?}", map.get("probe").map(|s| &s.status)),
        )
        .await
        .with_context(|| stack.logs())?;

    println!();
    println!(
        "[1] workload change -> updated status: the probe Pacto's required configuration is bound to a ConfigMap, \
         flipped between a conforming and a non-conforming value (Compliant <-> NonCompliant, CONFIGURATION_MISMATCH \
         is immediate). Timed from the completion of the ConfigMap PATCH to the arrival of the new contractStatus \
         on a kube watch of the Pactos. Includes: the observer's ConfigMap watch and WatchTargets notification \
         (which gathers changes for 150 ms before sending them), the status-writer's queue, Resolve (digest-pinned, served from the resolver's cache), PactoRevision GET, \
         Observe (ConfigMap GET + schema validation), Evaluate, the status server-side apply, the ValidationFailed \
         event and the watch delivery."
    );
    let idle = workload_changes(&stack, &statuses).await?;
    print_latencies("1 Pacto", &idle);

    // (2) Throughput: N Services, their EndpointSlices settled, then N Pactos.
    println!();
    println!(
        "[2] reconcile throughput: {n} Pactos, each targeting its own headless Service (clusterIP None: the test \
         control plane's service range is a /24); the Services select the pods of {DEPLOYMENTS} Deployments \
         (1 replica each). Contract: digest-pinned OCI reference, no configurations. checkIntervalSeconds \
         {FLEET_CHECK_INTERVAL} (no periodic requeue during the bench). Timed until a kube watch of the Pactos \
         has seen a contractStatus on each."
    );
    let started = Instant::now();
    for_each_concurrent(n, |i| {
        let services = services.clone();
        async move {
            let service = headless_service(&format!("s-{i}"), &format!("w{}", i % DEPLOYMENTS))?;
            services.create(&PostParams::default(), &service).await?;
            Ok(())
        }
    })
    .await?;
    let services_created = started.elapsed();
    wait_endpoint_slices(&stack, n).await?;
    println!(
        "setup: {n} Services created in {:.2} s; their EndpointSlices (kube-controller-manager) complete after {:.2} s",
        services_created.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    let writer_reconciles = "pacto_status_writer_reconciles_total";
    let writer_writes = "pacto_status_writer_status_writes_total";

    // (2a) A backlog: N Pactos created while the status-writer is stopped (the bench's create
    // cost alone), then the status-writer restarted (same Lease identity: it leads at once).
    let writer_peak_before = stack
        .services
        .iter()
        .find(|s| s.name == "status-writer")
        .and_then(|s| rss_mib(s.process.pid()))
        .map_or(0.0, |(peak, _)| peak);
    stack.stop_service("status-writer")?;
    let created = create_fleet(&pactos, &fleet_ref, "b", n).await?;
    let requests_before = apiserver_requests(&client).await?;
    let started = Instant::now();
    stack.restart_service("status-writer").await?;
    let ready = started.elapsed();
    let cpu = CpuMeter::start(&stack, ticks, Some("status-writer"));
    wait_fleet(&statuses, "b-", n).await?;
    let total = started.elapsed();
    // A fresh process: its counters start at 0.
    let reconciles = stack.metric_sum("status-writer", writer_reconciles).await?;
    let writes = stack.metric_sum("status-writer", writer_writes).await?;
    let requests_after = apiserver_requests(&client).await?;
    println!(
        "(a) backlog: {n} Pactos created with the status-writer stopped in {:.2} s ({:.0} creates/s, {IN_FLIGHT} in \
         flight: the bench's create cost alone); the status-writer restarted (ready after {:.2} s); all {n} had a \
         contractStatus {:.2} s after the restart: {:.1} Pactos/s",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        ready.as_secs_f64(),
        total.as_secs_f64(),
        n as f64 / total.as_secs_f64()
    );
    println!(
        "  statuses: {}; status-writer: {reconciles:.0} reconciles (the probe's included), {writes:.0} status writes",
        statuses.snapshot(|map| format_counts(&status_counts(map, "b-")))
    );
    println!(
        "  apiserver writes: {}",
        pipeline_writes(&requests_before, &requests_after)
    );
    println!("  CPU: {}", cpu.report());
    explain_unknown(&stack, &statuses, "b-").await?;
    // The verdict that counts: every backlog Pacto Compliant (Unknowns retry with backoff).
    statuses
        .wait(
            &format!("{n} Pactos b-* Compliant"),
            PHASE_DEADLINE,
            |map| {
                let done = status_counts(map, "b-").get("Compliant").copied();
                (done.unwrap_or(0) >= n).then_some(())
            },
            |map| format_counts(&status_counts(map, "b-")),
        )
        .await?;
    let compliant = started.elapsed();
    let reconciles = stack.metric_sum("status-writer", writer_reconciles).await?;
    println!(
        "  all {n} Compliant {:.2} s after the restart ({:.1} Pactos/s; {reconciles:.0} reconciles by then)",
        compliant.as_secs_f64(),
        n as f64 / compliant.as_secs_f64()
    );

    // (2b) N more Pactos created while the whole pipeline runs, timed from the first create.
    let reconciles_before = stack.metric_sum("status-writer", writer_reconciles).await?;
    let writes_before = stack.metric_sum("status-writer", writer_writes).await?;
    let requests_before = apiserver_requests(&client).await?;
    let cpu = CpuMeter::start(&stack, ticks, None);
    let started = Instant::now();
    let created = create_fleet(&pactos, &fleet_ref, "p", n).await?;
    wait_fleet(&statuses, "p-", n).await?;
    let total = started.elapsed();
    let reconciles =
        stack.metric_sum("status-writer", writer_reconciles).await? - reconciles_before;
    let writes = stack.metric_sum("status-writer", writer_writes).await? - writes_before;
    let requests_after = apiserver_requests(&client).await?;
    println!(
        "(b) while creating: {n} more Pactos (targeting the same Services) created with the pipeline running in \
         {:.2} s ({:.0} creates/s); all had a contractStatus {:.2} s after the first create: {:.1} Pactos/s \
         ({:.2} s after the last create)",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        total.as_secs_f64(),
        n as f64 / total.as_secs_f64(),
        total.saturating_sub(created).as_secs_f64()
    );
    println!(
        "  statuses: {}; status-writer: {reconciles:.0} reconciles, {writes:.0} status writes in that time",
        statuses.snapshot(|map| format_counts(&status_counts(map, "p-")))
    );
    println!(
        "  apiserver writes: {}",
        pipeline_writes(&requests_before, &requests_after)
    );
    println!("  CPU: {}", cpu.report());

    // (3) Steady state: nudge every Pacto; count what the services wrote.
    println!();
    println!(
        "[3] API writes per steady-state reconcile: each of the {n} Pactos of (b) nudged with an annotation (a metadata \
         change, so the status-writer reconciles it; nothing else changed). Writes counted by the kube-apiserver \
         (apiserver_request_total, verbs POST/PUT/PATCH/APPLY/DELETE) while the status-writer's \
         {writer_reconciles} advanced by >= {n}; the bench's own nudges (PATCH pactos, no subresource) are \
         listed separately and excluded."
    );
    let reconciles_before = stack.metric_sum("status-writer", writer_reconciles).await?;
    let writes_before = stack.metric_sum("status-writer", writer_writes).await?;
    let requests_before = apiserver_requests(&client).await?;
    let cpu = CpuMeter::start(&stack, ticks, None);
    let started = Instant::now();
    for_each_concurrent(n, |i| {
        let pactos = pactos.clone();
        async move {
            pactos
                .patch(
                    &format!("p-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({
                        "metadata": {"annotations": {"bench.pacto.trianalab.io/nudge": "1"}}
                    })),
                )
                .await?;
            Ok(())
        }
    })
    .await?;
    let nudged = started.elapsed();
    let deadline = Instant::now() + PHASE_DEADLINE;
    let mut next_report = Instant::now() + Duration::from_secs(15);
    let reconciled = loop {
        let done = stack.metric_sum("status-writer", writer_reconciles).await? - reconciles_before;
        if done >= n as f64 {
            break done;
        }
        if Instant::now() >= deadline {
            bail!("only {done:.0} of {n} nudges reconciled after {PHASE_DEADLINE:?}");
        }
        if Instant::now() >= next_report {
            eprintln!("  … waiting for the nudges to be reconciled: {done:.0} of {n}");
            next_report += Duration::from_secs(15);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let elapsed = started.elapsed();
    let requests_after = apiserver_requests(&client).await?;
    let status_writes = stack.metric_sum("status-writer", writer_writes).await? - writes_before;
    let mut counted = 0;
    let mut service_writes = Vec::new();
    let mut other_writes = Vec::new();
    for ((resource, sub, verb), count) in writes_between(&requests_before, &requests_after) {
        let line = format!(
            "{verb} {resource}{} {count}",
            if sub.is_empty() {
                String::new()
            } else {
                format!("/{sub}")
            }
        );
        let pipeline = match resource.as_str() {
            "pactos" => sub == "status",
            "pactorevisions" | "events" => true,
            _ => false,
        };
        if pipeline {
            counted += count;
            service_writes.push(line);
        } else {
            other_writes.push(line);
        }
    }
    println!(
        "steady state: {reconciled:.0} reconciles in {:.2} s ({:.1} reconciles/s; nudging took {:.2} s), \
         {counted} API writes to pactos/status, pactorevisions and events ({:.3} per reconcile); \
         status-writer's own status-write counter: +{status_writes:.0}",
        elapsed.as_secs_f64(),
        reconciled / elapsed.as_secs_f64(),
        nudged.as_secs_f64(),
        counted as f64 / reconciled
    );
    println!(
        "  counted writes: {}",
        if service_writes.is_empty() {
            "none".to_owned()
        } else {
            service_writes.join(", ")
        }
    );
    println!(
        "  other writes in that period (not counted: the bench's nudges, leases, simulator, controller-manager): {}",
        other_writes.join(", ")
    );
    println!("  CPU: {}", cpu.report());

    // (1) again, with the fleet present.
    println!();
    let loaded = workload_changes(&stack, &statuses).await?;
    print_latencies(&format!("{} Pactos present", 2 * n + 1), &loaded);

    println!();
    let rss: Vec<String> = stack
        .services
        .iter()
        .map(|s| match rss_mib(s.process.pid()) {
            Some((peak, now)) if s.name == "status-writer" => format!(
                "{} {peak:.1} MiB since its restart in (2a) (now {now:.1} MiB; before the restart {writer_peak_before:.1} MiB)",
                s.name
            ),
            Some((peak, now)) => format!("{} {peak:.1} MiB (now {now:.1} MiB)", s.name),
            None => format!("{} (exited)", s.name),
        })
        .collect();
    println!("peak RSS (VmHWM): {}", rss.join(", "));
    println!(
        "statuses at the end: (a) {}; (b) {}",
        statuses.snapshot(|map| format_counts(&status_counts(map, "b-"))),
        statuses.snapshot(|map| format_counts(&status_counts(map, "p-")))
    );
    println!("wall time: {:.1} s (N = {n})", wall.elapsed().as_secs_f64());
    Ok(())
}
