//! Node-agent evidence in the verdict on the real node (issue 16, the observer side): a real pod's
//! interfaces qualified and decided by the agent's view (`k8s-observer+ebpf`), the status flip
//! when a listener closes (p50/p99 printed), `EVIDENCE_STALE` when the agent stops and recovery
//! when it returns, and `COLLECTION_FAILED` (checked inside the collection-Failed scenario of
//! `agent`). Rules: docs/design/observation.md#node-evidence.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pacto_deployed::Deployed;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{AGENT, AGENT_NS, NODE, PUBLISHED, READY, WORKLOAD_NS, agent_pods};

/// The workload, its Service and its Pacto.
pub const NAME: &str = "ebpf-web";
/// `nodeAgent.staleAfter` of the tier ([`super::AGENT_VALUES`]).
const STALE_AFTER: Duration = Duration::from_secs(20);
/// Runs of the listener benchmark.
const RUNS: usize = 20;
/// How long one status flip may take before the run fails: generous (the agent's next publish is
/// at most 5 s away in the tier even without an early report); the figures are printed, not
/// asserted.
const FLIP: Duration = Duration::from_mins(1);
/// The label the agent stop scenario puts into the DaemonSet's node selector; no node carries it.
const NO_NODE: &str = "pacto.trianalab.io/no-such-node";

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

/// Whether the Pacto has the finding `code` about `subject`, with the node-agent collector.
pub fn has(pacto: &Value, subject: &str, code: &str) -> bool {
    finding(pacto, subject).is_some_and(|f| {
        f["code"] == code && f["evidenceRefs"][0]["collector"] == "k8s-observer+ebpf"
    })
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
        let lines: Vec<&str> = logs.lines().filter(|l| l.contains("node-agent")).collect();
        e.context(lines.join("\n"))
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
/// stale scenario shows the same collector on both interfaces' findings.
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
/// by a thread that stamps each line with the instant it arrived.
struct StatusWatch {
    child: std::process::Child,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    current: String,
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
        })
    }

    /// Waits for a status for which `want` holds (the current one included); returns when it
    /// arrived (now, for the current one).
    async fn until(&mut self, what: &str, want: impl Fn(&str) -> bool) -> Result<Instant> {
        while let Ok(line) = self.lines.try_recv() {
            self.current = line.1;
        }
        if want(&self.current) {
            return Ok(Instant::now());
        }
        let deadline = tokio::time::Instant::now() + FLIP;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some((at, status))) => {
                    self.current = status;
                    if want(&self.current) {
                        return Ok(at);
                    }
                }
                Ok(None) => bail!("{what}: the status watch ended (last {})", self.current),
                Err(_) => bail!("{what}: not within {FLIP:?}; last {}", self.current),
            }
        }
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

/// Issue 16's benchmark on the real node, printed, not asserted as a time: the listener on 8080
/// of the Ready pod closed (`kubectl exec … killall httpd`) → the Pacto leaves
/// Compliant (the observer's windowed negative: Unknown inside the stabilization window), and
/// httpd started again → Compliant. [`RUNS`] runs; each flip must happen within [`FLIP`]. Timed
/// from the start of the `kubectl exec` (its own duration is printed) to the status change on a
/// `kubectl get --watch`. The agent reports a listener opened or closed at once on its stream (at
/// most one early report a second), not only every publish interval (5 s here).
pub async fn listener_closed_flips_the_status(d: &Deployed) -> Result<()> {
    let pods = d.kubectl(&[
        "get",
        "pods",
        "-n",
        WORKLOAD_NS,
        "-l",
        &format!("app={NAME}"),
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])?;
    let pod = match pods.split_whitespace().collect::<Vec<_>>()[..] {
        [pod] => pod.to_owned(),
        _ => bail!("ebpf-web pods: {pods:?}"),
    };
    let mut watch = StatusWatch::start(d)?;
    let bench = Instant::now();
    let mut down = Vec::new();
    let mut up = Vec::new();
    let mut execs = Vec::new();
    let mut seen = None;
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
        if seen.is_none() {
            seen = get_pacto(d).ok().map(|p| summary(&p));
        }
        let started = Instant::now();
        exec(d, &pod, &["httpd", "-p", "8080", "-h", "/tmp"])?;
        let back = watch
            .until(&format!("run {run}: Compliant again"), |s| s == "Compliant")
            .await?;
        up.push(back.duration_since(started).as_secs_f64());
    }
    eprintln!(
        "deployed: node evidence: after the first close the Pacto read {}",
        seen.unwrap_or_default()
    );
    // How the reports reached the observer meanwhile: the agent's report stream lines (not the
    // per-report debug lines) and how many reports it sent.
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

