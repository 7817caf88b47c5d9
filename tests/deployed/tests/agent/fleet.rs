//! Node evidence across the agent's life and the targets it does not speak for: a UDP Service
//! port and a hostNetwork pod (the Kubernetes reading stands), 20 Compliant Pactos reconciled
//! through both observer replicas, a `kubectl rollout restart` of the agent, and the node taken
//! out of the DaemonSet's nodeSelector (docs/design/observation.md#node-evidence).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use pacto_deployed::{Deployed, OPERATOR_NAMESPACE, PodTimeline, VerdictWatch};
use serde_json::Value;

use super::evidence::{self, finding};
use super::stream::{self, OBSERVER_REPLICAS};
use super::{
    AGENT, AGENT_NS, PUBLISH_INTERVAL, READY, STALE_AFTER, WORKLOAD_NS, agent_pod_states,
    coverage_lines, observation, pod_view,
};

/// The UDP workload, its Service and its Pacto.
const UDP: &str = "udp-dhcp";
/// The hostNetwork workload, its Service and its Pacto.
const HOSTNET: &str = "hostnet";
/// The host port the hostNetwork workload's httpd listens on.
const HOSTNET_PORT: u16 = 18089;
/// The stabilization window of the tier (`WINDOW` in deployed.rs).
const WINDOW: Duration = Duration::from_secs(20);
/// The Pactos of the fleet.
const FLEET: usize = 20;
/// The node label the excluded-node scenario puts into the DaemonSet's nodeSelector (the chart
/// value `nodeSelector`); the node does not carry it.
const AGENT_NODE_LABEL: &str = "pacto.trianalab.io/node-agent";

/// busybox `udhcpd` (the image's UDP server) bound to UDP 67 on all addresses, behind a Service
/// port `dhcp` with `protocol: UDP`.
fn udp_workload() -> String {
    format!(
        r"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {UDP}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {UDP}}}}}
  template:
    metadata: {{labels: {{app: {UDP}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: localhost/busybox:1.35
          imagePullPolicy: IfNotPresent
          command:
            - sh
            - -c
            - |
              printf 'start 192.0.2.10\nend 192.0.2.20\ninterface eth0\nlease_file /tmp/leases\npidfile /tmp/udhcpd.pid\n' > /tmp/udhcpd.conf
              touch /tmp/leases
              exec udhcpd -f /tmp/udhcpd.conf
          ports:
            - {{name: dhcp, containerPort: 67, protocol: UDP}}
---
apiVersion: v1
kind: Service
metadata: {{name: {UDP}}}
spec:
  selector: {{app: {UDP}}}
  ports:
    - {{name: dhcp, port: 67, targetPort: 67, protocol: UDP}}
"
    )
}

/// busybox `httpd` in the node's network namespace (`hostNetwork: true`) on [`HOSTNET_PORT`],
/// behind a Service port `http`.
fn host_network_workload() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {HOSTNET}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {HOSTNET}}}}}
  template:
    metadata: {{labels: {{app: {HOSTNET}}}}}
    spec:
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: localhost/busybox:1.35
          imagePullPolicy: IfNotPresent
          command: ["httpd", "-f", "-p", "{HOSTNET_PORT}", "-h", "/tmp"]
          ports:
            - {{name: http, containerPort: {HOSTNET_PORT}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {HOSTNET}}}
spec:
  selector: {{app: {HOSTNET}}}
  ports:
    - {{name: http, port: 80, targetPort: {HOSTNET_PORT}}}
"#
    )
}

/// A Pacto `name` whose contract declares `interfaces` (name, type) bound to the Service
/// `target`'s ports (interface, servicePort).
fn pacto(name: &str, target: &str, interfaces: &[(&str, &str, &str)]) -> String {
    use std::fmt::Write as _;
    let mut declared = String::new();
    let mut bindings = String::new();
    for (iface, kind, port) in interfaces {
        let _ = write!(
            declared,
            "        - name: {iface}\n          type: {kind}\n          ref: interfaces/{iface}.yaml\n"
        );
        let _ = writeln!(
            bindings,
            "      - {{interface: {iface}, servicePort: {port}}}"
        );
    }
    format!(
        r#"apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {{name: {name}}}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: {name}
        version: 1.0.0
      interfaces:
{declared}  target:
    serviceName: {target}
    interfaceBindings:
{bindings}"#
    )
}

