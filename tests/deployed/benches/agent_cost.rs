//! The whole node agent's cost on the real node (issue 36 item 4; docs/testing.md, "Node agent
//! cost on the real node"): printed, never asserted.
//!
//! One run starts a real node ([`RealNode`], the deployed tier's node without its release
//! rehearsal) with the agent's image built here from a **release** build (`cargo build --release
//! -p pacto-node-agent`, staged with `--strip-debug` like `scripts/release.sh`), installs the CRDs
//! and the agent's chart from `./charts` with `helmfile -e local`, and runs one HTTP workload pod
//! (the sample-http image: one request per connection, served in turn). A load generator in this
//! process (tokio, on the host) opens a new connection for every `GET /healthz` to the pod's IP,
//! with a fixed number of connections in flight, for a fixed time per window.
//!
//! Windows, each round in the opposite order of the previous one (agent absent first, then
//! running; then running first, then absent):
//!   (a) agent absent: the DaemonSet's node selector no longer matches the node (a node label is
//!       removed), the agent process is gone;
//!   (b) agent running (the label is back, the process runs and its collection is Running);
//!   with a connection storm of 10k and 50k new connections/s (loopback connect + accept, closed
//!   with RST, paced, from two threads here) next to the workload, in both states, so that the
//!   storm's own CPU is in the baseline too: (c) is the agent running under the storm, compared
//!   with the agent absent under the same storm.
//!
//! Printed per window and as medians over the rounds: the workload's req/s and latency p50/p99,
//! its throughput loss against the agent-absent window of the same storm, the agent process's CPU
//! (utime + stime from /proc, % of one core) and memory (VmRSS, VmHWM), the events the agent read
//! (its `pacto_node_agent_events_total`) against the connections made, its dropped events
//! (`pacto_node_agent_events_dropped_total`, the ring buffer's drop counter), the kernel
//! program's own time (`run_time_ns`/`run_cnt` from `bpftool prog show`, with
//! `kernel.bpf_stats_enabled=1` for the run and restored after) and the load average.
//!
//! Root only (`flock /tmp/pacto-real-node.lock cargo bench -p pacto-deployed --bench
//! agent_cost`); without root it prints one skip line. Environment: `PACTO_AGENT_COST_SECS`
//! (window length, default 20), `PACTO_AGENT_COST_ROUNDS` (default 2), `PACTO_AGENT_COST_INFLIGHT`
//! (workload connections in flight, default 4), `PACTO_AGENT_COST_STORMS` (comma separated
//! conn/s, default `10000,50000`; empty for none).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pacto_chart_tests::{Tools, repo_root};
use pacto_deployed::{SAMPLE_HTTP_IMAGE, agent_pids, clock_ticks, image_archives, may_run, usage};
use pacto_testenv::node::{self, RealNode, RealNodeOptions};
use pacto_testenv::process::wait_for;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The agent's namespace, DaemonSet and release (`nodeAgent.namespace` of the local
/// environment).
const AGENT_NS: &str = "pacto-node-agent";
const AGENT: &str = "pacto-node-agent";
/// The real node's name.
const NODE: &str = "pacto-node";
/// The node label the agent's DaemonSet selects here: removed, the agent is absent.
const SWITCH_LABEL: &str = "pacto-bench-agent";
/// The workload's namespace and pod.
const BENCH_NS: &str = "agent-cost";
const WEB: &str = "web";
/// The agent's admin port (`admin.port` of its chart): `/metrics`, plain, since the `local`
/// environment runs with `tls.mode: insecure` (with a certificate the agent would serve it over
/// HTTPS on 9443 with a token, docs/metrics.md#secure-metrics, and this read would fail,
/// printing that events were not counted).
const ADMIN_PORT: u16 = 9090;
/// Deadline of every wait for the node's state (pod gone, pod up, collection Running).
const WAIT: Duration = Duration::from_mins(3);
/// Workload request: one per connection.
const REQUEST: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n";

struct Params {
    window: Duration,
    rounds: usize,
    inflight: usize,
    storms: Vec<u64>,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v}: not a number")),
        _ => Ok(default),
    }
}

