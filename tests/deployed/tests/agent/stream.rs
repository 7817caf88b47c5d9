//! The node agent's report stream to the real observer (docs/design/node-agent.md#reports): the
//! agent streams its reports to every observer replica; each replica counts them
//! (`pacto_observer_node_reports_total{result}`) and its open streams
//! (`pacto_observer_node_agents_connected`), read here per pod through the API server's pod
//! proxy. The observer's replica count is its chart's `replicaCount`, synced for the observer's
//! release alone; the status-writer balances over the replicas
//! (`pacto_grpc_client_endpoints{backend="observer"}`).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use pacto_deployed::{Deployed, OPERATOR_NAMESPACE, PodTimeline, VerdictWatch};

use super::{AGENT_NS, NODE, READY};

/// The observer's release and Deployment.
pub const OBSERVER: &str = "pacto-observer";
/// The observer replicas the agent scenarios run with (the `local` environment has 1).
pub const OBSERVER_REPLICAS: usize = 2;
/// A token audience the agent's token does not carry (the observer's
/// `nodeAgent.tokenAudience`, flag `--node-agent-token-audience`): every stream is refused.
pub const REFUSED_AUDIENCE: &str = "pacto-observer-refused";
/// How long the agent may take to (re)open its streams: its reconnect backoff reaches 30 s.
pub const RECONNECT: Duration = Duration::from_secs(90);

/// One observer replica's node-agent figures, from its `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The pod.
    pub pod: String,
    /// Reports accepted (`pacto_observer_node_reports_total{result="accepted"}`).
    pub accepted: u64,
    /// Reports and streams refused (`…{result="refused"}`).
    pub refused: u64,
    /// Node-agent streams open now (`pacto_observer_node_agents_connected`).
    pub connected: u64,
    /// Observe calls served (`pacto_grpc_server_requests_total{method="Observe"}`).
    pub observes: u64,
}

/// The sum of the samples of `name` whose labels contain `label` (every sample when empty).
fn sample(text: &str, name: &str, label: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| label.is_empty() || l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The observer's Ready pods that are not terminating, as (name, `podIP:port` of its secure
/// metrics).
fn observer_pods(d: &Deployed) -> Result<Vec<(String, String)>> {
    let pods = d.kubectl_json(&[
        "get",
        "pods",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        &format!("app.kubernetes.io/name={OBSERVER}"),
    ])?;
    Ok(pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .map(|p| {
            let port = p["spec"]["containers"][0]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|port| port["name"] == "metrics")
                .and_then(|port| port["containerPort"].as_u64())
                .unwrap_or(u64::from(crate::metrics::SECURE_PORT));
            (
                p["metadata"]["name"].as_str().unwrap_or("?").to_owned(),
                format!("{}:{port}", p["status"]["podIP"].as_str().unwrap_or("?")),
            )
        })
        .collect())
}

/// Every Ready observer replica's figures.
pub fn observer_replicas(d: &Deployed) -> Result<Vec<Replica>> {
    observer_pods(d)?
        .into_iter()
        .map(|(pod, addr)| {
            let text = crate::metrics::scrape(&addr, "observer")?;
            Ok(Replica {
                accepted: sample(
                    &text,
                    "pacto_observer_node_reports_total",
                    "result=\"accepted\"",
                ),
                refused: sample(
                    &text,
                    "pacto_observer_node_reports_total",
                    "result=\"refused\"",
                ),
                connected: sample(&text, "pacto_observer_node_agents_connected", ""),
                observes: sample(
                    &text,
                    "pacto_grpc_server_requests_total",
                    "method=\"Observe\"",
                ),
                pod,
            })
        })
        .collect()
}