/// The four kinds of fleet Pacto, by `i % 4`: ebpf-web's `http` and `admin` (port 9000, which its
/// Service does not have: only the agent's view decides it), the sample workload `agent-web`'s
/// `http`, the UDP workload's `dhcp`, the hostNetwork workload's `http`.
fn fleet_pacto(i: usize) -> String {
    let name = fleet_name(i);
    match i % 4 {
        0 => pacto(
            &name,
            evidence::NAME,
            &[("http", "openapi", "http"), ("admin", "openapi", "9000")],
        ),
        1 => pacto(&name, "agent-web", &[("http", "openapi", "http")]),
        2 => pacto(&name, UDP, &[("dhcp", "asyncapi", "dhcp")]),
        _ => pacto(&name, HOSTNET, &[("http", "openapi", "http")]),
    }
}

fn fleet_name(i: usize) -> String {
    format!("fleet-{i:02}")
}

/// Whether the Pacto `name` of [`WORKLOAD_NS`] has an interface only the agent's view decides
/// (ebpf-web's `admin`: the Pacto ebpf-web itself and every fourth of the fleet).
fn decided_by_the_agent(name: &str) -> bool {
    name == evidence::NAME
        || name
            .strip_prefix("fleet-")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|i| i % 4 == 0)
}

fn compliant_without_findings(p: &Value) -> bool {
    p["status"]["contractStatus"] == "Compliant"
        && p["status"]["findings"].as_array().is_none_or(Vec::is_empty)
}

fn short(p: &Value) -> String {
    let findings: Vec<String> = p["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{} {} ({})",
                f["code"].as_str().unwrap_or("?"),
                f["subject"].as_str().unwrap_or("?"),
                f["evidenceRefs"][0]["collector"].as_str().unwrap_or("-")
            )
        })
        .collect();
    format!(
        "{} {}{findings:?}",
        p["metadata"]["name"].as_str().unwrap_or("?"),
        p["status"]["contractStatus"].as_str().unwrap_or("-")
    )
}

