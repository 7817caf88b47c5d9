//! Node-agent evidence in the verdict on the real node (issue 16, the observer side): a real pod's
//! interfaces qualified and decided by the agent's view (`k8s-observer+ebpf`), the status flip
//! when a listener closes (`INTERFACE_ABSENT` after the window; p50/p99 printed) with the reports
//! streamed to every observer replica, the same flip through the `NodeRuntimeObservation` when
//! the stream is refused, `EVIDENCE_STALE` when the agent stops and recovery when it returns, and
//! `COLLECTION_FAILED` (checked inside the collection-Failed scenario of `agent`). Rules:
//! docs/design/observation.md#node-evidence.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pacto_deployed::Deployed;
use serde_json::Value;
use tokio::sync::mpsc;

use super::stream::{self, OBSERVER_REPLICAS};
use super::{
    AGENT, AGENT_NS, NODE, PUBLISH_INTERVAL, PUBLISHED, READY, STALE_AFTER, WORKLOAD_NS,
    agent_pod_states,
};

/// The workload, its Service and its Pacto.
pub const NAME: &str = "ebpf-web";
/// Runs of the listener benchmark.
const RUNS: usize = 20;
/// How long one status flip may take before the run fails: generous (the agent's next publish is
/// at most 5 s away in the tier even without an early report); the figures are printed, not
/// asserted.
const FLIP: Duration = Duration::from_mins(1);
/// The image the agent stop scenario gives the DaemonSet (with `imagePullPolicy: Never`): no
/// node has it, so the DaemonSet's pod on `pacto-node` never starts while the DaemonSet still
/// selects the node.
const NO_IMAGE: &str = "localhost/pacto-no-such-node-agent:0";
/// The stabilization window of the tier (`controller.stabilizationWindow`, see `WINDOW` in
/// deployed.rs).
const WINDOW: Duration = Duration::from_secs(20);
/// Runs of the listener flip while the report stream is refused.
const FALLBACK_RUNS: usize = 3;
/// How long one flip may take while the stream is refused: the agent writes the observation at
/// least every publish interval (and early when a listener changes); the observer's watch and
/// the status-writer's reconcile follow.
const FALLBACK_FLIP: Duration = Duration::from_secs(15);
/// busybox `httpd` on 8080 (behind the Service port `http`) and on 9000 (a port the Service does
/// not have), the main process `sleep`: closing either listener leaves the pod Running and Ready
/// (no readiness probe), so only the node agent can see it. The one on 9000 runs as
/// `busybox httpd`, so `killall httpd` (the image has no `pkill`) closes only the one on 8080.
fn workload() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {NAME}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {NAME}}}}}
  template:
    metadata: {{labels: {{app: {NAME}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: localhost/busybox:1.35
          imagePullPolicy: IfNotPresent
          command: ["sh", "-c", "httpd -p 8080 -h /tmp && busybox httpd -p 9000 -h /tmp && exec sleep 1000000"]
          ports:
            - {{name: http, containerPort: 8080}}
            - {{name: admin, containerPort: 9000}}
---
apiVersion: v1
kind: Service
metadata: {{name: {NAME}}}
spec:
  selector: {{app: {NAME}}}
  ports:
    - {{name: http, port: 80, targetPort: 8080}}
"#
    )
}

/// Two interfaces: `http` bound to the Service port `http` (Kubernetes finds Ready endpoints; node
/// evidence qualifies them) and `admin` bound to port 9000, which the Service does not have
/// (Kubernetes alone reads EVIDENCE_INSUFFICIENT; node evidence decides it).
fn pacto(check_interval: u32) -> String {
    format!(
        r#"apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {{name: {NAME}}}
spec:
  checkIntervalSeconds: {check_interval}
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: {NAME}
        version: 1.0.0
      interfaces:
        - name: http
          type: openapi
          ref: interfaces/openapi.yaml
        - name: admin
          type: openapi
          ref: interfaces/admin.yaml
  target:
    serviceName: {NAME}
    interfaceBindings:
      - {{interface: http, servicePort: http}}
      - {{interface: admin, servicePort: 9000}}
"#
    )
}

fn get_pacto(d: &Deployed) -> Result<Value, String> {
    d.kubectl_json(&["get", "pacto", "-n", WORKLOAD_NS, NAME])
        .map_err(|e| e.to_string())
}

/// The finding about `subject`, if any.
pub fn finding<'a>(pacto: &'a Value, subject: &str) -> Option<&'a Value> {
    pacto["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["subject"] == subject)
}

/// The collector of an observation the agent's view decided or qualified.
pub const WITH_EBPF: &str = "k8s-observer+ebpf";
/// The collector of an observation the Kubernetes API alone made, also when the agent's data
/// could not be used (stale, failed, partial): that data decided nothing.
pub const KUBERNETES: &str = "k8s-observer";

/// Whether the Pacto has the finding `code` about `subject`, with `collector`.
pub fn has(pacto: &Value, subject: &str, code: &str, collector: &str) -> bool {
    finding(pacto, subject)
        .is_some_and(|f| f["code"] == code && f["evidenceRefs"][0]["collector"] == collector)
}

fn summary(pacto: &Value) -> String {
    let findings: Vec<String> = pacto["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{} {} ({}): {}",
                f["code"].as_str().unwrap_or("?"),
                f["subject"].as_str().unwrap_or("?"),
                f["evidenceRefs"][0]["collector"].as_str().unwrap_or("-"),
                f["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    format!(
        "{} {findings:?}",
        pacto["status"]["contractStatus"].as_str().unwrap_or("-")
    )
}

/// Waits until the Pacto satisfies `check`; the error carries its last status and the
/// observer's node-agent log lines.
pub async fn wait_pacto(
    d: &Deployed,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> bool,
) -> Result<Value> {
    d.wait(what, timeout, |d| {
        let p = get_pacto(d)?;
        if check(&p) { Ok(p) } else { Err(summary(&p)) }
    })
    .await
    .map_err(|e| {
        let logs = d
            .kubectl(&[
                "logs",
                "-n",
                super::super::OPERATOR_NAMESPACE,
                "deployment/pacto-observer",
                "--tail=200",
            ])
            .unwrap_or_default();
        let lines: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("node-agent") && !l.contains("DEBUG"))
            .collect();
        e.context(format!(
            "the observer's node-agent log lines:\n{}",
            lines[lines.len().saturating_sub(20)..].join("\n")
        ))
    })
}

fn compliant_without_findings(p: &Value) -> bool {
    p["status"]["contractStatus"] == "Compliant"
        && p["status"]["findings"].as_array().is_none_or(Vec::is_empty)
}

/// Issue 16, "an interface Found with `collector: k8s-observer+ebpf`": a real pod LISTENing on
/// 8080 and 9000; its Pacto is Compliant with both interfaces evaluated and no finding. `admin`
/// is bound to a port the Service does not have: only the node agent's view of the pod decided
/// it (Kubernetes alone reads EVIDENCE_INSUFFICIENT), so the Found is `k8s-observer+ebpf`; the
/// listener scenario shows that collector on `http`'s findings.
pub async fn interfaces_found_by_node_evidence(d: &Deployed) -> Result<()> {
    d.apply(WORKLOAD_NS, &workload())?;
    d.wait_available(WORKLOAD_NS, NAME, READY).await?;
    let available = Instant::now();
    d.apply(WORKLOAD_NS, &pacto(300))?;
    let found = wait_pacto(
        d,
        "ebpf-web Compliant with no finding",
        PUBLISHED,
        compliant_without_findings,
    )
    .await?;
    eprintln!(
        "deployed: node evidence: ebpf-web Compliant (http qualified, admin decided by the agent's view) {:.1} s after the Deployment was Available",
        available.elapsed().as_secs_f64()
    );
    let coverage = &found["status"]["evaluationCoverage"];
    ensure!(
        coverage["evaluated"] == 2 && coverage["required"] == 2,
        "evaluationCoverage {coverage}: {:#}",
        found["status"]
    );
    let runtime = found["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "RuntimeObserved")
        .cloned()
        .unwrap_or_default();
    ensure!(
        runtime["status"] == "True" && runtime["reason"] == "Found",
        "RuntimeObserved {runtime}"
    );
    Ok(())
}

/// A `kubectl get pacto ebpf-web --watch` printing the contract status of every change, read
/// by a thread that stamps each line with the instant it arrived. Counts the transitions it saw
/// (a status different from the one before).
struct StatusWatch {
    child: std::process::Child,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    current: String,
    transitions: Vec<String>,
}

impl StatusWatch {
    fn start(d: &Deployed) -> Result<Self> {
        let mut cmd = d.node().control_plane().kubectl()?;
        cmd.args([
            "get",
            "pacto",
            "-n",
            WORKLOAD_NS,
            NAME,
            "--watch",
            "-o",
            "jsonpath={.status.contractStatus}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        let mut child = cmd.spawn().context("starting kubectl get --watch")?;
        let stdout = child.stdout.take().context("kubectl stdout")?;
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line.trim().to_owned())).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            lines,
            current: String::new(),
            transitions: Vec::new(),
        })
    }

    fn set(&mut self, status: String) {
        if !self.current.is_empty() && status != self.current {
            self.transitions
                .push(format!("{} -> {status}", self.current));
        }
        self.current = status;
    }

    /// Waits for a status for which `want` holds (the current one included) up to `timeout`;
    /// returns when it arrived (now, for the current one).
    async fn until_within(
        &mut self,
        what: &str,
        timeout: Duration,
        want: impl Fn(&str) -> bool,
    ) -> Result<Instant> {
        while let Ok(line) = self.lines.try_recv() {
            self.set(line.1);
        }
        if want(&self.current) {
            return Ok(Instant::now());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some((at, status))) => {
                    self.set(status);
                    if want(&self.current) {
                        return Ok(at);
                    }
                }
                Ok(None) => bail!("{what}: the status watch ended (last {})", self.current),
                Err(_) => bail!("{what}: not within {timeout:?}; last {}", self.current),
            }
        }
    }

    /// [`StatusWatch::until_within`] with [`FLIP`].
    async fn until(&mut self, what: &str, want: impl Fn(&str) -> bool) -> Result<Instant> {
        self.until_within(what, FLIP, want).await
    }

    /// The transitions seen so far (those still unread included).
    fn transitions(&mut self) -> Vec<String> {
        while let Ok(line) = self.lines.try_recv() {
            self.set(line.1);
        }
        self.transitions.clone()
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `q`-quantile (nearest rank) of sorted `values`.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn exec(d: &Deployed, pod: &str, command: &[&str]) -> Result<()> {
    let mut args = vec!["exec", "-n", WORKLOAD_NS, pod, "--"];
    args.extend(command);
    d.kubectl(&args)?;
    Ok(())
}

/// The one pod of the `ebpf-web` Deployment.
fn workload_pod(d: &Deployed) -> Result<String> {
    let pods = d.kubectl(&[
        "get",
        "pods",
        "-n",
        WORKLOAD_NS,
        "-l",
        &format!("app={NAME}"),
        "--field-selector=status.phase=Running",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])?;
    match pods.split_whitespace().collect::<Vec<_>>()[..] {
        [pod] => Ok(pod.to_owned()),
        _ => bail!("ebpf-web pods: {pods:?}"),
    }
}

/// The finding about `interface/http` of a Pacto whose `http` listener is closed: `code`, the
/// interface as subject, collector `k8s-observer+ebpf`, and no finding about `admin` (its
/// listener stays open).
fn expect_http_finding(pacto: &Value, code: &str) -> Result<()> {
    let http = finding(pacto, "interface/http")
        .with_context(|| format!("no finding about interface/http: {}", summary(pacto)))?;
    ensure!(
        http["code"] == code && http["evidenceRefs"][0]["collector"] == WITH_EBPF,
        "want {code} on interface/http from k8s-observer+ebpf: {}",
        summary(pacto)
    );
    ensure!(
        finding(pacto, "interface/admin").is_none(),
        "admin's listener is open: {}",
        summary(pacto)
    );
    Ok(())
}

/// Issue 16's benchmark on the real node, printed, not asserted as a time. First the closed
/// listener confirmed: the listener on 8080 of the Ready pod closed (`kubectl exec … killall
/// httpd`) ⇒ `Unknown` with `EVIDENCE_INSUFFICIENT` inside the stabilization window, then
/// `NonCompliant` with exactly `INTERFACE_ABSENT` on `interface/http` from `k8s-observer+ebpf`
/// after it; httpd started again ⇒ `Compliant`. Then [`RUNS`] quick runs: close ⇒ the Pacto leaves
/// `Compliant` (`EVIDENCE_INSUFFICIENT` on `interface/http`, `k8s-observer+ebpf`), open ⇒
/// `Compliant`; each flip must happen within [`FLIP`]. Timed from the start of the `kubectl exec`
/// (its own duration is printed) to the status change on a `kubectl get --watch`, which also
/// counts every transition: exactly the expected ones (no flapping between the observer
/// replicas the status-writer balances over). The reports reach the observer on the agent's
/// stream: on every replica the stream is open (`pacto_observer_node_agents_connected` 1), the
/// accepted reports (`pacto_observer_node_reports_total{result="accepted"}`) grow during the
/// runs, and its log says `node-agent report stream opened`.
pub async fn listener_closed_flips_the_status(d: &Deployed) -> Result<()> {
    let pod = workload_pod(d)?;
    let before = stream::wait_streams_open(d, OBSERVER_REPLICAS).await?;
    let mut watch = StatusWatch::start(d)?;
    let bench = Instant::now();

    // The closed listener confirmed after the window.
    watch
        .until("Compliant before the close", |s| s == "Compliant")
        .await?;
    let killed = Instant::now();
    exec(d, &pod, &["killall", "httpd"])?;
    let left = watch
        .until("the status leaves Compliant", |s| s != "Compliant")
        .await?;
    let windowed = get_pacto(d).map_err(anyhow::Error::msg)?;
    ensure!(
        windowed["status"]["contractStatus"] == "Unknown",
        "inside the window: {}",
        summary(&windowed)
    );
    expect_http_finding(&windowed, "EVIDENCE_INSUFFICIENT")?;
    let absent_at = watch
        .until_within("NonCompliant after the window", WINDOW + FLIP, |s| {
            s == "NonCompliant"
        })
        .await?;
    let absent = get_pacto(d).map_err(anyhow::Error::msg)?;
    expect_http_finding(&absent, "INTERFACE_ABSENT")?;
    let codes: Vec<&str> = absent["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str())
        .collect();
    ensure!(codes == ["INTERFACE_ABSENT"], "{}", summary(&absent));
    eprintln!(
        "deployed: node evidence: listener closed -> Unknown {:.2} s, NonCompliant {:.1} s (window {} s): {}",
        left.duration_since(killed).as_secs_f64(),
        absent_at.duration_since(killed).as_secs_f64(),
        WINDOW.as_secs(),
        summary(&absent)
    );
    exec(d, &pod, &["httpd", "-p", "8080", "-h", "/tmp"])?;
    watch
        .until("Compliant after the confirmed absence", |s| {
            s == "Compliant"
        })
        .await?;
    // Compliant -> Unknown -> NonCompliant -> Compliant.
    let confirmed = 3;

    let mut down = Vec::new();
    let mut up = Vec::new();
    let mut execs = Vec::new();
    for run in 1..=RUNS {
        watch
            .until(&format!("run {run}: Compliant before the close"), |s| {
                s == "Compliant"
            })
            .await?;
        let killed = Instant::now();
        exec(d, &pod, &["killall", "httpd"])?;
        execs.push(killed.elapsed().as_secs_f64());
        let flipped = watch
            .until(&format!("run {run}: the status leaves Compliant"), |s| {
                s != "Compliant"
            })
            .await?;
        down.push(flipped.duration_since(killed).as_secs_f64());
        let p = get_pacto(d).map_err(anyhow::Error::msg)?;
        expect_http_finding(&p, "EVIDENCE_INSUFFICIENT")
            .with_context(|| format!("run {run}, listener closed"))?;
        let started = Instant::now();
        exec(d, &pod, &["httpd", "-p", "8080", "-h", "/tmp"])?;
        let back = watch
            .until(&format!("run {run}: Compliant again"), |s| s == "Compliant")
            .await?;
        up.push(back.duration_since(started).as_secs_f64());
    }
    let transitions = watch.transitions();
    eprintln!(
        "deployed: node evidence: status transitions over the confirmed close and {RUNS} runs: {} (expected {})",
        transitions.len(),
        confirmed + 2 * RUNS
    );
    ensure!(
        transitions.len() == confirmed + 2 * RUNS,
        "a status flapped (the status-writer balances over {OBSERVER_REPLICAS} observer replicas): {transitions:?}"
    );

    // The reports reached every observer replica on the agent's stream.
    let after = stream::observer_replicas(d)?;
    for r in &after {
        let was = before.iter().find(|b| b.pod == r.pod);
        let grew = r.accepted.saturating_sub(was.map_or(0, |b| b.accepted));
        eprintln!(
            "deployed: node evidence: observer {}: {grew} reports accepted during the runs ({} in all), {} refused, stream open {}",
            r.pod, r.accepted, r.refused, r.connected
        );
        ensure!(
            was.is_some() && r.connected == 1 && grew > 0,
            "observer {} did not receive the agent's reports during the runs (before {was:?}, after {r:?})",
            r.pod
        );
    }
    ensure!(
        after.len() == OBSERVER_REPLICAS,
        "observer replicas {after:?}"
    );
    stream::expect_stream_logged(d)?;

    // How the agent saw its stream meanwhile: its report stream lines and how many acks.
    let since = format!("--since={}s", bench.elapsed().as_secs() + 1);
    let agent_log = d
        .kubectl(&[
            "logs",
            "-n",
            AGENT_NS,
            &format!("daemonset/{AGENT}"),
            &since,
        ])
        .unwrap_or_default();
    let acks = agent_log
        .lines()
        .filter(|l| l.contains("report acknowledged"))
        .count();
    eprintln!(
        "deployed: node evidence: the agent's reports acknowledged during the runs: {acks} in {:.0} s",
        bench.elapsed().as_secs_f64()
    );
    for line in agent_log
        .lines()
        .filter(|l| l.contains("node-agent report") || l.contains("node-agent reports"))
    {
        eprintln!("deployed: node evidence: agent: {line}");
    }
    for (what, values) in [
        ("listener closed -> status leaves Compliant", &mut down),
        ("listener open again -> Compliant", &mut up),
        ("kubectl exec itself", &mut execs),
    ] {
        values.sort_by(f64::total_cmp);
        eprintln!(
            "deployed: node evidence: {what} over {RUNS} runs: p50 {:.2} s, p99 {:.2} s, min {:.2} s, max {:.2} s",
            quantile(values, 0.5),
            quantile(values, 0.99),
            values[0],
            values[values.len() - 1]
        );
    }
    Ok(())
}

/// The fallback when the stream is refused: the observer synced with a token audience the
/// agent's token does not carry (`nodeAgent.tokenAudience`, flag `--node-agent-token-audience`;
/// the `local` environment is plaintext, where the certificate allow-list
/// `--node-agent-identities` admits everyone, so the TokenReview is what refuses), so every
/// replica refuses the agent's stream (`result="refused"` grows, no stream open, no report
/// accepted). The verdict still follows the agent's view, through the `NodeRuntimeObservation`:
/// [`FALLBACK_RUNS`] listener closes flip the status within [`FALLBACK_FLIP`] and reopening
/// brings `Compliant` back, while no replica accepts a report. Synced back, the stream is open to
/// every replica again. Prints the flip times and how long the agent took to reconnect.
pub async fn refused_stream_falls_back_to_the_object(d: &Deployed) -> Result<()> {
    let pod = workload_pod(d)?;
    let refused_line = format!("node-agent: node {NODE} reports refused by the observer (");
    let accepted_line = format!("node-agent: node {NODE} reports accepted by the observer again");
    let refused_before = guide_log_lines(d, &refused_line);
    let accepted_before = guide_log_lines(d, &accepted_line);
    let started = Instant::now();
    stream::sync_observer(
        d,
        &[&format!(
            "nodeAgent.tokenAudience={}",
            stream::REFUSED_AUDIENCE
        )],
    )
    .await?;
    let refused = d
        .wait(
            "every observer replica refusing the agent's stream",
            stream::RECONNECT,
            |d| {
                let replicas = stream::observer_replicas(d).map_err(|e| e.to_string())?;
                let ok = replicas.len() == OBSERVER_REPLICAS
                    && replicas
                        .iter()
                        .all(|r| r.connected == 0 && r.accepted == 0 && r.refused > 0);
                if ok {
                    Ok(replicas)
                } else {
                    Err(format!("{replicas:?}"))
                }
            },
        )
        .await?;
    eprintln!(
        "deployed: node evidence: stream refused by every replica {:.1} s after the sync began: {refused:?}",
        started.elapsed().as_secs_f64()
    );
    // The guide's command shows the refusal: the agent writes it into its observation's
    // status.reportStream at its next publish, the operator logs it.
    let line = wait_guide_log_line(d, &refused_line, &refused_before, PUBLISHED).await?;
    ensure!(line.contains("Unauthenticated"), "{line}");
    eprintln!(
        "deployed: node evidence: the guide's log command shows {:.1} s after the sync began: {line}",
        started.elapsed().as_secs_f64()
    );

    let mut watch = StatusWatch::start(d)?;
    let mut down = Vec::new();
    let mut up = Vec::new();
    for run in 1..=FALLBACK_RUNS {
        watch
            .until(&format!("fallback run {run}: Compliant"), |s| {
                s == "Compliant"
            })
            .await?;
        let killed = Instant::now();
        exec(d, &pod, &["killall", "httpd"])?;
        let flipped = watch
            .until_within(
                &format!("fallback run {run}: the status leaves Compliant"),
                FALLBACK_FLIP,
                |s| s != "Compliant",
            )
            .await?;
        down.push(flipped.duration_since(killed).as_secs_f64());
        let p = get_pacto(d).map_err(anyhow::Error::msg)?;
        expect_http_finding(&p, "EVIDENCE_INSUFFICIENT")
            .with_context(|| format!("fallback run {run}"))?;
        let opened = Instant::now();
        exec(d, &pod, &["httpd", "-p", "8080", "-h", "/tmp"])?;
        let back = watch
            .until_within(
                &format!("fallback run {run}: Compliant again"),
                FALLBACK_FLIP,
                |s| s == "Compliant",
            )
            .await?;
        up.push(back.duration_since(opened).as_secs_f64());
    }
    let replicas = stream::observer_replicas(d)?;
    ensure!(
        replicas.iter().all(|r| r.accepted == 0 && r.connected == 0),
        "a replica accepted reports while the stream was refused: {replicas:?}"
    );
    let show = |v: &[f64]| {
        v.iter()
            .map(|s| format!("{s:.2} s"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "deployed: node evidence: stream refused, the verdict from the NodeRuntimeObservation (publish interval {} s): listener closed -> leaves Compliant {}; open again -> Compliant {}; reports accepted meanwhile: 0 on every replica ({replicas:?})",
        PUBLISH_INTERVAL.as_secs(),
        show(&down),
        show(&up)
    );
    let agent_log = d
        .kubectl(&[
            "logs",
            "-n",
            AGENT_NS,
            &format!("daemonset/{AGENT}"),
            &format!("--since={}s", started.elapsed().as_secs() + 1),
        ])
        .unwrap_or_default();
    let refusal = agent_log
        .lines()
        .find(|l| l.contains("node-agent report stream failed"))
        .unwrap_or("(no line)");
    eprintln!("deployed: node evidence: agent while refused: {refusal}");

    let restored = Instant::now();
    stream::sync_observer(d, &[]).await?;
    stream::wait_streams_open(d, OBSERVER_REPLICAS).await?;
    eprintln!(
        "deployed: node evidence: stream open to every replica again {:.1} s after the sync back began",
        restored.elapsed().as_secs_f64()
    );
    let line = wait_guide_log_line(d, &accepted_line, &accepted_before, PUBLISHED).await?;
    eprintln!("deployed: node evidence: the guide's log command shows: {line}");
    wait_pacto(
        d,
        "ebpf-web Compliant",
        PUBLISHED,
        compliant_without_findings,
    )
    .await?;
    Ok(())
}

/// Lines of the guide's node agent log command (`crate::GUIDE_NODE_AGENT_LOG`, run verbatim)
/// that contain `text` (none when grep matched nothing).
fn guide_log_lines(d: &Deployed, text: &str) -> Vec<String> {
    d.shell(crate::GUIDE_NODE_AGENT_LOG)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(text))
        .map(str::to_owned)
        .collect()
}

/// Waits up to `deadline` for a line containing `text` that is not one of `before` (the lines
/// seen earlier; each carries its time, and the kubelet may rotate the log meanwhile) in the
/// operator's log, read with the guide's command verbatim; returns it.
async fn wait_guide_log_line(
    d: &Deployed,
    text: &str,
    before: &[String],
    deadline: Duration,
) -> Result<String> {
    d.wait(
        &format!(
            "`{}` showing a new {text:?} line",
            crate::GUIDE_NODE_AGENT_LOG
        ),
        deadline,
        |d| {
            let lines = guide_log_lines(d, text);
            match lines.iter().find(|l| !before.contains(l)) {
                Some(line) => Ok(line.clone()),
                None => Err(format!("{} such lines, all seen before", lines.len())),
            }
        },
    )
    .await
}

/// The newer of the Lease's renewTime and the observation's lastPublished (the node's `heard`).
fn heard(d: &Deployed) -> Result<String> {
    let lease = d.kubectl_json(&["get", "lease", "-n", AGENT_NS, NODE])?;
    let obs = d.kubectl_json(&["get", "noderuntimeobservation", "-n", AGENT_NS, NODE])?;
    let renew = lease["spec"]["renewTime"].as_str().unwrap_or_default();
    let published = obs["status"]["lastPublished"].as_str().unwrap_or_default();
    // Both RFC 3339 UTC; compare to the second (renewTime carries microseconds).
    let second = |t: &str| t.get(..19).unwrap_or(t).to_owned();
    Ok(second(renew).max(second(published)))
}

/// JSON patch of the agent container's image and pull policy.
fn image_patch(image: &str, policy: &str) -> String {
    serde_json::json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image},
        {"op": "replace", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": policy},
    ])
    .to_string()
}

/// Issue 16, "pods running but no observation or Lease renewed (agent stopped on that node)":
/// the DaemonSet still selects `pacto-node`, but its image is patched to one no node has
/// ([`NO_IMAGE`], pull policy Never), so its pod there is replaced by one that never starts and
/// nothing renews the Lease or publishes. (A node the DaemonSet's selector excludes is another
/// case, with the Kubernetes verdict: `fleet`.) After stale-after (20 s in the tier) both
/// interfaces read EVIDENCE_STALE with `collector: k8s-observer` (the agent's data decided
/// nothing), Unknown, without any
/// nudge; the finding's detectedAt (when the node was last heard from) stays put while
/// `metadata.generation` moves on. The image patched back, the agent returns and the Pacto is
/// Compliant again, with the chart's default warm-up: ebpf-web ran before the new agent, so its
/// connection coverage reads Partial "started after pod" for 5 minutes, but its listeners are
/// complete at once. Prints the times.
pub async fn agent_stopped_reads_stale_then_recovers(d: &Deployed) -> Result<()> {
    wait_pacto(
        d,
        "ebpf-web Compliant",
        PUBLISHED,
        compliant_without_findings,
    )
    .await?;
    let ds = d.kubectl_json(&["get", "daemonset", "-n", AGENT_NS, AGENT])?;
    let container = &ds["spec"]["template"]["spec"]["containers"][0];
    let image = container["image"]
        .as_str()
        .context("agent image")?
        .to_owned();
    let policy = container["imagePullPolicy"]
        .as_str()
        .unwrap_or("IfNotPresent")
        .to_owned();
    let old: Vec<String> = agent_pod_states(d)?.into_iter().map(|p| p.0).collect();
    let stale_line = format!("node-agent: node {NODE} stale since ");
    let stale_before = guide_log_lines(d, &stale_line);
    let stopped = Instant::now();
    d.kubectl(&[
        "patch",
        "daemonset",
        "-n",
        AGENT_NS,
        AGENT,
        "--type=json",
        "-p",
        &image_patch(NO_IMAGE, "Never"),
    ])?;
    d.wait(
        "the agent stopped (its pod replaced by one that never starts)",
        READY,
        |d| {
            let pods = agent_pod_states(d).map_err(|e| e.to_string())?;
            let gone = pods
                .iter()
                .all(|(name, ready)| !old.contains(name) && !ready);
            if gone && !pods.is_empty() {
                Ok(())
            } else {
                Err(format!("agent pods {pods:?} (old {old:?})"))
            }
        },
    )
    .await?;
    let gone = Instant::now();
    let last_heard = heard(d)?;
    let stale = wait_pacto(
        d,
        "EVIDENCE_STALE on both interfaces",
        STALE_AFTER + FLIP,
        |p| {
            has(p, "interface/http", "EVIDENCE_STALE", KUBERNETES)
                && has(p, "interface/admin", "EVIDENCE_STALE", KUBERNETES)
        },
    )
    .await?;
    eprintln!(
        "deployed: node evidence: agent stopped -> EVIDENCE_STALE {:.1} s after the patch, {:.1} s after its pod was gone (stale-after {} s; last heard {last_heard})",
        stopped.elapsed().as_secs_f64(),
        gone.elapsed().as_secs_f64(),
        STALE_AFTER.as_secs()
    );
    ensure!(
        stale["status"]["contractStatus"] == "Unknown",
        "stale evidence is never a violation: {}",
        summary(&stale)
    );
    // The guide's command says so too (the operator judges the node by the same rule).
    let line = wait_guide_log_line(d, &stale_line, &stale_before, PUBLISHED).await?;
    ensure!(
        line.contains(&format!(
            "nothing heard for more than {}s",
            STALE_AFTER.as_secs()
        )),
        "{line}"
    );
    eprintln!(
        "deployed: node evidence: the guide's log command shows {:.1} s after the pod was gone: {line}",
        gone.elapsed().as_secs_f64()
    );
    let http = finding(&stale, "interface/http").context("http finding")?;
    let message = http["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains(&format!("node-agent evidence of node {NODE} is stale")),
        "{message}"
    );
    let detected = http["evidenceRefs"][0]["detectedAt"].clone();
    ensure!(
        detected
            .as_str()
            .is_some_and(|t| t.get(..19).unwrap_or(t) <= last_heard.as_str()),
        "detectedAt {detected} is after the node was last heard from ({last_heard})"
    );

    // metadata.generation moves on; the stale reading's detectedAt does not.
    let generation = stale["metadata"]["generation"].as_i64().unwrap_or(0);
    d.apply(WORKLOAD_NS, &pacto(301))?;
    let moved = wait_pacto(d, "the next generation observed", PUBLISHED, |p| {
        p["status"]["observedGeneration"].as_i64() > Some(generation)
            && has(p, "interface/http", "EVIDENCE_STALE", KUBERNETES)
    })
    .await?;
    let still = &finding(&moved, "interface/http").context("http finding")?["evidenceRefs"][0];
    ensure!(
        still["detectedAt"] == detected,
        "detectedAt moved from {detected} to {}",
        still["detectedAt"]
    );

    let restarted = Instant::now();
    d.kubectl(&[
        "patch",
        "daemonset",
        "-n",
        AGENT_NS,
        AGENT,
        "--type=json",
        "-p",
        &image_patch(&image, &policy),
    ])?;
    super::wait_daemonset_ready(d, READY).await?;
    let ready = restarted.elapsed().as_secs_f64();
    wait_pacto(
        d,
        "ebpf-web Compliant after the agent returned",
        READY,
        compliant_without_findings,
    )
    .await?;
    eprintln!(
        "deployed: node evidence: agent back -> pod Ready {ready:.1} s, Compliant {:.1} s after the image was patched back (the chart's default warm-up)",
        restarted.elapsed().as_secs_f64()
    );
    Ok(())
}

/// While the agent's collection is Failed (its observation reads Failed): the Pacto's
/// interfaces read COLLECTION_FAILED (collector `k8s-observer`) with the agent's reason, not
/// EVIDENCE_STALE (the agent still heartbeats), Unknown, and `RuntimeObserved` is False. Prints the time from `since`.
pub async fn collection_failed_in_the_verdict(d: &Deployed, since: Instant) -> Result<()> {
    let failed = wait_pacto(d, "COLLECTION_FAILED on both interfaces", PUBLISHED, |p| {
        has(p, "interface/http", "COLLECTION_FAILED", KUBERNETES)
            && has(p, "interface/admin", "COLLECTION_FAILED", KUBERNETES)
    })
    .await?;
    eprintln!(
        "deployed: node evidence: collection Failed -> COLLECTION_FAILED {:.1} s after the sync began: {}",
        since.elapsed().as_secs_f64(),
        summary(&failed)
    );
    ensure!(
        failed["status"]["contractStatus"] == "Unknown",
        "{}",
        summary(&failed)
    );
    let message = finding(&failed, "interface/http").context("http finding")?["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(message.contains("BTFUnavailable"), "{message}");
    let runtime = failed["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "RuntimeObserved")
        .cloned()
        .unwrap_or_default();
    ensure!(
        runtime["status"] == "False",
        "COLLECTION_FAILED must set RuntimeObserved False: {runtime}"
    );
    eprintln!(
        "deployed: node evidence: RuntimeObserved while collection Failed: {} {} {}",
        runtime["status"].as_str().unwrap_or("-"),
        runtime["reason"].as_str().unwrap_or("-"),
        runtime["message"].as_str().unwrap_or("")
    );
    Ok(())
}

/// After the agent is Running again: Compliant again (the Pacto stays for the later scenarios,
/// which roll the agent and the services without changing any verdict).
pub async fn collection_running_again(d: &Deployed, since: Instant) -> Result<()> {
    wait_pacto(
        d,
        "ebpf-web Compliant after collection Running again",
        READY,
        compliant_without_findings,
    )
    .await?;
    eprintln!(
        "deployed: node evidence: collection Running again -> Compliant {:.1} s after the sync began",
        since.elapsed().as_secs_f64()
    );
    Ok(())
}
