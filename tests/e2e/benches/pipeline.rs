//! The pipeline bench through the real process stack of the end-to-end suite (see
//! the `pacto-e2e` library): the four service binaries as separate processes over mTLS, etcd +
//! kube-apiserver + kube-controller-manager, the workload simulator, docker-registry. Prints
//! (numbers, never assertions; every ratio from figures of the same run):
//!
//! 1. workload change → updated status, p50/p90/p99/p99.9/max over 200 changes
//!    (`PACTO_BENCH_DRIFT_SAMPLES`), and where each spent its time: a targeted Pacto whose contract requires a
//!    configuration bound to a ConfigMap; the ConfigMap is flipped between a conforming and a
//!    non-conforming value (CONFIGURATION_MISMATCH is immediate, no stabilization window).
//!    Timed from the completion of the ConfigMap PATCH to the moment a kube watch on the Pactos
//!    (`kube::runtime::watcher`) delivers the new `contractStatus`. Measured on an otherwise
//!    idle stack and again with the 2N Pactos of (3) present, each in two rounds: back to back
//!    (the next change as soon as the status arrives, inside the coalescing window that follows
//!    each notification) and isolated (300 ms apart: each change the first after a quiet
//!    spell, as a drift usually is). The observer and the
//!    status-writer log a debug event at each stage (the probe's `reconcile` span only, through
//!    a span-field filter; `PACTO_BENCH_STAGE_LOG=0` turns them off); the bench lines them up
//!    with each change and prints each stage's p50/p99/max and, for every change above p99 or
//!    over 250 ms, its stages one by one with what the services logged meanwhile.
//! 2. shared contracts: 1,000 Pactos referencing the same OCI tag at the minimum check interval,
//!    observed for two intervals that start half an interval after the last first status (off
//!    the tag's cadence of checks): registry requests per interval from the docker-registry's own
//!    access log, CPU per periodic reconcile, and the RSS of each service with 1,000 Pactos.
//! 3. reconcile throughput: N targeted Pactos (each `spec.target.serviceName` → its own headless
//!    Service; the Services select the pods of four Deployments) until the watch has seen a
//!    `contractStatus` on all of them: (a) as a backlog — created while the status-writer is
//!    stopped (the bench's create cost alone), timed from its restart; the RSS with N Pactos;
//!    (b) N more, timed from the first create with the whole pipeline running;
//! 4. API writes and CPU per steady-state reconcile: the N Pactos of (3b) nudged with an
//!    annotation; the kube-apiserver's own `apiserver_request_total` counts the writes to
//!    `pactos/status`, `pactorevisions` and `events` while the status-writer's reconcile counter
//!    advances by N; the CPU time of the four processes (`/proc/<pid>/stat`) over that period,
//!    also net of their idle CPU (10 s with no traffic just before; likewise for (2)).
//! 5. requeue spreading: the N Pactos of (3a) switched to a 300 s check interval; the
//!    status-writer's trigger counters scraped every second: the histogram of periodic
//!    reconciles per second over one full interval, its mean and max/mean.
//! 6. the physical limit: N server-side applies of `pactos/status` with a settled Pacto's status
//!    from one client at the status-writer's concurrency, no pipeline; the backlog rate of (3a)
//!    as a fraction of it.
//!
//! `cargo bench -p pacto-e2e --bench pipeline [-- N]` (default N = 1000; 10,000 takes about half
//! an hour on 2 cores). `PACTO_BENCH_PERF=<dir>` records (4) with `perf record`;
//! `PACTO_E2E_HEAPTRACK=<dir>` runs the status-writer under heaptrack. Needs what the end-to-end suite needs (`PACTO_CHART_TOOLS`, the
//! Kubernetes binaries, docker-registry, Prometheus). Long waits print progress every 10 s.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "bench")]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use pacto_api::testing::PactoBuilder;
use pacto_api::{ConfigBinding, ConfigBindingKind, ConfigFormat, Pacto, TargetRef};
use pacto_e2e::{Stack, StackOptions};