impl Params {
    fn from_env() -> Result<Self> {
        let storms = match std::env::var("PACTO_AGENT_COST_STORMS") {
            Ok(v) => v
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim()
                        .parse()
                        .with_context(|| format!("PACTO_AGENT_COST_STORMS: {s}"))
                })
                .collect::<Result<Vec<u64>>>()?,
            Err(_) => vec![10_000, 50_000],
        };
        let params = Self {
            window: Duration::from_secs(env_or("PACTO_AGENT_COST_SECS", 20)?),
            rounds: env_or("PACTO_AGENT_COST_ROUNDS", 2)?,
            inflight: env_or("PACTO_AGENT_COST_INFLIGHT", 4)?,
            storms,
        };
        ensure!(
            params.rounds >= 1 && params.inflight >= 1 && !params.window.is_zero(),
            "PACTO_AGENT_COST_ROUNDS, _INFLIGHT and _SECS must be at least 1"
        );
        Ok(params)
    }
}

fn main() -> Result<()> {
    if !may_run() {
        return Ok(());
    }
    let params = Params::from_env()?;
    // The agent's kernel program is found, and timed, with bpftool: without it every wait for
    // collection Running would run out after minutes with no word of why.
    if Command::new("bpftool")
        .arg("version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        bail!(
            "bpftool is not installed (`scripts/install-deps.sh --arm64-smoke` or `apt-get install \
             bpftool`): the bench finds the agent's kernel program and reads its run time with it"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(params))
}

