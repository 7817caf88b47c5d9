//! The node agent's cluster side as the charts ship it (docs/design/node-agent.md#admission,
//! docs/design/node-agent.md#report-stream): the observer and status-writer binaries run as their
//! own processes over mTLS with the RBAC, ServiceAccounts and `--node-agent-*` flags that
//! `helm template` renders with `nodeAgent.enabled`, against a real API server. The agent's
//! tokens are real pod-bound tokens (TokenRequest for a Pod on a simulated node) for the audience
//! the agent chart's projected volume names. (The admission policy's own test, with the agent
//! chart's RBAC and policy, is `tests/charts/tests/cluster.rs`.)

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use pacto_e2e::{OBSERVER, RELEASE};
use pacto_proto::observer::node_agent_reports_client::NodeAgentReportsClient;
use pacto_proto::observer::{CollectionState, NodeReport};
use pacto_proto::prost_types::Timestamp;
use pacto_runtime::testing::{TestCa, within, write_tls_files};
use pacto_testenv::ControlPlane;
use pacto_testenv::process::ManagedProcess;
use serde_json::Value;
use tonic::Code;

const DEADLINE: Duration = Duration::from_secs(45);
const PRIVILEGED_LABELS: [&str; 3] = [
    "pod-security.kubernetes.io/enforce",
    "pod-security.kubernetes.io/audit",
    "pod-security.kubernetes.io/warn",
];

fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `helm template` of `chart` into `namespace` with `sets`, as documents.
fn render(chart: &str, namespace: &str, sets: &[String]) -> Result<Vec<Value>> {
    let tools = pacto_chart_tests::Tools::new()?;
    let mut args = vec![
        "template".to_owned(),
        RELEASE.to_owned(),
        repo().join("charts").join(chart).display().to_string(),
        format!("--namespace={namespace}"),
    ];
    args.extend(sets.iter().map(|s| format!("--set={s}")));
    let text = tools
        .run("helm", &args)
        .with_context(|| format!("rendering {chart}"))?;
    Ok(pacto_chart_tests::documents(&text)?)
}

fn of_kind<'a>(docs: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    docs.iter().filter(move |d| d["kind"] == kind)
}

/// Applies the RBAC (and admission) objects of rendered documents with the admin identity.
fn apply_rbac(cp: &ControlPlane, docs: &[Value], dir: &Path, name: &str) -> Result<()> {
    let kept: Vec<String> = docs
        .iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some(
                    "ServiceAccount"
                        | "Role"
                        | "RoleBinding"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                        | "ValidatingAdmissionPolicy"
                        | "ValidatingAdmissionPolicyBinding"
                )
            )
        })
        .map(serde_norway::to_string)
        .collect::<Result<_, _>>()?;
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, kept.join("---\n"))?;
    let output = cp
        .kubectl()?
        .args(["apply", "--server-side", "--field-manager=pacto-e2e", "-f"])
        .arg(&file)
        .output()?;
    ensure!(
        output.status.success(),
        "applying {name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The chart Deployment's container flags that start with `prefix`.
fn chart_flags(docs: &[Value], prefix: &str) -> Result<Vec<String>> {
    let deployment = of_kind(docs, "Deployment")
        .next()
        .context("no Deployment")?;
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .context("no container args")?;
    Ok(args
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with(prefix))
        .map(str::to_owned)
        .collect())
}

fn service_account(docs: &[Value]) -> Result<String> {
    of_kind(docs, "ServiceAccount")
        .next()
        .and_then(|d| d["metadata"]["name"].as_str())
        .map(str::to_owned)
        .context("no ServiceAccount")
}

fn free_addr() -> Result<SocketAddr> {
    Ok(pacto_testenv::ports::free_addr()?)
}

/// A token of `sa` for `audience`, bound to a new Pod on Node `node`.
async fn pod_bound_token(
    cp: &ControlPlane,
    ns: &str,
    sa: &str,
    node: &str,
    audience: &str,
) -> Result<String> {
    Ok(cp
        .service_account_token(ns, sa, Some(node), &[audience])
        .await?)
}

fn report(node: &str) -> NodeReport {
    NodeReport {
        node_name: node.to_owned(),
        agent_version: "e2e".into(),
        published_at: Some(Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        }),
        collection: Some(CollectionState {
            state: "Running".into(),
            ..CollectionState::default()
        }),
        ..NodeReport::default()
    }
}