/// Issue 16, "pods running but no observation or Lease renewed (agent stopped on that node)":
/// the DaemonSet's node selector patched to a label no node has, so its pod on `pacto-node` is
/// deleted and nothing renews the Lease or publishes. After stale-after (20 s in the tier) both
/// interfaces read EVIDENCE_STALE with `collector: k8s-observer+ebpf`, Unknown, without any
/// nudge; the finding's detectedAt (when the node was last heard from) stays put while
/// `metadata.generation` moves on. The selector removed, the agent returns and the Pacto is
/// Compliant again (after the agent's warm-up: pods that ran before it read Partial that long).
/// Prints the times.
pub async fn agent_stopped_reads_stale_then_recovers(d: &Deployed) -> Result<()> {
    wait_pacto(
        d,
        "ebpf-web Compliant",
        PUBLISHED,
        compliant_without_findings,
    )
    .await?;
    let stopped = Instant::now();
    d.kubectl(&[
        "patch",
        "daemonset",
        "-n",
        AGENT_NS,
        AGENT,
        "--type=merge",
        "-p",
        &format!(
            r#"{{"spec":{{"template":{{"spec":{{"nodeSelector":{{"{NO_NODE}":"true"}}}}}}}}}}"#
        ),
    ])?;
    d.wait("the agent pod gone", READY, |d| {
        let pods = agent_pods(d).map_err(|e| e.to_string())?;
        if pods.is_empty() {
            Ok(())
        } else {
            Err(format!("agent pods {pods:?}"))
        }
    })
    .await?;
    let gone = Instant::now();
    let last_heard = heard(d)?;
    let stale = wait_pacto(
        d,
        "EVIDENCE_STALE on both interfaces",
        STALE_AFTER + FLIP,
        |p| {
            has(p, "interface/http", "EVIDENCE_STALE")
                && has(p, "interface/admin", "EVIDENCE_STALE")
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
            && has(p, "interface/http", "EVIDENCE_STALE")
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
        &format!(
            r#"[{{"op":"remove","path":"/spec/template/spec/nodeSelector/{}"}}]"#,
            NO_NODE.replace('/', "~1")
        ),
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
        "deployed: node evidence: agent back -> pod Ready {ready:.1} s, Compliant {:.1} s after the selector was removed (warm-up 10 s)",
        restarted.elapsed().as_secs_f64()
    );
    Ok(())
}

/// While the agent's collection is Failed (its observation reads Failed): the Pacto's
/// interfaces read COLLECTION_FAILED with the agent's reason, not EVIDENCE_STALE (the agent
/// still heartbeats), Unknown. Prints the time from `since`.
pub async fn collection_failed_in_the_verdict(d: &Deployed, since: Instant) -> Result<()> {
    let failed = wait_pacto(d, "COLLECTION_FAILED on both interfaces", PUBLISHED, |p| {
        has(p, "interface/http", "COLLECTION_FAILED")
            && has(p, "interface/admin", "COLLECTION_FAILED")
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
    Ok(())
}

/// After the agent is Running again: Compliant again; then the Pacto is deleted, so that the
/// later scenarios (which roll the agent) do not count its blips.
pub async fn collection_running_again_then_done(d: &Deployed, since: Instant) -> Result<()> {
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
    d.kubectl(&["delete", "pacto", "-n", WORKLOAD_NS, NAME, "--wait=true"])?;
    Ok(())
}