/// Deployments whose pods the N Services select.
const DEPLOYMENTS: usize = 4;
/// Workload changes timed in (1), per round: 200, so that p99 is the third-slowest rather than
/// the slowest; `PACTO_BENCH_DRIFT_SAMPLES` changes it (rounded up to even: each round ends
/// Compliant, as the next one starts).
fn drift_samples() -> usize {
    let n = std::env::var("PACTO_BENCH_DRIFT_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200usize)
        .max(2);
    n.div_ceil(2) * 2
}
/// The pause before each change of (1)'s isolated rounds: twice the observer's 150 ms
/// coalescing window, so that each change is the first after a quiet spell and goes out at once
/// (docs/design/observation.md#change-notifications). The back-to-back rounds change the
/// ConfigMap again as soon as the status arrives, inside the window that follows each send.
const ISOLATED_GAP: Duration = Duration::from_millis(300);
/// Requests in flight when the bench creates or nudges objects.
const IN_FLIGHT: usize = 32;
/// The status-writer's `--max-concurrent-reconciles` (its default; the suite's stack does not set
/// it): the concurrency of the raw status patches of (5).
const STATUS_WRITER_CONCURRENCY: usize = 16;
/// The status-writer's revision mirror runs at its production default (the suite's stack runs
/// it every second), so the registry requests of (2) are those a cluster would see.
const MIRROR_INTERVAL: &str = "--revision-mirror-interval=5m";
/// How often the stack's Prometheus scrapes each service: a common production interval (the
/// suite's 500 ms would render the status-writer's per-Pacto gauges twice a second and count
/// that as reconcile CPU).
const SCRAPE_INTERVAL: Duration = Duration::from_secs(30);
/// The fleet's requeue period: long, so that periodic re-checks do not run during the bench.
const FLEET_CHECK_INTERVAL: u32 = 3600;
/// The check interval of the requeue-spreading phase (5); `PACTO_BENCH_SPREAD_INTERVAL` (seconds,
/// at least 30) shortens it for a quick development run.
fn spread_check_interval() -> u32 {
    std::env::var("PACTO_BENCH_SPREAD_INTERVAL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300u32)
        .max(30)
}
/// Pactos of the shared-contract phase (2), all referencing the same OCI tag: 1,000;
/// `PACTO_BENCH_SHARED` changes it for a quick development run.
fn shared_count() -> usize {
    std::env::var("PACTO_BENCH_SHARED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}
/// How often a long wait prints where it is.
const PROGRESS: Duration = Duration::from_secs(10);

/// Deadline of each wait: 8 minutes, longer with more Pactos (about 100 ms per Pacto).
fn phase_deadline(n: usize) -> Duration {
    Duration::from_mins(8).max(Duration::from_mins(2) + Duration::from_millis(100) * n as u32)
}

const CONFORMING: &str = r#"{"mode": "fast"}"#;
const NON_CONFORMING: &str = r#"{"mode": "slow"}"#;

// ---------------------------------------------------------------------------------------------
// The watch: contractStatus of every Pacto and when it last changed.

#[derive(Debug, Clone)]
struct Seen {
    status: Option<String>,
    since: Instant,
    /// `since` on the wall clock, to line the arrival up with the services' log timestamps.
    wall: SystemTime,
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
                let wall = SystemTime::now();
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
                        wall,
                    });
                    if entry.status != status {
                        *entry = Seen {
                            status,
                            since: now,
                            wall,
                        };
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
    /// every [`PROGRESS`].
    async fn wait<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&HashMap<String, Seen>) -> Option<T>,
        progress: impl Fn(&HashMap<String, Seen>) -> String,
    ) -> anyhow::Result<T> {
        let mut changed = self.changed.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut report = tokio::time::Instant::now() + PROGRESS;
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
                    report += PROGRESS;
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
                format!("{name} {used:.2} s")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// CPU seconds used by the four services together since `start`.
    fn total(&self) -> f64 {
        self.start
            .iter()
            .map(|(_, pid, before)| cpu_seconds(*pid, self.ticks).map_or(0.0, |now| now - before))
            .sum()
    }
}

/// How long the services are left alone to measure their idle CPU, before the windows of (2) and
/// (4): what they spend with no reconcile asked of them (watches, leases, metrics, the mirror's
/// timer) is part of any window's CPU, so each window's CPU per reconcile is also printed net of
/// it.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// The four services' CPU over [`IDLE_WINDOW`] with no bench traffic: the per-service report and
/// the CPU seconds per second of the four together.
async fn idle_cpu(stack: &Stack, ticks: f64) -> (String, f64) {
    let cpu = CpuMeter::start(stack, ticks, None);
    let started = Instant::now();
    // A measuring window, not a wait for a condition: nothing is supposed to happen in it.
    tokio::time::sleep(IDLE_WINDOW).await;
    let seconds = started.elapsed().as_secs_f64();
    (cpu.report(), cpu.total() / seconds)
}

/// `perf record` of the four services over one phase, when `PACTO_BENCH_PERF` names a directory
/// (`<dir>/<phase>.data`, DWARF call graphs at 499 Hz; read it with `perf report -i … --sort
/// comm,dso,sym`): where the CPU of that phase's window goes, per service.
struct PerfRecord {
    child: std::process::Child,
    path: std::path::PathBuf,
}

impl PerfRecord {
    fn start(stack: &Stack, phase: &str) -> anyhow::Result<Option<Self>> {
        let Some(dir) = std::env::var_os("PACTO_BENCH_PERF") else {
            return Ok(None);
        };
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating {}", std::path::Path::new(&dir).display()))?;
        let path = std::path::Path::new(&dir).join(format!("{phase}.data"));
        let pids = stack
            .services
            .iter()
            .map(|s| s.process.pid().to_string())
            .collect::<Vec<_>>()
            .join(",");
        let child = std::process::Command::new("perf")
            .args(["record", "-F", "499", "--call-graph", "dwarf,16384", "-o"])
            .arg(&path)
            .args(["-p", &pids])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting `perf record` (PACTO_BENCH_PERF is set)")?;
        println!("  perf record of {pids} into {}", path.display());
        Ok(Some(Self { child, path }))
    }

    /// Stops the recording (SIGINT, as perf expects) and waits for the file to be written.
    fn stop(mut self) -> anyhow::Result<()> {
        std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .context("signalling perf")?;
        let status = self.child.wait().context("waiting for perf")?;
        println!("  perf record ended ({status}): {}", self.path.display());
        Ok(())
    }
}

/// The current RSS (VmRSS) of each service, MiB, and their sum.
fn rss_now(stack: &Stack) -> (Vec<(&'static str, f64)>, f64) {
    let each: Vec<(&'static str, f64)> = stack
        .services
        .iter()
        .map(|s| {
            (
                s.name,
                rss_mib(s.process.pid()).map_or(f64::NAN, |(_, now)| now),
            )
        })
        .collect();
    let sum = each.iter().map(|(_, mib)| mib).sum();
    (each, sum)
}

fn format_rss(stack: &Stack) -> String {
    let (each, sum) = rss_now(stack);
    let each: Vec<String> = each
        .iter()
        .map(|(name, mib)| format!("{name} {mib:.1}"))
        .collect();
    format!("{} MiB; together {sum:.1} MiB", each.join(", "))
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
/// (`oci://…:tag@sha256:…`; digest-pinned, so the status-writer's revision mirror does not
/// re-check it).
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

/// Runs `f(i)` for `0..n` with `in_flight` requests in flight, printing how far it got every
/// [`PROGRESS`].
async fn for_each_concurrent<F, Fut>(
    what: &str,
    n: usize,
    in_flight: usize,
    f: F,
) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let done = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let work = futures::stream::iter((0..n).map(|i| {
        let call = f(i);
        let done = &done;
        async move {
            let result = call.await;
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            result
        }
    }))
    .buffer_unordered(in_flight)
    .try_collect::<()>();
    futures::pin_mut!(work);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS, PROGRESS);
    loop {
        tokio::select! {
            result = &mut work => return result,
            _ = tick.tick() => eprintln!(
                "  … {what}: {} of {n} after {:.0} s",
                done.load(std::sync::atomic::Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            ),
        }
    }
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
    for_each_concurrent(&format!("creating Pactos {prefix}-*"), n, IN_FLIGHT, |i| {
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
            phase_deadline(n),
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

/// Waits until the status-writer's `metric` is at least `target`, polling every second and
/// printing progress every [`PROGRESS`].
async fn wait_metric(
    stack: &Stack,
    what: &str,
    metric: &str,
    target: f64,
    deadline: Duration,
) -> anyhow::Result<f64> {
    let end = Instant::now() + deadline;
    let mut next_report = Instant::now() + PROGRESS;
    loop {
        let value = stack.metric_sum("status-writer", metric).await?;
        if value >= target {
            return Ok(value);
        }
        if Instant::now() >= end {
            bail!("{what}: {metric} {value:.0} of {target:.0} after {deadline:?}");
        }
        if Instant::now() >= next_report {
            eprintln!("  … waiting for {what}: {metric} {value:.0} of {target:.0}");
            next_report += PROGRESS;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until no PactoRevision of the stack's namespace is owned by a Pacto named `prefix*`.
async fn wait_revisions_collected(
    stack: &Stack,
    prefix: &str,
    deadline: Duration,
) -> anyhow::Result<()> {
    let revisions: Api<pacto_api::PactoRevision> =
        Api::namespaced(stack.cp.client()?, &stack.namespace);
    let started = Instant::now();
    let mut next_report = started + PROGRESS;
    loop {
        let left = revisions
            .list_metadata(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "Pacto" && o.name.starts_with(prefix))
            })
            .count();
        if left == 0 {
            println!(
                "  the garbage collector removed their revisions {:.1} s after the delete",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if started.elapsed() >= deadline {
            bail!("{left} revisions of deleted Pactos {prefix}* left after {deadline:?}");
        }
        if Instant::now() >= next_report {
            eprintln!(
                "  … waiting for the garbage collector: {left} revisions of deleted Pactos {prefix}* left"
            );
            next_report += PROGRESS;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The writes between two snapshots to the resources the pipeline writes (Pactos, revisions,
/// events), as `VERB resource[/subresource] count`.
/// The pipeline's writes between two scrapes: those to Pactos, PactoRevisions and events.
fn pipeline_writes_between(
    before: &Requests,
    after: &Requests,
) -> Vec<((String, String, String), u64)> {
    writes_between(before, after)
        .into_iter()
        .filter(|((resource, _, _), _)| {
            matches!(resource.as_str(), "pactos" | "pactorevisions" | "events")
        })
        .collect()
}

fn pipeline_writes(before: &Requests, after: &Requests) -> String {
    pipeline_writes_between(before, after)
        .into_iter()
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

/// One timed workload change of (1).
#[derive(Debug, Clone)]
struct Sample {
    /// Its number in the round.
    index: usize,
    /// The contractStatus it leads to.
    want: &'static str,
    /// Wall clock before the PATCH was sent, after it was answered, and when the watch
    /// delivered the new status.
    sent: SystemTime,
    accepted: SystemTime,
    seen: SystemTime,
    /// From the PATCH's answer to the watch's delivery.
    latency: Duration,
}

/// (1): flips the probe's ConfigMap [`drift_samples`] times, each `gap` after the previous
/// status arrived (zero: back to back); returns the samples in order.
async fn workload_changes(
    stack: &Stack,
    statuses: &Statuses,
    gap: Duration,
) -> anyhow::Result<Vec<Sample>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(stack.cp.client()?, &stack.namespace);
    let count = drift_samples();
    let mut samples = Vec::with_capacity(count);
    let mut next_report = Instant::now() + PROGRESS;
    for i in 0..count {
        // The probe starts Compliant; even changes break it, odd ones repair it.
        let (value, want) = if i % 2 == 0 {
            (NON_CONFORMING, "NonCompliant")
        } else {
            (CONFORMING, "Compliant")
        };
        if !gap.is_zero() {
            // Not a wait for a state: the spacing of independent drifts (ISOLATED_GAP).
            tokio::time::sleep(gap).await;
        }
        let sent = SystemTime::now();
        config_maps
            .patch(
                "probe-config",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"data": {"config.json": value}})),
            )
            .await
            .context("patching the probe's ConfigMap")?;
        let written = Instant::now();
        let accepted = SystemTime::now();
        let (since, seen) = statuses
            .wait(
                &format!("probe {want} (change {i})"),
                Duration::from_mins(2),
                |map| {
                    map.get("probe")
                        .filter(|s| s.status.as_deref() == Some(want))
                        .map(|s| (s.since, s.wall))
                },
                |map| format!("{:?}", map.get("probe").map(|s| &s.status)),
            )
            .await?;
        samples.push(Sample {
            index: i,
            want,
            sent,
            accepted,
            seen,
            latency: since.saturating_duration_since(written),
        });
        if Instant::now() >= next_report {
            eprintln!("  … workload changes: {} of {count}", i + 1);
            next_report += PROGRESS;
        }
    }
    Ok(samples)
}

/// (1)'s two rounds under `label`: back to back, then [`ISOLATED_GAP`] apart; each printed
/// with its stages. Returns each round's sorted latencies, named by how the changes came.
async fn drift_rounds(
    label: &str,
    stack: &Stack,
    statuses: &Statuses,
) -> anyhow::Result<Vec<(String, Vec<Duration>)>> {
    let mut rounds = Vec::new();
    for (gap, how) in [
        (Duration::ZERO, "back to back".to_owned()),
        (
            ISOLATED_GAP,
            format!("{} ms apart", ISOLATED_GAP.as_millis()),
        ),
    ] {
        let label = format!("{label}, {how}");
        let samples = workload_changes(stack, statuses, gap).await?;
        print_latencies(&label, &samples);
        print_stage_breakdown(&label, stack, &samples);
        rounds.push((how, sorted_latencies(&samples)));
    }
    Ok(rounds)
}

fn sorted_latencies(samples: &[Sample]) -> Vec<Duration> {
    let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    latencies.sort();
    latencies
}

fn print_latencies(label: &str, samples: &[Sample]) {
    let latencies = sorted_latencies(samples);
    println!(
        "workload change -> status ({label}): p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, p99.9 {:.0} ms, min {:.0} ms, \
         max {:.0} ms ({} changes; {})",
        millis(percentile(&latencies, 0.5)),
        millis(percentile(&latencies, 0.9)),
        millis(percentile(&latencies, 0.99)),
        millis(percentile(&latencies, 0.999)),
        millis(latencies[0]),
        millis(latencies[latencies.len() - 1]),
        latencies.len(),
        load_average()
    );
}

/// `load average: 1m 5m 15m` of the machine, from `/proc/loadavg` (the figures above were taken
/// at it; other processes on the machine move them).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "load average unknown".to_owned(),
        |text| {
            let fields: Vec<&str> = text.split_whitespace().take(3).collect();
            format!("load average {}", fields.join(" "))
        },
    )
}

// ---------------------------------------------------------------------------------------------
// The drift trace: where each change of (1) spent its time, from the services' debug events.

/// Whether the services log the debug events the drift trace reads (`PACTO_BENCH_STAGE_LOG=0`
/// turns them off).
fn stage_log() -> bool {
    std::env::var("PACTO_BENCH_STAGE_LOG").map_or(true, |v| v != "0")
}

/// `--log-level` per service for the drift trace: the observer's hub and WatchTargets stream
/// (few lines: only changes that notify a Pacto), the status-writer's WatchTargets receipts and
/// every debug event inside the probe's `reconcile` span (a span-field filter: the other Pactos'
/// passes log nothing more).
fn stage_log_levels() -> Vec<(&'static str, String)> {
    if !stage_log() {
        return Vec::new();
    }
    vec![
        (
            "observer",
            "info,pacto_observer::targets=debug,pacto_observer::service=debug".to_owned(),
        ),
        (
            "status-writer",
            "info,pacto_status_writer::triggers=debug,[reconcile{pacto=probe}]=debug".to_owned(),
        ),
    ]
}

/// The stages of a change, in order: (label, service whose log has it, message, the field that
/// names the probe or its ConfigMap).
const STAGES: [(&str, &str, &str, (&str, &str)); 10] = [
    (
        "observer saw",
        "observer",
        "watched object changed",
        ("name", "probe-config"),
    ),
    (
        "pushed",
        "observer",
        "target change sent",
        ("pacto", "probe"),
    ),
    (
        "received",
        "status-writer",
        "target changed",
        ("pacto", "probe"),
    ),
    (
        "started",
        "status-writer",
        "reconcile started",
        ("pacto", "probe"),
    ),
    (
        "resolved",
        "status-writer",
        "contract resolved",
        ("pacto", "probe"),
    ),
    (
        "revision",
        "status-writer",
        "revision ensured",
        ("pacto", "probe"),
    ),
    ("observed", "status-writer", "observed", ("pacto", "probe")),
    (
        "evaluated",
        "status-writer",
        "evaluated",
        ("pacto", "probe"),
    ),
    (
        "apply sent",
        "status-writer",
        "status apply sent",
        ("pacto", "probe"),
    ),
    (
        "applied",
        "status-writer",
        "status applied",
        ("pacto", "probe"),
    ),
];

/// One parsed log line: its time, and the line.
struct LogLine {
    at: SystemTime,
    text: String,
}

/// The lines of a service's log at or after `from` (text format: the RFC 3339 time first).
fn read_log(path: &std::path::Path, from: SystemTime) -> Vec<LogLine> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let stamp = line.split_whitespace().next()?;
            let at: k8s_openapi::jiff::Timestamp = stamp.parse().ok()?;
            let at = SystemTime::from(at);
            (at >= from).then(|| LogLine {
                at,
                text: line.to_owned(),
            })
        })
        .collect()
}

/// Whether `line` carries `field=value` exactly (span fields and event fields alike).
fn has_field(line: &str, (field, value): (&str, &str)) -> bool {
    let needle = format!("{field}={value}");
    line.match_indices(&needle).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + needle.len()..].chars().next();
        before.is_none_or(|c| c == ' ' || c == '{')
            && after.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'))
    })
}

/// Whether `line`'s message is `message` (`<target>: <message>` then fields or the end).
fn has_message(line: &str, message: &str) -> bool {
    let needle = format!(": {message}");
    line.match_indices(&needle).any(|(at, _)| {
        line[at + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ')
    })
}

/// The value of `field=` in a log line (up to the next space), if any.
fn field_value<'a>(line: &'a str, field: &str) -> Option<&'a str> {
    let needle = format!(" {field}=");
    let at = line.find(&needle)? + needle.len();
    line[at..].split([' ', '}']).next()
}

fn signed_millis(later: SystemTime, earlier: SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(d) => millis(d),
        Err(e) => -millis(e.duration()),
    }
}

/// One sample's stage times (`None`: the stage's event was not found in the sample's window).
struct Trace {
    stages: Vec<Option<SystemTime>>,
    /// The `reconcile started` line's trigger and reconciles in flight.
    trigger: Option<String>,
    in_flight: Option<String>,
}

fn trace(sample: &Sample, logs: &HashMap<&str, Vec<LogLine>>) -> Trace {
    let mut stages = Vec::with_capacity(STAGES.len());
    let mut cursor = sample.sent;
    let end = sample.seen + Duration::from_secs(1);
    let (mut trigger, mut in_flight) = (None, None);
    for (_, service, message, field) in STAGES {
        let found = logs.get(service).and_then(|lines| {
            lines.iter().find(|l| {
                l.at >= cursor
                    && l.at <= end
                    && has_message(&l.text, message)
                    && has_field(&l.text, field)
            })
        });
        if let Some(line) = found {
            cursor = line.at;
            if message == "reconcile started" {
                trigger = field_value(&line.text, "trigger").map(str::to_owned);
                in_flight = field_value(&line.text, "in_flight").map(str::to_owned);
            }
        }
        stages.push(found.map(|l| l.at));
    }
    Trace {
        stages,
        trigger,
        in_flight,
    }
}

/// `+12.3` from the previous stage found (the PATCH's answer for the first).
fn step_millis(sample: &Sample, trace: &Trace, stage: usize) -> Option<f64> {
    let at = trace.stages[stage]?;
    let previous = trace.stages[..stage]
        .iter()
        .rev()
        .find_map(|s| *s)
        .unwrap_or(sample.accepted);
    Some(signed_millis(at, previous))
}

/// Prints where the changes of one round spent their time: per stage (the time since the
/// previous stage) p50, p99 and max over the samples, then every sample above p99 or over
/// 250 ms stage by stage, with what the services logged at info or above meanwhile.
fn print_stage_breakdown(label: &str, stack: &Stack, samples: &[Sample]) {
    if !stage_log() || samples.is_empty() {
        return;
    }
    let from = samples[0].sent;
    let mut logs: HashMap<&str, Vec<LogLine>> = HashMap::new();
    for service in &stack.services {
        logs.insert(service.name, read_log(service.process.log_path(), from));
    }
    let traces: Vec<Trace> = samples.iter().map(|s| trace(s, &logs)).collect();
    println!(
        "  stages ({label}; ms since the previous stage, over {} changes):",
        samples.len()
    );
    let mut header = vec!["PATCH answered".to_owned()];
    for (stage, (name, ..)) in STAGES.iter().enumerate() {
        let mut steps: Vec<f64> = samples
            .iter()
            .zip(&traces)
            .filter_map(|(s, t)| step_millis(s, t, stage))
            .collect();
        steps.sort_by(f64::total_cmp);
        if steps.is_empty() {
            println!("    -> {name:<11} not logged");
            continue;
        }
        let at = |p: f64| steps[((steps.len() as f64 - 1.0) * p).round() as usize];
        println!(
            "    -> {name:<11} p50 {:>7.1}  p99 {:>7.1}  max {:>7.1}  ({} of {})",
            at(0.5),
            at(0.99),
            steps[steps.len() - 1],
            steps.len(),
            samples.len()
        );
        header.push((*name).to_owned());
    }
    let mut watched: Vec<f64> = samples
        .iter()
        .zip(&traces)
        .map(|(s, t)| {
            let last = t.stages.iter().rev().find_map(|s| *s).unwrap_or(s.accepted);
            signed_millis(s.seen, last)
        })
        .collect();
    watched.sort_by(f64::total_cmp);
    let at = |p: f64| watched[((watched.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "    -> {:<11} p50 {:>7.1}  p99 {:>7.1}  max {:>7.1}",
        "watched",
        at(0.5),
        at(0.99),
        watched[watched.len() - 1]
    );
    let latencies = sorted_latencies(samples);
    let p99 = percentile(&latencies, 0.99);
    let slow: Vec<(&Sample, &Trace)> = samples
        .iter()
        .zip(&traces)
        .filter(|(s, _)| s.latency > p99 || s.latency > Duration::from_millis(250))
        .collect();
    println!(
        "  slow changes ({label}; above p99 {:.0} ms or over 250 ms): {}",
        millis(p99),
        slow.len()
    );
    for (sample, trace) in slow {
        let steps: Vec<String> = STAGES
            .iter()
            .enumerate()
            .map(
                |(stage, (name, ..))| match step_millis(sample, trace, stage) {
                    Some(ms) => format!("{name} {ms:+.1}"),
                    None => format!("{name} -"),
                },
            )
            .collect();
        let last = trace
            .stages
            .iter()
            .rev()
            .find_map(|s| *s)
            .unwrap_or(sample.accepted);
        println!(
            "    change {} (-> {}): {:.0} ms; PATCH took {:.1} ms; {}; watched {:+.1} (trigger {}, in flight {})",
            sample.index,
            sample.want,
            millis(sample.latency),
            signed_millis(sample.accepted, sample.sent),
            steps.join(", "),
            signed_millis(sample.seen, last),
            trace.trigger.as_deref().unwrap_or("?"),
            trace.in_flight.as_deref().unwrap_or("?"),
        );
        for (service, lines) in &logs {
            let meanwhile: Vec<&LogLine> = lines
                .iter()
                .filter(|l| l.at >= sample.sent && l.at <= sample.seen)
                .filter(|l| !l.text.contains(" DEBUG ") && !l.text.contains(" TRACE "))
                .collect();
            for line in meanwhile.iter().take(6) {
                println!(
                    "      {service} {:+.1} ms: {}",
                    signed_millis(line.at, sample.accepted),
                    line.text
                        .split_once(' ')
                        .map_or(line.text.as_str(), |(_, rest)| rest)
                );
            }
            if meanwhile.len() > 6 {
                println!("      {service}: {} more lines", meanwhile.len() - 6);
            }
            let notices = lines
                .iter()
                .filter(|l| l.at >= sample.sent && l.at <= sample.seen)
                .filter(|l| {
                    (has_message(&l.text, "target changed")
                        || has_message(&l.text, "target change sent"))
                        && !has_field(&l.text, ("pacto", "probe"))
                })
                .count();
            if notices > 0 {
                println!("      {service}: {notices} notifications of other Pactos meanwhile");
            }
        }
    }
}

async fn wait_endpoint_slices(stack: &Stack, n: usize) -> anyhow::Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(stack.cp.client()?, &stack.namespace);
    let timeout = phase_deadline(n);
    let deadline = Instant::now() + timeout;
    let mut next_report = Instant::now() + PROGRESS;
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
                "only {} of {n} EndpointSlices after {timeout:?}",
                ready.len()
            );
        }
        if Instant::now() >= next_report {
            eprintln!("  … waiting for EndpointSlices: {} of {n}", ready.len());
            next_report += PROGRESS;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The status-writer's reconcile triggers so far: (`trigger="requeue"`, all triggers).
async fn triggers(stack: &Stack) -> anyhow::Result<(f64, f64)> {
    let lines = stack
        .metric_lines("status-writer", "pacto_status_writer_triggers_total")
        .await?;
    let mut requeue = 0.0;
    let mut total = 0.0;
    for line in &lines {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        total += value;
        if label(labels, "trigger") == "requeue" {
            requeue += value;
        }
    }
    Ok((requeue, total))
}

/// (5): scrapes the status-writer's triggers once a second for `seconds` seconds; returns the
/// reconciles started in each second (requeues, all) and the slowest scrape.
async fn per_second_triggers(
    stack: &Stack,
    seconds: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Duration)> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    tick.tick().await;
    let mut last = triggers(stack).await?;
    let mut requeues = Vec::with_capacity(seconds);
    let mut all = Vec::with_capacity(seconds);
    let mut slowest = Duration::ZERO;
    for second in 1..=seconds {
        tick.tick().await;
        let scrape = Instant::now();
        let now = triggers(stack).await?;
        slowest = slowest.max(scrape.elapsed());
        requeues.push(now.0 - last.0);
        all.push(now.1 - last.1);
        last = now;
        if second % 10 == 0 {
            let window = &all[second - 10..];
            eprintln!(
                "  … requeue sampling: {second} of {seconds} s; last 10 s: {:.0} reconciles started",
                window.iter().sum::<f64>()
            );
        }
    }
    Ok((requeues, all, slowest))
}

/// Mean, max, and a histogram of per-second counts (`bucket`-wide count ranges), one line each.
fn histogram(counts: &[f64]) -> (f64, f64, Vec<String>) {
    let mean = counts.iter().sum::<f64>() / counts.len().max(1) as f64;
    let max = counts.iter().copied().fold(0.0, f64::max);
    let bucket = ((max + 1.0) / 16.0).ceil().max(1.0) as usize;
    let mut buckets = BTreeMap::<usize, usize>::new();
    for count in counts {
        *buckets.entry(*count as usize / bucket).or_insert(0) += 1;
    }
    let lines = buckets
        .iter()
        .map(|(b, seconds)| {
            let from = b * bucket;
            let range = if bucket == 1 {
                format!("{from:>5}")
            } else {
                format!("{from:>5}-{:<5}", from + bucket - 1)
            };
            format!(
                "{range} reconciles/s: {seconds:>4} s {}",
                "#".repeat((*seconds).div_ceil(2).min(80))
            )
        })
        .collect();
    (mean, max, lines)
}

/// Requests in the docker-registry's own access log so far: (all, those naming `repository`).
fn registry_requests(stack: &Stack, repository: &str) -> (usize, usize) {
    let log = stack.registry.access_log();
    let needle = format!("/v2/{repository}/");
    let named = log.iter().filter(|e| e.path.starts_with(&needle)).count();
    (log.len(), named)
}

/// (6): `n` Pactos created in their own namespace (the status-writer watches only the bench's),
/// then `n` server-side applies of `status` on their `status` subresource, as the status-writer
/// makes them (its field manager, forced), [`STATUS_WRITER_CONCURRENCY`] in flight, one client.
/// Returns the time the creates and the patches took.
async fn raw_status_patches(
    client: &Client,
    namespace: &str,
    reference: &str,
    n: usize,
    status: &serde_json::Value,
) -> anyhow::Result<(Duration, Duration)> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
            }))?,
        )
        .await
        .context("creating the raw namespace")?;
    let pactos: Api<Pacto> = Api::namespaced(client.clone(), namespace);
    let created = create_fleet(&pactos, reference, "r", n).await?;
    let body = serde_json::json!({
        "apiVersion": "pacto.trianalab.io/v1alpha1",
        "kind": "Pacto",
        "status": status,
    });
    let started = Instant::now();
    for_each_concurrent("raw status patches", n, STATUS_WRITER_CONCURRENCY, |i| {
        let pactos = pactos.clone();
        let body = &body;
        async move {
            pactos
                .patch_status(
                    &format!("r-{i}"),
                    &PatchParams::apply("pacto-status-writer").force(),
                    &Patch::Apply(body),
                )
                .await?;
            Ok(())
        }
    })
    .await?;
    Ok((created, started.elapsed()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let wall = Instant::now();
    println!(
        "pipeline bench, N = {n}, started {} (`cargo bench -p pacto-e2e --bench pipeline -- {n}`)",
        chrono_now()
    );
    let ticks = clock_ticks();
    let deadline = phase_deadline(n);
    let shared = shared_count();

    let mut stack = Stack::start_with(StackOptions {
        status_writer_args: vec![MIRROR_INTERVAL.into()],
        scrape_interval: Some(SCRAPE_INTERVAL),
        log_levels: stage_log_levels(),
        ..StackOptions::default()
    })
    .await?;
    let client = stack.cp.client()?;
    let ns = stack.namespace.clone();
    println!(
        "stack: control plane, simulator, registries, 4 services over mTLS, Prometheus scraping each every {} s; ready \
         after {:.1} s (namespace {ns})",
        SCRAPE_INTERVAL.as_secs(),
        wall.elapsed().as_secs_f64()
    );
    let statuses = Statuses::start(client.clone(), &ns);

    // Contracts: the probe's requires configuration `app` (a JSON schema in the bundle); the
    // fleet's is a bare service contract; the shared one is the same, referenced by its tag.
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
    let (shared_repository, _) = stack
        .push_contract(
            "shared",
            "pactoVersion: \"2.0\"\nservice:\n  name: shared\n  version: 1.0.0\n",
            ":1.0.0",
        )
        .await?;
    let shared_ref = format!("{shared_repository}:1.0.0");

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
         on a kube watch of the Pactos, back to back (inside the 150 ms window that follows each notification) and \
         300 ms apart (each change the first after a quiet spell, sent at once). Includes: the observer's ConfigMap \
         watch and WatchTargets notification, the status-writer's queue, Resolve (digest-pinned, served from the resolver's cache), PactoRevision GET, \
         Observe (ConfigMap GET + schema validation), Evaluate, the status server-side apply, the ValidationFailed \
         event and the watch delivery."
    );
    drift_rounds("1 Pacto", &stack, &statuses).await?;

    // Setup: N Services, their EndpointSlices settled.
    println!();
    let started = Instant::now();
    for_each_concurrent("creating Services", n, IN_FLIGHT, |i| {
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
        "setup: {n} headless Services (clusterIP None: the test control plane's service range is a /24) selecting the \
         pods of {DEPLOYMENTS} Deployments (1 replica each), created in {:.2} s ({IN_FLIGHT} in flight); their \
         EndpointSlices (kube-controller-manager) complete after {:.2} s",
        services_created.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    let writer_reconciles = "pacto_status_writer_reconciles_total";
    let writer_writes = "pacto_status_writer_status_writes_total";

    // (2) Shared contracts: shared Pactos on the same tag at the minimum check interval.
    println!();
    let shared_interval = u32::try_from(pacto_api::MIN_CHECK_INTERVAL_SECONDS)?;
    println!(
        "[2] shared contracts: {shared} Pactos referencing the same OCI tag ({shared_ref}, not digest-pinned: every \
         check resolves the tag), checkIntervalSeconds {shared_interval} (the minimum), each targeting one of the \
         Services; observed for 2 intervals from half an interval after all had a contractStatus (off the \
         cadence of the tag's checks). Registry requests counted from the docker-registry's own access log; the revision mirror runs at its default interval ({MIRROR_INTERVAL})."
    );
    // Idle before the shared Pactos exist: once created, their checks never stop.
    let (idle_report, idle_rate) = idle_cpu(&stack, ticks).await;
    let started = Instant::now();
    for_each_concurrent("creating the shared Pactos", shared, IN_FLIGHT, |i| {
        let pactos = pactos.clone();
        let object = pacto(
            &format!("c-{i}"),
            &shared_ref,
            &format!("s-{}", i % n),
            shared_interval,
            None,
        )
        .map(|mut p| {
            p.metadata
                .labels
                .get_or_insert_default()
                .insert("bench".into(), "shared".into());
            p
        });
        async move {
            pactos.create(&PostParams::default(), &object?).await?;
            Ok(())
        }
    })
    .await?;
    wait_fleet(&statuses, "c-", shared).await?;
    println!(
        "  all {shared} had a contractStatus {:.2} s after the first create ({})",
        started.elapsed().as_secs_f64(),
        statuses.snapshot(|map| format_counts(&status_counts(map, "c-")))
    );
    let rss_at_shared = format_rss(&stack);
    let shared_repo = shared_repository
        .split_once("/pacto/")
        .map_or("pacto/shared".to_owned(), |(_, name)| {
            format!("pacto/{name}")
        });
    // The first passes' fresh HEADs ended about when the last Pacto had its first status, and
    // the shared resolve asks the registry again one interval after each: windows starting here
    // would put each HEAD on a boundary (a run read 0 and 0). Half an interval later they do not.
    tokio::time::sleep(Duration::from_secs(u64::from(shared_interval) / 2)).await;
    let cpu = CpuMeter::start(&stack, ticks, None);
    let shared_started = Instant::now();
    let mut shared_reconciles = 0.0;
    for interval in 1..=2 {
        let (all_before, named_before) = registry_requests(&stack, &shared_repo);
        let (_, triggers_before) = triggers(&stack).await?;
        tokio::time::sleep(Duration::from_secs(u64::from(shared_interval))).await;
        let (all_after, named_after) = registry_requests(&stack, &shared_repo);
        let (_, triggers_after) = triggers(&stack).await?;
        shared_reconciles += triggers_after - triggers_before;
        println!(
            "  interval {interval} ({shared_interval} s): {} registry requests for {shared_repo} ({} in all); \
             {:.0} reconciles started",
            named_after - named_before,
            all_after - all_before,
            triggers_after - triggers_before
        );
    }
    let shared_cpu = cpu.total();
    println!(
        "  CPU over the 2 intervals: {}; {:.2} ms per reconcile (all four services); idle before they \
         were created ({} s, no reconciles): {idle_report} = {:.1} ms/s, so net of idle {:.2} ms per reconcile",
        cpu.report(),
        shared_cpu * 1e3 / shared_reconciles.max(1.0),
        IDLE_WINDOW.as_secs(),
        idle_rate * 1e3,
        (shared_cpu - idle_rate * shared_started.elapsed().as_secs_f64()) * 1e3
            / shared_reconciles.max(1.0)
    );
    println!("  RSS with {} Pactos present: {rss_at_shared}", shared + 1);
    pactos
        .delete_collection(
            &kube::api::DeleteParams::default(),
            &ListParams::default().labels("bench=shared"),
        )
        .await
        .context("deleting the shared Pactos")?;
    // Their PactoRevisions go with them through kube-controller-manager's garbage collector (owner
    // references), at its own client rate: wait for it, or its DELETEs would be counted as the
    // pipeline's writes in (3) and (4).
    wait_revisions_collected(&stack, "c-", deadline).await?;

    // (3a) A backlog: N Pactos created while the status-writer is stopped (the bench's create
    // cost alone), then the status-writer restarted (same Lease identity: it leads at once).
    println!();
    println!(
        "[3] reconcile throughput: {n} Pactos, each targeting its own Service. Contract: digest-pinned OCI reference, \
         no configurations. checkIntervalSeconds {FLEET_CHECK_INTERVAL} (no periodic requeue during the bench). \
         Timed until a kube watch of the Pactos has seen a contractStatus on each. (The {shared} shared Pactos of \
         [2] were deleted before.)"
    );
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
    let backlog = started.elapsed();
    let backlog_rate = n as f64 / backlog.as_secs_f64();
    // A fresh process: its counters start at 0.
    let reconciles = stack.metric_sum("status-writer", writer_reconciles).await?;
    let writes = stack.metric_sum("status-writer", writer_writes).await?;
    let requests_after = apiserver_requests(&client).await?;
    println!(
        "(a) backlog: {n} Pactos created with the status-writer stopped in {:.2} s ({:.0} creates/s, {IN_FLIGHT} in \
         flight: the bench's create cost alone); the status-writer restarted (ready after {:.2} s); all {n} had a \
         contractStatus {:.2} s after the restart: {backlog_rate:.1} Pactos/s",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        ready.as_secs_f64(),
        backlog.as_secs_f64(),
    );
    println!(
        "  statuses: {}; status-writer: {reconciles:.0} reconciles (the probe's included), {writes:.0} status writes",
        statuses.snapshot(|map| format_counts(&status_counts(map, "b-")))
    );
    println!(
        "  apiserver writes: {}",
        pipeline_writes(&requests_before, &requests_after)
    );
    let backlog_writes: u64 = pipeline_writes_between(&requests_before, &requests_after)
        .iter()
        .map(|(_, count)| count)
        .sum();
    let backlog_write_rate = backlog_writes as f64 / backlog.as_secs_f64();
    println!(
        "  CPU: {}; {:.2} ms per reconcile (all four services)",
        cpu.report(),
        cpu.total() * 1e3 / reconciles.max(1.0)
    );
    explain_unknown(&stack, &statuses, "b-").await?;
    // The verdict that counts: every backlog Pacto Compliant (Unknowns retry with backoff).
    statuses
        .wait(
            &format!("{n} Pactos b-* Compliant"),
            deadline,
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
    let rss_at_n = format_rss(&stack);
    println!("  RSS with {} Pactos present: {rss_at_n}", n + 1);

    // (3b) N more Pactos created while the whole pipeline runs, timed from the first create.
    let (idle_report, idle_rate) = idle_cpu(&stack, ticks).await;
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
         {:.2} s ({:.0} creates/s, {IN_FLIGHT} in flight); all had a contractStatus {:.2} s after the first create: \
         {:.1} Pactos/s ({:.2} s after the last create)",
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

    // (4) Steady state: nudge every Pacto; count what the services wrote.
    println!();
    println!(
        "[4] API writes per steady-state reconcile: each of the {n} Pactos of (b) nudged with an annotation (a metadata \
         change, so the status-writer reconciles it; nothing else changed). Writes counted by the kube-apiserver \
         (apiserver_request_total, verbs POST/PUT/PATCH/APPLY/DELETE) while the status-writer's \
         {writer_reconciles} advanced by >= {n}; the bench's own nudges (PATCH pactos, no subresource) are \
         listed separately and excluded. CPU: user+system time of the four service processes (/proc/<pid>/stat) \
         over the same period."
    );
    let reconciles_before = stack.metric_sum("status-writer", writer_reconciles).await?;
    let writes_before = stack.metric_sum("status-writer", writer_writes).await?;
    let requests_before = apiserver_requests(&client).await?;
    let cpu = CpuMeter::start(&stack, ticks, None);
    let perf = PerfRecord::start(&stack, "steady")?;
    let started = Instant::now();
    for_each_concurrent("nudging", n, IN_FLIGHT, |i| {
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
    let reconciled = wait_metric(
        &stack,
        "the nudges to be reconciled",
        writer_reconciles,
        reconciles_before + n as f64,
        deadline,
    )
    .await?
        - reconciles_before;
    let elapsed = started.elapsed();
    let steady_cpu = cpu.total();
    if let Some(perf) = perf {
        perf.stop()?;
    }
    let cpu_report = cpu.report();
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
    let writes_per_reconcile = counted as f64 / reconciled;
    let cpu_per_reconcile = steady_cpu * 1e3 / reconciled;
    let net_per_reconcile =
        (steady_cpu - idle_rate * elapsed.as_secs_f64()).max(0.0) * 1e3 / reconciled;
    println!(
        "steady state: {reconciled:.0} reconciles in {:.2} s ({:.1} reconciles/s; nudging took {:.2} s), \
         {counted} API writes to pactos/status, pactorevisions and events ({writes_per_reconcile:.3} per reconcile); \
         status-writer's own status-write counter: +{status_writes:.0}",
        elapsed.as_secs_f64(),
        reconciled / elapsed.as_secs_f64(),
        nudged.as_secs_f64(),
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
    println!(
        "  CPU: {cpu_report}; together {steady_cpu:.2} s = {cpu_per_reconcile:.2} ms per steady reconcile"
    );
    println!(
        "  idle just before ({} s, no reconciles): {idle_report} = {:.2} ms/s; net of idle {net_per_reconcile:.2} ms \
         per steady reconcile",
        IDLE_WINDOW.as_secs(),
        idle_rate * 1e3
    );

    // (1) again, with the fleet present.
    println!();
    let loaded = drift_rounds(&format!("{} Pactos present", 2 * n + 1), &stack, &statuses).await?;
    let rss_at_2n = format_rss(&stack);
    println!("RSS with {} Pactos present: {rss_at_2n}", 2 * n + 1);

    // (5) Requeue spreading: the N Pactos of (a) switched to a 300 s check interval.
    println!();
    let spread_interval = spread_check_interval();
    println!(
        "[5] requeue spreading: the {n} Pactos of (a) patched to checkIntervalSeconds {spread_interval} (a spec \
         change: each is reconciled at once, in a burst); once the burst is reconciled, the status-writer's \
         pacto_status_writer_triggers_total scraped from its admin port every second for one interval. Periodic \
         checks stay on each Pacto's phase, at most one interval after any reconcile (docs/design/status.md#requeue-spreading), \
         so (the burst being shorter than the interval) the interval after the burst holds exactly one periodic check \
         per Pacto: its histogram is the cadence of the interval."
    );
    let (_, triggers_before) = triggers(&stack).await?;
    let started = Instant::now();
    for_each_concurrent("patching the interval", n, IN_FLIGHT, |i| {
        let pactos = pactos.clone();
        async move {
            pactos
                .patch(
                    &format!("b-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({
                        "spec": {"checkIntervalSeconds": spread_interval}
                    })),
                )
                .await?;
            Ok(())
        }
    })
    .await?;
    let patched = started.elapsed();
    wait_metric(
        &stack,
        "the interval changes to be reconciled",
        "pacto_status_writer_triggers_total",
        triggers_before + n as f64,
        deadline,
    )
    .await?;
    let burst = started.elapsed();
    println!(
        "  patched in {:.2} s; the burst reconciled {:.2} s after the first patch ({:.1} reconciles/s)",
        patched.as_secs_f64(),
        burst.as_secs_f64(),
        n as f64 / burst.as_secs_f64()
    );
    let interval = spread_interval as usize;
    let cpu = CpuMeter::start(&stack, ticks, None);
    let (requeues, all, slowest) = per_second_triggers(&stack, interval).await?;
    let periodic_cpu = cpu.total();
    let window = &requeues[..];
    let (mean, max, lines) = histogram(window);
    let window_all: f64 = all.iter().sum();
    println!(
        "  the {interval} s after the burst (one full interval): {:.0} requeues \
         ({window_all:.0} reconciles of any trigger), mean {mean:.1}/s (n / interval = {:.1}/s), max {max:.0}/s, \
         max/mean {:.2} (slowest scrape {:.0} ms)",
        window.iter().sum::<f64>(),
        n as f64 / interval as f64,
        max / mean.max(f64::MIN_POSITIVE),
        millis(slowest)
    );
    println!("  histogram of requeues per second over that interval:");
    for line in lines {
        println!("    {line}");
    }
    let per_30: Vec<String> = window
        .chunks(30)
        .map(|c| format!("{:.0}", c.iter().sum::<f64>()))
        .collect();
    println!(
        "  requeues per 30 s over that interval: {}",
        per_30.join(" ")
    );
    println!(
        "  CPU over that interval: {}; {:.2} ms per periodic reconcile (all four services; the status-writer's \
         includes rendering its /metrics for the bench's scrape every second)",
        cpu.report(),
        periodic_cpu * 1e3 / requeues.iter().sum::<f64>().max(1.0)
    );

    // (6) The physical limit: the API server's own rate for N status applies like the
    // status-writer's, no pipeline.
    println!();
    let settled = stack.get_pacto("b-0").await?;
    let status = settled
        .get("status")
        .cloned()
        .context("b-0 has no status")?;
    let status_bytes = serde_json::to_vec(&status)?.len();
    stack.stop_service("status-writer")?;
    let (created, patched) =
        raw_status_patches(&client, &format!("{ns}-raw"), &fleet_ref, n, &status).await?;
    let raw_rate = n as f64 / patched.as_secs_f64();
    println!(
        "[6] physical limit: {n} server-side applies of pactos/status (field manager pacto-status-writer, forced) \
         from one client, {STATUS_WRITER_CONCURRENCY} in flight (the status-writer's --max-concurrent-reconciles), \
         no pipeline (the status-writer stopped), on {n} fresh Pactos without a status in their own namespace \
         (created in {:.2} s); body: the status of a settled fleet Pacto (b-0, {status_bytes} bytes of JSON)",
        created.as_secs_f64()
    );
    println!(
        "  {n} patches in {:.2} s: {raw_rate:.1} patches/s; the backlog of (3a) ran at {backlog_rate:.1} Pactos/s = \
         {:.0}% of it",
        patched.as_secs_f64(),
        100.0 * backlog_rate / raw_rate
    );
    println!(
        "  in API writes: the backlog made {backlog_writes} ({:.2} per Pacto: status apply, PactoRevision create and \
         status, event) at {backlog_write_rate:.1} writes/s = {:.0}% of the raw rate",
        backlog_writes as f64 / n as f64,
        100.0 * backlog_write_rate / raw_rate
    );

    println!();
    let rss: Vec<String> = stack
        .services
        .iter()
        .map(|s| match rss_mib(s.process.pid()) {
            Some((peak, now)) => format!("{} {peak:.1} MiB (now {now:.1} MiB)", s.name),
            None if s.name == "status-writer" => format!(
                "{} stopped for [6] (peak before its restart in (3a): {writer_peak_before:.1} MiB)",
                s.name
            ),
            None => format!("{} (exited)", s.name),
        })
        .collect();
    println!("peak RSS (VmHWM): {}", rss.join(", "));
    println!(
        "statuses at the end: (a) {}; (b) {}",
        statuses.snapshot(|map| format_counts(&status_counts(map, "b-"))),
        statuses.snapshot(|map| format_counts(&status_counts(map, "p-")))
    );
    println!();
    println!("summary (N = {n}):");
    println!("  backlog after a restart          {backlog_rate:.1} Pactos/s");
    println!(
        "  raw status applies (1 client)    {raw_rate:.1} patches/s; backlog = {:.0}% of it in Pactos, {:.0}% in API writes",
        100.0 * backlog_rate / raw_rate,
        100.0 * backlog_write_rate / raw_rate
    );
    println!("  writes per steady reconcile      {writes_per_reconcile:.3}");
    println!(
        "  CPU per steady reconcile         {cpu_per_reconcile:.2} ms (four services; {net_per_reconcile:.2} ms net of idle)"
    );
    for (how, loaded) in &loaded {
        println!(
            "  drift -> status, {} present     {how}: p50 {:.0} ms, p99 {:.0} ms, p99.9 {:.0} ms, max {:.0} ms ({} changes)",
            2 * n + 1,
            millis(percentile(loaded, 0.5)),
            millis(percentile(loaded, 0.99)),
            millis(percentile(loaded, 0.999)),
            millis(loaded[loaded.len() - 1]),
            loaded.len()
        );
    }
    println!(
        "  requeues at {spread_interval} s, {n} Pactos      mean {mean:.1}/s, max {max:.0}/s, max/mean {:.2}",
        max / mean.max(f64::MIN_POSITIVE)
    );
    println!(
        "  RSS with {} Pactos             {rss_at_shared}",
        shared + 1
    );
    println!("  RSS with {} Pactos             {rss_at_n}", n + 1);
    println!("  RSS with {} Pactos             {rss_at_2n}", 2 * n + 1);
    println!("wall time: {:.1} s (N = {n})", wall.elapsed().as_secs_f64());
    Ok(())
}

/// The current UTC time, `YYYY-MM-DDTHH:MM:SSZ`.
fn chrono_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map_or_else(|_| "?".to_owned(), |t| t.to_string())
}
