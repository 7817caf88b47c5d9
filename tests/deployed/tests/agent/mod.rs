//! The node agent on the real node: its DaemonSet installed by `helmfile -e local sync` (with
//! [`AGENT_VALUES`]), the `NodeRuntimeObservation` and Lease it writes about real pods, the
//! admission policy with tokens bound to its real pod, collection Failed, Pod Security, and its
//! footprint (docs/design/real-node.md#node-agent); [`evidence`]: that evidence in the verdicts;
//! [`stream`]: its report stream to every observer replica; [`fleet`]: 20 Pactos across an agent
//! rollout, UDP and hostNetwork targets, a node the DaemonSet excludes.

pub mod evidence;
pub mod fleet;
pub mod stream;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pacto_deployed::{Deployed, Usage, agent_pids, clock_ticks, usage};
use serde_json::Value;

/// The agent namespace (`nodeAgent.namespace` of the local environment).
pub const AGENT_NS: &str = "pacto-node-agent";
/// The DaemonSet, its ServiceAccount and its release.
pub const AGENT: &str = "pacto-node-agent";
/// The real node's name: the agent's `NodeRuntimeObservation` and Lease are named after it.
pub const NODE: &str = "pacto-node";
/// The namespace of the agent scenarios' workloads.
pub const WORKLOAD_NS: &str = "deployed-agent";

/// The helmfile state values the tier installs the agent with: on, publishing every 5 s and the
/// observer's stale-after at 20 s (four publish intervals). Both only for time: a scenario waits
/// for a publish in seconds rather than the default 30 s, and a stopped agent reads
/// EVIDENCE_STALE after 20 s rather than the default 90 s. The warm-up is the chart's default
/// (5 minutes): pods that ran before an agent (re)start read connection coverage Partial
/// "started after pod" that long, while their listeners are Complete at once, which the agent
/// scenarios rely on (a rollout, the agent's return, the upgrade change no verdict).
pub const AGENT_VALUES: [&str; 3] = [
    "nodeAgent.enabled=true",
    "nodeAgent.publishInterval=5s",
    "nodeAgent.staleAfter=20s",
];

/// `nodeAgent.publishInterval` of [`AGENT_VALUES`].
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(5);
/// `nodeAgent.staleAfter` of [`AGENT_VALUES`].
pub const STALE_AFTER: Duration = Duration::from_secs(20);

/// The BTF path of the collection-Failed scenario: inside the agent's mount of the host's
/// `/sys/kernel/btf`, a file that does not exist.
const MISSING_BTF: &str = "/sys/kernel/btf/missing";

const READY: Duration = Duration::from_mins(3);
const PUBLISHED: Duration = Duration::from_mins(1);

/// `--state-values-set` arguments for [`AGENT_VALUES`], the tier's TLS
/// ([`crate::metrics::TLS_VALUES`]) and `extra`.
pub fn state_values<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    AGENT_VALUES
        .iter()
        .chain(&crate::metrics::TLS_VALUES)
        .chain(extra)
        .flat_map(|v| ["--state-values-set", v])
        .collect()
}

/// The agent's `NodeRuntimeObservation` (admin read).
fn observation(d: &Deployed) -> Result<Value, String> {
    d.kubectl_json(&["get", "noderuntimeobservation", "-n", AGENT_NS, NODE])
        .map_err(|e| e.to_string())
}

/// The agent's Lease `spec.renewTime`.
fn renew_time(d: &Deployed) -> Result<String, String> {
    let lease = d
        .kubectl_json(&["get", "lease", "-n", AGENT_NS, NODE])
        .map_err(|e| e.to_string())?;
    lease["spec"]["renewTime"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no renewTime: {lease}"))
}

/// The pod entry of `namespace/<name prefix>` in an observation.
fn pod_view<'a>(obs: &'a Value, namespace: &str, prefix: &str) -> Option<&'a Value> {
    obs["status"]["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            p["namespace"] == namespace && p["name"].as_str().is_some_and(|n| n.starts_with(prefix))
        })
}