/// Waits until `replicas` observer replicas are Ready and the agent's stream is open to each
/// (connected 1) with at least one report accepted; returns their figures.
pub async fn wait_streams_open(d: &Deployed, replicas: usize) -> Result<Vec<Replica>> {
    d.wait(
        &format!("the agent's report stream open to {replicas} observer replica(s)"),
        RECONNECT,
        |d| {
            let now = observer_replicas(d).map_err(|e| e.to_string())?;
            let open =
                now.len() == replicas && now.iter().all(|r| r.connected == 1 && r.accepted > 0);
            if open {
                Ok(now)
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await
    .map_err(|e| {
        e.context(format!(
            "the agent's report stream log lines:\n{}",
            stream_log(d)
        ))
    })
}

/// The agent's log lines about its report stream and its warnings (last 5 minutes, at most 20).
pub fn stream_log(d: &Deployed) -> String {
    let log = d
        .kubectl(&[
            "logs",
            "-n",
            AGENT_NS,
            &format!("daemonset/{}", super::AGENT),
            "--since=5m",
        ])
        .unwrap_or_default();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("node-agent report")
                || l.contains("node-agent reports")
                || l.contains("WARN")
                || l.contains("ERROR")
        })
        .collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Every observer replica logged the agent's stream as opened, naming the node.
pub fn expect_stream_logged(d: &Deployed) -> Result<()> {
    for (pod, _) in observer_pods(d)? {
        let log = d.kubectl(&["logs", "-n", OPERATOR_NAMESPACE, &pod])?;
        let line = log
            .lines()
            .find(|l| l.contains("node-agent report stream opened") && l.contains(NODE))
            .with_context(|| {
                format!("observer {pod} never logged `node-agent report stream opened` for {NODE}")
            })?;
        eprintln!("deployed: node evidence: observer {pod}: {}", line.trim());
    }
    Ok(())
}

/// The status-writer's resolved observer endpoints (`pacto_grpc_client_endpoints{backend="observer"}`).
fn balanced_endpoints(d: &Deployed) -> Result<u64> {
    let addr = crate::metrics::metrics_service(d, OPERATOR_NAMESPACE, "pacto-status-writer")?;
    let text = crate::metrics::scrape(&addr, "status-writer")?;
    Ok(sample(
        &text,
        "pacto_grpc_client_endpoints",
        "backend=\"observer\"",
    ))
}

/// The observer's Deployment: `want` replicas, every one updated and available, no other pod
/// (old or terminating) left, none of `old` among them.
async fn wait_observers(d: &Deployed, want: usize, old: &[String]) -> Result<()> {
    d.wait(
        &format!("{OBSERVER}: {want} replicas updated and Ready, no other pod"),
        READY,
        |d| {
            let v = d
                .kubectl_json(&["get", "deployment", "-n", OPERATOR_NAMESPACE, OBSERVER])
                .map_err(|e| e.to_string())?;
            let s = &v["status"];
            let n = Some(want as i64);
            let settled = v["spec"]["replicas"].as_i64() == n
                && s["observedGeneration"] == v["metadata"]["generation"]
                && s["updatedReplicas"].as_i64() == n
                && s["availableReplicas"].as_i64() == n
                && s["replicas"].as_i64() == n;
            let all = d
                .kubectl(&[
                    "get",
                    "pods",
                    "-n",
                    OPERATOR_NAMESPACE,
                    "-l",
                    &format!("app.kubernetes.io/name={OBSERVER}"),
                    "-o",
                    "name",
                ])
                .map_err(|e| e.to_string())?;
            let names: Vec<&str> = all.lines().map(|l| l.trim_start_matches("pod/")).collect();
            let ready = observer_pods(d).map_err(|e| e.to_string())?;
            if settled
                && names.len() == want
                && ready.len() == want
                && !names.iter().any(|n| old.iter().any(|o| o == n))
            {
                Ok(())
            } else {
                Err(format!("status {s}, pods {names:?}"))
            }
        },
    )
    .await
}

/// `helmfile sync` of the observer's release alone at [`OBSERVER_REPLICAS`] with the chart
/// values `sets`; waits until every replica is a new pod, Ready.
pub async fn sync_observer(d: &Deployed, sets: &[&str]) -> Result<()> {
    let old: Vec<String> = observer_pods(d)?.into_iter().map(|p| p.0).collect();
    let replicas = format!("replicaCount={OBSERVER_REPLICAS}");
    let mut all = vec![replicas.as_str()];
    all.extend(sets);
    crate::sync_release(d, OBSERVER, &all)?;
    wait_observers(d, OBSERVER_REPLICAS, &old).await
}

/// The observer scaled to `replicas` through its chart (`helmfile … --selector
/// name=pacto-observer sync --set replicaCount=<n>`): that many pods Ready, the status-writer's
/// balanced client resolving that many endpoints, the agent's stream open to each replica, and
/// no Pacto's verdict changed (a `kubectl get pactos -A --watch` from before the sync), no Pacto
/// event. Prints the times.
pub async fn scale_observer(d: &Deployed, replicas: usize) -> Result<()> {
    let base = Instant::now();
    let events_before = d.pacto_events()?;
    let mut watch = VerdictWatch::start(d, None, base).await?;
    let mut pods = PodTimeline::start(d, &[OPERATOR_NAMESPACE], base)?;
    crate::sync_release(d, OBSERVER, &[&format!("replicaCount={replicas}")])?;
    wait_observers(d, replicas, &[]).await?;
    let ready = base.elapsed();
    d.wait(
        &format!("the status-writer balancing over {replicas} observer endpoint(s)"),
        Duration::from_mins(1),
        |d| {
            let n = balanced_endpoints(d).map_err(|e| e.to_string())?;
            if n == replicas as u64 {
                Ok(())
            } else {
                Err(format!("{n} endpoint(s)"))
            }
        },
    )
    .await?;
    let balanced = base.elapsed();
    let open = wait_streams_open(d, replicas).await?;
    eprintln!(
        "deployed: observer at {replicas} replica(s): Ready {:.1} s, status-writer balancing over {replicas} {:.1} s, agent stream open to each {:.1} s after the sync began: {open:?}",
        ready.as_secs_f64(),
        balanced.as_secs_f64(),
        base.elapsed().as_secs_f64()
    );
    let pactos = watch.current()?.len();
    crate::expect_no_verdict_change(
        d,
        &format!("observer scaled to {replicas} ({pactos} Pactos)"),
        &mut watch,
        &mut pods,
        &events_before,
        crate::QUIET,
    )
    .await?;
    ensure!(open.len() == replicas, "{open:?}");
    Ok(())
}