/// The Pactos of [`WORKLOAD_NS`].
fn workload_pactos(d: &Deployed) -> Result<Vec<Value>, String> {
    let list = d
        .kubectl_json(&["get", "pactos", "-n", WORKLOAD_NS])
        .map_err(|e| e.to_string())?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// Waits until the Pactos `names` of [`WORKLOAD_NS`] are all Compliant without findings.
async fn wait_compliant(d: &Deployed, names: &[String], timeout: Duration) -> Result<()> {
    d.wait(
        &format!("{} Pacto(s) Compliant without findings", names.len()),
        timeout,
        |d| {
            let all = workload_pactos(d)?;
            let not: Vec<String> = names
                .iter()
                .filter(|n| {
                    !all.iter().any(|p| {
                        p["metadata"]["name"] == n.as_str() && compliant_without_findings(p)
                    })
                })
                .map(|n| {
                    all.iter()
                        .find(|p| p["metadata"]["name"] == n.as_str())
                        .map_or_else(|| format!("{n} missing"), short)
                })
                .collect();
            if not.is_empty() {
                Ok(())
            } else {
                Err(format!("{not:?}"))
            }
        },
    )
    .await
}

/// (b) and (c): a workload really listening on UDP 67 (busybox `udhcpd`; `/proc/net/udp` in the
/// pod shows it) behind a Service port `dhcp` with `protocol: UDP`, and a contract declaring the
/// interface `dhcp` bound to it; and a hostNetwork pod (busybox httpd on the node's port
/// 18089) behind a Service, with a contract declaring `http`. The agent's view cannot speak for
/// either (it sees TCP listeners only; a hostNetwork pod's sockets are the node's), so both keep
/// the Kubernetes reading (collector `k8s-observer`): Compliant, no finding, 1 of 1 evaluated,
/// `RuntimeObserved=True Found`, and still so after the stabilization window (held for it:
/// never `INTERFACE_ABSENT` nor `EVIDENCE_INSUFFICIENT`). Prints the agent's view of both pods.
pub async fn udp_and_host_network_keep_the_kubernetes_verdict(d: &Deployed) -> Result<()> {
    d.apply(WORKLOAD_NS, &udp_workload())?;
    d.apply(WORKLOAD_NS, &host_network_workload())?;
    d.wait_available(WORKLOAD_NS, UDP, READY).await?;
    d.wait_available(WORKLOAD_NS, HOSTNET, READY).await?;
    let available = Instant::now();
    let udp_table = d.kubectl(&[
        "exec",
        "-n",
        WORKLOAD_NS,
        &format!("deployment/{UDP}"),
        "--",
        "cat",
        "/proc/net/udp",
    ])?;
    ensure!(
        udp_table.contains(":0043 "),
        "udhcpd is not bound to UDP 67 in the pod:\n{udp_table}"
    );
    d.apply(
        WORKLOAD_NS,
        &pacto(UDP, UDP, &[("dhcp", "asyncapi", "dhcp")]),
    )?;
    d.apply(
        WORKLOAD_NS,
        &pacto(HOSTNET, HOSTNET, &[("http", "openapi", "http")]),
    )?;
    let names = [UDP.to_owned(), HOSTNET.to_owned()];
    wait_compliant(d, &names, super::PUBLISHED).await?;
    eprintln!(
        "deployed: node evidence: {UDP} (UDP 67) and {HOSTNET} (hostNetwork, port {HOSTNET_PORT}) Compliant {:.1} s after their Deployments were Available",
        available.elapsed().as_secs_f64()
    );
    for name in &names {
        let p = d.kubectl_json(&["get", "pacto", "-n", WORKLOAD_NS, name])?;
        let coverage = &p["status"]["evaluationCoverage"];
        ensure!(
            coverage["evaluated"] == 1 && coverage["required"] == 1,
            "{name}: evaluationCoverage {coverage}"
        );
        let runtime = crate::condition(&p, "RuntimeObserved");
        ensure!(
            runtime["status"] == "True" && runtime["reason"] == "Found",
            "{name}: RuntimeObserved {runtime}"
        );
    }
    // Past the window: an absence the agent's view would have claimed is confirmed by then.
    let held = Instant::now();
    d.hold(
        "the UDP and hostNetwork Pactos Compliant past the window",
        WINDOW + PUBLISH_INTERVAL,
        |d| {
            let all = workload_pactos(d)?;
            for name in &names {
                let p = all
                    .iter()
                    .find(|p| p["metadata"]["name"] == name.as_str())
                    .ok_or_else(|| format!("{name} missing"))?;
                if !compliant_without_findings(p) {
                    return Err(short(p));
                }
            }
            Ok(())
        },
    )
    .await?;
    eprintln!(
        "deployed: node evidence: {UDP} and {HOSTNET} still Compliant without findings after {:.1} s (window {} s)",
        held.elapsed().as_secs_f64(),
        WINDOW.as_secs()
    );
    let obs = observation(d).map_err(anyhow::Error::msg)?;
    for prefix in [UDP, HOSTNET] {
        let view = pod_view(&obs, WORKLOAD_NS, &format!("{prefix}-"));
        eprintln!(
            "deployed: node evidence: the agent's view of {prefix}: {}",
            view.map_or_else(|| "none".to_owned(), ToString::to_string)
        );
    }
    Ok(())
}

/// (e), and the fleet for the next scenarios: [`FLEET`] Pactos in [`WORKLOAD_NS`], five of each
/// kind of [`fleet_pacto`], all Compliant without findings. Then, with the observer at
/// [`OBSERVER_REPLICAS`] replicas, every Pacto of the namespace nudged three times (`kubectl
/// annotate … reconcile-requested-at`), each round waited for until the status-writer finished
/// that many reconciles: every replica served Observe calls (`pacto_grpc_server_requests_total
/// {method="Observe"}` grew on each), and no Pacto's verdict changed (a `kubectl get pactos -A
/// --watch`), no Pacto event. Prints the Observe calls per replica.
pub async fn twenty_pactos_balanced_over_the_replicas(d: &Deployed) -> Result<()> {
    let fleet: Vec<String> = (0..FLEET).map(fleet_name).collect();
    let yaml: Vec<String> = (0..FLEET).map(fleet_pacto).collect();
    let started = Instant::now();
    d.apply(WORKLOAD_NS, &yaml.join("---\n"))?;
    wait_compliant(d, &fleet, crate::VERDICT).await?;
    eprintln!(
        "deployed: node evidence: {FLEET} Pactos Compliant without findings {:.1} s after they were applied",
        started.elapsed().as_secs_f64()
    );
    let before = stream::observer_replicas(d)?;
    let base = Instant::now();
    let events_before = d.pacto_events()?;
    let mut watch = VerdictWatch::start(d, None, base).await?;
    let mut pods = PodTimeline::start(d, &[OPERATOR_NAMESPACE, AGENT_NS], base)?;
    let count = workload_pactos(d).map_err(anyhow::Error::msg)?.len() as u64;
    for round in 1..=3 {
        let from = crate::reconciles_finished(d);
        d.kubectl(&[
            "annotate",
            "pactos",
            "--all",
            "-n",
            WORKLOAD_NS,
            &format!("reconcile-requested-at=balance-{round}"),
            "--overwrite",
        ])?;
        d.wait(
            &format!("round {round}: {count} reconciles"),
            crate::VERDICT,
            |d| {
                let done = crate::reconciles_finished(d).saturating_sub(from);
                if done >= count {
                    Ok(())
                } else {
                    Err(format!("{done} reconciles"))
                }
            },
        )
        .await?;
    }
    let after = stream::observer_replicas(d)?;
    let mut served = Vec::new();
    for r in &after {
        let was = before
            .iter()
            .find(|b| b.pod == r.pod)
            .with_context(|| format!("observer {} is new: {before:?}", r.pod))?;
        served.push(format!(
            "{} {}",
            r.pod,
            r.observes.saturating_sub(was.observes)
        ));
        ensure!(
            r.observes > was.observes,
            "observer {} served no Observe call in 3 rounds of {count} reconciles: {before:?} -> {after:?}",
            r.pod
        );
    }
    ensure!(after.len() == OBSERVER_REPLICAS, "{after:?}");
    eprintln!(
        "deployed: node evidence: 3 rounds of {count} reconciles, Observe calls per replica: {}",
        served.join(", ")
    );
    crate::expect_no_verdict_change(
        d,
        "reconciles balanced over the observer replicas",
        &mut watch,
        &mut pods,
        &events_before,
        Duration::ZERO,
    )
    .await
}

/// (a) `kubectl rollout restart daemonset/pacto-node-agent` while the fleet and the other Pactos
/// of the namespace are Compliant, with the chart's default warm-up: watched (a `kubectl get
/// pactos -A --watch`, which sees every write) from before the restart until the new pod is
/// Ready, one publish of it later, its stream open to every observer replica again with a report
/// accepted, and one more publish interval: no Pacto's verdict changes and no Pacto event is
/// recorded; both counts printed. The new agent's view of the pods that ran before it: listener
/// coverage Complete, connection coverage Partial "started after pod" (printed).
pub async fn agent_rollout_changes_no_verdict(d: &Deployed) -> Result<()> {
    let all = workload_pactos(d).map_err(anyhow::Error::msg)?;
    let names: Vec<String> = all
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    wait_compliant(d, &names, super::PUBLISHED).await?;
    let generation = crate::agent_generation(d)?;
    let old: Vec<String> = agent_pod_states(d)?.into_iter().map(|p| p.0).collect();
    let base = Instant::now();
    let events_before = d.pacto_events()?;
    let mut watch = VerdictWatch::start(d, None, base).await?;
    let mut pods = PodTimeline::start(d, &[AGENT_NS, OPERATOR_NAMESPACE], base)?;
    let pactos = watch.current()?.len();
    d.kubectl(&[
        "rollout",
        "restart",
        "-n",
        AGENT_NS,
        &format!("daemonset/{AGENT}"),
    ])?;
    super::wait_daemonset_rolled(d, generation).await?;
    let now: Vec<String> = agent_pod_states(d)?.into_iter().map(|p| p.0).collect();
    ensure!(
        !now.iter().any(|p| old.contains(p)),
        "the old agent pod is still there: {old:?} -> {now:?}"
    );
    let ready = base.elapsed();
    let at_ready = stream::observer_replicas(d)?;
    super::wait_published(d).await?;
    let published = base.elapsed();
    d.wait(
        "a report of the new agent accepted by every observer replica",
        Duration::from_mins(1),
        |d| {
            let now = stream::observer_replicas(d).map_err(|e| e.to_string())?;
            let grew = now.len() == OBSERVER_REPLICAS
                && now.iter().all(|r| {
                    r.connected == 1
                        && at_ready
                            .iter()
                            .find(|b| b.pod == r.pod)
                            .is_some_and(|b| r.accepted > b.accepted)
                });
            if grew {
                Ok(())
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await?;
    eprintln!(
        "deployed: node agent rollout: new pod Ready {:.1} s, published {:.1} s, its stream accepted by every replica {:.1} s after the restart",
        ready.as_secs_f64(),
        published.as_secs_f64(),
        base.elapsed().as_secs_f64()
    );
    crate::expect_no_verdict_change(
        d,
        &format!("agent rollout restart ({pactos} Pactos watched)"),
        &mut watch,
        &mut pods,
        &events_before,
        PUBLISH_INTERVAL,
    )
    .await?;
    let obs = observation(d).map_err(anyhow::Error::msg)?;
    for line in coverage_lines(&obs)
        .iter()
        .filter(|l| l.starts_with(WORKLOAD_NS))
    {
        eprintln!("deployed: node agent rollout: pod {line}");
    }
    let web = pod_view(&obs, WORKLOAD_NS, &format!("{}-", evidence::NAME))
        .context("ebpf-web in the new agent's observation")?;
    ensure!(
        web["listenerCoverage"] == "Complete"
            && web["coverage"] == "Partial"
            && web["partialReason"] == "started after pod",
        "a pod that ran before the agent: listeners complete at once, connections Partial for the warm-up: {web:#}"
    );
    Ok(())
}

/// (d) The node taken out of the DaemonSet: the agent's release synced with the chart value
/// `nodeSelector.pacto.trianalab.io/node-agent=enabled`, a label the node does not carry, so the
/// DaemonSet wants no pod there and its pod is deleted (the node's NodeRuntimeObservation and
/// Lease stay, unrenewed). Held for stale-after plus two publish intervals from the pod's
/// deletion: no Pacto ever reads `EVIDENCE_STALE` and no finding carries `k8s-observer+ebpf` (the
/// agent does not speak for that node); the Pactos bound only to Service ports (the sample
/// workload's, the UDP and hostNetwork ones) keep `Compliant` without any verdict change; those
/// with ebpf-web's `admin` (a port its Service lacks, which only the agent's view decided) read
/// the Kubernetes verdict of it, `EVIDENCE_INSUFFICIENT`. The value removed (synced back), the
/// agent returns and every Pacto is Compliant again. Prints the counts and times.
pub async fn excluded_node_keeps_the_kubernetes_verdict(d: &Deployed) -> Result<()> {
    let base = Instant::now();
    let mut watch = VerdictWatch::start(d, None, base).await?;
    let selector = format!(
        "nodeSelector.{}=enabled",
        AGENT_NODE_LABEL.replace('.', "\\.")
    );
    super::sync_agent_with(d, &[], &[&selector])?;
    d.wait("the DaemonSet wanting no pod on the node", READY, |d| {
        let ds = d
            .kubectl_json(&["get", "daemonset", "-n", AGENT_NS, AGENT])
            .map_err(|e| e.to_string())?;
        let all = d
            .kubectl(&[
                "get",
                "pods",
                "-n",
                AGENT_NS,
                "-l",
                &format!("app.kubernetes.io/name={AGENT}"),
                "-o",
                "name",
            ])
            .map_err(|e| e.to_string())?;
        let selected = &ds["spec"]["template"]["spec"]["nodeSelector"][AGENT_NODE_LABEL];
        if selected == "enabled"
            && ds["status"]["desiredNumberScheduled"] == 0
            && all.trim().is_empty()
        {
            Ok(())
        } else {
            Err(format!("status {}, pods {all:?}", ds["status"]))
        }
    })
    .await?;
    let gone = Instant::now();
    d.hold(
        "no EVIDENCE_STALE and no k8s-observer+ebpf while the node is excluded",
        STALE_AFTER + 2 * PUBLISH_INTERVAL,
        |d| {
            let list = d
                .kubectl_json(&["get", "pactos", "-A"])
                .map_err(|e| e.to_string())?;
            for p in list["items"].as_array().into_iter().flatten() {
                for f in p["status"]["findings"].as_array().into_iter().flatten() {
                    if f["code"] == "EVIDENCE_STALE"
                        || f["evidenceRefs"][0]["collector"] == evidence::WITH_EBPF
                    {
                        return Err(short(p));
                    }
                }
            }
            Ok(())
        },
    )
    .await?;
    let held = gone.elapsed();
    let changes = watch.changes()?;
    let all = workload_pactos(d).map_err(anyhow::Error::msg)?;
    let mut decided = 0;
    for p in &all {
        let name = p["metadata"]["name"].as_str().unwrap_or("?");
        if decided_by_the_agent(name) {
            decided += 1;
            let admin = finding(p, "interface/admin");
            ensure!(
                admin.is_some_and(|f| f["code"] == "EVIDENCE_INSUFFICIENT")
                    && finding(p, "interface/http").is_none(),
                "{name}: without the agent, admin reads the Kubernetes EVIDENCE_INSUFFICIENT and http stays Found: {}",
                short(p)
            );
        } else {
            ensure!(
                compliant_without_findings(p),
                "{name} must keep its Kubernetes verdict: {}",
                short(p)
            );
        }
    }
    let unexpected: Vec<String> = changes
        .iter()
        .filter(|c| {
            let name = c.pacto.rsplit('/').next().unwrap_or_default();
            !(c.pacto.starts_with(&format!("{WORKLOAD_NS}/")) && decided_by_the_agent(name))
        })
        .map(ToString::to_string)
        .collect();
    eprintln!(
        "deployed: node agent excluded by its nodeSelector: held {:.1} s after its pod was gone (stale-after {} s): {} Pactos in {WORKLOAD_NS}, {} verdict change(s), {} on the {decided} with an interface only the agent decides, {} elsewhere; no EVIDENCE_STALE",
        held.as_secs_f64(),
        STALE_AFTER.as_secs(),
        all.len(),
        changes.len(),
        changes.len() - unexpected.len(),
        unexpected.len()
    );
    ensure!(
        unexpected.is_empty(),
        "verdicts changed on Pactos the agent does not decide: {unexpected:?}"
    );
    drop(watch);

    let restored = Instant::now();
    super::sync_agent(d, &[])?;
    super::wait_daemonset_ready(d, READY).await?;
    eprintln!(
        "deployed: node agent back on the node: pod Ready {:.1} s after the sync back began",
        restored.elapsed().as_secs_f64()
    );
    super::wait_workload_pactos_compliant(d, "the node was selected again").await?;
    Ok(())
}