/// The TCP listener ports of a pod entry.
fn listener_ports(pod: &Value) -> Vec<i64> {
    pod["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["protocol"] == "TCP")
        .filter_map(|l| l["port"].as_i64())
        .collect()
}

/// The agent's pod names.
fn agent_pods(d: &Deployed) -> Result<Vec<String>> {
    let out = d.kubectl(&[
        "get",
        "pods",
        "-n",
        AGENT_NS,
        "-l",
        &format!("app.kubernetes.io/name={AGENT}"),
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])?;
    Ok(out.split_whitespace().map(str::to_owned).collect())
}

/// Waits until the DaemonSet has rolled out its current template: one pod scheduled, updated,
/// Ready and available.
pub async fn wait_daemonset_ready(d: &Deployed, timeout: Duration) -> Result<()> {
    d.wait("DaemonSet pacto-node-agent Ready", timeout, |d| {
        let ds = d
            .kubectl_json(&["get", "daemonset", "-n", AGENT_NS, AGENT])
            .map_err(|e| e.to_string())?;
        let s = &ds["status"];
        let done = s["observedGeneration"] == ds["metadata"]["generation"]
            && s["desiredNumberScheduled"] == 1
            && s["updatedNumberScheduled"] == 1
            && s["numberReady"] == 1
            && s["numberAvailable"] == 1
            && s["numberUnavailable"].as_i64().unwrap_or(0) == 0;
        if done {
            Ok(())
        } else {
            Err(format!("status {s}"))
        }
    })
    .await
    .map_err(|e| {
        let pods = d
            .kubectl(&["describe", "daemonset", "-n", AGENT_NS, AGENT])
            .unwrap_or_default();
        let logs = d
            .kubectl(&[
                "logs",
                "-n",
                AGENT_NS,
                &format!("daemonset/{AGENT}"),
                "--tail=30",
            ])
            .unwrap_or_default();
        e.context(format!("{pods}\n{logs}"))
    })
}

/// Waits until the Lease's renewTime differs from (is later than) `after`; returns it.
async fn wait_lease_renewed(d: &Deployed, after: &str) -> Result<String> {
    d.wait("the agent's Lease renewed", PUBLISHED, |d| {
        let now = renew_time(d)?;
        if now.as_str() > after {
            Ok(now)
        } else {
            Err(format!("renewTime still {now}"))
        }
    })
    .await
}

/// The agent's DaemonSet pod is Ready on the real node (whose default Pod Security level is
/// restricted) with no `FailedCreate` event in its namespace, and its process holds only the
/// default capabilities under a seccomp filter ([`least_privileged_process`]); its
/// `NodeRuntimeObservation/pacto-node` reads `collection.state: Running` with `kernel.btf: true`
/// and lists a real workload pod (started after the agent) with a TCP listener on its container
/// port 8080, coverage Complete; its `Lease/pacto-node` is renewed (renewTime advances). Prints
/// how long the workload's listener took to appear after the workload was Available, and every
/// pod's coverage.
pub async fn the_agent_sees_real_pods(d: &Deployed) -> Result<()> {
    wait_daemonset_ready(d, READY).await?;
    // Issue 35 item 3: the API server's default Pod Security level is restricted
    // (docs/design/real-node.md#pod-security) and helmfile's presync hook labelled the agent
    // namespace before helm created the DaemonSet, so no pod create was ever refused.
    let events = d.kubectl(&["get", "events", "-n", AGENT_NS])?;
    ensure!(
        !events.contains("FailedCreate"),
        "the agent's pods were refused on the first install:\n{events}"
    );
    let ns = d.kubectl_json(&["get", "namespace", AGENT_NS])?;
    eprintln!(
        "deployed: node agent: DaemonSet Ready with no FailedCreate in {AGENT_NS} (labels {})",
        ns["metadata"]["labels"]
    );
    let pods = agent_pods(d)?;
    ensure!(pods.len() == 1, "agent pods {pods:?}");
    let pod = d.kubectl_json(&["get", "pod", "-n", AGENT_NS, &pods[0]])?;
    ensure!(
        pod["spec"]["nodeName"] == NODE && pod["spec"]["hostPID"] == true,
        "agent pod {:#}",
        pod["spec"]
    );
    least_privileged_process(agent_pid()?)?;

    d.kubectl(&["create", "namespace", WORKLOAD_NS])?;
    d.apply(WORKLOAD_NS, &super::sample_workload("agent-web", "{}"))?;
    d.wait_available(WORKLOAD_NS, "agent-web", READY).await?;
    let available = Instant::now();
    let obs = d
        .wait(
            "the observation lists agent-web's listener on 8080",
            PUBLISHED,
            |d| {
                let obs = observation(d)?;
                let st = &obs["status"];
                if st["collection"]["state"] != "Running" {
                    return Err(format!("collection {}", st["collection"]));
                }
                match pod_view(&obs, WORKLOAD_NS, "agent-web-") {
                    Some(p) if listener_ports(p).contains(&8080) => Ok(obs),
                    Some(p) => Err(format!("agent-web listeners {}", p["listeners"])),
                    None => Err(format!("no agent-web pod in {}", st["pods"])),
                }
            },
        )
        .await?;
    eprintln!(
        "deployed: node agent: agent-web's listener 8080 in the observation {:.1} s after the Deployment was Available",
        available.elapsed().as_secs_f64()
    );
    let st = &obs["status"];
    ensure!(st["kernel"]["btf"] == true, "kernel {}", st["kernel"]);
    ensure!(
        st["kernel"]["release"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "kernel {}",
        st["kernel"]
    );
    ensure!(obs["spec"]["nodeName"] == NODE, "spec {:#}", obs["spec"]);
    let web = pod_view(&obs, WORKLOAD_NS, "agent-web-").context("agent-web")?;
    ensure!(
        web["coverage"] == "Complete",
        "a pod started after the agent must be covered completely: {web:#}"
    );
    for line in coverage_lines(&obs) {
        eprintln!("deployed: node agent: pod {line}");
    }

    let first = renew_time(d).map_err(anyhow::Error::msg)?;
    let second = wait_lease_renewed(d, &first).await?;
    eprintln!("deployed: node agent: Lease renewed {first} -> {second}");
    Ok(())
}

/// CapEff of CAP_BPF (39), CAP_PERFMON (38) and CAP_SYS_PTRACE (19): the chart's default
/// capabilities mode (docs/design/node-agent.md#admission).
const AGENT_CAPABILITIES: u64 = (1 << 39) | (1 << 38) | (1 << 19);

/// Issue 34 item 8 on the real node: the agent's process (as the host sees it) holds exactly
/// BPF, PERFMON and SYS_PTRACE, runs under a seccomp filter (the runtime's default profile) with
/// no_new_privs, and still loaded its program (the caller checks collection Running).
fn least_privileged_process(pid: u32) -> Result<()> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |key: &str| -> Result<&str> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .with_context(|| format!("{key} in /proc/{pid}/status"))
    };
    let cap_eff = u64::from_str_radix(field("CapEff:")?, 16).context("CapEff")?;
    let (seccomp, no_new_privs) = (field("Seccomp:")?, field("NoNewPrivs:")?);
    eprintln!(
        "deployed: node agent: process {pid}: CapEff {cap_eff:016x}, Seccomp {seccomp}, NoNewPrivs {no_new_privs}"
    );
    ensure!(
        cap_eff == AGENT_CAPABILITIES,
        "the agent's CapEff is {cap_eff:016x}, not {AGENT_CAPABILITIES:016x} (BPF, PERFMON, SYS_PTRACE)"
    );
    ensure!(
        seccomp == "2" && no_new_privs == "1",
        "the agent runs without a seccomp filter or without no_new_privs: Seccomp {seccomp}, NoNewPrivs {no_new_privs}"
    );
    Ok(())
}