async fn run(params: Params) -> Result<()> {
    let work = tempfile::Builder::new()
        .prefix("pacto-agent-cost-")
        .tempdir()
        .context("creating the bench's directory")?;
    let started = Instant::now();
    let agent_image = build_agent_image(work.path())?;
    eprintln!(
        "agent_cost: release image {} ({:.1} MiB archive, binary {:.1} MiB stripped) in {:.0} s",
        agent_image.reference,
        mib(file_len(&agent_image.archive)),
        mib(agent_image.binary_bytes),
        started.elapsed().as_secs_f64()
    );
    let mut archives = image_archives()?;
    archives.push(agent_image.archive.clone());
    let started = Instant::now();
    let node = RealNode::start(RealNodeOptions {
        image_archives: archives,
        ..RealNodeOptions::default()
    })
    .await?;
    eprintln!(
        "agent_cost: node Ready in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let before = node.sysctls_before().clone();
    let run_dir = node.run_dir().to_owned();
    let measured = {
        let bench = Bench::new(&node, params)?;
        bench.run().await
    };
    let problems = node.down();
    let left = node::host_leftovers(Some(&run_dir));
    let after = node::read_sysctls();
    measured?;
    ensure!(problems.is_empty(), "teardown problems: {problems:#?}");
    ensure!(left.is_empty(), "left on the host after down: {left:#?}");
    ensure!(
        after == before,
        "sysctls not restored: before {before:?}, after {after:?}"
    );
    eprintln!("agent_cost: node down, host restored");
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0 / 1024.0
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Runs `cmd`, an error with its stderr when it fails.
fn check(cmd: &mut Command) -> Result<String> {
    let out = pacto_chart_tests::run(cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

struct AgentImage {
    reference: String,
    archive: PathBuf,
    binary_bytes: u64,
}

/// The agent's image from a release build, named as its chart defaults
/// (`ghcr.io/trianalab/pacto-operator-rs/node-agent:<appVersion>`), as a docker archive.
fn build_agent_image(dir: &Path) -> Result<AgentImage> {
    let root = repo_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    check(
        Command::new(cargo)
            .current_dir(&root)
            .args(["build", "--locked", "--release", "-p", "pacto-node-agent"])
            .stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit()),
    )?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let binary = target.join("release").join("pacto-node-agent");
    let chart = std::fs::read_to_string(root.join("charts/pacto-node-agent/Chart.yaml"))
        .context("reading the agent's Chart.yaml")?;
    let version = chart
        .lines()
        .find_map(|l| l.strip_prefix("appVersion:"))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .context("appVersion in charts/pacto-node-agent/Chart.yaml")?;
    let reference = format!("ghcr.io/trianalab/pacto-operator-rs/node-agent:{version}");
    let context = dir.join("context");
    check(
        Command::new(root.join("scripts/stage-service-image.sh"))
            .arg("--strip-debug")
            .arg(&binary)
            .arg(&context),
    )?;
    let binary_bytes = file_len(&context.join("rootfs/usr/local/bin/pacto-node-agent"));
    let buildah = |args: &[&str]| {
        let mut cmd = Command::new("buildah");
        cmd.arg("--root")
            .arg(dir.join("storage"))
            .arg("--runroot")
            .arg(dir.join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args);
        cmd
    };
    let containerfile = root.join("services/node-agent/Containerfile");
    let mut bud = buildah(&["bud", "--quiet", "--format", "docker", "--timestamp", "0"]);
    bud.arg("-f")
        .arg(&containerfile)
        .args(["-t", &reference])
        .arg(&context);
    check(&mut bud)?;
    let archive = dir.join("node-agent-release.tar");
    check(&mut buildah(&[
        "push",
        "--quiet",
        &reference,
        &format!("docker-archive:{}:{reference}", archive.display()),
    ]))?;
    Ok(AgentImage {
        reference,
        archive,
        binary_bytes,
    })
}

/// Whether the agent runs in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Agent {
    Absent,
    Running,
}

/// One measured window.
#[derive(Debug, Clone)]
struct Window {
    round: usize,
    agent: Agent,
    storm_target: u64,
    secs: f64,
    loadavg: String,
    requests: u64,
    errors: u64,
    p50_ms: f64,
    p99_ms: f64,
    storm_made: u64,
    agent_cpu_pct: Option<f64>,
    rss_mib: Option<f64>,
    hwm_mib: Option<f64>,
    events: Option<f64>,
    dropped: Option<f64>,
    bpf_ns_per_run: Option<f64>,
    bpf_runs: Option<u64>,
    bpf_cpu_pct: Option<f64>,
}

impl Window {
    fn req_per_s(&self) -> f64 {
        self.requests as f64 / self.secs
    }
    fn storm_per_s(&self) -> f64 {
        self.storm_made as f64 / self.secs
    }
    fn label(&self) -> String {
        condition_label(self.agent, self.storm_target)
    }
}

fn condition_label(agent: Agent, storm: u64) -> String {
    let who = match agent {
        Agent::Absent => "agent absent",
        Agent::Running => "agent running",
    };
    if storm == 0 {
        format!("{who}, no storm")
    } else {
        format!("{who}, storm {}k conn/s", storm / 1000)
    }
}

struct Bench<'a> {
    node: &'a RealNode,
    tools: Tools,
    params: Params,
    hz: f64,
    web: SocketAddr,
}

impl<'a> Bench<'a> {
    fn new(node: &'a RealNode, params: Params) -> Result<Self> {
        Ok(Self {
            node,
            tools: Tools::new()?,
            params,
            hz: clock_ticks(),
            web: SocketAddr::from(([127, 0, 0, 1], 0)),
        })
    }

    fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.node.control_plane().kubectl()?;
        cmd.args(args);
        check(&mut cmd)
    }

    fn helmfile(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.tools.command("helmfile");
        cmd.env("KUBECONFIG", self.node.control_plane().kubeconfig_path())
            .args([
                "-e",
                "local",
                "--state-values-set",
                "nodeAgent.enabled=true",
            ])
            .args(args);
        check(&mut cmd)
    }

    async fn run(mut self) -> Result<()> {
        self.install().await?;
        let stats = BpfStats::enable()?;
        let mut windows = Vec::new();
        let result = self.rounds(&mut windows).await;
        drop(stats);
        report(&windows, &self.params);
        result
    }

    /// The CRDs and the agent's chart from ./charts, the agent selected by [`SWITCH_LABEL`], and
    /// the workload pod.
    async fn install(&mut self) -> Result<()> {
        let started = Instant::now();
        self.helmfile(&["--selector", "name=pacto-crds", "sync"])?;
        self.helmfile(&["--selector", &format!("name={AGENT}"), "sync"])?;
        // The DaemonSet selects the switch label; `agent_running` below sets it.
        self.kubectl(&[
            "patch",
            "daemonset",
            "-n",
            AGENT_NS,
            AGENT,
            "--type",
            "merge",
            "-p",
            &format!(r#"{{"spec":{{"template":{{"spec":{{"nodeSelector":{{"{SWITCH_LABEL}":"run"}}}}}}}}}}"#),
        ])?;
        self.kubectl(&["create", "namespace", BENCH_NS])?;
        let pod = format!(
            r"apiVersion: v1
kind: Pod
metadata: {{name: {WEB}, namespace: {BENCH_NS}}}
spec:
  securityContext: {{runAsNonRoot: true, seccompProfile: {{type: RuntimeDefault}}}}
  containers:
    - name: app
      image: {SAMPLE_HTTP_IMAGE}
      imagePullPolicy: IfNotPresent
      securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}
      ports: [{{name: http, containerPort: 8080}}]
      readinessProbe:
        httpGet: {{path: /readyz, port: http}}
        periodSeconds: 5
"
        );
        let file = self.node.control_plane().dir().join("agent-cost-web.yaml");
        std::fs::write(&file, pod)?;
        self.kubectl(&["apply", "-f", &file.to_string_lossy()])?;
        self.kubectl(&[
            "wait",
            "-n",
            BENCH_NS,
            "--for=condition=Ready",
            &format!("pod/{WEB}"),
            "--timeout=180s",
        ])?;
        let ip = self.kubectl(&[
            "get",
            "pod",
            "-n",
            BENCH_NS,
            WEB,
            "-o",
            "jsonpath={.status.podIP}",
        ])?;
        self.web = SocketAddr::new(
            ip.trim()
                .parse()
                .with_context(|| format!("pod IP {ip:?}"))?,
            8080,
        );
        let agent = self.agent_running().await?;
        eprintln!(
            "agent_cost: CRDs, agent chart and workload pod {} installed in {:.0} s; agent pid {}",
            self.web,
            started.elapsed().as_secs_f64(),
            agent.pid
        );
        Ok(())
    }

    /// Labels the node and waits until the agent's collection is Running.
    async fn agent_running(&self) -> Result<AgentProc> {
        self.kubectl(&[
            "label",
            "node",
            NODE,
            &format!("{SWITCH_LABEL}=run"),
            "--overwrite",
        ])?;
        let started = Instant::now();
        let found = wait_for(WAIT, Duration::from_millis(500), || async {
            let ip = self
                .kubectl(&[
                    "get",
                    "pods",
                    "-n",
                    AGENT_NS,
                    "-l",
                    &format!("app.kubernetes.io/name={AGENT}"),
                    "--field-selector",
                    "status.phase=Running",
                    "-o",
                    "jsonpath={.items[*].status.podIP}",
                ])
                .ok()?;
            let ip: std::net::IpAddr = ip.split_whitespace().next()?.parse().ok()?;
            let pids = agent_pids();
            let [pid] = pids.as_slice() else {
                return None;
            };
            // Collection Running: its program is attached (loaded by its process).
            if bpf_programs(&[*pid]).is_empty() {
                return None;
            }
            Some(AgentProc {
                pid: *pid,
                metrics: SocketAddr::new(ip, ADMIN_PORT),
            })
        })
        .await;
        let Some(agent) = found else {
            let logs = self
                .kubectl(&[
                    "logs",
                    "-n",
                    AGENT_NS,
                    &format!("daemonset/{AGENT}"),
                    "--tail=30",
                ])
                .unwrap_or_default();
            bail!("the agent did not reach collection Running in {WAIT:?}:\n{logs}");
        };
        let metrics = match scrape(agent.metrics).await {
            Ok(m) => format!(
                "its /metrics read, pacto_node_agent_collection_running {}",
                m.get("pacto_node_agent_collection_running")
                    .map_or_else(|| "absent".to_owned(), f64::to_string)
            ),
            Err(e) => format!("its /metrics unreadable, events not counted: {e:#}"),
        };
        eprintln!(
            "agent_cost: agent running (pid {}, program attached) {:.1} s after the label; {metrics}",
            agent.pid,
            started.elapsed().as_secs_f64()
        );
        Ok(agent)
    }

    /// Removes the label and waits until no agent pod or process is left.
    async fn agent_absent(&self) -> Result<()> {
        self.kubectl(&["label", "node", NODE, &format!("{SWITCH_LABEL}-")])?;
        let started = Instant::now();
        let gone = wait_for(WAIT, Duration::from_millis(500), || async {
            let pods = self
                .kubectl(&["get", "pods", "-n", AGENT_NS, "-o", "name"])
                .ok()?;
            (pods.trim().is_empty() && agent_pids().is_empty()).then_some(())
        })
        .await;
        ensure!(
            gone.is_some(),
            "the agent pod or process still there {WAIT:?} after the label was removed"
        );
        eprintln!(
            "agent_cost: agent absent (pod and process gone) {:.1} s after the label was removed",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    async fn rounds(&self, windows: &mut Vec<Window>) -> Result<()> {
        let mut storms = vec![0];
        storms.extend(&self.params.storms);
        for round in 1..=self.params.rounds {
            let order = if round % 2 == 1 {
                [Agent::Absent, Agent::Running]
            } else {
                [Agent::Running, Agent::Absent]
            };
            for agent in order {
                let proc = match agent {
                    Agent::Absent => {
                        self.agent_absent().await?;
                        None
                    }
                    Agent::Running => Some(self.agent_running().await?),
                };
                for &storm in &storms {
                    let w = self.window(round, agent, proc.as_ref(), storm).await?;
                    print_window(&w);
                    windows.push(w);
                }
            }
        }
        Ok(())
    }

    async fn window(
        &self,
        round: usize,
        agent: Agent,
        proc: Option<&AgentProc>,
        storm_target: u64,
    ) -> Result<Window> {
        let loadavg = std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let usage0 = proc.map(|p| usage(p.pid)).transpose()?;
        let pids: Vec<u32> = proc.map(|p| p.pid).into_iter().collect();
        let metrics0 = match proc {
            Some(p) => scrape(p.metrics).await.ok(),
            None => None,
        };
        let bpf0 = bpf_programs(&pids);
        let started = Instant::now();
        let storm = (storm_target > 0).then(|| Storm::start(storm_target));
        let load = workload(self.web, self.params.inflight, self.params.window).await;
        let storm_made = storm.map_or(Ok(0), Storm::stop)?;
        let secs = started.elapsed().as_secs_f64();
        let usage1 = proc.map(|p| usage(p.pid)).transpose()?;
        let metrics1 = match proc {
            Some(p) => scrape(p.metrics).await.ok(),
            None => None,
        };
        let bpf1 = bpf_programs(&pids);
        let load = load?;
        let metric = |name: &str| -> Option<f64> {
            let (a, b) = (metrics0.as_ref()?, metrics1.as_ref()?);
            Some(b.get(name)? - a.get(name).copied().unwrap_or(0.0))
        };
        let (bpf_ns, bpf_runs) = bpf_delta(&bpf0, &bpf1);
        let mut lat = load.latencies_us;
        lat.sort_unstable();
        Ok(Window {
            round,
            agent,
            storm_target,
            secs,
            loadavg,
            requests: load.ok,
            errors: load.errors,
            p50_ms: percentile(&lat, 0.50) / 1000.0,
            p99_ms: percentile(&lat, 0.99) / 1000.0,
            storm_made,
            agent_cpu_pct: usage0
                .zip(usage1)
                .map(|(a, b)| (b.ticks.saturating_sub(a.ticks)) as f64 / self.hz / secs * 100.0),
            rss_mib: usage1.map(|u| u.rss_kib as f64 / 1024.0),
            hwm_mib: usage1.map(|u| u.hwm_kib as f64 / 1024.0),
            events: metric("pacto_node_agent_events_total"),
            dropped: metric("pacto_node_agent_events_dropped_total"),
            bpf_ns_per_run: (bpf_runs > 0).then(|| bpf_ns as f64 / bpf_runs as f64),
            bpf_runs: (bpf_runs > 0).then_some(bpf_runs),
            bpf_cpu_pct: (bpf_runs > 0).then(|| bpf_ns as f64 / 1e9 / secs * 100.0),
        })
    }
}

/// The agent process and where its metrics are served.
struct AgentProc {
    pid: u32,
    metrics: SocketAddr,
}

/// The unlabelled samples of a Prometheus text page, by name.
async fn scrape(addr: SocketAddr) -> Result<BTreeMap<String, f64>> {
    let body = tokio::time::timeout(Duration::from_secs(5), async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut body = String::new();
        s.read_to_string(&mut body).await?;
        anyhow::Ok(body)
    })
    .await
    .with_context(|| format!("GET {addr}/metrics: no answer in 5 s"))??;
    ensure!(
        body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200"),
        "GET {addr}/metrics: {}",
        body.lines().next().unwrap_or_default()
    );
    Ok(body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            (!name.contains('{')).then(|| Some((name.to_owned(), value.trim().parse().ok()?)))?
        })
        .collect())
}

