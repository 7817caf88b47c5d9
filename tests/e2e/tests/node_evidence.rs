//! The guide's "Node agent evidence is missing" and "Chasing the evidence" sections end to end,
//! with node evidence on (`--node-evidence`, a short `--node-evidence-stale-after`). The test plays
//! the node agent: it writes the simulated node's `NodeRuntimeObservation` (status through the
//! status subresource) and its Lease in the agent namespace, renewing both every second while the
//! agent "runs", exactly as the agent publishes them; the observer reads them through its chart's
//! node-agent Role (rendered with `nodeAgent.enabled`).
//!
//! One story on one Pacto whose two interfaces only node evidence can confirm or contradict:
//! `http` (bound by name, Ready endpoints: node evidence qualifies it) and `admin` (bound to a
//! port number the Service does not have: Kubernetes alone reads EVIDENCE_INSUFFICIENT, node
//! evidence decides it). Found → agent stops (EVIDENCE_STALE, detectedAt frozen while
//! `metadata.generation` moves on) → agent back (Compliant) → collection Failed (COLLECTION_FAILED,
//! not STALE) → a Partial pod view (EVIDENCE_INSUFFICIENT) → the listener closes (Unknown inside
//! the stabilization window, then NonCompliant `INTERFACE_ABSENT`). A finding the agent's data
//! decided carries `collector: k8s-observer+ebpf`; one whose agent data was unusable (stale,
//! failed, partial) carries `k8s-observer` (docs/design/observation.md#node-evidence).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use pacto_api::NodeRuntimeObservation;
use pacto_api::testing::PactoBuilder;
use pacto_e2e::{RELEASE, STATUS_DEADLINE, Stack, StackOptions};
use pacto_runtime::testing::within;
use serde_json::{Value, json};

const AGENT_MANAGER: &str = "pacto-e2e-node-agent";

/// The agent's published state: the NRO status body without `lastPublished` (set at each write),
/// or `None` while the agent is stopped.
type AgentState = Option<Value>;