/// Issue 16, "a listener closed in a real pod": busybox `httpd` listening on 9000 in a pod whose
/// main process is `sleep`; killing httpd closes the listener, and the pod's entry in the
/// observation drops port 9000. Three runs (httpd restarted between them); prints each time from
/// the kill to the observation without the listener (publish interval 5 s).
pub async fn a_closed_listener_leaves_the_observation(d: &Deployed) -> Result<()> {
    d.apply(
        WORKLOAD_NS,
        r#"apiVersion: v1
kind: Pod
metadata: {name: listener}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: app
      image: localhost/busybox:1.35
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "httpd -p 9000 -h /tmp && exec sleep 1000000"]
"#,
    )?;
    d.kubectl(&[
        "wait",
        "-n",
        WORKLOAD_NS,
        "--for=condition=Ready",
        "pod/listener",
        "--timeout=120s",
    ])?;
    let mut took = Vec::new();
    for run in 1..=3 {
        if run > 1 {
            d.kubectl(&[
                "exec",
                "-n",
                WORKLOAD_NS,
                "listener",
                "--",
                "httpd",
                "-p",
                "9000",
                "-h",
                "/tmp",
            ])?;
        }
        d.wait(
            "the observation lists the listener pod's port 9000",
            PUBLISHED,
            |d| {
                let obs = observation(d)?;
                match pod_view(&obs, WORKLOAD_NS, "listener") {
                    Some(p) if listener_ports(p).contains(&9000) => Ok(()),
                    Some(p) => Err(format!("listeners {}", p["listeners"])),
                    None => Err(format!("no listener pod in {}", obs["status"]["pods"])),
                }
            },
        )
        .await?;
        d.kubectl(&[
            "exec",
            "-n",
            WORKLOAD_NS,
            "listener",
            "--",
            "killall",
            "httpd",
        ])?;
        let killed = Instant::now();
        d.wait(
            "the closed listener gone from the observation",
            PUBLISHED,
            |d| {
                let obs = observation(d)?;
                match pod_view(&obs, WORKLOAD_NS, "listener") {
                    Some(p) if !listener_ports(p).contains(&9000) => Ok(()),
                    Some(p) => Err(format!("listeners {}", p["listeners"])),
                    None => Err(format!("no listener pod in {}", obs["status"]["pods"])),
                }
            },
        )
        .await?;
        took.push(killed.elapsed().as_secs_f64());
    }
    eprintln!(
        "deployed: node agent: listener closed -> gone from the NodeRuntimeObservation (publish interval 5 s, polled every 0.5 s): {}",
        took.iter()
            .map(|s| format!("{s:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// A kubeconfig file that authenticates with `token` only (no client certificate, so the token
/// decides who the caller is), next to the admin one.
fn token_kubeconfig(d: &Deployed, name: &str, token: &str) -> Result<std::path::PathBuf> {
    let cp = d.node().control_plane();
    let dir = cp.dir();
    let ca = dir.join(format!("{name}-ca.crt"));
    std::fs::write(&ca, cp.ca_pem())?;
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        cp.server(),
        ca.display(),
        token.trim()
    );
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, yaml)?;
    Ok(path)
}

/// `kubectl create -n pacto-node-agent -f -` of `yaml` with `kubeconfig`; returns whether it
/// succeeded and both streams.
fn create_as(d: &Deployed, kubeconfig: &Path, yaml: &str) -> Result<(bool, String)> {
    let mut cmd = d.node().control_plane().kubectl_with(kubeconfig)?;
    cmd.args(["create", "-n", AGENT_NS, "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().context("starting kubectl create")?;
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, yaml.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

fn lease_yaml(name: &str) -> String {
    format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {name}}}\nspec: {{holderIdentity: intruder, leaseDurationSeconds: 40}}\n"
    )
}

fn observation_yaml(name: &str) -> String {
    format!(
        "apiVersion: pacto.trianalab.io/v1alpha1\nkind: NodeRuntimeObservation\nmetadata: {{name: {name}}}\nspec: {{nodeName: {name}}}\n"
    )
}

/// Issue 16, "a write refused by the admission policy": a token bound to the agent's real pod
/// (`kubectl create token … --bound-object-kind Pod --bound-object-name <agent pod>`, so it
/// names `pacto-node`) may not create the Lease or the `NodeRuntimeObservation` of another node
/// ("may only write the objects named after its node"); a token of the same ServiceAccount
/// bound to nothing may not write even its node's Lease ("carries no node name"). Both are the
/// guide's messages.
pub fn the_admission_policy_refuses_other_nodes(d: &Deployed) -> Result<()> {
    let pods = agent_pods(d)?;
    let pod = pods.first().context("no agent pod")?;
    let bound = d.kubectl(&[
        "create",
        "token",
        AGENT,
        "-n",
        AGENT_NS,
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        pod,
    ])?;
    let bound = token_kubeconfig(d, "agent-bound", &bound)?;
    for (what, yaml) in [
        ("Lease", lease_yaml("another-node")),
        ("NodeRuntimeObservation", observation_yaml("another-node")),
    ] {
        let (ok, out) = create_as(d, &bound, &yaml)?;
        ensure!(
            !ok && out.contains("may only write the objects named after its node"),
            "the pod-bound token writing the {what} of another node: {out}"
        );
        eprintln!(
            "deployed: node agent: {what} another-node refused: {}",
            out.trim()
        );
    }
    let unbound = d.kubectl(&["create", "token", AGENT, "-n", AGENT_NS])?;
    let unbound = token_kubeconfig(d, "agent-unbound", &unbound)?;
    let (ok, out) = create_as(d, &unbound, &lease_yaml("unbound-node"))?;
    ensure!(
        !ok && out.contains("carries no node name"),
        "a token without node name writing a Lease: {out}"
    );
    eprintln!(
        "deployed: node agent: unbound token refused: {}",
        out.trim()
    );
    Ok(())
}

/// `helmfile sync` of the agent's release alone with [`AGENT_VALUES`] and `extra` (state
/// values), and the chart values `sets` (`--set`).
fn sync_agent_with(d: &Deployed, extra: &[&str], sets: &[&str]) -> Result<()> {
    let mut args = vec!["-e", "local"];
    args.extend(state_values(extra));
    args.extend(["--selector", "name=pacto-node-agent", "sync"]);
    for set in sets {
        args.extend(["--set", set]);
    }
    d.helmfile(&args)?;
    Ok(())
}

/// `helmfile sync` of the agent's release alone with [`AGENT_VALUES`] and `extra`.
fn sync_agent(d: &Deployed, extra: &[&str]) -> Result<()> {
    sync_agent_with(d, extra, &[])
}

/// The agent's pods as (name, Ready), terminating ones left out.
pub fn agent_pod_states(d: &Deployed) -> Result<Vec<(String, bool)>> {
    d.pod_readiness(AGENT_NS, &format!("app.kubernetes.io/name={AGENT}"))
}

/// Waits until the DaemonSet's generation is past `before` and its new template is rolled out
/// ([`wait_daemonset_ready`]), with no other agent pod left.
pub async fn wait_daemonset_rolled(d: &Deployed, before: i64) -> Result<()> {
    d.wait("the agent DaemonSet's new generation", READY, |d| {
        let ds = d
            .kubectl_json(&["get", "daemonset", "-n", AGENT_NS, AGENT])
            .map_err(|e| e.to_string())?;
        let generation = ds["metadata"]["generation"].as_i64().unwrap_or(0);
        if generation > before {
            Ok(())
        } else {
            Err(format!("generation {generation}"))
        }
    })
    .await?;
    wait_daemonset_ready(d, READY).await?;
    d.wait("one agent pod left", READY, |d| {
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
        if all.lines().count() == 1 {
            Ok(())
        } else {
            Err(all)
        }
    })
    .await
}

/// Waits for one publish of the observation after now (its `lastPublished` moves on).
pub async fn wait_published(d: &Deployed) -> Result<()> {
    let first = observation(d).map_err(anyhow::Error::msg)?["status"]["lastPublished"].clone();
    d.wait("the next publish of the observation", PUBLISHED, |d| {
        let now = observation(d)?["status"]["lastPublished"].clone();
        if now != first && !now.is_null() {
            Ok(())
        } else {
            Err(format!("lastPublished still {now}"))
        }
    })
    .await
}

/// One line per pod of the observation: coverage of connections and of listeners, hostNetwork,
/// listener ports.
fn coverage_lines(obs: &Value) -> Vec<String> {
    obs["status"]["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{}/{} coverage {} {} listenerCoverage {} {}{} listeners {:?}, {} connection entries",
                p["namespace"].as_str().unwrap_or("?"),
                p["name"].as_str().unwrap_or("?"),
                p["coverage"].as_str().unwrap_or("-"),
                p["partialReason"].as_str().unwrap_or(""),
                p["listenerCoverage"].as_str().unwrap_or("-"),
                p["listenerPartialReason"].as_str().unwrap_or(""),
                if p["hostNetwork"] == true {
                    " hostNetwork"
                } else {
                    ""
                },
                listener_ports(p),
                p["connections"].as_array().map_or(0, Vec::len)
            )
        })
        .collect()
}