/// `run_time_ns` and `run_cnt` of the loaded `on_state` programs held by one of `pids` (the
/// agent's; none when `pids` is empty), by id. A program without bpftool's `pids` field counts
/// as held.
fn bpf_programs(pids: &[u32]) -> BTreeMap<u64, (u64, u64)> {
    if pids.is_empty() {
        return BTreeMap::new();
    }
    let Ok(out) = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
    else {
        return BTreeMap::new();
    };
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == "on_state")
        .filter(|p| {
            p["pids"].as_array().is_none_or(|held| {
                held.iter().any(|h| {
                    h["pid"]
                        .as_u64()
                        .is_some_and(|pid| pids.iter().any(|p| u64::from(*p) == pid))
                })
            })
        })
        .filter_map(|p| {
            Some((
                p["id"].as_u64()?,
                (
                    p["run_time_ns"].as_u64().unwrap_or(0),
                    p["run_cnt"].as_u64().unwrap_or(0),
                ),
            ))
        })
        .collect()
}

/// Run time and runs of the programs present at both reads.
fn bpf_delta(before: &BTreeMap<u64, (u64, u64)>, after: &BTreeMap<u64, (u64, u64)>) -> (u64, u64) {
    after
        .iter()
        .filter_map(|(id, (ns, cnt))| {
            let (ns0, cnt0) = before.get(id)?;
            Some((ns.saturating_sub(*ns0), cnt.saturating_sub(*cnt0)))
        })
        .fold((0, 0), |(a, b), (ns, cnt)| (a + ns, b + cnt))
}