/// One report on a new stream with `token`: the ack's node, or the refusal.
async fn send(
    channel: tonic::transport::Channel,
    token: &str,
    node: &str,
) -> Result<String, tonic::Status> {
    let mut request = tonic::Request::new(futures::stream::iter([report(node)]));
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}")
            .parse()
            .map_err(|_| tonic::Status::internal("token is not a header value"))?,
    );
    let mut acks = NodeAgentReportsClient::new(channel)
        .report(request)
        .await?
        .into_inner();
    match acks.message().await? {
        Some(ack) => Ok(ack.node_name),
        None => Err(tonic::Status::unknown("the stream ended without an ack")),
    }
}

fn labels_privileged(namespace: &Namespace) -> bool {
    PRIVILEGED_LABELS.iter().all(|key| {
        namespace
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(*key))
            .is_some_and(|v| v == "privileged")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_charts_confine_node_agent_reports_and_keep_its_namespace_privileged()
-> Result<()> {
    pacto_testenv::bins::require_kubernetes();
    let bins = tokio::task::spawn_blocking(pacto_e2e::binaries).await??;
    let cp = pacto_e2e::cluster().await?;
    let ns = cp.create_namespace("nc-operator").await?;
    let agents = cp.create_namespace("nc-agents").await?;
    let dir = tempfile::Builder::new().prefix("pacto-e2e-").tempdir()?;
    let admin = cp.client()?;

    // What ships: the three charts, the node agent on, in a namespace of this test.
    let sets = [
        format!("controller.watchNamespace={ns}"),
        "nodeAgent.enabled=true".to_owned(),
        format!("nodeAgent.namespace={agents}"),
    ];
    let observer_docs = render("pacto-observer", &ns, &sets)?;
    let writer_docs = render("pacto-status-writer", &ns, &sets)?;
    let agent_docs = render("pacto-node-agent", &agents, &[])?;
    apply_rbac(cp, &observer_docs, dir.path(), "observer")?;
    apply_rbac(cp, &writer_docs, dir.path(), "status-writer")?;
    apply_rbac(cp, &agent_docs, dir.path(), "node-agent")?;
    let agent_sa = service_account(&agent_docs)?;
    let daemonset = of_kind(&agent_docs, "DaemonSet")
        .next()
        .context("no DaemonSet")?;
    let audience = daemonset["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["projected"]["sources"].as_array().into_iter().flatten())
        .find_map(|s| s["serviceAccountToken"]["audience"].as_str())
        .context("the DaemonSet projects no token for the observer")?
        .to_owned();
    // The agent certificate's SANs as the chart requests them: its DNS name and its URI SAN
    // (which the observer chart's --node-agent-identities must name).
    let agent_certificate = of_kind(&agent_docs, "Certificate")
        .next()
        .context("no agent Certificate")?;
    let agent_identity: Vec<String> = ["dnsNames", "uris"]
        .iter()
        .flat_map(|field| {
            agent_certificate["spec"][field]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|name| name.as_str().map(str::to_owned))
        .collect();
    ensure!(
        agent_certificate["spec"]["uris"][0]
            .as_str()
            .is_some_and(|uri| uri.ends_with(&format!("/ns/{agents}/sa/{agent_sa}"))),
        "the agent Certificate carries no URI SAN of its ServiceAccount: {agent_certificate}"
    );

    // The two binaries, each with its chart ServiceAccount's token and the chart's flags.
    let ca = TestCa::new("node agent e2e CA")?;
    let tls = |name: &str, identity: &[&str]| -> Result<Vec<String>> {
        let files = write_tls_files(dir.path(), name, &ca.pem(), &ca.issue(identity)?)?;
        Ok(vec![
            format!("--tls-ca={}", files.ca.display()),
            format!("--tls-cert={}", files.cert.display()),
            format!("--tls-key={}", files.key.display()),
        ])
    };
    let start =
        |name: &str, kubeconfig_yaml: String, args: Vec<String>| -> Result<ManagedProcess> {
            let kubeconfig = dir.path().join(format!("{name}.kubeconfig"));
            std::fs::write(&kubeconfig, kubeconfig_yaml)?;
            let mut cmd = Command::new(bins.join(format!("pacto-{name}")));
            cmd.args(args).env("KUBECONFIG", &kubeconfig);
            Ok(ManagedProcess::spawn(
                name,
                cmd,
                &dir.path().join(format!("{name}.log")),
                &[],
            )?)
        };
    let grpc = free_addr()?;
    let mut observer_args = vec![
        format!("--listen-addr={grpc}"),
        format!("--admin-addr={}", free_addr()?),
        format!("--watch-namespace={ns}"),
        "--log-format=text".into(),
    ];
    observer_args.extend(tls("observer", &[OBSERVER])?);
    observer_args.extend(chart_flags(&observer_docs, "--node-agent-")?);
    let observer_sa = service_account(&observer_docs)?;
    let observer_kubeconfig = cp.service_account_kubeconfig(&ns, &observer_sa).await?;
    let _observer = start("observer", observer_kubeconfig, observer_args)?;

    let unused = free_addr()?;
    let mut writer_args = vec![
        format!("--resolver-addr={unused}"),
        format!("--observer-addr={unused}"),
        format!("--evaluator-addr={unused}"),
        format!("--admin-addr={}", free_addr()?),
        format!("--watch-namespace={ns}"),
        "--node-agent-resync-interval=1s".into(),
        "--log-format=text".into(),
    ];
    writer_args.extend(tls(
        "status-writer",
        &[pacto_e2e::STATUS_WRITER, pacto_e2e::STATUS_WRITER_ID],
    )?);
    let agent_flags = chart_flags(&writer_docs, "--node-agent-namespace")?;
    ensure!(
        agent_flags == [format!("--node-agent-namespace={agents}")],
        "{agent_flags:?}"
    );
    writer_args.extend(agent_flags);
    let writer_sa = service_account(&writer_docs)?;
    let writer_kubeconfig = cp.service_account_kubeconfig(&ns, &writer_sa).await?;
    let _writer = start("status-writer", writer_kubeconfig, writer_args)?;

    // The status-writer labels the agent namespace, and restores a label removed by hand.
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    within(
        "the agent namespace labelled privileged",
        DEADLINE,
        || async {
            let current = namespaces.get(&agents).await.map_err(|e| e.to_string())?;
            if labels_privileged(&current) {
                Ok(())
            } else {
                Err(format!("labels {:?}", current.metadata.labels))
            }
        },
    )
    .await?;
    namespaces
        .patch(
            &agents,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": {
                PRIVILEGED_LABELS[0]: null
            } } })),
        )
        .await?;
    within("the removed label back", DEADLINE, || async {
        let current = namespaces.get(&agents).await.map_err(|e| e.to_string())?;
        if labels_privileged(&current) {
            Ok(())
        } else {
            Err(format!("labels {:?}", current.metadata.labels))
        }
    })
    .await?;
    let writer_log = std::fs::read_to_string(dir.path().join("status-writer.log"))?;
    ensure!(
        writer_log
            .lines()
            .any(|l| l.contains("node-agent") && l.contains("privileged")),
        "no node-agent log line:\n{writer_log}"
    );

    // The observer: the agent on node A reports about A, not about B.
    let node_a = pacto_testenv::controlplane::unique_name("nc-node-a");
    let node_b = pacto_testenv::controlplane::unique_name("nc-node-b");
    let token_a = pod_bound_token(cp, &agents, &agent_sa, &node_a, &audience).await?;
    let agent_names: Vec<&str> = agent_identity.iter().map(String::as_str).collect();
    let agent = ca.channel(dir.path(), "agent", &agent_names, grpc, OBSERVER);
    let accepted = within(
        "the observer to acknowledge node A's report",
        DEADLINE,
        || {
            let agent = agent.clone();
            let token = token_a.clone();
            let node = node_a.clone();
            async move {
                send(agent, &token, &node)
                    .await
                    .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
            }
        },
    )
    .await?;
    ensure!(accepted == node_a, "{accepted}");
    let refused = send(agent.clone(), &token_a, &node_b)
        .await
        .expect_err("a report about node B from node A's agent");
    ensure!(refused.code() == Code::PermissionDenied, "{refused:?}");
    ensure!(
        refused.message().contains(&node_a) && refused.message().contains(&node_b),
        "{}",
        refused.message()
    );
    // The status-writer's certificate is not on the node-agent allow-list.
    let writer = ca.channel(
        dir.path(),
        "writer-client",
        &[pacto_e2e::STATUS_WRITER, pacto_e2e::STATUS_WRITER_ID],
        grpc,
        OBSERVER,
    );
    let refused = send(writer, &token_a, &node_a)
        .await
        .expect_err("a report over the status-writer's certificate");
    ensure!(refused.code() == Code::PermissionDenied, "{refused:?}");
    let observer_log = std::fs::read_to_string(dir.path().join("observer.log"))?;
    ensure!(
        observer_log.contains("node-agent"),
        "no node-agent log line:\n{observer_log}"
    );
    Ok(())
}