/// Waits until every Pacto of [`WORKLOAD_NS`] is `Compliant` again (after a scenario that made
/// the agent's evidence unusable on purpose); prints how long it took.
pub async fn wait_workload_pactos_compliant(d: &Deployed, after: &str) -> Result<()> {
    let started = Instant::now();
    d.wait(
        &format!("every Pacto of {WORKLOAD_NS} Compliant after {after}"),
        READY,
        |d| {
            let list = d
                .kubectl_json(&["get", "pactos", "-n", WORKLOAD_NS])
                .map_err(|e| e.to_string())?;
            let not: Vec<String> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["status"]["contractStatus"] != "Compliant")
                .map(|p| {
                    format!(
                        "{}={}",
                        p["metadata"]["name"].as_str().unwrap_or("?"),
                        p["status"]["contractStatus"].as_str().unwrap_or("-")
                    )
                })
                .collect();
            if not.is_empty() {
                Ok(())
            } else {
                Err(format!("not Compliant: {not:?}"))
            }
        },
    )
    .await?;
    eprintln!(
        "deployed: node evidence: every Pacto of {WORKLOAD_NS} Compliant {:.1} s after {after}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Issue 16, "Collection Failed": the agent with its BTF path pointed at a missing file
/// (`nodeAgent.btfPath`) publishes `collection.state: Failed`, reason `BTFUnavailable` (the
/// message names the path), `kernel.btf: false`, no pods, and keeps renewing its Lease; the
/// Pacto of [`evidence`] reads COLLECTION_FAILED, not EVIDENCE_STALE. Synced back, it is Running
/// again and the Pacto Compliant (then deleted).
pub async fn collection_failed_keeps_the_heartbeat(d: &Deployed) -> Result<()> {
    let started = Instant::now();
    sync_agent(d, &[&format!("nodeAgent.btfPath={MISSING_BTF}")])?;
    wait_daemonset_ready(d, READY).await?;
    let obs = d
        .wait("the observation reads Failed", PUBLISHED, |d| {
            let obs = observation(d)?;
            if obs["status"]["collection"]["state"] == "Failed" {
                Ok(obs)
            } else {
                Err(format!("collection {}", obs["status"]["collection"]))
            }
        })
        .await?;
    eprintln!(
        "deployed: node agent: BTF path {MISSING_BTF} -> Failed in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        obs["status"]["collection"]
    );
    let st = &obs["status"];
    ensure!(
        st["collection"]["reason"] == "BTFUnavailable",
        "collection {}",
        st["collection"]
    );
    ensure!(
        st["collection"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(MISSING_BTF)),
        "collection {}",
        st["collection"]
    );
    ensure!(st["kernel"]["btf"] == false, "kernel {}", st["kernel"]);
    ensure!(st["podCount"] == 0, "podCount {}", st["podCount"]);
    let first = renew_time(d).map_err(anyhow::Error::msg)?;
    let renewed = wait_lease_renewed(d, &first).await?;
    let still = observation(d).map_err(anyhow::Error::msg)?;
    ensure!(
        still["status"]["collection"]["state"] == "Failed",
        "{}",
        still["status"]["collection"]
    );
    eprintln!("deployed: node agent: Lease renewed while Failed ({first} -> {renewed})");
    evidence::collection_failed_in_the_verdict(d, started).await?;

    let started = Instant::now();
    sync_agent(d, &[])?;
    wait_daemonset_ready(d, READY).await?;
    d.wait("the observation Running again", PUBLISHED, |d| {
        let obs = observation(d)?;
        let st = &obs["status"];
        if st["collection"]["state"] == "Running" && st["kernel"]["btf"] == true {
            Ok(())
        } else {
            Err(format!(
                "collection {}, kernel {}",
                st["collection"], st["kernel"]
            ))
        }
    })
    .await?;
    eprintln!(
        "deployed: node agent: back to Running in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    evidence::collection_running_again(d, started).await?;
    wait_workload_pactos_compliant(d, "collection Running again").await
}

const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// Issue 16, "DaemonSet with no pods": the agent namespace labelled
/// `pod-security.kubernetes.io/enforce=restricted` and the agent pod deleted ⇒ the DaemonSet
/// controller cannot recreate it, and `kubectl describe daemonset pacto-node-agent` shows the
/// admission refusal; the status-writer's next sync (every minute) sets the label back to
/// privileged and the pod is Ready again. Prints both times.
pub async fn pod_security_refusal_is_healed(d: &Deployed) -> Result<()> {
    let started = Instant::now();
    // The status-writer may restore the label between the label and the refusal (its sync
    // runs every minute): then the pod is admitted, and the label is set again.
    let mut refused = None;
    for _ in 0..3 {
        d.kubectl(&[
            "label",
            "namespace",
            AGENT_NS,
            &format!("{PSA_ENFORCE}=restricted"),
            "--overwrite",
        ])?;
        d.kubectl(&[
            "delete",
            "pods",
            "-n",
            AGENT_NS,
            "-l",
            &format!("app.kubernetes.io/name={AGENT}"),
            "--wait=false",
        ])?;
        let seen = d
            .wait(
                "describe daemonset shows the admission refusal",
                Duration::from_secs(30),
                |d| {
                    let text = d
                        .kubectl(&["-n", AGENT_NS, "describe", "daemonset", AGENT])
                        .map_err(|e| e.to_string())?;
                    if text.contains("violates PodSecurity") {
                        Ok(text)
                    } else {
                        Err(text)
                    }
                },
            )
            .await;
        match seen {
            Ok(text) => {
                refused = Some(text);
                break;
            }
            Err(e) => eprintln!("deployed: node agent: no refusal yet, labelling again: {e:#}"),
        }
    }
    let Some(text) = refused else {
        bail!("the restricted label never refused the agent pod");
    };
    let line = text
        .lines()
        .find(|l| l.contains("violates PodSecurity"))
        .unwrap_or_default();
    eprintln!(
        "deployed: node agent: refusal in describe after {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        line.trim()
    );
    ensure!(
        text.contains("FailedCreate") && text.contains("restricted"),
        "describe daemonset:\n{text}"
    );

    let labelled = Instant::now();
    d.wait(
        "the status-writer restores the privileged label",
        Duration::from_mins(2),
        |d| {
            let ns = d
                .kubectl_json(&["get", "namespace", AGENT_NS])
                .map_err(|e| e.to_string())?;
            let labels = &ns["metadata"]["labels"];
            if labels[PSA_ENFORCE] == "privileged" {
                Ok(())
            } else {
                Err(format!("labels {labels}"))
            }
        },
    )
    .await?;
    eprintln!(
        "deployed: node agent: label restored {:.1} s after the refusal",
        labelled.elapsed().as_secs_f64()
    );
    let logs = d.kubectl(&[
        "logs",
        "-n",
        super::OPERATOR_NAMESPACE,
        "deployment/pacto-operator",
    ])?;
    ensure!(
        logs.lines()
            .any(|l| l.contains("node-agent") && l.contains(AGENT_NS)),
        "no status-writer log line names node-agent and the namespace:\n{logs}"
    );
    // The DaemonSet controller retries with its own backoff (up to minutes after a minute of
    // refusals).
    wait_daemonset_ready(d, Duration::from_mins(5)).await?;
    eprintln!(
        "deployed: node agent: pod Ready again {:.1} s after the label came back",
        labelled.elapsed().as_secs_f64()
    );
    // The agent was away longer than stale-after: its Pactos read EVIDENCE_STALE meanwhile.
    wait_workload_pactos_compliant(d, "the agent pod came back").await
}

/// The host pid of the one agent process (it runs with hostPID; the test runs on the host).
fn agent_pid() -> Result<u32> {
    match agent_pids().as_slice() {
        [pid] => Ok(*pid),
        other => bail!("pacto-node-agent processes on the host: {other:?}"),
    }
}

/// The idle window of the footprint benchmark: `PACTO_DEPLOYED_FOOTPRINT_SECS` (default 20 s;
/// 60 for the figures in docs/design/real-node.md).
fn footprint_secs() -> u64 {
    std::env::var("PACTO_DEPLOYED_FOOTPRINT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Issue 15's footprint benchmark, printed, not asserted: the agent's RSS (VmRSS, VmHWM) and CPU
/// (utime + stime) idle, then while the workload pod opens connections to itself in a loop
/// (busybox `wget` to its own `/healthz`), and the agent image's archive size.
pub async fn footprint(d: &Deployed, archives: &[std::path::PathBuf]) -> Result<()> {
    let pid = agent_pid()?;
    let hz = clock_ticks();
    let secs = footprint_secs();
    let Usage {
        rss_kib: rss0,
        ticks: cpu0,
        ..
    } = usage(pid)?;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let Usage {
        rss_kib: rss1,
        hwm_kib: hwm1,
        ticks: cpu1,
    } = usage(pid)?;
    let idle = t0.elapsed().as_secs_f64();
    eprintln!(
        "deployed: node agent footprint: idle {idle:.0} s: VmRSS {:.1} -> {:.1} MiB, VmHWM {:.1} MiB, CPU {:.2}% of one core",
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        hwm1 as f64 / 1024.0,
        (cpu1 - cpu0) as f64 / hz / idle * 100.0
    );

    let script = format!(
        "end=$(($(date +%s)+{secs})); n=0; while [ $(date +%s) -lt $end ]; do wget -q -O /dev/null http://127.0.0.1:8080/healthz; n=$((n+1)); done; echo $n"
    );
    let t1 = Instant::now();
    let out = d.kubectl(&[
        "exec",
        "-n",
        WORKLOAD_NS,
        "deployment/agent-web",
        "--",
        "sh",
        "-c",
        &script,
    ])?;
    let load = t1.elapsed().as_secs_f64();
    let Usage {
        rss_kib: rss2,
        hwm_kib: hwm2,
        ticks: cpu2,
    } = usage(pid)?;
    let connections: f64 = out.trim().parse().unwrap_or(0.0);
    eprintln!(
        "deployed: node agent footprint: load {load:.0} s, {connections:.0} connections ({:.0}/s): VmRSS {:.1} MiB, VmHWM {:.1} MiB, CPU {:.2}% of one core",
        connections / load,
        rss2 as f64 / 1024.0,
        hwm2 as f64 / 1024.0,
        (cpu2 - cpu1) as f64 / hz / load * 100.0
    );
    for a in archives
        .iter()
        .filter(|a| a.to_string_lossy().contains("node-agent"))
    {
        let size = std::fs::metadata(a).map_or(0, |m| m.len());
        eprintln!(
            "deployed: node agent image archive {}: {:.1} MiB",
            a.display(),
            size as f64 / 1024.0 / 1024.0
        );
    }
    Ok(())
}