/// The test's node agent: while its state is `Some`, a task renews the node's Lease and publishes
/// its NodeRuntimeObservation every second.
struct Agent {
    state: tokio::sync::watch::Sender<AgentState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

impl Agent {
    fn start(client: kube::Client, namespace: &str, node: &str) -> Self {
        let (state, mut rx) = tokio::sync::watch::channel::<AgentState>(None);
        let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let observations: Api<NodeRuntimeObservation> = Api::namespaced(client, namespace);
        let node = node.to_owned();
        let task = tokio::spawn(async move {
            let params = PatchParams::apply(AGENT_MANAGER).force();
            loop {
                let current = rx.borrow_and_update().clone();
                if let Some(status) = current {
                    let stamp = now();
                    let lease = json!({
                        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": node},
                        "spec": {
                            "holderIdentity": format!("pacto-node-agent-{node}"),
                            "leaseDurationSeconds": 40,
                            "renewTime": stamp.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
                        },
                    });
                    let object = json!({
                        "apiVersion": "pacto.trianalab.io/v1alpha1",
                        "kind": "NodeRuntimeObservation",
                        "metadata": {"name": node},
                        "spec": {"nodeName": node},
                    });
                    let mut status = status.clone();
                    status["lastPublished"] =
                        json!(stamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                    status["podCount"] = json!(status["pods"].as_array().map_or(0, Vec::len));
                    let published = json!({
                        "apiVersion": "pacto.trianalab.io/v1alpha1",
                        "kind": "NodeRuntimeObservation",
                        "metadata": {"name": node},
                        "status": status,
                    });
                    let written = async {
                        leases.patch(&node, &params, &Patch::Apply(&lease)).await?;
                        observations
                            .patch(&node, &params, &Patch::Apply(&object))
                            .await?;
                        observations
                            .patch_status(&node, &params, &Patch::Apply(&published))
                            .await?;
                        Ok::<_, kube::Error>(())
                    };
                    if let Err(error) = written.await {
                        eprintln!("test node agent: publishing failed: {error}");
                    }
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    changed = rx.changed() => if changed.is_err() { return },
                }
            }
        });
        Self { state, task }
    }

    /// Publishes `status` from now on (`None`: stops renewing; the objects stay as they were).
    fn set(&self, status: AgentState) {
        self.state.send_replace(status);
    }
}

/// A running agent's status: collection Running, one pod with `coverage` and `listeners`.
fn running(uid: &str, pod: &str, namespace: &str, coverage: &str, listeners: &[u16]) -> Value {
    let mut view = json!({
        "uid": uid, "namespace": namespace, "name": pod, "coverage": coverage,
        "listeners": listeners.iter().map(|p| json!({"protocol": "TCP", "port": p, "address": "0.0.0.0"})).collect::<Vec<_>>(),
    });
    if coverage == "Partial" {
        view["partialReason"] = json!("ring buffer overflow");
    }
    json!({
        "agentVersion": "e2e",
        "kernel": {"release": "6.8.0", "btf": true},
        "collection": {"state": "Running"},
        "pods": [view],
    })
}

/// `status` with the pod's outbound TCP connections to `peers` (`(ip, port)`).
fn connecting(mut status: Value, peers: &[(String, u16)]) -> Value {
    status["pods"][0]["connections"] = peers
        .iter()
        .map(|(ip, port)| {
            json!({"direction": "outbound", "protocol": "TCP", "peerIP": ip, "peerPort": port})
        })
        .collect();
    status
}

/// The workload: one replica whose container listens on 8080 (`http`) and 9090 (`admin`), a
/// Service exposing only `http` (80 → 8080); and the selector-less Service `db` of the declared
/// dependency no Pacto manages (the API server gives it a ClusterIP).
fn workload(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: app\n          image: registry.local/{name}:1\n          ports:\n            - {{name: http, containerPort: 8080}}\n            - {{name: admin, containerPort: 9090}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector: {{app: {name}}}\n  ports:\n    - {{name: http, port: 80, targetPort: 8080}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: db\nspec:\n  ports:\n    - {{port: 5432}}\n"
    )
}

fn pacto(name: &str, check_interval: i32) -> String {
    let contract = format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: 1.0.0\ninterfaces:\n  - name: http\n    type: openapi\n    ref: interfaces/openapi.yaml\n  - name: admin\n    type: openapi\n    ref: interfaces/admin.yaml\ndependencies:\n  - name: db\n    ref: oci://registry.local/db:1.0.0@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n    required: false\n    compatibility: ^1.0.0\n"
    );
    PactoBuilder::inline(name, &contract)
        .target(
            serde_json::from_value(json!({
                "serviceName": name,
                "interfaceBindings": [
                    {"interface": "http", "servicePort": "http"},
                    {"interface": "admin", "servicePort": 9090},
                ],
            }))
            .unwrap(),
        )
        .check_interval(check_interval)
        .manifest()
}

/// Renders the observer chart with `nodeAgent.enabled` for `agents` and applies its Role and
/// RoleBinding in the agent namespace (read access to NodeRuntimeObservations and Leases) and
/// those in `kube-system` and `default` (the cluster DNS and API server Services).
async fn grant_node_agent_reads(stack: &Stack, agents: &str) {
    let tools = pacto_chart_tests::Tools::new().unwrap();
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/pacto-observer");
    let text = tools
        .run(
            "helm",
            [
                "template".to_owned(),
                RELEASE.to_owned(),
                chart.display().to_string(),
                format!("--namespace={}", stack.namespace),
                format!("--set=controller.watchNamespace={}", stack.namespace),
                "--set=nodeAgent.enabled=true".to_owned(),
                format!("--set=nodeAgent.namespace={agents}"),
            ],
        )
        .unwrap();
    let docs: Vec<String> = pacto_chart_tests::documents(&text)
        .unwrap()
        .into_iter()
        .filter(|d| {
            matches!(d["kind"].as_str(), Some("Role" | "RoleBinding"))
                && [agents, "kube-system", "default"]
                    .iter()
                    .any(|ns| d["metadata"]["namespace"] == *ns)
        })
        .map(|d| serde_norway::to_string(&d).unwrap())
        .collect();
    assert_eq!(
        docs.len(),
        6,
        "the chart's node-agent Role and RoleBinding, and the reads of the cluster DNS and API \
         server Services (undeclared peers leave them out)"
    );
    stack
        .kubectl(&["apply", "-f", "-"], Some(&docs.join("---\n")))
        .await
        .unwrap();
}

/// Installs the NodeRuntimeObservation CRD of the pacto-crds chart (the suite's control plane
/// installs the Pacto CRDs only) and waits until it is served.
async fn install_node_observation_crd(cp: &pacto_testenv::ControlPlane) {
    let crd = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../charts/pacto-crds/templates/pacto.trianalab.io_noderuntimeobservations.yaml");
    for args in [
        vec![
            "apply".to_owned(),
            "--server-side".into(),
            "-f".into(),
            crd.display().to_string(),
        ],
        vec![
            "wait".to_owned(),
            "--for=condition=Established".into(),
            "--timeout=60s".into(),
            "crd/noderuntimeobservations.pacto.trianalab.io".into(),
        ],
    ] {
        let output = tokio::process::Command::from(cp.kubectl().unwrap())
            .args(&args)
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The finding about `subject`, if any.
fn finding<'a>(pacto: &'a Value, subject: &str) -> Option<&'a Value> {
    pacto["status"]["findings"]
        .as_array()?
        .iter()
        .find(|f| f["subject"] == subject)
}

/// Whether the Pacto has a finding `code` about `subject` with the node-agent collector.
fn has(pacto: &Value, subject: &str, code: &str) -> bool {
    // Who decided: the agent's data (INTERFACE_ABSENT), or Kubernetes alone because the agent's
    // data was unusable (the three unknowns).
    let collector = match code {
        "EVIDENCE_STALE" | "COLLECTION_FAILED" | "EVIDENCE_INSUFFICIENT" => "k8s-observer",
        _ => "k8s-observer+ebpf",
    };
    finding(pacto, subject)
        .is_some_and(|f| f["code"] == code && f["evidenceRefs"][0]["collector"] == collector)
}

/// A Service's ClusterIP.
async fn cluster_ip(stack: &Stack, namespace: &str, service: &str) -> String {
    stack
        .kubectl(
            &[
                "get",
                "service",
                service,
                "-n",
                namespace,
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
            None,
        )
        .await
        .unwrap()
}

/// Waits until the status-writer's `pacto_undeclared_peers` sample with `labels` reads `value`
/// (`None`: no such sample).
async fn wait_gauge(stack: &Stack, labels: &str, value: Option<u64>) {
    within("the undeclared-peer gauge", STATUS_DEADLINE, || async {
        let lines = stack
            .metric_lines("status-writer", "pacto_undeclared_peers")
            .await
            .unwrap_or_default();
        let sample = lines
            .iter()
            .find_map(|l| l.strip_prefix(labels))
            .and_then(|v| v.trim().parse::<u64>().ok());
        if sample == value {
            Ok(())
        } else {
            Err(format!("{lines:?}"))
        }
    })
    .await
    .unwrap();
}

/// Nudges (as the guide says) until `check` holds.
async fn nudge_until(
    stack: &Stack,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let nudges = std::sync::atomic::AtomicU32::new(0);
    within(what, STATUS_DEADLINE, || async {
        let pacto = stack.get_pacto(name).await.unwrap();
        if check(&pacto) {
            return Ok(pacto);
        }
        let n = nudges.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        stack
            .nudge(name, &format!("node-evidence-{n}"))
            .await
            .unwrap();
        Err(serde_norway::to_string(&pacto["status"]).unwrap_or_default())
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}\n{}", stack.logs()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_evidence_found_stale_recovered_failed_partial_and_absent() {
    let cp = pacto_e2e::cluster().await.unwrap();
    install_node_observation_crd(cp).await;
    let agents = cp.create_namespace("agents").await.unwrap();
    let stack = Stack::start_with(StackOptions {
        observer_args: vec![
            "--node-evidence".into(),
            "--node-evidence-stale-after=5s".into(),
            format!("--node-agent-namespace={agents}"),
        ],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    grant_node_agent_reads(&stack, &agents).await;
    let node = stack.simulator.nodes()[0].clone();
    let name = "orders";
    stack.apply(&workload(name)).await.unwrap();
    let (uid, pod) = within("the orders pod on its node", STATUS_DEADLINE, || async {
        let out = stack
            .kubectl(
                &[
                    "get", "pods", "-n", &stack.namespace, "-l", "app=orders", "-o",
                    "jsonpath={.items[0].metadata.uid} {.items[0].metadata.name} {.items[0].spec.nodeName}",
                ],
                None,
            )
            .await
            .unwrap_or_default();
        match out.split_whitespace().collect::<Vec<_>>()[..] {
            [uid, pod, on] if on == node => Ok((uid.to_owned(), pod.to_owned())),
            _ => Err(out),
        }
    })
    .await
    .unwrap();
    let ns = stack.namespace.clone();
    let agent = Arc::new(Agent::start(cp.client().unwrap(), &agents, &node));
    agent.set(Some(running(&uid, &pod, &ns, "Complete", &[8080, 9090])));
    stack.apply(&pacto(name, 30)).await.unwrap();

    // Found: `http` qualified (Ready and LISTENing on its targetPort 8080) and `admin` decided
    // (its port 9090 is not in the Service, yet LISTENing in the Ready pod): Compliant, which
    // Kubernetes evidence alone cannot give (`admin` would read EVIDENCE_INSUFFICIENT).
    let found = stack
        .wait_contract_status(name, "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(
        found["status"]["findings"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{found:#}"
    );
    // Complete evidence without a connection: an empty list.
    assert_eq!(
        found["status"]["observedRuntime"]["undeclaredPeers"],
        json!([]),
        "{found:#}"
    );

    // Undeclared peers (observations, never findings): the pod talks to the declared dependency's
    // Service `db` (not listed), the API server and loopback (never listed) and an address the
    // contract does not declare (listed). The verdict stays Compliant without a finding.
    let db = cluster_ip(&stack, &ns, "db").await;
    let api_server = cluster_ip(&stack, "default", "kubernetes").await;
    let mut peers = vec![
        (db.clone(), 5432),
        (api_server, 443),
        ("127.0.0.1".to_owned(), 9000),
        ("203.0.113.7".to_owned(), 443),
    ];
    agent.set(Some(connecting(
        running(&uid, &pod, &ns, "Complete", &[8080, 9090]),
        &peers,
    )));
    let listed = nudge_until(&stack, name, "the undeclared peer listed", |p| {
        p["status"]["observedRuntime"]["undeclaredPeers"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
    })
    .await;
    assert_eq!(
        listed["status"]["observedRuntime"]["undeclaredPeers"],
        json!([{"kind": "IP", "name": "203.0.113.7", "ports": [443]}]),
        "{listed:#}"
    );
    assert_eq!(
        listed["status"]["contractStatus"], "Compliant",
        "{listed:#}"
    );
    assert!(
        listed["status"]["findings"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{listed:#}"
    );
    let gauge = format!("{{name=\"{name}\",namespace=\"{ns}\"}}");
    wait_gauge(&stack, &gauge, Some(1)).await;

    // Bounded: 150 more addresses list 100 entries and an overflow marker; the total is kept,
    // in the status and the gauge; still Compliant, still no finding.
    peers.extend((1..=150).map(|i| (format!("198.51.100.{i}"), 443)));
    agent.set(Some(connecting(
        running(&uid, &pod, &ns, "Complete", &[8080, 9090]),
        &peers,
    )));
    let capped = nudge_until(&stack, name, "the capped peer list", |p| {
        p["status"]["observedRuntime"]["totalUndeclaredPeers"] == 151
    })
    .await;
    let list = capped["status"]["observedRuntime"]["undeclaredPeers"]
        .as_array()
        .unwrap();
    assert_eq!(list.len(), 101, "{capped:#}");
    assert_eq!(list[100]["kind"], "LIST_TRUNCATED");
    assert!(
        list[100]["name"]
            .as_str()
            .unwrap()
            .contains("51 more undeclared peers"),
        "{}",
        list[100]
    );
    assert!(
        !list
            .iter()
            .any(|p| p["name"] == db.as_str() || p["name"] == format!("{ns}/db")),
        "the declared dependency is not undeclared: {capped:#}"
    );
    assert_eq!(capped["status"]["contractStatus"], "Compliant");
    assert!(
        capped["status"]["findings"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{capped:#}"
    );
    wait_gauge(&stack, &gauge, Some(151)).await;

    // The agent stops: after stale-after both interfaces read EVIDENCE_STALE (Unknown, never a
    // violation), without a nudge (the observer asks to be called again when evidence turns stale).
    agent.set(None);
    let stale = stack
        .wait_pacto(
            name,
            "EVIDENCE_STALE for both interfaces",
            STATUS_DEADLINE,
            |p| {
                has(p, "interface/http", "EVIDENCE_STALE")
                    && has(p, "interface/admin", "EVIDENCE_STALE")
            },
        )
        .await
        .unwrap();
    assert_eq!(stale["status"]["contractStatus"], "Unknown");
    // Stale evidence says nothing about peers: no list, no gauge.
    assert!(
        stale["status"]["observedRuntime"]
            .get("undeclaredPeers")
            .is_none(),
        "{stale:#}"
    );
    wait_gauge(&stack, &gauge, None).await;
    let message = finding(&stale, "interface/http").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(&format!("node-agent evidence of node {node} is stale")),
        "{message}"
    );
    let detected =
        finding(&stale, "interface/http").unwrap()["evidenceRefs"][0]["detectedAt"].clone();
    let generation = stale["metadata"]["generation"].as_i64().unwrap();
    stack
        .wait_describe(name, &["EVIDENCE_STALE", "k8s-observer"], STATUS_DEADLINE)
        .await
        .unwrap();
    // metadata.generation moves on; the stale reading's detectedAt (when the node was last heard
    // from) does not.
    stack.apply(&pacto(name, 31)).await.unwrap();
    let moved = stack
        .wait_pacto(name, "the next generation observed", STATUS_DEADLINE, |p| {
            p["status"]["observedGeneration"].as_i64() > Some(generation)
                && has(p, "interface/http", "EVIDENCE_STALE")
        })
        .await
        .unwrap();
    assert_eq!(
        finding(&moved, "interface/http").unwrap()["evidenceRefs"][0]["detectedAt"],
        detected,
        "{moved:#}"
    );

    // The agent comes back: Compliant again.
    agent.set(Some(running(&uid, &pod, &ns, "Complete", &[8080, 9090])));
    nudge_until(&stack, name, "Compliant after the agent returned", |p| {
        p["status"]["contractStatus"] == "Compliant"
    })
    .await;

    // Collection Failed (no BTF): COLLECTION_FAILED with the agent's reason, not STALE.
    agent.set(Some(json!({
        "agentVersion": "e2e",
        "kernel": {"release": "6.8.0", "btf": false},
        "collection": {"state": "Failed", "reason": "BTFUnavailable",
                       "message": "/sys/kernel/btf/vmlinux: no such file"},
    })));
    let failed = nudge_until(&stack, name, "COLLECTION_FAILED", |p| {
        has(p, "interface/http", "COLLECTION_FAILED")
    })
    .await;
    let message = finding(&failed, "interface/http").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("BTFUnavailable"), "{message}");
    // The guide: "Check the RuntimeObserved condition and the operator logs" — the condition
    // names the node and the agent's reason.
    let observed = failed["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "RuntimeObserved")
        .cloned()
        .unwrap();
    assert_eq!(observed["status"], "False", "{observed:#}");
    let text = observed["message"].as_str().unwrap();
    assert!(
        text.contains(&node) && text.contains("BTFUnavailable"),
        "{observed:#}"
    );

    // A partial view of the pod: EVIDENCE_INSUFFICIENT with the partial reason.
    agent.set(Some(running(&uid, &pod, &ns, "Partial", &[8080, 9090])));
    let partial = nudge_until(&stack, name, "EVIDENCE_INSUFFICIENT", |p| {
        has(p, "interface/http", "EVIDENCE_INSUFFICIENT")
    })
    .await;
    let message = finding(&partial, "interface/http").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("ring buffer overflow"), "{message}");

    // The listener on 8080 closes while the endpoint stays Ready: Unknown inside the window, then
    // NonCompliant INTERFACE_ABSENT, decided by node evidence.
    agent.set(Some(running(&uid, &pod, &ns, "Complete", &[9090])));
    let absent = nudge_until(&stack, name, "INTERFACE_ABSENT", |p| {
        has(p, "interface/http", "INTERFACE_ABSENT")
    })
    .await;
    assert_eq!(
        absent["status"]["contractStatus"], "NonCompliant",
        "{absent:#}"
    );
    assert!(finding(&absent, "interface/admin").is_none(), "{absent:#}");
}