/// `kernel.bpf_stats_enabled=1` while it lives; the previous value written back on drop.
struct BpfStats {
    before: String,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStats {
    fn enable() -> Result<Self> {
        let before = std::fs::read_to_string(BPF_STATS)
            .context("reading kernel.bpf_stats_enabled")?
            .trim()
            .to_owned();
        std::fs::write(BPF_STATS, "1").context("setting kernel.bpf_stats_enabled=1")?;
        eprintln!("agent_cost: kernel.bpf_stats_enabled {before} -> 1 for the run");
        Ok(Self { before })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        match std::fs::write(BPF_STATS, &self.before) {
            Ok(()) => eprintln!(
                "agent_cost: kernel.bpf_stats_enabled back to {}",
                self.before
            ),
            Err(e) => eprintln!(
                "agent_cost: could not restore kernel.bpf_stats_enabled={}: {e}",
                self.before
            ),
        }
    }
}

struct Load {
    ok: u64,
    errors: u64,
    latencies_us: Vec<u32>,
}

/// `inflight` loops, each a new connection per `GET /healthz` to `addr` until `duration` has
/// passed; the client resets the connection after the answer (SO_LINGER 0), so no TIME_WAIT
/// piles up on either side.
async fn workload(addr: SocketAddr, inflight: usize, duration: Duration) -> Result<Load> {
    let deadline = Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..inflight {
        tasks.spawn(async move {
            let mut load = Load {
                ok: 0,
                errors: 0,
                latencies_us: Vec::new(),
            };
            let mut buf = Vec::with_capacity(512);
            while Instant::now() < deadline {
                let t0 = Instant::now();
                match one_request(addr, &mut buf).await {
                    Ok(()) => {
                        load.ok += 1;
                        load.latencies_us
                            .push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                    }
                    Err(_) => load.errors += 1,
                }
            }
            load
        });
    }
    let mut all = Load {
        ok: 0,
        errors: 0,
        latencies_us: Vec::new(),
    };
    while let Some(part) = tasks.join_next().await {
        let part = part.context("a workload task panicked")?;
        all.ok += part.ok;
        all.errors += part.errors;
        all.latencies_us.extend(part.latencies_us);
    }
    ensure!(
        all.ok > 0,
        "no request to {addr} succeeded ({} errors)",
        all.errors
    );
    Ok(all)
}

async fn one_request(addr: SocketAddr, buf: &mut Vec<u8>) -> Result<()> {
    let mut s = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await??;
    s.set_nodelay(true)?;
    s.write_all(REQUEST).await?;
    buf.clear();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(buf)).await??;
    s.set_zero_linger()?;
    ensure!(buf.starts_with(b"HTTP/1.") && buf.get(9..12) == Some(b"200"));
    Ok(())
}

fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)])
}

/// A connection storm: two threads, each a current-thread runtime with 16 connecting loops
/// paced to half of the target rate and one accepting loop on its own loopback listener; every
/// connection is reset by the client (SO_LINGER 0) once accepted.
struct Storm {
    stop: Arc<AtomicBool>,
    made: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Result<()>>>,
}

const STORM_THREADS: u64 = 2;
const STORM_LOOPS: u64 = 16;

impl Storm {
    fn start(rate: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let made = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for _ in 0..STORM_THREADS {
            let (stop, made) = (stop.clone(), made.clone());
            threads.push(std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(storm_thread(rate / STORM_THREADS, stop, made))
            }));
        }
        Self {
            stop,
            made,
            threads,
        }
    }

    /// Stops the storm; the connections it made.
    fn stop(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join()
                .map_err(|_| anyhow::anyhow!("a storm thread panicked"))??;
        }
        Ok(self.made.load(Ordering::Relaxed))
    }
}

async fn storm_thread(rate: u64, stop: Arc<AtomicBool>, made: Arc<AtomicU64>) -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let accepting = tokio::spawn(async move {
        loop {
            if let Ok((s, _)) = listener.accept().await {
                drop(s);
            }
        }
    });
    let interval = Duration::from_secs_f64(STORM_LOOPS as f64 / rate.max(1) as f64);
    let mut loops = tokio::task::JoinSet::new();
    for i in 0..STORM_LOOPS {
        let (stop, made) = (stop.clone(), made.clone());
        loops.spawn(async move {
            let start =
                tokio::time::Instant::now() + interval.mul_f64(i as f64 / STORM_LOOPS as f64);
            let mut n = 0_u32;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep_until(start + interval * n).await;
                n += 1;
                if let Ok(s) = tokio::net::TcpStream::connect(addr).await {
                    let _ = s.set_zero_linger();
                    made.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while loops.join_next().await.is_some() {}
    accepting.abort();
    Ok(())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn print_window(w: &Window) {
    eprintln!(
        "agent_cost: round {} {}: {:.1} s, load {} | workload {:.0} req/s ({} errors) p50 {:.2} ms p99 {:.2} ms | storm {:.0} conn/s | agent CPU {}% RSS {} MiB HWM {} MiB | events {} for {} connections, dropped {} | on_state {} ns x {} runs = {}% of one core",
        w.round,
        w.label(),
        w.secs,
        w.loadavg,
        w.req_per_s(),
        w.errors,
        w.p50_ms,
        w.p99_ms,
        w.storm_per_s(),
        opt(w.agent_cpu_pct, 2),
        opt(w.rss_mib, 1),
        opt(w.hwm_mib, 1),
        opt(w.events, 0),
        w.requests + w.errors + w.storm_made,
        opt(w.dropped, 0),
        opt(w.bpf_ns_per_run, 0),
        w.bpf_runs.map_or_else(|| "-".to_owned(), |r| r.to_string()),
        opt(w.bpf_cpu_pct, 2),
    );
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    })
}

/// The medians per condition as a Markdown table, then the goals.
fn report(windows: &[Window], params: &Params) {
    // By storm, then absent before running.
    let conditions: std::collections::BTreeSet<(u64, Agent)> =
        windows.iter().map(|w| (w.storm_target, w.agent)).collect();
    let of = |a: Agent, s: u64| -> Vec<&Window> {
        windows
            .iter()
            .filter(|w| w.agent == a && w.storm_target == s)
            .collect()
    };
    let med = |ws: &[&Window], f: &dyn Fn(&Window) -> Option<f64>| {
        median(ws.iter().filter_map(|w| f(w)).collect())
    };
    println!(
        "\nagent_cost: medians of {} round(s) of {} s windows, {} workload connections in flight (one request per connection), agent image from a release build",
        params.rounds,
        params.window.as_secs(),
        params.inflight
    );
    println!(
        "| condition | workload req/s | loss vs absent, same storm | p50 ms | p99 ms | storm conn/s reached | agent CPU % of one core | VmRSS / VmHWM MiB | events per connection | dropped | on_state ns/run | on_state % of one core | load average |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut losses = Vec::new();
    for &(storm, agent) in &conditions {
        let ws = of(agent, storm);
        let base = of(Agent::Absent, storm);
        let rps = med(&ws, &|w| Some(w.req_per_s()));
        let base_rps = med(&base, &|w| Some(w.req_per_s()));
        let loss = match (agent, rps, base_rps) {
            (Agent::Running, Some(r), Some(b)) if b > 0.0 => Some((b - r) / b * 100.0),
            _ => None,
        };
        if let Some(l) = loss {
            losses.push((storm, l));
        }
        let per_conn = med(&ws, &|w| {
            let conns = (w.requests + w.errors + w.storm_made) as f64;
            w.events.map(|e| e / conns)
        });
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |",
            condition_label(agent, storm),
            opt(rps, 0),
            loss.map_or_else(|| "-".to_owned(), |l| format!("{l:+.1}%")),
            opt(med(&ws, &|w| Some(w.p50_ms)), 2),
            opt(med(&ws, &|w| Some(w.p99_ms)), 2),
            if storm == 0 {
                "-".to_owned()
            } else {
                opt(med(&ws, &|w| Some(w.storm_per_s())), 0)
            },
            opt(med(&ws, &|w| w.agent_cpu_pct), 2),
            opt(med(&ws, &|w| w.rss_mib), 1),
            opt(med(&ws, &|w| w.hwm_mib), 1),
            opt(per_conn, 2),
            ws.iter()
                .map(|w| opt(w.dropped, 0))
                .collect::<Vec<_>>()
                .join(", "),
            opt(med(&ws, &|w| w.bpf_ns_per_run), 0),
            opt(med(&ws, &|w| w.bpf_cpu_pct), 2),
            ws.iter()
                .map(|w| w.loadavg.split(' ').next().unwrap_or("?").to_owned())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    let hwm = windows
        .iter()
        .filter_map(|w| w.hwm_mib)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let lost_below_50k: f64 = windows
        .iter()
        .filter(|w| w.storm_per_s() < 50_000.0)
        .filter_map(|w| w.dropped)
        .sum();
    println!(
        "agent_cost: goal throughput loss <= 1%: {}",
        losses
            .iter()
            .map(|(s, l)| format!("{l:+.1}% ({})", condition_label(Agent::Running, *s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "agent_cost: goal RSS <= 32 MiB: VmHWM {} MiB over the run",
        opt(hwm, 1)
    );
    println!(
        "agent_cost: goal 0 events lost below 50k conn/s: {lost_below_50k:.0} dropped in the windows below 50k conn/s"
    );
}
